//! Partial placement is measured, not hidden: a golden (or model, or node) trial whose
//! model the executor takes only in part runs the rest on the reference and is *partial* —
//! executed, never a pass, never a skip — with "k of n nodes" and the declined ops; strict
//! expectations and value checks apply as to any trial; a model declined whole is still a
//! skip, and op trials keep skipping a declined node. `CONCORD_REQUIRE` naming the executor
//! does not refuse partial placement (the executor is available), which a child process of
//! this test binary checks with the variable set.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::executor::{Error, Node, Op};
use concord::op::{Binary, Unary};
use concord::{
    Availability, CpuExecutor, DType, DeviceInfo, Executor, Graph, PreparedPartition, Support,
    Target, TargetSpec, Tensor,
};
use concord_conformance::expectations::Expectations;
use concord_conformance::golden::{write_npy, GoldenCase};
use concord_conformance::suite::Case;
use concord_conformance::{Record, Suite, SuiteConfig, Verdict};
use concord_core::ValueInfo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PICKY: Target = Target::new("picky");

/// An executor that runs what the reference runs, except the ops it is told to decline;
/// or, when not `available`, one whose probe finds no device.
#[derive(Debug)]
struct Picky {
    declines: Vec<&'static str>,
    available: bool,
}

impl Executor for Picky {
    fn name(&self) -> &str {
        "picky"
    }
    fn probe(&self) -> Availability {
        if !self.available {
            return Availability::Unavailable {
                cause: concord::FallbackCause::NoDevice,
                reason: "picky found no device".into(),
            };
        }
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "picky host".into(),
                ..DeviceInfo::default()
            }],
        }
    }
    fn targets(&self) -> Vec<TargetSpec> {
        vec![TargetSpec::new(PICKY, DType::F32, DType::F32)]
    }
    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        if *target != PICKY {
            return Support::No(format!("picky runs target picky only, not {target}"));
        }
        if self.declines.contains(&node.op.name()) {
            return Support::No(format!("picky has no {} kernel", node.op.name()));
        }
        CpuExecutor::new().supports(graph, node, &concord::targets::CPU)
    }
    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        CpuExecutor::new().prepare(partition, &concord::targets::CPU)
    }
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(tag: &str) -> Scratch {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("partial-placement-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    Scratch(dir)
}

/// x = [-1, 2, -0.5, 3]; r = Relu(x) = [0, 2, 0, 3]; y = Add(r, x) = [-1, 4, -0.5, 6], by
/// hand. `expected` replaces y when a test wants the oracle to disagree.
fn relu_add_case(dir: &Path, expected: [f32; 4]) -> GoldenCase {
    let graph = Graph {
        inputs: vec![ValueInfo::fixed("x", DType::F32, &[4])],
        outputs: vec!["y".into()],
        nodes: vec![
            Node::new("relu0", Op::Unary(Unary::Relu), &["x"], &["r"]),
            Node::new("add0", Op::Binary(Binary::Add), &["r", "x"], &["y"]),
        ],
        opset: 17,
        ..Graph::default()
    };
    let model = concord_onnx::to_model_proto(&graph).unwrap_or_else(|e| panic!("{e}"));
    let model_path = dir.join("model.onnx");
    std::fs::write(&model_path, prost::Message::encode_to_vec(&model))
        .unwrap_or_else(|e| panic!("{e}"));
    let tensor = |v: [f32; 4]| Tensor::from_f32([4], v.to_vec()).unwrap_or_else(|e| panic!("{e}"));
    let (x_path, y_path) = (dir.join("x.npy"), dir.join("y.npy"));
    write_npy(&x_path, &tensor([-1.0, 2.0, -0.5, 3.0])).unwrap_or_else(|e| panic!("{e}"));
    write_npy(&y_path, &tensor(expected)).unwrap_or_else(|e| panic!("{e}"));
    GoldenCase {
        name: "relu_add".into(),
        kind: "model".into(),
        model: model_path,
        op_types: vec!["Add".into(), "Relu".into()],
        inputs: BTreeMap::from([("x".to_string(), x_path)]),
        outputs: BTreeMap::from([("y".to_string(), y_path)]),
        // A tolerance level the golden manifest defines; the values here are exact.
        tolerance: "composite".into(),
        description: String::new(),
    }
}

const RIGHT: [f32; 4] = [-1.0, 4.0, -0.5, 6.0];

/// The suite of a picky executor with one golden case and the given expectations file.
fn suite(declines: &[&'static str], case: GoldenCase, expectations: &str) -> Suite {
    let mut suite = Suite::new(
        Arc::new(Picky {
            declines: declines.to_vec(),
            available: true,
        }),
        SuiteConfig::from_env(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    suite.golden = vec![Arc::new(case)];
    suite.expectations = Expectations::parse(expectations, PathBuf::from("picky.toml"), &[PICKY])
        .unwrap_or_else(|e| panic!("{e}"));
    suite
}

fn model_trial(suite: &Suite) -> Case {
    let cases: Vec<Case> = suite
        .cases()
        .into_iter()
        .filter(|c| c.category == "model")
        .collect();
    assert_eq!(cases.len(), 1, "{cases:?}");
    assert_eq!(cases[0].name, "picky/picky/model/relu_add");
    cases
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no case"))
}

fn run_model(suite: &Suite) -> (Case, Record) {
    let case = model_trial(suite);
    let record = suite.run_case(&case);
    (case, record)
}

#[test]
fn a_model_declined_in_part_is_partial_with_its_coverage() {
    let dir = scratch("part");
    let suite = suite(
        &["Relu"],
        relu_add_case(&dir.0, RIGHT),
        "min_executed = 0\n",
    );
    let (case, record) = run_model(&suite);
    assert_eq!(
        case.skip, None,
        "a model taken in part is not skipped up front"
    );
    assert_eq!(
        record.verdict,
        Verdict::Partial {
            on_executor: 1,
            nodes: 2
        }
    );
    assert!(record.verdict.executed() && !record.verdict.fails_run());
    let coverage = record
        .coverage
        .as_ref()
        .unwrap_or_else(|| panic!("no coverage"));
    assert_eq!((coverage.on_executor, coverage.nodes), (1, 2));
    assert_eq!(coverage.declined.len(), 1);
    let declined = &coverage.declined[0];
    assert_eq!(
        (declined.node.as_str(), declined.op.as_str()),
        ("relu0", "Relu")
    );
    assert_eq!(declined.placed_on, "cpu/cpu");
    assert!(
        declined.reason.contains("picky has no Relu kernel"),
        "{}",
        declined.reason
    );
    assert_eq!(
        record.partial_note().as_deref(),
        Some(
            "partial: 1 of 2 nodes on picky; declined Relu: picky does not support Relu on \
             picky: picky has no Relu kernel"
        )
    );
    // The outputs were compared with the oracle's, not taken on trust.
    assert_eq!(record.comparisons.len(), 1);
    assert!(record.comparisons[0].passed());
    assert_eq!(record.comparisons[0].elements, 4);
    // The fallback is recorded as a notice, as every fallback is.
    assert!(
        record.notices.iter().any(|n| n.contains("Relu")),
        "{:?}",
        record.notices
    );
}

#[test]
fn a_model_taken_whole_passes_and_one_declined_whole_is_a_skip() {
    let dir = scratch("whole");
    let whole = suite(&[], relu_add_case(&dir.0, RIGHT), "min_executed = 0\n");
    let (_, record) = run_model(&whole);
    assert_eq!(record.verdict, Verdict::Pass);
    let coverage = record
        .coverage
        .as_ref()
        .unwrap_or_else(|| panic!("no coverage"));
    assert_eq!((coverage.on_executor, coverage.nodes), (2, 2));
    assert!(coverage.declined.is_empty());

    let none = suite(
        &["Relu", "Add"],
        relu_add_case(&dir.0, RIGHT),
        "min_executed = 0\n",
    );
    let (case, record) = run_model(&none);
    let reason = "unsupported: picky declines Relu: picky has no Relu kernel";
    assert_eq!(case.skip.as_deref(), Some(reason));
    assert_eq!(
        record.verdict,
        Verdict::Skip {
            reason: reason.into()
        }
    );
    assert_eq!(record.coverage, None, "a skip counts towards no coverage");
}

#[test]
fn a_partial_trial_whose_values_disagree_fails_and_says_where_its_nodes_ran() {
    let dir = scratch("wrong");
    // The oracle's y with its last element off by one.
    let wrong = [-1.0, 4.0, -0.5, 7.0];
    let suite = suite(
        &["Relu"],
        relu_add_case(&dir.0, wrong),
        "min_executed = 0\n",
    );
    let (_, record) = run_model(&suite);
    match &record.verdict {
        Verdict::Fail { message } => {
            assert!(message.contains("out of tolerance"), "{message}");
            assert!(
                message.contains("partial placement: 1 of 2 nodes on picky"),
                "{message}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    // A failure still counts its nodes towards coverage: it executed.
    assert_eq!(record.coverage.as_ref().map(|c| c.on_executor), Some(1));
}

#[test]
fn strict_expectations_apply_to_partial_trials() {
    let dir = scratch("strict");
    let expected_failure = "min_executed = 0\n[[expected_failure]]\ncase = \
                            \"picky/picky/model/relu_add\"\nreason = \"Add was broken\"\n\
                            failure = \"out-of-tolerance\"\n";
    let suite = suite(&["Relu"], relu_add_case(&dir.0, RIGHT), expected_failure);
    let (_, record) = run_model(&suite);
    assert_eq!(
        record.verdict,
        Verdict::UnexpectedPass {
            reason: "Add was broken".into()
        },
        "an expected failure that passes partially still fails the run"
    );
}

#[test]
fn op_trials_keep_skipping_a_declined_node() {
    let dir = scratch("op");
    let suite = suite(
        &["Relu"],
        relu_add_case(&dir.0, RIGHT),
        "min_executed = 0\n",
    );
    let relu_ops: Vec<Case> = suite
        .cases()
        .into_iter()
        .filter(|c| c.category == "op" && c.subject == "Relu")
        .collect();
    assert!(!relu_ops.is_empty(), "the op cases have Relu cases");
    for case in &relu_ops {
        let record = suite.run_case(case);
        assert!(
            matches!(&record.verdict, Verdict::Skip { reason } if reason.contains("picky has no Relu kernel")),
            "{}: {:?}",
            case.name,
            record.verdict
        );
        assert_eq!(record.coverage, None);
    }
}

#[test]
fn min_node_coverage_fails_an_unfiltered_run_below_it() {
    let dir = scratch("floor");
    let floor = |min: &str| {
        let suite = suite(
            &["Relu"],
            relu_add_case(&dir.0, RIGHT),
            &format!("min_executed = 0\nmin_node_coverage = {min}\n"),
        );
        let (case, record) = run_model(&suite);
        let failures = suite.finish(
            std::slice::from_ref(&case),
            std::slice::from_ref(&record),
            false,
        );
        let filtered = suite.finish(&[case], &[record], true);
        assert!(filtered.is_empty(), "a filtered run checks no floor");
        failures
    };
    // 1 of 2 nodes: 50%.
    let below = floor("0.6");
    assert_eq!(below.len(), 1, "{below:?}");
    assert!(
        below[0].contains("picky/picky: node coverage 50.0% (1 of 2 nodes)")
            && below[0].contains("min_node_coverage = 0.6"),
        "{}",
        below[0]
    );
    assert!(floor("0.5").is_empty(), "at the floor is not below it");
}

/// Run alone, in a child process with `CONCORD_REQUIRE=picky`, by
/// `concord_require_naming_the_executor_does_not_refuse_partial_placement`; in the parent
/// run it checks the same verdict without the variable.
#[test]
fn partial_verdict_under_the_environment() {
    let dir = scratch("require");
    let suite = suite(
        &["Relu"],
        relu_add_case(&dir.0, RIGHT),
        "min_executed = 0\n",
    );
    let (_, record) = run_model(&suite);
    assert_eq!(
        record.verdict,
        Verdict::Partial {
            on_executor: 1,
            nodes: 2
        },
        "CONCORD_REQUIRE={:?}",
        std::env::var("CONCORD_REQUIRE").ok()
    );
    if std::env::var("CONCORD_REQUIRE").is_ok_and(|v| v == "picky") {
        // The variable reached the suite: an unavailable picky would fail the run here.
        let why = concord_conformance::suite::required_here(
            "picky",
            &PICKY,
            concord::Capability::None,
            suite.registry(),
            None,
        );
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("CONCORD_REQUIRE=picky")),
            "{why:?}"
        );
        // And it does: the same executor without a device fails its probe trial.
        let gone = Suite::new(
            Arc::new(Picky {
                declines: Vec::new(),
                available: false,
            }),
            SuiteConfig::from_env(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let probes: Vec<Case> = gone
            .cases()
            .into_iter()
            .filter(|c| c.category == "unavailable")
            .collect();
        assert_eq!(probes.len(), 1, "{probes:?}");
        match gone.run_case(&probes[0]).verdict {
            Verdict::Fail { message } => assert!(
                message.contains("picky found no device")
                    && message.contains("CONCORD_REQUIRE=picky names it"),
                "{message}"
            ),
            other => panic!("an unavailable required executor must fail, got {other:?}"),
        }
    }
}

#[test]
fn concord_require_naming_the_executor_does_not_refuse_partial_placement() {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let output = std::process::Command::new(exe)
        .args(["--exact", "partial_verdict_under_the_environment"])
        .env("CONCORD_REQUIRE", "picky")
        .output()
        .unwrap_or_else(|e| panic!("the test binary starts again: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The child ran exactly the one test (not zero, which would also exit 0).
    assert!(stdout.contains("1 passed"), "stdout:\n{stdout}");
}
