//! concord-cpu: the reference executor, the oracle every other executor is held to. It
//! declares the one target everything falls back to, [`CPU`] ("cpu").
//!
//! Invariants:
//! - Obviously correct before fast: each op family is one file under `ops/`, written from
//!   the ONNX specification with plain loops.
//! - Floating-point kernels accumulate in f64 and round to the output dtype exactly once,
//!   at the op's output (through [`concord_core::Tensor::from_f64`]).
//! - No state outside the values of one run: [`ReferenceExecutor`] is `Send + Sync` and
//!   every call to [`ReferenceExecutor::run`] is independent.
//! - Never panics on bad operands: every kernel checks and returns [`OpError`].

mod accumulation;
mod executor;
mod ops;
mod runner;

pub use accumulation::{accumulation, Accumulation};
pub use executor::{CpuExecutor, CpuPartition, CPU};
pub use ops::{run_op, run_op_within, MAX_LOOP_ITERATIONS};
pub use runner::{ReferenceExecutor, RunOutputs};

use concord_core::fold::Evaluator;
use concord_core::{Deadline, MemoryBudget, Op, OpError, Tensor};

/// The reference kernels as a constant-folding evaluator, within a [`MemoryBudget`]
/// (the machine's default unless [`ReferenceEvaluator::within`] says otherwise) and, when
/// given one, a [`Deadline`] for the whole fold ([`ReferenceEvaluator::until`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceEvaluator {
    budget: MemoryBudget,
    deadline: Option<Deadline>,
}

impl ReferenceEvaluator {
    /// An evaluator whose kernels' outputs are checked against `budget` before they run.
    pub fn within(budget: MemoryBudget) -> Self {
        ReferenceEvaluator {
            budget,
            deadline: None,
        }
    }

    /// This evaluator with a deadline (None: none), checked before every node it
    /// evaluates and inside long kernel loops.
    pub fn until(self, deadline: Option<Deadline>) -> Self {
        ReferenceEvaluator { deadline, ..self }
    }
}

impl Evaluator for ReferenceEvaluator {
    fn evaluate(
        &self,
        op: &Op,
        inputs: &[Option<&Tensor>],
        num_outputs: usize,
    ) -> Result<Vec<Tensor>, OpError> {
        concord_core::deadline::check(self.deadline, || "constant folding".to_string())?;
        ops::run_op_scheduled(op, &[], inputs, num_outputs, self.budget, self.deadline)
    }
}
