//! resize kernels (placeholder until the family lands).
use concord_core::{op::Resize, OpError, Tensor};
pub(crate) fn resize(_: &Resize, _: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    Err(OpError::Unsupported("Resize not written yet".into()))
}
