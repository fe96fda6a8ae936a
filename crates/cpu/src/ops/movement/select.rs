//! Slice and Gather: selecting elements by ranges and by index lists.

use super::{axes_in_rank, int_list, numel, strided_sources, take};
use crate::ops::{i64_operand, optional, required};
use concord_core::shape::normalize_axis;
use concord_core::{OpError, Shape, Tensor};
use std::cmp::Ordering;

/// Slice: for each listed axis, elements `start, start+step, …` up to but excluding `end`,
/// after the spec's adjustment: negative starts and ends count from the back, then starts
/// and ends are clamped to [0, dim] for positive steps and to [0, dim-1] and [-1, dim-1]
/// for negative ones. Axes not listed are kept whole.
pub(super) fn slice(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let starts = int_list(required(inputs, 1, "starts")?, 1, "starts")?;
    let ends = int_list(required(inputs, 2, "ends")?, 2, "ends")?;
    let rank = data.rank();
    let axes = match optional(inputs, 3) {
        Some(t) => int_list(t, 3, "axes")?,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = match optional(inputs, 4) {
        Some(t) => int_list(t, 4, "steps")?,
        None => vec![1; starts.len()],
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(OpError::Shape(format!(
            "Slice's starts, ends, axes and steps must have one entry per sliced axis, got \
             {}, {}, {} and {}",
            starts.len(),
            ends.len(),
            axes.len(),
            steps.len()
        )));
    }
    let axes = axes_in_rank(&axes, rank, "axes")?;

    // Unlisted axes: start 0, step 1, whole extent.
    let in_strides = data.shape().strides();
    let mut out_dims = data.dims().to_vec();
    let mut first = vec![0i64; rank];
    let mut step_of = vec![1i64; rank];
    for (i, &axis) in axes.iter().enumerate() {
        let range = SliceRange::resolve(starts[i], ends[i], steps[i], data.dims()[axis])?;
        out_dims[axis] = range.len;
        first[axis] = range.start;
        step_of[axis] = steps[i];
    }
    let base: i64 = first
        .iter()
        .zip(&in_strides)
        .map(|(&s, &stride)| s * stride as i64)
        .sum();
    let strides: Vec<i64> = step_of
        .iter()
        .zip(&in_strides)
        .map(|(&step, &stride)| step.saturating_mul(stride as i64))
        .collect();
    let sources = strided_sources(&out_dims, base, &strides)?;
    Tensor::from_parts(Shape(out_dims), take(data.data(), &sources)?)
}

/// One axis of a Slice after the spec's adjustment: first element and number of elements.
struct SliceRange {
    start: i64,
    len: usize,
}

impl SliceRange {
    fn resolve(start: i64, end: i64, step: i64, dim: usize) -> Result<SliceRange, OpError> {
        // i128 so that INT64_MIN / INT64_MAX bounds and steps cannot overflow.
        let d = dim as i128;
        let wrap = |v: i64| {
            let v = v as i128;
            if v < 0 {
                v + d
            } else {
                v
            }
        };
        let (s, e) = (wrap(start), wrap(end));
        let step = i128::from(step);
        let (s, len) = match step.cmp(&0) {
            Ordering::Equal => return Err(OpError::Shape("Slice's steps must not be 0".into())),
            Ordering::Greater => {
                let s = s.max(0).min(d);
                let e = e.max(0).min(d);
                let len = if e > s { (e - s - 1) / step + 1 } else { 0 };
                (s, len)
            }
            Ordering::Less => {
                // The spec clamps the end to [-1, dim-1] too; an end above dim-1 is left as it
                // is, since the range is empty either way (s <= dim-1 is not above it).
                let s = s.max(0).min(d - 1);
                let e = e.max(-1);
                let len = if s > e { (s - e - 1) / -step + 1 } else { 0 };
                (s, len)
            }
        };
        // Both values are bounded by `dim`, so the conversions cannot fail; an empty range
        // may have s == -1 (dim 0, negative step), which no element ever reads.
        Ok(SliceRange {
            start: i64::try_from(s).unwrap_or(0),
            len: usize::try_from(len).unwrap_or(0),
        })
    }
}

/// Gather: output dims are data[..axis] ++ indices.shape ++ data[axis+1..]; each index picks
/// a slice of `data` along `axis`, negative indices counting from the back.
pub(super) fn gather(axis: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let indices_t = required(inputs, 1, "indices")?;
    let indices = i64_operand(indices_t, 1, "indices")?;
    let axis = normalize_axis(axis, data.rank())?;
    let dims = data.dims();
    let extent = dims[axis];
    let resolved = indices
        .iter()
        .enumerate()
        .map(|(pos, &i)| resolve_index(i, pos, axis, extent))
        .collect::<Result<Vec<usize>, OpError>>()?;

    let outer = numel(&dims[..axis])?;
    let inner = numel(&dims[axis + 1..])?;
    let mut out_dims = dims[..axis].to_vec();
    out_dims.extend_from_slice(indices_t.dims());
    out_dims.extend_from_slice(&dims[axis + 1..]);
    let mut sources = Vec::with_capacity(numel(&out_dims)?);
    for o in 0..outer {
        for &i in &resolved {
            let start = (o * extent + i) * inner;
            sources.extend(start..start + inner);
        }
    }
    Tensor::from_parts(Shape(out_dims), take(data.data(), &sources)?)
}

/// A Gather index in [-extent, extent) resolved to [0, extent).
fn resolve_index(index: i64, pos: usize, axis: usize, extent: usize) -> Result<usize, OpError> {
    let e = extent as i64;
    let r = if index < 0 { index + e } else { index };
    if extent == 0 {
        return Err(OpError::Shape(format!(
            "Gather index {index} (element {pos} of indices) is out of range: axis {axis} has \
             extent 0, so no index is valid"
        )));
    }
    if r < 0 || r >= e {
        return Err(OpError::Shape(format!(
            "Gather index {index} (element {pos} of indices) is out of range for axis {axis} \
             of extent {extent}; valid indices are -{extent}..={}",
            e - 1
        )));
    }
    Ok(r as usize)
}
