//! What one trial found ([`Outcome`]), what the run makes of it after the expectations
//! ([`Verdict`]), where its nodes ran ([`NodeCoverage`]), and the [`Record`] every report is
//! written from (and `concord report merge` reads back).

use crate::compare::Comparison;
use serde::{Deserialize, Serialize};

/// What running one case found, before expectations are applied.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// Every output within tolerance.
    Pass { comparisons: Vec<Comparison> },
    /// Something was wrong; `message` says what.
    Fail {
        message: String,
        comparisons: Vec<Comparison>,
    },
    /// The executor declined the case (the planner placed it elsewhere): not executed.
    Unsupported { reason: String },
}

/// The run's judgement of one trial.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    /// Every output within tolerance, with every node on the executor under test.
    Pass,
    /// Every output within tolerance, but only `on_executor` of the net's `nodes` ran on
    /// the executor under test; the planner placed the rest on the reference (golden,
    /// model and node trials only). Executed, never counted as a pass.
    Partial {
        on_executor: usize,
        nodes: usize,
    },
    Fail {
        message: String,
    },
    /// Failed, and the expectations file said it would.
    ExpectedFail {
        reason: String,
    },
    /// The expectations file said it would fail, and it passed: fails the run.
    UnexpectedPass {
        reason: String,
    },
    /// Not executed: an expectations skip, an unsupported case, an unavailable executor.
    Skip {
        reason: String,
    },
}

impl Verdict {
    /// Whether the run fails because of this trial.
    pub fn fails_run(&self) -> bool {
        matches!(self, Verdict::Fail { .. } | Verdict::UnexpectedPass { .. })
    }

    /// Whether the case was executed (counts towards the floor).
    pub fn executed(&self) -> bool {
        !matches!(self, Verdict::Skip { .. })
    }

    /// "pass", "partial", "fail", "expected-fail", "unexpected-pass", "skip".
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Partial { .. } => "partial",
            Verdict::Fail { .. } => "fail",
            Verdict::ExpectedFail { .. } => "expected-fail",
            Verdict::UnexpectedPass { .. } => "unexpected-pass",
            Verdict::Skip { .. } => "skip",
        }
    }

    /// The message a failing libtest trial shows.
    pub fn message(&self) -> Option<String> {
        match self {
            Verdict::Fail { message } => Some(message.clone()),
            Verdict::UnexpectedPass { reason } => Some(format!(
                "expected to fail because {reason}, but passed: remove the entry from the expectations file"
            )),
            _ => None,
        }
    }
}

/// Where the nodes of a golden, model or node trial's net ran: how many the executor under
/// test took, and why it declined the others (which ran on the reference). Read from the
/// net's placement; the planner decided it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCoverage {
    /// Nodes placed on the executor and target under test.
    pub on_executor: usize,
    /// Every node of the net, after constant folding.
    pub nodes: usize,
    /// The nodes placed elsewhere, in graph order, each with the planner's reason.
    pub declined: Vec<DeclinedNode>,
}

/// One node the executor under test did not run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclinedNode {
    pub node: String,
    pub op: String,
    /// `<executor>/<target>` the planner placed it on instead.
    pub placed_on: String,
    pub reason: String,
}

impl NodeCoverage {
    /// Whether some node ran somewhere other than the executor under test.
    pub fn is_partial(&self) -> bool {
        self.on_executor < self.nodes
    }

    /// "3 of 5 nodes on opencl".
    pub fn describe(&self, executor: &str) -> String {
        format!("{} of {} nodes on {executor}", self.on_executor, self.nodes)
    }

    /// The declined ops with their reasons, each distinct pair once, in graph order:
    /// "Gather: INT64 indices are not supported; Resize: cubic mode".
    pub fn declined_ops(&self) -> String {
        let mut seen = std::collections::BTreeSet::new();
        self.declined
            .iter()
            .filter(|d| seen.insert((d.op.as_str(), d.reason.as_str())))
            .map(|d| format!("{}: {}", d.op, d.reason))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One trial's result, as every report reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// `<executor>/<target>/<category>/<case>`.
    pub name: String,
    pub executor: String,
    pub target: String,
    pub device: String,
    pub category: String,
    /// The op type for op, prop and golden cases; the model name for model cases.
    pub subject: String,
    pub verdict: Verdict,
    pub comparisons: Vec<Comparison>,
    /// Fallback notices raised while building the trial's nets.
    pub notices: Vec<String>,
    /// Where the net's nodes ran, for golden, model and node trials that built their net
    /// (whatever their verdict); `None` for every other trial.
    #[serde(default)]
    pub coverage: Option<NodeCoverage>,
    pub duration_ms: f64,
}

impl Record {
    /// "partial: 3 of 5 nodes on opencl; declined Gather: …", for a trial whose net ran
    /// partly on the reference.
    pub fn partial_note(&self) -> Option<String> {
        let coverage = self.coverage.as_ref().filter(|c| c.is_partial())?;
        Some(format!(
            "partial: {}; declined {}",
            coverage.describe(&self.executor),
            coverage.declined_ops()
        ))
    }

    /// The largest absolute error over the trial's outputs.
    pub fn max_abs_error(&self) -> Option<f64> {
        self.comparisons
            .iter()
            .map(|c| c.max_abs_error)
            .reduce(f64::max)
    }

    /// The largest relative error over the trial's outputs.
    pub fn max_rel_error(&self) -> Option<f64> {
        self.comparisons
            .iter()
            .map(|c| c.max_rel_error)
            .reduce(f64::max)
    }
}
