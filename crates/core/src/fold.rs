//! Shape inference over a whole graph, and constant folding of the sub-graphs whose inputs
//! are all known when the net is built.
//!
//! Folding is what turns a PyTorch export's `Shape → Gather → Concat → Reshape` chain (and
//! Slice bounds computed from `Shape`, or from `Mod` of constants) into fixed initializers,
//! so that no int64 shape arithmetic is left at run time and every downstream shape becomes
//! static. Core has no kernels: nodes are evaluated through an [`Evaluator`] the caller
//! supplies.
//!
//! Inference and folding are one pass in topological order, so a folded value's exact type
//! is what its readers are inferred from. Inference alone ([`Graph::infer_shapes`], what the
//! ONNX loader runs) cannot evaluate, so a node whose output rank needs an operand only
//! evaluation gives is left untyped, with everything after it, until folding. What cannot
//! fold because it reads a runtime input (`Shape` of a symbolic batch) stays a node: its
//! outputs get unknown dims, the reference computes it per forward, and device executors
//! that need such an operand as a constant decline the node when the net is built.

use crate::error::{Error, OpError, Result};
use crate::graph::{Graph, Node, ValueInfo};
use crate::infer::{condition_value, infer_op_folding, subgraph_error, OutputFact, ValueFact};
use crate::op::Op;
use crate::shape::Shape;
use crate::tensor::Tensor;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

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
    /// Validates the graph, orders its nodes and infers the type of every value it can
    /// without evaluating any node, changing no node.
    ///
    /// A value whose rank depends on an operand that only evaluation could compute (a
    /// Reshape target concatenated from a Slice whose starts come from `Mod` of two
    /// constants, say) is left out of `values`, and so is everything computed from it:
    /// [`Graph::fold_constants`] computes such operands and infers the rest. Every other
    /// inference error is returned.
    pub fn infer_shapes(&mut self) -> Result<()> {
        self.validate()?;
        self.sort_nodes()?;
        infer_and_fold(self, None).map(|_| ())
    }

    /// Validates, orders, infers and folds, in one pass in topological order: every node
    /// whose inputs are all known when the net is built (initializers, Constant nodes,
    /// outputs folded before it) is evaluated and its outputs become initializers, and so
    /// does `Shape` of a value whose dims are all known. Each folded output's exact type
    /// replaces the inferred one before any reader of it is inferred, so one pass reaches
    /// the fixed point: folding the result again folds nothing. Unused initializers are
    /// pruned.
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
    // Every value name in the graph, so that the values of an inlined If branch get names
    // that clash with none (filled only when there is an If to inline).
    let mut taken: HashSet<String> = HashSet::new();
    if evaluator.is_some() && nodes.iter().any(|n| matches!(n.op, Op::If { .. })) {
        taken.extend(graph.values.keys().cloned());
        taken.extend(graph.initializers.keys().cloned());
        taken.extend(nodes.iter().flat_map(|n| n.outputs.iter().cloned()));
    }
    let mut nodes: VecDeque<Node> = nodes.into();
    // Values known at build that are still produced by a node: Constant nodes and `Shape`
    // of fully known dims when nothing is folded (shape inference needs them: exporters
    // write Unsqueeze axes and Reshape shapes as Constant nodes), and folded graph outputs,
    // whose nodes stay. Their readers infer and fold with them.
    let mut known: HashMap<String, Tensor> = HashMap::new();
    // Values whose type waits for folding (inference without an evaluator only).
    let mut deferred: HashSet<String> = HashSet::new();
    while let Some(node) = nodes.pop_front() {
        if node.present_inputs().any(|i| deferred.contains(i)) {
            deferred.extend(node.outputs.iter().cloned());
            kept.push(node);
            continue;
        }
        let constant = |name: &str| {
            if runtime_inputs.contains(name) {
                None
            } else {
                graph.initializers.get(name).or_else(|| known.get(name))
            }
        };
        // An If whose condition is known when the net is built is replaced by the branch it
        // takes, whose nodes are inferred and folded next, so exported models with static
        // conditions run without control flow.
        if let (
            Some(_),
            Op::If {
                then_branch,
                else_branch,
            },
        ) = (evaluator, &node.op)
        {
            let cond = node.inputs.first().cloned().flatten();
            if let Some(value) = cond.as_deref().and_then(constant) {
                let branch =
                    if condition_value(value, 0, "cond").map_err(|e| Error::at_node(&node, e))? {
                        then_branch
                    } else {
                        else_branch
                    };
                let (inlined, initializers) = inline_branch(&node, branch, &mut taken)?;
                for (name, t) in initializers {
                    graph.values.insert(
                        name.clone(),
                        ValueInfo::new(name.clone(), t.dtype(), t.shape().to_sym()),
                    );
                    graph.initializers.insert(name, t);
                }
                for inner in inlined.into_iter().rev() {
                    nodes.push_front(inner);
                }
                summary.folded_nodes += 1;
                continue;
            }
        }
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
        let out_facts = match infer_op_folding(&node.op, &facts, node.outputs.len(), evaluator) {
            Ok(out_facts) => out_facts,
            // Without an evaluator an operand may be unknown only because nothing has
            // computed it yet; with one, it is computed at run time, which is an error.
            Err(OpError::NotConstant { .. } | OpError::NeedsFolding(_)) if evaluator.is_none() => {
                deferred.extend(node.outputs.iter().cloned());
                kept.push(node);
                continue;
            }
            Err(e) => return Err(Error::at_node(&node, e)),
        };

        let values = match evaluator {
            None => known_without_evaluating(&node.op, &facts).map(|t| vec![t]),
            Some(evaluator) => try_fold(&node.op, &node.inputs, &facts, &out_facts, evaluator)
                .map_err(|e| Error::at_node(&node, e))?,
        };
        for (name, fact) in node.outputs.iter().zip(&out_facts) {
            graph.values.insert(
                name.clone(),
                ValueInfo::new(name.clone(), fact.dtype, fact.shape.clone()),
            );
        }
        let Some(tensors) = values else {
            kept.push(node);
            continue;
        };
        for (name, t) in node.outputs.iter().zip(&tensors) {
            graph.values.insert(
                name.clone(),
                ValueInfo::new(name.clone(), t.dtype(), t.shape().to_sym()),
            );
        }
        // A graph output stays produced by its node so that the output keeps its name's
        // producer (the placement report reads better); its value still serves its readers.
        if evaluator.is_none() || node.outputs.iter().any(|o| graph_outputs.contains(o)) {
            known.extend(node.outputs.iter().cloned().zip(tensors));
            kept.push(node);
        } else {
            graph
                .initializers
                .extend(node.outputs.iter().cloned().zip(tensors));
            summary.folded_nodes += 1;
        }
    }
    graph.nodes = kept;
    Ok(summary)
}

/// The nodes and initializers that replace If node `node` when it takes `branch`: the
/// branch's inputs become the node's captured operands, its outputs the node's outputs, and
/// every other value (and node) of the branch gets a name under the node's that nothing in
/// `taken` has.
fn inline_branch(
    node: &Node,
    branch: &Graph,
    taken: &mut HashSet<String>,
) -> Result<(Vec<Node>, BTreeMap<String, Tensor>)> {
    let order = branch
        .topological_order()
        .map_err(|e| Error::at_node(node, subgraph_error("the branch taken", e)))?;
    let mut fresh = |name: &str| {
        let base = format!("{}/{name}", node.name);
        let mut candidate = base.clone();
        let mut suffix = 1usize;
        while taken.contains(&candidate) {
            candidate = format!("{base}_{suffix}");
            suffix += 1;
        }
        taken.insert(candidate.clone());
        candidate
    };
    let mut renamed: HashMap<&str, String> = HashMap::new();
    for (k, declared) in branch.inputs.iter().enumerate() {
        let outer = node.inputs.get(1 + k).cloned().flatten().ok_or_else(|| {
            Error::at_node(
                node,
                OpError::MissingInput {
                    index: 1 + k,
                    name: "captured value",
                },
            )
        })?;
        renamed.insert(&declared.name, outer);
    }
    let mut initializers = BTreeMap::new();
    for (name, t) in &branch.initializers {
        if !renamed.contains_key(name.as_str()) {
            let outer = fresh(name);
            initializers.insert(outer.clone(), t.clone());
            renamed.insert(name, outer);
        }
    }
    // A branch output that a branch node produces, and that is listed once, is written
    // straight to the node's output; any other (an input, an initializer, a repeated
    // output) is copied there by an Identity.
    let produced: HashSet<&str> = branch
        .nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .collect();
    let mut direct: HashMap<&str, &str> = HashMap::new();
    let mut copies: Vec<(&str, &str)> = Vec::new();
    for (inner, outer) in branch.outputs.iter().zip(&node.outputs) {
        let once = branch.outputs.iter().filter(|o| *o == inner).count() == 1;
        if outer.is_empty() {
            continue;
        }
        if once && produced.contains(inner.as_str()) {
            direct.insert(inner, outer);
        } else {
            copies.push((inner, outer));
        }
    }
    for inner in &branch.nodes {
        for out in &inner.outputs {
            if out.is_empty() {
                continue;
            }
            let outer = match direct.get(out.as_str()) {
                Some(outer) => (*outer).to_string(),
                None => fresh(out),
            };
            renamed.insert(out, outer);
        }
    }
    let rename = |name: &str| {
        renamed
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    };
    let mut nodes = Vec::with_capacity(order.len() + copies.len());
    for index in order {
        let inner = &branch.nodes[index];
        nodes.push(Node {
            name: fresh(&inner.name),
            op: inner.op.clone(),
            inputs: inner
                .inputs
                .iter()
                .map(|i| i.as_deref().map(rename))
                .collect(),
            outputs: inner
                .outputs
                .iter()
                .map(|o| {
                    if o.is_empty() {
                        String::new()
                    } else {
                        rename(o)
                    }
                })
                .collect(),
        });
    }
    for (inner, outer) in copies {
        nodes.push(Node {
            name: fresh(&format!("{outer}_copy")),
            op: Op::Identity,
            inputs: vec![Some(rename(inner))],
            outputs: vec![outer.to_string()],
        });
    }
    Ok((nodes, initializers))
}

/// The value of a node's single output that needs no kernel: a Constant's, and Shape's and
/// Size's of an input whose dims are all known.
fn known_without_evaluating(op: &Op, facts: &[Option<ValueFact>]) -> Option<Tensor> {
    match op {
        Op::Constant { value } => Some(value.clone()),
        Op::Size => {
            let fact = facts.first().copied().flatten()?;
            let shape = Shape::from_sym(fact.shape)?;
            Some(Tensor::scalar_i64(
                i64::try_from(shape.checked_numel()?).ok()?,
            ))
        }
        Op::Shape { start, end } => {
            let fact = facts.first().copied().flatten()?;
            let shape = Shape::from_sym(fact.shape)?;
            let range = crate::shape::shape_range(shape.rank(), *start, *end);
            let dims = shape.dims().get(range)?;
            Some(Tensor::vec_i64(dims.iter().map(|&d| d as i64).collect()))
        }
        _ => None,
    }
}

/// Folds one node if all its inputs are known, returning its output tensors. A node whose
/// inferred outputs are larger than [`MAX_FOLDED_ELEMENTS`] is not evaluated at all.
fn try_fold(
    op: &Op,
    input_names: &[Option<String>],
    facts: &[Option<ValueFact>],
    out_facts: &[OutputFact],
    evaluator: &dyn Evaluator,
) -> std::result::Result<Option<Vec<Tensor>>, OpError> {
    if let Some(value) = known_without_evaluating(op, facts) {
        return Ok(Some(vec![value]));
    }
    // A node without inputs (other than Constant, handled above) has nothing to fold from:
    // RandomNormal and RandomUniform stay nodes. The random ops that read an input fold like
    // any other, which changes nothing a forward would see: their values are a pure
    // function of seed, attributes and input (`crate::op::RandomSeed`).
    if input_names.iter().flatten().next().is_none() {
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
    let too_large = |numel: Option<usize>| numel.map_or(true, |n| n > MAX_FOLDED_ELEMENTS);
    if out_facts
        .iter()
        .filter_map(|f| Shape::from_sym(&f.shape))
        .any(|s| too_large(s.checked_numel()))
    {
        return Ok(None);
    }
    let outputs = evaluator.evaluate(op, &values, out_facts.len())?;
    if outputs.iter().any(|t| too_large(Some(t.len()))) {
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
