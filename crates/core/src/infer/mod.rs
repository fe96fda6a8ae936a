//! Shape and dtype inference: for one op, the output types from the input types (and the
//! values of inputs that are constants). One file per op family; this file routes.

mod algebra;
mod attention;
mod control;
mod elementwise;
mod indexing;
mod movement;
mod nn;
mod quant;
mod random;
mod recurrent;
mod sampling;
mod signal;

pub use control::{condition_value, scan_axis, subgraph_error};
pub use indexing::tensor_scatter_axis;

use crate::dtype::DType;
use crate::error::OpError;
use crate::op::{Family, Op};
use crate::shape::{Dim, SymShape};
use crate::tensor::Tensor;

/// What is known about one input of a node while inferring its outputs.
#[derive(Clone, Copy, Debug)]
pub struct ValueFact<'a> {
    pub dtype: DType,
    pub shape: &'a [Dim],
    /// The value itself, when it is a constant (initializer or folded).
    pub value: Option<&'a Tensor>,
}

/// The inferred type of one output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFact {
    pub dtype: DType,
    pub shape: SymShape,
}

impl OutputFact {
    pub fn new(dtype: DType, shape: SymShape) -> Self {
        OutputFact { dtype, shape }
    }
}

/// Infers the output types of `op` applied to `inputs` (None for omitted optional inputs),
/// producing exactly `num_outputs` facts.
pub fn infer_op(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let outputs = match op.family() {
        Family::Linear | Family::Pool | Family::Resize => nn::infer(op, inputs, num_outputs)?,
        Family::Normalization if quant::is_loss(op) => quant::infer(op, inputs, num_outputs)?,
        Family::Quantization => quant::infer(op, inputs, num_outputs)?,
        Family::Unary
        | Family::Binary
        | Family::Select
        | Family::Normalization
        | Family::Reduce => elementwise::infer(op, inputs, num_outputs)?,
        Family::Movement => movement::infer(op, inputs, num_outputs)?,
        Family::Indexing => indexing::infer(op, inputs, num_outputs)?,
        Family::Recurrent => recurrent::infer(op, inputs, num_outputs)?,
        Family::LinearAlgebra => algebra::infer(op, inputs)?,
        Family::ControlFlow => control::infer(op, inputs, num_outputs, None)?,
        Family::Sampling => sampling::infer(op, inputs)?,
        Family::Signal => signal::infer(op, inputs)?,
        Family::Random => random::infer(op, inputs)?,
    };
    if outputs.len() != num_outputs {
        return Err(OpError::Shape(format!(
            "{} produces {} outputs, the node declares {}",
            op.name(),
            outputs.len(),
            num_outputs
        )));
    }
    Ok(outputs)
}

/// [`infer_op`] while the net is built: `evaluator` also folds inside the subgraphs of
/// control-flow ops, so their values type as the outer graph's do.
pub fn infer_op_folding(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
    evaluator: Option<&dyn crate::fold::Evaluator>,
) -> Result<Vec<OutputFact>, OpError> {
    match (op.family(), evaluator) {
        (Family::ControlFlow, Some(_)) => {
            let outputs = control::infer(op, inputs, num_outputs, evaluator)?;
            if outputs.len() != num_outputs {
                return Err(OpError::Shape(format!(
                    "{} produces {} outputs, the node declares {}",
                    op.name(),
                    outputs.len(),
                    num_outputs
                )));
            }
            Ok(outputs)
        }
        _ => infer_op(op, inputs, num_outputs),
    }
}

/// [`infer_op`] on concrete operands: what inference gives `op` when every present input's
/// dtype, shape and value are known (a kernel's check of its own outputs, a loop that ran
/// zero times).
pub fn infer_on_tensors(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let shapes: Vec<Option<SymShape>> = inputs
        .iter()
        .map(|t| t.map(|t| t.shape().to_sym()))
        .collect();
    let facts: Vec<Option<ValueFact>> = inputs
        .iter()
        .zip(&shapes)
        .map(|(t, shape)| {
            let (t, shape) = (t.as_ref()?, shape.as_ref()?);
            Some(ValueFact {
                dtype: t.dtype(),
                shape,
                value: Some(t),
            })
        })
        .collect();
    infer_op(op, &facts, num_outputs)
}

/// The input at `index`, or a MissingInput error naming it.
pub fn required<'a>(
    inputs: &[Option<ValueFact<'a>>],
    index: usize,
    name: &'static str,
) -> Result<ValueFact<'a>, OpError> {
    inputs
        .get(index)
        .copied()
        .flatten()
        .ok_or(OpError::MissingInput { index, name })
}

/// The input at `index` if present.
pub fn optional<'a>(inputs: &[Option<ValueFact<'a>>], index: usize) -> Option<ValueFact<'a>> {
    inputs.get(index).copied().flatten()
}

/// Checks that an input has one of the allowed dtypes.
pub fn expect_dtype(
    fact: &ValueFact,
    index: usize,
    name: &'static str,
    allowed: &[DType],
) -> Result<(), OpError> {
    if allowed.contains(&fact.dtype) {
        return Ok(());
    }
    let expected: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(OpError::DType {
        index,
        name,
        expected: expected.join(" or "),
        actual: fact.dtype,
    })
}
