//! The op × executor × target × device matrix both matrix reports draw: one row per op (or
//! model), one column per executor/target/device (one device per executor in a single run;
//! several when `concord report merge` joins runs from several machines), and in each cell
//! the verdict counts, the node coverage of partial trials, and — over the trials that passed
//! only — the largest errors and how close the worst element came to its allowance. A column
//! whose executor or target was unavailable carries its probe's reason.

use super::{Counts, NodeCount};
use crate::compare::Comparison;
use crate::outcome::{Record, Verdict};
use std::collections::BTreeMap;

/// The whole matrix, rows and columns in a stable order.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
}

/// One executor/target on one device.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Column {
    pub executor: String,
    pub target: String,
    /// "" when the executor was unavailable.
    pub device: String,
    /// Why the executor or target was not available here (its `unavailable/probe`
    /// trial's reason): the column holds nothing else.
    pub unavailable: Option<String>,
}

/// One op (or model, or scenario) across every column.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    /// One per column; `None` where the column has no trial for this row.
    pub cells: Vec<Option<Cell>>,
}

/// The trials of one op on one executor/target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    pub counts: Counts,
    /// Nodes on the executor and in all, over the cell's golden, model and node trials.
    pub coverage: NodeCount,
    /// The largest absolute error over the outputs of the trials that passed (fully or
    /// partially): a failure's error is in its message, not in the cell's figures.
    pub max_abs_error: Option<f64>,
    /// The largest relative error, over the same trials.
    pub max_rel_error: Option<f64>,
    /// The largest error-to-allowance ratio of any compared element of the same trials (1
    /// is the limit).
    pub worst_ratio: Option<f64>,
    /// A skip reason for the cell's tooltip: the least in sorted order, so that it does not
    /// depend on the order the records came in (a merged report shows what a whole run
    /// does).
    pub skip_reason: Option<String>,
}

/// A cell's overall status: the worst of its trials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Skip,
    /// Nothing passed or failed: every trial that ran is an expected failure whose reason
    /// says Concord lacks the feature ([`super::UNSUPPORTED_CATEGORIES`]: a dtype, an
    /// opset, …), not that its result is wrong.
    Unsupported,
    Pass,
    /// Passed, but some trial ran partly on the reference.
    Partial,
    ExpectedFail,
    Fail,
}

/// Where a row sorts: single ops first, then whole models, then scenarios, then probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RowGroup {
    Op,
    Model,
    Scenario,
    Probe,
}

impl Status {
    /// "pass", "partial", "expected-fail", "unsupported", "skip", "fail".
    pub fn label(self) -> &'static str {
        match self {
            Status::Unsupported => "unsupported",
            Status::Pass => "pass",
            Status::Partial => "partial",
            Status::ExpectedFail => "expected-fail",
            Status::Skip => "skip",
            Status::Fail => "fail",
        }
    }
}

impl Cell {
    /// Fail if any trial fails the run, else expected-fail if any failed as expected for a
    /// reason other than an unsupported feature, else partial if any passed only partly on
    /// the executor, else pass if any passed, else unsupported if any trial was an
    /// unsupported expected failure; a cell of skips only is a skip. Unsupported trials
    /// never colour a cell that has passes: the passes are what the executor does.
    pub fn status(&self) -> Status {
        let c = &self.counts;
        if c.failed() > 0 {
            Status::Fail
        } else if c.expected_fail > c.unsupported {
            Status::ExpectedFail
        } else if c.partial > 0 {
            Status::Partial
        } else if c.pass > 0 {
            Status::Pass
        } else if c.unsupported > 0 {
            Status::Unsupported
        } else {
            Status::Skip
        }
    }

    fn add(&mut self, record: &Record) {
        self.counts.add(&record.verdict);
        self.coverage.add(record);
        if let Verdict::Skip { reason } = &record.verdict {
            if self.skip_reason.as_ref().map_or(true, |r| reason < r) {
                self.skip_reason = Some(reason.clone());
            }
        }
        if !matches!(record.verdict, Verdict::Pass | Verdict::Partial { .. }) {
            return;
        }
        self.max_abs_error = max_option(self.max_abs_error, record.max_abs_error());
        self.max_rel_error = max_option(self.max_rel_error, record.max_rel_error());
        for c in &record.comparisons {
            self.worst_ratio = max_option(self.worst_ratio, Some(worst_ratio(c)));
        }
    }
}

impl Matrix {
    /// Groups `records` by row label and executor/target/device.
    pub fn from_records(records: &[Record]) -> Matrix {
        let mut columns: Vec<Column> = records
            .iter()
            .map(|r| Column {
                executor: r.executor.clone(),
                target: r.target.clone(),
                device: r.device.clone(),
                unavailable: None,
            })
            .collect();
        // The reference first: every other column is read against it.
        columns.sort_by(|a, b| (a.executor != "cpu", a).cmp(&(b.executor != "cpu", b)));
        columns.dedup();
        for r in records.iter().filter(|r| r.category == "unavailable") {
            let reason = match &r.verdict {
                Verdict::Skip { reason } => reason.clone(),
                v => v.message().unwrap_or_default(),
            };
            if let Some(column) = columns
                .iter_mut()
                .find(|c| c.executor == r.executor && c.target == r.target && c.device == r.device)
            {
                column.unavailable = Some(reason);
            }
        }
        let mut rows: BTreeMap<(RowGroup, String), Vec<Option<Cell>>> = BTreeMap::new();
        for r in records {
            let Some(column) = columns.iter().position(|c| {
                c.executor == r.executor && c.target == r.target && c.device == r.device
            }) else {
                continue;
            };
            let cells = rows
                .entry(row_key(r))
                .or_insert_with(|| vec![None; columns.len()]);
            if let Some(slot) = cells.get_mut(column) {
                slot.get_or_insert_with(Cell::default).add(r);
            }
        }
        Matrix {
            columns,
            rows: rows
                .into_iter()
                .map(|((_, label), cells)| Row { label, cells })
                .collect(),
        }
    }
}

/// The row a record belongs to and how it sorts.
fn row_key(r: &Record) -> (RowGroup, String) {
    match r.category.as_str() {
        // A case of several ops (an ONNX function test expanded into its body, a golden
        // chain) names them all; one row per such set would bury the single-op rows, so
        // they share a row per category and are told apart in the failure list.
        "op" | "prop" | "golden" | "node" if r.subject.contains('+') => {
            (RowGroup::Op, format!("several ops ({})", r.category))
        }
        "op" | "prop" | "golden" | "node" => (RowGroup::Op, r.subject.clone()),
        "model" => (RowGroup::Model, format!("model: {}", r.subject)),
        "unavailable" => (RowGroup::Probe, "executor probe".to_string()),
        other if r.subject.is_empty() => (RowGroup::Scenario, other.to_string()),
        other => (RowGroup::Scenario, format!("{other}: {}", r.subject)),
    }
}

impl Column {
    /// "opencl/opencl on pthread-cpu", or "cuda/cuda" when no device was found.
    pub fn title(&self) -> String {
        if self.device.is_empty() {
            format!("{}/{}", self.executor, self.target)
        } else {
            format!("{}/{} on {}", self.executor, self.target, self.device)
        }
    }
}

/// How far the worst element of `c` went into (or past) its allowance.
pub fn worst_ratio(c: &Comparison) -> f64 {
    if c.mismatch.is_some() {
        return f64::INFINITY;
    }
    let (Some(actual), Some(expected), Some(allowed)) =
        (c.worst_actual, c.worst_expected, c.worst_allowed)
    else {
        return 0.0;
    };
    let error = (actual - expected).abs();
    if actual == expected || (actual.is_nan() && expected.is_nan()) {
        0.0
    } else if !error.is_finite() {
        // A NaN where a number was expected, or an infinity of the wrong sign.
        f64::INFINITY
    } else if allowed > 0.0 {
        error / allowed
    } else {
        f64::INFINITY
    }
}

fn max_option(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y > x || x.is_nan() { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}
