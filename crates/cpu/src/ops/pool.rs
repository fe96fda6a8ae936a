//! pool kernels (placeholder until the family lands).
use concord_core::{op::Pool, OpError, Tensor};
pub(crate) fn max_pool(_: &Pool, _: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    Err(OpError::Unsupported("MaxPool not written yet".into()))
}
pub(crate) fn average_pool(_: &Pool, _: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    Err(OpError::Unsupported("AveragePool not written yet".into()))
}
pub(crate) fn global_average_pool(_: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    Err(OpError::Unsupported(
        "GlobalAveragePool not written yet".into(),
    ))
}
