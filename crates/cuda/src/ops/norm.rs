//! Softmax along one axis and LayerNormalization over the trailing axes
//! (kernels/norm.cu), one block per row.

use super::{
    expand_to, expect_float, optional, required, rows_grid, single, Launcher, OpResult, Value,
};
use crate::kernels::Family;
use crate::tensor::DeviceTensor;
use crate::tensor::StorageSuffix;
use concord_core::shape::normalize_axis;
use concord_core::{DType, Shape};

pub fn softmax(
    l: &Launcher,
    axis: i64,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "input")?;
    expect_float(x, 0, "input")?;
    let dims = x.dev.shape.dims().to_vec();
    let axis = normalize_axis(axis, dims.len())?;
    let outer = dims[..axis].iter().product::<usize>();
    let n = dims[axis] as i64;
    let inner = dims[axis + 1..].iter().product::<usize>();
    let rows = (outer * inner) as i64;
    let inner = inner as i64;
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    if n == 0 {
        return Ok(y);
    }
    let f = l.function(Family::Norm, &format!("softmax_{}", x.dev.storage.suffix()))?;
    l.launch(&f, rows_grid(rows as usize), |a| {
        a.arg(&rows).arg(&n).arg(&inner).arg(&x.dev.ptr).arg(&y.ptr);
    })?;
    Ok(y)
}

pub fn layer_norm(
    l: &Launcher,
    axis: i64,
    epsilon: f32,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let scale = required(inputs, 1, "Scale")?;
    let dims = x.dev.shape.dims().to_vec();
    let axis = normalize_axis(axis, dims.len())?;
    let tail = Shape::new(dims[axis..].to_vec());
    let rows = dims[..axis].iter().product::<usize>() as i64;
    let n = tail.numel() as i64;
    // The kernel reads one scale (and bias) element per normalised element; broadcast
    // operands are expanded to the normalised shape first.
    let scale = if scale.dev.shape == tail {
        scale.dev.clone()
    } else {
        expand_to(l, scale.dev, &tail)?
    };
    let bias = match optional(inputs, 2) {
        Some(b) if b.dev.shape == tail => Some(b.dev.clone()),
        Some(b) => Some(expand_to(l, b.dev, &tail)?),
        None => None,
    };
    let has_bias = i32::from(bias.is_some());
    let bias_ptr = bias.as_ref().map_or(scale.ptr, |b| b.ptr);
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    if n == 0 {
        return Ok(y);
    }
    let f = l.function(
        Family::Norm,
        &format!("layer_norm_{}", x.dev.storage.suffix()),
    )?;
    l.launch(&f, rows_grid(rows as usize), |a| {
        a.arg(&rows)
            .arg(&n)
            .arg(&epsilon)
            .arg(&has_bias)
            .arg(&x.dev.ptr)
            .arg(&scale.ptr)
            .arg(&bias_ptr)
            .arg(&y.ptr);
    })?;
    Ok(y)
}
