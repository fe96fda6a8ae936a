//! Reduction kernels: ReduceMean, ReduceSum and ReduceMax over a set of axes.
//!
//! Axes come from the attribute form (`Reduce::axes`) or the optional i64 `axes` input;
//! none, or an empty list, reduces every axis unless `noop_with_empty_axes` makes the op
//! the identity. Reducing an empty set of values follows the ONNX spec (clarified in onnx
//! PR #5568, opset 18/20 docs): ReduceSum gives 0, ReduceMax the lowest value of the type
//! (-inf for floats, i64::MIN for i64), and ReduceMean, which the spec leaves undefined,
//! gives NaN for floats as the ONNX reference implementation (numpy's mean) does, and an
//! error for i64, which has no NaN.

use super::elementwise::{checked_len, expect_dtype_in, nan_max};
use super::{i64_operand, optional, required};
use concord_core::op::ArgReduce;
use concord_core::shape::normalize_axes;
use concord_core::shape::normalize_axis;
use concord_core::{DType, Op, OpError, Shape, Tensor, TensorData};

/// Runs one reduction op.
pub(crate) fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    if let Op::ArgMax(attrs) = op {
        return arg_max(attrs, required(inputs, 0, "data")?);
    }
    let (kind, attrs) = match op {
        Op::ReduceMean(a) => (Kind::Mean, a),
        Op::ReduceSum(a) => (Kind::Sum, a),
        Op::ReduceMax(a) => (Kind::Max, a),
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a reduction",
                other.name()
            )))
        }
    };
    let data = required(inputs, 0, "data")?;
    expect_dtype_in(data, 0, "data", &[DType::F32, DType::F16, DType::I64])?;
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
    match data.data() {
        TensorData::I64(values) => reduce_i64(kind, &plan, values),
        _ => {
            let values = plan.accumulate(&data.to_f64_vec(), kind.float_start(), |acc, v| {
                kind.float_step(acc, v)
            });
            let out = values
                .into_iter()
                .map(|acc| kind.float_finish(acc, plan.count))
                .collect();
            Tensor::from_f64(data.dtype(), plan.out_shape, out)
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Mean,
    Sum,
    Max,
}

impl Kind {
    fn float_start(self) -> f64 {
        match self {
            Kind::Mean | Kind::Sum => 0.0,
            Kind::Max => f64::NEG_INFINITY,
        }
    }

    fn float_step(self, acc: f64, v: f64) -> f64 {
        match self {
            Kind::Mean | Kind::Sum => acc + v,
            Kind::Max => nan_max(acc, v),
        }
    }

    /// The output from the accumulator over `count` values. For an empty Mean, 0/0 is NaN.
    fn float_finish(self, acc: f64, count: usize) -> f64 {
        match self {
            Kind::Mean => acc / count as f64,
            Kind::Sum | Kind::Max => acc,
        }
    }
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

/// The i64 reductions, exactly: Sum wraps on overflow like Add; Mean sums in i128 (which
/// cannot overflow for any tensor that fits in memory) and truncates toward zero.
fn reduce_i64(kind: Kind, plan: &Plan, values: &[i64]) -> Result<Tensor, OpError> {
    let out: Vec<i64> = match kind {
        Kind::Sum => plan.accumulate(values, 0i64, i64::wrapping_add),
        Kind::Max => plan.accumulate(values, i64::MIN, i64::max),
        Kind::Mean => {
            if plan.count == 0 && plan.out_shape.numel() > 0 {
                return Err(OpError::Shape(format!(
                    "ReduceMean: the mean of an empty set of i64 values is undefined (reducing \
                     to output shape {} over zero elements)",
                    plan.out_shape
                )));
            }
            let count = plan.count.max(1) as i128;
            plan.accumulate(values, 0i128, |acc, v| acc + i128::from(v))
                .into_iter()
                // The mean of i64 values lies between their min and max, so it fits in i64.
                .map(|sum| i64::try_from(sum / count).unwrap_or(0))
                .collect()
        }
    };
    Tensor::from_parts(plan.out_shape.clone(), TensorData::I64(out))
}

/// ArgMax: the index of the largest value along one axis, the first of equal ones (the last
/// with `select_last_index`). A NaN counts as larger than every number, as numpy's argmax
/// (the ONNX reference implementation) has it.
fn arg_max(attrs: &ArgReduce, data: &Tensor) -> Result<Tensor, OpError> {
    expect_dtype_in(data, 0, "data", &[DType::F32, DType::F16, DType::I64])?;
    let dims = data.dims();
    let axis = normalize_axis(attrs.axis, dims.len()).map_err(|e| OpError::Attribute {
        name: "axis",
        detail: format!(
            "ArgMax: axis {} for shape {}: {e}",
            attrs.axis,
            data.shape()
        ),
    })?;
    let len = dims[axis];
    if len == 0 {
        return Err(OpError::Shape(format!(
            "ArgMax: axis {axis} of input 0 (data) {} is empty, so it has no largest value",
            data.shape()
        )));
    }
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    // i64 values are compared exactly; floats widen to f64 exactly.
    let keys: Vec<f64> = match data.data() {
        TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
        _ => data.to_f64_vec(),
    };
    let exact = data.as_i64();
    let greater = |a: usize, b: usize| -> bool {
        match exact {
            Some(v) => v[a] > v[b],
            None => (keys[a].is_nan() && !keys[b].is_nan()) || keys[a] > keys[b],
        }
    };
    let equal = |a: usize, b: usize| -> bool {
        match exact {
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
                if greater(at(k), at(best)) || (attrs.select_last_index && equal(at(k), at(best))) {
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
