//! Shared helpers for the nn-family kernel tests (Conv, Gemm, MatMul, pools, Resize):
//! tensor constructors, deterministic test values, a tolerance type, one `check` for float
//! outputs, and the check that shape inference agrees with what a kernel produced.

#![allow(dead_code)]

use concord_core::infer::{infer_op, ValueFact};
use concord_core::{DType, Dim, Op, OpError, Tensor};
use concord_cpu::run_op;
use half::f16;

/// How close a float output must be to the expected value.
#[derive(Clone, Copy, Debug)]
pub enum Tolerance {
    /// Bit-for-bit equal to the expected value rounded to the output dtype. Right for
    /// results that are exact in f64, such as sums of products of the dyadic values
    /// [`values`] produces.
    Exact,
    /// Within one rounding of the output dtype (|got − want| ≤ 2·u·|want|), which is what
    /// "accumulated in f64, rounded once" promises for an expected value computed in f64.
    RoundedOnce,
}

pub fn f32s(dims: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f32(dims, values.to_vec()).expect("test tensor shape matches its data")
}

pub fn f64s_as_f32(dims: &[usize], values: &[f64]) -> Tensor {
    Tensor::from_f32(dims, values.iter().map(|&v| v as f32).collect())
        .expect("test tensor shape matches its data")
}

pub fn f16s(dims: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f16(dims, values.iter().map(|&v| f16::from_f32(v)).collect())
        .expect("test tensor shape matches its data")
}

pub fn i64s(dims: &[usize], values: &[i64]) -> Tensor {
    Tensor::from_i64(dims, values.to_vec()).expect("test tensor shape matches its data")
}

/// `len` deterministic values in [-1, 1), each a multiple of 1/64. Products of two are
/// multiples of 2^-12, so every sum a test makes of them is exact in f64 and in f32: a
/// kernel and an oracle that add in different orders still agree bit for bit.
pub fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % 128) as f64 / 64.0 - 1.0
        })
        .collect()
}

/// Runs a single-output op; `None` is an omitted optional input.
pub fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
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

/// Runs a single-output op that must succeed.
pub fn ok(op: &Op, inputs: &[Option<&Tensor>]) -> Tensor {
    let result = run(op, inputs);
    assert!(result.is_ok(), "{} failed: {result:?}", op.name());
    result.expect("checked just above")
}

/// Asserts a float output's dtype, shape and values.
pub fn check(got: &Tensor, dtype: DType, dims: &[usize], want: &[f64], tol: Tolerance) {
    assert_eq!(got.dtype(), dtype, "dtype of {got:?}");
    assert_eq!(got.dims(), dims, "shape of {got:?}");
    let values = got.to_f64_vec();
    assert_eq!(values.len(), want.len(), "element count of {got:?}");
    for (i, (&g, &w)) in values.iter().zip(want).enumerate() {
        let fine = if w.is_nan() {
            g.is_nan()
        } else {
            match tol {
                Tolerance::Exact => g == round_to(dtype, w),
                Tolerance::RoundedOnce => {
                    (g - w).abs() <= 2.0 * dtype.unit_roundoff() * w.abs() + f64::MIN_POSITIVE
                }
            }
        };
        assert!(fine, "element {i}: got {g:e}, expected {w:e} ({tol:?})");
    }
}

/// `v` rounded to `dtype` and widened back.
pub fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F16 => f16::from_f64(v).to_f64(),
        _ => v as f32 as f64,
    }
}

/// Asserts that `result` failed with an error `matches` accepts, and that its message
/// mentions every one of `needles` (the shapes or attribute a user needs to see).
pub fn check_error(
    result: Result<Tensor, OpError>,
    matches: fn(&OpError) -> bool,
    needles: &[&str],
) {
    let err = result.expect_err("expected the op to fail");
    assert!(matches(&err), "unexpected error kind: {err:?}");
    let message = err.to_string();
    for needle in needles {
        assert!(
            message.contains(needle),
            "error message {message:?} does not mention {needle:?}"
        );
    }
}

/// Infers the op's output dims from the inputs' (fully known) shapes; `constant` marks the
/// inputs whose values inference may read.
pub fn infer_dims(
    op: &Op,
    inputs: &[Option<&Tensor>],
    constant: &[usize],
) -> Result<Vec<Dim>, OpError> {
    let shapes: Vec<Option<Vec<Dim>>> = inputs
        .iter()
        .map(|t| t.map(|t| t.shape().to_sym()))
        .collect();
    let facts: Vec<Option<ValueFact>> = inputs
        .iter()
        .zip(&shapes)
        .enumerate()
        .map(|(i, (t, shape))| match (t, shape) {
            (Some(t), Some(shape)) => Some(ValueFact {
                dtype: t.dtype(),
                shape,
                value: constant.contains(&i).then_some(*t),
            }),
            _ => None,
        })
        .collect();
    let mut out = infer_op(op, &facts, 1)?;
    Ok(out.remove(0).shape)
}

/// Runs the op and asserts that shape inference, given the same input shapes, predicts the
/// output's dtype-independent shape exactly. Returns the kernel's output.
pub fn run_and_check_inference(op: &Op, inputs: &[Option<&Tensor>], constant: &[usize]) -> Tensor {
    let got = ok(op, inputs);
    let inferred = infer_dims(op, inputs, constant);
    assert_eq!(
        inferred,
        Ok(got.shape().to_sym()),
        "{}: shape inference disagrees with the kernel",
        op.name()
    );
    got
}
