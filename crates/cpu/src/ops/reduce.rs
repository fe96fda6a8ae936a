//! Reduction kernels: the Reduce* ops over a set of axes, and ArgMax / ArgMin.
//!
//! Axes come from the attribute form (`Reduce::axes`) or the optional i64 `axes` input;
//! none, or an empty list, reduces every axis unless `noop_with_empty_axes` makes the op
//! the identity. Reducing an empty set of values follows the ONNX spec (clarified in onnx
//! PR #5568, opset 18/20 docs): the sums give 0, ReduceProd 1, ReduceMax the lowest value
//! of the type (-inf for floats), ReduceMin the highest, ReduceLogSum and ReduceLogSumExp
//! -inf, and ReduceMean, which the spec leaves undefined, gives NaN for floats as the ONNX
//! reference implementation (numpy's mean) does, and an error for integers, which have no
//! NaN.

use super::elementwise::{checked_len, expect_accepts, nan_max, nan_min};
use super::{i64_operand, optional, required};
use concord_core::op::{Accepts, ArgReduce, ReduceKind};
use concord_core::shape::normalize_axes;
use concord_core::shape::normalize_axis;
use concord_core::{DType, Op, OpError, Shape, Tensor, TensorData};

/// Runs one reduction op.
pub(crate) fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let (kind, attrs) = match op {
        Op::ArgMax(attrs) => return arg_reduce(attrs, true, required(inputs, 0, "data")?),
        Op::ArgMin(attrs) => return arg_reduce(attrs, false, required(inputs, 0, "data")?),
        Op::Reduce(kind, attrs) => (*kind, attrs),
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a reduction",
                other.name()
            )))
        }
    };
    let data = required(inputs, 0, "data")?;
    if data.dtype() == DType::Bool && !matches!(kind, ReduceKind::Max | ReduceKind::Min) {
        return Err(OpError::DType {
            index: 0,
            name: "data",
            expected: "a numeric type (bool only for ReduceMax and ReduceMin)".into(),
            actual: data.dtype(),
        });
    }
    let axes = match (&attrs.axes, optional(inputs, 1)) {
        (Some(attr), Some(input)) => {
            let given = i64_operand(input, 1, "axes")?;
            if &given != attr {
                return Err(OpError::Attribute {
                    name: "axes",
                    detail: format!(
                        "{}: the axes attribute {attr:?} and the axes input {given:?} disagree",
                        op.name()
                    ),
                });
            }
            given
        }
        (Some(attr), None) => attr.clone(),
        (None, Some(input)) => {
            if input.rank() != 1 {
                return Err(OpError::Shape(format!(
                    "{}: input 1 (axes) must be 1-D, it has shape {}",
                    op.name(),
                    input.shape()
                )));
            }
            i64_operand(input, 1, "axes")?
        }
        (None, None) => Vec::new(),
    };
    if axes.is_empty() && attrs.noop_with_empty_axes {
        return Ok(data.clone());
    }
    let reduced = reduced_axes(op.name(), &axes, data)?;
    let plan = Plan::new(data.shape(), &reduced, attrs.keepdims)?;
    if let Some(values) = data.to_i128_vec() {
        if let Some(out) = reduce_exact(kind, &plan, &values, data.dtype())? {
            return Tensor::from_i128(data.dtype(), plan.out_shape, out);
        }
    }
    let values = data.to_f64_vec();
    let out = reduce_float(kind, &plan, &values);
    Tensor::from_f64(data.dtype(), plan.out_shape, out)
}

/// The float reductions, in f64. Empty sets give each op's identity: 0 for the sums and
/// norms, 1 for Prod, -inf for Max, LogSum and LogSumExp (ln 0), +inf for Min, NaN for Mean.
fn reduce_float(kind: ReduceKind, plan: &Plan, values: &[f64]) -> Vec<f64> {
    let sum = |f: fn(f64) -> f64| plan.accumulate(values, 0.0, move |acc, v| acc + f(v));
    match kind {
        ReduceKind::Sum => sum(|v| v),
        ReduceKind::Mean => sum(|v| v)
            .into_iter()
            .map(|acc| acc / plan.count as f64)
            .collect(),
        ReduceKind::Max => plan.accumulate(values, f64::NEG_INFINITY, nan_max),
        ReduceKind::Min => plan.accumulate(values, f64::INFINITY, nan_min),
        ReduceKind::Prod => plan.accumulate(values, 1.0, |acc, v| acc * v),
        ReduceKind::L1 => sum(f64::abs),
        ReduceKind::L2 => sum(|v| v * v).into_iter().map(f64::sqrt).collect(),
        ReduceKind::SumSquare => sum(|v| v * v),
        ReduceKind::LogSum => sum(|v| v).into_iter().map(f64::ln).collect(),
        ReduceKind::LogSumExp => {
            // max + ln Σ exp(v - max): no overflow for large values. A cell whose max is
            // ±inf or NaN takes the plain formula, which is then exact (or NaN).
            let max = plan.accumulate(values, f64::NEG_INFINITY, nan_max);
            let mut acc = vec![0.0; max.len()];
            for (&cell, &v) in plan.cell_of.iter().zip(values) {
                let m = max[cell];
                acc[cell] += if m.is_finite() {
                    (v - m).exp()
                } else {
                    v.exp()
                };
            }
            acc.into_iter()
                .zip(max)
                .map(|(s, m)| if m.is_finite() { m + s.ln() } else { s.ln() })
                .collect()
        }
    }
}

/// The integer (and bool) reductions that have an exact form, in i128: Sum, L1, SumSquare
/// and Prod wrap to the type's width like Add and Mul; Mean truncates toward zero (the
/// mean lies between the min and the max, so it fits). None for the ones with a root or
/// a log (L2, LogSum, LogSumExp), which compute in f64 and truncate.
fn reduce_exact(
    kind: ReduceKind,
    plan: &Plan,
    values: &[i128],
    dtype: DType,
) -> Result<Option<Vec<i128>>, OpError> {
    let (lo, hi) = dtype.integer_range().unwrap_or((i128::MIN, i128::MAX));
    Ok(Some(match kind {
        ReduceKind::Sum => plan.accumulate(values, 0, i128::wrapping_add),
        ReduceKind::L1 => plan.accumulate(values, 0, |acc, v| acc.wrapping_add(v.abs())),
        ReduceKind::SumSquare => {
            plan.accumulate(values, 0, |acc, v| acc.wrapping_add(v.wrapping_mul(v)))
        }
        ReduceKind::Prod => plan.accumulate(values, 1, i128::wrapping_mul),
        // Empty: the lowest value of the type for Max, the highest for Min (bool: false
        // and true).
        ReduceKind::Max => plan.accumulate(values, lo, i128::max),
        ReduceKind::Min => plan.accumulate(values, hi, i128::min),
        ReduceKind::Mean => {
            if plan.count == 0 && plan.out_shape.numel() > 0 {
                return Err(OpError::Shape(format!(
                    "ReduceMean: the mean of an empty set of {dtype} values is undefined \
                     (reducing to output shape {} over zero elements)",
                    plan.out_shape
                )));
            }
            let count = plan.count.max(1) as i128;
            plan.accumulate(values, 0, |acc, v| acc + v)
                .into_iter()
                .map(|sum| sum / count)
                .collect()
        }
        ReduceKind::L2 | ReduceKind::LogSum | ReduceKind::LogSumExp => return Ok(None),
    }))
}

/// Which axes of `data` are reduced: every axis when `axes` is empty.
fn reduced_axes(op: &str, axes: &[i64], data: &Tensor) -> Result<Vec<bool>, OpError> {
    let rank = data.rank();
    if axes.is_empty() {
        return Ok(vec![true; rank]);
    }
    let resolved = normalize_axes(axes, rank).map_err(|e| OpError::Attribute {
        name: "axes",
        detail: format!(
            "{op}: axes {axes:?} are invalid for input 0 (data) of shape {}: {e}",
            data.shape()
        ),
    })?;
    let mut reduced = vec![false; rank];
    for a in resolved {
        // normalize_axes returned a < rank.
        reduced[a] = true;
    }
    Ok(reduced)
}

/// Where each input element goes in the output, and how many values meet in each cell.
#[derive(Debug)]
struct Plan {
    out_shape: Shape,
    /// Output cell of every input element, in row-major input order.
    cell_of: Vec<usize>,
    /// Number of input elements per output cell (the product of the reduced extents).
    count: usize,
}

impl Plan {
    fn new(shape: &Shape, reduced: &[bool], keepdims: bool) -> Result<Self, OpError> {
        let dims = shape.dims();
        let kept: Vec<usize> = dims
            .iter()
            .zip(reduced)
            .map(|(&d, &r)| if r { 1 } else { d })
            .collect();
        let out_shape = if keepdims {
            Shape::new(kept.clone())
        } else {
            Shape::new(
                dims.iter()
                    .zip(reduced)
                    .filter(|(_, &r)| !r)
                    .map(|(&d, _)| d)
                    .collect::<Vec<_>>(),
            )
        };
        let count = dims
            .iter()
            .zip(reduced)
            .filter(|(_, &r)| r)
            .map(|(&d, _)| d)
            .product();
        let n = checked_len(shape)?;
        // The output cell of an input coordinate is its row-major index in `kept`, with
        // reduced coordinates set to 0; `keepdims` only changes the shape, not the order.
        let mut cell_of = Vec::with_capacity(n);
        let mut coords = vec![0usize; dims.len()];
        for _ in 0..n {
            let mut cell = 0;
            for (axis, &c) in coords.iter().enumerate() {
                let c = if reduced[axis] { 0 } else { c };
                cell = cell * kept[axis] + c;
            }
            cell_of.push(cell);
            for axis in (0..coords.len()).rev() {
                coords[axis] += 1;
                if coords[axis] < dims[axis] {
                    break;
                }
                coords[axis] = 0;
            }
        }
        Ok(Plan {
            out_shape,
            cell_of,
            count,
        })
    }

    /// Folds every input value into its output cell, starting each cell from `start`.
    fn accumulate<T: Copy, A: Copy>(
        &self,
        values: &[T],
        start: A,
        step: impl Fn(A, T) -> A,
    ) -> Vec<A> {
        let mut acc = vec![start; self.out_shape.numel()];
        for (&cell, &v) in self.cell_of.iter().zip(values) {
            acc[cell] = step(acc[cell], v);
        }
        acc
    }
}

/// ArgMax (`largest`) and ArgMin: the index of the largest (smallest) value along one
/// axis, the first of equal ones (the last with `select_last_index`). A NaN counts as more
/// extreme than every number, as numpy's argmax and argmin (the ONNX reference
/// implementation) have it.
fn arg_reduce(attrs: &ArgReduce, largest: bool, data: &Tensor) -> Result<Tensor, OpError> {
    let op = if largest { "ArgMax" } else { "ArgMin" };
    expect_accepts(data, 0, "data", Accepts::Numeric)?;
    let dims = data.dims();
    let axis = normalize_axis(attrs.axis, dims.len()).map_err(|e| OpError::Attribute {
        name: "axis",
        detail: format!("{op}: axis {} for shape {}: {e}", attrs.axis, data.shape()),
    })?;
    let len = dims[axis];
    if len == 0 {
        return Err(OpError::Shape(format!(
            "{op}: axis {axis} of input 0 (data) {} is empty, so it has no extreme value",
            data.shape()
        )));
    }
    // The axis has elements, so an empty input has no outer or inner block: nothing to pick.
    let (outer, inner) = super::walk_extents(dims, axis);
    // Integers are compared exactly; floats widen to f64 exactly.
    let exact = data.to_i128_vec();
    let keys: Vec<f64> = if exact.is_some() {
        Vec::new()
    } else {
        data.to_f64_vec()
    };
    // `better(a, b)`: a is strictly more extreme than b.
    let better = |a: usize, b: usize| -> bool {
        match &exact {
            Some(v) => {
                if largest {
                    v[a] > v[b]
                } else {
                    v[a] < v[b]
                }
            }
            None => {
                let (x, y) = (keys[a], keys[b]);
                (x.is_nan() && !y.is_nan()) || if largest { x > y } else { x < y }
            }
        }
    };
    let equal = |a: usize, b: usize| -> bool {
        match &exact {
            Some(v) => v[a] == v[b],
            None => keys[a] == keys[b] || (keys[a].is_nan() && keys[b].is_nan()),
        }
    };
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let mut best = 0;
            for k in 1..len {
                if better(at(k), at(best)) || (attrs.select_last_index && equal(at(k), at(best))) {
                    best = k;
                }
            }
            out.push(best as i64);
        }
    }
    let mut shape = dims.to_vec();
    if attrs.keepdims {
        shape[axis] = 1;
    } else {
        shape.remove(axis);
    }
    Tensor::from_parts(Shape::new(shape), TensorData::I64(out))
}
