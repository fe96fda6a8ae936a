//! Unary activations, broadcasting binary arithmetic, Equal, Where and BatchNormalization
//! (kernels/elementwise.cu).

use super::{
    broadcast_strides, constant, contiguous, expect_float, grid, optional, required, single, Fail,
    Launcher, OpResult, Strided, Value,
};
use crate::kernels::Family;
use crate::tensor::StorageSuffix;
use crate::tensor::{DeviceTensor, Storage};
use concord_core::op::{Binary, CLIP_KERNEL_CODE};
use concord_core::{DType, Op, OpError, Shape};

/// The U_* code and two parameters of a unary op (Clip's bounds are its parameters),
/// from concord-core's op table.
fn unary_code(op: &Op) -> Option<(i32, f32, f32)> {
    match *op {
        Op::Unary(u) => {
            let [alpha, beta] = u.params();
            Some((u.def().code() as i32, alpha, beta))
        }
        Op::Clip => Some((CLIP_KERNEL_CODE as i32, f32::NEG_INFINITY, f32::INFINITY)),
        _ => None,
    }
}

/// The B_* code of a binary op (Equal has kernels of its own), from the op table.
fn binary_code(op: &Op) -> Option<i32> {
    match *op {
        Op::Binary(Binary::Equal) => None,
        Op::Binary(b) => Some(b.code() as i32),
        _ => None,
    }
}

pub fn unary(
    l: &Launcher,
    op: &Op,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let Some((code, mut alpha, mut beta)) = unary_code(op) else {
        return Err(Fail::Op(OpError::Unsupported(format!(
            "{} is not a unary op",
            op.name()
        ))));
    };
    if let Op::Clip = op {
        // Bounds are one-element constants of X's dtype (shape inference checked the
        // count); absent bounds leave that side open.
        if let Some(min) = optional(inputs, 1) {
            alpha = scalar(constant(min, 1, "min")?)?;
        }
        if let Some(max) = optional(inputs, 2) {
            beta = scalar(constant(max, 2, "max")?)?;
        }
    }
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let n = y.numel() as i64;
    let f = l.function(
        Family::Elementwise,
        &format!("unary_{}", x.dev.storage.suffix()),
    )?;
    l.launch(&f, grid(n as usize), |a| {
        a.arg(&n)
            .arg(&code)
            .arg(&alpha)
            .arg(&beta)
            .arg(&x.dev.ptr)
            .arg(&y.ptr);
    })?;
    Ok(y)
}

pub fn binary(
    l: &Launcher,
    op: &Op,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    if a.dev.storage != b.dev.storage {
        return Err(Fail::Op(OpError::DType {
            index: 1,
            name: "B",
            expected: a.dev.dtype.name().into(),
            actual: b.dev.dtype,
        }));
    }
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let out = y.shape.dims().to_vec();
    let s = Strided::new(
        &out,
        &broadcast_strides(a.dev.shape.dims(), &out),
        &broadcast_strides(b.dev.shape.dims(), &out),
        &contiguous(&out),
    )?;
    let n = s.n as usize;
    let storage = a.dev.storage;
    if let Op::Binary(Binary::Equal) = op {
        let f = l.function(Family::Elementwise, &format!("equal_{}", storage.suffix()))?;
        l.launch(&f, grid(n), |args| {
            args.arg(&s).arg(&a.dev.ptr).arg(&b.dev.ptr).arg(&y.ptr);
        })?;
        return Ok(y);
    }
    let Some(code) = binary_code(op) else {
        return Err(Fail::Op(OpError::Unsupported(format!(
            "{} is not a binary op",
            op.name()
        ))));
    };
    match storage {
        Storage::F32 | Storage::F16 => {
            if let Op::Binary(Binary::Mod { fmod: false }) = op {
                return Err(Fail::Op(OpError::Attribute {
                    name: "fmod",
                    detail: format!(
                        "Mod on {} needs fmod=1; the integer remainder (fmod=0) is only defined \
                         for integer inputs",
                        a.dev.dtype
                    ),
                }));
            }
            let f = l.function(Family::Elementwise, &format!("binary_{}", storage.suffix()))?;
            l.launch(&f, grid(n), |args| {
                args.arg(&s)
                    .arg(&code)
                    .arg(&a.dev.ptr)
                    .arg(&b.dev.ptr)
                    .arg(&y.ptr);
            })?;
        }
        Storage::I64 if !matches!(op, Op::Binary(Binary::Pow)) => {
            let f = l.function(Family::Elementwise, "binary_i64")?;
            l.launch(&f, grid(n), |args| {
                args.arg(&s)
                    .arg(&code)
                    .arg(&a.dev.ptr)
                    .arg(&b.dev.ptr)
                    .arg(&y.ptr)
                    .arg(&l.status);
            })?;
        }
        _ => {
            return Err(Fail::Op(OpError::Unsupported(format!(
                "the CUDA executor has no {} kernel for {}",
                op.name(),
                a.dev.dtype
            ))))
        }
    }
    Ok(y)
}

/// Where(condition, X, Y) with three-way broadcasting, over element bits.
pub fn select(
    l: &Launcher,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let c = required(inputs, 0, "condition")?;
    let x = required(inputs, 1, "X")?;
    let y_in = required(inputs, 2, "Y")?;
    if x.dev.storage != y_in.dev.storage {
        return Err(Fail::Op(OpError::DType {
            index: 2,
            name: "Y",
            expected: x.dev.dtype.name().into(),
            actual: y_in.dev.dtype,
        }));
    }
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let out = y.shape.dims().to_vec();
    let s = Strided::new(
        &out,
        &broadcast_strides(c.dev.shape.dims(), &out),
        &broadcast_strides(x.dev.shape.dims(), &out),
        &broadcast_strides(y_in.dev.shape.dims(), &out),
    )?;
    let f = l.function(
        Family::Elementwise,
        &format!("where_{}", x.dev.storage.bits()),
    )?;
    l.launch(&f, grid(s.n as usize), |a| {
        a.arg(&s)
            .arg(&c.dev.ptr)
            .arg(&x.dev.ptr)
            .arg(&y_in.dev.ptr)
            .arg(&y.ptr);
    })?;
    Ok(y)
}

/// BatchNormalization in inference mode: per channel (axis 1) of X.
pub fn batch_norm(
    l: &Launcher,
    epsilon: f32,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let params = [
        required(inputs, 1, "scale")?,
        required(inputs, 2, "B")?,
        required(inputs, 3, "input_mean")?,
        required(inputs, 4, "input_var")?,
    ];
    let dims = x.dev.shape.dims();
    let channels = dims.get(1).copied().unwrap_or(1);
    for (i, p) in params.iter().enumerate() {
        if p.dev.storage != x.dev.storage || p.dev.numel() != channels {
            return Err(Fail::Op(OpError::Shape(format!(
                "BatchNormalization: input {} must hold {channels} {} values (one per channel), \
                 it is {} {}",
                i + 1,
                x.dev.dtype,
                p.dev.dtype,
                p.dev.shape
            ))));
        }
    }
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let n = y.numel() as i64;
    let inner = dims.iter().skip(2).product::<usize>() as i64;
    let channels = channels as i64;
    let f = l.function(
        Family::Elementwise,
        &format!("batch_norm_{}", x.dev.storage.suffix()),
    )?;
    l.launch(&f, grid(n as usize), |a| {
        a.arg(&n)
            .arg(&channels)
            .arg(&inner)
            .arg(&epsilon)
            .arg(&x.dev.ptr)
            .arg(&params[0].dev.ptr)
            .arg(&params[1].dev.ptr)
            .arg(&params[2].dev.ptr)
            .arg(&params[3].dev.ptr)
            .arg(&y.ptr);
    })?;
    Ok(y)
}

/// Adds a per-channel bias (C values) to `y` (N, C, inner…) in place.
pub fn bias_add(l: &Launcher, y: &DeviceTensor, bias: &DeviceTensor) -> OpResult<()> {
    let dims = y.shape.dims();
    let channels = dims.get(1).copied().unwrap_or(1) as i64;
    let inner = dims.iter().skip(2).product::<usize>() as i64;
    let n = y.numel() as i64;
    let f = l.function(
        Family::Elementwise,
        &format!("bias_add_{}", y.storage.suffix()),
    )?;
    l.launch(&f, grid(n as usize), |a| {
        a.arg(&n)
            .arg(&channels)
            .arg(&inner)
            .arg(&bias.ptr)
            .arg(&y.ptr);
    })?;
    Ok(())
}

/// A one-element float constant as f32.
fn scalar(t: &concord_core::Tensor) -> OpResult<f32> {
    t.to_f64_vec()
        .first()
        .map(|&v| v as f32)
        .ok_or_else(|| Fail::Op(OpError::Shape("a scalar bound has no element".into())))
}
