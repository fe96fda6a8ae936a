//! Shape inference of If, Loop and Scan: each subgraph is inferred as a graph of its own,
//! its inputs typed by the values the node binds to them (captured constants become the
//! subgraph's initializers, so shape operands read from the outer graph stay exact).
//!
//! If merges its branches (equal extents stay, different ones become [`Dim::Unknown`]) unless
//! its condition is a constant, in which case the chosen branch alone types it. A loop-carried
//! value or Scan state keeps the body's type, with every extent that changes between
//! iterations made unknown (inference repeats until the carried types are stable). Loop's scan
//! outputs get a leading unknown extent, Scan's the scan axis's extent at their own axis.

use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::{Error, OpError};
use crate::fold::Evaluator;
use crate::graph::{Graph, ValueInfo};
use crate::op::Op;
use crate::shape::{format_sym, normalize_axis, Dim, SymShape};
use crate::tensor::Tensor;

/// What is bound to one subgraph input while it is inferred.
#[derive(Clone, Debug)]
struct Binding<'a> {
    dtype: DType,
    shape: SymShape,
    /// A value that is the same in every run of the subgraph (a captured constant).
    value: Option<&'a Tensor>,
}

impl<'a> Binding<'a> {
    fn of(fact: &ValueFact<'a>) -> Self {
        Binding {
            dtype: fact.dtype,
            shape: fact.shape.to_vec(),
            value: fact.value,
        }
    }

    fn varying(dtype: DType, shape: SymShape) -> Self {
        Binding {
            dtype,
            shape,
            value: None,
        }
    }
}

/// `evaluator`, when given (while the net is built), folds inside the subgraphs too, so a
/// subgraph's shape operands computed from constants type its values.
pub(super) fn infer(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
    ev: Option<&dyn Evaluator>,
) -> Result<Vec<OutputFact>, OpError> {
    match op {
        Op::If {
            then_branch,
            else_branch,
        } => infer_if(then_branch, else_branch, inputs, ev),
        Op::Loop { body, captures } => infer_loop(body, *captures, inputs, num_outputs, ev),
        Op::Scan {
            body,
            num_scan_inputs,
            scan_input_axes,
            scan_output_axes,
            captures,
            ..
        } => {
            let layout = ScanLayout {
                num_scan_inputs: *num_scan_inputs,
                input_axes: scan_input_axes,
                output_axes: scan_output_axes,
                captures: *captures,
            };
            infer_scan(body, &layout, inputs, num_outputs, ev)
        }
        other => Err(OpError::Unsupported(format!(
            "{} is not a control-flow op",
            other.name()
        ))),
    }
}

/// The truth value of an If or Loop condition: a bool tensor of exactly one element.
pub fn condition_value(t: &Tensor, index: usize, name: &'static str) -> Result<bool, OpError> {
    let values = t.as_bool().ok_or(OpError::DType {
        index,
        name,
        expected: DType::Bool.name().into(),
        actual: t.dtype(),
    })?;
    match values {
        [v] => Ok(*v),
        _ => Err(OpError::Shape(format!(
            "input {index} ({name}) must hold exactly one element, it has shape {}",
            t.shape()
        ))),
    }
}

/// Wraps an error of a subgraph with the subgraph's role.
pub fn subgraph_error(what: &str, error: Error) -> OpError {
    OpError::Subgraph {
        graph: what.to_string(),
        source: Box::new(error),
    }
}

fn infer_if(
    then_branch: &Graph,
    else_branch: &Graph,
    inputs: &[Option<ValueFact>],
    ev: Option<&dyn Evaluator>,
) -> Result<Vec<OutputFact>, OpError> {
    let cond = required(inputs, 0, "cond")?;
    expect_dtype(&cond, 0, "cond", &[DType::Bool])?;
    let captures = capture_bindings(inputs, 1)?;
    if let Some(value) = cond.value {
        return if condition_value(value, 0, "cond")? {
            infer_subgraph(then_branch, "then_branch", &captures, ev)
        } else {
            infer_subgraph(else_branch, "else_branch", &captures, ev)
        };
    }
    // The condition may still become a constant when the net is built (folding computes
    // it, and then only the branch taken is typed), so a branch that does not type is a
    // type that waits for folding.
    let unknown_cond = |e: OpError| match e {
        OpError::NeedsFolding(_) => e,
        other => OpError::NeedsFolding(format!(
            "{other} (cond is not known when the net is built, so both branches must type)"
        )),
    };
    let then_facts =
        infer_subgraph(then_branch, "then_branch", &captures, ev).map_err(unknown_cond)?;
    let else_facts =
        infer_subgraph(else_branch, "else_branch", &captures, ev).map_err(unknown_cond)?;
    if then_facts.len() != else_facts.len() {
        return Err(OpError::Shape(format!(
            "then_branch has {} outputs, else_branch {}",
            then_facts.len(),
            else_facts.len()
        )));
    }
    then_facts
        .into_iter()
        .zip(else_facts)
        .enumerate()
        .map(|(i, (t, e))| {
            if t.dtype != e.dtype {
                return Err(OpError::Shape(format!(
                    "output {i}: then_branch gives {}, else_branch {}",
                    t.dtype, e.dtype
                )));
            }
            if t.shape.len() != e.shape.len() {
                return Err(OpError::NeedsFolding(format!(
                    "output {i}: then_branch gives shape {} and else_branch {}, of different \
                     ranks; Concord shapes have a rank known when the net is built, so this \
                     needs a condition known then too (a constant cond is folded away)",
                    format_sym(&t.shape),
                    format_sym(&e.shape)
                )));
            }
            Ok(OutputFact::new(t.dtype, merge_dims(&t.shape, &e.shape)))
        })
        .collect()
}

fn infer_loop(
    body: &Graph,
    captures: usize,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
    ev: Option<&dyn Evaluator>,
) -> Result<Vec<OutputFact>, OpError> {
    let formal = inputs.len().checked_sub(captures).filter(|&f| f >= 2);
    let Some(formal) = formal else {
        return Err(OpError::Shape(format!(
            "Loop has {} inputs, fewer than M, cond and its {captures} captures",
            inputs.len()
        )));
    };
    check_body_inputs(body, inputs.len())?;
    if let Some(m) = optional(inputs, 0) {
        expect_dtype(&m, 0, "M", &[DType::I64])?;
    }
    if let Some(cond) = optional(inputs, 1) {
        expect_dtype(&cond, 1, "cond", &[DType::Bool])?;
    }
    let carried = formal - 2;
    let mut bindings = vec![
        Binding::varying(DType::I64, Vec::new()),
        Binding::varying(DType::Bool, Vec::new()),
    ];
    for index in 2..formal {
        let fact = required(inputs, index, "v_initial")?;
        bindings.push(Binding::varying(fact.dtype, fact.shape.to_vec()));
    }
    bindings.extend(capture_bindings(inputs, formal)?);
    let facts = carried_fixed_point(body, &mut bindings, (2, 1, carried), ev)?;
    if facts.len() != num_outputs + 1 {
        return Err(OpError::Shape(format!(
            "the body has {} outputs (cond, carried values, scan outputs), so the node needs {}, \
             it declares {num_outputs}",
            facts.len(),
            facts.len().saturating_sub(1)
        )));
    }
    if facts[0].dtype != DType::Bool {
        return Err(OpError::Shape(format!(
            "the body's first output (cond) is {}, not bool",
            facts[0].dtype
        )));
    }
    let mut outputs: Vec<OutputFact> = bindings[2..2 + carried]
        .iter()
        .map(|b| OutputFact::new(b.dtype, b.shape.clone()))
        .collect();
    for fact in &facts[1 + carried..] {
        let mut shape = vec![Dim::Unknown];
        shape.extend(fact.shape.iter().cloned());
        outputs.push(OutputFact::new(fact.dtype, shape));
    }
    Ok(outputs)
}

/// Scan's attributes that shape inference reads.
struct ScanLayout<'a> {
    num_scan_inputs: usize,
    input_axes: &'a [i64],
    output_axes: &'a [i64],
    captures: usize,
}

fn infer_scan(
    body: &Graph,
    layout: &ScanLayout,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
    ev: Option<&dyn Evaluator>,
) -> Result<Vec<OutputFact>, OpError> {
    let m = layout.num_scan_inputs;
    let states = inputs
        .len()
        .checked_sub(m + layout.captures)
        .ok_or_else(|| {
            OpError::Shape(format!(
                "Scan has {} inputs, fewer than its {m} scan inputs and {} captures",
                inputs.len(),
                layout.captures
            ))
        })?;
    check_body_inputs(body, inputs.len())?;
    if m == 0 {
        return Err(OpError::Attribute {
            name: "num_scan_inputs",
            detail: "must be at least 1".into(),
        });
    }
    let mut bindings = Vec::with_capacity(inputs.len());
    for index in 0..states {
        let fact = required(inputs, index, "initial_state")?;
        bindings.push(Binding::varying(fact.dtype, fact.shape.to_vec()));
    }
    let mut length = None::<Dim>;
    for k in 0..m {
        let fact = required(inputs, states + k, "scan_input")?;
        let axis = scan_axis(layout.input_axes, k, fact.shape.len(), "scan_input_axes")?;
        let mut slice = fact.shape.to_vec();
        let extent = slice.remove(axis);
        length = Some(match length {
            None => extent,
            Some(previous) => match (&previous, &extent) {
                (Dim::Fixed(a), Dim::Fixed(b)) if a != b => {
                    return Err(OpError::Shape(format!(
                        "scan inputs have different lengths along their scan axes: {a} and {b}"
                    )))
                }
                (Dim::Fixed(_), _) => previous,
                _ => extent,
            },
        });
        bindings.push(Binding::varying(fact.dtype, slice));
    }
    bindings.extend(capture_bindings(inputs, states + m)?);
    let facts = carried_fixed_point(body, &mut bindings, (0, 0, states), ev)?;
    if facts.len() != num_outputs {
        return Err(OpError::Shape(format!(
            "the body has {} outputs (states, scan outputs), the node declares {num_outputs}",
            facts.len()
        )));
    }
    let length = length.unwrap_or(Dim::Unknown);
    let mut outputs: Vec<OutputFact> = facts[..states].to_vec();
    for (k, fact) in facts[states..].iter().enumerate() {
        let axis = scan_axis(
            layout.output_axes,
            k,
            fact.shape.len() + 1,
            "scan_output_axes",
        )?;
        let mut shape = fact.shape.clone();
        shape.insert(axis, length.clone());
        outputs.push(OutputFact::new(fact.dtype, shape));
    }
    Ok(outputs)
}

/// The axis of scan input or output `k` in a value of `rank` (0 when the list is absent).
pub fn scan_axis(
    axes: &[i64],
    k: usize,
    rank: usize,
    name: &'static str,
) -> Result<usize, OpError> {
    let axis = if axes.is_empty() {
        0
    } else {
        *axes.get(k).ok_or_else(|| OpError::Attribute {
            name,
            detail: format!("has {} entries, entry {k} is needed", axes.len()),
        })?
    };
    normalize_axis(axis, rank).map_err(|e| OpError::Attribute {
        name,
        detail: e.to_string(),
    })
}

fn check_body_inputs(body: &Graph, bound: usize) -> Result<(), OpError> {
    if body.inputs.len() == bound {
        return Ok(());
    }
    Err(OpError::Shape(format!(
        "the body declares {} inputs (with captures), the node binds {bound}",
        body.inputs.len()
    )))
}

/// Bindings for the captured inputs from `start` on.
fn capture_bindings<'a>(
    inputs: &[Option<ValueFact<'a>>],
    start: usize,
) -> Result<Vec<Binding<'a>>, OpError> {
    (start..inputs.len())
        .map(|index| required(inputs, index, "captured value").map(|f| Binding::of(&f)))
        .collect()
}

/// Infers `body` until its `count` carried values (bound at `first_input`, produced at
/// `first_output`) have the same types in as out, turning each extent that changes into
/// [`Dim::Unknown`]; returns the body's output types of the last round.
fn carried_fixed_point(
    body: &Graph,
    bindings: &mut [Binding],
    (first_input, first_output, count): (usize, usize, usize),
    ev: Option<&dyn Evaluator>,
) -> Result<Vec<OutputFact>, OpError> {
    // Each round that changes anything makes at least one more extent unknown, so the
    // number of carried extents bounds the rounds.
    let extents: usize = bindings[first_input..first_input + count]
        .iter()
        .map(|b| b.shape.len())
        .sum();
    for _ in 0..=extents {
        let facts = infer_subgraph(body, "body", bindings, ev)?;
        if facts.len() < first_output + count {
            return Err(OpError::Shape(format!(
                "the body has {} outputs, it needs at least {} for its carried values",
                facts.len(),
                first_output + count
            )));
        }
        let mut changed = false;
        for j in 0..count {
            let out = &facts[first_output + j];
            let bound = &mut bindings[first_input + j];
            if out.dtype != bound.dtype || out.shape.len() != bound.shape.len() {
                return Err(OpError::Shape(format!(
                    "carried value {j} enters the body as {}{} and leaves it as {}{}; it must \
                     keep its dtype and rank",
                    bound.dtype,
                    format_sym(&bound.shape),
                    out.dtype,
                    format_sym(&out.shape)
                )));
            }
            let merged = merge_dims(&bound.shape, &out.shape);
            if merged != bound.shape {
                bound.shape = merged;
                changed = true;
            }
        }
        if !changed {
            return Ok(facts);
        }
    }
    Err(OpError::Shape(
        "the carried values' types did not settle".to_string(),
    ))
}

/// Equal extents stay; different ones become unknown.
fn merge_dims(a: &[Dim], b: &[Dim]) -> SymShape {
    a.iter()
        .zip(b)
        .map(|(x, y)| if x == y { x.clone() } else { Dim::Unknown })
        .collect()
}

/// The output types of `graph` run with `bindings` bound to its inputs, in order.
fn infer_subgraph(
    graph: &Graph,
    what: &str,
    bindings: &[Binding],
    ev: Option<&dyn Evaluator>,
) -> Result<Vec<OutputFact>, OpError> {
    if graph.inputs.len() != bindings.len() {
        return Err(OpError::Shape(format!(
            "{what} declares {} inputs, the node binds {}",
            graph.inputs.len(),
            bindings.len()
        )));
    }
    let mut typed = graph.clone();
    typed.inputs.clear();
    for (declared, binding) in graph.inputs.iter().zip(bindings) {
        match binding.value {
            Some(value) => {
                typed
                    .initializers
                    .insert(declared.name.clone(), value.clone());
            }
            None => typed.inputs.push(ValueInfo::new(
                declared.name.clone(),
                binding.dtype,
                binding.shape.clone(),
            )),
        }
    }
    match ev {
        None => typed.infer_shapes(),
        Some(ev) => typed.fold_constants(ev).map(|_| ()),
    }
    .map_err(|e| subgraph_error(what, e))?;
    typed
        .outputs
        .iter()
        .map(|name| {
            let known = typed
                .values
                .get(name)
                .map(|v| OutputFact::new(v.dtype, v.shape.clone()));
            known.ok_or_else(|| {
                OpError::NeedsFolding(format!(
                    "in {what}: output `{name}` has no type known when the net is built: its \
                     rank depends on a value computed inside the subgraph"
                ))
            })
        })
        .collect()
}
