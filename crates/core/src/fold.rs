//! Shape inference over a whole graph, and constant folding of the sub-graphs whose inputs
//! are all known when the net is built.
//!
//! Folding is what turns a PyTorch export's `Shape → Gather → Concat → Reshape` chain (and
//! Slice bounds computed from `Shape`) into fixed initializers, so that no int64 shape
//! arithmetic is left at run time and every downstream shape becomes static. Core has no
//! kernels: nodes are evaluated through an [`Evaluator`] the caller supplies.

use crate::error::{Error, OpError, Result};
use crate::graph::{Graph, ValueInfo};
use crate::infer::{infer_op, ValueFact};
use crate::op::Op;
use crate::shape::Shape;
use crate::tensor::Tensor;
use std::collections::HashSet;

/// Evaluates one op on concrete inputs (the facade passes the reference executor).
pub trait Evaluator {
    fn evaluate(
        &self,
        op: &Op,
        inputs: &[Option<&Tensor>],
        num_outputs: usize,
    ) -> std::result::Result<Vec<Tensor>, OpError>;
}

/// Largest output, in elements, that folding will materialise. Shape arithmetic is tiny;
/// this keeps folding from duplicating weights (a Transpose of a 100 MB initializer is
/// left to run time rather than doubling the model in memory at build).
pub const MAX_FOLDED_ELEMENTS: usize = 1 << 16;

/// What a folding pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoldSummary {
    /// Nodes replaced by initializers.
    pub folded_nodes: usize,
    /// Initializers dropped because nothing reads them any more.
    pub pruned_initializers: usize,
}

impl Graph {
    /// Validates the graph, orders its nodes and infers the type of every value, without
    /// changing any node.
    pub fn infer_shapes(&mut self) -> Result<()> {
        self.validate()?;
        self.sort_nodes()?;
        infer_and_fold(self, None).map(|_| ())
    }

    /// Validates, orders, infers and folds every node whose inputs are all constants (and
    /// `Shape` of a value whose shape is fully known). Unused initializers are pruned.
    pub fn fold_constants(&mut self, evaluator: &dyn Evaluator) -> Result<FoldSummary> {
        self.validate()?;
        self.sort_nodes()?;
        let mut summary = infer_and_fold(self, Some(evaluator))?;
        summary.pruned_initializers = prune_initializers(self);
        Ok(summary)
    }
}

fn infer_and_fold(graph: &mut Graph, evaluator: Option<&dyn Evaluator>) -> Result<FoldSummary> {
    graph.values.clear();
    for input in &graph.inputs {
        graph.values.insert(input.name.clone(), input.clone());
    }
    let runtime_inputs: HashSet<String> = graph.inputs.iter().map(|i| i.name.clone()).collect();
    for (name, t) in &graph.initializers {
        if !runtime_inputs.contains(name) {
            graph.values.insert(
                name.clone(),
                ValueInfo::new(name.clone(), t.dtype(), t.shape().to_sym()),
            );
        }
    }
    let graph_outputs: HashSet<String> = graph.outputs.iter().cloned().collect();
    let mut summary = FoldSummary::default();
    let nodes = std::mem::take(&mut graph.nodes);
    let mut kept = Vec::with_capacity(nodes.len());
    // Values of Constant nodes, known even when nothing is folded: shape inference needs
    // them (an exporter's Unsqueeze axes and Reshape shapes are often Constant nodes).
    let mut constant_nodes: std::collections::HashMap<String, Tensor> = Default::default();
    for node in nodes {
        let constant = |name: &str| {
            if runtime_inputs.contains(name) {
                None
            } else {
                graph
                    .initializers
                    .get(name)
                    .or_else(|| constant_nodes.get(name))
            }
        };
        let mut facts = Vec::with_capacity(node.inputs.len());
        for input in &node.inputs {
            match input {
                None => facts.push(None),
                Some(name) => {
                    let info = graph.values.get(name).ok_or_else(|| Error::DanglingInput {
                        node: node.name.clone(),
                        op: node.op.name(),
                        value: name.clone(),
                    })?;
                    facts.push(Some(ValueFact {
                        dtype: info.dtype,
                        shape: &info.shape,
                        value: constant(name),
                    }));
                }
            }
        }
        let out_facts =
            infer_op(&node.op, &facts, node.outputs.len()).map_err(|e| Error::at_node(&node, e))?;

        let folded = match evaluator {
            None => None,
            Some(evaluator) => try_fold(
                &node.op,
                &node.inputs,
                &facts,
                node.outputs.len(),
                evaluator,
            )
            .map_err(|e| Error::at_node(&node, e))?,
        };
        // A graph output stays produced by its node so that the output keeps its name's
        // producer; folding it would still be correct, but the placement report reads better.
        let folded = folded.filter(|_| !node.outputs.iter().any(|o| graph_outputs.contains(o)));

        if let (Op::Constant { value }, Some(name)) = (&node.op, node.outputs.first()) {
            constant_nodes.insert(name.clone(), value.clone());
        }
        for (name, fact) in node.outputs.iter().zip(&out_facts) {
            graph.values.insert(
                name.clone(),
                ValueInfo::new(name.clone(), fact.dtype, fact.shape.clone()),
            );
        }
        match folded {
            Some(tensors) => {
                for (name, t) in node.outputs.iter().zip(tensors) {
                    graph.values.insert(
                        name.clone(),
                        ValueInfo::new(name.clone(), t.dtype(), t.shape().to_sym()),
                    );
                    graph.initializers.insert(name.clone(), t);
                }
                summary.folded_nodes += 1;
            }
            None => kept.push(node),
        }
    }
    graph.nodes = kept;
    Ok(summary)
}

/// Folds one node if all its inputs are known, returning its output tensors.
fn try_fold(
    op: &Op,
    input_names: &[Option<String>],
    facts: &[Option<ValueFact>],
    num_outputs: usize,
    evaluator: &dyn Evaluator,
) -> std::result::Result<Option<Vec<Tensor>>, OpError> {
    // Shape needs only its input's shape, not its value.
    if let Op::Shape { start, end } = op {
        if let Some(Some(fact)) = facts.first() {
            if let Some(shape) = Shape::from_sym(fact.shape) {
                let range = crate::shape::shape_range(shape.rank(), *start, *end);
                let slice = shape.dims()[range].iter().map(|&d| d as i64).collect();
                return Ok(Some(vec![Tensor::vec_i64(slice)]));
            }
        }
        return Ok(None);
    }
    if input_names.iter().flatten().next().is_none() && !matches!(op, Op::Constant { .. }) {
        return Ok(None);
    }
    let mut values = Vec::with_capacity(facts.len());
    for fact in facts {
        match fact {
            None => values.push(None),
            Some(f) => match f.value {
                Some(v) => values.push(Some(v)),
                None => return Ok(None),
            },
        }
    }
    let outputs = evaluator.evaluate(op, &values, num_outputs)?;
    if outputs.iter().any(|t| t.len() > MAX_FOLDED_ELEMENTS) && !matches!(op, Op::Constant { .. }) {
        return Ok(None);
    }
    Ok(Some(outputs))
}

/// Drops initializers no node and no graph output reads; returns how many.
fn prune_initializers(graph: &mut Graph) -> usize {
    let used: HashSet<&str> = graph
        .nodes
        .iter()
        .flat_map(|n| n.present_inputs())
        .chain(graph.outputs.iter().map(|s| s.as_str()))
        .collect();
    let before = graph.initializers.len();
    let keep: Vec<String> = graph
        .initializers
        .keys()
        .filter(|k| used.contains(k.as_str()))
        .cloned()
        .collect();
    graph.initializers.retain(|k, _| keep.contains(k));
    before - graph.initializers.len()
}
