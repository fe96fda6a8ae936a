//! The executor contract: what a backend author implements. An executor answers four
//! questions (name, probe, targets, supports) and does one thing (prepare). It never
//! decides fallback: the planner in the facade does, for every executor alike.

use crate::error::Error;
use crate::graph::{Graph, Node};
use crate::placement::FallbackCause;
use crate::tensor::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The backend families a caller can ask for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum Backend {
    Cpu,
    OpenCl,
    Cuda,
    /// A backend author's executor, by its `name()`.
    Custom(String),
}

/// Where and in what precision a partition runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Target {
    /// Host memory, f32 compute (the reference executor's only target).
    #[serde(rename = "cpu")]
    Cpu,
    /// OpenCL device, f32 storage and compute.
    #[serde(rename = "opencl")]
    OpenCl,
    /// OpenCL device, f16 storage, f32 accumulation; needs `cl_khr_fp16`.
    #[serde(rename = "opencl-fp16")]
    OpenClFp16,
    /// CUDA device, f32.
    #[serde(rename = "cuda")]
    Cuda,
    /// CUDA device, f16 storage, f32 accumulation; needs compute capability ≥ 5.3.
    #[serde(rename = "cuda-fp16")]
    CudaFp16,
}

/// What a probe found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Availability {
    Available {
        devices: Vec<DeviceInfo>,
    },
    /// `cause` is [`FallbackCause::LibraryMissing`] or [`FallbackCause::NoDevice`]; the
    /// reason says what was looked for and where.
    Unavailable {
        cause: FallbackCause,
        reason: String,
    },
}

/// One device an executor can run on, as its probe describes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    pub vendor: String,
    /// Driver or runtime version, as the library reports it.
    pub driver_version: String,
    /// CUDA compute capability ("8.0"), where it applies.
    pub compute_capability: Option<String>,
    /// Whether the device can run the half-precision targets.
    pub fp16: bool,
    /// Anything else worth printing in `concord info` (platform, extensions, memory…).
    pub details: BTreeMap<String, String>,
}

/// An executor's answer to "can you run this node on this target?".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Support {
    Yes,
    No(String),
}

/// Time spent in one node (or one transfer) during a run, reported to a profile.
pub trait ProfileSink: Sync {
    /// Time spent running one node; `node` is the node's name in the partition's graph.
    fn record(&self, node: &str, elapsed: Duration);

    /// Time spent running one node, saying which executor actually ran it. The reference
    /// executor always attributes its work, so a backend that quietly hands a node it
    /// claimed to the CPU path shows up in the profile (and in the suite's
    /// `fallback/placement_honesty` case). Executors should prefer this over `record`.
    fn record_on(&self, node: &str, executor: &str, elapsed: Duration) {
        let _ = executor;
        self.record(node, elapsed);
    }

    /// Time spent moving one value between host and device memory.
    fn record_transfer(&self, value: &str, bytes: u64, elapsed: Duration);
}

/// A partition an executor has prepared: compiled kernels, uploaded weights, whatever it
/// needs. `run(&self, …)` may be called from many threads at once.
pub trait PreparedPartition: Send + Sync + fmt::Debug {
    /// Runs the partition on host tensors named as the partition graph's inputs, returning
    /// its outputs in the partition graph's output order. `profile`, when given, receives
    /// per-node times; an executor that cannot time single nodes reports the whole
    /// partition under its own name.
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error>;
}

/// What a backend implements. See docs/backend-authors.md.
pub trait Executor: Send + Sync + fmt::Debug {
    /// A short lower-case name: "cpu", "opencl", "cuda", or the author's.
    fn name(&self) -> &str;

    /// The backend this executor implements (`Backend::Custom(name)` for third parties).
    fn backend(&self) -> Backend;

    /// Looks for the library and devices. Must never panic or abort, whatever is missing.
    fn probe(&self) -> Availability;

    /// The targets this executor can compile for (given an available device).
    fn targets(&self) -> Vec<Target>;

    /// Whether this node can run on `target`. `graph` gives the node's context (value
    /// types, constant operands).
    fn supports(&self, graph: &Graph, node: &Node, target: Target) -> Support;

    /// Whether the same input through the same prepared partition always gives the same
    /// bits, whatever the thread count and interleaving. An executor whose sums depend on
    /// scheduling (atomics, a split chosen at run time) says false: the conformance suite
    /// then holds it to its tolerance instead of bit-identity, and the report says so.
    fn deterministic(&self) -> bool {
        true
    }

    /// Prepares a partition (a sub-graph whose inputs are the values crossing into it).
    fn prepare(
        &self,
        partition: &Graph,
        target: Target,
    ) -> Result<Box<dyn PreparedPartition>, Error>;
}

impl Backend {
    /// The lower-case name used in `CONCORD_REQUIRE`, the CLI and reports.
    pub fn name(&self) -> &str {
        match self {
            Backend::Cpu => "cpu",
            Backend::OpenCl => "opencl",
            Backend::Cuda => "cuda",
            Backend::Custom(name) => name,
        }
    }

    /// The backend's default target.
    pub fn default_target(&self) -> Option<Target> {
        match self {
            Backend::Cpu => Some(Target::Cpu),
            Backend::OpenCl => Some(Target::OpenCl),
            Backend::Cuda => Some(Target::Cuda),
            Backend::Custom(_) => None,
        }
    }

    /// The validity table: which targets a built-in backend can serve. A custom backend
    /// declares its own through `Executor::targets`.
    pub fn valid_targets(&self) -> &'static [Target] {
        match self {
            Backend::Cpu => &[Target::Cpu],
            Backend::OpenCl => &[Target::OpenCl, Target::OpenClFp16],
            Backend::Cuda => &[Target::Cuda, Target::CudaFp16],
            Backend::Custom(_) => &[
                Target::Cpu,
                Target::OpenCl,
                Target::OpenClFp16,
                Target::Cuda,
                Target::CudaFp16,
            ],
        }
    }

    /// Parses "cpu", "opencl", "cuda"; anything else is a custom backend name.
    pub fn parse(s: &str) -> Backend {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Backend::Cpu,
            "opencl" | "ocl" => Backend::OpenCl,
            "cuda" => Backend::Cuda,
            _ => Backend::Custom(s.to_string()),
        }
    }
}

impl Target {
    pub const ALL: [Target; 5] = [
        Target::Cpu,
        Target::OpenCl,
        Target::OpenClFp16,
        Target::Cuda,
        Target::CudaFp16,
    ];

    /// The lower-case name used in `CONCORD_REQUIRE`, the CLI and reports.
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::OpenCl => "opencl",
            Target::OpenClFp16 => "opencl-fp16",
            Target::Cuda => "cuda",
            Target::CudaFp16 => "cuda-fp16",
        }
    }

    pub fn parse(s: &str) -> Option<Target> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s.to_ascii_lowercase())
    }

    /// Whether the target stores tensors in f16 (and so needs an fp16-capable device).
    pub fn is_fp16(self) -> bool {
        matches!(self, Target::OpenClFp16 | Target::CudaFp16)
    }

    /// The f32 target of the same device family.
    pub fn without_fp16(self) -> Target {
        match self {
            Target::OpenClFp16 => Target::OpenCl,
            Target::CudaFp16 => Target::Cuda,
            t => t,
        }
    }

    /// The unit roundoff of the target's storage type, for the tolerance model.
    pub fn unit_roundoff(self) -> f64 {
        if self.is_fp16() {
            crate::DType::F16.unit_roundoff()
        } else {
            crate::DType::F32.unit_roundoff()
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Backend> for String {
    fn from(b: Backend) -> String {
        b.name().to_string()
    }
}

impl From<String> for Backend {
    fn from(s: String) -> Backend {
        Backend::parse(&s)
    }
}
