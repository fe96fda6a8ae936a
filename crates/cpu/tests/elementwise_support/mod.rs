//! Shared helpers for the elementwise, normalisation and reduction kernel tests: tensor
//! constructors, one `check` per kind of expectation, a tolerance type, and the check that
//! shape inference agrees with what a kernel produced.

// Each test binary uses a different subset of these helpers, and a helper fails its test
// by panicking, exactly as assert! does.
#![allow(dead_code, clippy::panic)]

use concord_core::infer::{infer_op, ValueFact};
use concord_core::{DType, Op, OpError, Shape, Tensor};
use concord_cpu::run_op;
use half::f16;

/// How close a float output must be to the expected value.
#[derive(Clone, Copy, Debug)]
pub enum Tolerance {
    /// Bit-for-bit after rounding the expected value to the output dtype (for results that
    /// are exact in f64, such as small sums, clamps and selections).
    Exact,
    /// Within one rounding of the output dtype: |got - want| ≤ 2·u·|want| (u = 2^-24 for
    /// f32, 2^-11 for f16), which is what "computed in f64, rounded once" promises for an
    /// expected value known to f64 precision. The factor 2 absorbs the f64 error of the
    /// expected value and of the kernel, both far below u.
    RoundedOnce,
}

pub fn f32s(dims: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f32(dims, values.to_vec()).expect("test tensor shape matches its data")
}

pub fn f16s(dims: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f16(dims, values.iter().map(|&v| f16::from_f32(v)).collect())
        .expect("test tensor shape matches its data")
}

pub fn i64s(dims: &[usize], values: &[i64]) -> Tensor {
    Tensor::from_i64(dims, values.to_vec()).expect("test tensor shape matches its data")
}

pub fn bools(dims: &[usize], values: &[bool]) -> Tensor {
    Tensor::from_bool(dims, values.to_vec()).expect("test tensor shape matches its data")
}

/// Runs a single-output op on present inputs.
pub fn run(op: &Op, inputs: &[&Tensor]) -> Result<Tensor, OpError> {
    let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|&t| Some(t)).collect();
    run_opt(op, &inputs)
}

/// Runs a single-output op whose optional inputs may be omitted (None).
pub fn run_opt(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let mut outputs = run_op(op, inputs, 1)?;
    assert_eq!(
        outputs.len(),
        1,
        "{} returned {} outputs",
        op.name(),
        outputs.len()
    );
    Ok(outputs.remove(0))
}

/// Runs an op that must succeed.
pub fn ok(op: &Op, inputs: &[&Tensor]) -> Tensor {
    run(op, inputs).unwrap_or_else(|e| panic!("{} failed: {e}", op.name()))
}

/// Asserts a float output's dtype, shape and values. An expected NaN needs a NaN, an
/// expected infinity the same infinity.
pub fn check_float(got: &Tensor, dtype: DType, dims: &[usize], want: &[f64], tol: Tolerance) {
    assert_eq!(got.dtype(), dtype, "dtype of {got:?}");
    assert_eq!(got.dims(), dims, "shape of {got:?}");
    let values = got.to_f64_vec();
    assert_eq!(values.len(), want.len(), "element count of {got:?}");
    for (i, (&g, &w)) in values.iter().zip(want).enumerate() {
        let fine = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            match tol {
                Tolerance::Exact => g.to_bits() == round_to(dtype, w).to_bits() || g == w,
                Tolerance::RoundedOnce => {
                    (g - w).abs() <= 2.0 * dtype.unit_roundoff() * w.abs() + f64::MIN_POSITIVE
                }
            }
        };
        assert!(
            fine,
            "element {i}: got {g:e}, expected {w:e} ({tol:?}) in {got:?}"
        );
    }
}

/// Asserts an i64 output exactly.
pub fn check_i64(got: &Tensor, dims: &[usize], want: &[i64]) {
    assert_eq!(got.dims(), dims, "shape of {got:?}");
    assert_eq!(got.as_i64(), Some(want), "values of {got:?}");
}

/// Asserts a bool output exactly.
pub fn check_bool(got: &Tensor, dims: &[usize], want: &[bool]) {
    assert_eq!(got.dims(), dims, "shape of {got:?}");
    assert_eq!(got.as_bool(), Some(want), "values of {got:?}");
}

/// `w` rounded to `dtype`, as an f64.
fn round_to(dtype: DType, w: f64) -> f64 {
    match dtype {
        DType::F32 => f64::from(w as f32),
        DType::F16 => f16::from_f64(w).to_f64(),
        _ => w,
    }
}

/// How an op's error should look: the variant, plus for dtype errors the input index.
#[derive(Clone, Copy, Debug)]
pub enum Failure {
    DType {
        index: usize,
    },
    Shape,
    Attribute,
    Missing {
        index: usize,
    },
    /// Arithmetic faults such as integer division by zero.
    Arithmetic,
}

/// Asserts that a result failed the expected way and that its message names `mention`.
pub fn check_err<T: std::fmt::Debug>(result: Result<T, OpError>, failure: Failure, mention: &str) {
    let err = match result {
        Ok(v) => panic!("expected a {failure:?} error, got {v:?}"),
        Err(e) => e,
    };
    let matched = match (failure, &err) {
        (Failure::DType { index }, OpError::DType { index: i, .. }) => index == *i,
        (Failure::Shape, OpError::Shape(_)) => true,
        (Failure::Attribute, OpError::Attribute { .. }) => true,
        (Failure::Missing { index }, OpError::MissingInput { index: i, .. }) => index == *i,
        (Failure::Arithmetic, OpError::Unsupported(_)) => true,
        _ => false,
    };
    assert!(matched, "expected {failure:?}, got {err:?}");
    let message = err.to_string();
    assert!(
        message.contains(mention),
        "error message `{message}` does not mention `{mention}`"
    );
}

/// Runs the kernel and shape inference on the same inputs (inputs at the `constant`
/// positions are given to inference as known values, the rest by type only) and asserts
/// that inference predicts the kernel's output dtype and shape exactly.
pub fn check_inference_agrees(op: &Op, inputs: &[Option<&Tensor>], constant: &[usize]) {
    let out = run_opt(op, inputs).unwrap_or_else(|e| panic!("{} kernel failed: {e}", op.name()));
    let syms: Vec<Option<Vec<concord_core::Dim>>> = inputs
        .iter()
        .map(|t| t.map(|t| t.shape().to_sym()))
        .collect();
    let facts: Vec<Option<ValueFact>> = inputs
        .iter()
        .zip(&syms)
        .enumerate()
        .map(|(i, (t, sym))| match (t, sym) {
            (Some(t), Some(sym)) => Some(ValueFact {
                dtype: t.dtype(),
                shape: sym,
                value: constant.contains(&i).then_some(*t),
            }),
            _ => None,
        })
        .collect();
    let inferred =
        infer_op(op, &facts, 1).unwrap_or_else(|e| panic!("{} inference failed: {e}", op.name()));
    assert_eq!(inferred.len(), 1);
    assert_eq!(inferred[0].dtype, out.dtype(), "{} dtype", op.name());
    assert_eq!(
        Shape::from_sym(&inferred[0].shape).as_ref(),
        Some(out.shape()),
        "{} shape: inferred {:?}",
        op.name(),
        inferred[0].shape
    );
}
