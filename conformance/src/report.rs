//! Reports written from the run's records: conformance.json (records, summary counts per
//! executor × target × verdict, every fallback notice), junit.xml, and the op × executor ×
//! target matrix as matrix.md and a self-contained matrix.html with an SVG heat map.
//!
//! Every report is a pure function of `&[Record]` (plus the run-level failures), so records
//! from several executors combine into one report and the reports can be snapshot-tested
//! from synthetic records.

mod html;
mod junit;
mod markdown;
mod matrix;

pub use html::matrix_html;
pub use junit::junit_xml;
pub use markdown::matrix_markdown;
pub use matrix::{Cell, Column, Matrix, Row, Status};

use crate::outcome::{Record, Verdict};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The version tag of conformance.json's layout; bump it when a field changes meaning.
pub const JSON_FORMAT: &str = "concord-conformance-report/1";

/// The file names [`write_run`] writes, in the order it writes them.
pub const REPORT_FILES: [&str; 4] = ["conformance.json", "junit.xml", "matrix.md", "matrix.html"];

/// How many trials of a group ended in each verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub pass: usize,
    pub expected_fail: usize,
    pub unexpected_pass: usize,
    pub fail: usize,
    pub skip: usize,
}

/// The counts of one executor × target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupCounts {
    pub executor: String,
    pub target: String,
    /// The device the trials ran on ("" when the executor was unavailable).
    pub device: String,
    #[serde(flatten)]
    pub counts: Counts,
    /// Trials that ran (everything but skips); the floor in the expectations counts these.
    pub executed: usize,
}

/// One distinct fallback notice and where it was raised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NoticeEntry {
    pub notice: String,
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
    pub failures: Vec<FailureEntry>,
    pub skips: Vec<SkipEntry>,
    /// Every fallback notice of the run, deduplicated.
    pub notices: Vec<NoticeEntry>,
}

/// conformance.json as a whole.
#[derive(Debug, Serialize)]
struct JsonReport<'a> {
    format: &'static str,
    summary: &'a Summary,
    records: &'a [Record],
}

impl Counts {
    /// Adds one trial's verdict.
    pub fn add(&mut self, verdict: &Verdict) {
        match verdict {
            Verdict::Pass => self.pass += 1,
            Verdict::ExpectedFail { .. } => self.expected_fail += 1,
            Verdict::UnexpectedPass { .. } => self.unexpected_pass += 1,
            Verdict::Fail { .. } => self.fail += 1,
            Verdict::Skip { .. } => self.skip += 1,
        }
    }

    /// Trials that ran.
    pub fn executed(&self) -> usize {
        self.pass + self.expected_fail + self.unexpected_pass + self.fail
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

impl Summary {
    /// Whether the run passed: no failing trial and no run-level failure.
    pub fn passed(&self) -> bool {
        self.failed == 0 && self.run_failures.is_empty()
    }
}

/// Summarises `records`; `run_failures` are carried through unchanged.
pub fn summarize(records: &[Record], run_failures: &[String]) -> Summary {
    let mut groups: BTreeMap<(String, String), (String, Counts)> = BTreeMap::new();
    let mut skips: BTreeMap<&str, usize> = BTreeMap::new();
    let mut notices: BTreeMap<&str, (usize, BTreeSet<String>, &str)> = BTreeMap::new();
    let mut failures = Vec::new();
    for r in records {
        let group = groups
            .entry((r.executor.clone(), r.target.clone()))
            .or_insert_with(|| (r.device.clone(), Counts::default()));
        // An unavailable executor's probe trial has no device; a later trial may name it.
        if group.0.is_empty() {
            group.0 = r.device.clone();
        }
        group.1.add(&r.verdict);
        match &r.verdict {
            Verdict::Skip { reason } => *skips.entry(reason.as_str()).or_default() += 1,
            v if v.fails_run() => failures.push(FailureEntry {
                trial: r.name.clone(),
                verdict: v.label(),
                message: v.message().unwrap_or_default(),
            }),
            _ => {}
        }
        // A trial that builds several nets may raise the same notice more than once; it
        // counts once per trial.
        let distinct: BTreeSet<&str> = r.notices.iter().map(String::as_str).collect();
        for notice in distinct {
            let entry = notices
                .entry(notice)
                .or_insert_with(|| (0, BTreeSet::new(), r.name.as_str()));
            entry.0 += 1;
            entry.1.insert(format!("{}/{}", r.executor, r.target));
            if r.name.as_str() < entry.2 {
                entry.2 = r.name.as_str();
            }
        }
    }
    failures.sort_by(|a, b| a.trial.cmp(&b.trial));
    let by_executor_target: Vec<GroupCounts> = groups
        .into_iter()
        .map(|((executor, target), (device, counts))| GroupCounts {
            executor,
            target,
            device,
            executed: counts.executed(),
            counts,
        })
        .collect();
    let mut skips: Vec<SkipEntry> = skips
        .into_iter()
        .map(|(reason, trials)| SkipEntry {
            reason: reason.to_string(),
            trials,
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
        failures,
        skips,
        notices: notices
            .into_iter()
            .map(|(notice, (trials, under, first))| NoticeEntry {
                notice: notice.to_string(),
                trials,
                raised_under: under.into_iter().collect(),
                first_trial: first.to_string(),
            })
            .collect(),
    }
}

/// conformance.json: the format tag, the summary and every record.
pub fn json(records: &[Record], summary: &Summary) -> Result<String, String> {
    serde_json::to_string_pretty(&JsonReport {
        format: JSON_FORMAT,
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
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let summary = summarize(records, run_failures);
    let matrix = Matrix::from_records(records);
    let contents = [
        json(records, &summary)?,
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
