//! Routes each [`Op`] to its family's kernel, and the operand helpers every kernel uses.

mod conv;
mod elementwise;
mod gemm;
mod matrix;
pub(crate) mod movement;
mod norm;
mod pool;
mod reduce;
mod resize;
mod spatial;

use concord_core::{DType, Op, OpError, Tensor};

/// Runs one op on concrete inputs (None for omitted optional inputs), returning exactly
/// `num_outputs` tensors.
pub fn run_op(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let outputs = match op {
        Op::Conv(attrs) => vec![conv::conv(attrs, inputs)?],
        Op::Gemm(attrs) => vec![gemm::gemm(attrs, inputs)?],
        Op::MatMul => vec![gemm::matmul(inputs)?],
        Op::MaxPool(attrs) => vec![pool::max_pool(attrs, inputs)?],
        Op::AveragePool(attrs) => vec![pool::average_pool(attrs, inputs)?],
        Op::GlobalAveragePool => vec![pool::global_average_pool(inputs)?],
        Op::Resize(attrs) => vec![resize::resize(attrs, inputs)?],
        Op::Add
        | Op::Sub
        | Op::Mul
        | Op::Div
        | Op::Pow
        | Op::Mod { .. }
        | Op::Equal
        | Op::Sqrt
        | Op::Exp
        | Op::Neg
        | Op::Abs
        | Op::Erf
        | Op::Relu
        | Op::Sigmoid
        | Op::Tanh
        | Op::HardSwish
        | Op::LeakyRelu { .. }
        | Op::HardSigmoid { .. }
        | Op::Clip
        | Op::Where => vec![elementwise::run(op, inputs)?],
        Op::Softmax { .. } | Op::LayerNormalization { .. } | Op::BatchNormalization { .. } => {
            vec![norm::run(op, inputs)?]
        }
        Op::ReduceMean(_) | Op::ReduceSum(_) | Op::ReduceMax(_) => vec![reduce::run(op, inputs)?],
        Op::Concat { .. }
        | Op::Split { .. }
        | Op::Slice
        | Op::Gather { .. }
        | Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Transpose { .. }
        | Op::Squeeze
        | Op::Unsqueeze
        | Op::Shape { .. }
        | Op::Cast { .. }
        | Op::Identity
        | Op::Dropout
        | Op::Constant { .. }
        | Op::Pad { .. }
        | Op::Expand => movement::run(op, inputs, num_outputs)?,
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

/// Why the reference cannot run `op` whatever its operands, if it cannot: attribute values
/// the IR represents but the reference does not implement. Asked when a net is built, so
/// such a model is refused then rather than at its first forward.
pub fn declines(op: &Op) -> Option<String> {
    let refused = match op {
        Op::Resize(attrs) => resize::check_supported(attrs),
        Op::Pad { mode } => movement::arrange::check_pad_mode(*mode),
        _ => Ok(()),
    };
    refused.err().map(|e| e.to_string())
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
