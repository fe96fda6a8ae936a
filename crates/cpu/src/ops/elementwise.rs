//! Elementwise kernels: broadcasting binary arithmetic and comparison, unary maths and
//! activations, Clip and Where.
//!
//! Float operands are widened to f64, computed there and rounded once at the output; i64
//! operands are computed in exact integer arithmetic, wrapping on overflow as numpy and
//! two's-complement hardware do, with division by zero reported as an error.

mod binary;
mod erf;
mod unary;

use super::{optional, required};
use concord_core::shape::broadcast_index;
use concord_core::{broadcast_shapes, DType, Op, OpError, Shape, Tensor, TensorData};

/// Runs one elementwise op.
pub(crate) fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    match op {
        Op::Binary(b) => binary::run(*b, inputs),
        Op::Unary(u) => unary::run(*u, inputs),
        Op::Clip => clip(inputs),
        Op::Where => select(inputs),
        other => Err(OpError::Unsupported(format!(
            "{} is not an elementwise op",
            other.name()
        ))),
    }
}

/// For every element of `out` in row-major order, the flat index of the element of an
/// operand of shape `input` that broadcasts to it.
///
/// Fails (rather than panicking) when `input` does not broadcast to `out`, and when the
/// output is too large to index, so that a huge broadcast is an error instead of an abort.
pub(super) fn broadcast_map(out: &Shape, input: &Shape) -> Result<Vec<usize>, OpError> {
    let compatible = input.rank() <= out.rank()
        && input
            .dims()
            .iter()
            .zip(&out.dims()[out.rank() - input.rank()..])
            .all(|(&i, &o)| i == 1 || i == o);
    if !compatible {
        return Err(OpError::Shape(format!(
            "shape {input} does not broadcast to {out}"
        )));
    }
    let n = checked_len(out)?;
    let mut map = Vec::new();
    map.try_reserve_exact(n)
        .map_err(|_| OpError::Shape(format!("output shape {out} does not fit in memory")))?;
    let mut coords = vec![0usize; out.rank()];
    for _ in 0..n {
        map.push(broadcast_index(&coords, input));
        // Advance the row-major odometer; axis < rank, so the indexing cannot fail.
        for axis in (0..coords.len()).rev() {
            coords[axis] += 1;
            if coords[axis] < out.dims()[axis] {
                break;
            }
            coords[axis] = 0;
        }
    }
    Ok(map)
}

/// The element count of a shape, or an error naming it when the count overflows.
pub(super) fn checked_len(shape: &Shape) -> Result<usize, OpError> {
    shape
        .checked_numel()
        .ok_or_else(|| OpError::Shape(format!("shape {shape} has too many elements")))
}

/// The broadcast shape of an op's operands, with an error that names the op and every
/// operand's index, name and shape.
pub(super) fn broadcast_operands(
    op: &'static str,
    operands: &[(usize, &'static str, &Tensor)],
) -> Result<Shape, OpError> {
    let shapes: Vec<&Shape> = operands.iter().map(|(_, _, t)| t.shape()).collect();
    broadcast_shapes(&shapes).map_err(|e| {
        let described: Vec<String> = operands
            .iter()
            .map(|(i, name, t)| format!("input {i} ({name}) {}", t.shape()))
            .collect();
        OpError::Shape(format!(
            "{op}: {} cannot be broadcast together: {e}",
            described.join(", ")
        ))
    })
}

/// Checks that `t` has the same dtype as the operand it is combined with.
pub(super) fn expect_same_dtype(
    t: &Tensor,
    index: usize,
    name: &'static str,
    expected: DType,
    expected_from: &str,
) -> Result<(), OpError> {
    if t.dtype() == expected {
        return Ok(());
    }
    Err(OpError::DType {
        index,
        name,
        expected: format!("{expected} (the dtype of {expected_from})"),
        actual: t.dtype(),
    })
}

/// Checks that `t` has one of the `allowed` dtypes.
pub(crate) fn expect_dtype_in(
    t: &Tensor,
    index: usize,
    name: &'static str,
    allowed: &[DType],
) -> Result<(), OpError> {
    if allowed.contains(&t.dtype()) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(OpError::DType {
        index,
        name,
        expected: names.join(" or "),
        actual: t.dtype(),
    })
}

/// The larger of two values, NaN if either is NaN (IEEE `maximum`, unlike `f64::max`,
/// which drops a NaN operand).
pub(super) fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a >= b {
        a
    } else {
        b
    }
}

/// The smaller of two values, NaN if either is NaN.
pub(super) fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

/// Clip: inputs X, min?, max?; the bounds are one-element tensors of X's dtype. A NaN in X
/// (or a NaN bound) gives NaN, and min > max sets every element to max, as the spec says.
fn clip(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    expect_dtype_in(x, 0, "input", &[DType::F32, DType::F16, DType::I64])?;
    let bound = |index: usize, name: &'static str| -> Result<Option<&Tensor>, OpError> {
        let Some(t) = optional(inputs, index) else {
            return Ok(None);
        };
        expect_same_dtype(t, index, name, x.dtype(), "input 0 (input)")?;
        if t.len() != 1 {
            return Err(OpError::Shape(format!(
                "Clip: input {index} ({name}) must be a scalar (rank 0 or one element), \
                 it has shape {}",
                t.shape()
            )));
        }
        Ok(Some(t))
    };
    let min = bound(1, "min")?;
    let max = bound(2, "max")?;
    match x.data() {
        TensorData::I64(values) => {
            let lo = min.and_then(|t| t.as_i64()).map_or(i64::MIN, |v| v[0]);
            let hi = max.and_then(|t| t.as_i64()).map_or(i64::MAX, |v| v[0]);
            let out = values.iter().map(|&v| v.max(lo).min(hi)).collect();
            Tensor::from_parts(x.shape().clone(), TensorData::I64(out))
        }
        _ => {
            // Bounds were checked to hold exactly one element of X's float dtype.
            let lo = min.map_or(f64::NEG_INFINITY, |t| t.to_f64_vec()[0]);
            let hi = max.map_or(f64::INFINITY, |t| t.to_f64_vec()[0]);
            let out = x
                .to_f64_vec()
                .into_iter()
                .map(|v| nan_min(nan_max(v, lo), hi))
                .collect();
            Tensor::from_f64(x.dtype(), x.shape().clone(), out)
        }
    }
}

/// Where: inputs condition (bool), X, Y of one dtype; picks X where the condition holds,
/// with three-way broadcasting.
fn select(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let cond = required(inputs, 0, "condition")?;
    let x = required(inputs, 1, "X")?;
    let y = required(inputs, 2, "Y")?;
    expect_dtype_in(cond, 0, "condition", &[DType::Bool])?;
    expect_same_dtype(y, 2, "Y", x.dtype(), "input 1 (X)")?;
    let out = broadcast_operands("Where", &[(0, "condition", cond), (1, "X", x), (2, "Y", y)])?;
    let c_map = broadcast_map(&out, cond.shape())?;
    let x_map = broadcast_map(&out, x.shape())?;
    let y_map = broadcast_map(&out, y.shape())?;
    let c = cond.as_bool().unwrap_or(&[]);
    fn pick<T: Copy>(c: &[bool], x: &[T], y: &[T], maps: [&[usize]; 3]) -> Vec<T> {
        let [cm, xm, ym] = maps;
        cm.iter()
            .zip(xm)
            .zip(ym)
            .map(|((&ci, &xi), &yi)| if c[ci] { x[xi] } else { y[yi] })
            .collect()
    }
    let maps = [c_map.as_slice(), x_map.as_slice(), y_map.as_slice()];
    let data = match (x.data(), y.data()) {
        (TensorData::F32(a), TensorData::F32(b)) => TensorData::F32(pick(c, a, b, maps)),
        (TensorData::F16(a), TensorData::F16(b)) => TensorData::F16(pick(c, a, b, maps)),
        (TensorData::I64(a), TensorData::I64(b)) => TensorData::I64(pick(c, a, b, maps)),
        (TensorData::Bool(a), TensorData::Bool(b)) => TensorData::Bool(pick(c, a, b, maps)),
        // expect_same_dtype above rules this out; kept as an error rather than a panic.
        _ => {
            return Err(OpError::DType {
                index: 2,
                name: "Y",
                expected: x.dtype().name().into(),
                actual: y.dtype(),
            })
        }
    };
    Tensor::from_parts(out, data)
}
