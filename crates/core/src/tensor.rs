//! [`Tensor`]: a shape plus a typed, row-major buffer of f32, f16, i64 or bool elements.

use crate::dtype::DType;
use crate::error::{Error, OpError};
use crate::shape::Shape;
use half::f16;

/// A dense row-major tensor that owns its elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Shape,
    data: TensorData,
}

/// The typed element buffer of a [`Tensor`].
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl TensorData {
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::I64(v) => v.len(),
            TensorData::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F16(_) => DType::F16,
            TensorData::I64(_) => DType::I64,
            TensorData::Bool(_) => DType::Bool,
        }
    }
}

impl Tensor {
    /// A tensor from a shape and data; fails when the element count does not match.
    pub fn new(shape: impl Into<Shape>, data: TensorData) -> Result<Self, Error> {
        let shape = shape.into();
        let expected = shape.checked_numel().ok_or_else(|| Error::ShapeOverflow {
            name: String::new(),
            shape: shape.to_string(),
        })?;
        if expected != data.len() {
            return Err(Error::TensorData {
                name: String::new(),
                shape: shape.to_string(),
                expected,
                actual: data.len(),
            });
        }
        Ok(Tensor { shape, data })
    }

    /// Like [`Tensor::new`] but reporting a mismatch as an [`OpError`], for kernels.
    pub fn from_parts(shape: Shape, data: TensorData) -> Result<Self, OpError> {
        if shape.checked_numel() != Some(data.len()) {
            return Err(OpError::Shape(format!(
                "shape {shape} does not match {} elements",
                data.len()
            )));
        }
        Ok(Tensor { shape, data })
    }

    pub fn from_f32(shape: impl Into<Shape>, data: Vec<f32>) -> Result<Self, Error> {
        Self::new(shape, TensorData::F32(data))
    }

    pub fn from_f16(shape: impl Into<Shape>, data: Vec<f16>) -> Result<Self, Error> {
        Self::new(shape, TensorData::F16(data))
    }

    pub fn from_i64(shape: impl Into<Shape>, data: Vec<i64>) -> Result<Self, Error> {
        Self::new(shape, TensorData::I64(data))
    }

    pub fn from_bool(shape: impl Into<Shape>, data: Vec<bool>) -> Result<Self, Error> {
        Self::new(shape, TensorData::Bool(data))
    }

    /// A rank-0 f32 tensor.
    pub fn scalar_f32(v: f32) -> Self {
        Tensor {
            shape: Shape::scalar(),
            data: TensorData::F32(vec![v]),
        }
    }

    /// A rank-0 i64 tensor.
    pub fn scalar_i64(v: i64) -> Self {
        Tensor {
            shape: Shape::scalar(),
            data: TensorData::I64(vec![v]),
        }
    }

    /// A rank-1 i64 tensor, the usual form of shape, axes and index operands.
    pub fn vec_i64(v: Vec<i64>) -> Self {
        Tensor {
            shape: Shape(vec![v.len()]),
            data: TensorData::I64(v),
        }
    }

    /// A tensor of zeros (false for bool).
    pub fn zeros(dtype: DType, shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        let n = shape.numel();
        let data = match dtype {
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::F16 => TensorData::F16(vec![f16::ZERO; n]),
            DType::I64 => TensorData::I64(vec![0; n]),
            DType::Bool => TensorData::Bool(vec![false; n]),
        };
        Tensor { shape, data }
    }

    /// Builds a tensor of `dtype` from f64 values, rounding once to the target type
    /// (round-to-nearest for floats; saturating truncation toward zero for i64; != 0 for
    /// bool). This is the single place the reference executor rounds its f64 results.
    pub fn from_f64(dtype: DType, shape: Shape, values: Vec<f64>) -> Result<Self, OpError> {
        let data = match dtype {
            DType::F32 => TensorData::F32(values.into_iter().map(|v| v as f32).collect()),
            DType::F16 => TensorData::F16(values.into_iter().map(f16::from_f64).collect()),
            DType::I64 => TensorData::I64(values.into_iter().map(|v| v as i64).collect()),
            DType::Bool => TensorData::Bool(values.into_iter().map(|v| v != 0.0).collect()),
        };
        Tensor::from_parts(shape, data)
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn data(&self) -> &TensorData {
        &self.data
    }

    pub fn into_data(self) -> TensorData {
        self.data
    }

    /// Size of the element buffer in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.len() * self.dtype().size_in_bytes()
    }

    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_f16(&self) -> Option<&[f16]> {
        match &self.data {
            TensorData::F16(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            TensorData::I64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<&[bool]> {
        match &self.data {
            TensorData::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// Every element widened to f64 (exact for f32, f16 and bool; i64 beyond 2^53 rounds).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F16(v) => v.iter().map(|&x| x.to_f64()).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| if x { 1.0 } else { 0.0 }).collect(),
        }
    }

    /// The same elements under a new shape with the same element count.
    pub fn reshaped(&self, shape: Shape) -> Result<Tensor, OpError> {
        Tensor::from_parts(shape, self.data.clone())
    }

    /// Bitwise equality: same dtype, shape and bits (NaN payloads included). Used for the
    /// thread-safety promise, which is about identical bits, not close values.
    pub fn bit_identical(&self, other: &Tensor) -> bool {
        if self.shape != other.shape {
            return false;
        }
        match (&self.data, &other.data) {
            (TensorData::F32(a), TensorData::F32(b)) => {
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (TensorData::F16(a), TensorData::F16(b)) => {
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (TensorData::I64(a), TensorData::I64(b)) => a == b,
            (TensorData::Bool(a), TensorData::Bool(b)) => a == b,
            _ => false,
        }
    }

    /// Reads an integer operand (i64 tensor) as a list, for shape, axes and index inputs.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        self.as_i64().map(|v| v.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_length_is_checked() {
        assert!(Tensor::from_f32([2, 3], vec![0.0; 6]).is_ok());
        assert!(matches!(
            Tensor::from_f32([2, 3], vec![0.0; 5]),
            Err(Error::TensorData {
                expected: 6,
                actual: 5,
                ..
            })
        ));
    }

    #[test]
    fn from_f64_rounds_to_dtype() {
        let t = Tensor::from_f64(DType::F16, Shape::new([1]), vec![1.0 + 1e-4])
            .unwrap_or_else(|_| Tensor::zeros(DType::F16, [1]));
        assert_eq!(t.as_f16().map(|v| v[0]), Some(f16::ONE));
    }
}
