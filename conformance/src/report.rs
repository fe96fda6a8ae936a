//! Reports written from the run's records: conformance.json (records, summary counts per
//! executor × target × device × verdict, node coverage, every fallback notice), junit.xml,
//! and the op × executor × target × device matrix as matrix.md and a self-contained
//! matrix.html with an SVG heat map.
//!
//! Every report is a pure function of `&[Record]` (plus the run-level failures), so records
//! from several executors — or, through [`merge`], from several runs, machines and devices
//! — combine into one report, and the reports can be snapshot-tested from synthetic
//! records. conformance.json holds everything the other reports are drawn from, so it is
//! the one file `concord report merge` reads back.

mod causes;
mod html;
pub(crate) mod json_float;
mod junit;
mod markdown;
mod matrix;
pub mod merge;

pub use causes::{is_unsupported_reason, SkipCause, UNSUPPORTED_CATEGORIES};
pub use html::matrix_html;
pub use junit::junit_xml;
pub use markdown::{matrix_markdown, totals_sentence};
pub use matrix::{Cell, Column, Matrix, Row, Status};

use crate::outcome::{Record, Verdict};
use crate::shard::Shard;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The version tag of conformance.json's layout; bump it when a field changes meaning.
/// 2: the `partial` verdict and count, node coverage, `run` (devices, shard, floors left
/// to the merge), lossless non-finite floats.
pub const JSON_FORMAT: &str = "concord-conformance-report/2";

/// The categories whose trials run a net partly on the reference when the executor
/// declines some of its nodes, and so count towards node coverage.
pub const COVERAGE_CATEGORIES: [&str; 3] = ["golden", "model", "node"];

/// The file names [`write_run`] writes, in the order it writes them.
pub const REPORT_FILES: [&str; 4] = ["conformance.json", "junit.xml", "matrix.md", "matrix.html"];

/// How many trials of a group ended in each verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Passed with every node on the executor under test.
    pub pass: usize,
    /// Passed with some nodes on the reference: executed, never a pass.
    pub partial: usize,
    pub expected_fail: usize,
    /// Of the expected failures (counted in `expected_fail` too), those whose reason says
    /// Concord lacks the feature ([`UNSUPPORTED_CATEGORIES`]: a dtype, an opset, …):
    /// absent, not wrong.
    pub unsupported: usize,
    pub unexpected_pass: usize,
    pub fail: usize,
    pub skip: usize,
}

/// The counts of one executor × target × device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupCounts {
    pub executor: String,
    pub target: String,
    /// The device the trials ran on ("" when the executor was unavailable).
    pub device: String,
    #[serde(flatten)]
    pub counts: Counts,
    /// Trials that ran (everything but skips, partial trials included); the floor in the
    /// expectations counts these.
    pub executed: usize,
    #[serde(flatten)]
    pub coverage: NodeCount,
    /// `nodes_on_executor / nodes`; `None` when no golden, model or node trial executed.
    pub node_coverage: Option<f64>,
}

/// Nodes placed on the executor under test and nodes in all, summed over the golden, model
/// and node trials that executed (whatever their verdict).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeCount {
    pub nodes_on_executor: usize,
    pub nodes: usize,
}

/// One op an executor declined in trials that ran partly on the reference, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeclinedEntry {
    /// `<executor>/<target>`.
    pub under: String,
    pub op: String,
    pub reason: String,
    /// Nodes of this op declined for this reason, over all trials.
    pub nodes: usize,
    /// Trials with at least one such node.
    pub trials: usize,
}

/// What a run knew besides its records: what the probes found, which shard it was, and the
/// floors it left for `concord report merge` to check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The shard this run was (`concord conform --shard K/N`), if it was one.
    #[serde(default)]
    pub shard: Option<Shard>,
    /// Each executor's probe: the device its trials name, or why there was none.
    #[serde(default)]
    pub devices: Vec<DeviceEntry>,
    /// Floors a shard cannot check alone (they count every shard's trials): checked by
    /// `concord report merge` over the merged records.
    #[serde(default)]
    pub deferred_floors: Vec<Floor>,
    /// For a merged report: the reports it was merged from, in the order given.
    #[serde(default)]
    pub merged_from: Vec<String>,
}

/// What one executor's probe found on the machine that ran it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DeviceEntry {
    pub executor: String,
    /// The first device's name, as the records carry it ("" when unavailable).
    pub device: String,
    pub vendor: String,
    pub driver_version: String,
    /// Why the probe found no device, when it found none.
    pub unavailable: Option<String>,
}

/// The run-level floors of one executor on one device, from its expectations file: the
/// number of executed trials and the node coverage below which the run fails.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub executor: String,
    pub device: String,
    /// An executor that is not available executes nothing and is held to no floor; its
    /// `unavailable` trial says so (and fails where CI or `CONCORD_REQUIRE` demands it).
    pub available: bool,
    pub min_executed: usize,
    pub min_node_coverage: Option<f64>,
    /// The expectations file the floors come from, for the message.
    pub expectations: String,
    /// The per-target floors recorded by `cargo xtask conformance --record-floors`.
    #[serde(default)]
    pub recorded: Vec<crate::floors::TargetFloor>,
    /// The recorded trial list those floors hold by name.
    #[serde(default)]
    pub trials: Vec<String>,
}

/// One distinct fallback notice and where it was raised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NoticeEntry {
    pub notice: String,
    /// Raised on purpose by a fallback/ self-test trial that asks for what the executor
    /// lacks ([`crate::fallback::DELIBERATE_NOTICES`]), not a real fallback. The same
    /// text raised by other trials is a separate, non-deliberate entry.
    pub deliberate: bool,
    /// How many trials raised it.
    pub trials: usize,
    /// `<executor>/<target>` of every trial that raised it.
    pub raised_under: Vec<String>,
    /// The first trial (by name) that raised it, to reproduce it with a filter.
    pub first_trial: String,
}

/// One distinct skip reason and how many trials it covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkipEntry {
    pub reason: String,
    pub trials: usize,
    /// The class of the reason (of the first trial that gave it, by name).
    pub cause: SkipCause,
    /// `<executor>/<target>` of every trial skipped for it.
    pub under: Vec<String>,
}

/// How many trials of one executor (all its targets) were skipped for one cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkipCauseCount {
    pub executor: String,
    pub cause: SkipCause,
    pub trials: usize,
}

/// An executor or target that is not available here, from its `unavailable/probe` trial.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnavailableEntry {
    /// `<executor>/<target>`.
    pub under: String,
    /// The probe's one-line reason (with why it fails the run, where it does).
    pub reason: String,
    /// Whether CI or `CONCORD_REQUIRE` demands it, so that its absence fails the run.
    pub fails_run: bool,
}

/// One failing trial (a failure or an expected failure that passed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailureEntry {
    pub trial: String,
    pub verdict: &'static str,
    pub message: String,
}

/// What the whole run came to: the part of conformance.json a CI job reads.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub trials: usize,
    pub executed: usize,
    /// Trials that fail the run (failures and unexpected passes).
    pub failed: usize,
    /// Run-level failures (too few executed, stale expectations, a suite that could not
    /// start); any of them fails the run as a failing trial does.
    pub run_failures: Vec<String>,
    pub by_executor_target: Vec<GroupCounts>,
    /// Every executor/target whose probe found it unavailable, in name order.
    pub unavailable: Vec<UnavailableEntry>,
    pub failures: Vec<FailureEntry>,
    /// Skips by reason, most trials first.
    pub skips: Vec<SkipEntry>,
    /// Skips by executor and cause, executors in name order and causes in
    /// [`SkipCause::ALL`]'s; a cause no trial of the executor had is left out.
    pub skip_causes: Vec<SkipCauseCount>,
    /// The ops executors declined in trials that ran partly on the reference, most
    /// trials first: what each executor would have to learn to run them whole.
    pub declined: Vec<DeclinedEntry>,
    /// Every fallback notice of the run, deduplicated.
    pub notices: Vec<NoticeEntry>,
}

/// conformance.json as a whole.
#[derive(Debug, Serialize)]
struct JsonReport<'a> {
    format: &'static str,
    run: &'a RunInfo,
    summary: &'a Summary,
    records: &'a [Record],
}

impl Counts {
    /// Adds one trial's verdict.
    pub fn add(&mut self, verdict: &Verdict) {
        match verdict {
            Verdict::Pass => self.pass += 1,
            Verdict::Partial { .. } => self.partial += 1,
            Verdict::ExpectedFail { reason } => {
                self.expected_fail += 1;
                if is_unsupported_reason(reason) {
                    self.unsupported += 1;
                }
            }
            Verdict::UnexpectedPass { .. } => self.unexpected_pass += 1,
            Verdict::Fail { .. } => self.fail += 1,
            Verdict::Skip { .. } => self.skip += 1,
        }
    }

    /// Trials that ran, partial ones included.
    pub fn executed(&self) -> usize {
        self.pass + self.partial + self.expected_fail + self.unexpected_pass + self.fail
    }

    /// Adds another group's counts.
    pub fn add_counts(&mut self, other: &Counts) {
        self.pass += other.pass;
        self.partial += other.partial;
        self.expected_fail += other.expected_fail;
        self.unsupported += other.unsupported;
        self.unexpected_pass += other.unexpected_pass;
        self.fail += other.fail;
        self.skip += other.skip;
    }

    /// Trials that fail the run.
    pub fn failed(&self) -> usize {
        self.fail + self.unexpected_pass
    }

    /// Every trial counted.
    pub fn total(&self) -> usize {
        self.executed() + self.skip
    }
}

impl NodeCount {
    /// Adds the coverage of one record, if it is a golden, model or node trial that
    /// executed and built its net.
    pub fn add(&mut self, record: &Record) {
        if let Some(c) = coverage_of(record) {
            self.nodes_on_executor += c.on_executor;
            self.nodes += c.nodes;
        }
    }

    /// Nodes on the executor / all nodes; `None` when no node was counted.
    pub fn fraction(&self) -> Option<f64> {
        (self.nodes > 0).then(|| self.nodes_on_executor as f64 / self.nodes as f64)
    }

    /// "83.3% (1234 of 1481 nodes)", or "-" when no node was counted.
    pub fn describe(&self) -> String {
        match self.fraction() {
            Some(f) => format!(
                "{:.1}% ({} of {} nodes)",
                f * 100.0,
                self.nodes_on_executor,
                self.nodes
            ),
            None => "-".to_string(),
        }
    }
}

/// The node coverage a record counts towards, if it counts towards any.
pub fn coverage_of(record: &Record) -> Option<&crate::outcome::NodeCoverage> {
    if !record.verdict.executed() || !COVERAGE_CATEGORIES.contains(&record.category.as_str()) {
        return None;
    }
    record.coverage.as_ref()
}

impl Floor {
    /// The run-level failures these floors find in `records` (those of other executors
    /// and devices are ignored): too few executed trials, or, per target, a node coverage
    /// below the minimum.
    pub fn check(&self, records: &[Record]) -> Vec<String> {
        let mut failures = Vec::new();
        if !self.available {
            return failures;
        }
        let own = || {
            records
                .iter()
                .filter(|r| r.executor == self.executor && r.device == self.device)
        };
        let executed = own().filter(|r| r.verdict.executed()).count();
        if executed < self.min_executed {
            failures.push(format!(
                "{}: only {executed} cases executed, below the floor of {} in {}: the suite shrank (fix the cause, or lower the floor in the same change with a reason)",
                self.executor, self.min_executed, self.expectations
            ));
        }
        let (recorded, notes) = crate::floors::check(
            &self.executor,
            &self.device,
            &self.recorded,
            &self.trials,
            records,
            &self.expectations,
        );
        failures.extend(recorded);
        // Said, not failed: new trials, floors recorded on another device.
        for note in notes {
            eprintln!("note: {note}");
        }
        if let Some(min) = self.min_node_coverage {
            let mut per_target: BTreeMap<&str, NodeCount> = BTreeMap::new();
            for r in own() {
                per_target.entry(r.target.as_str()).or_default().add(r);
            }
            for (target, count) in per_target {
                if count.fraction().is_some_and(|f| f < min) {
                    failures.push(format!(
                        "{}/{target}: node coverage {} on golden, model and node trials is below min_node_coverage = {min} in {}: the executor runs less of the models than it did (fix the cause, or lower the floor in the same change with a reason)",
                        self.executor,
                        count.describe(),
                        self.expectations
                    ));
                }
            }
        }
        failures
    }
}

impl Summary {
    /// Whether the run passed: no failing trial and no run-level failure.
    pub fn passed(&self) -> bool {
        self.failed == 0 && self.run_failures.is_empty()
    }
}

/// Summarises `records`; `run_failures` are carried through unchanged.
pub fn summarize(records: &[Record], run_failures: &[String]) -> Summary {
    type GroupKey = (String, String, String);
    let mut groups: BTreeMap<GroupKey, (Counts, NodeCount)> = BTreeMap::new();
    let mut skips: BTreeMap<&str, (usize, BTreeSet<String>, &str, SkipCause)> = BTreeMap::new();
    let mut skip_causes: BTreeMap<(&str, SkipCause), usize> = BTreeMap::new();
    let mut notices: BTreeMap<(bool, &str), (usize, BTreeSet<String>, &str)> = BTreeMap::new();
    let mut declined: BTreeMap<(String, &str, &str), (usize, usize)> = BTreeMap::new();
    let mut unavailable = Vec::new();
    let mut failures = Vec::new();
    for r in records {
        let group = groups
            .entry((r.executor.clone(), r.target.clone(), r.device.clone()))
            .or_default();
        group.0.add(&r.verdict);
        group.1.add(r);
        let under = format!("{}/{}", r.executor, r.target);
        if let Some(coverage) = coverage_of(r) {
            let mut in_trial = BTreeSet::new();
            for d in &coverage.declined {
                let entry = declined
                    .entry((under.clone(), d.op.as_str(), d.reason.as_str()))
                    .or_default();
                entry.0 += 1;
                if in_trial.insert((d.op.as_str(), d.reason.as_str())) {
                    entry.1 += 1;
                }
            }
        }
        if r.category == "unavailable" {
            let (reason, fails_run) = match &r.verdict {
                Verdict::Skip { reason } => (reason.clone(), false),
                v => (v.message().unwrap_or_default(), v.fails_run()),
            };
            unavailable.push(UnavailableEntry {
                under: under.clone(),
                reason,
                fails_run,
            });
        }
        match &r.verdict {
            Verdict::Skip { reason } => {
                let cause = SkipCause::of(&r.category, reason);
                *skip_causes.entry((r.executor.as_str(), cause)).or_default() += 1;
                let entry = skips
                    .entry(reason.as_str())
                    .or_insert_with(|| (0, BTreeSet::new(), r.name.as_str(), cause));
                entry.0 += 1;
                entry.1.insert(under.clone());
                // The cause of the first trial by name, so that it does not depend on
                // the order the records came in.
                if r.name.as_str() < entry.2 {
                    entry.2 = r.name.as_str();
                    entry.3 = cause;
                }
            }
            v if v.fails_run() => failures.push(FailureEntry {
                trial: r.name.clone(),
                verdict: v.label(),
                message: v.message().unwrap_or_default(),
            }),
            _ => {}
        }
        // A trial that builds several nets may raise the same notice more than once; it
        // counts once per trial.
        let deliberate = crate::fallback::raises_deliberate_notices(r);
        let distinct: BTreeSet<&str> = r.notices.iter().map(String::as_str).collect();
        for notice in distinct {
            let entry = notices
                .entry((deliberate, notice))
                .or_insert_with(|| (0, BTreeSet::new(), r.name.as_str()));
            entry.0 += 1;
            entry.1.insert(under.clone());
            if r.name.as_str() < entry.2 {
                entry.2 = r.name.as_str();
            }
        }
    }
    failures.sort_by(|a, b| a.trial.cmp(&b.trial));
    unavailable.sort_by(|a, b| a.under.cmp(&b.under));
    let by_executor_target: Vec<GroupCounts> = groups
        .into_iter()
        .map(
            |((executor, target, device), (counts, coverage))| GroupCounts {
                executor,
                target,
                device,
                executed: counts.executed(),
                counts,
                node_coverage: coverage.fraction(),
                coverage,
            },
        )
        .collect();
    let mut declined: Vec<DeclinedEntry> = declined
        .into_iter()
        .map(|((under, op, reason), (nodes, trials))| DeclinedEntry {
            under,
            op: op.to_string(),
            reason: reason.to_string(),
            nodes,
            trials,
        })
        .collect();
    // The op that keeps the most trials partial first: the one most worth a kernel.
    declined.sort_by(|a, b| {
        b.trials
            .cmp(&a.trials)
            .then_with(|| (&a.under, &a.op, &a.reason).cmp(&(&b.under, &b.op, &b.reason)))
    });
    let mut skips: Vec<SkipEntry> = skips
        .into_iter()
        .map(|(reason, (trials, under, _, cause))| SkipEntry {
            reason: reason.to_string(),
            trials,
            cause,
            under: under.into_iter().collect(),
        })
        .collect();
    // Most common reason first, so the reason that hides the most trials is read first.
    skips.sort_by(|a, b| {
        b.trials
            .cmp(&a.trials)
            .then_with(|| a.reason.cmp(&b.reason))
    });
    Summary {
        trials: records.len(),
        executed: records.iter().filter(|r| r.verdict.executed()).count(),
        failed: records.iter().filter(|r| r.verdict.fails_run()).count(),
        run_failures: run_failures.to_vec(),
        by_executor_target,
        unavailable,
        failures,
        skips,
        skip_causes: skip_causes
            .into_iter()
            .map(|((executor, cause), trials)| SkipCauseCount {
                executor: executor.to_string(),
                cause,
                trials,
            })
            .collect(),
        declined,
        // Real notices first, then the deliberate ones; each part in text order.
        notices: notices
            .into_iter()
            .map(
                |((deliberate, notice), (trials, under, first))| NoticeEntry {
                    notice: notice.to_string(),
                    deliberate,
                    trials,
                    raised_under: under.into_iter().collect(),
                    first_trial: first.to_string(),
                },
            )
            .collect(),
    }
}

/// conformance.json: the format tag, what the run knew, the summary and every record.
pub fn json(records: &[Record], summary: &Summary, run: &RunInfo) -> Result<String, String> {
    serde_json::to_string_pretty(&JsonReport {
        format: JSON_FORMAT,
        run,
        summary,
        records,
    })
    .map_err(|e| format!("serialising conformance.json: {e}"))
}

/// Writes every report into `dir` (no run-level failures known).
pub fn write_all(dir: &Path, records: &[Record]) -> Result<(), String> {
    write_run(dir, records, &[])
}

/// Writes every report into `dir`, with the run-level failures listed in each.
pub fn write_run(dir: &Path, records: &[Record], run_failures: &[String]) -> Result<(), String> {
    write_report(dir, records, run_failures, &RunInfo::default())
}

/// Writes every report into `dir`, with the run-level failures listed in each and what
/// the run knew (devices, shard, deferred floors) in conformance.json.
pub fn write_report(
    dir: &Path,
    records: &[Record],
    run_failures: &[String],
    run: &RunInfo,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let summary = summarize(records, run_failures);
    let matrix = Matrix::from_records(records);
    let contents = [
        json(records, &summary, run)?,
        junit_xml(records, run_failures)?,
        matrix_markdown(&matrix, &summary),
        matrix_html(&matrix, &summary),
    ];
    for (name, text) in REPORT_FILES.iter().zip(contents) {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

/// A float for humans: three significant digits in scientific notation, "inf" and "-" for
/// the cases scientific notation cannot show.
pub(crate) fn sci(x: Option<f64>) -> String {
    match x {
        None => "-".to_string(),
        Some(v) if v.is_nan() => "NaN".to_string(),
        Some(v) if v.is_infinite() => "inf".to_string(),
        Some(v) => format!("{v:.2e}"),
    }
}
