//! If, Loop and Scan: each runs its subgraph with the reference executor's own runner, the
//! subgraph's inputs bound (borrowed) to the node's operands. A subgraph's schedules come
//! from the prepared partition (made once, at prepare); a node run on its own (constant
//! folding, a direct [`crate::run_op`]) schedules its subgraphs once for that run. Errors
//! inside a subgraph name the subgraph's role and the inner node; the caller adds the
//! outer node.

use super::{optional, required};
use crate::runner::ReferenceExecutor;
use concord_core::infer::{condition_value, infer_on_tensors, scan_axis, subgraph_error};
use concord_core::{
    Deadline, Dim, Graph, MemoryBudget, Op, OpError, ScheduleTree, Shape, Tensor, TensorData,
};
use std::borrow::Cow;

/// Runs a control-flow op. `subgraphs` holds the schedules of the op's subgraphs, one per
/// [`Op::subgraphs`] in order, or is empty, and then they are made for this run.
pub(crate) fn run(
    op: &Op,
    subgraphs: &[ScheduleTree],
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
    budget: MemoryBudget,
    deadline: Option<Deadline>,
) -> Result<Vec<Tensor>, OpError> {
    let expected = op.subgraphs().len();
    if !subgraphs.is_empty() && subgraphs.len() != expected {
        return Err(OpError::Unsupported(format!(
            "{} has {expected} subgraphs but was handed {} prepared schedules (the schedule \
             tree does not match the graph)",
            op.name(),
            subgraphs.len()
        )));
    }
    let prepared = |k: usize| subgraphs.get(k);
    match op {
        Op::If {
            then_branch,
            else_branch,
        } => {
            let cond = required(inputs, 0, "cond")?;
            let captures = present(inputs, 1)?;
            let (branch, k, what) = if condition_value(cond, 0, "cond")? {
                (then_branch, 0, "then_branch")
            } else {
                (else_branch, 1, "else_branch")
            };
            let outputs =
                Subgraph::new(branch, prepared(k), what, budget, deadline)?.run(&captures)?;
            if outputs.len() != num_outputs {
                return Err(OpError::Shape(format!(
                    "{what} produced {} outputs, the node declares {num_outputs}",
                    outputs.len()
                )));
            }
            Ok(outputs)
        }
        Op::Loop { body, captures } => {
            let body_run = Subgraph::new(body, prepared(0), "body", budget, deadline)?;
            run_loop(op, &body_run, *captures, inputs, num_outputs)
        }
        Op::Scan { body, .. } => {
            let body_run = Subgraph::new(body, prepared(0), "body", budget, deadline)?;
            run_scan(op, &body_run, inputs, num_outputs)
        }
        other => Err(super::not_in_family(other)),
    }
}

/// A subgraph with its schedules: borrowed from the prepared partition, or made for this
/// node run.
struct Subgraph<'g> {
    graph: &'g Graph,
    schedules: Cow<'g, ScheduleTree>,
    what: &'static str,
    budget: MemoryBudget,
    /// The outer run's deadline: the subgraph's nodes are checked against it like the
    /// outer graph's, so a Loop stops at the first body node past it.
    deadline: Option<Deadline>,
}

impl<'g> Subgraph<'g> {
    fn new(
        graph: &'g Graph,
        prepared: Option<&'g ScheduleTree>,
        what: &'static str,
        budget: MemoryBudget,
        deadline: Option<Deadline>,
    ) -> Result<Self, OpError> {
        let schedules = match prepared {
            Some(tree) => Cow::Borrowed(tree),
            None => {
                Cow::Owned(ScheduleTree::for_graph(graph).map_err(|e| subgraph_error(what, e))?)
            }
        };
        Ok(Subgraph {
            graph,
            schedules,
            what,
            budget,
            deadline,
        })
    }

    fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
        if inputs.len() != self.graph.inputs.len() {
            return Err(OpError::Shape(format!(
                "{} declares {} inputs, the node binds {}",
                self.what,
                self.graph.inputs.len(),
                inputs.len()
            )));
        }
        ReferenceExecutor::within(self.budget)
            .until(self.deadline)
            .run_bound(self.graph, &self.schedules, inputs)
            .map_err(|e| subgraph_error(self.what, e))
    }
}

/// The operands from `start` on, every one required (captured values).
fn present<'a>(inputs: &[Option<&'a Tensor>], start: usize) -> Result<Vec<&'a Tensor>, OpError> {
    (start..inputs.len())
        .map(|index| required(inputs, index, "captured value"))
        .collect()
}

/// The most iterations one Loop runs. A Loop whose trip count `M` or whose condition lets
/// it go on past this many is an error naming the limit instead of a run that never ends in
/// practice (a trip count of 2^62 with a body that allocates nothing would not trip the
/// memory budget). Real models' loops (decoding steps, boxes, sequence positions) stay far
/// below it.
pub const MAX_LOOP_ITERATIONS: i64 = 1 << 20;

fn run_loop(
    op: &Op,
    body_run: &Subgraph,
    captures: usize,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let formal = inputs
        .len()
        .checked_sub(captures)
        .filter(|&f| f >= 2)
        .ok_or_else(|| {
            OpError::Shape(format!(
                "Loop has {} inputs, fewer than M, cond and its {captures} captures",
                inputs.len()
            ))
        })?;
    let max_trips = match optional(inputs, 0) {
        None => None,
        Some(m) => match m.to_i64_vec().as_deref() {
            Some([m]) => Some(*m),
            _ => {
                return Err(OpError::Shape(format!(
                    "input 0 (M) must be one i64, it is {}{}",
                    m.dtype(),
                    m.shape()
                )))
            }
        },
    };
    let cond_input = optional(inputs, 1)
        .map(|c| condition_value(c, 1, "cond"))
        .transpose()?;
    if max_trips.is_none() && cond_input.is_none() {
        return Err(OpError::Unsupported(
            "Loop without M and without cond never ends".to_string(),
        ));
    }
    let carried_count = formal - 2;
    let scan_count = num_outputs.checked_sub(carried_count).ok_or_else(|| {
        OpError::Shape(format!(
            "Loop carries {carried_count} values but declares only {num_outputs} outputs"
        ))
    })?;
    let mut carried: Vec<Tensor> = Vec::with_capacity(carried_count);
    for index in 2..formal {
        carried.push(required(inputs, index, "v_initial")?.clone());
    }
    let captured = present(inputs, formal)?;
    let mut cond = cond_input.unwrap_or(true);
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); scan_count];
    // The scan outputs grow with every iteration, and what they will add up to is known
    // only as they do: their bytes so far are checked against the budget each time.
    let mut scanned_bytes = Some(0u64);
    let mut iteration = 0i64;
    while cond && max_trips.map_or(true, |m| iteration < m) {
        if iteration == MAX_LOOP_ITERATIONS {
            return Err(OpError::Unsupported(format!(
                "Loop would run more than {MAX_LOOP_ITERATIONS} iterations (M = {}, cond still \
                 true after {iteration}): over the reference executor's iteration limit",
                max_trips.map_or("absent".to_string(), |m| m.to_string())
            )));
        }
        // The body's nodes check the deadline before each of them runs, so an expiry is
        // reported at the body node it stopped (the next iteration's first one, when it
        // passed during the last). Only a body without nodes is checked here.
        if body_run.graph.nodes.is_empty() {
            concord_core::deadline::check(body_run.deadline, || {
                format!("Loop iteration {iteration}")
            })?;
        }
        let iteration_num = Tensor::scalar_i64(iteration);
        let cond_in = Tensor::from_parts(Shape::scalar(), TensorData::Bool(vec![cond]))?;
        let mut bound: Vec<&Tensor> = vec![&iteration_num, &cond_in];
        bound.extend(carried.iter());
        bound.extend(captured.iter().copied());
        let mut outputs = body_run.run(&bound)?;
        if outputs.len() != 1 + num_outputs {
            return Err(OpError::Shape(format!(
                "the body produced {} outputs; the node's {num_outputs} outputs need {}",
                outputs.len(),
                1 + num_outputs
            )));
        }
        let scan_part = outputs.split_off(1 + carried_count);
        let carried_part = outputs.split_off(1);
        cond = condition_value(&outputs[0], 0, "the body's cond output")?;
        carried = carried_part;
        for (list, t) in scans.iter_mut().zip(scan_part) {
            scanned_bytes = scanned_bytes.and_then(|b| b.checked_add(t.size_in_bytes() as u64));
            list.push(t);
        }
        body_run.budget.check_bytes(scanned_bytes, || {
            format!("the scan output of {} iterations", iteration + 1)
        })?;
        iteration += 1;
    }
    let mut results = carried;
    let empty = scans.iter().any(Vec::is_empty);
    let empty_facts = if empty {
        infer_on_tensors(op, inputs, num_outputs)?
    } else {
        Vec::new()
    };
    for (k, list) in scans.into_iter().enumerate() {
        if list.is_empty() {
            results.push(empty_output(&empty_facts, carried_count + k)?);
        } else {
            results.push(stack(&list, 0, k)?);
        }
    }
    Ok(results)
}

fn run_scan(
    op: &Op,
    body_run: &Subgraph,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let Op::Scan {
        num_scan_inputs,
        scan_input_axes,
        scan_input_directions,
        scan_output_axes,
        scan_output_directions,
        captures,
        ..
    } = op
    else {
        return Err(super::not_in_family(op));
    };
    let m = *num_scan_inputs;
    let states = inputs.len().checked_sub(m + captures).ok_or_else(|| {
        OpError::Shape(format!(
            "Scan has {} inputs, fewer than its {m} scan inputs and {captures} captures",
            inputs.len()
        ))
    })?;
    let scan_count = num_outputs.checked_sub(states).ok_or_else(|| {
        OpError::Shape(format!(
            "Scan carries {states} states but declares only {num_outputs} outputs"
        ))
    })?;
    let mut state: Vec<Tensor> = Vec::with_capacity(states);
    for index in 0..states {
        state.push(required(inputs, index, "initial_state")?.clone());
    }
    let mut scanned = Vec::with_capacity(m);
    let mut length = None::<usize>;
    for k in 0..m {
        let x = required(inputs, states + k, "scan_input")?;
        let axis = scan_axis(scan_input_axes, k, x.rank(), "scan_input_axes")?;
        let extent = x.dims()[axis];
        if let Some(previous) = length.filter(|&l| l != extent) {
            return Err(OpError::Shape(format!(
                "scan inputs have different lengths along their scan axes: {previous} and \
                 {extent} (scan input {k}, shape {})",
                x.shape()
            )));
        }
        length = Some(extent);
        let reverse = scan_input_directions.get(k).copied().unwrap_or(false);
        scanned.push((x, axis, reverse));
    }
    let length = length.unwrap_or(0);
    let captured = present(inputs, states + m)?;
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); scan_count];
    for t in 0..length {
        let mut slices = Vec::with_capacity(m);
        for &(x, axis, reverse) in &scanned {
            let index = if reverse { length - 1 - t } else { t };
            slices.push(take(x, axis, index)?);
        }
        let mut bound: Vec<&Tensor> = state.iter().collect();
        bound.extend(slices.iter());
        bound.extend(captured.iter().copied());
        let mut outputs = body_run.run(&bound)?;
        if outputs.len() != num_outputs {
            return Err(OpError::Shape(format!(
                "the body produced {} outputs, the node declares {num_outputs}",
                outputs.len()
            )));
        }
        let scan_part = outputs.split_off(states);
        state = outputs;
        for (list, t) in scans.iter_mut().zip(scan_part) {
            list.push(t);
        }
    }
    let mut results = state;
    // The scan outputs are empty together, when the sequence is; their types then come from
    // inference, as Loop's do. Asked only then (not for `length == 0` alone, where there may
    // be no scan output to type).
    let empty_facts = if scans.iter().any(Vec::is_empty) {
        infer_on_tensors(op, inputs, num_outputs)?
    } else {
        Vec::new()
    };
    for (k, mut list) in scans.into_iter().enumerate() {
        if list.is_empty() {
            results.push(empty_output(&empty_facts, states + k)?);
            continue;
        }
        if scan_output_directions.get(k).copied().unwrap_or(false) {
            list.reverse();
        }
        let axis = scan_axis(scan_output_axes, k, list[0].rank() + 1, "scan_output_axes")?;
        results.push(stack(&list, axis, k)?);
    }
    Ok(results)
}

/// An empty scan output: the inferred dtype and shape, every extent not known then 0.
fn empty_output(
    facts: &[concord_core::infer::OutputFact],
    index: usize,
) -> Result<Tensor, OpError> {
    let fact = facts
        .get(index)
        .ok_or_else(|| OpError::Shape(format!("no inferred type for scan output {index}")))?;
    let dims: Vec<usize> = fact
        .shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => *n,
            _ => 0,
        })
        .collect();
    let shape = Shape(dims);
    let numel = shape.numel();
    Tensor::from_parts(shape, TensorData::zeros(fact.dtype, numel))
}

/// The slice of `x` at `index` along `axis`, that axis removed.
fn take(x: &Tensor, axis: usize, index: usize) -> Result<Tensor, OpError> {
    let dims = x.dims();
    // `index` is below the axis's extent, so an empty x has no slice elements to take.
    let (outer, inner) = super::walk_extents(dims, axis);
    let extent = dims[axis];
    let mut sources = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let base = (o * extent + index) * inner;
        sources.extend(base..base + inner);
    }
    let mut shape = dims.to_vec();
    shape.remove(axis);
    Tensor::from_parts(Shape(shape), x.data().gather(&sources)?)
}

/// The iterations' values of scan output `k` stacked along a new axis `axis`; every
/// iteration must give the same dtype and shape.
fn stack(parts: &[Tensor], axis: usize, k: usize) -> Result<Tensor, OpError> {
    let Some(first) = parts.first() else {
        return Err(OpError::Shape(format!("scan output {k} has no values")));
    };
    if let Some(odd) = parts
        .iter()
        .find(|p| p.shape() != first.shape() || p.dtype() != first.dtype())
    {
        return Err(OpError::Shape(format!(
            "scan output {k} is {}{} in one iteration and {}{} in another; every iteration \
             must give the same shape",
            first.dtype(),
            first.shape(),
            odd.dtype(),
            odd.shape()
        )));
    }
    let dims = first.dims();
    let numel = first.len();
    let outer = super::walk_product(dims, &dims[..axis]);
    let inner = super::walk_product(dims, &dims[axis..]);
    let data: Vec<&TensorData> = parts.iter().map(Tensor::data).collect();
    let joined = TensorData::concat(first.dtype(), &data)?;
    let mut sources = Vec::with_capacity(numel * parts.len());
    for o in 0..outer {
        for t in 0..parts.len() {
            let base = t * numel + o * inner;
            sources.extend(base..base + inner);
        }
    }
    let mut shape = dims.to_vec();
    shape.insert(axis, parts.len());
    Tensor::from_parts(Shape(shape), joined.gather(&sources)?)
}
