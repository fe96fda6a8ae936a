//! Data movement (kernels/movement.cu): views that share the input's bytes (Reshape,
//! Flatten, Squeeze, Unsqueeze, Identity, Dropout), strided copies (Transpose, Slice,
//! Expand, Concat, Split), constant Pad, Gather, Cast, and the host-known Shape and
//! Constant.

use super::{
    broadcast_strides, constant, constant_ints, contiguous, grid, optional, required, single,
    strided_copy, Fail, Launcher, OpResult, Strided, Value,
};
use crate::kernels::Family;
use crate::tensor::StorageSuffix;
use crate::tensor::{DeviceTensor, Storage};
use concord_core::shape::normalize_axis;
use concord_core::{DType, Op, OpError, Shape, Tensor};
use half::f16;

pub fn run(
    l: &Launcher,
    op: &Op,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<Vec<DeviceTensor>> {
    let out = match op {
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze | Op::Unsqueeze | Op::Identity => {
            let x = required(inputs, 0, "data")?;
            let (_, shape) = single(facts)?;
            vec![x.dev.reshaped(shape)]
        }
        Op::Dropout => {
            // Inference mode: the output is the input; the optional mask is all true.
            let x = required(inputs, 0, "data")?;
            let mut outs = vec![x.dev.clone()];
            if let Some((DType::Bool, shape)) = facts.get(1).cloned() {
                let ones = Tensor::from_bool(shape.clone(), vec![true; shape.numel()])
                    .map_err(|e| Fail::Op(OpError::Shape(e.to_string())))?;
                outs.push(l.upload(&ones, Storage::U8)?);
            }
            outs
        }
        Op::Shape { start, end } => {
            let x = required(inputs, 0, "data")?;
            let dims = x.dev.shape.dims();
            let range = concord_core::shape_range(dims.len(), *start, *end);
            let values = dims[range].iter().map(|&d| d as i64).collect();
            vec![l.upload(&Tensor::vec_i64(values), Storage::I64)?]
        }
        Op::Constant { value } => {
            vec![l.upload(
                value,
                Storage::of(value.dtype(), crate::executor::float_storage(l.target)),
            )?]
        }
        Op::Cast { to } => vec![cast(l, *to, inputs, facts)?],
        Op::Transpose { perm } => vec![transpose(l, perm.as_deref(), inputs, facts)?],
        Op::Expand => {
            let x = required(inputs, 0, "input")?;
            let (dtype, shape) = single(facts)?;
            let y = l.output(dtype, shape)?;
            let out = y.shape.dims().to_vec();
            let read = broadcast_strides(x.dev.shape.dims(), &out);
            strided_copy(l, x.dev, &y, &out, &read, 0, &contiguous(&out), 0)?;
            vec![y]
        }
        Op::Slice => vec![slice(l, inputs, facts)?],
        Op::Concat { axis } => vec![concat(l, *axis, inputs, facts)?],
        Op::Split { axis, .. } => split(l, *axis, inputs, facts)?,
        Op::Gather { axis } => vec![gather(l, *axis, inputs, facts)?],
        Op::Pad { .. } => vec![pad(l, inputs, facts)?],
        other => {
            return Err(Fail::Op(OpError::Unsupported(format!(
                "{} is not a movement op",
                other.name()
            ))))
        }
    };
    Ok(out)
}

fn cast(
    l: &Launcher,
    to: DType,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "input")?;
    let (dtype, shape) = single(facts)?;
    let storage = Storage::of(to, crate::executor::float_storage(l.target));
    if storage == x.dev.storage {
        // Same device layout (f32 and f16 values are both half on the fp16 target): the
        // bytes already are the result.
        return Ok(DeviceTensor {
            dtype,
            shape,
            ..x.dev.clone()
        });
    }
    let y = l.output(dtype, shape)?;
    let n = y.numel() as i64;
    let f = l.function(
        Family::Movement,
        &format!("cast_{}_{}", x.dev.storage.suffix(), storage.suffix()),
    )?;
    l.launch(&f, grid(n as usize), |a| {
        a.arg(&n).arg(&x.dev.ptr).arg(&y.ptr);
    })?;
    Ok(y)
}

fn transpose(
    l: &Launcher,
    perm: Option<&[i64]>,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "data")?;
    let rank = x.dev.shape.rank();
    let perm: Vec<usize> = match perm {
        Some(p) => p
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).rev().collect(),
    };
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let own = contiguous(x.dev.shape.dims());
    let read: Vec<i64> = perm
        .iter()
        .map(|&p| own.get(p).copied().unwrap_or(0))
        .collect();
    let out = y.shape.dims().to_vec();
    strided_copy(l, x.dev, &y, &out, &read, 0, &contiguous(&out), 0)?;
    Ok(y)
}

/// Slice: per sliced axis, the first element and the step, clamped as the ONNX spec says;
/// the output extents come from shape inference.
fn slice(
    l: &Launcher,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "data")?;
    let starts = constant_ints(required(inputs, 1, "starts")?, 1, "starts")?;
    let ends = constant_ints(required(inputs, 2, "ends")?, 2, "ends")?;
    let dims = x.dev.shape.dims().to_vec();
    let rank = dims.len();
    let axes: Vec<usize> = match optional(inputs, 3) {
        Some(v) => constant_ints(v, 3, "axes")?
            .into_iter()
            .map(|a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..starts.len()).collect(),
    };
    let steps = match optional(inputs, 4) {
        Some(v) => constant_ints(v, 4, "steps")?,
        None => vec![1; starts.len()],
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(Fail::Op(OpError::Shape(format!(
            "Slice: starts {starts:?}, ends {ends:?}, axes {axes:?} and steps {steps:?} must \
             have the same length"
        ))));
    }
    let own = contiguous(&dims);
    let mut read = own.clone();
    let mut offset = 0i64;
    for (i, &axis) in axes.iter().enumerate() {
        let step = steps[i];
        if step == 0 {
            return Err(Fail::Op(OpError::Attribute {
                name: "steps",
                detail: "Slice steps must not be 0".into(),
            }));
        }
        let d = dims[axis] as i128;
        let mut start = starts[i] as i128;
        if start < 0 {
            start += d;
        }
        let first = if step > 0 {
            start.clamp(0, d)
        } else {
            start.clamp(0, (d - 1).max(0))
        };
        offset += first as i64 * own[axis];
        read[axis] = own[axis] * step;
    }
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let out = y.shape.dims().to_vec();
    strided_copy(l, x.dev, &y, &out, &read, offset, &contiguous(&out), 0)?;
    Ok(y)
}

fn concat(
    l: &Launcher,
    axis: i64,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let out = y.shape.dims().to_vec();
    let axis = normalize_axis(axis, out.len())?;
    let write = contiguous(&out);
    let mut at = 0i64;
    for (index, input) in inputs.iter().enumerate() {
        let Some(v) = input else { continue };
        let dims = v.dev.shape.dims().to_vec();
        if v.dev.storage != y.storage {
            return Err(Fail::Op(OpError::DType {
                index,
                name: "inputs",
                expected: dtype.name().into(),
                actual: v.dev.dtype,
            }));
        }
        strided_copy(
            l,
            v.dev,
            &y,
            &dims,
            &contiguous(&dims),
            0,
            &write,
            at * write[axis],
        )?;
        at += dims.get(axis).copied().unwrap_or(0) as i64;
    }
    Ok(y)
}

fn split(
    l: &Launcher,
    axis: i64,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<Vec<DeviceTensor>> {
    let x = required(inputs, 0, "input")?;
    let dims = x.dev.shape.dims().to_vec();
    let axis = normalize_axis(axis, dims.len())?;
    let own = contiguous(&dims);
    let mut at = 0i64;
    let mut outs = Vec::with_capacity(facts.len());
    for (dtype, shape) in facts {
        let y = l.output(*dtype, shape.clone())?;
        let out = y.shape.dims().to_vec();
        strided_copy(
            l,
            x.dev,
            &y,
            &out,
            &own,
            at * own[axis],
            &contiguous(&out),
            0,
        )?;
        at += out.get(axis).copied().unwrap_or(0) as i64;
        outs.push(y);
    }
    Ok(outs)
}

fn gather(
    l: &Launcher,
    axis: i64,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "data")?;
    let indices = required(inputs, 1, "indices")?;
    if indices.dev.storage != Storage::I64 {
        return Err(Fail::Op(OpError::DType {
            index: 1,
            name: "indices",
            expected: "i64".into(),
            actual: indices.dev.dtype,
        }));
    }
    let dims = x.dev.shape.dims().to_vec();
    let axis = normalize_axis(axis, dims.len())?;
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let n = y.numel() as i64;
    let axis_len = dims[axis] as i64;
    let count = indices.dev.numel() as i64;
    let inner = dims[axis + 1..].iter().product::<usize>() as i64;
    let f = l.function(
        Family::Movement,
        &format!("gather_{}", x.dev.storage.bits()),
    )?;
    l.launch(&f, grid(n as usize), |a| {
        a.arg(&n)
            .arg(&axis_len)
            .arg(&count)
            .arg(&inner)
            .arg(&indices.dev.ptr)
            .arg(&x.dev.ptr)
            .arg(&y.ptr)
            .arg(&l.status);
    })?;
    Ok(y)
}

/// Constant Pad (the only mode executors must support); negative pads crop.
fn pad(l: &Launcher, inputs: &[Option<Value>], facts: &[(DType, Shape)]) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "data")?;
    let pads = constant_ints(required(inputs, 1, "pads")?, 1, "pads")?;
    let dims = x.dev.shape.dims().to_vec();
    let rank = dims.len();
    let axes: Vec<usize> = match optional(inputs, 3) {
        Some(v) => constant_ints(v, 3, "axes")?
            .into_iter()
            .map(|a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(Fail::Op(OpError::Shape(format!(
            "Pad's pads {pads:?} must have 2 entries per padded axis ({} axes)",
            axes.len()
        ))));
    }
    let fill = match optional(inputs, 2) {
        Some(v) => fill_bits(constant(v, 2, "constant_value")?, x.dev.storage)?,
        None => 0,
    };
    let mut before = vec![0i64; rank];
    for (i, &axis) in axes.iter().enumerate() {
        before[axis] = pads[i];
    }
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let out = y.shape.dims().to_vec();
    let extents: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let s = Strided::new(&out, &contiguous(&dims), &before, &extents)?;
    let f = l.function(Family::Movement, &format!("pad_{}", x.dev.storage.bits()))?;
    l.launch(&f, grid(s.n as usize), |a| {
        a.arg(&s).arg(&fill).arg(&x.dev.ptr).arg(&y.ptr);
    })?;
    Ok(y)
}

/// The bit pattern of a one-element constant in `storage` layout, zero-extended to 64 bits.
fn fill_bits(t: &Tensor, storage: Storage) -> OpResult<u64> {
    let v =
        t.to_f64_vec().first().copied().ok_or_else(|| {
            Fail::Op(OpError::Shape("Pad's constant_value has no element".into()))
        })?;
    Ok(match storage {
        Storage::F32 => u64::from((v as f32).to_bits()),
        Storage::F16 => u64::from(f16::from_f64(v).to_bits()),
        Storage::I64 => t
            .as_i64()
            .and_then(|i| i.first())
            .copied()
            .unwrap_or(v as i64) as u64,
        Storage::U8 => u64::from(v != 0.0),
    })
}
