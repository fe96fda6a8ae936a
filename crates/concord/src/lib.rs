//! concord: the facade users call.
//!
//! Load a model into a [`Net`] (from an ONNX file, ONNX bytes or a core [`Graph`]) and call
//! [`Net::forward`] from any number of threads.
//!
//! Invariants:
//! - Everything that can be decided when the net is built is decided in
//!   [`NetBuilder::build`]: validation, shape inference, constant folding, placement.
//!   `forward` only checks the caller's inputs against the declared (possibly symbolic)
//!   shapes and runs; a net with symbolic input dims is built once and serves every shape,
//!   its unfoldable shape sub-graphs computed per forward on the reference executor.
//! - [`Net`] is `Send + Sync` and holds no interior mutability that a forward writes, so
//!   concurrent forwards cannot observe one another.
//! - Every failure is a typed [`Error`] naming the input, node, op or file involved.
//! - Targets and backends are open names: the executors declare theirs, [`targets`] and
//!   [`backends`] name the built-ins (compiled in or not), the registry knows the rest.
//!   Whether a target can run is decided by [`resolve_target`] alone; `CONCORD_REQUIRE` is
//!   read by [`parse_require`] alone, against the net's registry, when the net is built.
//! - The API boundary is marked: the top level is what a deploying engineer uses;
//!   [`executor`], [`op`] and [`semantics`] are what a backend author implements against
//!   (the conformance suite's toy executor uses nothing else); [`internals`] re-exports
//!   Concord's own crates for tools inside this workspace and is not an API boundary.

pub mod backends;
mod error;
pub mod info;
mod net;
pub mod npy;
mod planner;
mod profile;
mod registry;
pub mod targets;

pub use error::Error;
pub use net::{Net, NetBuilder, Outputs, Pending};
pub use planner::{parse_policy, Overrides};
pub use profile::{Profile, ProfileEntry};
pub use registry::{
    canonical_backend, did_you_mean, parse_require, parse_require_from, BuiltinBackend,
    ExecutorRegistry, Requirement, BUILTIN_BACKENDS,
};

// The API boundary. What a deploying engineer uses is above and here; what a backend author
// implements against is `executor` (and its re-exports here), `op` and `semantics`. The rest
// of Concord's crates is behind `internals`, which is not an API boundary.
pub use concord_core::{
    resolve_target, Availability, Backend, Capability, DType, DeviceInfo, Dim, Executor,
    FallbackCause, FallbackPolicy, Graph, MemoryBudget, Node, Note, Notice, Op, Placement,
    PreparedPartition, ProfileSink, Schedule, Shape, Support, Target, TargetFallback,
    TargetResolution, TargetSpec, Tensor, TensorData, ValueInfo,
};
pub use concord_cpu::CpuExecutor;

/// The executor contract a backend author implements, and everything a partition arrives
/// in: the graph IR ([`Graph`](executor::Graph), [`Node`](executor::Node),
/// [`Op`](executor::Op)), the error types a run returns, the [`Schedule`](executor::Schedule)
/// that walks a partition, and the declared-target types.
pub mod executor {
    pub use concord_core::placement::FallbackCause;
    pub use concord_core::{
        resolve_target, Availability, Capability, DType, Deadline, DeviceInfo, Dim, Error,
        Executor, Graph, MemoryBudget, Node, Op, OpError, PreparedPartition, ProfileSink, Schedule,
        Shape, Step, StepValues, Support, Target, TargetSpec, Tensor, TensorData, ValueInfo,
    };
}

/// Each op's attributes (Conv, Gemm, Pool, Unary, Binary, …) and the op table they are
/// defined in ([`op::schemas`], [`op::UNARY_OPS`], [`op::kernel_codes`]).
pub mod op {
    pub use concord_core::op::*;
}

/// ONNX rules every executor must apply the same way: broadcasting, Shape's range, Resize
/// coordinates and taps.
pub mod semantics {
    pub use concord_core::resize::resize_taps;
    pub use concord_core::shape::{broadcast_index, broadcast_shapes, normalize_axis};
    pub use concord_core::shape_range;
}

/// Keeping text people read short: names elided in the middle, lists cut with a count,
/// messages on one line (what the CLI applies to every error it prints).
pub mod text {
    pub use concord_core::text::{elide_middle, list, one_line, LIST_ITEMS};
}

/// Concord's own crates whole: the ONNX reader and writer, shape inference, constant
/// folding, storage layouts. For tools inside this workspace (the CLI, benches); **not an
/// API boundary** — anything here may change without notice.
pub mod internals {
    pub use concord_core as core;
    pub use concord_onnx as onnx;
}
