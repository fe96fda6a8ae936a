//! Ops that relabel a tensor's shape without moving any element: Reshape, Flatten, Squeeze,
//! Unsqueeze; and Shape, which reads the shape itself.

use super::{axes_in_rank, int_list, numel};
use crate::ops::{i64_operand, optional, required};
use concord_core::{OpError, Shape, Tensor};

/// Reshape. In `shape`, -1 (at most once) is inferred from the element count and 0 copies
/// the input's extent at the same position, unless `allowzero`, where 0 is a literal 0.
pub(super) fn reshape(allowzero: bool, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let spec = int_list(required(inputs, 1, "shape")?, 1, "shape")?;
    let dims = reshape_dims(data.dims(), &spec, allowzero)?;
    data.reshaped(Shape(dims))
}

/// The output dims of Reshape for a concrete input shape.
fn reshape_dims(input: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>, OpError> {
    let mismatch = |why: &str| {
        OpError::Shape(format!(
            "cannot reshape {} into [{}]: {why}",
            Shape::from(input),
            concord_core::text::list(spec, concord_core::text::LIST_ITEMS),
        ))
    };
    if spec.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(mismatch("more than one dim is -1"));
    }
    if allowzero && spec.contains(&0) && spec.contains(&-1) {
        return Err(mismatch("with allowzero, 0 and -1 cannot both appear"));
    }
    let mut out: Vec<Option<usize>> = Vec::with_capacity(spec.len());
    for (i, &d) in spec.iter().enumerate() {
        out.push(match d {
            -1 => None,
            0 if !allowzero => Some(*input.get(i).ok_or_else(|| {
                mismatch(&format!(
                    "0 at position {i} copies an input dim that does not exist"
                ))
            })?),
            // `d <= -1` would say the same: -1 took the first arm (the `<=` mutant is
            // excluded in .cargo/mutants.toml for that reason).
            d if d < -1 => return Err(mismatch(&format!("{d} is not a valid dim"))),
            d => Some(d as usize),
        });
    }
    let count = numel(input)?;
    let known = out
        .iter()
        .flatten()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| mismatch("the target has too many elements"))?;
    let inferred = if out.contains(&None) {
        if known == 0 {
            return Err(mismatch("-1 is ambiguous when another dim is 0"));
        }
        if count % known != 0 {
            return Err(mismatch(&format!(
                "{count} elements cannot be arranged with the other dims' product {known}"
            )));
        }
        count / known
    } else {
        if known != count {
            return Err(mismatch(&format!(
                "the input has {count} elements, the target {known}"
            )));
        }
        0
    };
    Ok(out.into_iter().map(|d| d.unwrap_or(inferred)).collect())
}

/// Flatten to 2-D: [prod(dims[..axis]), prod(dims[axis..])]; axis may equal the rank.
pub(super) fn flatten(axis: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "input")?;
    let rank = data.rank() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a > rank {
        return Err(OpError::Attribute {
            name: "axis",
            detail: format!("Flatten axis {axis} is out of range for rank {rank}"),
        });
    }
    let (outer, inner) = data.dims().split_at(a as usize);
    data.reshaped(Shape(vec![numel(outer)?, numel(inner)?]))
}

/// Squeeze: removes the listed axes, each of which must have extent 1, or every axis of
/// extent 1 when `axes` is omitted.
pub(super) fn squeeze(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let dims = data.dims();
    let axes = match optional(inputs, 1) {
        Some(t) => axes_in_rank(&axes_list(t)?, data.rank(), "axes")?,
        None => (0..dims.len()).filter(|&a| dims[a] == 1).collect(),
    };
    for &a in &axes {
        if dims[a] != 1 {
            return Err(OpError::Shape(format!(
                "Squeeze axis {a} of shape {} has extent {}, not 1",
                data.shape(),
                dims[a]
            )));
        }
    }
    let kept = (0..dims.len())
        .filter(|a| !axes.contains(a))
        .map(|a| dims[a])
        .collect();
    data.reshaped(Shape(kept))
}

/// Unsqueeze: inserts extent-1 axes at the listed positions of the output, whose rank is
/// the input rank plus the number of axes; negative axes count from the output's back.
pub(super) fn unsqueeze(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let axes = axes_list(required(inputs, 1, "axes")?)?;
    let out_rank = data.rank() + axes.len();
    let axes = axes_in_rank(&axes, out_rank, "axes")?;
    let mut rest = data.dims().iter();
    let dims = (0..out_rank)
        .map(|a| {
            if axes.contains(&a) {
                1
            } else {
                // There are exactly rank non-inserted positions, so this never runs dry.
                rest.next().copied().unwrap_or(1)
            }
        })
        .collect();
    data.reshaped(Shape(dims))
}

/// Shape: the input's dims `start..end` as a 1-D i64 tensor, the range clamped by core's
/// [`concord_core::shape_range`] (opset 15); an empty range gives an empty tensor.
pub(super) fn shape(
    start: i64,
    end: Option<i64>,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let dims = data.dims();
    let range = concord_core::shape_range(dims.len(), start, end);
    let selected = dims[range].iter().map(|&d| d as i64).collect();
    Ok(Tensor::vec_i64(selected))
}

/// Squeeze's and Unsqueeze's `axes` (input 1): 1-D, or a scalar naming one axis, as
/// onnxruntime and the ONNX reference implementation read it (see core's inference).
fn axes_list(t: &Tensor) -> Result<Vec<i64>, OpError> {
    if t.rank() > 1 {
        return Err(OpError::Shape(format!(
            "input 1 (axes) must be a 1-D i64 tensor or a scalar, got shape {}",
            t.shape()
        )));
    }
    i64_operand(t, 1, "axes")
}
