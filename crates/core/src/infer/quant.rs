//! Inference for the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, of the
//! Normalization family) and the quantisation ops (QuantizeLinear, DequantizeLinear,
//! DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv). The
//! integer matmul and convolution shapes are MatMul's and Conv's, computed by those ops'
//! inference on the same shapes.

use super::{expect_dtype, nn, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::{LossReduction, Op};
use crate::shape::{format_sym, Dim};

/// The zero-point (quantised) types Concord computes: ONNX's int4, uint4 and float8 types
/// have no Concord dtype.
pub const QUANTIZED: [DType; 5] = [DType::I8, DType::U8, DType::I16, DType::U16, DType::I32];
/// The 8-bit types the integer matmul and convolution ops take.
const EIGHT_BIT: [DType; 2] = [DType::I8, DType::U8];
const SCALE: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Whether `op` is one of the losses, which this file infers although they are of the
/// Normalization family.
pub(super) fn is_loss(op: &Op) -> bool {
    matches!(
        op,
        Op::NegativeLogLikelihoodLoss { .. } | Op::SoftmaxCrossEntropyLoss { .. }
    )
}

pub(super) fn infer(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let outputs_allowed: &[usize] = match op {
        Op::SoftmaxCrossEntropyLoss { .. } => &[1, 2],
        Op::DynamicQuantizeLinear => &[3],
        _ => &[1],
    };
    if !outputs_allowed.contains(&num_outputs) {
        return Err(OpError::Unsupported(format!(
            "{} has {:?} outputs, the node declares {num_outputs}",
            op.name(),
            outputs_allowed
        )));
    }
    match op {
        Op::NegativeLogLikelihoodLoss { reduction, .. }
        | Op::SoftmaxCrossEntropyLoss { reduction, .. } => {
            loss(op.name(), *reduction, inputs, num_outputs)
        }
        Op::QuantizeLinear { output_dtype, .. } => {
            let x = required(inputs, 0, "x")?;
            let scale = required(inputs, 1, "y_scale")?;
            expect_dtype(
                &x,
                0,
                "x",
                &[DType::F32, DType::F16, DType::BF16, DType::I32],
            )?;
            expect_dtype(&scale, 1, "y_scale", &SCALE)?;
            let dtype = match optional(inputs, 2) {
                Some(zp) => {
                    expect_dtype(&zp, 2, "y_zero_point", &QUANTIZED)?;
                    if let Some(d) = output_dtype.filter(|d| *d != zp.dtype) {
                        return Err(OpError::Attribute {
                            name: "output_dtype",
                            detail: format!(
                                "QuantizeLinear: output_dtype {d} differs from y_zero_point's \
                                 dtype {}",
                                zp.dtype
                            ),
                        });
                    }
                    zp.dtype
                }
                None => output_dtype.unwrap_or(DType::U8),
            };
            if !QUANTIZED.contains(&dtype) {
                return Err(OpError::Unsupported(format!(
                    "QuantizeLinear to {dtype}: Concord quantises to i8, u8, i16, u16 and i32"
                )));
            }
            Ok(vec![OutputFact::new(dtype, x.shape.to_vec())])
        }
        Op::DequantizeLinear { output_dtype, .. } => {
            let x = required(inputs, 0, "x")?;
            let scale = required(inputs, 1, "x_scale")?;
            expect_dtype(&x, 0, "x", &QUANTIZED)?;
            expect_dtype(&scale, 1, "x_scale", &SCALE)?;
            if let Some(zp) = optional(inputs, 2) {
                expect_dtype(&zp, 2, "x_zero_point", &[x.dtype])?;
            }
            let dtype = output_dtype.unwrap_or(scale.dtype);
            expect_dtype(&ValueFact { dtype, ..scale }, 1, "output_dtype", &SCALE)?;
            Ok(vec![OutputFact::new(dtype, x.shape.to_vec())])
        }
        Op::DynamicQuantizeLinear => {
            let x = required(inputs, 0, "x")?;
            expect_dtype(&x, 0, "x", &[DType::F32])?;
            Ok(vec![
                OutputFact::new(DType::U8, x.shape.to_vec()),
                OutputFact::new(DType::F32, vec![]),
                OutputFact::new(DType::U8, vec![]),
            ])
        }
        Op::MatMulInteger => {
            let a = required(inputs, 0, "A")?;
            let b = required(inputs, 1, "B")?;
            expect_dtype(&a, 0, "A", &EIGHT_BIT)?;
            expect_dtype(&b, 1, "B", &EIGHT_BIT)?;
            for (index, name, of) in [(2, "a_zero_point", a), (3, "b_zero_point", b)] {
                if let Some(zp) = optional(inputs, index) {
                    expect_dtype(&zp, index, name, &[of.dtype])?;
                }
            }
            let shape = nn::matmul(&[Some(as_float(a)), Some(as_float(b))])?.shape;
            Ok(vec![OutputFact::new(DType::I32, shape)])
        }
        Op::QLinearMatMul => {
            let (a, b, y_zp) = qlinear_operands(inputs, 3)?;
            let shape = nn::matmul(&[Some(as_float(a)), Some(as_float(b))])?.shape;
            Ok(vec![OutputFact::new(y_zp, shape)])
        }
        Op::ConvInteger(attrs) => {
            let x = required(inputs, 0, "x")?;
            let w = required(inputs, 1, "w")?;
            expect_dtype(&x, 0, "x", &EIGHT_BIT)?;
            expect_dtype(&w, 1, "w", &EIGHT_BIT)?;
            for (index, name, of) in [(2, "x_zero_point", x), (3, "w_zero_point", w)] {
                if let Some(zp) = optional(inputs, index) {
                    expect_dtype(&zp, index, name, &[of.dtype])?;
                }
            }
            let shape = nn::conv(attrs, &[Some(as_float(x)), Some(as_float(w))])?.shape;
            Ok(vec![OutputFact::new(DType::I32, shape)])
        }
        Op::QLinearConv(attrs) => {
            let (x, w, y_zp) = qlinear_operands(inputs, 3)?;
            let bias = optional(inputs, 8);
            if let Some(b) = &bias {
                expect_dtype(b, 8, "B", &[DType::I32])?;
            }
            let float_bias = bias.map(as_float);
            let shape = nn::conv(attrs, &[Some(as_float(x)), Some(as_float(w)), float_bias])?.shape;
            Ok(vec![OutputFact::new(y_zp, shape)])
        }
        other => Err(OpError::Unsupported(format!(
            "{} is not a loss or quantisation op",
            other.name()
        ))),
    }
}

/// A quantised operand's shape as an f32 fact, for MatMul's and Conv's shape inference.
fn as_float(f: ValueFact) -> ValueFact {
    ValueFact {
        dtype: DType::F32,
        value: None,
        ..f
    }
}

/// QLinearMatMul's and QLinearConv's operands: (a, a_scale, a_zero_point) at 0..3, (b,
/// b_scale, b_zero_point) at `second`.., (y_scale, y_zero_point) after; returns a, b and
/// the output dtype (y_zero_point's).
fn qlinear_operands<'a>(
    inputs: &[Option<ValueFact<'a>>],
    second: usize,
) -> Result<(ValueFact<'a>, ValueFact<'a>, DType), OpError> {
    const NAMES: [&str; 8] = [
        "a",
        "a_scale",
        "a_zero_point",
        "b",
        "b_scale",
        "b_zero_point",
        "y_scale",
        "y_zero_point",
    ];
    let mut facts = Vec::with_capacity(8);
    for (index, name) in NAMES.iter().enumerate() {
        let index = if index < 3 { index } else { second + index - 3 };
        facts.push((index, *name, required(inputs, index, name)?));
    }
    for &(index, name, fact) in &facts {
        let allowed: &[DType] = if name.ends_with("scale") {
            &SCALE
        } else {
            &EIGHT_BIT
        };
        expect_dtype(&fact, index, name, allowed)?;
    }
    // Each zero point has its operand's type.
    for (value, zp) in [(0, 2), (3, 5)] {
        let (index, name, fact) = facts[zp];
        expect_dtype(&fact, index, name, &[facts[value].2.dtype])?;
    }
    Ok((facts[0].2, facts[3].2, facts[7].2.dtype))
}

/// The two losses: input (N, C, d1…) and target (N, d1…) of class indices; the output is
/// (N, d1…) for reduction none, else a scalar; SoftmaxCrossEntropyLoss's log_prob has the
/// scores' shape.
fn loss(
    op: &'static str,
    reduction: LossReduction,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let x = required(inputs, 0, "input")?;
    let target = required(inputs, 1, "target")?;
    expect_dtype(&x, 0, "input", &DType::FLOATS)?;
    expect_dtype(&target, 1, "target", &[DType::I32, DType::I64])?;
    if x.shape.len() < 2 {
        return Err(OpError::Shape(format!(
            "{op}: input 0 has shape {}; it needs rank 2 or more (N, C, d1…)",
            format_sym(x.shape)
        )));
    }
    let expected: Vec<Dim> = x
        .shape
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, d)| d.clone())
        .collect();
    let agrees = target.shape.len() == expected.len()
        && target
            .shape
            .iter()
            .zip(&expected)
            .all(|(t, e)| !matches!((t, e), (Dim::Fixed(a), Dim::Fixed(b)) if a != b));
    if !agrees {
        return Err(OpError::Shape(format!(
            "{op}: input 1 (target) has shape {}, expected {} (input 0's shape {} without C)",
            format_sym(target.shape),
            format_sym(&expected),
            format_sym(x.shape)
        )));
    }
    if let Some(w) = optional(inputs, 2) {
        expect_dtype(&w, 2, "weight", &[x.dtype])?;
        let ok = match (w.shape, &x.shape[1]) {
            ([Dim::Fixed(n)], Dim::Fixed(c)) => n == c,
            ([_], _) => true,
            _ => false,
        };
        if !ok {
            return Err(OpError::Shape(format!(
                "{op}: input 2 (weight) has shape {}; it must be 1-D with one weight per \
                 class of input 0 {}",
                format_sym(w.shape),
                format_sym(x.shape)
            )));
        }
    }
    let shape = if reduction == LossReduction::None {
        expected
    } else {
        vec![]
    };
    let mut out = vec![OutputFact::new(x.dtype, shape)];
    if num_outputs == 2 {
        out.push(OutputFact::new(x.dtype, x.shape.to_vec()));
    }
    Ok(out)
}
