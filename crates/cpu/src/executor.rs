//! The reference executor as an [`Executor`]: always available, one target ([`CPU`], f32
//! storage), every op supported, partitions run by [`ReferenceExecutor`].

use crate::runner::ReferenceExecutor;
use concord_core::Deadline;
use concord_core::{
    Availability, DType, DeviceInfo, Error, Executor, Graph, MemoryBudget, Node, PreparedPartition,
    ProfileSink, ScheduleTree, Support, Target, TargetSpec, Tensor,
};
use std::collections::BTreeMap;

/// The reference executor's only target: host memory, f32 storage. The planner places
/// every node that falls back here.
pub const CPU: Target = Target::new("cpu");

/// The executor a net falls back to, and the oracle the conformance suite compares with.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuExecutor;

/// A partition prepared for the reference executor: the sub-graph, its schedule, and the
/// schedules of its control-flow subgraphs at any depth, all made once here and shared by
/// every run (they are plain data, so concurrent `&self` runs read them freely).
#[derive(Debug)]
pub struct CpuPartition {
    graph: Graph,
    schedules: ScheduleTree,
    budget: MemoryBudget,
}

impl CpuPartition {
    /// Prepares `partition`: schedules it and every subgraph nested in it; its runs use
    /// the machine's default [`MemoryBudget`].
    pub fn new(partition: &Graph) -> Result<Self, Error> {
        CpuPartition::within(partition, MemoryBudget::default())
    }

    /// [`CpuPartition::new`] whose runs check every node's outputs against `budget`.
    pub fn within(partition: &Graph, budget: MemoryBudget) -> Result<Self, Error> {
        Ok(CpuPartition {
            schedules: ScheduleTree::for_graph(partition)?,
            graph: partition.clone(),
            budget,
        })
    }

    /// The schedules every run walks.
    pub fn schedules(&self) -> &ScheduleTree {
        &self.schedules
    }
}

impl CpuExecutor {
    pub fn new() -> Self {
        CpuExecutor
    }
}

impl Executor for CpuExecutor {
    fn name(&self) -> &str {
        "cpu"
    }

    fn probe(&self) -> Availability {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut details = BTreeMap::new();
        details.insert("arch".to_string(), std::env::consts::ARCH.to_string());
        details.insert("threads".to_string(), threads.to_string());
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "host".to_string(),
                vendor: String::new(),
                driver_version: env!("CARGO_PKG_VERSION").to_string(),
                compute_capability: None,
                fp16: false,
                details,
            }],
        }
    }

    fn targets(&self) -> Vec<TargetSpec> {
        // The kernels compute every dtype as stored and accumulate in f64 (exactly for
        // integers); the f32 declared here is the floor the tolerance model assumes.
        vec![TargetSpec::new(CPU, DType::F32, DType::F32)]
    }

    fn supports(&self, _graph: &Graph, _node: &Node, target: &Target) -> Support {
        // Every op of the IR, with every attribute value it represents, has a reference
        // kernel; the reference runs on the host only.
        if *target != CPU {
            return Support::No(format!(
                "the reference executor runs on the host only, not {target}"
            ));
        }
        Support::Yes
    }

    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        Ok(Box::new(CpuPartition::new(partition)?))
    }

    fn prepare_within(
        &self,
        partition: &Graph,
        _target: &Target,
        budget: MemoryBudget,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        Ok(Box::new(CpuPartition::within(partition, budget)?))
    }
}

impl PreparedPartition for CpuPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        self.run_until(inputs, profile, None)
    }

    fn run_until(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
        deadline: Option<Deadline>,
    ) -> Result<Vec<Tensor>, Error> {
        ReferenceExecutor::within(self.budget)
            .until(deadline)
            .run_scheduled(&self.graph, &self.schedules, inputs, profile)
    }
}
