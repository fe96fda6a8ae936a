//! Golden cases (golden/manifest.json): models with inputs and outputs computed by an
//! independent oracle (onnxruntime), so the reference itself is checked too.

use crate::error::SuiteError;
use concord_core::{Shape, Tensor, TensorData};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// The manifest.
#[derive(Clone, Debug, Deserialize)]
pub struct Manifest {
    pub tolerances: BTreeMap<String, GoldenTolerance>,
    pub cases: Vec<GoldenCase>,
}

/// A manifest tolerance level: |actual - expected| <= abs + rel·|expected|.
#[derive(Clone, Debug, Deserialize)]
pub struct GoldenTolerance {
    pub abs: f64,
    pub rel: f64,
    pub reason: String,
}

/// One golden case.
#[derive(Clone, Debug, Deserialize)]
pub struct GoldenCase {
    pub name: String,
    /// "op" or "model".
    pub kind: String,
    pub model: PathBuf,
    pub op_types: Vec<String>,
    pub inputs: BTreeMap<String, PathBuf>,
    pub outputs: BTreeMap<String, PathBuf>,
    pub tolerance: String,
    #[serde(default)]
    pub description: String,
}

impl Manifest {
    /// Reads `dir/manifest.json`; paths in cases become absolute.
    pub fn load(dir: &Path) -> Result<Manifest, SuiteError> {
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path).map_err(|e| SuiteError::Data {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        let mut m: Manifest = serde_json::from_str(&text).map_err(|e| SuiteError::Data {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        for c in &mut m.cases {
            c.model = dir.join(&c.model);
            for p in c.inputs.values_mut().chain(c.outputs.values_mut()) {
                *p = dir.join(&*p);
            }
            if !m.tolerances.contains_key(&c.tolerance) {
                return Err(SuiteError::Data {
                    path,
                    detail: format!("case {} names unknown tolerance `{}`", c.name, c.tolerance),
                });
            }
        }
        Ok(m)
    }
}

/// Reads a .npy file (f32, f16, i64, bool) into a tensor.
pub fn read_npy(path: &Path) -> Result<Tensor, String> {
    let fail = |e: String| format!("{}: {e}", path.display());
    let file = File::open(path).map_err(|e| fail(e.to_string()))?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).map_err(|e| fail(e.to_string()))?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => return Err(fail(format!("unsupported dtype {other:?}"))),
    };
    let data = match descr.trim_start_matches(['<', '|', '=']) {
        "f4" => TensorData::F32(npy.into_vec::<f32>().map_err(|e| fail(e.to_string()))?),
        "f2" => TensorData::F16(
            npy.into_vec::<half::f16>()
                .map_err(|e| fail(e.to_string()))?,
        ),
        "i8" => TensorData::I64(npy.into_vec::<i64>().map_err(|e| fail(e.to_string()))?),
        "b1" => TensorData::Bool(npy.into_vec::<bool>().map_err(|e| fail(e.to_string()))?),
        other => return Err(fail(format!("unsupported dtype `{other}`"))),
    };
    Tensor::new(Shape(shape), data).map_err(|e| fail(e.to_string()))
}

/// Writes a tensor as .npy (for repro cases).
pub fn write_npy(path: &Path, tensor: &Tensor) -> Result<(), String> {
    use npyz::WriterBuilder;
    fn put<T: npyz::Serialize + npyz::AutoSerialize + Clone>(
        path: &Path,
        shape: &[u64],
        v: &[T],
    ) -> std::io::Result<()> {
        let file = std::io::BufWriter::new(File::create(path)?);
        let mut w = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(shape)
            .writer(file)
            .begin_nd()?;
        w.extend(v.iter().cloned())?;
        w.finish()
    }
    let shape: Vec<u64> = tensor.dims().iter().map(|&d| d as u64).collect();
    match tensor.data() {
        TensorData::F32(v) => put(path, &shape, v),
        TensorData::F16(v) => put(path, &shape, v),
        TensorData::I64(v) => put(path, &shape, v),
        TensorData::Bool(v) => put(path, &shape, v),
    }
    .map_err(|e| format!("{}: {e}", path.display()))
}
