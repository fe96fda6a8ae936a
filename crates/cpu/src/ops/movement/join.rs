//! Concat and Split: joining tensors along an axis and cutting one apart along an axis.

use super::{concat_data, int_list, numel, strided_sources, take};
use crate::ops::{optional, required};
use concord_core::shape::normalize_axis;
use concord_core::{OpError, Shape, Tensor, TensorData};

/// Concat: every input has the same dtype and rank and the same dims except along `axis`,
/// where the output's extent is the sum. Inputs with zero extent contribute nothing.
pub(super) fn concat(axis: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    if inputs.is_empty() {
        return Err(OpError::MissingInput {
            index: 0,
            name: "inputs",
        });
    }
    let parts = (0..inputs.len())
        .map(|i| required(inputs, i, "inputs"))
        .collect::<Result<Vec<&Tensor>, OpError>>()?;
    let first = required(inputs, 0, "inputs")?;
    let rank = first.rank();
    let axis = normalize_axis(axis, rank)?;
    let mut out_dims = first.dims().to_vec();
    out_dims[axis] = 0;
    for (i, part) in parts.iter().enumerate() {
        if part.dtype() != first.dtype() {
            return Err(OpError::DType {
                index: i,
                name: "inputs",
                expected: first.dtype().name().into(),
                actual: part.dtype(),
            });
        }
        let compatible = part.rank() == rank
            && part
                .dims()
                .iter()
                .zip(first.dims())
                .enumerate()
                .all(|(k, (a, b))| k == axis || a == b);
        if !compatible {
            return Err(OpError::Shape(format!(
                "Concat on axis {axis}: input {i} has shape {}, which does not match input 0's \
                 shape {} outside that axis",
                part.shape(),
                first.shape()
            )));
        }
        out_dims[axis] += part.dims()[axis];
    }

    // Element (outer o, part p, within-chunk e) comes from part p's chunk o, and part p's
    // elements start at `bases[p]` in the joined buffer.
    let outer = numel(&first.dims()[..axis])?;
    let chunks: Vec<usize> = parts
        .iter()
        .map(|p| numel(&p.dims()[axis..]))
        .collect::<Result<_, _>>()?;
    let mut bases = Vec::with_capacity(parts.len());
    let mut next = 0usize;
    for p in &parts {
        bases.push(next);
        next += p.len();
    }
    let mut sources = Vec::with_capacity(numel(&out_dims)?);
    for o in 0..outer {
        for (base, chunk) in bases.iter().zip(&chunks) {
            sources.extend((0..*chunk).map(|e| base + o * chunk + e));
        }
    }
    let datas: Vec<&TensorData> = parts.iter().map(|p| p.data()).collect();
    let joined = concat_data(&datas)?;
    Tensor::from_parts(Shape(out_dims), take(&joined, &sources)?)
}

/// Split into `num_outputs` parts along `axis`. The sizes come from the optional `split`
/// input; without it the parts are equal, and when the extent does not divide evenly each
/// part gets ceil(extent / n) and the last one what is left (opset 18).
pub(super) fn split(
    axis: i64,
    attr_num_outputs: usize,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let data = required(inputs, 0, "input")?;
    if attr_num_outputs != 0 && attr_num_outputs != num_outputs {
        return Err(OpError::Attribute {
            name: "num_outputs",
            detail: format!(
                "num_outputs is {attr_num_outputs} but the node declares {num_outputs} outputs"
            ),
        });
    }
    let axis = normalize_axis(axis, data.rank())?;
    let extent = data.dims()[axis];
    let sizes = match optional(inputs, 1) {
        Some(split) => explicit_sizes(&int_list(split, 1, "split")?, extent, num_outputs)?,
        None => equal_sizes(extent, num_outputs)?,
    };

    if data.is_empty() {
        // Every part is empty too; the strides of an empty input may not fit an i64.
        return sizes
            .into_iter()
            .map(|size| {
                let mut dims = data.dims().to_vec();
                dims[axis] = size;
                Tensor::from_parts(Shape(dims), data.data().gather(&[])?)
            })
            .collect();
    }
    // The input has elements, so its strides fit its length, and an i64.
    let strides: Vec<i64> = data.shape().strides().iter().map(|&s| s as i64).collect();
    let axis_stride = strides[axis];
    let mut outputs = Vec::with_capacity(sizes.len());
    let mut offset = 0usize;
    for size in sizes {
        let mut dims = data.dims().to_vec();
        dims[axis] = size;
        let sources = strided_sources(&dims, offset as i64 * axis_stride, &strides)?;
        outputs.push(Tensor::from_parts(
            Shape(dims),
            take(data.data(), &sources)?,
        )?);
        offset += size;
    }
    Ok(outputs)
}

/// Checks the `split` operand: one non-negative size per output, summing to the extent.
fn explicit_sizes(split: &[i64], extent: usize, num_outputs: usize) -> Result<Vec<usize>, OpError> {
    if split.len() != num_outputs {
        return Err(OpError::Shape(format!(
            "Split's split input {split:?} has {} sizes but the node declares {num_outputs} \
             outputs",
            split.len()
        )));
    }
    let sizes = split
        .iter()
        .map(|&s| usize::try_from(s))
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|_| {
            OpError::Shape(format!("Split's split input {split:?} has a negative size"))
        })?;
    let total = sizes.iter().try_fold(0usize, |acc, &s| acc.checked_add(s));
    if total != Some(extent) {
        return Err(OpError::Shape(format!(
            "Split's split input {split:?} does not sum to the axis extent {extent}"
        )));
    }
    Ok(sizes)
}

/// Equal parts, the last one smaller when the extent does not divide evenly.
fn equal_sizes(extent: usize, num_outputs: usize) -> Result<Vec<usize>, OpError> {
    if num_outputs == 0 {
        return Err(OpError::Attribute {
            name: "num_outputs",
            detail: "Split needs at least one output".into(),
        });
    }
    let chunk = extent.div_ceil(num_outputs);
    let before_last = chunk * (num_outputs - 1);
    let last = extent.checked_sub(before_last).ok_or_else(|| {
        OpError::Shape(format!(
            "an axis of extent {extent} cannot be split into {num_outputs} parts of \
             {chunk} with a smaller last part"
        ))
    })?;
    let mut sizes = vec![chunk; num_outputs - 1];
    sizes.push(last);
    Ok(sizes)
}
