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
use concord_core::op::{Accepts, Variadic};
use concord_core::shape::broadcast_index;
use concord_core::{broadcast_shapes, DType, Op, OpError, Shape, Tensor, TensorData};

/// Runs one elementwise op.
pub(crate) fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    match op {
        Op::Binary(b) => binary::run(*b, inputs),
        Op::Unary(u) => unary::run(*u, inputs),
        Op::Clip => clip(inputs),
        Op::Where => select(inputs),
        Op::Variadic(v) => variadic(*v, inputs),
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

/// Checks that `t` has a dtype the op's table row accepts.
pub(crate) fn expect_accepts(
    t: &Tensor,
    index: usize,
    name: &'static str,
    accepts: Accepts,
) -> Result<(), OpError> {
    if accepts.allows(t.dtype()) {
        return Ok(());
    }
    Err(OpError::DType {
        index,
        name,
        expected: accepts.describe().into(),
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
    expect_accepts(x, 0, "input", Accepts::Numeric)?;
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
    match x.to_i128_vec() {
        Some(values) => {
            // Bounds were checked to hold one element of X's integer dtype.
            let first = |t: &Tensor| t.to_i128_vec().and_then(|v| v.first().copied());
            let lo = min.and_then(first).unwrap_or(i128::MIN);
            let hi = max.and_then(first).unwrap_or(i128::MAX);
            let out = values.into_iter().map(|v| v.max(lo).min(hi)).collect();
            Tensor::from_i128(x.dtype(), x.shape().clone(), out)
        }
        None => {
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
    let take_x: Vec<bool> = c_map
        .iter()
        .map(|&i| c.get(i).copied().unwrap_or(false))
        .collect();
    let data = TensorData::choose(&take_x, x.data(), &x_map, y.data(), &y_map)?;
    Tensor::from_parts(out, data)
}

/// Max, Min, Sum, Mean: the inputs broadcast together, combined elementwise left to right.
/// Max and Min propagate NaN (numpy's maximum and minimum); integers compare exactly.
fn variadic(op: Variadic, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let first = required(inputs, 0, "data_0")?;
    expect_accepts(first, 0, "data_0", op.accepts())?;
    let mut operands = Vec::with_capacity(inputs.len());
    for index in 0..inputs.len() {
        let t = required(inputs, index, "data")?;
        expect_same_dtype(t, index, "data", first.dtype(), "input 0 (data_0)")?;
        operands.push((index, "data", t));
    }
    let out = broadcast_operands(op.name(), &operands)?;
    let maps = operands
        .iter()
        .map(|(_, _, t)| broadcast_map(&out, t.shape()))
        .collect::<Result<Vec<_>, _>>()?;
    let n = checked_len(&out)?;
    if let (Variadic::Max | Variadic::Min, Some(_)) = (op, first.to_i128_vec()) {
        let mut acc: Vec<i128> = vec![
            if op == Variadic::Max {
                i128::MIN
            } else {
                i128::MAX
            };
            n
        ];
        for ((_, _, t), map) in operands.iter().zip(&maps) {
            let values = t.to_i128_vec().unwrap_or_default();
            for (a, &i) in acc.iter_mut().zip(map) {
                let v = values.get(i).copied().unwrap_or(*a);
                *a = if op == Variadic::Max {
                    (*a).max(v)
                } else {
                    (*a).min(v)
                };
            }
        }
        return Tensor::from_i128(first.dtype(), out, acc);
    }
    let start = match op {
        Variadic::Max => f64::NEG_INFINITY,
        Variadic::Min => f64::INFINITY,
        Variadic::Sum | Variadic::Mean => 0.0,
    };
    let mut acc = vec![start; n];
    for ((_, _, t), map) in operands.iter().zip(&maps) {
        let values = t.to_f64_vec();
        for (a, &i) in acc.iter_mut().zip(map) {
            let v = values.get(i).copied().unwrap_or(f64::NAN);
            *a = match op {
                Variadic::Max => nan_max(*a, v),
                Variadic::Min => nan_min(*a, v),
                Variadic::Sum | Variadic::Mean => *a + v,
            };
        }
    }
    if op == Variadic::Mean {
        let count = operands.len() as f64;
        acc.iter_mut().for_each(|a| *a /= count);
    }
    Tensor::from_f64(first.dtype(), out, acc)
}
