//! gemm kernels (placeholder until the family lands).
use concord_core::{op::Gemm, OpError, Tensor};
pub(crate) fn gemm(_: &Gemm, _: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    Err(OpError::Unsupported("Gemm not written yet".into()))
}
pub(crate) fn matmul(_: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    Err(OpError::Unsupported("MatMul not written yet".into()))
}
