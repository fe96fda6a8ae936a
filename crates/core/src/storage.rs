//! How device executors lay tensors out in device memory, and the host-side conversion in
//! both directions. Shared by every device executor so that the rounding of f32 to half on
//! an fp16 target is the same everywhere.

use crate::dtype::DType;
use crate::error::OpError;
use crate::shape::Shape;
use crate::tensor::{Tensor, TensorData};
use half::f16;

/// The element layout of a value in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Storage {
    F32,
    F16,
    I64,
    /// Bool, one byte per element.
    U8,
}

impl Storage {
    /// The device layout of `dtype` on a target whose declared storage precision is
    /// `float_storage` ([`crate::TargetSpec::storage`]): f32 is half on an f16-storage
    /// target, f16 values are half everywhere, bool is one byte. The other dtypes have no
    /// device layout yet: device executors decline nodes touching them ([`Storage::holds`]),
    /// and this maps them to a layout of their width so that a caller that asks anyway gets
    /// a conversion error from [`to_storage_bytes`], not a panic.
    pub fn of(dtype: DType, float_storage: DType) -> Storage {
        match dtype {
            DType::F32 if float_storage == DType::F16 => Storage::F16,
            DType::F32 => Storage::F32,
            DType::F16 => Storage::F16,
            DType::I64 => Storage::I64,
            DType::Bool => Storage::U8,
            other => match other.size_in_bytes() {
                8 => Storage::I64,
                4 => Storage::F32,
                2 => Storage::F16,
                _ => Storage::U8,
            },
        }
    }

    /// True when device executors have a layout for `dtype` (f32, f16, i64 and bool).
    pub fn holds(dtype: DType) -> bool {
        matches!(dtype, DType::F32 | DType::F16 | DType::I64 | DType::Bool)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Storage::F32 => 4,
            Storage::F16 => 2,
            Storage::I64 => 8,
            Storage::U8 => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Storage::F32 | Storage::F16)
    }
}

/// A tensor's elements as native-endian bytes in `storage` layout (rounding f32 to half
/// where the storage is half).
pub fn to_storage_bytes(t: &Tensor, storage: Storage) -> Result<Vec<u8>, OpError> {
    let mut out = Vec::with_capacity(t.len() * storage.size());
    match (t.data(), storage) {
        (TensorData::F32(v), Storage::F32) => v.iter().for_each(|x| out.extend(x.to_ne_bytes())),
        (TensorData::F32(v), Storage::F16) => v
            .iter()
            .for_each(|x| out.extend(f16::from_f32(*x).to_ne_bytes())),
        (TensorData::F16(v), Storage::F16) => v.iter().for_each(|x| out.extend(x.to_ne_bytes())),
        (TensorData::I64(v), Storage::I64) => v.iter().for_each(|x| out.extend(x.to_ne_bytes())),
        (TensorData::Bool(v), Storage::U8) => out.extend(v.iter().map(|&b| u8::from(b))),
        (_, storage) => {
            return Err(OpError::Unsupported(format!(
                "a {} tensor cannot be stored as {storage:?} on the device",
                t.dtype()
            )))
        }
    }
    Ok(out)
}

/// A host tensor of `dtype` and `shape` from bytes in `storage` layout.
pub fn from_storage_bytes(
    bytes: &[u8],
    storage: Storage,
    dtype: DType,
    shape: Shape,
) -> Result<Tensor, OpError> {
    let data = match (storage, dtype) {
        (Storage::F32, DType::F32) => TensorData::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        (Storage::F16, DType::F32) => TensorData::F32(
            bytes
                .chunks_exact(2)
                .map(|c| f16::from_ne_bytes([c[0], c[1]]).to_f32())
                .collect(),
        ),
        (Storage::F16, DType::F16) => TensorData::F16(
            bytes
                .chunks_exact(2)
                .map(|c| f16::from_ne_bytes([c[0], c[1]]))
                .collect(),
        ),
        (Storage::I64, DType::I64) => TensorData::I64(
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        (Storage::U8, DType::Bool) => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
        (storage, dtype) => {
            return Err(OpError::Unsupported(format!(
                "device storage {storage:?} does not hold {dtype} values"
            )))
        }
    };
    Tensor::from_parts(shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_round_trips_through_half_storage_with_one_rounding() {
        let t = Tensor::from_f32([3], vec![1.0, 1.0 + 1e-4, 70000.0])
            .unwrap_or_else(|_| Tensor::scalar_f32(0.0));
        let bytes = to_storage_bytes(&t, Storage::F16).unwrap_or_default();
        assert_eq!(bytes.len(), 6);
        let back = from_storage_bytes(&bytes, Storage::F16, DType::F32, Shape::new([3]));
        let back = back
            .ok()
            .and_then(|b| b.as_f32().map(|v| v.to_vec()))
            .unwrap_or_default();
        assert_eq!(back, vec![1.0, 1.0, f32::INFINITY]);
    }

    #[test]
    fn mismatched_layouts_are_errors() {
        let t = Tensor::from_i64([1], vec![3]).unwrap_or_else(|_| Tensor::scalar_i64(0));
        assert!(to_storage_bytes(&t, Storage::F32).is_err());
        assert!(from_storage_bytes(&[0; 4], Storage::F32, DType::I64, Shape::new([1])).is_err());
    }
}
