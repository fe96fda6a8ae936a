//! Ops that rearrange or replicate elements into a new layout: Transpose, Pad (constant
//! mode) and Expand.

use super::{axes_in_rank, int_list, numel, strided_sources, take, take_or_fill};
use crate::ops::{optional, required};
use concord_core::op::PadMode;
use concord_core::{broadcast_shapes, OpError, Shape, Tensor};

/// Transpose: output axis i is input axis perm[i]; without `perm` the axes are reversed.
pub(super) fn transpose(
    perm: Option<&[i64]>,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let rank = data.rank();
    let perm: Vec<usize> = match perm {
        Some(p) => checked_perm(p, rank)?,
        None => (0..rank).rev().collect(),
    };
    let in_strides = data.shape().strides();
    let dims: Vec<usize> = perm.iter().map(|&p| data.dims()[p]).collect();
    let strides: Vec<i64> = perm.iter().map(|&p| in_strides[p] as i64).collect();
    let sources = strided_sources(&dims, 0, &strides)?;
    Tensor::from_parts(Shape(dims), take(data.data(), &sources)?)
}

/// Checks that `perm` is a permutation of 0..rank.
fn checked_perm(perm: &[i64], rank: usize) -> Result<Vec<usize>, OpError> {
    let bad = || OpError::Attribute {
        name: "perm",
        detail: format!("{perm:?} is not a permutation of the {rank} axes 0..{rank}"),
    };
    if perm.len() != rank {
        return Err(bad());
    }
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &p in perm {
        let p = usize::try_from(p).map_err(|_| bad())?;
        match seen.get_mut(p) {
            Some(s) if !*s => *s = true,
            _ => return Err(bad()),
        }
        out.push(p);
    }
    Ok(out)
}

/// Pad in every mode. `pads` is [begin per axis…, end per axis…] over `axes` (all axes
/// when omitted); negative pads crop. The constant fill is `constant_value` or zero (false).
pub(super) fn pad(mode: PadMode, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let pads = int_list(required(inputs, 1, "pads")?, 1, "pads")?;
    let rank = data.rank();
    let axes = match optional(inputs, 3) {
        Some(t) => axes_in_rank(&int_list(t, 3, "axes")?, rank, "axes")?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(OpError::Shape(format!(
            "Pad's pads {pads:?} must have 2 entries per padded axis ({} axes)",
            axes.len()
        )));
    }
    let fill = match optional(inputs, 2) {
        Some(v) => {
            if v.dtype() != data.dtype() {
                return Err(OpError::DType {
                    index: 2,
                    name: "constant_value",
                    expected: data.dtype().name().into(),
                    actual: v.dtype(),
                });
            }
            if v.len() != 1 {
                return Err(OpError::Shape(format!(
                    "Pad's constant_value must be one element, got shape {}",
                    v.shape()
                )));
            }
            v.clone()
        }
        None => Tensor::zeros(data.dtype(), Shape::scalar()),
    };

    let mut begins = vec![0i64; rank];
    let mut out_dims = data.dims().to_vec();
    for (i, &axis) in axes.iter().enumerate() {
        let (b, e) = (pads[i], pads[i + axes.len()]);
        let extent = (data.dims()[axis] as i128) + b as i128 + e as i128;
        out_dims[axis] = usize::try_from(extent).map_err(|_| {
            OpError::Shape(format!(
                "Pad's pads {pads:?} leave axis {axis} of shape {} with extent {extent}",
                data.shape()
            ))
        })?;
        begins[axis] = b;
    }

    // Output coordinate c reads input coordinate c - begin on every axis, or the fill when
    // that lands outside the input.
    let in_dims = data.dims();
    let in_strides = data.shape().strides();
    let n = numel(&out_dims)?;
    let mut sources = Vec::with_capacity(n);
    let mut coord = vec![0usize; rank];
    for _ in 0..n {
        let mut flat = Some(0usize);
        for k in 0..rank {
            // i128: a begin pad may be as extreme as INT64_MIN when the end pad offsets it.
            let c = coord[k] as i128 - begins[k] as i128;
            let c = source_coordinate(mode, c, in_dims[k] as i128, k, data.shape())?;
            flat = match (flat, c) {
                (Some(f), Some(c)) => Some(f + c * in_strides[k]),
                _ => None,
            };
        }
        sources.push(flat);
        for k in (0..rank).rev() {
            coord[k] += 1;
            if coord[k] < out_dims[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    Tensor::from_parts(
        Shape(out_dims),
        take_or_fill(data.data(), &sources, fill.data())?,
    )
}

/// Expand: broadcasts the input against `shape` in both directions (numpy rules), so a
/// target dim of 1 keeps the input's extent.
pub(super) fn expand(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "input")?;
    let spec = int_list(required(inputs, 1, "shape")?, 1, "shape")?;
    let target = spec
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<usize>, _>>()
        .map(Shape)
        .map_err(|_| OpError::Shape(format!("Expand's shape {spec:?} has a negative dim")))?;
    let out = broadcast_shapes(&[data.shape(), &target])?;

    // Input axes align to the output's back; a broadcast axis (input extent 1) and every
    // leading output axis read with stride 0.
    let offset = out.rank() - data.rank();
    let in_strides = data.shape().strides();
    let strides: Vec<i64> = (0..out.rank())
        .map(|k| match k.checked_sub(offset) {
            Some(i) if data.dims()[i] != 1 => in_strides[i] as i64,
            _ => 0,
        })
        .collect();
    let sources = strided_sources(out.dims(), 0, &strides)?;
    Tensor::from_parts(out, take(data.data(), &sources)?)
}

/// The input coordinate that output coordinate `c - begin` (here `c`) reads along an axis
/// of extent `len`, or None for the constant fill: `reflect` mirrors about the edge
/// elements (numpy's "reflect"), `edge` repeats them, `wrap` continues periodically.
fn source_coordinate(
    mode: PadMode,
    c: i128,
    len: i128,
    axis: usize,
    shape: &Shape,
) -> Result<Option<usize>, OpError> {
    if (0..len).contains(&c) {
        return Ok(Some(c as usize));
    }
    let picked = match mode {
        PadMode::Constant => return Ok(None),
        _ if len == 0 => {
            return Err(OpError::Shape(format!(
                "Pad: axis {axis} of input 0 (data) {shape} is empty, so {mode:?} padding has \
                 no element to repeat"
            )))
        }
        PadMode::Edge => c.clamp(0, len - 1),
        PadMode::Wrap => c.rem_euclid(len),
        PadMode::Reflect if len == 1 => 0,
        PadMode::Reflect => {
            // Mirror without repeating the edge: the pattern has period 2 * (len - 1).
            let period = 2 * (len - 1);
            let m = c.rem_euclid(period);
            if m < len {
                m
            } else {
                period - m
            }
        }
    };
    Ok(Some(picked as usize))
}
