//! Data-movement kernels: ops that copy, select, rearrange or relabel elements without
//! arithmetic on them (Concat, Split, Slice, Gather, Reshape, Flatten, Transpose, Squeeze,
//! Unsqueeze, Shape, Cast, Identity, Dropout, Constant, Pad, Expand).
//!
//! Every op here works on every dtype and copies element bits exactly: kernels compute, for
//! each output element, which input element it comes from (a "source" index), and the
//! element buffer is rearranged by [`take`] without ever widening values to f64. Cast is the
//! one op that changes values, and it converts each pair of types directly.

pub(crate) mod arrange;
pub(crate) mod cast;
mod join;
mod reshape;
mod select;

use super::{i64_operand, required};
use concord_core::{DType, Op, OpError, Shape, Tensor, TensorData};

/// Runs one data-movement op, returning exactly `num_outputs` tensors.
pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let single = match op {
        Op::Concat { axis } => join::concat(*axis, inputs)?,
        Op::Split {
            axis,
            num_outputs: attr,
        } => return join::split(*axis, *attr, inputs, num_outputs),
        Op::Slice => select::slice(inputs)?,
        Op::Gather { axis } => select::gather(*axis, inputs)?,
        Op::Reshape { allowzero } => reshape::reshape(*allowzero, inputs)?,
        Op::Flatten { axis } => reshape::flatten(*axis, inputs)?,
        Op::Squeeze => reshape::squeeze(inputs)?,
        Op::Unsqueeze => reshape::unsqueeze(inputs)?,
        Op::Shape { start, end } => reshape::shape(*start, *end, inputs)?,
        Op::Transpose { perm } => arrange::transpose(perm.as_deref(), inputs)?,
        Op::Pad { mode } => arrange::pad(*mode, inputs)?,
        Op::Expand => arrange::expand(inputs)?,
        Op::Cast { to } => cast::cast(*to, inputs)?,
        Op::Identity => required(inputs, 0, "input")?.clone(),
        Op::Dropout => return dropout(inputs, num_outputs),
        Op::Constant { value } => value.clone(),
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a data-movement op",
                other.name()
            )))
        }
    };
    Ok(vec![single])
}

/// Dropout in inference mode: the output is the input and the optional mask is all true.
/// Training mode would need randomness the reference executor deliberately does not have.
fn dropout(inputs: &[Option<&Tensor>], num_outputs: usize) -> Result<Vec<Tensor>, OpError> {
    let data = required(inputs, 0, "data")?;
    if let Some(training) = super::optional(inputs, 2) {
        let flag = training.as_bool().ok_or(OpError::DType {
            index: 2,
            name: "training_mode",
            expected: DType::Bool.name().into(),
            actual: training.dtype(),
        })?;
        if flag.len() != 1 {
            return Err(OpError::Shape(format!(
                "Dropout's training_mode must be a scalar, got shape {}",
                training.shape()
            )));
        }
        // Training with ratio 0 drops nothing, so it is the identity too; any other ratio
        // needs randomness.
        let ratio =
            super::optional(inputs, 1).map_or(Some(0.5), |r| r.to_f64_vec().first().copied());
        if flag.first() == Some(&true) && ratio != Some(0.0) {
            return Err(OpError::Unsupported(
                "Dropout with training_mode = true and a ratio other than 0 is not supported: \
                 it is random; only inference (or ratio 0) is"
                    .into(),
            ));
        }
    }
    match num_outputs {
        1 => Ok(vec![data.clone()]),
        2 => {
            let mask = TensorData::Bool(vec![true; data.len()]);
            Ok(vec![
                data.clone(),
                Tensor::from_parts(data.shape().clone(), mask)?,
            ])
        }
        n => Err(OpError::Shape(format!(
            "Dropout has an output and an optional mask, the node declares {n} outputs"
        ))),
    }
}

/// Reads a 1-D i64 operand (shape, axes, pads, starts…) as a list.
fn int_list(t: &Tensor, index: usize, name: &'static str) -> Result<Vec<i64>, OpError> {
    if t.rank() != 1 {
        return Err(OpError::Shape(format!(
            "input {index} ({name}) must be a 1-D i64 tensor, got shape {}",
            t.shape()
        )));
    }
    i64_operand(t, index, name)
}

/// Number of elements of `dims`, or a shape error when it overflows.
fn numel(dims: &[usize]) -> Result<usize, OpError> {
    Shape::from(dims)
        .checked_numel()
        .ok_or_else(|| OpError::Shape(format!("shape {} is too large", Shape::from(dims))))
}

/// Normalises a list of possibly-negative axes against `rank`, rejecting repeats.
fn axes_in_rank(axes: &[i64], rank: usize, name: &'static str) -> Result<Vec<usize>, OpError> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let r = rank as i64;
        let n = if a < 0 { a + r } else { a };
        if n < 0 || n >= r {
            return Err(OpError::Attribute {
                name,
                detail: format!("axis {a} is out of range for rank {rank}"),
            });
        }
        let n = n as usize;
        if out.contains(&n) {
            return Err(OpError::Attribute {
                name,
                detail: format!("axis {a} is repeated in {axes:?}"),
            });
        }
        out.push(n);
    }
    Ok(out)
}

/// The flat input index of every element of a strided view: output element at coordinates
/// `c` reads input element `base + Σ c[k]·strides[k]`. Strides may be negative (reversed
/// slices) or zero (broadcast axes).
fn strided_sources(out_dims: &[usize], base: i64, strides: &[i64]) -> Result<Vec<usize>, OpError> {
    if strides.len() != out_dims.len() {
        return Err(OpError::Shape(format!(
            "internal: {} strides for a rank-{} view",
            strides.len(),
            out_dims.len()
        )));
    }
    let n = numel(out_dims)?;
    let mut sources = Vec::with_capacity(n);
    let mut coord = vec![0usize; out_dims.len()];
    let mut offset = base;
    for _ in 0..n {
        sources.push(
            usize::try_from(offset).map_err(|_| {
                OpError::Shape(format!("internal: negative source offset {offset}"))
            })?,
        );
        // Odometer step: bump the last axis and carry into earlier ones, keeping `offset`
        // equal to base + Σ coord·stride without recomputing the sum. The arithmetic
        // wraps: a step past the last element (a huge Slice step) may leave i64 for a
        // moment, but every offset that is read is a real index, and wrapping is exact
        // modulo 2^64.
        for k in (0..out_dims.len()).rev() {
            coord[k] += 1;
            offset = offset.wrapping_add(strides[k]);
            if coord[k] < out_dims[k] {
                break;
            }
            offset = offset.wrapping_sub(strides[k].wrapping_mul(out_dims[k] as i64));
            coord[k] = 0;
        }
    }
    Ok(sources)
}

/// A new buffer whose element `i` is `data[sources[i]]`, bits unchanged.
fn take(data: &TensorData, sources: &[usize]) -> Result<TensorData, OpError> {
    data.gather(sources)
}

/// Like [`take`], but a `None` source is filled with the single element of `fill`, which
/// must have the same dtype as `data`.
fn take_or_fill(
    data: &TensorData,
    sources: &[Option<usize>],
    fill: &TensorData,
) -> Result<TensorData, OpError> {
    data.gather_or_fill(sources, fill)
}

/// The element buffers of `parts` one after another; all parts must share a dtype.
fn concat_data(parts: &[&TensorData]) -> Result<TensorData, OpError> {
    let dtype = parts.first().map(|p| p.dtype()).unwrap_or(DType::F32);
    TensorData::concat(dtype, parts)
}
