//! Conversion between ONNX `TensorProto` and core [`Tensor`], and between ONNX data type
//! codes and core [`DType`].
//!
//! Reading accepts `raw_data` (little-endian, fixed width) or the typed repeated fields.
//! Integer tensors of a narrower type (int32, int16, int8, uint32, uint16, uint8) become i64,
//! which is lossless; float64 and every other type is refused. The element count is checked
//! against the dims before anything is allocated, so a lying header cannot make the reader
//! allocate what the data does not back.

use crate::error::Error;
use crate::proto::tensor_proto::{DataLocation, DataType};
use crate::proto::TensorProto;
use concord_core::{DType, Shape, Tensor, TensorData};
use half::f16;

/// The ONNX data type code of a core dtype.
pub fn dtype_to_onnx(dtype: DType) -> i32 {
    let code = match dtype {
        DType::F32 => DataType::Float,
        DType::F16 => DataType::Float16,
        DType::I64 => DataType::Int64,
        DType::Bool => DataType::Bool,
    };
    code as i32
}

/// The core dtype of an ONNX data type code, for types that map exactly (no widening).
pub fn dtype_from_onnx(code: i32) -> Option<DType> {
    match DataType::try_from(code).ok()? {
        DataType::Float => Some(DType::F32),
        DataType::Float16 => Some(DType::F16),
        DataType::Int64 => Some(DType::I64),
        DataType::Bool => Some(DType::Bool),
        _ => None,
    }
}

/// The upper-case onnx.proto name of a data type code ("FLOAT", "DOUBLE", …).
pub fn data_type_name(code: i32) -> &'static str {
    match DataType::try_from(code) {
        Ok(t) => match t {
            DataType::Undefined => "UNDEFINED",
            DataType::Float => "FLOAT",
            DataType::Uint8 => "UINT8",
            DataType::Int8 => "INT8",
            DataType::Uint16 => "UINT16",
            DataType::Int16 => "INT16",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::String => "STRING",
            DataType::Bool => "BOOL",
            DataType::Float16 => "FLOAT16",
            DataType::Double => "DOUBLE",
            DataType::Uint32 => "UINT32",
            DataType::Uint64 => "UINT64",
            DataType::Complex64 => "COMPLEX64",
            DataType::Complex128 => "COMPLEX128",
            DataType::Bfloat16 => "BFLOAT16",
            DataType::Float8e4m3fn => "FLOAT8E4M3FN",
            DataType::Float8e4m3fnuz => "FLOAT8E4M3FNUZ",
            DataType::Float8e5m2 => "FLOAT8E5M2",
            DataType::Float8e5m2fnuz => "FLOAT8E5M2FNUZ",
            DataType::Uint4 => "UINT4",
            DataType::Int4 => "INT4",
            DataType::Float4e2m1 => "FLOAT4E2M1",
        },
        Err(_) => "an unknown type",
    }
}

/// Converts a TensorProto to a core tensor. `name` is used in errors (the proto's own name
/// may be empty, e.g. inside a Constant attribute).
pub fn tensor_from_proto(proto: &TensorProto, name: &str) -> Result<Tensor, Error> {
    let data_err = |detail: String| Error::TensorData {
        name: name.to_string(),
        detail,
    };
    if proto.data_location == DataLocation::External as i32 || !proto.external_data.is_empty() {
        return Err(Error::ExternalData {
            tensor: name.to_string(),
        });
    }
    if proto.segment.is_some() {
        return Err(data_err(
            "it is stored in segments, which Concord does not read; re-save the model with \
             whole tensors"
                .to_string(),
        ));
    }
    let mut dims = Vec::with_capacity(proto.dims.len());
    for &d in &proto.dims {
        let d = usize::try_from(d).map_err(|_| {
            data_err(format!(
                "dims {:?} contain a negative or too large dim",
                proto.dims
            ))
        })?;
        dims.push(d);
    }
    let shape = Shape(dims);
    let count = shape.checked_numel().ok_or_else(|| {
        data_err(format!(
            "dims {shape} have more elements than this machine can address"
        ))
    })?;
    let unsupported = || Error::UnsupportedDType {
        what: "tensor",
        name: name.to_string(),
        data_type: proto.data_type,
    };
    let kind = DataType::try_from(proto.data_type).map_err(|_| unsupported())?;
    let raw = if proto.raw_data.is_empty() {
        None
    } else {
        Some(proto.raw_data.as_slice())
    };
    let data = match kind {
        DataType::Float => TensorData::F32(match raw {
            Some(bytes) => {
                from_raw::<4, f32>(bytes, count, "FLOAT", &data_err, f32::from_le_bytes)?
            }
            None => typed(&proto.float_data, count, "float_data", &data_err)?.to_vec(),
        }),
        DataType::Float16 => TensorData::F16(match raw {
            Some(bytes) => {
                from_raw::<2, f16>(bytes, count, "FLOAT16", &data_err, f16::from_le_bytes)?
            }
            // float16 elements are stored as bit patterns in the low 16 bits of int32_data.
            None => typed(&proto.int32_data, count, "int32_data", &data_err)?
                .iter()
                .map(|&v| f16::from_bits(v as u16))
                .collect(),
        }),
        DataType::Int64 => TensorData::I64(match raw {
            Some(bytes) => {
                from_raw::<8, i64>(bytes, count, "INT64", &data_err, i64::from_le_bytes)?
            }
            None => typed(&proto.int64_data, count, "int64_data", &data_err)?.to_vec(),
        }),
        DataType::Bool => TensorData::Bool(match raw {
            Some(bytes) => from_raw::<1, bool>(bytes, count, "BOOL", &data_err, |b| b[0] != 0)?,
            None => typed(&proto.int32_data, count, "int32_data", &data_err)?
                .iter()
                .map(|&v| v != 0)
                .collect(),
        }),
        DataType::Int32 => TensorData::I64(match raw {
            Some(bytes) => from_raw::<4, i64>(bytes, count, "INT32", &data_err, |b| {
                i64::from(i32::from_le_bytes(b))
            })?,
            None => widen(typed(&proto.int32_data, count, "int32_data", &data_err)?),
        }),
        DataType::Int16 => TensorData::I64(match raw {
            Some(bytes) => from_raw::<2, i64>(bytes, count, "INT16", &data_err, |b| {
                i64::from(i16::from_le_bytes(b))
            })?,
            // The typed field holds each int16 sign-extended; truncate back to 16 bits so a
            // writer that stored the bit pattern unextended reads the same.
            None => typed(&proto.int32_data, count, "int32_data", &data_err)?
                .iter()
                .map(|&v| i64::from(v as i16))
                .collect(),
        }),
        DataType::Int8 => TensorData::I64(match raw {
            Some(bytes) => from_raw::<1, i64>(bytes, count, "INT8", &data_err, |b| {
                i64::from(i8::from_le_bytes(b))
            })?,
            None => typed(&proto.int32_data, count, "int32_data", &data_err)?
                .iter()
                .map(|&v| i64::from(v as i8))
                .collect(),
        }),
        DataType::Uint16 => TensorData::I64(match raw {
            Some(bytes) => from_raw::<2, i64>(bytes, count, "UINT16", &data_err, |b| {
                i64::from(u16::from_le_bytes(b))
            })?,
            None => typed(&proto.int32_data, count, "int32_data", &data_err)?
                .iter()
                .map(|&v| i64::from(v as u16))
                .collect(),
        }),
        DataType::Uint8 => TensorData::I64(match raw {
            Some(bytes) => {
                from_raw::<1, i64>(bytes, count, "UINT8", &data_err, |b| i64::from(b[0]))?
            }
            None => typed(&proto.int32_data, count, "int32_data", &data_err)?
                .iter()
                .map(|&v| i64::from(v as u8))
                .collect(),
        }),
        DataType::Uint32 => TensorData::I64(match raw {
            Some(bytes) => from_raw::<4, i64>(bytes, count, "UINT32", &data_err, |b| {
                i64::from(u32::from_le_bytes(b))
            })?,
            None => typed(&proto.uint64_data, count, "uint64_data", &data_err)?
                .iter()
                .map(|&v| i64::from(v as u32))
                .collect(),
        }),
        _ => return Err(unsupported()),
    };
    Tensor::new(shape, data).map_err(|e| data_err(e.to_string()))
}

/// Converts a core tensor to a TensorProto with little-endian `raw_data`.
pub fn tensor_to_proto(name: &str, tensor: &Tensor) -> TensorProto {
    let raw_data: Vec<u8> = match tensor.data() {
        TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
    };
    TensorProto {
        // Dims of a live tensor fit in i64: its element buffer exists, so each dim is at most
        // isize::MAX.
        dims: tensor.dims().iter().map(|&d| d as i64).collect(),
        data_type: dtype_to_onnx(tensor.dtype()),
        name: name.to_string(),
        raw_data,
        ..TensorProto::default()
    }
}

/// Reads `count` fixed-width elements from raw little-endian bytes.
fn from_raw<const N: usize, T>(
    bytes: &[u8],
    count: usize,
    type_name: &str,
    data_err: &dyn Fn(String) -> Error,
    convert: impl Fn([u8; N]) -> T,
) -> Result<Vec<T>, Error> {
    let expected = count.checked_mul(N);
    if expected != Some(bytes.len()) {
        return Err(data_err(format!(
            "raw_data has {} bytes, but {count} {type_name} elements of {N} bytes need {}",
            bytes.len(),
            expected.map_or_else(|| "more than fits in memory".to_string(), |e| e.to_string())
        )));
    }
    Ok(bytes
        .chunks_exact(N)
        .map(|chunk| {
            let mut word = [0u8; N];
            word.copy_from_slice(chunk);
            convert(word)
        })
        .collect())
}

/// Checks that a typed repeated field holds exactly `count` elements.
fn typed<'a, T>(
    values: &'a [T],
    count: usize,
    field: &str,
    data_err: &dyn Fn(String) -> Error,
) -> Result<&'a [T], Error> {
    if values.len() != count {
        return Err(data_err(format!(
            "{field} has {} elements, but the dims need {count} (and raw_data is empty)",
            values.len()
        )));
    }
    Ok(values)
}

fn widen(values: &[i32]) -> Vec<i64> {
    values.iter().map(|&v| i64::from(v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(data_type: DataType, dims: &[i64]) -> TensorProto {
        TensorProto {
            dims: dims.to_vec(),
            data_type: data_type as i32,
            name: "t".to_string(),
            ..TensorProto::default()
        }
    }

    #[test]
    fn raw_float_is_little_endian() {
        let mut p = proto(DataType::Float, &[2]);
        // 1.0f32 is 0x3f800000 and -2.0f32 is 0xc0000000; little-endian puts the low byte first.
        p.raw_data = vec![0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(
            t.as_ref().map(|t| t.as_f32().map(<[f32]>::to_vec)),
            Ok(Some(vec![1.0, -2.0]))
        );
    }

    #[test]
    fn float16_bits_come_from_int32_data() {
        let mut p = proto(DataType::Float16, &[2]);
        // 0x3c00 is 1.0 in binary16 and 0xc000 is -2.0.
        p.int32_data = vec![0x3c00, 0xc000];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        let values = t.map(|t| t.to_f64_vec());
        assert_eq!(values, Ok(vec![1.0, -2.0]));
    }

    #[test]
    fn narrow_integers_widen_to_i64() {
        let mut p = proto(DataType::Int8, &[3]);
        p.raw_data = vec![0xff, 0x7f, 0x80];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(t.map(|t| t.to_i64_vec()), Ok(Some(vec![-1, 127, -128])));

        let mut p = proto(DataType::Uint8, &[2]);
        p.int32_data = vec![255, 7];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(t.map(|t| t.to_i64_vec()), Ok(Some(vec![255, 7])));

        let mut p = proto(DataType::Int32, &[2]);
        p.raw_data = (-5i32)
            .to_le_bytes()
            .into_iter()
            .chain(9i32.to_le_bytes())
            .collect();
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(t.map(|t| t.to_i64_vec()), Ok(Some(vec![-5, 9])));
    }

    #[test]
    fn bool_raw_is_one_byte_each() {
        let mut p = proto(DataType::Bool, &[3]);
        p.raw_data = vec![1, 0, 1];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(
            t.map(|t| t.as_bool().map(<[bool]>::to_vec)),
            Ok(Some(vec![true, false, true]))
        );
    }

    #[test]
    fn double_is_refused() {
        let mut p = proto(DataType::Double, &[1]);
        p.double_data = vec![1.0];
        assert!(matches!(
            tensor_from_proto(&p, "t"),
            Err(Error::UnsupportedDType { data_type: 11, .. })
        ));
    }

    #[test]
    fn huge_dims_do_not_allocate() {
        let p = proto(DataType::Float, &[1 << 40, 1 << 40]);
        assert!(matches!(
            tensor_from_proto(&p, "t"),
            Err(Error::TensorData { .. })
        ));
        let p = proto(DataType::Float, &[-1]);
        assert!(matches!(
            tensor_from_proto(&p, "t"),
            Err(Error::TensorData { .. })
        ));
    }
}
