//! The executor contract: what a backend author implements. An executor answers four
//! questions (name, probe, targets, supports) and does one thing (prepare). It never
//! decides fallback: the planner in the facade does, for every executor alike.

use crate::deadline::Deadline;
use crate::error::Error;
use crate::graph::{Graph, Node};
use crate::memory::MemoryBudget;
use crate::placement::FallbackCause;
use crate::target::{Capability, Target, TargetSpec};
use crate::tensor::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

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
    /// Whether the device can run the half-precision targets: it stores f16, natively or
    /// by converting to f32 for arithmetic (an executor's [`Executor::notes`] says which,
    /// when it matters).
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
    /// `fallback/placement_honesty` case, which also fails a node placed on an executor
    /// that the profile does not attribute to it: a node timed with `record` alone is
    /// unattributed). Executors should prefer this over `record`.
    fn record_on(&self, node: &str, executor: &str, elapsed: Duration) {
        let _ = executor;
        self.record(node, elapsed);
    }

    /// A node that ran inside another one (an activation fused into the Conv before it):
    /// it has no time of its own, which the profile shows as "fused into `into`" rather
    /// than as a zero time. Attributed to `executor` as [`ProfileSink::record_on`] does.
    fn record_fused(&self, node: &str, into: &str, executor: &str) {
        let _ = into;
        self.record_on(node, executor, Duration::ZERO);
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

    /// [`PreparedPartition::run`] for a forward with a time limit: a partition that can
    /// stop part-way should check `deadline` between nodes and in long kernel loops, and
    /// return [`crate::OpError::TimeLimit`] naming the node past it. The net calls this
    /// one; the default ignores the deadline (the net still checks it between partitions).
    fn run_until(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
        deadline: Option<Deadline>,
    ) -> Result<Vec<Tensor>, Error> {
        let _ = deadline;
        self.run(inputs, profile)
    }
}

/// What a backend implements. See docs/backend-authors.md.
pub trait Executor: Send + Sync + fmt::Debug {
    /// A short lower-case name: "cpu", "opencl", "cuda", or the author's. It is also the
    /// name of the backend it serves ([`crate::Backend`]): callers ask for it by this name.
    fn name(&self) -> &str;

    /// Looks for the library and devices. Must never panic or abort, whatever is missing.
    fn probe(&self) -> Availability;

    /// The long form of an unavailable probe's reason, one item per line (every file name a
    /// library loader tried, every platform looked at), for `concord info` and its JSON. The
    /// reason in [`Availability::Unavailable`] is repeated in warnings, errors and reports,
    /// so it stays one line; what does not fit there goes here. Default: nothing more.
    fn probe_details(&self) -> Vec<String> {
        Vec::new()
    }

    /// The targets this executor can compile for, as data: name, precision, the device
    /// capability each needs and what to run instead without it. The first is the default.
    /// Whether one can run here is decided by [`crate::resolve_target`], never by the
    /// executor itself.
    fn targets(&self) -> Vec<TargetSpec>;

    /// What a build on `target` here should say that is not a fallback: the target runs as
    /// asked, but with a cost the caller would not guess (a half-precision target on a
    /// device that stores f16 but computes in f32). The planner records each in
    /// [`crate::Placement::notes`] and says them at build time (not under
    /// [`crate::FallbackPolicy::Allow`]); they never refuse a build. Default: none.
    fn notes(&self, target: &Target) -> Vec<String> {
        let _ = target;
        Vec::new()
    }

    /// Whether this node can run on `target`. `graph` gives the node's context (value
    /// types, constant operands).
    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support;

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
        target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error>;

    /// [`Executor::prepare`] for a net built with a memory budget: every allocation sized
    /// by the partition or its inputs (prepared weights, device buffers, kernel outputs)
    /// should be checked against `budget` before it is made, and refused with
    /// [`crate::OpError::MemoryBudget`] naming the node. The planner calls this one; the
    /// default ignores the budget and calls `prepare`, so an executor that does not
    /// override it is held to nothing.
    fn prepare_within(
        &self,
        partition: &Graph,
        target: &Target,
        budget: MemoryBudget,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        let _ = budget;
        self.prepare(partition, target)
    }
}

impl DeviceInfo {
    /// Whether this device has `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        match capability {
            Capability::None => true,
            Capability::Fp16 => self.fp16,
        }
    }
}
