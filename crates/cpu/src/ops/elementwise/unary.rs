//! Unary kernels: Sqrt, Exp, Neg, Abs, Erf and the activations (Relu, Sigmoid, Tanh,
//! HardSwish, LeakyRelu, HardSigmoid).

use super::erf::erf;
use super::{expect_dtype_in, nan_max, nan_min};
use crate::ops::required;
use concord_core::{DType, Op, OpError, Tensor, TensorData};

/// Runs one unary op on input X.
pub(super) fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    // Neg, Abs and Relu are defined on signed integers too (Relu since opset 14); the
    // transcendental ops and the other activations are float-only in ONNX.
    let integer_ok = matches!(op, Op::Neg | Op::Abs | Op::Relu);
    if integer_ok {
        expect_dtype_in(x, 0, "X", &[DType::F32, DType::F16, DType::I64])?;
    } else {
        expect_dtype_in(x, 0, "X", &[DType::F32, DType::F16])?;
    }
    if let TensorData::I64(values) = x.data() {
        let out = values
            .iter()
            .map(|&v| match op {
                // i64::MIN has no positive counterpart; it wraps to itself, as in numpy.
                Op::Neg => v.wrapping_neg(),
                Op::Abs => v.wrapping_abs(),
                _ => v.max(0),
            })
            .collect();
        return Tensor::from_parts(x.shape().clone(), TensorData::I64(out));
    }
    let f = float_fn(op)?;
    let out = x.to_f64_vec().into_iter().map(f).collect();
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// The f64 function of a float unary op. Each propagates NaN.
fn float_fn(op: &Op) -> Result<Box<dyn Fn(f64) -> f64>, OpError> {
    let f: Box<dyn Fn(f64) -> f64> = match *op {
        Op::Sqrt => Box::new(f64::sqrt),
        Op::Exp => Box::new(f64::exp),
        Op::Neg => Box::new(|v: f64| -v),
        Op::Abs => Box::new(f64::abs),
        Op::Erf => Box::new(erf),
        // `v > 0` is false for NaN, so NaN is let through explicitly; -0 becomes +0.
        Op::Relu => Box::new(|v: f64| if v > 0.0 || v.is_nan() { v } else { 0.0 }),
        Op::Sigmoid => Box::new(sigmoid),
        Op::Tanh => Box::new(f64::tanh),
        Op::HardSwish => Box::new(|v: f64| v * hard_clamp(v / 6.0 + 0.5)),
        Op::LeakyRelu { alpha } => {
            let alpha = f64::from(alpha);
            Box::new(move |v: f64| if v < 0.0 { alpha * v } else { v })
        }
        Op::HardSigmoid { alpha, beta } => {
            let (alpha, beta) = (f64::from(alpha), f64::from(beta));
            Box::new(move |v: f64| hard_clamp(alpha * v + beta))
        }
        ref other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a unary op",
                other.name()
            )))
        }
    };
    Ok(f)
}

/// The logistic function, written so that neither branch overflows to inf/inf.
fn sigmoid(v: f64) -> f64 {
    if v >= 0.0 {
        1.0 / (1.0 + (-v).exp())
    } else {
        let e = v.exp();
        e / (1.0 + e)
    }
}

/// max(0, min(1, v)), keeping NaN.
fn hard_clamp(v: f64) -> f64 {
    nan_max(0.0, nan_min(1.0, v))
}
