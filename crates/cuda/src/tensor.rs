//! Device tensors: a buffer of bytes on the device, its storage type, dtype and shape, and
//! the copies between host tensors and device memory (rounding f32 to half on the f16
//! target).

use crate::driver::{Allocation, DeviceBuffer, Faults, Staging, Stream};
use crate::error::CudaError;
use concord_core::{DType, MemoryBudget, Shape, Tensor};
use std::sync::{Arc, Mutex};

pub use concord_core::storage::{from_storage_bytes, to_storage_bytes, Storage};

/// A value on the device. The buffer is shared: Reshape, Flatten, Squeeze, Unsqueeze,
/// Identity and Dropout give a new tensor over the same bytes.
#[derive(Clone, Debug)]
pub struct DeviceTensor {
    pub buf: Arc<DeviceBuffer>,
    /// The device address of element 0.
    pub ptr: u64,
    pub storage: Storage,
    pub dtype: DType,
    pub shape: Shape,
}

/// Where new device memory comes from: the stream it is used on, how it is allocated,
/// whom a failed free is reported to, and page-locked staging memory for uploads (None:
/// uploads go from pageable memory, as `prepare`'s one-time weight uploads do).
#[derive(Clone, Copy)]
pub struct Place<'a> {
    pub stream: &'a Stream,
    pub allocation: Allocation,
    pub faults: Option<&'a Arc<Faults>>,
    pub staging: Option<&'a Mutex<Staging>>,
    /// Every allocation at this place is checked against it before it is made.
    pub budget: MemoryBudget,
}

/// The CUDA kernel-name suffixes of a storage layout.
pub trait StorageSuffix {
    /// The kernel-name suffix of arithmetic kernels ("f32", "f16", "i64", "u8").
    fn suffix(self) -> &'static str;
    /// The kernel-name suffix of bit-moving kernels of the same element size.
    fn bits(self) -> &'static str;
}

impl StorageSuffix for Storage {
    fn suffix(self) -> &'static str {
        match self {
            Storage::F32 => "f32",
            Storage::F16 => "f16",
            Storage::I64 => "i64",
            Storage::U8 => "u8",
        }
    }

    fn bits(self) -> &'static str {
        match self {
            Storage::F32 => "b32",
            Storage::F16 => "b16",
            Storage::I64 => "b64",
            Storage::U8 => "b8",
        }
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

/// Allocates an uninitialised device tensor at `place`. Zero-element tensors get a
/// one-byte buffer, since the driver refuses zero-byte allocations.
pub fn alloc(
    place: &Place,
    storage: Storage,
    dtype: DType,
    shape: Shape,
) -> Result<DeviceTensor, CudaError> {
    let counted = shape
        .dims()
        .iter()
        .try_fold(storage.size() as u64, |acc, &d| acc.checked_mul(d as u64));
    place
        .budget
        .check_bytes(counted, || format!("a device tensor ({storage:?} {shape})"))
        .map_err(|e| CudaError::Runtime(e.to_string()))?;
    let bytes = byte_len(storage, &shape)?;
    // The buffer is written by a kernel or a copy before anything reads it (every caller
    // launches the op that fills it right after).
    let buf = place.stream.alloc(bytes, place.allocation, place.faults)?;
    Ok(wrap(buf, storage, dtype, shape))
}

/// Uploads a host tensor in `storage` layout, through the place's page-locked staging
/// memory when it has room (the copy then overlaps the kernels queued before it), else
/// from pageable memory.
pub fn upload(place: &Place, t: &Tensor, storage: Storage) -> Result<DeviceTensor, CudaError> {
    let bytes = to_storage_bytes(t, storage).map_err(|e| CudaError::Runtime(e.to_string()))?;
    let dev = alloc(place, storage, t.dtype(), t.shape().clone())?;
    let mut staging = match place.staging {
        Some(s) => Some(s.lock().map_err(|_| CudaError::Poisoned)?),
        None => None,
    };
    match staging.as_mut().and_then(|s| s.reserve(bytes.len())) {
        Some(pinned) => {
            pinned.copy_from_slice(&bytes);
            place.stream.copy_to_device(dev.ptr, pinned)?;
        }
        None => place.stream.copy_to_device(dev.ptr, &bytes)?,
    }
    Ok(dev)
}

/// Downloads a device tensor as a host tensor of its dtype (half storage of an f32 value
/// widens back to f32). The stream is synchronised before the bytes are read.
pub fn download(stream: &Stream, t: &DeviceTensor) -> Result<Tensor, CudaError> {
    let bytes_len = byte_len(t.storage, &t.shape)?;
    let end = t
        .ptr
        .checked_sub(t.buf.ptr())
        .and_then(|offset| usize::try_from(offset).ok())
        .and_then(|offset| offset.checked_add(bytes_len));
    if !end.is_some_and(|end| end <= t.buf.len()) {
        return Err(CudaError::Runtime(
            "a device buffer is shorter than its shape".into(),
        ));
    }
    let mut bytes = vec![0u8; bytes_len];
    stream.copy_to_host(&mut bytes, t.ptr)?;
    from_storage_bytes(&bytes, t.storage, t.dtype, t.shape.clone())
        .map_err(|e| CudaError::Runtime(e.to_string()))
}

/// The bytes `shape` takes in `storage`, checked.
fn byte_len(storage: Storage, shape: &Shape) -> Result<usize, CudaError> {
    shape
        .checked_numel()
        .and_then(|n| n.checked_mul(storage.size()))
        .ok_or_else(|| {
            CudaError::Runtime(format!(
                "shape {shape} has more bytes than can be addressed"
            ))
        })
}

fn wrap(buf: DeviceBuffer, storage: Storage, dtype: DType, shape: Shape) -> DeviceTensor {
    DeviceTensor {
        ptr: buf.ptr(),
        buf: Arc::new(buf),
        storage,
        dtype,
        shape,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::float_storage;
    use crate::{CUDA, CUDA_FP16};
    use half::f16;

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
            let storage = Storage::of(t.dtype(), DType::F32);
            let bytes = to_storage_bytes(&t, storage).expect("bytes");
            assert_eq!(bytes.len(), t.len() * storage.size());
            let back =
                from_storage_bytes(&bytes, storage, t.dtype(), t.shape().clone()).expect("back");
            assert!(back.bit_identical(&t), "{t:?} came back as {back:?}");
        }
    }

    #[test]
    fn storage_follows_the_target() {
        let (f32_target, f16_target) = (float_storage(&CUDA), float_storage(&CUDA_FP16));
        assert_eq!(Storage::of(DType::F32, f32_target), Storage::F32);
        assert_eq!(Storage::of(DType::F32, f16_target), Storage::F16);
        assert_eq!(Storage::of(DType::I64, f16_target), Storage::I64);
        assert_eq!(Storage::of(DType::Bool, f32_target), Storage::U8);
    }
}
