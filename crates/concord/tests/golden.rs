//! Golden tests: every case in conformance/golden/manifest.json, run through `Net` on the reference
//! executor and compared with the outputs onnxruntime computed (see conformance/golden/README.md).
//!
//! The data is made by `cargo xtask golden`; this test needs no Python. It runs every case,
//! collects every failure, and panics once at the end with all of them, so one run shows the
//! whole picture. A second test guards the manifest itself: enough cases, and every op the IR
//! supports covered, so the suite cannot shrink silently.

// A test reports a broken manifest or data file by panicking with what is wrong.
#![allow(clippy::panic)]

use concord::{Net, Tensor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The floors below which the manifest is considered to have lost cases.
const MIN_OP_CASES: usize = 40;
const MIN_MODEL_CASES: usize = 5;

/// A case that fails today for a known reason: data, with the reason, never a skip.
///
/// Strict: the case still runs, its failure message must contain `message`, and a known
/// failure that passes fails the run, so the entry is removed in the change that fixes it.
#[derive(Debug)]
struct KnownFailure {
    case: &'static str,
    message: &'static str,
    reason: &'static str,
}

// Empty today. The first entry, shape_computation_chain (a Reshape whose shape came through
// Unsqueeze axes held in Constant nodes, which load-time inference could not see), was removed
// when Constant-node values started feeding shape inference.
const KNOWN_FAILURES: &[KnownFailure] = &[];

#[derive(Debug, Deserialize)]
struct Manifest {
    oracle: Oracle,
    tolerances: BTreeMap<String, Tolerance>,
    cases: Vec<Case>,
}

/// The versions of the oracle that produced the expected outputs.
#[derive(Debug, Deserialize)]
struct Oracle {
    python: String,
    numpy: String,
    onnx: String,
    onnxruntime: String,
}

/// A named tolerance level: an element passes when |actual - expected| <= abs + rel·|expected|.
#[derive(Debug, Deserialize)]
struct Tolerance {
    abs: f64,
    rel: f64,
    reason: String,
}

#[derive(Debug, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Op,
    Model,
}

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    kind: Kind,
    opset: i64,
    op_types: Vec<String>,
    model: String,
    inputs: BTreeMap<String, String>,
    outputs: BTreeMap<String, String>,
    tolerance: String,
    /// Further input sets for the same model (a symbolic axis at other sizes), each run
    /// through the one `Net` built for the case.
    #[serde(default)]
    more_runs: Vec<Run>,
}

/// One more set of inputs and the outputs onnxruntime gave for them.
#[derive(Debug, Deserialize)]
struct Run {
    inputs: BTreeMap<String, String>,
    outputs: BTreeMap<String, String>,
}

/// How far one output is from the oracle's, and where it is worst.
#[derive(Debug, Default)]
struct Deviation {
    max_abs: f64,
    max_rel: f64,
    /// Flat index of the element that exceeds its bound by the largest factor.
    worst: Option<usize>,
    worst_ratio: f64,
    failing_elements: usize,
    /// Why an element failed in a way no magnitude describes (NaN or infinity mismatch).
    special: Option<String>,
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/golden")
}

fn load_manifest() -> Manifest {
    let path = golden_dir().join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; run `cargo xtask golden`",
            path.display()
        )
    });
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a valid manifest: {e}", path.display()))
}

#[test]
fn golden_cases_match_onnxruntime() {
    let manifest = load_manifest();
    let mut failures = Vec::new();
    let mut known = 0;
    for case in &manifest.cases {
        let result = run_case(&manifest, case);
        if let Some(expected) = KNOWN_FAILURES.iter().find(|k| k.case == case.name) {
            match result {
                Err(message) if message.contains(expected.message) => {
                    known += 1;
                    println!("golden: {} fails as known: {}", case.name, expected.reason);
                }
                Err(message) => failures.push(format!(
                    "{} is a known failure ({}), but it failed differently:\n    {}",
                    case.name,
                    expected.message,
                    message.replace('\n', "\n    ")
                )),
                Ok(()) => failures.push(format!(
                    "{} is listed as a known failure but now passes: remove it from KNOWN_FAILURES",
                    case.name
                )),
            }
            continue;
        }
        if let Err(message) = result {
            failures.push(format!(
                "{} ({:?}, opset {}, ops {}, tolerance {}):\n    {}",
                case.name,
                case.kind,
                case.opset,
                case.op_types.join("+"),
                case.tolerance,
                message.replace('\n', "\n    ")
            ));
        }
    }
    let total = manifest.cases.len();
    println!(
        "golden: {} of {total} cases match onnxruntime {} (onnx {}, numpy {}, python {}); {known} known failures",
        total - failures.len() - known,
        manifest.oracle.onnxruntime,
        manifest.oracle.onnx,
        manifest.oracle.numpy,
        manifest.oracle.python
    );
    assert!(
        failures.is_empty(),
        "{} of {total} golden cases failed:\n\n{}\n",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Ops without a golden case, each with the must-pass ONNX node test that checks it
/// instead: onnx's shape inference cannot type their function-defined outputs, or the op is
/// newer than onnxruntime, so xtask/golden/generate.py cannot produce a case.
///
/// Paths of covered ops that the pinned onnxruntime (1.23.2) cannot be the oracle for, and
/// that no node test checks either, are left to concord-cpu's kernel tests: GridSample's
/// cubic mode on 5-D X (onnxruntime's kernel refuses cubic unless X is 4-D; see
/// tests/sampling.rs) and STFT of a complex signal (onnxruntime's values are wrong there, see
/// xtask/golden/generate.py; test_stft has real signals only; see tests/signal.rs).
const NODE_TEST_ONLY: &[(&str, &str)] = &[
    // onnx 1.19's shape inference gives GroupNormalization's output no type (the op is a
    // function), so the generator cannot declare it.
    ("GroupNormalization", "test_group_normalization_example"),
    // onnx 1.19's shape inference fails inside MeanVarianceNormalization's function body.
    ("MeanVarianceNormalization", "test_mvn"),
    // Swish exists from opset 24, newer than the pinned onnxruntime runs.
    ("Swish", "test_swish"),
    // MelWeightMatrix and TfIdfVectorizer have no golden case yet (onnxruntime 1.23.2 runs
    // both, so generate.py could add them); their node tests stand in.
    ("MelWeightMatrix", "test_melweightmatrix"),
    // TensorScatter exists from opset 24, newer than the pinned onnxruntime runs.
    ("TensorScatter", "test_tensorscatter_circular"),
    (
        "TfIdfVectorizer",
        "test_tfidfvectorizer_tf_batch_uniandbigrams_skip5",
    ),
    // The random ops' values are the generator's, so no oracle gives them: these node
    // tests check shape and dtype (conformance/onnx-node.toml), and STATISTICS_ONLY's
    // kernel tests the distributions.
    ("Bernoulli", "test_bernoulli"),
    ("RandomUniformLike", "test_bernoulli_expanded"),
    // onnxruntime 1.23 has no DeformConv kernel ("Could not find an implementation for
    // DeformConv(19)"); its node tests (padding, mask and bias, offset groups) stand in.
    ("DeformConv", "test_deform_conv_with_mask_bias"),
    // Opsets 26 to 28, newer than the pinned onnxruntime runs: their node tests (onnx
    // 1.23.2's, computed by onnx's reference implementation) stand in.
    ("CumProd", "test_cumprod_2d_axis_1"),
    ("BitCast", "test_bitcast_float32_to_int32"),
    ("CausalConvWithState", "test_causal_conv_with_state_basic"),
    ("LinearAttention", "test_linear_attention_delta"),
    ("SwiGLU", "test_swiglu_alpha"),
];

/// Random ops that ONNX has no node test of and onnxruntime cannot give golden values for
/// (they are the generator's), each with the reference kernel test in
/// crates/cpu/tests/random.rs that checks its distribution instead.
const STATISTICS_ONLY: &[(&str, &str)] = &[
    ("RandomNormal", "random_normal_has_its_mean_and_spread"),
    ("RandomUniform", "random_uniform_has_its_mean_and_spread"),
    (
        "RandomNormalLike",
        "like_forms_take_the_input_shape_and_dtype",
    ),
    ("Multinomial", "multinomial_counts_follow_the_softmax"),
];

#[test]
fn golden_manifest_covers_every_supported_op() {
    let manifest = load_manifest();
    let ops = manifest.cases.iter().filter(|c| c.kind == Kind::Op).count();
    let models = manifest
        .cases
        .iter()
        .filter(|c| c.kind == Kind::Model)
        .count();
    assert!(
        ops >= MIN_OP_CASES,
        "golden has {ops} op cases, at least {MIN_OP_CASES} expected"
    );
    assert!(
        models >= MIN_MODEL_CASES,
        "golden has {models} model cases, at least {MIN_MODEL_CASES} expected"
    );

    // Ops onnxruntime's tooling cannot produce a golden case for are held to ONNX node tests
    // the reference must pass instead; each must name one that conformance/onnx-node.toml
    // lists as must-pass.
    let node_list = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/onnx-node.toml"),
    )
    .expect("conformance/onnx-node.toml is readable");
    for (op, test) in NODE_TEST_ONLY {
        assert!(
            node_list.contains(&format!("\"{test}\",")),
            "{op} has no golden case, and its node test {test} is not must-pass"
        );
    }
    let random_tests = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../cpu/tests/random.rs"),
    )
    .expect("crates/cpu/tests/random.rs is readable");
    for (op, test) in STATISTICS_ONLY {
        assert!(
            random_tests.contains(&format!("#[test]\nfn {test}()")),
            "{op} has no golden case and no node test, and crates/cpu/tests/random.rs has no \
             test {test} of its statistics"
        );
    }
    let uncovered: Vec<&str> = concord::op::supported_names()
        .iter()
        .copied()
        .filter(|op| {
            !manifest
                .cases
                .iter()
                .any(|c| c.op_types.iter().any(|t| t == op))
                && !NODE_TEST_ONLY.iter().any(|(o, _)| o == op)
                && !STATISTICS_ONLY.iter().any(|(o, _)| o == op)
        })
        .collect();
    assert!(
        uncovered.is_empty(),
        "no golden case uses these supported ops: {}",
        uncovered.join(", ")
    );

    // At least one model with a symbolic axis is checked at two sizes from one built net.
    assert!(
        manifest
            .cases
            .iter()
            .any(|c| c.kind == Kind::Model && !c.more_runs.is_empty()),
        "no model case has a second input set (more_runs)"
    );

    for known in KNOWN_FAILURES {
        assert!(
            manifest.cases.iter().any(|c| c.name == known.case),
            "KNOWN_FAILURES names {}, which is not a golden case",
            known.case
        );
    }
    for (name, level) in &manifest.tolerances {
        assert!(
            level.abs >= 0.0 && level.rel >= 0.0 && !level.reason.trim().is_empty(),
            "tolerance level {name} needs non-negative abs and rel and a reason"
        );
    }
    let root = golden_dir();
    for case in &manifest.cases {
        assert!(
            manifest.tolerances.contains_key(&case.tolerance),
            "case {} names an unknown tolerance level {}",
            case.name,
            case.tolerance
        );
        assert!(
            !case.outputs.is_empty(),
            "case {} has no outputs",
            case.name
        );
        let files = std::iter::once(&case.model)
            .chain(case.inputs.values())
            .chain(case.outputs.values())
            .chain(
                case.more_runs
                    .iter()
                    .flat_map(|r| r.inputs.values().chain(r.outputs.values())),
            );
        for file in files {
            assert!(
                root.join(file).is_file(),
                "case {}: {file} is missing",
                case.name
            );
        }
    }
}

/// Runs one case; Err describes everything that went wrong with it.
fn run_case(manifest: &Manifest, case: &Case) -> Result<(), String> {
    let root = golden_dir();
    let tolerance = manifest
        .tolerances
        .get(&case.tolerance)
        .ok_or_else(|| format!("unknown tolerance level `{}`", case.tolerance))?;
    let net = Net::from_onnx_file(root.join(&case.model))
        .map_err(|e| format!("building the net failed: {e}"))?;
    let runs = std::iter::once((&case.inputs, &case.outputs))
        .chain(case.more_runs.iter().map(|r| (&r.inputs, &r.outputs)));
    let mut problems = Vec::new();
    for (run, (inputs, outputs)) in runs.enumerate() {
        // Run 0 is the case's own input set; later ones are named so a failure says which.
        let label = if run == 0 {
            String::new()
        } else {
            format!("run {run}: ")
        };
        if let Err(message) = run_once(
            &label_case(case, run),
            &net,
            &root,
            inputs,
            outputs,
            tolerance,
        ) {
            problems.push(format!(
                "{label}{}",
                message.replace('\n', &format!("\n{label}"))
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The case's name, with the run number for runs after the first.
fn label_case(case: &Case, run: usize) -> String {
    if run == 0 {
        case.name.clone()
    } else {
        format!("{} run {run}", case.name)
    }
}

/// Runs one input set through `net` and compares every output.
fn run_once(
    case: &str,
    net: &Net,
    root: &Path,
    input_files: &BTreeMap<String, String>,
    output_files: &BTreeMap<String, String>,
    tolerance: &Tolerance,
) -> Result<(), String> {
    let mut inputs = Vec::new();
    for (name, file) in input_files {
        inputs.push((name.clone(), read_npy(&root.join(file))?));
    }
    let outputs = net
        .forward(inputs)
        .map_err(|e| format!("forward failed: {e}"))?;
    let mut problems = Vec::new();
    for (name, file) in output_files {
        let expected = read_npy(&root.join(file))?;
        let Some(actual) = outputs.get(name) else {
            let produced: Vec<&str> = outputs.iter().map(|(n, _)| n).collect();
            problems.push(format!(
                "output `{name}` missing; the net produced [{}]",
                produced.join(", ")
            ));
            continue;
        };
        match compare_measured(actual, &expected, tolerance) {
            Ok((max_abs, max_rel)) => println!(
                "golden: {case} output `{name}`: max abs error {max_abs:.3e}, max rel error {max_rel:.3e}"
            ),
            Err(message) => problems.push(format!("output `{name}`: {message}")),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Compares dtype, shape, then every element within the tolerance.
fn compare(actual: &Tensor, expected: &Tensor, tolerance: &Tolerance) -> Result<(), String> {
    compare_measured(actual, expected, tolerance).map(|_| ())
}

/// [`compare`], returning on success the largest absolute and relative errors seen.
fn compare_measured(
    actual: &Tensor,
    expected: &Tensor,
    tolerance: &Tolerance,
) -> Result<(f64, f64), String> {
    if actual.dtype() != expected.dtype() {
        return Err(format!(
            "dtype {} but onnxruntime gives {}",
            actual.dtype(),
            expected.dtype()
        ));
    }
    if actual.dims() != expected.dims() {
        return Err(format!(
            "shape {:?} but onnxruntime gives {:?}",
            actual.dims(),
            expected.dims()
        ));
    }
    // Floats widen to f64 exactly; integer and bool outputs carry no rounding, so they must
    // match whatever the level.
    let deviation = if expected.dtype().is_float() {
        float_deviation(
            actual.to_f64_vec().into_iter(),
            expected.to_f64_vec().into_iter(),
            tolerance,
        )
    } else {
        match (actual.to_i128_vec(), expected.to_i128_vec()) {
            (Some(a), Some(e)) => exact_deviation(&a, &e),
            _ => return Err("dtype mismatch in the data".to_string()),
        }
    };
    if deviation.failing_elements == 0 {
        return Ok((deviation.max_abs, deviation.max_rel));
    }
    let mut message = format!(
        "{} of {} elements out of tolerance (abs {:e}, rel {:e}); max abs error {:.3e}, max rel error {:.3e}",
        deviation.failing_elements,
        expected.len(),
        tolerance.abs,
        tolerance.rel,
        deviation.max_abs,
        deviation.max_rel
    );
    if let Some(flat) = deviation.worst {
        let index = unravel(flat, expected.dims());
        let _ = write!(
            message,
            "; worst at {index:?}: got {}, expected {}",
            element(actual, flat),
            element(expected, flat)
        );
    }
    if let Some(special) = deviation.special {
        let _ = write!(message, "; {special}");
    }
    Err(message)
}

fn float_deviation(
    actual: impl Iterator<Item = f64>,
    expected: impl Iterator<Item = f64>,
    tolerance: &Tolerance,
) -> Deviation {
    let mut d = Deviation::default();
    for (i, (a, e)) in actual.zip(expected).enumerate() {
        if e.is_nan() || a.is_nan() || e.is_infinite() || a.is_infinite() {
            // NaN must meet NaN and an infinity must meet the same infinity.
            let same = (e.is_nan() && a.is_nan()) || a == e;
            if !same {
                // The maxima stay those of the finite elements; `special` names this one.
                d.failing_elements += 1;
                if d.special.is_none() {
                    d.special = Some(format!("element {i} is {a} where onnxruntime gives {e}"));
                }
                if d.worst_ratio < f64::INFINITY {
                    d.worst_ratio = f64::INFINITY;
                    d.worst = Some(i);
                }
            }
            continue;
        }
        let err = (a - e).abs();
        let bound = tolerance.abs + tolerance.rel * e.abs();
        d.max_abs = d.max_abs.max(err);
        if err > 0.0 {
            let rel = if e == 0.0 {
                f64::INFINITY
            } else {
                err / e.abs()
            };
            d.max_rel = d.max_rel.max(rel);
        }
        if err > bound {
            d.failing_elements += 1;
            let ratio = if bound == 0.0 {
                f64::INFINITY
            } else {
                err / bound
            };
            if d.worst.is_none() || ratio > d.worst_ratio {
                d.worst_ratio = ratio;
                d.worst = Some(i);
            }
        }
    }
    d
}

fn exact_deviation<T: PartialEq + Copy + Into<Numeric>>(actual: &[T], expected: &[T]) -> Deviation {
    let mut d = Deviation::default();
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        if a != e {
            d.failing_elements += 1;
            let err = a.into().distance(e.into());
            if d.worst.is_none() || err > d.max_abs {
                d.worst = Some(i);
            }
            d.max_abs = d.max_abs.max(err);
            d.max_rel = d
                .max_rel
                .max(err / e.into().magnitude().max(f64::MIN_POSITIVE));
        }
    }
    d
}

/// An integer or bool element seen as a number, for reporting how far apart two are.
#[derive(Clone, Copy)]
struct Numeric(f64);

impl Numeric {
    fn distance(self, other: Numeric) -> f64 {
        (self.0 - other.0).abs()
    }
    fn magnitude(self) -> f64 {
        self.0.abs()
    }
}

impl From<i128> for Numeric {
    fn from(v: i128) -> Numeric {
        // Precision loss above 2^53 only affects the reported error size, not pass or fail.
        Numeric(v as f64)
    }
}

/// One element of a tensor, printed.
fn element(t: &Tensor, flat: usize) -> String {
    match t.data().gather(&[flat]) {
        Ok(one) if t.dtype().is_float() => format!("{:e} ({})", one.to_f64_vec()[0], t.dtype()),
        Ok(one) => format!("{} ({})", one.to_f64_vec()[0], t.dtype()),
        Err(_) => "?".to_string(),
    }
}

/// A flat row-major index as per-axis coordinates.
fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (axis, &dim) in dims.iter().enumerate().rev() {
        if dim > 0 {
            index[axis] = flat % dim;
            flat /= dim;
        }
    }
    index
}

/// Reads a .npy file into a tensor (the facade's reader: every numpy dtype).
fn read_npy(path: &Path) -> Result<Tensor, String> {
    concord::npy::read(path)
}

// The comparison is what makes the golden test able to fail, so it is checked on hand-made
// tensors with hand-computed verdicts.

fn level(abs: f64, rel: f64) -> Tolerance {
    Tolerance {
        abs,
        rel,
        reason: "test".to_string(),
    }
}

fn f32s(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f32(shape.to_vec(), values.to_vec()).expect("hand-made tensor is consistent")
}

#[test]
fn compare_applies_abs_plus_rel_bound_and_names_the_worst_element() {
    let expected = f32s(&[2, 2], &[1.0, 2.0, 100.0, 0.0]);
    // Bound per element: 1e-3 + 1e-2 * |e| = 0.011, 0.021, 1.001, 0.001.
    let within = f32s(&[2, 2], &[1.01, 1.98, 101.0, -0.0009]);
    assert_eq!(compare(&within, &expected, &level(1e-3, 1e-2)), Ok(()));

    let beyond = f32s(&[2, 2], &[1.01, 1.9, 101.0, 0.0]);
    let message =
        compare(&beyond, &expected, &level(1e-3, 1e-2)).expect_err("0.1 off exceeds 0.021");
    assert!(message.starts_with("1 of 4 elements"), "{message}");
    assert!(message.contains("worst at [0, 1]"), "{message}");
}

#[test]
fn compare_exact_level_rejects_one_ulp() {
    let expected = f32s(&[3], &[1.0, 2.0, 3.0]);
    let one_ulp = f32s(&[3], &[1.0, 2.0, f32::from_bits(3.0f32.to_bits() + 1)]);
    let message =
        compare(&one_ulp, &expected, &level(0.0, 0.0)).expect_err("exact means bit-equal");
    assert!(message.contains("worst at [2]"), "{message}");
}

#[test]
fn compare_requires_nan_and_infinities_to_match() {
    let expected = f32s(&[3], &[f32::NAN, f32::INFINITY, 1.0]);
    assert_eq!(
        compare(
            &f32s(&[3], &[f32::NAN, f32::INFINITY, 1.0]),
            &expected,
            &level(1.0, 1.0)
        ),
        Ok(())
    );
    assert!(compare(
        &f32s(&[3], &[0.0, f32::INFINITY, 1.0]),
        &expected,
        &level(1.0, 1.0)
    )
    .is_err());
    assert!(compare(
        &f32s(&[3], &[f32::NAN, f32::NEG_INFINITY, 1.0]),
        &expected,
        &level(1.0, 1.0)
    )
    .is_err());
    assert!(compare(
        &f32s(&[3], &[f32::NAN, f32::INFINITY, f32::NAN]),
        &expected,
        &level(1.0, 1.0)
    )
    .is_err());
}

#[test]
fn compare_requires_same_dtype_shape_and_integers() {
    let expected = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let reshaped = f32s(&[4], &[1.0, 2.0, 3.0, 4.0]);
    assert!(compare(&reshaped, &expected, &level(1.0, 1.0)).is_err());
    let as_i64 = Tensor::from_i64(vec![2, 2], vec![1, 2, 3, 4]).expect("consistent");
    assert!(compare(&as_i64, &expected, &level(1.0, 1.0)).is_err());
    // Integer outputs must match exactly even under a loose level.
    let expected_i64 = Tensor::from_i64(vec![2], vec![5, -7]).expect("consistent");
    let off_by_one = Tensor::from_i64(vec![2], vec![5, -6]).expect("consistent");
    let message =
        compare(&off_by_one, &expected_i64, &level(1.0, 1.0)).expect_err("integers are exact");
    assert!(
        message.contains("worst at [1]: got -6 (i64), expected -7 (i64)"),
        "{message}"
    );
}

#[test]
fn npy_reader_reads_every_golden_dtype() {
    let root = golden_dir().join("cases");
    let cases = [
        ("add_f16/inputs/A.npy", concord::DType::F16, vec![2, 3, 4]),
        ("mod_int64/inputs/A.npy", concord::DType::I64, vec![2, 3, 4]),
        (
            "where_broadcast/inputs/C.npy",
            concord::DType::Bool,
            vec![2, 1, 4],
        ),
        ("reduce_sum_all/expected/Y.npy", concord::DType::F32, vec![]),
    ];
    for (file, dtype, dims) in cases {
        let tensor = read_npy(&root.join(file)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (tensor.dtype(), tensor.dims().to_vec()),
            (dtype, dims),
            "{file}"
        );
    }
}
