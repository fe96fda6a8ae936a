//! Quantisation kernels: QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked),
//! DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv.
//!
//! Quantising rounds half to even, then saturates to the output type (`Tensor::from_f64`
//! saturates). The integer matmuls and convolutions subtract the zero points and run the
//! reference MatMul / Conv on the differences in f64, which is exact for 8-bit operands
//! (every product and sum stays far below 2^53).

use super::{conv, gemm, optional, required};
use concord_core::op::Conv;
use concord_core::shape::normalize_axis;
use concord_core::{DType, MemoryBudget, Op, OpError, Shape, Tensor};

pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
    budget: MemoryBudget,
) -> Result<Vec<Tensor>, OpError> {
    let one = |t: Result<Tensor, OpError>| t.map(|t| vec![t]);
    match op {
        Op::QuantizeLinear {
            axis,
            block_size,
            output_dtype,
            precision,
        } => one(quantize(
            *axis,
            *block_size,
            *output_dtype,
            *precision,
            inputs,
        )),
        Op::DequantizeLinear {
            axis,
            block_size,
            output_dtype,
        } => one(dequantize(*axis, *block_size, *output_dtype, inputs)),
        Op::DynamicQuantizeLinear => dynamic_quantize(inputs, num_outputs),
        Op::MatMulInteger => one(matmul_integer(inputs)),
        Op::QLinearMatMul => one(qlinear_matmul(inputs)),
        Op::ConvInteger(attrs) => one(conv_integer(attrs, inputs, budget)),
        Op::QLinearConv(attrs) => one(qlinear_conv(attrs, inputs, budget)),
        other => Err(OpError::Unsupported(format!(
            "{} is not a quantisation op",
            other.name()
        ))),
    }
}

const QUANTIZED: [DType; 5] = [DType::I8, DType::U8, DType::I16, DType::U16, DType::I32];

fn dtype_error(index: usize, name: &'static str, expected: &str, actual: DType) -> OpError {
    OpError::DType {
        index,
        name,
        expected: expected.into(),
        actual,
    }
}

/// Rounds each value to `dtype` (a float type) and back: the result of an operation done
/// in that type (f64 holds every product and quotient of two such values exactly enough
/// that this double rounding is the type's correctly rounded result).
fn round_to(dtype: DType, values: Vec<f64>) -> Result<Vec<f64>, OpError> {
    if dtype == DType::F64 {
        return Ok(values);
    }
    let len = values.len();
    Ok(Tensor::from_f64(dtype, Shape::new([len]), values)?.to_f64_vec())
}

/// For each element of `x`, the index of its scale (and zero point) in a scale of shape
/// `scale`: one scale for a scalar or one-element 1-D scale; per `axis` for a 1-D scale of
/// x's extent along it; per block of `block_size` along `axis` for a scale of x's rank.
fn scale_indices(
    op: &str,
    x: &Shape,
    scale: &Shape,
    axis: i64,
    block_size: usize,
) -> Result<Vec<usize>, OpError> {
    let numel = x.numel();
    if block_size == 0 && scale.numel() == 1 && scale.rank() <= 1 {
        return Ok(vec![0; numel]);
    }
    let axis = normalize_axis(axis, x.rank()).map_err(|_| OpError::Attribute {
        name: "axis",
        detail: format!(
            "{op}: axis {axis} is out of range for input 0 of shape {x} (rank {})",
            x.rank()
        ),
    })?;
    let dims = x.dims();
    let (n, inner) = (dims[axis], super::walk_extents(dims, axis).1);
    if block_size == 0 {
        if scale.dims() != [n] {
            return Err(OpError::Shape(format!(
                "{op}: the scale has shape {scale}; per-axis quantisation of input 0 {x} \
                 along axis {axis} needs a 1-D scale of {n} values (or a scalar)"
            )));
        }
        return Ok((0..numel).map(|j| (j / inner.max(1)) % n.max(1)).collect());
    }
    let blocks = n.div_ceil(block_size);
    let mut expected = dims.to_vec();
    expected[axis] = blocks;
    if scale.dims() != expected.as_slice() {
        return Err(OpError::Shape(format!(
            "{op}: the scale has shape {scale}; blocked quantisation of input 0 {x} with \
             block_size {block_size} along axis {axis} needs shape {}",
            Shape::new(expected)
        )));
    }
    Ok((0..numel)
        .map(|j| {
            let (o, rest) = (j / (n * inner).max(1), j % (n * inner).max(1));
            let (k, i) = (rest / inner.max(1), rest % inner.max(1));
            (o * blocks + k / block_size) * inner + i
        })
        .collect())
}

/// The zero point's values, checked to have the scale's shape; zeros when absent.
fn zero_points(
    op: &str,
    zp: Option<&Tensor>,
    index: usize,
    name: &'static str,
    scale: &Tensor,
) -> Result<Vec<i128>, OpError> {
    let Some(zp) = zp else {
        return Ok(vec![0; scale.len()]);
    };
    if zp.dims() != scale.dims() {
        return Err(OpError::Shape(format!(
            "{op}: input {index} ({name}) has shape {}, the scale's is {}; they must agree",
            zp.shape(),
            scale.shape()
        )));
    }
    zp.to_i128_vec()
        .ok_or_else(|| dtype_error(index, name, "an integer type", zp.dtype()))
}

fn expect_scale(t: &Tensor, index: usize, name: &'static str) -> Result<(), OpError> {
    if matches!(t.dtype(), DType::F32 | DType::F16 | DType::BF16) {
        Ok(())
    } else {
        Err(dtype_error(index, name, "f32, f16 or bf16", t.dtype()))
    }
}

/// QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point), the division
/// done in `precision` (default y_scale's type), as the ONNX spec and reference do.
fn quantize(
    axis: i64,
    block_size: usize,
    output_dtype: Option<DType>,
    precision: Option<DType>,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    const OP: &str = "QuantizeLinear";
    let x = required(inputs, 0, "x")?;
    let scale = required(inputs, 1, "y_scale")?;
    let zp = optional(inputs, 2);
    if !matches!(
        x.dtype(),
        DType::F32 | DType::F16 | DType::BF16 | DType::I32
    ) {
        return Err(dtype_error(0, "x", "f32, f16, bf16 or i32", x.dtype()));
    }
    expect_scale(scale, 1, "y_scale")?;
    let dtype = zp.map_or(output_dtype.unwrap_or(DType::U8), |z| z.dtype());
    if !QUANTIZED.contains(&dtype) {
        return Err(OpError::Unsupported(format!(
            "{OP} to {dtype}: Concord quantises to i8, u8, i16, u16 and i32"
        )));
    }
    let index = scale_indices(OP, x.shape(), scale.shape(), axis, block_size)?;
    let zps = zero_points(OP, zp, 2, "y_zero_point", scale)?;
    let s = scale.to_f64_vec();
    let xs = x.to_f64_vec();
    let quotients: Vec<f64> = xs.iter().zip(&index).map(|(&v, &j)| v / s[j]).collect();
    let quotients = round_to(precision.unwrap_or(scale.dtype()), quotients)?;
    let q = quotients
        .iter()
        .zip(&index)
        .map(|(&v, &j)| v.round_ties_even() + zps[j] as f64)
        .collect();
    Tensor::from_f64(dtype, x.shape().clone(), q)
}

/// DequantizeLinear: y = (x - x_zero_point) · x_scale, rounded once to the output type.
fn dequantize(
    axis: i64,
    block_size: usize,
    output_dtype: Option<DType>,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    const OP: &str = "DequantizeLinear";
    let x = required(inputs, 0, "x")?;
    let scale = required(inputs, 1, "x_scale")?;
    let zp = optional(inputs, 2);
    let xs = x
        .to_i128_vec()
        .filter(|_| QUANTIZED.contains(&x.dtype()))
        .ok_or_else(|| dtype_error(0, "x", "i8, u8, i16, u16 or i32", x.dtype()))?;
    expect_scale(scale, 1, "x_scale")?;
    if let Some(z) = zp.filter(|z| z.dtype() != x.dtype()) {
        return Err(dtype_error(2, "x_zero_point", x.dtype().name(), z.dtype()));
    }
    let index = scale_indices(OP, x.shape(), scale.shape(), axis, block_size)?;
    let zps = zero_points(OP, zp, 2, "x_zero_point", scale)?;
    let s = scale.to_f64_vec();
    let y = xs
        .iter()
        .zip(&index)
        .map(|(&v, &j)| (v - zps[j]) as f64 * s[j])
        .collect();
    Tensor::from_f64(output_dtype.unwrap_or(scale.dtype()), x.shape().clone(), y)
}

/// DynamicQuantizeLinear, in f32 as the spec's formula and the ONNX reference compute it:
/// the range [min(0, min x), max(0, max x)] maps onto u8 0..=255. A constant-zero input
/// (max = min) uses the scale 1 / 255, as the ONNX reference and onnxruntime do.
fn dynamic_quantize(
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let x = required(inputs, 0, "x")?;
    if x.dtype() != DType::F32 {
        return Err(dtype_error(0, "x", "f32", x.dtype()));
    }
    if num_outputs != 3 {
        return Err(OpError::Unsupported(format!(
            "DynamicQuantizeLinear has 3 outputs, the node declares {num_outputs}"
        )));
    }
    let xs: Vec<f32> = x.to_f64_vec().iter().map(|&v| v as f32).collect();
    let max = xs.iter().copied().fold(0.0f32, f32::max);
    let min = xs.iter().copied().fold(0.0f32, f32::min);
    let range = if max == min { 1.0 } else { max - min };
    let scale = range / 255.0f32;
    let zp = (0.0f32 - min / scale).clamp(0.0, 255.0).round_ties_even();
    let y = xs
        .iter()
        .map(|&v| f64::from((v / scale).round_ties_even() + zp))
        .collect();
    Ok(vec![
        Tensor::from_f64(DType::U8, x.shape().clone(), y)?,
        Tensor::from_f64(DType::F32, Shape::scalar(), vec![f64::from(scale)])?,
        Tensor::from_f64(DType::U8, Shape::scalar(), vec![f64::from(zp)])?,
    ])
}

/// `t - zero_point` as an f64 tensor: the zero point is a scalar (or one element), or 1-D
/// of `t`'s extent along axis `axis` (counted from the end when negative).
fn minus_zero_point(
    op: &str,
    t: &Tensor,
    index: usize,
    name: &'static str,
    zp: Option<(&Tensor, usize, &'static str)>,
    axis: i64,
) -> Result<Tensor, OpError> {
    let v = t
        .to_i128_vec()
        .filter(|_| matches!(t.dtype(), DType::I8 | DType::U8))
        .ok_or_else(|| dtype_error(index, name, "i8 or u8", t.dtype()))?;
    let mut out: Vec<f64> = v.iter().map(|&e| e as f64).collect();
    if let Some((z, zi, zname)) = zp {
        if z.dtype() != t.dtype() {
            return Err(dtype_error(zi, zname, t.dtype().name(), z.dtype()));
        }
        let zv = z.to_i128_vec().unwrap_or_default();
        if z.len() == 1 && z.rank() <= 1 {
            out.iter_mut().for_each(|e| *e -= zv[0] as f64);
        } else {
            let ax = normalize_axis(axis, t.rank()).ok();
            let n = ax.map(|a| t.dims()[a]);
            let (Some(ax), true) = (ax, z.rank() == 1 && Some(z.len()) == n) else {
                return Err(OpError::Shape(format!(
                    "{op}: input {zi} ({zname}) has shape {}; it must be a scalar or 1-D with \
                     one value per index of axis {axis} of input {index} ({name}) {}",
                    z.shape(),
                    t.shape()
                )));
            };
            let n = t.dims()[ax];
            let inner = super::walk_extents(t.dims(), ax).1;
            for (j, e) in out.iter_mut().enumerate() {
                *e -= zv[(j / inner.max(1)) % n.max(1)] as f64;
            }
        }
    }
    Tensor::from_f64(DType::F64, t.shape().clone(), out)
}

/// MatMulInteger: (A - a_zero_point) · (B - b_zero_point) in i32; a_zero_point is a scalar
/// or per row of A (its axis -2), b_zero_point a scalar or per column of B (axis -1).
fn matmul_integer(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    const OP: &str = "MatMulInteger";
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    let a_zp = optional(inputs, 2).map(|z| (z, 2, "a_zero_point"));
    let b_zp = optional(inputs, 3).map(|z| (z, 3, "b_zero_point"));
    // Per row of A: axis -2. A 1-D A is one row, so its zero point must be a scalar (the
    // axis does not exist and a longer zero point is refused).
    let a = minus_zero_point(OP, a, 0, "A", a_zp, -2)?;
    let b = minus_zero_point(OP, b, 1, "B", b_zp, -1)?;
    let y = gemm::matmul(&[Some(&a), Some(&b)])?;
    Tensor::from_f64(DType::I32, y.shape().clone(), y.to_f64_vec())
}

/// One scale or zero point that must be a scalar (or hold one element).
fn scalar(
    op: &str,
    inputs: &[Option<&Tensor>],
    index: usize,
    name: &'static str,
) -> Result<f64, OpError> {
    let t = required(inputs, index, name)?;
    if t.len() != 1 || t.rank() > 1 {
        return Err(OpError::Unsupported(format!(
            "{op}: input {index} ({name}) has shape {}; Concord supports one {name} per \
             tensor here",
            t.shape()
        )));
    }
    Ok(t.to_f64_vec()[0])
}

/// Requantises `acc` (integer accumulators) by `multiplier` (per element of `which`) and
/// the output zero point: saturate(round_half_even(acc · multiplier) + y_zero_point).
fn requantize(
    acc: &[f64],
    multiplier: impl Fn(usize) -> f64,
    y_zp: &Tensor,
    shape: Shape,
) -> Result<Tensor, OpError> {
    let zp = y_zp.to_f64_vec().first().copied().unwrap_or(0.0);
    let y = acc
        .iter()
        .enumerate()
        .map(|(j, &v)| (v * multiplier(j)).round_ties_even() + zp)
        .collect();
    Tensor::from_f64(y_zp.dtype(), shape, y)
}

/// QLinearMatMul: requantised (a - a_zp) · (b - b_zp) with the multiplier
/// a_scale · b_scale / y_scale, computed in the scales' type as the ONNX reference does.
/// Per-tensor scales and zero points only. The result saturates, as the spec and
/// onnxruntime do; the ONNX reference (and so the int8 node tests' expected data) casts with
/// numpy's `astype`, which wraps out-of-range values instead.
fn qlinear_matmul(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    const OP: &str = "QLinearMatMul";
    let a = required(inputs, 0, "a")?;
    let b = required(inputs, 3, "b")?;
    let a_scale = required(inputs, 1, "a_scale")?;
    for (i, name) in [(1, "a_scale"), (4, "b_scale"), (6, "y_scale")] {
        expect_scale(required(inputs, i, name)?, i, name)?;
    }
    let [a_s, _, b_s, _, y_s] = [
        scalar(OP, inputs, 1, "a_scale")?,
        scalar(OP, inputs, 2, "a_zero_point")?,
        scalar(OP, inputs, 4, "b_scale")?,
        scalar(OP, inputs, 5, "b_zero_point")?,
        scalar(OP, inputs, 6, "y_scale")?,
    ];
    scalar(OP, inputs, 7, "y_zero_point")?;
    let y_zp = required(inputs, 7, "y_zero_point")?;
    if !matches!(y_zp.dtype(), DType::I8 | DType::U8) {
        return Err(dtype_error(7, "y_zero_point", "i8 or u8", y_zp.dtype()));
    }
    let sdt = a_scale.dtype();
    let ab = round_to(sdt, vec![a_s * b_s])?[0];
    let multiplier = round_to(sdt, vec![ab / y_s])?[0];
    let a_zp = optional(inputs, 2).map(|z| (z, 2, "a_zero_point"));
    let b_zp = optional(inputs, 5).map(|z| (z, 5, "b_zero_point"));
    // Both zero points are single values (`scalar` above), so the axis is never read.
    let a = minus_zero_point(OP, a, 0, "a", a_zp, 0)?;
    let b = minus_zero_point(OP, b, 3, "b", b_zp, 0)?;
    let acc = gemm::matmul(&[Some(&a), Some(&b)])?;
    requantize(&acc.to_f64_vec(), |_| multiplier, y_zp, acc.shape().clone())
}

/// ConvInteger: Conv of (x - x_zero_point) and (w - w_zero_point) in i32. Padding pads x
/// with its zero point (0 after the subtraction). w_zero_point is a scalar or per output
/// channel.
fn conv_integer(
    attrs: &Conv,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
) -> Result<Tensor, OpError> {
    const OP: &str = "ConvInteger";
    let x = required(inputs, 0, "x")?;
    let w = required(inputs, 1, "w")?;
    let x_zp = optional(inputs, 2);
    if let Some(z) = x_zp.filter(|z| z.len() != 1 || z.rank() > 1) {
        return Err(OpError::Shape(format!(
            "{OP}: input 2 (x_zero_point) has shape {}; it must be a scalar",
            z.shape()
        )));
    }
    let x = minus_zero_point(OP, x, 0, "x", x_zp.map(|z| (z, 2, "x_zero_point")), 1)?;
    let w_zp = optional(inputs, 3).map(|z| (z, 3, "w_zero_point"));
    let w = minus_zero_point(OP, w, 1, "w", w_zp, 0)?;
    let y = conv::conv(attrs, &[Some(&x), Some(&w)], budget)?;
    Tensor::from_f64(DType::I32, y.shape().clone(), y.to_f64_vec())
}

/// QLinearConv: requantised Conv of (x - x_zp) and (w - w_zp) plus the i32 bias B, with the
/// multiplier x_scale · w_scale / y_scale, w_scale and w_zero_point per tensor or per
/// output channel.
fn qlinear_conv(
    attrs: &Conv,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
) -> Result<Tensor, OpError> {
    const OP: &str = "QLinearConv";
    let x = required(inputs, 0, "x")?;
    let w = required(inputs, 3, "w")?;
    for (i, name) in [(1, "x_scale"), (4, "w_scale"), (6, "y_scale")] {
        expect_scale(required(inputs, i, name)?, i, name)?;
    }
    let x_s = scalar(OP, inputs, 1, "x_scale")?;
    scalar(OP, inputs, 2, "x_zero_point")?;
    let y_s = scalar(OP, inputs, 6, "y_scale")?;
    scalar(OP, inputs, 7, "y_zero_point")?;
    let y_zp = required(inputs, 7, "y_zero_point")?;
    if !matches!(y_zp.dtype(), DType::I8 | DType::U8) {
        return Err(dtype_error(7, "y_zero_point", "i8 or u8", y_zp.dtype()));
    }
    let w_scale = required(inputs, 4, "w_scale")?;
    let m = w.dims().first().copied().unwrap_or(0);
    if !(w_scale.len() == 1 && w_scale.rank() <= 1 || w_scale.dims() == [m]) {
        return Err(OpError::Shape(format!(
            "{OP}: input 4 (w_scale) has shape {}; it must be a scalar or 1-D with one scale \
             per output channel of w {}",
            w_scale.shape(),
            w.shape()
        )));
    }
    let sdt = w_scale.dtype();
    let products = round_to(sdt, w_scale.to_f64_vec().iter().map(|&s| x_s * s).collect())?;
    let multipliers = round_to(sdt, products.iter().map(|&p| p / y_s).collect())?;
    let x_zp = optional(inputs, 2).map(|z| (z, 2, "x_zero_point"));
    let x = minus_zero_point(OP, x, 0, "x", x_zp, 1)?;
    let w_zp = optional(inputs, 5).map(|z| (z, 5, "w_zero_point"));
    let w = minus_zero_point(OP, w, 3, "w", w_zp, 0)?;
    let bias = match optional(inputs, 8) {
        Some(b) if b.dtype() == DType::I32 => Some(Tensor::from_f64(
            DType::F64,
            b.shape().clone(),
            b.to_f64_vec(),
        )?),
        Some(b) => return Err(dtype_error(8, "B", "i32", b.dtype())),
        None => None,
    };
    let acc = conv::conv(attrs, &[Some(&x), Some(&w), bias.as_ref()], budget)?;
    let dims = acc.dims();
    let plane: usize = dims.get(2..).map_or(1, |d| d.iter().product());
    let channels = dims.get(1).copied().unwrap_or(1);
    let multiplier = |j: usize| {
        let c = (j / plane.max(1)) % channels.max(1);
        multipliers
            .get(c)
            .or(multipliers.first())
            .copied()
            .unwrap_or(0.0)
    };
    requantize(&acc.to_f64_vec(), multiplier, y_zp, acc.shape().clone())
}
