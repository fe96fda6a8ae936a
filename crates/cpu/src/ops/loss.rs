//! The losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 13+, N-d),
//! computed in f64 and rounded once to the input's dtype.
//!
//! Both read class scores (N, C, d1…) and targets (N, d1…). Element (n, d) contributes
//! `-weight[t] · input[n, t, d]` with `t = target[n, d]`; a target equal to `ignore_index`
//! contributes 0 and weighs 0. Reduction `mean` divides the sum by the sum of the weights
//! applied (the count of non-ignored targets without a weight input), as the ONNX spec
//! does, so that every element ignored gives 0 / 0 = NaN, as the ONNX reference does.

use super::{expect_float, optional, required};
use concord_core::op::LossReduction;
use concord_core::{DType, Op, OpError, Shape, Tensor};

pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    match *op {
        Op::NegativeLogLikelihoodLoss {
            reduction,
            ignore_index,
        } => {
            let x = required(inputs, 0, "input")?;
            expect_float(x, 0, "input")?;
            let v = x.to_f64_vec();
            Ok(vec![nll(
                "NegativeLogLikelihoodLoss",
                x,
                &v,
                reduction,
                ignore_index,
                inputs,
            )?])
        }
        Op::SoftmaxCrossEntropyLoss {
            reduction,
            ignore_index,
        } => {
            let x = required(inputs, 0, "scores")?;
            expect_float(x, 0, "scores")?;
            let log_prob = log_softmax_axis1(x)?;
            let loss = nll(
                "SoftmaxCrossEntropyLoss",
                x,
                &log_prob,
                reduction,
                ignore_index,
                inputs,
            )?;
            let mut out = vec![loss];
            if num_outputs == 2 {
                out.push(Tensor::from_f64(x.dtype(), x.shape().clone(), log_prob)?);
            }
            Ok(out)
        }
        ref other => Err(OpError::Unsupported(format!(
            "{} is not a loss op",
            other.name()
        ))),
    }
}

/// (N, C, D) of a rank ≥ 2 input, D the product of the dims after C.
fn split(op: &str, x: &Tensor) -> Result<(usize, usize, usize), OpError> {
    match x.dims() {
        // The trailing dims size the output (N, d1…) even when C is 0, so their product
        // is checked rather than taken from the input's length.
        [n, c, rest @ ..] => Ok((
            *n,
            *c,
            super::spatial::checked_product(rest, &format!("{op}: input 0's trailing dims"))?,
        )),
        _ => Err(OpError::Shape(format!(
            "{op}: input 0 has shape {}; it needs rank 2 or more (N, C, d1…)",
            x.shape()
        ))),
    }
}

/// LogSoftmax along axis 1 of a (N, C, d1…) tensor, in f64 (the max is subtracted first).
fn log_softmax_axis1(x: &Tensor) -> Result<Vec<f64>, OpError> {
    let (n, c, d) = split("SoftmaxCrossEntropyLoss", x)?;
    let v = x.to_f64_vec();
    let mut out = vec![0.0; v.len()];
    for b in 0..n {
        for i in 0..d {
            let at = |k: usize| (b * c + k) * d + i;
            let max = (0..c).map(|k| v[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..c).map(|k| (v[at(k)] - max).exp()).sum();
            let log_sum = sum.ln();
            for k in 0..c {
                out[at(k)] = v[at(k)] - max - log_sum;
            }
        }
    }
    Ok(out)
}

/// The negative log-likelihood of `log_prob` (x's shape, as f64) at the targets of input 1.
fn nll(
    op: &'static str,
    x: &Tensor,
    log_prob: &[f64],
    reduction: LossReduction,
    ignore_index: Option<i64>,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let (n, c, d) = split(op, x)?;
    let target = required(inputs, 1, "target")?;
    let target_dims: Vec<usize> = x
        .dims()
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, &e)| e)
        .collect();
    if target.dims() != target_dims.as_slice() {
        return Err(OpError::Shape(format!(
            "{op}: input 1 (target) has shape {}, expected {} (input 0's shape {} without C)",
            target.shape(),
            Shape::new(target_dims),
            x.shape()
        )));
    }
    let targets = match target.dtype() {
        DType::I32 | DType::I64 => target.to_i128_vec().unwrap_or_default(),
        other => {
            return Err(OpError::DType {
                index: 1,
                name: "target",
                expected: "i32 or i64".into(),
                actual: other,
            })
        }
    };
    let weight = match optional(inputs, 2) {
        Some(w) => {
            if w.dtype() != x.dtype() || w.dims() != [c] {
                return Err(OpError::Shape(format!(
                    "{op}: input 2 (weight) is {} {}; it must be 1-D {} with one weight per \
                     class ({c})",
                    w.dtype(),
                    w.shape(),
                    x.dtype()
                )));
            }
            Some(w.to_f64_vec())
        }
        None => None,
    };
    let mut losses = vec![0.0; n * d];
    let mut weight_sum = 0.0;
    for b in 0..n {
        for i in 0..d {
            let t = targets[b * d + i];
            if ignore_index.is_some_and(|ii| i128::from(ii) == t) {
                continue;
            }
            let class = usize::try_from(t).ok().filter(|&k| k < c).ok_or_else(|| {
                OpError::Shape(format!(
                    "{op}: input 1 (target) holds {t} at flat index {}, outside the {c} \
                     classes of input 0 {} (and not the ignore_index)",
                    b * d + i,
                    x.shape()
                ))
            })?;
            let w = weight.as_ref().map_or(1.0, |w| w[class]);
            losses[b * d + i] = -log_prob[(b * c + class) * d + i] * w;
            weight_sum += w;
        }
    }
    match reduction {
        LossReduction::None => Tensor::from_f64(x.dtype(), target.shape().clone(), losses),
        LossReduction::Sum => {
            Tensor::from_f64(x.dtype(), Shape::scalar(), vec![losses.iter().sum()])
        }
        LossReduction::Mean => {
            let sum: f64 = losses.iter().sum();
            Tensor::from_f64(x.dtype(), Shape::scalar(), vec![sum / weight_sum])
        }
    }
}
