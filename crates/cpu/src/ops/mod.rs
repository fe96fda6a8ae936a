//! Routes each [`Op`] to its family's kernel, and the operand helpers every kernel uses.

pub(crate) mod algebra;
mod attention;
mod control;
pub use control::MAX_LOOP_ITERATIONS;
mod conv;
mod deform;
mod elementwise;
mod gemm;
mod indexing;
mod loss;
mod matrix;
pub(crate) mod movement;
mod ngram;
mod norm;
mod pool;
mod quant;
mod random;
mod recurrent;
mod reduce;
mod resize;
mod roi;
mod sampling;
mod selection;
mod sequence;
mod signal;
mod spatial;

use concord_core::infer::infer_on_tensors;
use concord_core::op::Family;
use concord_core::{DType, Deadline, MemoryBudget, Op, OpError, ScheduleTree, Shape, Tensor};

/// Runs one op on concrete inputs (None for omitted optional inputs), returning exactly
/// `num_outputs` tensors, within the machine's default [`MemoryBudget`]. An If, Loop or
/// Scan schedules its subgraphs for this one run; a prepared partition has them already
/// ([`run_op_scheduled`]).
pub fn run_op(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    run_op_within(op, inputs, num_outputs, MemoryBudget::default())
}

/// [`run_op`] within `budget`: outputs the budget refuses are an
/// [`OpError::MemoryBudget`], found before any kernel runs ([`check_outputs_fit`]).
pub fn run_op_within(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
    budget: MemoryBudget,
) -> Result<Vec<Tensor>, OpError> {
    run_op_scheduled(op, &[], inputs, num_outputs, budget, None)
}

/// The one gate every reference kernel's output allocation passes: the op's outputs are
/// inferred from the concrete operands (their shapes, and the values of shape-like
/// operands such as Expand's shape, Pad's pads or Resize's sizes), and their bytes, counted
/// with checked arithmetic, with the f64 working copy a computing kernel holds next to
/// them, are checked against `budget` before the kernel allocates anything. An output
/// whose size depends on the data is not known here: NonZero's and Unique's are bounded by
/// their input, and a Loop's scan outputs are checked as they grow (`control.rs`).
/// Inference that fails leaves the kernel to report its own, more specific, error.
pub(crate) fn check_outputs_fit(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
    budget: MemoryBudget,
) -> Result<(), OpError> {
    let Ok(facts) = infer_on_tensors(op, inputs, num_outputs) else {
        return Ok(());
    };
    let known: Vec<(DType, Shape)> = facts
        .iter()
        .filter_map(|f| Some((f.dtype, Shape::from_sym(&f.shape)?)))
        .collect();
    // Kernels that compute (accumulate in f64, round once at the output) hold an f64 copy
    // of every output next to the output itself; kernels that only move elements
    // (Movement, Indexing) and control flow (whose body nodes pass this gate one by one)
    // do not.
    let working_copy = !matches!(
        op.family(),
        Family::Movement | Family::Indexing | Family::ControlFlow
    );
    let mut total = Some(0u64);
    let mut described = Vec::with_capacity(known.len());
    for (dtype, shape) in &known {
        let width = dtype.size_in_bytes() + if working_copy { 8 } else { 0 };
        total = total.and_then(|t| t.checked_add(bytes_of(width, shape.dims())?));
        described.push(format!("{dtype} {shape}"));
    }
    budget
        .check_bytes(total, || {
            let outputs = match described.len() {
                1 => format!("an output of {}", described[0]),
                _ => format!("outputs {}", concord_core::text::list(&described, 4)),
            };
            if working_copy {
                format!("{outputs} with the f64 working copy the reference computes it in")
            } else {
                outputs
            }
        })
        .map(|_| ())
}

/// `width` bytes for each element of `dims`, or None when the count overflows.
fn bytes_of(width: usize, dims: &[usize]) -> Option<u64> {
    dims.iter()
        .try_fold(width as u64, |acc, &d| acc.checked_mul(d as u64))
}

/// [`run_op`] with the schedules of the op's subgraphs made beforehand (one per
/// [`Op::subgraphs`], in order), or none (empty), to be made for this run, and the run's
/// deadline, if it has one: control flow hands it to its subgraphs' nodes, and the kernels
/// that can run long on small data (RoiAlign, DFT, STFT, the pools) check it in their
/// outer loop.
pub(crate) fn run_op_scheduled(
    op: &Op,
    subgraphs: &[ScheduleTree],
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
    budget: MemoryBudget,
    deadline: Option<Deadline>,
) -> Result<Vec<Tensor>, OpError> {
    check_outputs_fit(op, inputs, num_outputs, budget)?;
    let outputs = match op.family() {
        Family::Pool if matches!(op, Op::MaxPool(_)) => match op {
            Op::MaxPool(attrs) => pool::max_pool(attrs, inputs, num_outputs, deadline)?,
            other => return Err(not_in_family(other)),
        },
        Family::Linear if matches!(op, Op::CausalConvWithState { .. }) => {
            sequence::run(op, inputs, num_outputs)?
        }
        Family::Linear | Family::Pool | Family::Resize => vec![match op {
            Op::Conv(attrs) => conv::conv(attrs, inputs, budget)?,
            Op::Gemm(attrs) => gemm::gemm(attrs, inputs)?,
            Op::MatMul => gemm::matmul(inputs)?,
            Op::AveragePool(attrs) => pool::average_pool(attrs, inputs, deadline)?,
            Op::GlobalAveragePool => pool::global_average_pool(inputs)?,
            Op::GlobalMaxPool => pool::global_pool(inputs, None)?,
            Op::GlobalLpPool { p } => pool::global_pool(inputs, Some(*p))?,
            Op::LpPool(attrs, p) => pool::lp_pool(attrs, *p, inputs, deadline)?,
            Op::Resize(attrs) => resize::resize(attrs, inputs, budget)?,
            Op::ConvTranspose(attrs) => conv::conv_transpose(attrs, inputs, budget)?,
            Op::MaxUnpool {
                kernel_shape,
                pads,
                strides,
            } => pool::max_unpool(kernel_shape, pads, strides, inputs)?,
            Op::Col2Im {
                dilations,
                pads,
                strides,
            } => conv::col2im(dilations, pads, strides, inputs)?,
            other => return Err(not_in_family(other)),
        }],
        Family::Unary | Family::Binary | Family::Select => vec![elementwise::run(op, inputs)?],
        Family::Normalization => match op {
            Op::Attention { .. } | Op::RotaryEmbedding { .. } => {
                attention::run(op, inputs, num_outputs)?
            }
            Op::SwiGLU { .. } | Op::LinearAttention { .. } => {
                sequence::run(op, inputs, num_outputs)?
            }
            Op::NegativeLogLikelihoodLoss { .. } | Op::SoftmaxCrossEntropyLoss { .. } => {
                loss::run(op, inputs, num_outputs)?
            }
            _ => norm::run(op, inputs, num_outputs)?,
        },
        Family::Quantization => quant::run(op, inputs, num_outputs, budget)?,
        Family::Reduce => vec![reduce::run(op, inputs)?],
        Family::Movement => movement::run(op, inputs, num_outputs)?,
        Family::Indexing => indexing::run(op, inputs, num_outputs)?,
        Family::Recurrent => recurrent::run(op, inputs, num_outputs)?,
        Family::LinearAlgebra => algebra::run(op, inputs)?,
        Family::ControlFlow => control::run(op, subgraphs, inputs, num_outputs, budget, deadline)?,
        Family::Sampling => vec![sampling::run(op, inputs, budget, deadline)?],
        Family::Signal => vec![signal::run(op, inputs, budget, deadline)?],
        Family::Random => vec![random::run(op, inputs)?],
    };
    if outputs.len() != num_outputs {
        return Err(OpError::Shape(format!(
            "{} produced {} outputs, the node declares {}",
            op.name(),
            outputs.len(),
            num_outputs
        )));
    }
    Ok(outputs)
}

/// The products of the axes before and after `axis` of an existing tensor's `dims`, for a
/// walk over its own elements as (outer, `dims[axis]`, inner) whose output is sized by the
/// tensor's length, not by these. With elements, each product is at most the length, so it
/// fits; an empty tensor may have dims whose partial products do not (`[2^40, 2^40, 0]`), and
/// walking its 2^80 empty blocks would be a hang even where the product did not overflow, so
/// an empty tensor walks nothing: (0, 0).
pub(crate) fn walk_extents(dims: &[usize], axis: usize) -> (usize, usize) {
    if dims.contains(&0) {
        return (0, 0);
    }
    (
        dims[..axis].iter().product(),
        dims[axis + 1..].iter().product(),
    )
}

/// The product of `dims` of an existing tensor (a part of its shape) for a walk over its own
/// elements: 0 when any of the tensor's `all` dims is 0 (see [`walk_extents`]).
pub(crate) fn walk_product(all: &[usize], dims: &[usize]) -> usize {
    if all.contains(&0) {
        0
    } else {
        dims.iter().product()
    }
}

/// The error of a family's router handed an op of another family (the op table and the
/// router disagree).
pub(crate) fn not_in_family(op: &Op) -> OpError {
    OpError::Unsupported(format!(
        "{} ({:?} family) has no reference kernel in that family",
        op.name(),
        op.family()
    ))
}

/// The input at `index`, or a MissingInput error naming it.
pub(crate) fn required<'a>(
    inputs: &[Option<&'a Tensor>],
    index: usize,
    name: &'static str,
) -> Result<&'a Tensor, OpError> {
    inputs
        .get(index)
        .copied()
        .flatten()
        .ok_or(OpError::MissingInput { index, name })
}

/// The input at `index` if present.
pub(crate) fn optional<'a>(inputs: &[Option<&'a Tensor>], index: usize) -> Option<&'a Tensor> {
    inputs.get(index).copied().flatten()
}

/// Checks that a tensor is of a floating-point dtype (f32 or f16).
pub(crate) fn expect_float(t: &Tensor, index: usize, name: &'static str) -> Result<(), OpError> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(OpError::DType {
            index,
            name,
            expected: "f32 or f16".into(),
            actual: t.dtype(),
        })
    }
}

/// Reads an i64 operand (shape, axes, pads, indices) as a list.
pub(crate) fn i64_operand(
    t: &Tensor,
    index: usize,
    name: &'static str,
) -> Result<Vec<i64>, OpError> {
    t.to_i64_vec().ok_or(OpError::DType {
        index,
        name,
        expected: DType::I64.name().into(),
        actual: t.dtype(),
    })
}
