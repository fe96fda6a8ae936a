//! concord: the facade users call.
//!
//! Load a model into a [`Net`] (from an ONNX file, ONNX bytes or a core [`Graph`]) and call
//! [`Net::forward`] from any number of threads.
//!
//! Invariants:
//! - Everything that can be decided when the net is built is decided in
//!   [`NetBuilder::build`]: validation, shape inference, constant folding. `forward` only
//!   checks the caller's inputs and runs.
//! - [`Net`] is `Send + Sync` and holds no interior mutability that a forward writes, so
//!   concurrent forwards cannot observe one another.
//! - Every failure is a typed [`Error`] naming the input, node, op or file involved.
//! - Targets and backends are open names: the executors declare theirs, [`targets`] and
//!   [`backends`] name the built-ins (compiled in or not), the registry knows the rest.
//!   Whether a target can run is decided by [`resolve_target`] alone; `CONCORD_REQUIRE` is
//!   read by [`parse_require`] alone, against the net's registry, when the net is built.

pub mod backends;
mod error;
pub mod info;
mod net;
mod planner;
mod profile;
mod registry;
pub mod targets;

pub use error::Error;
pub use net::{Net, NetBuilder, Outputs, Pending};
pub use planner::{parse_policy, Overrides};
pub use profile::{Profile, ProfileEntry};
pub use registry::{
    canonical_backend, parse_require, BuiltinBackend, ExecutorRegistry, Requirement,
    BUILTIN_BACKENDS,
};

pub use concord_core as core;
pub use concord_core::{
    resolve_target, Availability, Backend, Capability, DType, DeviceInfo, Dim, Executor,
    FallbackCause, FallbackPolicy, Graph, Notice, Placement, PreparedPartition, ProfileSink, Shape,
    Support, Target, TargetFallback, TargetResolution, TargetSpec, Tensor, ValueInfo,
};
pub use concord_cpu::CpuExecutor;
pub use concord_onnx as onnx;
