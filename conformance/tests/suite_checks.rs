//! The suite's run-level checks can fail: a recorded floor catches a trial that stopped
//! executing and names it, an expected failure of another kind than its entry says fails
//! the run, a zero of the wrong sign is caught where a case compares signs, and
//! `fallback/placement_honesty` fails a node the profile does not attribute. Each check is
//! run against an executor with the fault and against one without (the control).

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::executor::{Error, Node};
use concord::{
    Availability, CpuExecutor, DType, DeviceInfo, Executor, Graph, PreparedPartition, ProfileSink,
    Support, Target, TargetSpec, Tensor,
};
use concord_conformance::config::ExpectationsSource;
use concord_conformance::{floors, Case, Record, Suite, SuiteConfig, Verdict};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a wrapped reference executor gets wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Nothing: the control.
    None,
    /// Runs its nodes without telling the profile.
    RecordsNothing,
    /// Every −0 of an f32 output comes back as +0.
    PositiveZeros,
    /// The first element of every f32 output is off by one.
    ValuesOff,
}

/// The reference executor under another name, taking the ops `takes` lists (every op when
/// empty), with a fault.
#[derive(Debug)]
struct Wrapped {
    name: &'static str,
    takes: &'static [&'static str],
    fault: Fault,
}

impl Executor for Wrapped {
    fn name(&self) -> &str {
        self.name
    }
    fn probe(&self) -> Availability {
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "wrapped 0".into(),
                ..DeviceInfo::default()
            }],
        }
    }
    fn targets(&self) -> Vec<TargetSpec> {
        vec![TargetSpec::new(
            Target::new(self.name),
            DType::F32,
            DType::F32,
        )]
    }
    fn supports(&self, _graph: &Graph, node: &Node, _target: &Target) -> Support {
        if self.takes.is_empty() || self.takes.contains(&node.op.name()) {
            Support::Yes
        } else {
            Support::No(format!("{} has no {} kernel", self.name, node.op.name()))
        }
    }
    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        Ok(Box::new(WrappedPartition {
            inner: CpuExecutor::new().prepare(partition, &concord::targets::CPU)?,
            name: self.name,
            fault: self.fault,
        }))
    }
}

#[derive(Debug)]
struct WrappedPartition {
    inner: Box<dyn PreparedPartition>,
    name: &'static str,
    fault: Fault,
}

/// Attributes every node the reference runs to the wrapping executor.
struct Relabel<'a> {
    sink: &'a dyn ProfileSink,
    name: &'static str,
}

impl ProfileSink for Relabel<'_> {
    fn record(&self, node: &str, elapsed: Duration) {
        self.sink.record_on(node, self.name, elapsed);
    }
    fn record_on(&self, node: &str, _executor: &str, elapsed: Duration) {
        self.sink.record_on(node, self.name, elapsed);
    }
    fn record_transfer(&self, value: &str, bytes: u64, elapsed: Duration) {
        self.sink.record_transfer(value, bytes, elapsed);
    }
}

impl PreparedPartition for WrappedPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let relabel = profile.map(|sink| Relabel {
            sink,
            name: self.name,
        });
        let sink = match self.fault {
            Fault::RecordsNothing => None,
            _ => relabel.as_ref().map(|r| r as &dyn ProfileSink),
        };
        let outputs = self.inner.run(inputs, sink)?;
        outputs
            .into_iter()
            .map(|t| {
                let Some(values) = t.as_f32() else {
                    return Ok(t);
                };
                let mut values = values.to_vec();
                match self.fault {
                    Fault::PositiveZeros => {
                        for v in &mut values {
                            if *v == 0.0 {
                                *v = 0.0;
                            }
                        }
                    }
                    Fault::ValuesOff => {
                        if let Some(first) = values.first_mut() {
                            *first += 1.0;
                        }
                    }
                    Fault::None | Fault::RecordsNothing => return Ok(t),
                }
                Tensor::from_f32(t.shape().clone(), values)
            })
            .collect()
    }
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(tag: &str) -> Scratch {
    let dir =
        std::env::temp_dir().join(format!("concord-suite-checks-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    Scratch(dir)
}

/// The suite for `executor`, reading its expectations from `file` (none when `None`).
fn suite(executor: Wrapped, file: Option<PathBuf>, dir: &Scratch) -> Suite {
    let mut config = SuiteConfig::from_env();
    config.expectations = match file {
        Some(path) => ExpectationsSource::File(path),
        // An author crate without a conformance/ file: no expectations, no floor.
        None => ExpectationsSource::AuthorCrate(dir.0.clone()),
    };
    Suite::new(Arc::new(executor), config).unwrap_or_else(|e| panic!("suite: {e}"))
}

/// The op trials of `ops` (every trial of those ops, taken or declined).
fn op_cases(suite: &Suite, ops: &[&str]) -> Vec<Case> {
    suite
        .cases()
        .into_iter()
        .filter(|c| c.category == "op" && ops.contains(&c.subject.as_str()))
        .collect()
}

fn run(suite: &Suite, cases: &[Case]) -> Vec<Record> {
    cases.iter().map(|c| suite.run_case(c)).collect()
}

fn trial(suite: &Suite, name: &str) -> Case {
    suite
        .cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no trial {name}"))
}

#[test]
fn a_trial_that_stops_executing_fails_the_run_by_name() {
    let dir = scratch("ratchet");
    let file = dir.0.join("ratchet.toml");
    std::fs::write(&file, "# hand-written part\n").unwrap_or_else(|e| panic!("{e}"));
    let ops = ["Relu", "Add"];
    // Recorded from an executor that takes Relu and Add.
    let before = suite(
        Wrapped {
            name: "ratchet",
            takes: &["Relu", "Add"],
            fault: Fault::None,
        },
        None,
        &dir,
    );
    let records = run(&before, &op_cases(&before, &ops));
    let recorded = floors::measured("ratchet", &before.device, &records);
    let adds = recorded
        .trials
        .iter()
        .filter(|t| t.starts_with("ratchet/ratchet/op/Add/"))
        .count();
    assert!(
        adds > 0,
        "the recording holds Add trials: {:?}",
        recorded.trials
    );
    floors::write(&file, &recorded, "recorded by this test").unwrap_or_else(|e| panic!("{e}"));

    // The same executor against its recording: the control.
    let same = suite(
        Wrapped {
            name: "ratchet",
            takes: &["Relu", "Add"],
            fault: Fault::None,
        },
        Some(file.clone()),
        &dir,
    );
    let cases = op_cases(&same, &ops);
    let failures = same.finish(&cases, &run(&same, &cases), false);
    assert!(failures.is_empty(), "{failures:?}");

    // An executor that declines Add now: the run fails and names the Add trials.
    let shrunk = suite(
        Wrapped {
            name: "ratchet",
            takes: &["Relu"],
            fault: Fault::None,
        },
        Some(file),
        &dir,
    );
    let cases = op_cases(&shrunk, &ops);
    let failures = shrunk.finish(&cases, &run(&shrunk, &cases), false);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].contains("op trials executed, below the recorded floor")
            && failures[0].contains("ratchet/ratchet/op/Add/"),
        "{}",
        failures[0]
    );
}

#[test]
fn an_expected_failure_of_another_kind_fails_the_run_with_both_shown() {
    let dir = scratch("reason");
    let file = dir.0.join("offby.toml");
    let entry = |matcher: &str| {
        format!(
            "min_executed = 0\n[[expected_failure]]\ncase = \"offby/*/op/Relu/*\"\n\
             reason = \"planted: the first element is off by one\"\n{matcher}\n"
        )
    };
    let relu = |file: &PathBuf| {
        let s = suite(
            Wrapped {
                name: "offby",
                takes: &["Relu"],
                fault: Fault::ValuesOff,
            },
            Some(file.clone()),
            &dir,
        );
        let case = s
            .cases()
            .into_iter()
            .find(|c| c.name.starts_with("offby/offby/op/Relu/") && c.skip.is_none())
            .unwrap_or_else(|| panic!("no runnable Relu trial"));
        s.run_case(&case).verdict
    };
    // The entry says the failure is an error at forward; it is a value out of tolerance.
    std::fs::write(
        &file,
        entry("failure = \"error\"\nmessage = \"forward failed\""),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    match relu(&file) {
        Verdict::Fail { message } => assert!(
            message.contains("expected: error containing \"forward failed\"")
                && message.contains("actual:   out-of-tolerance — output `"),
            "{message}"
        ),
        other => panic!("a failure of another kind must fail, got {other:?}"),
    }
    // The control: the entry that describes the failure as it is.
    std::fs::write(&file, entry("failure = \"out-of-tolerance\""))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(relu(&file), Verdict::ExpectedFail { .. }),
        "the matching entry accepts it"
    );
}

#[test]
fn a_zero_of_the_wrong_sign_is_caught_where_the_case_compares_signs() {
    let dir = scratch("zeros");
    let name = "flushzero/flushzero/op/Neg/special_values";
    let verdict = |fault| {
        let s = suite(
            Wrapped {
                name: "flushzero",
                takes: &["Neg"],
                fault,
            },
            None,
            &dir,
        );
        assert!(
            s.op_cases
                .iter()
                .any(|c| c.op == "Neg" && c.name == "special_values" && c.signed_zero),
            "op/Neg/special_values claims signed zeros"
        );
        s.run_case(&trial(&s, name)).verdict
    };
    match verdict(Fault::PositiveZeros) {
        Verdict::Fail { message } => assert!(
            message.contains("out of tolerance") && message.contains("expected -0e0"),
            "{message}"
        ),
        other => panic!("Neg(+0) returned as +0 must fail, got {other:?}"),
    }
    assert_eq!(verdict(Fault::None), Verdict::Pass, "the control");
}

#[test]
fn placement_honesty_fails_a_node_the_profile_does_not_attribute() {
    let dir = scratch("honesty");
    let outcome = |fault| {
        let s = suite(
            Wrapped {
                name: "mute",
                takes: &[],
                fault,
            },
            None,
            &dir,
        );
        let case = trial(&s, "mute/mute/fallback/placement_honesty");
        s.run_case(&case).verdict
    };
    match outcome(Fault::RecordsNothing) {
        Verdict::Fail { message } => {
            assert!(message.contains("profile has no entry"), "{message}")
        }
        other => panic!("an executor that records nothing must fail, got {other:?}"),
    }
    assert_eq!(outcome(Fault::None), Verdict::Pass, "the control");
}

#[test]
fn floors_derived_from_supports_are_the_trials_a_run_executes() {
    // The reference is available here, so its derived floors can be held against its
    // measured ones (cpu.trials, recorded by a run): the method the CUDA floors use.
    let reference = Suite::new(Arc::new(CpuExecutor::new()), SuiteConfig::from_env())
        .unwrap_or_else(|e| panic!("suite: {e}"));
    assert!(
        !reference.expectations.trials.is_empty(),
        "cpu.trials is recorded next to cpu.toml"
    );
    let node_data = reference
        .cases()
        .iter()
        .all(|c| !c.name.ends_with("/node/data-missing"));
    let derived = floors::derive(&reference);
    let measured: Vec<&String> = reference
        .expectations
        .trials
        .iter()
        .filter(|t| !t.contains("/prop/") && (node_data || !t.contains("/node/")))
        .collect();
    let derived: Vec<&String> = derived.trials.iter().collect();
    assert_eq!(derived, measured);
}
