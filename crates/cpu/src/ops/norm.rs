//! norm kernels (placeholder until the family lands).
use concord_core::{Op, OpError, Tensor};
pub(crate) fn run(op: &Op, _: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    Err(OpError::Unsupported(format!(
        "{} not written yet",
        op.name()
    )))
}
