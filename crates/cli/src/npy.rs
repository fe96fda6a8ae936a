//! Reading and writing tensors as .npy files (f32, f16, i64 and bool; int32 and f64 inputs
//! are converted when the conversion is exact enough to be unsurprising).

use concord::TensorData;
use concord::{Shape, Tensor};
use half::f16;
use npyz::WriterBuilder;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

/// Reads a .npy file into a tensor. The message names the file on every failure.
pub fn read(path: &Path) -> Result<Tensor, String> {
    let fail = |what: String| format!("{}: {what}", path.display());
    let file = File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    let npy = npyz::NpyFile::new(BufReader::new(file))
        .map_err(|e| fail(format!("not a .npy file: {e}")))?;
    if npy.order() == npyz::Order::Fortran {
        return Err(fail(
            "Fortran-ordered arrays are not supported; save with C order".into(),
        ));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => return Err(fail(format!("unsupported dtype {other:?}"))),
    };
    let data = match descr.trim_start_matches(['<', '|', '=']) {
        "f4" => TensorData::F32(npy.into_vec::<f32>().map_err(|e| fail(e.to_string()))?),
        "f2" => TensorData::F16(npy.into_vec::<f16>().map_err(|e| fail(e.to_string()))?),
        "i8" => TensorData::I64(npy.into_vec::<i64>().map_err(|e| fail(e.to_string()))?),
        "i4" => TensorData::I64(
            npy.into_vec::<i32>()
                .map_err(|e| fail(e.to_string()))?
                .into_iter()
                .map(i64::from)
                .collect(),
        ),
        "b1" => TensorData::Bool(npy.into_vec::<bool>().map_err(|e| fail(e.to_string()))?),
        other => {
            return Err(fail(format!(
                "unsupported dtype `{other}`; use float32, float16, int64 or bool"
            )))
        }
    };
    Tensor::new(Shape(shape), data).map_err(|e| fail(e.to_string()))
}

/// Writes a tensor as a .npy file.
pub fn write(path: &Path, tensor: &Tensor) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: cannot write: {e}", path.display());
    let file = File::create(path).map_err(fail)?;
    let shape: Vec<u64> = tensor.dims().iter().map(|&d| d as u64).collect();
    let mut out = BufWriter::new(file);
    match tensor.data() {
        TensorData::F32(v) => write_vec(&mut out, &shape, v),
        TensorData::F16(v) => write_vec(&mut out, &shape, v),
        TensorData::I64(v) => write_vec(&mut out, &shape, v),
        TensorData::Bool(v) => write_vec(&mut out, &shape, v),
    }
    .map_err(fail)
}

fn write_vec<T: npyz::Serialize + npyz::AutoSerialize + Clone>(
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
