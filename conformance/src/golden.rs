//! Golden cases (conformance/golden/manifest.json): models with inputs and outputs computed by an
//! independent oracle (onnxruntime), so the reference itself is checked too.

use crate::error::SuiteError;
use serde::Deserialize;
use std::collections::BTreeMap;
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

/// The suite's .npy reader and writer, under the names the golden category has always used.
pub use crate::npy::{read as read_npy, write as write_npy};
