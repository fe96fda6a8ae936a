//! Shape inference for the elementwise op family (placeholder until the family lands).

use super::{OutputFact, ValueFact};
use crate::error::OpError;
use crate::op::Op;

pub(super) fn infer(
    op: &Op,
    _inputs: &[Option<ValueFact>],
    _num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    Err(OpError::Unsupported(format!(
        "shape inference for {} is not written yet",
        op.name()
    )))
}
