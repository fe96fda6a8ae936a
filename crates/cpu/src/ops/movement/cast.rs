//! Cast between f32, f16, i64 and bool, one direct conversion per pair of types.
//!
//! Conversions, following numpy and onnxruntime where they agree:
//! - to a float: round to nearest, ties to even (f32 → f16 overflows to ±inf; i64 → f16
//!   goes through f64, which is exact below 2^53, and every i64 beyond that overflows f16).
//! - float → i64: truncation toward zero. NaN, ±inf and values outside the i64 range are an
//!   error naming the element: the ONNX spec leaves them undefined and real backends
//!   disagree (x86 gives INT64_MIN, ARM saturates), so the oracle refuses to pick one.
//! - to bool: `x != 0`, so NaN is true (as numpy's `bool(nan)`).
//! - bool → number: 1 or 0.

use crate::ops::required;
use concord_core::{DType, OpError, Tensor, TensorData};
use half::f16;

/// Cast every element of the input to `to`.
pub(super) fn cast(to: DType, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let input = required(inputs, 0, "input")?;
    let data = match (input.data(), to) {
        (TensorData::F32(v), DType::F32) => TensorData::F32(v.clone()),
        (TensorData::F32(v), DType::F16) => {
            TensorData::F16(v.iter().map(|&x| f16::from_f32(x)).collect())
        }
        (TensorData::F32(v), DType::I64) => TensorData::I64(
            v.iter()
                .enumerate()
                .map(|(i, &x)| float_to_i64(x as f64, i))
                .collect::<Result<_, _>>()?,
        ),
        (TensorData::F32(v), DType::Bool) => {
            TensorData::Bool(v.iter().map(|&x| x != 0.0).collect())
        }

        (TensorData::F16(v), DType::F32) => {
            TensorData::F32(v.iter().map(|&x| x.to_f32()).collect())
        }
        (TensorData::F16(v), DType::F16) => TensorData::F16(v.clone()),
        (TensorData::F16(v), DType::I64) => TensorData::I64(
            v.iter()
                .enumerate()
                .map(|(i, &x)| float_to_i64(x.to_f64(), i))
                .collect::<Result<_, _>>()?,
        ),
        (TensorData::F16(v), DType::Bool) => {
            TensorData::Bool(v.iter().map(|&x| x.to_f32() != 0.0).collect())
        }

        (TensorData::I64(v), DType::F32) => TensorData::F32(v.iter().map(|&x| x as f32).collect()),
        (TensorData::I64(v), DType::F16) => {
            TensorData::F16(v.iter().map(|&x| f16::from_f64(x as f64)).collect())
        }
        (TensorData::I64(v), DType::I64) => TensorData::I64(v.clone()),
        (TensorData::I64(v), DType::Bool) => TensorData::Bool(v.iter().map(|&x| x != 0).collect()),

        (TensorData::Bool(v), DType::F32) => {
            TensorData::F32(v.iter().map(|&x| if x { 1.0 } else { 0.0 }).collect())
        }
        (TensorData::Bool(v), DType::F16) => TensorData::F16(
            v.iter()
                .map(|&x| if x { f16::ONE } else { f16::ZERO })
                .collect(),
        ),
        (TensorData::Bool(v), DType::I64) => TensorData::I64(v.iter().map(|&x| x as i64).collect()),
        (TensorData::Bool(v), DType::Bool) => TensorData::Bool(v.clone()),
    };
    Tensor::from_parts(input.shape().clone(), data)
}

/// Truncates toward zero, refusing values with no i64 counterpart.
fn float_to_i64(x: f64, index: usize) -> Result<i64, OpError> {
    let t = x.trunc();
    // -2^63 is representable exactly; 2^63 is the first value past i64::MAX. NaN is in no
    // range, so it is refused too.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !(-LIMIT..LIMIT).contains(&t) {
        return Err(OpError::Unsupported(format!(
            "Cast to i64: element {index} is {x}, which has no i64 value (the ONNX spec leaves \
             NaN, infinities and out-of-range values undefined)"
        )));
    }
    Ok(t as i64)
}
