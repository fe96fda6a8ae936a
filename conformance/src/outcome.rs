//! What one trial found ([`Outcome`]), what the run makes of it after the expectations
//! ([`Verdict`]), and the [`Record`] every report is written from.

use crate::compare::Comparison;
use serde::Serialize;

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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
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

    /// "pass", "fail", "expected-fail", "unexpected-pass", "skip".
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
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

/// One trial's result, as every report reads it.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    pub duration_ms: f64,
}

impl Record {
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
