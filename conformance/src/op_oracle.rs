//! The op cases' independent oracle (conformance/golden/op-cases/): for every case in
//! conformance/cases/, the outputs onnxruntime computed from exactly the model and inputs the
//! suite builds, so the reference executor's op/ trials compare it with something other
//! than itself.
//!
//! `cargo xtask op-oracle` writes each case's model and inputs with [`export`] (the suite's
//! own [`OpCase::build`], so the same seeded generator and the same ONNX writer), runs them
//! through onnxruntime (xtask/golden/op_oracle.py) and writes the outputs and a manifest.
//! Each manifest entry carries a digest of the model and inputs it was computed from; a
//! case whose digest no longer matches fails its trial and says to regenerate, so an edited
//! case can never be checked against a stale answer.
//!
//! Where onnxruntime cannot be the oracle (it lacks a kernel for the case's type, or it
//! departs from the ONNX specification), the case says so itself ([`OpCase::oracle`]): which
//! oracle its outputs come from instead and why. The manifest records the oracle of every
//! entry, and the trial names it.

use crate::case::{BuiltCase, OpCase};
use crate::error::SuiteError;
use concord::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the oracle's outputs live, relative to the golden directory.
pub const OP_CASES_DIR: &str = "op-cases";

/// The manifest of conformance/golden/op-cases/.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleManifest {
    /// The oracles' versions (onnxruntime, onnx, numpy, Python) and how they were run.
    pub oracle: BTreeMap<String, String>,
    /// By `<op>/<case>`.
    pub cases: BTreeMap<String, OracleEntry>,
}

/// One case's oracle outputs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleEntry {
    /// [`digest`] of the model and inputs the outputs were computed from.
    pub digest: String,
    /// Which oracle computed them: `onnxruntime`, or what the case named instead.
    pub oracle: String,
    /// Why this case does not follow onnxruntime (absent when it does).
    #[serde(default)]
    pub reason: Option<String>,
    /// Output value name → .npy file, relative to op-cases/.
    pub outputs: BTreeMap<String, PathBuf>,
}

/// A case's own choice of oracle, where onnxruntime cannot be it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OracleChoice {
    /// `onnx-reference` (the ONNX specification's reference implementation, onnx.reference,
    /// run on the case as built) or `numpy` (the op written out from its ONNX definition
    /// with numpy in xtask/golden/op_oracle.py, where onnxruntime and onnx.reference both
    /// depart from the convention the case documents).
    pub follow: String,
    /// Why: the onnxruntime behaviour or gap, and what the specification says.
    pub reason: String,
}

/// The oracles a case may name.
pub const ORACLES: [&str; 2] = ["onnx-reference", "numpy"];

impl OracleManifest {
    /// Reads `golden_dir/op-cases/manifest.json`; output paths become absolute.
    pub fn load(golden_dir: &Path) -> Result<OracleManifest, SuiteError> {
        let dir = golden_dir.join(OP_CASES_DIR);
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path).map_err(|e| SuiteError::Data {
            path: path.clone(),
            detail: format!("{e} (generate it with `cargo xtask op-oracle`)"),
        })?;
        let mut manifest: OracleManifest =
            serde_json::from_str(&text).map_err(|e| SuiteError::Data {
                path: path.clone(),
                detail: e.to_string(),
            })?;
        for entry in manifest.cases.values_mut() {
            for file in entry.outputs.values_mut() {
                *file = dir.join(&*file);
            }
        }
        Ok(manifest)
    }
}

/// What the oracle says about one case, checked against the case as the suite builds it now.
#[derive(Clone, Debug)]
pub struct OracleOutputs {
    /// The oracle's name and, when it is not onnxruntime, why.
    pub describe: String,
    /// Output name and tensor, in the node's output order.
    pub outputs: Vec<(String, Tensor)>,
}

impl OracleManifest {
    /// The oracle's outputs for `case`, built as `built`; an error (a trial failure) when the
    /// case has no entry, its digest is stale, or its oracle differs from the case's choice.
    pub fn outputs_for(&self, case: &OpCase, built: &BuiltCase) -> Result<OracleOutputs, String> {
        let key = format!("{}/{}", case.op, case.name);
        let regenerate = "run `cargo xtask op-oracle` and read the diff";
        let entry = self
            .cases
            .get(&key)
            .ok_or_else(|| format!("op case {key} has no oracle output: {regenerate}"))?;
        let now = digest(built);
        if entry.digest != now {
            return Err(format!(
                "op case {key} changed since its oracle output was computed (digest {} \
                 recorded, {now} now): {regenerate}",
                entry.digest
            ));
        }
        let chosen = case
            .oracle
            .as_ref()
            .map_or("onnxruntime", |c| c.follow.as_str());
        if entry.oracle != chosen {
            return Err(format!(
                "op case {key} names oracle `{chosen}` but its recorded output came from `{}`: \
                 {regenerate}",
                entry.oracle
            ));
        }
        let mut outputs = Vec::new();
        for i in 0..case.outputs {
            let name = format!("out{i}");
            let path = entry
                .outputs
                .get(&name)
                .ok_or_else(|| format!("op case {key}: the oracle recorded no output `{name}`"))?;
            outputs.push((name, crate::npy::read(path)?));
        }
        let describe = match &entry.reason {
            Some(reason) => {
                let package = match entry.oracle.as_str() {
                    "onnx-reference" => "onnx",
                    _ => "numpy",
                };
                format!(
                    "expected output from {} ({package} {}), not onnxruntime: {reason}",
                    entry.oracle,
                    self.oracle.get(package).map_or("?", String::as_str)
                )
            }
            None => format!(
                "expected output from onnxruntime {}",
                self.oracle.get("onnxruntime").map_or("?", String::as_str)
            ),
        };
        Ok(OracleOutputs { describe, outputs })
    }
}

/// A stable digest (FNV-1a, 64 bits, as hex) of a built case: the model's bytes, then every
/// runtime input's name, dtype, dims and values. Two builds digest alike exactly when the
/// model and inputs are the same.
pub fn digest(built: &BuiltCase) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&prost::Message::encode_to_vec(&built.model));
    for (name, tensor) in &built.inputs {
        eat(name.as_bytes());
        eat(tensor.dtype().name().as_bytes());
        for &d in tensor.dims() {
            eat(&(d as u64).to_le_bytes());
        }
        // Every dtype a case writes converts to f64 exactly.
        for v in tensor.to_f64_vec() {
            eat(&v.to_bits().to_le_bytes());
        }
    }
    format!("{h:016x}")
}

/// One case as exported for the oracle (an entry of `index.json`).
#[derive(Clone, Debug, Serialize)]
pub struct ExportedCase {
    /// `<op>/<case>`.
    pub key: String,
    pub op: String,
    /// Directory relative to the export root: `model.onnx` and `inputs/<name>.npy`.
    pub dir: String,
    pub digest: String,
    /// Runtime input names, in graph order.
    pub inputs: Vec<String>,
    /// Output value names, in node order.
    pub outputs: Vec<String>,
    /// The case's own choice of oracle, if it is not onnxruntime.
    pub oracle: Option<OracleChoice>,
}

/// Writes every case's model and runtime inputs under `out` (`<op>/<case>/model.onnx`,
/// `<op>/<case>/inputs/<name>.npy`) and an `index.json` listing them, for the oracle to run.
pub fn export(cases: &[OpCase], out: &Path) -> Result<Vec<ExportedCase>, SuiteError> {
    let fail = |path: &Path, detail: String| SuiteError::Data {
        path: path.to_path_buf(),
        detail,
    };
    let mut index = Vec::new();
    for case in cases {
        if let Some(choice) = &case.oracle {
            if !ORACLES.contains(&choice.follow.as_str()) || choice.reason.trim().is_empty() {
                return Err(SuiteError::Case {
                    case: format!("{}/{}", case.op, case.name),
                    detail: format!(
                        "oracle `{}` must be one of {ORACLES:?} and give a reason",
                        choice.follow
                    ),
                });
            }
        }
        let built = case.build()?;
        let dir = format!("{}/{}", case.op, case.name);
        let case_dir = out.join(&dir);
        let inputs_dir = case_dir.join("inputs");
        std::fs::create_dir_all(&inputs_dir).map_err(|e| fail(&inputs_dir, e.to_string()))?;
        let model = case_dir.join("model.onnx");
        std::fs::write(&model, prost::Message::encode_to_vec(&built.model))
            .map_err(|e| fail(&model, e.to_string()))?;
        for (name, tensor) in &built.inputs {
            let path = inputs_dir.join(format!("{name}.npy"));
            crate::npy::write(&path, tensor).map_err(|e| fail(&path, e))?;
        }
        index.push(ExportedCase {
            key: dir.clone(),
            op: case.op.clone(),
            dir,
            digest: digest(&built),
            inputs: built.inputs.iter().map(|(n, _)| n.clone()).collect(),
            outputs: (0..case.outputs).map(|i| format!("out{i}")).collect(),
            oracle: case.oracle.clone(),
        });
    }
    let path = out.join("index.json");
    let text = serde_json::to_string_pretty(&index).map_err(|e| fail(&path, e.to_string()))?;
    std::fs::write(&path, text).map_err(|e| fail(&path, e.to_string()))?;
    Ok(index)
}
