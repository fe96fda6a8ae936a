//! concord-core: the vocabulary every other Concord crate speaks.
//!
//! It holds [`Tensor`] (every dense ONNX numeric type and bool), [`Shape`], [`DType`], the graph IR
//! ([`Graph`], [`Node`], [`Op`] with typed attributes), graph validation, shape inference
//! and constant folding of shape sub-graphs, the executor contract, and targets as open
//! names that executors declare ([`TargetSpec`]), with the one function that decides
//! whether a target can run on what a probe found ([`resolve_target`]); the [`Schedule`]
//! every executor walks to run a partition; and the ONNX rules executors share
//! (broadcasting, [`shape_range`], Resize taps).
//!
//! Invariants:
//! - core knows no backend, no target and no file format: [`Target`] and [`Backend`] are
//!   open names; the executor crates declare theirs, the facade's registry lists the
//!   built-ins. ONNX lives in concord-onnx, kernels in the executor crates. Constant
//!   folding evaluates nodes through an [`fold::Evaluator`] the caller supplies (the facade
//!   passes the reference executor).
//! - An [`Op`] carries only typed attributes; operands, optional or not, are node inputs.
//! - Executors run partitions by walking a [`Schedule`] and supply kernels only: run order,
//!   value slots, dangling-value errors and frees are decided here, once.
//! - Nothing here panics on bad input: every check returns [`Error`] or [`OpError`].
//! - Every allocation sized by a model or an input is checked, with checked arithmetic,
//!   against a [`MemoryBudget`] before it is made; executors receive the net's budget in
//!   [`Executor::prepare_within`], and one over it is [`OpError::MemoryBudget`].
//! - A run may carry a [`Deadline`] (a net's time limit): partitions receive it in
//!   [`PreparedPartition::run_until`], and one past it is [`OpError::TimeLimit`].

pub mod deadline;
pub mod dtype;
pub mod einsum;
pub mod error;
pub mod executor;
pub mod fold;
pub mod graph;
pub mod infer;
pub mod memory;
pub mod op;
pub mod placement;
pub mod resize;
pub mod schedule;
pub mod shape;
pub mod storage;
pub mod target;
pub mod tensor;
pub mod text;

pub use deadline::Deadline;
pub use dtype::DType;
pub use error::{Error, OpError, Result};
pub use executor::{Availability, DeviceInfo, Executor, PreparedPartition, ProfileSink, Support};
pub use graph::{Graph, Node, ValueInfo};
pub use memory::MemoryBudget;
pub use op::Op;
pub use placement::{FallbackCause, FallbackPolicy, Note, Notice, Placement};
pub use schedule::{Schedule, ScheduleTree, Step, StepValues};
pub use shape::{broadcast_shapes, shape_range, Dim, Shape, SymShape};
pub use target::{
    resolve_target, Backend, Capability, Target, TargetFallback, TargetResolution, TargetSpec,
};
pub use tensor::{Element, Scalar, Tensor, TensorData};
