//! The reference's op/ trials compare it with the op cases' independent oracle
//! (conformance/golden/op-cases/, made by `cargo xtask op-oracle`), never with itself: every
//! case has an oracle output for the model and inputs the suite builds now; a case that
//! follows another oracle than onnxruntime says which and why, and so does its trial; and the
//! trial fails when the oracle disagrees, when the case changed since its output was
//! computed, or when the recorded oracle is not the one the case names.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord_conformance::case::{load_cases, OpCase};
use concord_conformance::op_oracle::{OracleChoice, OracleManifest, OP_CASES_DIR};
use concord_conformance::{Suite, SuiteConfig, Verdict};
use concord_core::Tensor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> Vec<OpCase> {
    load_cases(&here().join("cases")).unwrap_or_else(|e| panic!("the op cases load: {e}"))
}

fn manifest() -> OracleManifest {
    OracleManifest::load(&here().join("golden"))
        .unwrap_or_else(|e| panic!("the op-case oracle manifest loads: {e}"))
}

#[test]
fn every_op_case_has_an_oracle_output_for_the_case_as_the_suite_builds_it() {
    let cases = cases();
    let manifest = manifest();
    let mut by_oracle: BTreeMap<String, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for case in &cases {
        let built = case
            .build()
            .unwrap_or_else(|e| panic!("{}/{} builds: {e}", case.op, case.name));
        match manifest.outputs_for(case, &built) {
            Ok(outputs) => {
                assert_eq!(outputs.outputs.len(), case.outputs, "{}", case.name);
                let oracle = case
                    .oracle
                    .as_ref()
                    .map_or("onnxruntime", |c| c.follow.as_str());
                *by_oracle.entry(oracle.to_string()).or_default() += 1;
                if let Some(choice) = &case.oracle {
                    assert!(
                        outputs.describe.contains(&choice.reason)
                            && outputs.describe.contains("not onnxruntime"),
                        "{}/{}: the trial must say which oracle and why: {}",
                        case.op,
                        case.name,
                        outputs.describe
                    );
                }
            }
            Err(e) => problems.push(e),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(
        manifest.cases.len(),
        cases.len(),
        "the manifest has entries for cases that no longer exist: run `cargo xtask op-oracle`"
    );
    println!("op cases by oracle: {by_oracle:?}");
    assert!(
        by_oracle.get("onnxruntime").copied().unwrap_or(0) * 10 >= cases.len() * 9,
        "fewer than 90% of the op cases follow onnxruntime: {by_oracle:?}"
    );
    for key in ["onnxruntime", "onnx", "numpy"] {
        assert!(
            manifest.oracle.contains_key(key),
            "the manifest records no {key} version"
        );
    }
}

#[test]
fn a_case_edited_since_its_oracle_output_was_computed_is_refused() {
    let mut case = cases()
        .into_iter()
        .find(|c| {
            c.inputs
                .iter()
                .any(|i| i.values.is_none() && !i.name.is_empty())
        })
        .unwrap_or_else(|| panic!("some case generates its inputs"));
    let manifest = manifest();
    let built = case.build().unwrap_or_else(|e| panic!("{e}"));
    assert!(manifest.outputs_for(&case, &built).is_ok(), "control");
    for input in &mut case.inputs {
        if input.values.is_none() && !input.name.is_empty() {
            input.seed = Some(input.seed.unwrap_or(0).wrapping_add(1));
        }
    }
    let built = case.build().unwrap_or_else(|e| panic!("{e}"));
    let error = manifest
        .outputs_for(&case, &built)
        .err()
        .unwrap_or_else(|| panic!("{}/{}: new inputs, old answer", case.op, case.name));
    assert!(
        error.contains("changed since") && error.contains("cargo xtask op-oracle"),
        "{error}"
    );
}

#[test]
fn a_case_naming_another_oracle_than_the_recorded_one_is_refused() {
    let mut case = cases()
        .into_iter()
        .find(|c| c.oracle.is_none())
        .unwrap_or_else(|| panic!("some case follows onnxruntime"));
    let manifest = manifest();
    case.oracle = Some(OracleChoice {
        follow: "onnx-reference".into(),
        reason: "a test".into(),
    });
    let built = case.build().unwrap_or_else(|e| panic!("{e}"));
    let error = manifest
        .outputs_for(&case, &built)
        .err()
        .unwrap_or_else(|| panic!("the recorded oracle is onnxruntime"));
    assert!(error.contains("names oracle `onnx-reference`"), "{error}");
}

/// Copies every file under `from` to the same place under `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        let target = to.join(path.file_name().unwrap_or_default());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

#[test]
fn the_reference_trial_fails_when_the_oracle_disagrees_and_names_the_oracle() {
    // A golden directory whose op-cases are the committed ones but for one output, moved by
    // one part in a thousand: the reference's trial on that case must fail by value, the
    // others must still pass.
    let scratch = std::env::temp_dir().join(format!("concord-op-oracle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let golden = here().join("golden");
    std::fs::create_dir_all(&scratch).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(golden.join("manifest.json"), scratch.join("manifest.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    copy_tree(&golden.join(OP_CASES_DIR), &scratch.join(OP_CASES_DIR));

    let cases = cases();
    let victim = cases
        .iter()
        .find(|c| c.op == "Add" && c.oracle.is_none() && c.inputs.iter().all(|i| i.dtype == "f32"))
        .unwrap_or_else(|| panic!("an f32 Add case that follows onnxruntime"));
    let spec_case = cases
        .iter()
        .find(|c| c.oracle.is_some())
        .unwrap_or_else(|| panic!("a case that follows another oracle"));
    let output = scratch
        .join(OP_CASES_DIR)
        .join(&victim.op)
        .join(&victim.name)
        .join("out0.npy");
    let want = concord_conformance::npy::read(&output).unwrap_or_else(|e| panic!("{e}"));
    let values = want
        .as_f32()
        .unwrap_or_else(|| panic!("f32 output"))
        .to_vec();
    let moved: Vec<f32> = values.iter().map(|v| v * 1.001 + 1e-3).collect();
    let moved = Tensor::from_f32(want.shape().clone(), moved).unwrap_or_else(|e| panic!("{e}"));
    concord_conformance::npy::write(&output, &moved).unwrap_or_else(|e| panic!("{e}"));

    let mut config = SuiteConfig::from_env();
    config.golden_dir = scratch.clone();
    let suite = Suite::new(Arc::new(concord_cpu::CpuExecutor::new()), config)
        .unwrap_or_else(|e| panic!("the suite builds: {e}"));
    let trials = suite.cases();
    let run = |op: &str, name: &str| {
        let trial = trials
            .iter()
            .find(|t| t.name == format!("cpu/cpu/op/{op}/{name}"))
            .unwrap_or_else(|| panic!("trial for {op}/{name}"));
        suite.run_case(trial)
    };

    let failed = run(&victim.op, &victim.name);
    match &failed.verdict {
        Verdict::Fail { message } => assert!(
            message.contains("out of tolerance")
                && message.contains("expected output from onnxruntime"),
            "{message}"
        ),
        other => panic!("a wrong oracle output must fail the reference's trial: {other:?}"),
    }

    let control = cases
        .iter()
        .find(|c| c.op == "Add" && c.oracle.is_none() && c.name != victim.name)
        .unwrap_or_else(|| panic!("a second Add case"));
    let passed = run(&control.op, &control.name);
    assert_eq!(passed.verdict, Verdict::Pass, "control");
    assert!(
        passed.comparisons[0]
            .output
            .contains("expected output from onnxruntime"),
        "{:?}",
        passed.comparisons
    );

    let spec = run(&spec_case.op, &spec_case.name);
    assert_eq!(spec.verdict, Verdict::Pass, "{}", spec_case.name);
    let reason = spec_case.oracle.as_ref().map(|c| c.reason.as_str());
    assert!(
        spec.comparisons[0].output.contains("not onnxruntime")
            && spec.comparisons[0].output.contains(reason.unwrap_or("?")),
        "the trial says which oracle it follows and why: {:?}",
        spec.comparisons
    );
    let _ = std::fs::remove_dir_all(&scratch);
}
