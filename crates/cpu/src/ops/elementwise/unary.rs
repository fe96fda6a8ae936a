//! Unary kernels: Sqrt, Exp, Neg, Abs, Erf and the activations (Relu, Sigmoid, Tanh,
//! HardSwish, LeakyRelu, HardSigmoid) and Reciprocal.

use super::erf::erf;
use super::{expect_dtype_in, nan_max, nan_min};
use crate::ops::required;
use concord_core::op::Unary;
use concord_core::{DType, OpError, Tensor, TensorData};

/// Runs one unary op on input X.
pub(super) fn run(op: Unary, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    // Neg, Abs and Relu are defined on signed integers too (Relu since opset 14); the
    // transcendental ops and the other activations are float-only in ONNX.
    if op.def().integer {
        expect_dtype_in(x, 0, "X", &[DType::F32, DType::F16, DType::I64])?;
    } else {
        expect_dtype_in(x, 0, "X", &[DType::F32, DType::F16])?;
    }
    if let TensorData::I64(values) = x.data() {
        // i64::MIN has no positive counterpart; it wraps to itself, as in numpy.
        let f: fn(i64) -> i64 = match op {
            Unary::Neg => i64::wrapping_neg,
            Unary::Abs => i64::wrapping_abs,
            Unary::Relu => |v| v.max(0),
            other => {
                return Err(OpError::Unsupported(format!(
                    "{} has no integer reference kernel",
                    other.name()
                )))
            }
        };
        let out = values.iter().map(|&v| f(v)).collect();
        return Tensor::from_parts(x.shape().clone(), TensorData::I64(out));
    }
    let f = float_fn(op);
    let out = x.to_f64_vec().into_iter().map(f).collect();
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// The f64 function of a float unary op. Each propagates NaN.
fn float_fn(op: Unary) -> Box<dyn Fn(f64) -> f64> {
    match op {
        Unary::Sqrt => Box::new(f64::sqrt),
        Unary::Exp => Box::new(f64::exp),
        Unary::Neg => Box::new(|v: f64| -v),
        Unary::Abs => Box::new(f64::abs),
        Unary::Erf => Box::new(erf),
        // `v > 0` is false for NaN, so NaN is let through explicitly; -0 becomes +0.
        Unary::Relu => Box::new(|v: f64| if v > 0.0 || v.is_nan() { v } else { 0.0 }),
        Unary::Sigmoid => Box::new(sigmoid),
        Unary::Tanh => Box::new(f64::tanh),
        Unary::HardSwish => Box::new(|v: f64| v * hard_clamp(v / 6.0 + 0.5)),
        // 1/±0 is ±inf and 1/±inf is ±0, as IEEE division gives.
        Unary::Reciprocal => Box::new(|v: f64| 1.0 / v),
        Unary::LeakyRelu { alpha } => {
            let alpha = f64::from(alpha);
            Box::new(move |v: f64| if v < 0.0 { alpha * v } else { v })
        }
        Unary::HardSigmoid { alpha, beta } => {
            let (alpha, beta) = (f64::from(alpha), f64::from(beta));
            Box::new(move |v: f64| hard_clamp(alpha * v + beta))
        }
    }
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
