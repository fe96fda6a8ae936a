//! What the tolerance model needs from the oracle: for each output element of an op that
//! sums terms, the accumulation length K and the magnitude Σ|terms|. A backend that sums
//! in its own order and precision may differ from the exact sum by about K·u·Σ|terms|
//! (u the unit roundoff of its arithmetic), so that is what the suite allows.
//!
//! Σ|terms| comes from the reference kernels themselves: every op here is multilinear in
//! its operands, so running it on |inputs| (and |alpha|, |beta|) gives Σ|terms| exactly
//! (DeformConv's offsets, which only place its samples, are kept as they are).

use crate::ops::run_op;
use concord_core::op::{Gemm, Pool, ReduceKind};
use concord_core::{Op, OpError, Shape, Tensor};

/// Accumulation figures of one op's (first) output.
#[derive(Clone, Debug, PartialEq)]
pub struct Accumulation {
    /// Terms summed per output element (the largest, where it varies).
    pub k: usize,
    /// Σ|terms| per output element, row-major like the output.
    pub magnitude: Vec<f64>,
}

/// The accumulation figures of `op` on `inputs`, or None for ops that do not sum terms
/// (their tolerance is a fixed level).
pub fn accumulation(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Option<Accumulation>, OpError> {
    let k = match op {
        Op::Conv(attrs) => {
            let w = operand(inputs, 1)?;
            let per_group_in = w.dims().get(1).copied().unwrap_or(1);
            let kernel: usize = w.dims().iter().skip(2).product();
            let _ = attrs;
            per_group_in * kernel + usize::from(present(inputs, 2))
        }
        // Every output sums, per input channel of its group and kernel tap that lands on it
        // (all of them at most), one product, plus the bias. W is (C, M/group, kernel…).
        Op::ConvTranspose(attrs) => {
            let x = operand(inputs, 0)?;
            let w = operand(inputs, 1)?;
            let per_group_in = x.dims().get(1).copied().unwrap_or(1) / attrs.conv.group.max(1);
            let kernel: usize = w.dims().iter().skip(2).product();
            per_group_in * kernel + usize::from(present(inputs, 2))
        }
        Op::Gemm(Gemm { trans_a, .. }) => {
            let a = operand(inputs, 0)?;
            let inner = if *trans_a {
                a.dims().first()
            } else {
                a.dims().get(1)
            };
            inner.copied().unwrap_or(1) + usize::from(present(inputs, 2))
        }
        Op::MatMul => {
            let a = operand(inputs, 0)?;
            a.dims().last().copied().unwrap_or(1)
        }
        Op::Reduce(ReduceKind::Sum | ReduceKind::Mean, _) => {
            let x = operand(inputs, 0)?;
            let out = run_op(op, inputs, 1)?;
            let out_n = out.first().map(|t| t.len()).unwrap_or(1).max(1);
            (x.len() / out_n).max(1)
        }
        Op::GlobalAveragePool => {
            let x = operand(inputs, 0)?;
            x.dims().iter().skip(2).product::<usize>().max(1)
        }
        Op::AveragePool(Pool { kernel_shape, .. }) => kernel_shape.iter().product::<usize>().max(1),
        Op::Einsum { equation } => crate::ops::algebra::einsum_terms(equation, inputs)?,
        Op::Col2Im {
            dilations,
            pads,
            strides,
        } => col2im_overlap(dilations, pads, strides, inputs)?,
        // Every output sums, per input channel of its group and kernel tap, the 2^r corner
        // terms of one interpolated sample, plus the bias.
        Op::DeformConv(_) => {
            let w = operand(inputs, 1)?;
            let per_group_in = w.dims().get(1).copied().unwrap_or(1);
            let kernel: usize = w.dims().iter().skip(2).product();
            let corners = 1usize
                .checked_shl(u32::try_from(w.dims().len().saturating_sub(2)).unwrap_or(u32::MAX))
                .unwrap_or(usize::MAX);
            per_group_in
                .saturating_mul(kernel)
                .saturating_mul(corners)
                .saturating_add(usize::from(present(inputs, 3)))
        }
        // A running product of K factors rounds K times; its magnitude is the product of
        // the magnitudes.
        Op::CumProd { .. } => {
            let x = operand(inputs, 0)?;
            let axis = operand(inputs, 1)?
                .to_i64_vec()
                .and_then(|a| a.first().copied())
                .unwrap_or(0);
            let axis = concord_core::shape::normalize_axis(axis, x.rank())?;
            x.dims().get(axis).copied().unwrap_or(1).max(1)
        }
        // The depthwise taps plus the bias; SiLU after the sum does not widen the bound
        // (its slope stays below 1.1), so the sum's magnitude is taken without it.
        Op::CausalConvWithState { .. } => {
            let w = operand(inputs, 1)?;
            w.dims().last().copied().unwrap_or(1) + usize::from(present(inputs, 2))
        }
        _ => return Ok(None),
    };
    // DeformConv is multilinear in X, W, B and mask but not in its offsets, which only
    // place the samples (their interpolation weights are never negative): the offsets stay
    // as they are.
    // CumProd's axis is an index, not a factor.
    let keep = |i: usize| {
        (matches!(op, Op::DeformConv(_)) && i == 2) || (matches!(op, Op::CumProd { .. }) && i == 1)
    };
    let abs_inputs: Vec<Option<Tensor>> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.map(|t| {
                if keep(i) {
                    Ok(t.clone())
                } else {
                    abs_tensor(t)
                }
            })
            .transpose()
        })
        .collect::<Result<_, _>>()?;
    let refs: Vec<Option<&Tensor>> = abs_inputs.iter().map(|t| t.as_ref()).collect();
    let abs_op = match op {
        Op::Gemm(g) => Op::Gemm(Gemm {
            alpha: g.alpha.abs(),
            beta: g.beta.abs(),
            ..g.clone()
        }),
        Op::CausalConvWithState { .. } => Op::CausalConvWithState { silu: false },
        other => other.clone(),
    };
    let magnitude = run_op(&abs_op, &refs, 1)?
        .into_iter()
        .next()
        .map(|t| t.to_f64_vec())
        .unwrap_or_default();
    Ok(Some(Accumulation { k, magnitude }))
}

fn operand<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Result<&'a Tensor, OpError> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or(OpError::MissingInput {
            index: i,
            name: "operand",
        })
}

fn present(inputs: &[Option<&Tensor>], i: usize) -> bool {
    inputs.get(i).copied().flatten().is_some()
}

/// |t| for float tensors; integer operands (axes) pass through unchanged.
fn abs_tensor(t: &Tensor) -> Result<Tensor, OpError> {
    if !t.dtype().is_float() {
        return Ok(t.clone());
    }
    let v: Vec<f64> = t.to_f64_vec().into_iter().map(f64::abs).collect();
    Tensor::from_f64(t.dtype(), Shape::from(t.dims()), v)
}

/// Col2Im's accumulation length: the most (block, tap) pairs that land on one image
/// element, the product over the axes of each axis's largest overlap.
fn col2im_overlap(
    dilations: &[usize],
    pads: &[usize],
    strides: &[usize],
    inputs: &[Option<&Tensor>],
) -> Result<usize, OpError> {
    let extents = |i: usize| -> Result<Vec<usize>, OpError> {
        let values = operand(inputs, i)?.to_i64_vec().unwrap_or_default();
        Ok(values
            .iter()
            .map(|&v| usize::try_from(v).unwrap_or(0))
            .collect())
    };
    let axes = concord_core::op::col2im_plan(&extents(1)?, &extents(2)?, dilations, pads, strides)?;
    let mut k = 1usize;
    for axis in &axes {
        let mut hits = vec![0usize; axis.output];
        for i in 0..axis.input {
            for tap in 0..axis.kernel {
                if let Some(o) = axis.output_coord(i, tap) {
                    hits[o] += 1;
                }
            }
        }
        k = k.saturating_mul(hits.into_iter().max().unwrap_or(0));
    }
    Ok(k.max(1))
}
