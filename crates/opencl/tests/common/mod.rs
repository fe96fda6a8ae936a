//! Helpers shared by the OpenCL executor's tests: whether OpenCL is here (and whether it
//! must be), one shared registry so programs compile once per test binary, the golden
//! manifest with its tolerance comparison, and small models built with the core API.

#![allow(dead_code)]
// Helpers of tests report a broken expectation by panicking with what they found.
#![allow(clippy::panic)]

use concord::TensorData;
use concord::{Availability, Executor, ExecutorRegistry, FallbackCause, Tensor};
use concord_opencl::OpenClExecutor;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// What the OpenCL probe found for this test binary.
#[derive(Debug, Clone)]
pub enum OpenClHere {
    Available,
    /// Not here; `cause` and `reason` are the probe's.
    Unavailable {
        cause: FallbackCause,
        reason: String,
    },
}

/// True when `CONCORD_REQUIRE` names opencl: then an unavailable OpenCL fails the test
/// instead of being checked as a fallback (CI sets it, so CI cannot pass on the CPU).
pub fn opencl_required() -> bool {
    std::env::var("CONCORD_REQUIRE")
        .map(|v| {
            v.split(',')
                .any(|e| e.trim().eq_ignore_ascii_case("opencl"))
        })
        .unwrap_or(false)
}

/// One OpenCL executor for the whole test binary, so kernels are compiled once.
pub fn shared_executor() -> Arc<OpenClExecutor> {
    static EXECUTOR: OnceLock<Arc<OpenClExecutor>> = OnceLock::new();
    EXECUTOR
        .get_or_init(|| Arc::new(OpenClExecutor::new()))
        .clone()
}

/// A registry holding the shared executor (clones share it: executors are `Arc`s).
pub fn shared_registry() -> ExecutorRegistry {
    ExecutorRegistry::with_builtins().with(shared_executor())
}

/// Probes once and, when OpenCL is missing, says so on stdout (or panics when it is
/// required). Tests branch on the answer and assert the fallback in the missing case.
pub fn opencl_here(test: &str) -> OpenClHere {
    match shared_executor().probe() {
        Availability::Available { devices } => {
            let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
            println!("{test}: OpenCL available ({})", names.join(", "));
            OpenClHere::Available
        }
        Availability::Unavailable { cause, reason } => {
            assert!(
                !opencl_required(),
                "{test}: CONCORD_REQUIRE names opencl but the OpenCL executor is \
                 unavailable ({cause:?}): {reason}"
            );
            println!(
                "{test}: the OpenCL executor is unavailable ({cause:?}: {reason}); checking \
                 that it falls back to the reference and says so instead"
            );
            OpenClHere::Unavailable { cause, reason }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Golden cases.

#[derive(Debug, Deserialize)]
pub struct Manifest {
    pub tolerances: BTreeMap<String, Tolerance>,
    pub cases: Vec<Case>,
}

/// A named tolerance level: an element passes when |actual - expected| <= abs + rel·|expected|.
#[derive(Debug, Deserialize, Clone)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
    pub reason: String,
}

#[derive(Debug, Deserialize)]
pub struct Case {
    pub name: String,
    pub op_types: Vec<String>,
    pub model: String,
    pub inputs: BTreeMap<String, String>,
    pub outputs: BTreeMap<String, String>,
    pub tolerance: String,
    /// Further input sets for the same model (a symbolic axis at other sizes).
    #[serde(default)]
    pub more_runs: Vec<Run>,
}

/// One more set of inputs of a case and the outputs onnxruntime gave for them.
#[derive(Debug, Deserialize)]
pub struct Run {
    pub inputs: BTreeMap<String, String>,
    pub outputs: BTreeMap<String, String>,
}

/// Value name -> .npy file under conformance/golden/.
pub type Files = BTreeMap<String, String>;

impl Case {
    /// Every (inputs, outputs) set of the case: its own first, then `more_runs`.
    pub fn runs(&self) -> Vec<(&Files, &Files)> {
        std::iter::once((&self.inputs, &self.outputs))
            .chain(self.more_runs.iter().map(|r| (&r.inputs, &r.outputs)))
            .collect()
    }
}

pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/golden")
}

pub fn load_manifest() -> Manifest {
    let path = golden_dir().join("manifest.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a valid manifest: {e}", path.display()))
}

/// The inputs of a case, read from its .npy files.
pub fn case_inputs(case: &Case) -> Result<Vec<(String, Tensor)>, String> {
    read_inputs(&case.inputs)
}

/// One input set (value name -> .npy file under conformance/golden/), read.
pub fn read_inputs(files: &BTreeMap<String, String>) -> Result<Vec<(String, Tensor)>, String> {
    let root = golden_dir();
    files
        .iter()
        .map(|(name, file)| Ok((name.clone(), read_npy(&root.join(file))?)))
        .collect()
}

/// Compares dtype, shape, then every element within the tolerance (NaN meets NaN,
/// infinities must be equal, integers and bools exactly).
pub fn compare(actual: &Tensor, expected: &Tensor, tolerance: &Tolerance) -> Result<(), String> {
    if actual.dtype() != expected.dtype() {
        return Err(format!(
            "dtype {} but expected {}",
            actual.dtype(),
            expected.dtype()
        ));
    }
    if actual.dims() != expected.dims() {
        return Err(format!(
            "shape {:?} but expected {:?}",
            actual.dims(),
            expected.dims()
        ));
    }
    let pairs: Vec<(f64, f64)> = actual
        .to_f64_vec()
        .into_iter()
        .zip(expected.to_f64_vec())
        .collect();
    let exact = matches!(expected.data(), TensorData::I64(_) | TensorData::Bool(_));
    let mut failing = 0;
    let mut worst: Option<(usize, f64)> = None;
    let mut max_abs = 0.0f64;
    for (i, &(a, e)) in pairs.iter().enumerate() {
        let ok = if a.is_nan() || e.is_nan() || a.is_infinite() || e.is_infinite() {
            (a.is_nan() && e.is_nan()) || a == e
        } else if exact {
            a == e
        } else {
            let err = (a - e).abs();
            max_abs = max_abs.max(err);
            err <= tolerance.abs + tolerance.rel * e.abs()
        };
        if !ok {
            failing += 1;
            let err = if a.is_finite() && e.is_finite() {
                (a - e).abs()
            } else {
                f64::INFINITY
            };
            if worst.map_or(true, |(_, w)| err > w) {
                worst = Some((i, err));
            }
        }
    }
    if failing == 0 {
        return Ok(());
    }
    let mut message = format!(
        "{failing} of {} elements out of tolerance (abs {:e}, rel {:e}); max abs error {max_abs:e}",
        pairs.len(),
        tolerance.abs,
        tolerance.rel
    );
    if let Some((i, _)) = worst {
        let _ = write!(
            message,
            "; worst at flat index {i}: got {}, expected {}",
            pairs[i].0, pairs[i].1
        );
    }
    Err(message)
}

/// Reads a .npy file into a tensor (the facade's reader: every numpy dtype).
pub fn read_npy(path: &Path) -> Result<Tensor, String> {
    concord::npy::read(path)
}

// ---------------------------------------------------------------------------------------
// Models built with the core API: shared with every executor's tests and benches.

#[allow(unused_imports)]
pub use concord_conformance::models::{image, mobilenet_v2_like, resnet18_like, CnnBuilder, Lcg};
