//! Tensors as .npy files, for every dtype numpy has: the one reader and writer that
//! `concord run`, the conformance suite's golden data and repro cases, and the tests share.
//!
//! bf16 has no numpy dtype (ml_dtypes stores it as an opaque two-byte void), so it is
//! refused on both sides with that said; cast to f32 first.

use crate::{DType, MemoryBudget, Shape, Tensor, TensorData};
use npyz::WriterBuilder;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

/// Reads a .npy file into a tensor, within the machine's default [`MemoryBudget`]. The
/// message names the file on every failure.
pub fn read(path: &Path) -> Result<Tensor, String> {
    read_within(path, MemoryBudget::default())
}

/// [`read`], refusing an array the header sizes over `budget` before it is allocated.
pub fn read_within(path: &Path, budget: MemoryBudget) -> Result<Tensor, String> {
    let fail = |what: String| format!("{}: {what}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    if !meta.is_file() {
        // A FIFO or a device file would be read until memory runs out.
        return Err(fail("not a regular file".into()));
    }
    let mut file = File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    check_header_length(&mut file).map_err(fail)?;
    let npy = npyz::NpyFile::new(BufReader::new(file))
        .map_err(|e| fail(format!("not a .npy file: {e}")))?;
    if npy.order() == npyz::Order::Fortran {
        return Err(fail(
            "Fortran-ordered arrays are not supported; save with C order".into(),
        ));
    }
    let mut shape = Vec::with_capacity(npy.shape().len());
    for &d in npy.shape() {
        shape.push(usize::try_from(d).map_err(|_| fail(format!("dim {d} is too large")))?);
    }
    let shape = Shape(shape);
    let count = shape
        .checked_numel()
        .ok_or_else(|| fail(format!("shape {shape} has too many elements")))?;
    let descr = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => return Err(fail(format!("unsupported dtype {other:?}"))),
    };
    let code = descr.trim_start_matches(['<', '>', '|', '=']);
    let dtype = dtype_of(code).ok_or_else(|| {
        fail(format!(
            "unsupported dtype `{descr}`; Concord reads float64/32/16, int8/16/32/64, \
             uint8/16/32/64 and bool"
        ))
    })?;
    // The header's element count must be backed by the file before anything that size is
    // allocated (a lying header is an error, not an allocation failure).
    let bytes = count.checked_mul(dtype.size_in_bytes());
    let file_len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if bytes.map_or(true, |b| b as u64 > file_len) {
        return Err(fail(format!(
            "the header says shape {shape} of {dtype}, more than the file's {file_len} bytes"
        )));
    }
    budget
        .check_tensor(dtype, shape.dims())
        .map_err(|e| fail(e.to_string()))?;
    let e = |e: std::io::Error| fail(e.to_string());
    let data = match dtype {
        DType::F64 => TensorData::F64(npy.into_vec().map_err(e)?),
        DType::F32 => TensorData::F32(npy.into_vec().map_err(e)?),
        DType::F16 => TensorData::F16(npy.into_vec().map_err(e)?),
        DType::I8 => TensorData::I8(npy.into_vec().map_err(e)?),
        DType::I16 => TensorData::I16(npy.into_vec().map_err(e)?),
        DType::I32 => TensorData::I32(npy.into_vec().map_err(e)?),
        DType::I64 => TensorData::I64(npy.into_vec().map_err(e)?),
        DType::U8 => TensorData::U8(npy.into_vec().map_err(e)?),
        DType::U16 => TensorData::U16(npy.into_vec().map_err(e)?),
        DType::U32 => TensorData::U32(npy.into_vec().map_err(e)?),
        DType::U64 => TensorData::U64(npy.into_vec().map_err(e)?),
        DType::Bool => TensorData::Bool(npy.into_vec().map_err(e)?),
        DType::BF16 => return Err(fail("bf16 has no .npy dtype".into())),
    };
    Tensor::new(shape, data).map_err(|e| fail(e.to_string()))
}

/// The longest .npy header read: numpy's own reader refuses headers over 10,000 bytes by
/// default, and a dict of a few keys never needs more.
const MAX_HEADER_BYTES: u64 = 64 * 1024;

/// Reads the magic string and the header length the file declares, refusing a length over
/// [`MAX_HEADER_BYTES`] before the header is allocated; leaves `file` at its start.
fn check_header_length(file: &mut File) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut prefix = [0u8; 12];
    let n = file
        .read(&mut prefix)
        .map_err(|e| format!("cannot read: {e}"))?;
    if n < 10 || &prefix[..6] != b"\x93NUMPY" {
        return Err("not a .npy file: no NUMPY magic string".into());
    }
    let declared = match prefix[6] {
        1 => u64::from(u16::from_le_bytes([prefix[8], prefix[9]])),
        2 | 3 if n == 12 => u64::from(u32::from_le_bytes([
            prefix[8], prefix[9], prefix[10], prefix[11],
        ])),
        major => {
            return Err(format!(
                "not a .npy file: format version {major} is unknown"
            ))
        }
    };
    if declared > MAX_HEADER_BYTES {
        return Err(format!(
            "the header claims {declared} bytes; .npy headers are at most {MAX_HEADER_BYTES}"
        ));
    }
    // npyz multiplies the header's dims without checking, so a shape whose element count
    // overflows 64 bits would panic inside it: check the product here first.
    let start = if prefix[6] == 1 { 10 } else { 12 };
    file.seek(SeekFrom::Start(start))
        .map_err(|e| format!("cannot read: {e}"))?;
    let mut header = Vec::new();
    file.by_ref()
        .take(declared)
        .read_to_end(&mut header)
        .map_err(|e| format!("cannot read: {e}"))?;
    if let Some(dims) = header_dims(&String::from_utf8_lossy(&header)) {
        if dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .is_none()
        {
            return Err(format!(
                "the header's shape {dims:?} has more elements than a 64-bit count holds"
            ));
        }
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| format!("cannot read: {e}"))?;
    Ok(())
}

/// The dims of the `'shape': (…)` entry of a header dict, when it is a tuple of plain
/// non-negative integers; `None` for anything else (which npyz then refuses itself).
fn header_dims(header: &str) -> Option<Vec<u64>> {
    let key = header
        .find("'shape'")
        .or_else(|| header.find("\"shape\""))?;
    let rest = &header[key..];
    let open = rest.find('(')?;
    let close = rest[open..].find(')')? + open;
    rest[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.trim_end_matches('L').parse::<u64>().ok())
        .collect()
}

/// The dtype of a numpy type code without its byte-order mark ("f4", "u1", "b1", …).
fn dtype_of(code: &str) -> Option<DType> {
    Some(match code {
        "f8" => DType::F64,
        "f4" => DType::F32,
        "f2" => DType::F16,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "b1" => DType::Bool,
        _ => return None,
    })
}

/// Writes a tensor as a .npy file (little-endian, C order).
pub fn write(path: &Path, tensor: &Tensor) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: cannot write: {e}", path.display());
    if tensor.dtype() == DType::BF16 {
        return Err(format!(
            "{}: bf16 has no .npy dtype; cast the output to f32 to save it",
            path.display()
        ));
    }
    let file = File::create(path).map_err(fail)?;
    let shape: Vec<u64> = tensor.dims().iter().map(|&d| d as u64).collect();
    let mut out = BufWriter::new(file);
    match tensor.data() {
        TensorData::F64(v) => put(&mut out, &shape, v),
        TensorData::F32(v) => put(&mut out, &shape, v),
        TensorData::F16(v) => put(&mut out, &shape, v),
        TensorData::I8(v) => put(&mut out, &shape, v),
        TensorData::I16(v) => put(&mut out, &shape, v),
        TensorData::I32(v) => put(&mut out, &shape, v),
        TensorData::I64(v) => put(&mut out, &shape, v),
        TensorData::U8(v) => put(&mut out, &shape, v),
        TensorData::U16(v) => put(&mut out, &shape, v),
        TensorData::U32(v) => put(&mut out, &shape, v),
        TensorData::U64(v) => put(&mut out, &shape, v),
        TensorData::Bool(v) => put(&mut out, &shape, v),
        // Refused above.
        TensorData::BF16(_) => Ok(()),
    }
    .map_err(fail)
}

fn put<T: npyz::Serialize + npyz::AutoSerialize + Clone>(
    out: &mut BufWriter<File>,
    shape: &[u64],
    values: &[T],
) -> std::io::Result<()> {
    let mut writer = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(shape)
        .writer(out)
        .begin_nd()?;
    writer.extend(values.iter().cloned())?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_numpy_dtype_round_trips() {
        let dir = std::env::temp_dir().join(format!("concord-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or(());
        for dtype in DType::ALL {
            let t = Tensor::new([2, 2], TensorData::from_f64(dtype, &[1.0, 0.0, 3.0, 2.0]))
                .unwrap_or_else(|_| Tensor::scalar_f32(0.0));
            let path = dir.join(format!("{dtype}.npy"));
            let written = write(&path, &t);
            if dtype == DType::BF16 {
                assert!(written.is_err_and(|e| e.contains("bf16")));
                continue;
            }
            assert_eq!(written, Ok(()), "{dtype}");
            assert_eq!(read(&path), Ok(t), "{dtype}");
        }
        std::fs::remove_dir_all(&dir).unwrap_or(());
    }

    #[test]
    fn a_shape_whose_element_count_overflows_is_refused_not_a_panic() {
        // npyz multiplies the dims unchecked (a panic in debug builds, a wrapped count in
        // release ones); found by the adversarial corpus (`shape_overflows_u64`).
        let dir = std::env::temp_dir().join(format!("concord-npy-ovf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or(());
        let path = dir.join("overflow.npy");
        let mut header =
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }"
                .to_string();
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0; 16]);
        std::fs::write(&path, bytes).unwrap_or(());
        let err = read(&path).err().unwrap_or_default();
        assert!(
            err.contains("[4294967296, 4294967296, 2]")
                && err.contains("more elements than a 64-bit count holds"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap_or(());
        assert_eq!(header_dims("{'shape': (), }"), Some(vec![]));
        assert_eq!(header_dims("{'shape': (3,), }"), Some(vec![3]));
        assert_eq!(header_dims("{\"shape\": (2, 5L)}"), Some(vec![2, 5]));
        assert_eq!(header_dims("{'shape': (-1, 3), }"), None);
    }

    #[test]
    fn a_header_claiming_gigabytes_is_refused_before_it_is_read() {
        let dir = std::env::temp_dir().join(format!("concord-npy-hdr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or(());
        let path = dir.join("huge-header.npy");
        // Version 2.0: a four-byte header length, here 4 GiB - 1.
        let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(b"{'descr': '<f4'");
        std::fs::write(&path, bytes).unwrap_or(());
        let err = read(&path).err().unwrap_or_default();
        assert!(err.contains("header claims 4294967295 bytes"), "{err}");
        assert!(read(&dir)
            .err()
            .unwrap_or_default()
            .contains("not a regular file"));
        std::fs::remove_dir_all(&dir).unwrap_or(());
    }
}
