//! Conversion between ONNX `TensorProto` and core [`Tensor`], and between ONNX data type
//! codes and core [`DType`].
//!
//! Reading accepts `raw_data` (little-endian, fixed width) or the typed repeated fields, for
//! every dtype Concord holds (see [`concord_core::DType`]); strings, complex numbers, the 2- and
//! 4-bit integers and the 4-, 6- and 8-bit floats are refused with the type named. The element count is checked
//! against the dims before anything is allocated, so a lying header cannot make the reader
//! allocate what the data does not back.

use crate::error::Error;
use crate::proto::tensor_proto::{DataLocation, DataType};
use crate::proto::TensorProto;
use concord_core::{DType, Shape, Tensor, TensorData};
use half::{bf16, f16};

/// The ONNX data type code of a core dtype.
pub fn dtype_to_onnx(dtype: DType) -> i32 {
    let code = match dtype {
        DType::F64 => DataType::Double,
        DType::F32 => DataType::Float,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::I8 => DataType::Int8,
        DType::I16 => DataType::Int16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::U8 => DataType::Uint8,
        DType::U16 => DataType::Uint16,
        DType::U32 => DataType::Uint32,
        DType::U64 => DataType::Uint64,
        DType::Bool => DataType::Bool,
    };
    code as i32
}

/// The core dtype of an ONNX data type code; None for the types Concord does not hold
/// (string, complex, the 4- and 8-bit floats).
pub fn dtype_from_onnx(code: i32) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| dtype_to_onnx(d) == code)
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
        // FLOAT8E8M0 (opset 24), the 2-bit integers (opset 25) and the 6-bit floats
        // (opset 28) are newer than the proto definitions here; Concord holds none of them,
        // so they are named only to be refused.
        Err(_) if code == 24 => "FLOAT8E8M0",
        Err(_) if code == 25 => "UINT2",
        Err(_) if code == 26 => "INT2",
        Err(_) if code == 27 => "FLOAT6E2M3",
        Err(_) if code == 28 => "FLOAT6E3M2",
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
    let dtype = dtype_from_onnx(proto.data_type).ok_or_else(unsupported)?;
    let typed_fields = [
        ("float_data", proto.float_data.is_empty()),
        ("int32_data", proto.int32_data.is_empty()),
        ("string_data", proto.string_data.is_empty()),
        ("int64_data", proto.int64_data.is_empty()),
        ("double_data", proto.double_data.is_empty()),
        ("uint64_data", proto.uint64_data.is_empty()),
    ];
    let set: Vec<&str> = typed_fields
        .iter()
        .filter(|(_, empty)| !empty)
        .map(|(field, _)| *field)
        .chain((!proto.raw_data.is_empty()).then_some("raw_data"))
        .collect();
    if set.len() > 1 {
        // onnx.checker refuses it too: which one holds the value would be a guess.
        return Err(data_err(format!(
            "both {} are set; a tensor holds its values in one field",
            set.join(" and ")
        )));
    }
    let data = if proto.raw_data.is_empty() {
        typed_data(proto, dtype, count, &data_err)?
    } else {
        let bytes = proto.raw_data.as_slice();
        let size = dtype.size_in_bytes();
        let expected = count.checked_mul(size);
        if expected != Some(bytes.len()) {
            return Err(data_err(format!(
                "raw_data has {} bytes, but {count} {} elements of {size} bytes need {}",
                bytes.len(),
                data_type_name(proto.data_type),
                expected.map_or_else(|| "more than fits in memory".to_string(), |e| e.to_string())
            )));
        }
        TensorData::from_le_bytes(dtype, bytes)
            .ok_or_else(|| data_err("raw_data is not a whole number of elements".into()))?
    };
    Tensor::new(shape, data).map_err(|e| data_err(e.to_string()))
}

/// The elements of a tensor stored in its typed repeated field, which onnx.proto fixes per
/// type: float_data, double_data, int64_data, uint64_data (uint32 and uint64), and
/// int32_data for every narrower type (16-bit floats as their bit patterns).
fn typed_data(
    proto: &TensorProto,
    dtype: DType,
    count: usize,
    data_err: &dyn Fn(String) -> Error,
) -> Result<TensorData, Error> {
    let int32 = || typed(&proto.int32_data, count, "int32_data", data_err);
    let uint64 = || typed(&proto.uint64_data, count, "uint64_data", data_err);
    Ok(match dtype {
        DType::F32 => {
            TensorData::F32(typed(&proto.float_data, count, "float_data", data_err)?.to_vec())
        }
        DType::F64 => {
            TensorData::F64(typed(&proto.double_data, count, "double_data", data_err)?.to_vec())
        }
        DType::I64 => {
            TensorData::I64(typed(&proto.int64_data, count, "int64_data", data_err)?.to_vec())
        }
        DType::U64 => TensorData::U64(uint64()?.to_vec()),
        DType::U32 => TensorData::U32(uint64()?.iter().map(|&v| v as u32).collect()),
        DType::F16 => TensorData::F16(int32()?.iter().map(|&v| f16::from_bits(v as u16)).collect()),
        DType::BF16 => TensorData::BF16(
            int32()?
                .iter()
                .map(|&v| bf16::from_bits(v as u16))
                .collect(),
        ),
        // Narrow integers are stored sign- or zero-extended; truncating back to the width
        // reads the same whichever a writer chose.
        DType::I32 => TensorData::I32(int32()?.to_vec()),
        DType::I16 => TensorData::I16(int32()?.iter().map(|&v| v as i16).collect()),
        DType::I8 => TensorData::I8(int32()?.iter().map(|&v| v as i8).collect()),
        DType::U16 => TensorData::U16(int32()?.iter().map(|&v| v as u16).collect()),
        DType::U8 => TensorData::U8(int32()?.iter().map(|&v| v as u8).collect()),
        DType::Bool => TensorData::Bool(int32()?.iter().map(|&v| v != 0).collect()),
    })
}

/// Converts a core tensor to a TensorProto with little-endian `raw_data`.
pub fn tensor_to_proto(name: &str, tensor: &Tensor) -> TensorProto {
    let raw_data = tensor.data().to_le_bytes();
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
    fn narrow_integers_keep_their_type() {
        let mut p = proto(DataType::Int8, &[3]);
        p.raw_data = vec![0xff, 0x7f, 0x80];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(
            t.map(|t| t.into_data()),
            Ok(TensorData::I8(vec![-1, 127, -128]))
        );

        let mut p = proto(DataType::Uint8, &[2]);
        p.int32_data = vec![255, 7];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(t.map(|t| t.into_data()), Ok(TensorData::U8(vec![255, 7])));

        let mut p = proto(DataType::Int32, &[2]);
        p.raw_data = (-5i32)
            .to_le_bytes()
            .into_iter()
            .chain(9i32.to_le_bytes())
            .collect();
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(t.map(|t| t.to_i64_vec()), Ok(Some(vec![-5, 9])));

        let mut p = proto(DataType::Uint64, &[1]);
        p.uint64_data = vec![u64::MAX];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(
            t.map(|t| t.into_data()),
            Ok(TensorData::U64(vec![u64::MAX]))
        );
    }

    #[test]
    fn every_dtype_round_trips_through_raw_data() {
        for dtype in DType::ALL {
            let t = Tensor::new([3], TensorData::from_f64(dtype, &[1.0, 0.0, 2.0]))
                .unwrap_or_else(|_| Tensor::scalar_f32(0.0));
            let back = tensor_from_proto(&tensor_to_proto("t", &t), "t").map_err(|e| e.to_string());
            assert_eq!(back, Ok(t), "{dtype}");
        }
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
    fn double_reads_from_double_data_and_strings_are_refused() {
        let mut p = proto(DataType::Double, &[1]);
        p.double_data = vec![1.5];
        let t = tensor_from_proto(&p, "t").map_err(|e| e.to_string());
        assert_eq!(t.map(|t| t.into_data()), Ok(TensorData::F64(vec![1.5])));
        let p = proto(DataType::String, &[1]);
        assert!(matches!(
            tensor_from_proto(&p, "t"),
            Err(Error::UnsupportedDType { data_type: 8, .. })
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
