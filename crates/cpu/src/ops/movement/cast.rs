//! Cast between any two dtypes, rounding once.
//!
//! Conversions, following numpy and onnxruntime where they agree:
//! - to a float: round to nearest, ties to even (f32 → f16 overflows to ±inf; i64 → f16
//!   goes through f64, which is exact below 2^53, and every i64 beyond that overflows f16).
//! - float → integer: truncation toward zero. NaN, ±inf and values outside the range are an
//!   error naming the element: the ONNX spec leaves them undefined and real backends
//!   disagree (x86 gives INT64_MIN, ARM saturates), so the oracle refuses to pick one.
//! - to bool: `x != 0`, so NaN is true (as numpy's `bool(nan)`).
//! - integer → integer: wraps modulo the target width, as numpy's `astype`.
//! - bool → number: 1 or 0.

use crate::ops::required;
use concord_core::{DType, OpError, Tensor, TensorData};

/// Cast every element of the input to `to`.
pub(crate) fn cast(to: DType, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let input = required(inputs, 0, "input")?;
    let data = if input.dtype() == to {
        input.data().clone()
    } else if let Some(ints) = input.to_i128_vec() {
        // An integer or bool source: exact in i128.
        match to {
            // Rust's i128 → f32 and → f64 conversions round once, to nearest.
            DType::F32 => TensorData::F32(ints.iter().map(|&v| v as f32).collect()),
            DType::F64 => TensorData::F64(ints.iter().map(|&v| v as f64).collect()),
            // f16 and bf16 through f64: exact for every integer below 2^53, and every
            // integer beyond that overflows f16 or is far past bf16's 8 significant bits.
            // (Equivalent mutant, excluded in .cargo/mutants.toml: with this guard false,
            // the arm below's `from_i128` converts a float as `from_f64(v as f64)`, exactly
            // this arm's value.)
            to if to.is_float() => {
                TensorData::from_f64(to, &ints.iter().map(|&v| v as f64).collect::<Vec<_>>())
            }
            // Integer to integer wraps modulo the target's width (numpy's astype); to bool
            // is `!= 0`.
            to => TensorData::from_i128(to, &ints),
        }
    } else {
        // A float source: widening to f64 is exact, so one rounding happens below.
        let values = input.to_f64_vec();
        if let (true, Some((lo, hi))) = (to.is_integer(), to.integer_range()) {
            for (index, &x) in values.iter().enumerate() {
                check_float_to_int(x, index, to, lo, hi)?;
            }
        }
        // Floats round to nearest; to an integer, truncation toward zero (in range, as
        // checked); to bool, `!= 0`, so NaN is true.
        TensorData::from_f64(to, &values)
    };
    Tensor::from_parts(input.shape().clone(), data)
}

/// Refuses a float whose truncation has no value in the integer type `to` of range
/// `lo..=hi`.
fn check_float_to_int(x: f64, index: usize, to: DType, lo: i128, hi: i128) -> Result<(), OpError> {
    let t = x.trunc();
    // lo and hi + 1 are powers of two (or zero), so both are exact in f64; NaN is in no
    // range, so it is refused too.
    if !((lo as f64) <= t && t < (hi + 1) as f64) {
        return Err(OpError::Unsupported(format!(
            "Cast to {to}: element {index} is {x}, which has no {to} value (the ONNX spec \
             leaves NaN, infinities and out-of-range values undefined)"
        )));
    }
    Ok(())
}
