//! Runs a whole [`Graph`] with the reference kernels, node by node in topological order.

use crate::ops::run_op;
use concord_core::{Error, Graph, ProfileSink, Tensor};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Named output tensors of one run, in the graph's output order.
pub type RunOutputs = Vec<(String, Tensor)>;

/// The reference executor. Holds no state: every run is independent, so one instance may
/// be shared by any number of threads.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceExecutor;

impl ReferenceExecutor {
    pub fn new() -> Self {
        ReferenceExecutor
    }

    /// Runs `graph` (nodes already in topological order, as `Graph::infer_shapes` and
    /// `Graph::fold_constants` leave them) on `inputs`, which the caller has validated.
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
        let mut last_use: HashMap<&str, usize> = HashMap::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            for name in node.present_inputs() {
                last_use.insert(name, i);
            }
        }
        let keep: std::collections::HashSet<&str> =
            graph.outputs.iter().map(|s| s.as_str()).collect();

        let mut computed: HashMap<String, Tensor> = HashMap::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            let mut operands: Vec<Option<&Tensor>> = Vec::with_capacity(node.inputs.len());
            for input in &node.inputs {
                match input {
                    None => operands.push(None),
                    Some(name) => {
                        let t = computed
                            .get(name)
                            .or_else(|| inputs.get(name))
                            .or_else(|| graph.initializers.get(name))
                            .ok_or_else(|| Error::DanglingInput {
                                node: node.name.clone(),
                                op: node.op.name(),
                                value: name.clone(),
                            })?;
                        operands.push(Some(t));
                    }
                }
            }
            let started = profile.map(|_| Instant::now());
            let results = run_op(&node.op, &operands, node.outputs.len())
                .map_err(|e| Error::at_node(node, e))?;
            if let (Some(sink), Some(started)) = (profile, started) {
                sink.record_on(&node.name, "cpu", started.elapsed());
            }
            drop(operands);
            for name in node.present_inputs() {
                if last_use.get(name) == Some(&i) && !keep.contains(name) {
                    computed.remove(name);
                }
            }
            for (name, t) in node.outputs.iter().zip(results) {
                computed.insert(name.clone(), t);
            }
        }

        let mut outputs = Vec::with_capacity(graph.outputs.len());
        for name in &graph.outputs {
            let t = computed
                .remove(name)
                .or_else(|| inputs.get(name).cloned())
                .or_else(|| graph.initializers.get(name).cloned())
                .ok_or_else(|| Error::DanglingOutput {
                    value: name.clone(),
                })?;
            outputs.push((name.clone(), t));
        }
        Ok(outputs)
    }
}
