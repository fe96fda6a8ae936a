//! An executor's expectations file: its expected failures and skips, each with a reason and
//! a matcher (expected failures also with what the failure must look like: a
//! [`FailureMatcher`]), and the floors on executed cases (a hand-set `min_executed`, and
//! the per-target floors and trial list that `cargo xtask conformance --record-floors`
//! records, see [`crate::floors`]). A backend author keeps it in their own crate
//! (`conformance/<executor>.toml` by default, see [`crate::config`]); Concord's own
//! executors keep theirs in this crate's expectations/. It holds the floor on executed cases
//! and, optionally, on node coverage. Strict: a malformed file is an error, an expected
//! failure that passes (fully or partially) fails its trial, and an entry that matches no
//! trial fails an unfiltered run.

use crate::error::SuiteError;
use crate::floors::{RawTargetFloor, TargetFloor};
use crate::outcome::Outcome;
use concord::Target;
use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One executor's expectations.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    pub path: Option<PathBuf>,
    /// The run fails when fewer trials than this executed (passed, partial or failed),
    /// unfiltered.
    pub min_executed: usize,
    /// When set, the run fails when, on any target, the nodes placed on the executor are a
    /// smaller fraction than this of all nodes of the golden, model and node trials that
    /// executed (unfiltered runs only).
    pub min_node_coverage: Option<f64>,
    /// When set: the executor may be unavailable on CI machines, and this says why (for
    /// example "CI runners have no GPU; the GPU runner sets CONCORD_REQUIRE=cuda").
    /// `CONCORD_REQUIRE` naming the executor still makes unavailability fail.
    pub unavailable_in_ci: Option<String>,
    pub expected_failures: Vec<Entry>,
    pub skips: Vec<Entry>,
    /// Per target, the executed trials per category and node coverage a recorded run
    /// reached ([`crate::floors`]).
    pub floors: Vec<TargetFloor>,
    /// The recorded trial list beside the file (`<executor>.trials`); empty without one.
    pub trials: Vec<String>,
}

/// Whether a file must hold a floor (every run but one that records them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FloorRequired {
    Yes,
    No,
}

/// One expected failure or skip.
#[derive(Clone, Debug)]
pub struct Entry {
    pub pattern: String,
    matcher: GlobMatcher,
    pub target: Option<String>,
    pub device: Option<String>,
    pub reason: String,
    /// For an expected failure: what the failure must look like. `None` for skips.
    pub failure: Option<FailureMatcher>,
}

/// What an expected failure must look like, as wgpu's `FailureCase` says it: its kind and
/// a substring of its message. A failure of another kind, or whose message lacks the
/// substring, is not the expected one and fails the run, showing both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureMatcher {
    pub kind: FailureKind,
    /// Must occur in the failure's message (case-sensitive); empty matches any message of
    /// the kind (allowed only for `out-of-tolerance`, whose message is the figures).
    pub message: String,
}

/// The kinds of failure a trial can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// Every output has the right dtype and shape, and some element is out of tolerance.
    OutOfTolerance,
    /// An output has the wrong dtype or shape (or is missing).
    Mismatch,
    /// No comparison failed: building, loading or running the net failed first.
    Error,
}

impl FailureKind {
    /// The kind of a failed outcome: a failed comparison decides it, else it is an error.
    pub fn of(outcome: &Outcome) -> Option<FailureKind> {
        let Outcome::Fail { comparisons, .. } = outcome else {
            return None;
        };
        let failed: Vec<_> = comparisons.iter().filter(|c| !c.passed()).collect();
        if failed.iter().any(|c| c.mismatch.is_some()) {
            Some(FailureKind::Mismatch)
        } else if failed.is_empty() {
            Some(FailureKind::Error)
        } else {
            Some(FailureKind::OutOfTolerance)
        }
    }

    /// "out-of-tolerance", "mismatch", "error": as the files spell it.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::OutOfTolerance => "out-of-tolerance",
            FailureKind::Mismatch => "mismatch",
            FailureKind::Error => "error",
        }
    }
}

impl FailureMatcher {
    /// Checks a matcher read from a file: an error or mismatch needs a message substring,
    /// since "any error" would accept a new regression of another kind.
    pub fn new(kind: FailureKind, message: String) -> Result<FailureMatcher, String> {
        if kind != FailureKind::OutOfTolerance && message.trim().is_empty() {
            return Err(format!(
                "failure = \"{}\" needs a `message`: a substring of the failure's message \
                 that says it fails for the stated reason",
                kind.name()
            ));
        }
        Ok(FailureMatcher { kind, message })
    }

    /// Whether `outcome` (a failure) is the expected one; if not, why not, showing the
    /// expected and the actual failure.
    pub fn check(&self, outcome: &Outcome) -> Result<(), String> {
        let Outcome::Fail { message, .. } = outcome else {
            return Ok(());
        };
        let kind = FailureKind::of(outcome).unwrap_or(FailureKind::Error);
        if kind == self.kind && message.contains(&self.message) {
            return Ok(());
        }
        Err(format!(
            "it fails, but not as expected.\n  expected: {}\n  actual:   {} — {message}",
            self.describe(),
            kind.name()
        ))
    }

    /// `error containing "float8e4m3fn"`.
    pub fn describe(&self) -> String {
        if self.message.is_empty() {
            self.kind.name().to_string()
        } else {
            format!("{} containing {:?}", self.kind.name(), self.message)
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Required, unless the harness gives the floor in code ([`crate::Conformance::min_executed`]).
    #[serde(default)]
    min_executed: Option<usize>,
    #[serde(default)]
    min_node_coverage: Option<f64>,
    #[serde(default)]
    unavailable_in_ci: Option<String>,
    #[serde(default)]
    expected_failure: Vec<RawEntry>,
    #[serde(default)]
    skip: Vec<RawEntry>,
    #[serde(default)]
    floors: std::collections::BTreeMap<String, RawTargetFloor>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    case: String,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    device: Option<String>,
    reason: String,
    /// Expected failures only: the failure's kind, and a substring of its message.
    #[serde(default)]
    failure: Option<FailureKind>,
    #[serde(default)]
    message: Option<String>,
}

impl Expectations {
    /// Loads `dir/<executor>.toml`, whose entries may name the executor's declared
    /// `targets`. A missing file means no expectations and no floor.
    pub fn load(
        dir: &Path,
        executor: &str,
        targets: &[Target],
    ) -> Result<Expectations, SuiteError> {
        let path = dir.join(format!("{executor}.toml"));
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, path, targets),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Expectations::default()),
            Err(e) => Err(SuiteError::Expectations {
                path,
                detail: e.to_string(),
            }),
        }
    }

    /// Parses an expectations file; any unknown key, empty reason, bad glob or target not
    /// in `targets` (the executor's declared ones) is an error naming the entry, and so is
    /// a missing `min_executed`.
    pub fn parse(
        text: &str,
        path: PathBuf,
        targets: &[Target],
    ) -> Result<Expectations, SuiteError> {
        Self::parse_with_floor(text, path, targets, None)
    }

    /// [`Expectations::parse`], with the floor possibly given in code instead (`floor`):
    /// then the file must not set `min_executed` too, since two floors that can disagree
    /// leave the reader guessing which one holds.
    pub fn parse_with_floor(
        text: &str,
        path: PathBuf,
        targets: &[Target],
        floor: Option<usize>,
    ) -> Result<Expectations, SuiteError> {
        Self::parse_inner(text, path, targets, floor, FloorRequired::Yes)
    }

    /// [`Expectations::parse_with_floor`] for a run that records the floors
    /// (`--record-floors`): a file without any floor yet is read, so that the first
    /// recording can write them.
    pub fn parse_for_recording(
        text: &str,
        path: PathBuf,
        targets: &[Target],
        floor: Option<usize>,
    ) -> Result<Expectations, SuiteError> {
        Self::parse_inner(text, path, targets, floor, FloorRequired::No)
    }

    fn parse_inner(
        text: &str,
        path: PathBuf,
        targets: &[Target],
        floor: Option<usize>,
        required: FloorRequired,
    ) -> Result<Expectations, SuiteError> {
        let fail = |detail: String| SuiteError::Expectations {
            path: path.clone(),
            detail,
        };
        let file: File = toml::from_str(text).map_err(|e| fail(e.to_string()))?;
        let min_executed = match (file.min_executed, floor) {
            (Some(n), None) | (None, Some(n)) => n,
            // Recorded floors hold the suite's size target by target.
            (None, None) if !file.floors.is_empty() || required == FloorRequired::No => 0,
            (None, None) => {
                return Err(fail(
                    "`min_executed` is missing and no floors are recorded: record them \
                     with `concord conform --record-floors` (in Concord, `cargo xtask \
                     conformance --record-floors`), or set the floor on executed cases (a \
                     little below the count of an unfiltered run), here or with \
                     Conformance::min_executed"
                        .into(),
                ))
            }
            (Some(here), Some(code)) => {
                return Err(fail(format!(
                    "the floor is set twice: `min_executed = {here}` here and \
                     Conformance::min_executed({code}) in the harness; keep one"
                )))
            }
        };
        if let Some(min) = file.min_node_coverage {
            if !(0.0..=1.0).contains(&min) {
                return Err(fail(format!(
                    "min_node_coverage = {min}: it is a fraction of nodes, from 0 to 1 (0.42 for 42%)"
                )));
            }
        }
        let convert = |raw: RawEntry, kind: &str| -> Result<Entry, SuiteError> {
            if raw.reason.trim().is_empty() {
                return Err(fail(format!("{kind} `{}` has no reason", raw.case)));
            }
            if let Some(t) = &raw.target {
                if !targets.iter().any(|known| known.name() == t) {
                    let known: Vec<&str> = targets.iter().map(Target::name).collect();
                    return Err(fail(format!(
                        "{kind} `{}`: unknown target `{t}` (the executor declares: {})",
                        raw.case,
                        known.join(", ")
                    )));
                }
            }
            let matcher = Glob::new(&raw.case)
                .map_err(|e| fail(format!("{kind} `{}`: bad pattern: {e}", raw.case)))?
                .compile_matcher();
            let failure = match (kind, raw.failure, raw.message) {
                ("skip", None, None) => None,
                ("skip", _, _) => {
                    return Err(fail(format!(
                        "skip `{}`: `failure` and `message` belong to expected failures",
                        raw.case
                    )))
                }
                (_, Some(k), message) => Some(
                    FailureMatcher::new(k, message.unwrap_or_default())
                        .map_err(|e| fail(format!("{kind} `{}`: {e}", raw.case)))?,
                ),
                (_, None, _) => {
                    return Err(fail(format!(
                        "{kind} `{}` does not say what the failure looks like: add \
                         `failure = \"out-of-tolerance\"`, or `failure = \"error\"` (or \
                         \"mismatch\") with `message = \"<a substring of the failure's \
                         message>\"` (see docs/backend-authors.md)",
                        raw.case
                    )))
                }
            };
            Ok(Entry {
                pattern: raw.case,
                matcher,
                target: raw.target,
                device: raw.device,
                reason: raw.reason,
                failure,
            })
        };
        let mut floors = Vec::new();
        for (target, raw) in file.floors {
            if !targets.iter().any(|known| known.name() == target) {
                let known: Vec<&str> = targets.iter().map(Target::name).collect();
                return Err(fail(format!(
                    "[floors.{target}]: unknown target (the executor declares: {})",
                    known.join(", ")
                )));
            }
            if let Some(c) = raw.node_coverage() {
                if !(0.0..=1.0).contains(&c) {
                    return Err(fail(format!(
                        "[floors.{target}]: node_coverage = {c} is not a fraction from 0 to 1"
                    )));
                }
            }
            floors.push(raw.named(&target));
        }
        let list_path = crate::floors::trial_list_path(&path);
        let trials = match std::fs::read_to_string(&list_path) {
            Ok(text) => crate::floors::parse_trial_list(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                return Err(SuiteError::Expectations {
                    path: list_path,
                    detail: e.to_string(),
                })
            }
        };
        Ok(Expectations {
            path: Some(path.clone()),
            min_executed,
            min_node_coverage: file.min_node_coverage,
            unavailable_in_ci: file.unavailable_in_ci,
            expected_failures: file
                .expected_failure
                .into_iter()
                .map(|r| convert(r, "expected_failure"))
                .collect::<Result<_, _>>()?,
            skips: file
                .skip
                .into_iter()
                .map(|r| convert(r, "skip"))
                .collect::<Result<_, _>>()?,
            floors,
            trials,
        })
    }

    /// The expected-failure entry matching a trial, if any.
    pub fn expected_failure(&self, trial: &str, target: &str, device: &str) -> Option<&Entry> {
        self.expected_failures
            .iter()
            .find(|e| e.matches(trial, target, device))
    }

    /// The skip entry matching a trial, if any.
    pub fn skip(&self, trial: &str, target: &str, device: &str) -> Option<&Entry> {
        self.skips.iter().find(|e| e.matches(trial, target, device))
    }

    /// Entries that match none of `trials` ((name, target, device) triples).
    pub fn stale<'a>(&'a self, trials: &[(String, String, String)]) -> Vec<&'a Entry> {
        self.expected_failures
            .iter()
            .chain(&self.skips)
            .filter(|e| !trials.iter().any(|(n, t, d)| e.matches(n, t, d)))
            .collect()
    }
}

impl Entry {
    pub fn matches(&self, trial: &str, target: &str, device: &str) -> bool {
        self.matcher.is_match(trial)
            && self.target.as_deref().map_or(true, |t| t == target)
            && self.device.as_deref().map_or(true, |d| device.contains(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The targets of the executor these files are for.
    fn targets() -> Vec<Target> {
        vec![Target::new("opencl"), Target::new("opencl-fp16")]
    }

    #[test]
    fn malformed_files_are_errors() {
        let p = PathBuf::from("x.toml");
        assert!(
            Expectations::parse("min_executed = 1\nbogus = 2\n", p.clone(), &targets()).is_err()
        );
        assert!(Expectations::parse(
            "min_executed = 1\n[[skip]]\ncase = \"a\"\nreason = \"\"\n",
            p.clone(),
            &targets()
        )
        .is_err());
        assert!(Expectations::parse(
            "min_executed = 1\n[[skip]]\ncase = \"a[\"\nreason = \"r\"\n",
            p.clone(),
            &targets()
        )
        .is_err());
        assert!(Expectations::parse(
            "min_executed = 1\n[[skip]]\ncase = \"a\"\ntarget = \"vulkan\"\nreason = \"r\"\n",
            p.clone(),
            &targets()
        )
        .is_err());
        assert!(
            Expectations::parse(
                "[[skip]]\ncase = \"a\"\nreason = \"r\"\n",
                p.clone(),
                &targets()
            )
            .is_err(),
            "min_executed is required"
        );
        for bad in ["1.5", "-0.1", "nan", "\"42%\""] {
            assert!(
                Expectations::parse(
                    &format!("min_executed = 1\nmin_node_coverage = {bad}\n"),
                    p.clone(),
                    &targets()
                )
                .is_err(),
                "min_node_coverage = {bad} was accepted"
            );
        }
        assert!(
            Expectations::parse(
                "min_executed = 1\nmin_node_coverage_typo = 0.4\n",
                p,
                &targets()
            )
            .is_err(),
            "a misspelt key is an error"
        );
    }

    #[test]
    fn min_node_coverage_is_optional_and_read() {
        let p = PathBuf::from("x.toml");
        let none =
            Expectations::parse("min_executed = 3\n", p.clone(), &targets()).expect("parses");
        assert_eq!(none.min_node_coverage, None);
        let some = Expectations::parse(
            "min_executed = 3\nmin_node_coverage = 0.42\n",
            p,
            &targets(),
        )
        .expect("parses");
        assert_eq!(some.min_node_coverage, Some(0.42));
    }

    #[test]
    fn entries_match_by_glob_target_and_device() {
        let text = "min_executed = 0\n[[expected_failure]]\ncase = \"x/*/op/Resize/*\"\ntarget = \"opencl-fp16\"\ndevice = \"pthread\"\nreason = \"r\"\nfailure = \"out-of-tolerance\"\n";
        let e = Expectations::parse(text, PathBuf::from("x.toml"), &targets()).expect("parses");
        assert!(e
            .expected_failure("x/opencl-fp16/op/Resize/a", "opencl-fp16", "pthread-cpu")
            .is_some());
        assert!(e
            .expected_failure("x/opencl/op/Resize/a", "opencl", "pthread-cpu")
            .is_none());
        assert!(e
            .expected_failure("x/opencl-fp16/op/Resize/a", "opencl-fp16", "nvidia")
            .is_none());
        let trials = vec![(
            "x/opencl/op/Conv/a".to_string(),
            "opencl".to_string(),
            "d".to_string(),
        )];
        assert_eq!(e.stale(&trials).len(), 1);
    }

    #[test]
    fn an_expected_failure_must_say_what_it_looks_like() {
        let p = PathBuf::from("x.toml");
        let entry = "min_executed = 0\n[[expected_failure]]\ncase = \"a\"\nreason = \"r\"\n";
        let err = Expectations::parse(entry, p.clone(), &targets()).expect_err("no matcher");
        assert!(err.to_string().contains("failure = "), "{err}");
        let no_message = format!("{entry}failure = \"error\"\n");
        assert!(Expectations::parse(&no_message, p.clone(), &targets()).is_err());
        let skip_with_matcher = "min_executed = 0\n[[skip]]\ncase = \"a\"\nreason = \"r\"\nfailure = \"error\"\nmessage = \"x\"\n";
        assert!(Expectations::parse(skip_with_matcher, p.clone(), &targets()).is_err());
        let good = format!("{entry}failure = \"error\"\nmessage = \"fp16\"\n");
        let e = Expectations::parse(&good, p, &targets()).expect("parses");
        assert_eq!(
            e.expected_failures[0].failure,
            Some(FailureMatcher {
                kind: FailureKind::Error,
                message: "fp16".into()
            })
        );
    }

    #[test]
    fn a_failure_of_another_kind_or_message_is_not_the_expected_one() {
        use crate::compare::Comparison;
        let error = Outcome::Fail {
            message: "building the net failed: cl_khr_fp16 is missing".into(),
            comparisons: Vec::new(),
        };
        let out_of_tolerance = Outcome::Fail {
            message: "output `y`: 1 of 4 elements out of tolerance".into(),
            comparisons: vec![Comparison {
                output: "y".into(),
                elements: 4,
                violations: 1,
                ..Comparison::default()
            }],
        };
        let mismatch = Outcome::Fail {
            message: "output `y`: shape [2] but expected [1, 2]".into(),
            comparisons: vec![Comparison {
                output: "y".into(),
                mismatch: Some("shape [2] but expected [1, 2]".into()),
                ..Comparison::default()
            }],
        };
        assert_eq!(FailureKind::of(&error), Some(FailureKind::Error));
        assert_eq!(
            FailureKind::of(&out_of_tolerance),
            Some(FailureKind::OutOfTolerance)
        );
        assert_eq!(FailureKind::of(&mismatch), Some(FailureKind::Mismatch));
        let fp16 = FailureMatcher::new(FailureKind::Error, "fp16".into()).expect("valid");
        assert!(fp16.check(&error).is_ok());
        let why = fp16.check(&out_of_tolerance).expect_err("another kind");
        assert!(
            why.contains("expected: error containing \"fp16\"")
                && why.contains("actual:   out-of-tolerance — output `y`"),
            "{why}"
        );
        let other = FailureMatcher::new(FailureKind::Error, "int4".into()).expect("valid");
        assert!(other.check(&error).is_err(), "another message");
        let values =
            FailureMatcher::new(FailureKind::OutOfTolerance, String::new()).expect("valid");
        assert!(values.check(&out_of_tolerance).is_ok());
        assert!(values.check(&mismatch).is_err());
    }
}
