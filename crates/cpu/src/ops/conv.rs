//! conv kernels (placeholder until the family lands).
use concord_core::{op::Conv, OpError, Tensor};
pub(crate) fn conv(_: &Conv, _: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    Err(OpError::Unsupported("Conv not written yet".into()))
}
