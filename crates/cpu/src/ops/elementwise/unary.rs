//! Unary kernels: the maths, rounding, trigonometric and activation functions, the bool
//! predicates IsNaN and IsInf, Not and BitwiseNot.
//!
//! Floats widen to f64, compute there and round once at the output. Integers compute
//! exactly in i128 and wrap to their width (Neg and Abs of the most negative value wrap to
//! themselves, as numpy does).

use super::erf::erf;
use super::{expect_accepts, nan_max, nan_min};
use crate::ops::required;
use concord_core::op::Unary;
use concord_core::{OpError, Tensor, TensorData};

/// Runs one unary op on input X.
pub(super) fn run(op: Unary, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let def = op.def();
    expect_accepts(x, 0, "X", def.accepts)?;
    let shape = x.shape().clone();
    if def.bool_output {
        let f = predicate(op)?;
        let out = x.to_f64_vec().into_iter().map(f).collect();
        return Tensor::from_parts(shape, TensorData::Bool(out));
    }
    if let Some(values) = x.as_bool() {
        // Only Not accepts bool.
        let out = values.iter().map(|&v| !v).collect();
        return Tensor::from_parts(shape, TensorData::Bool(out));
    }
    if let Some(values) = x.to_i128_vec() {
        let out = match integer_fn(op) {
            Some(f) => values.into_iter().map(f).collect(),
            // The ops ONNX defines on integers without an exact integer form (Shrink)
            // compute in f64 and convert back, truncating toward zero.
            None => {
                let f = float_fn(op);
                let out: Vec<f64> = values.into_iter().map(|v| f(v as f64)).collect();
                return Tensor::from_f64(x.dtype(), shape, out);
            }
        };
        return Tensor::from_i128(x.dtype(), shape, out);
    }
    let f = float_fn(op);
    let out = x.to_f64_vec().into_iter().map(f).collect();
    Tensor::from_f64(x.dtype(), shape, out)
}

/// The exact integer form of an op on integers, where it has one.
fn integer_fn(op: Unary) -> Option<fn(i128) -> i128> {
    Some(match op {
        Unary::Neg => |v| -v,
        Unary::Abs => i128::abs,
        Unary::Relu => |v| v.max(0),
        // Exact, like the arms around it; without it Sign would take float_fn's form on
        // `v as f64`, which gives the same -1, 0 or 1 (the sign survives the rounding), and
        // those convert back exactly: no input tells the two apart (the mutant deleting this
        // arm is excluded in .cargo/mutants.toml).
        Unary::Sign => i128::signum,
        // Two's complement: !v on the sign-extended value keeps the low bits right.
        Unary::BitwiseNot => |v| !v,
        _ => return None,
    })
}

/// The f64 → bool function of IsNaN and IsInf.
fn predicate(op: Unary) -> Result<Box<dyn Fn(f64) -> bool>, OpError> {
    Ok(match op {
        Unary::IsNaN => Box::new(f64::is_nan),
        Unary::IsInf {
            detect_negative,
            detect_positive,
        } => Box::new(move |v: f64| {
            (v == f64::INFINITY && detect_positive) || (v == f64::NEG_INFINITY && detect_negative)
        }),
        other => {
            return Err(OpError::Unsupported(format!(
                "{} does not produce bool",
                other.name()
            )))
        }
    })
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
        Unary::Log => Box::new(f64::ln),
        Unary::Floor => Box::new(f64::floor),
        Unary::Ceil => Box::new(f64::ceil),
        // ONNX rounds halves to even, as numpy's round does.
        Unary::Round => Box::new(f64::round_ties_even),
        // signum(±0) is ±1 in Rust; ONNX's Sign of zero is 0.
        Unary::Sign => Box::new(|v: f64| {
            if v == 0.0 || v.is_nan() {
                v
            } else {
                v.signum()
            }
        }),
        Unary::Sin => Box::new(f64::sin),
        Unary::Cos => Box::new(f64::cos),
        Unary::Tan => Box::new(f64::tan),
        Unary::Asin => Box::new(f64::asin),
        Unary::Acos => Box::new(f64::acos),
        Unary::Atan => Box::new(f64::atan),
        Unary::Sinh => Box::new(f64::sinh),
        Unary::Cosh => Box::new(f64::cosh),
        Unary::Asinh => Box::new(f64::asinh),
        Unary::Acosh => Box::new(f64::acosh),
        Unary::Atanh => Box::new(f64::atanh),
        Unary::Softplus => Box::new(softplus),
        Unary::Softsign => Box::new(|v: f64| v / (1.0 + v.abs())),
        Unary::Elu { alpha } => {
            let alpha = f64::from(alpha);
            Box::new(move |v: f64| if v < 0.0 { alpha * v.exp_m1() } else { v })
        }
        Unary::Selu { alpha, gamma } => {
            let (alpha, gamma) = (f64::from(alpha), f64::from(gamma));
            Box::new(move |v: f64| {
                if v > 0.0 {
                    gamma * v
                } else {
                    gamma * alpha * v.exp_m1()
                }
            })
        }
        Unary::Celu { alpha } => {
            let alpha = f64::from(alpha);
            Box::new(move |v: f64| v.max(0.0) + (alpha * (v / alpha).exp_m1()).min(0.0))
        }
        Unary::ThresholdedRelu { alpha } => {
            let alpha = f64::from(alpha);
            Box::new(move |v: f64| if v > alpha { v } else { 0.0 })
        }
        Unary::Shrink { bias, lambd } => {
            let (bias, lambd) = (f64::from(bias), f64::from(lambd));
            Box::new(move |v: f64| {
                if v < -lambd {
                    v + bias
                } else if v > lambd {
                    v - bias
                } else {
                    0.0
                }
            })
        }
        Unary::Mish => Box::new(|v: f64| v * softplus(v).tanh()),
        Unary::Swish { alpha } => {
            let alpha = f64::from(alpha);
            Box::new(move |v: f64| v * sigmoid(alpha * v))
        }
        Unary::Gelu { tanh: false } => {
            Box::new(|v: f64| 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2)))
        }
        Unary::Gelu { tanh: true } => Box::new(|v: f64| {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh())
        }),
        // Bool-valued and bool-typed ops never reach here (run handles them first); NaN
        // makes a mistake visible rather than plausible.
        Unary::IsNaN | Unary::IsInf { .. } | Unary::Not | Unary::BitwiseNot => {
            Box::new(|_| f64::NAN)
        }
    }
}

/// ln(1 + e^v), without overflow for large v.
///
/// The two branches agree at v = 30 to the bit (both give 0x1.e00000000001ap+4), so taking
/// the first from 30 on (`v >= 30.0`, a mutant excluded in .cargo/mutants.toml) would change
/// no result: 30 is the only input whose branch it changes.
fn softplus(v: f64) -> f64 {
    if v > 30.0 {
        v + (-v).exp().ln_1p()
    } else {
        v.exp().ln_1p()
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
