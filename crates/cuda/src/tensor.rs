//! Device tensors: a buffer of bytes on the device, its storage type, dtype and shape, and
//! the copies between host tensors and device memory (rounding f32 to half on the f16
//! target).

use crate::error::CudaError;
use concord_core::{DType, OpError, Shape, Target, Tensor, TensorData};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use half::f16;
use std::sync::Arc;

/// How a value's elements are laid out in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Storage {
    F32,
    F16,
    I64,
    U8,
}

/// A value on the device. The buffer is shared: Reshape, Flatten, Squeeze, Unsqueeze,
/// Identity and Dropout give a new tensor over the same bytes.
#[derive(Clone, Debug)]
pub struct DeviceTensor {
    pub buf: Arc<CudaSlice<u8>>,
    /// The device address of element 0.
    pub ptr: u64,
    pub storage: Storage,
    pub dtype: DType,
    pub shape: Shape,
}

impl Storage {
    /// The device layout of `dtype` on `target`: f32 is half on the fp16 target, f16 values
    /// are half everywhere, bool is one byte.
    pub fn of(dtype: DType, target: Target) -> Storage {
        match dtype {
            DType::F32 if target.is_fp16() => Storage::F16,
            DType::F32 => Storage::F32,
            DType::F16 => Storage::F16,
            DType::I64 => Storage::I64,
            DType::Bool => Storage::U8,
        }
    }

    pub fn size(self) -> usize {
        match self {
            Storage::F32 => 4,
            Storage::F16 => 2,
            Storage::I64 => 8,
            Storage::U8 => 1,
        }
    }

    /// The kernel-name suffix of arithmetic kernels ("f32", "f16", "i64", "u8").
    pub fn suffix(self) -> &'static str {
        match self {
            Storage::F32 => "f32",
            Storage::F16 => "f16",
            Storage::I64 => "i64",
            Storage::U8 => "u8",
        }
    }

    /// The kernel-name suffix of bit-moving kernels of the same element size.
    pub fn bits(self) -> &'static str {
        match self {
            Storage::F32 => "b32",
            Storage::F16 => "b16",
            Storage::I64 => "b64",
            Storage::U8 => "b8",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Storage::F32 | Storage::F16)
    }
}

impl DeviceTensor {
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The same bytes under another shape (element count unchanged, checked by the caller's
    /// shape inference).
    pub fn reshaped(&self, shape: Shape) -> DeviceTensor {
        DeviceTensor {
            shape,
            ..self.clone()
        }
    }

    /// The address of element `index`.
    pub fn ptr_at(&self, index: usize) -> u64 {
        self.ptr + (index * self.storage.size()) as u64
    }
}

/// Allocates an uninitialised device tensor on `stream`. Zero-element tensors get a
/// one-byte buffer, since the driver refuses zero-byte allocations.
pub fn alloc(
    stream: &Arc<CudaStream>,
    storage: Storage,
    dtype: DType,
    shape: Shape,
) -> Result<DeviceTensor, CudaError> {
    let elements = shape.checked_numel().ok_or_else(|| {
        CudaError::Runtime(format!(
            "shape {shape} has more elements than can be addressed"
        ))
    })?;
    let bytes = elements
        .checked_mul(storage.size())
        .ok_or_else(|| CudaError::Runtime(format!("shape {shape} is too large")))?
        .max(1);
    // SAFETY: the buffer is written by a kernel or a copy before anything reads it (every
    // caller launches the op that fills it right after).
    let buf =
        unsafe { stream.alloc::<u8>(bytes) }.map_err(|e| CudaError::driver("cuMemAlloc", e))?;
    Ok(wrap(buf, stream, storage, dtype, shape))
}

/// Uploads a host tensor in `storage` layout.
pub fn upload(
    stream: &Arc<CudaStream>,
    t: &Tensor,
    storage: Storage,
) -> Result<DeviceTensor, CudaError> {
    let mut bytes = to_storage_bytes(t, storage).map_err(|e| CudaError::Runtime(e.to_string()))?;
    if bytes.is_empty() {
        bytes.push(0);
    }
    let buf = stream
        .clone_htod(&bytes)
        .map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e))?;
    Ok(wrap(buf, stream, storage, t.dtype(), t.shape().clone()))
}

/// Downloads a device tensor as a host tensor of its dtype (half storage of an f32 value
/// widens back to f32). The stream is synchronised before the bytes are read.
pub fn download(stream: &Arc<CudaStream>, t: &DeviceTensor) -> Result<Tensor, CudaError> {
    let bytes_len = t.numel() * t.storage.size();
    let mut bytes = vec![0u8; bytes_len.max(1)];
    let view = t
        .buf
        .try_slice(..bytes.len())
        .ok_or_else(|| CudaError::Runtime("a device buffer is shorter than its shape".into()))?;
    stream
        .memcpy_dtoh(&view, &mut bytes)
        .map_err(|e| CudaError::driver("cuMemcpyDtoHAsync", e))?;
    stream
        .synchronize()
        .map_err(|e| CudaError::driver("cuStreamSynchronize", e))?;
    bytes.truncate(bytes_len);
    from_storage_bytes(&bytes, t.storage, t.dtype, t.shape.clone())
        .map_err(|e| CudaError::Runtime(e.to_string()))
}

fn wrap(
    buf: CudaSlice<u8>,
    stream: &Arc<CudaStream>,
    storage: Storage,
    dtype: DType,
    shape: Shape,
) -> DeviceTensor {
    let ptr = {
        let (ptr, _sync) = buf.device_ptr(stream);
        ptr
    };
    DeviceTensor {
        buf: Arc::new(buf),
        ptr,
        storage,
        dtype,
        shape,
    }
}

/// A tensor's elements as bytes in `storage` layout (rounding f32 to half where the storage
/// is half).
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

/// Bytes in `storage` layout back to a host tensor of `dtype`.
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
    fn half_storage_rounds_f32_once_and_widens_back() {
        // 1 + 2^-11 is exactly halfway between the halves 1 and 1 + 2^-10: it rounds to
        // even, 1.0. 3.0 is exact in half.
        let t = Tensor::from_f32([2], vec![1.0 + f32::powi(2.0, -11), 3.0]).expect("tensor");
        let bytes = to_storage_bytes(&t, Storage::F16).expect("bytes");
        assert_eq!(bytes.len(), 4);
        let back =
            from_storage_bytes(&bytes, Storage::F16, DType::F32, Shape::new([2])).expect("back");
        assert_eq!(back.as_f32(), Some(&[1.0f32, 3.0][..]));
    }

    #[test]
    fn every_dtype_round_trips_through_its_storage() {
        let cases = [
            Tensor::from_f32([3], vec![-1.5, 0.0, 7.25]).expect("f32"),
            Tensor::from_i64([2], vec![i64::MIN, 42]).expect("i64"),
            Tensor::from_bool([3], vec![true, false, true]).expect("bool"),
            Tensor::from_f16([1], vec![f16::from_f32(0.5)]).expect("f16"),
        ];
        for t in cases {
            let storage = Storage::of(t.dtype(), Target::Cuda);
            let bytes = to_storage_bytes(&t, storage).expect("bytes");
            assert_eq!(bytes.len(), t.len() * storage.size());
            let back =
                from_storage_bytes(&bytes, storage, t.dtype(), t.shape().clone()).expect("back");
            assert!(back.bit_identical(&t), "{t:?} came back as {back:?}");
        }
    }

    #[test]
    fn storage_follows_the_target() {
        assert_eq!(Storage::of(DType::F32, Target::Cuda), Storage::F32);
        assert_eq!(Storage::of(DType::F32, Target::CudaFp16), Storage::F16);
        assert_eq!(Storage::of(DType::I64, Target::CudaFp16), Storage::I64);
        assert_eq!(Storage::of(DType::Bool, Target::Cuda), Storage::U8);
    }
}
