//! Runs a whole [`Graph`] with the reference kernels by walking its [`Schedule`]: the
//! schedule's walker resolves operands and drops values after their last reader; this file
//! only runs one node. The schedules of control-flow subgraphs come with the graph's, in
//! one [`ScheduleTree`], and go to the node that runs them.

use crate::ops::run_op_scheduled;
use concord_core::{Deadline, Error, Graph, MemoryBudget, ProfileSink, ScheduleTree, Step, Tensor};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Instant;

/// Named output tensors of one run, in the graph's output order.
pub type RunOutputs = Vec<(String, Tensor)>;

/// The reference executor. Holds no state but its memory budget and its runs' deadline:
/// every run is independent, so one instance may be shared by any number of threads.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceExecutor {
    budget: MemoryBudget,
    deadline: Option<Deadline>,
}

impl ReferenceExecutor {
    /// A runner within the machine's default [`MemoryBudget`].
    pub fn new() -> Self {
        ReferenceExecutor::default()
    }

    /// A runner whose every node's outputs are checked against `budget` before its kernel
    /// runs.
    pub fn within(budget: MemoryBudget) -> Self {
        ReferenceExecutor {
            budget,
            deadline: None,
        }
    }

    /// This runner with a deadline (None: none): every node, subgraph nodes included, is
    /// checked against it before it runs, and long kernel loops check it as they go; past
    /// it is [`concord_core::OpError::TimeLimit`] naming the node.
    pub fn until(self, deadline: Option<Deadline>) -> Self {
        ReferenceExecutor { deadline, ..self }
    }

    /// Runs `graph` on `inputs`, which the caller has validated, in topological order.
    /// Intermediate values are dropped after their last reader.
    pub fn run(
        &self,
        graph: &Graph,
        inputs: &BTreeMap<String, Tensor>,
    ) -> Result<RunOutputs, Error> {
        self.run_profiled(graph, inputs, None)
    }

    /// [`ReferenceExecutor::run`], reporting each node's time to `profile` when given.
    pub fn run_profiled(
        &self,
        graph: &Graph,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<RunOutputs, Error> {
        let schedules = ScheduleTree::for_graph(graph)?;
        let outputs = self.run_scheduled(graph, &schedules, inputs, profile)?;
        Ok(graph.outputs.iter().cloned().zip(outputs).collect())
    }

    /// Runs `graph` by walking `schedules` (made from it by [`ScheduleTree::for_graph`],
    /// once per prepared partition), returning the outputs in the graph's output order.
    pub fn run_scheduled(
        &self,
        graph: &Graph,
        schedules: &ScheduleTree,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        schedules
            .schedule()
            .walk_host(inputs, &graph.initializers, |step, operands| {
                run_step(graph, schedules, step, operands, profile, self.limits())
            })
    }

    /// Runs `graph` by walking `schedules`, its runtime inputs bound by position and
    /// borrowed (the subgraph of an If, Loop or Scan, whose inputs are the outer node's
    /// operands); returns the outputs in the graph's output order.
    pub fn run_bound(
        &self,
        graph: &Graph,
        schedules: &ScheduleTree,
        inputs: &[&Tensor],
    ) -> Result<Vec<Tensor>, Error> {
        let outputs = schedules.schedule().walk(
            |k, name| match inputs.get(k) {
                Some(t) => Ok(Some(Cow::Borrowed(*t))),
                None => Err(Error::InvalidInput {
                    name: name.to_string(),
                    detail: format!("is input {k}, but only {} are bound", inputs.len()),
                }),
            },
            |name| graph.initializers.get(name).map(Cow::Borrowed),
            |step, operands: &[Option<&Cow<Tensor>>]| {
                let operands: Vec<Option<&Tensor>> =
                    operands.iter().map(|o| o.map(|t| t.as_ref())).collect();
                Ok(
                    run_step(graph, schedules, step, &operands, None, self.limits())?
                        .into_iter()
                        .map(Cow::Owned)
                        .collect(),
                )
            },
        )?;
        Ok(outputs.into_iter().map(Cow::into_owned).collect())
    }

    fn limits(&self) -> (MemoryBudget, Option<Deadline>) {
        (self.budget, self.deadline)
    }
}

/// Runs the node of one schedule step, handing a control-flow node its subgraphs'
/// schedules, once the deadline (if any) is checked.
fn run_step(
    graph: &Graph,
    schedules: &ScheduleTree,
    step: &Step,
    operands: &[Option<&Tensor>],
    profile: Option<&dyn ProfileSink>,
    (budget, deadline): (MemoryBudget, Option<Deadline>),
) -> Result<Vec<Tensor>, Error> {
    let node = graph.nodes.get(step.node).ok_or_else(|| {
        Error::InvalidGraph(format!(
            "the schedule names node {}, which the graph lacks",
            step.node
        ))
    })?;
    concord_core::deadline::check(deadline, || "the run, reaching this node,".to_string())
        .map_err(|e| Error::at_node(node, e))?;
    let started = profile.map(|_| Instant::now());
    let results = run_op_scheduled(
        &node.op,
        schedules.subgraphs(step.node),
        operands,
        node.outputs.len(),
        budget,
        deadline,
    )
    .map_err(|e| Error::at_node(node, e))?;
    if let (Some(sink), Some(started)) = (profile, started) {
        sink.record_on(&node.name, "cpu", started.elapsed());
    }
    Ok(results)
}
