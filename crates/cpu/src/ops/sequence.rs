//! The sequence-model blocks of opsets 27 and 28: SwiGLU (the gated activation of
//! transformer MLPs), LinearAttention (a recurrent state updated per token by one of four
//! rules) and CausalConvWithState (a causal depthwise 1-D convolution carrying its last
//! k - 1 inputs). All compute in f64 and round each output once; the spec's reference
//! implementation computes LinearAttention's state in f32, which the tolerance level
//! (`recurrent`) allows for.

use super::{expect_float, optional, required};
use concord_core::op::LinearAttentionRule;
use concord_core::{Op, OpError, Shape, Tensor};

/// Runs SwiGLU, LinearAttention or CausalConvWithState, returning `num_outputs` tensors.
pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let outputs = match *op {
        Op::SwiGLU { alpha } => vec![swiglu(alpha, inputs)?],
        Op::LinearAttention {
            kv_num_heads,
            q_num_heads,
            scale,
            update_rule,
        } => linear_attention(
            &LinearAttrs {
                kv_heads: kv_num_heads,
                q_heads: q_num_heads,
                scale,
                rule: update_rule,
            },
            inputs,
        )?,
        Op::CausalConvWithState { silu } => causal_conv_with_state(silu, inputs)?,
        ref other => return Err(super::not_in_family(other)),
    };
    Ok(outputs.into_iter().take(num_outputs.max(1)).collect())
}

/// SwiGLU: A · sigmoid(alpha · A) · B, elementwise, for A and B of one shape.
fn swiglu(alpha: f32, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let a = required(inputs, 0, "A")?;
    expect_float(a, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    if b.dtype() != a.dtype() {
        return Err(OpError::DType {
            index: 1,
            name: "B",
            expected: format!("{} (the dtype of A)", a.dtype()),
            actual: b.dtype(),
        });
    }
    if a.shape() != b.shape() {
        return Err(OpError::Shape(format!(
            "SwiGLU needs A and B of one shape (no broadcasting), got {} and {}",
            a.shape(),
            b.shape()
        )));
    }
    let alpha = f64::from(alpha);
    let y = a
        .to_f64_vec()
        .into_iter()
        .zip(b.to_f64_vec())
        .map(|(g, v)| g / (1.0 + (-alpha * g).exp()) * v)
        .collect();
    Tensor::from_f64(a.dtype(), a.shape().clone(), y)
}

struct LinearAttrs {
    kv_heads: usize,
    q_heads: usize,
    scale: f32,
    rule: LinearAttentionRule,
}

fn la_error(detail: String) -> OpError {
    OpError::Shape(format!("LinearAttention: {detail}"))
}

/// A 3-D packed (batch, seq, heads · size) input's head size.
fn packed_size(t: &Tensor, name: &str, heads: usize) -> Result<(usize, usize, usize), OpError> {
    match *t.dims() {
        [batch, seq, hidden] if heads > 0 && hidden % heads == 0 => {
            Ok((batch, seq, hidden / heads))
        }
        _ => Err(la_error(format!(
            "{name} must be 3-D (batch, seq, heads · size) with a last extent divisible by \
             its {heads} heads, got {}",
            t.shape()
        ))),
    }
}

/// LinearAttention, run token by token as the spec defines it (a chunked schedule, which
/// `chunk_size` tunes, computes the same function). The state of each (batch, kv head) is
/// d_k × d_v; query head h reads the state of kv head h / (q heads / kv heads).
fn linear_attention(
    attrs: &LinearAttrs,
    inputs: &[Option<&Tensor>],
) -> Result<Vec<Tensor>, OpError> {
    let (hq, hkv, rule) = (attrs.q_heads, attrs.kv_heads, attrs.rule);
    if hkv == 0 {
        // The ONNX loader refuses it too; an Op built by hand reaches this.
        return Err(OpError::Attribute {
            name: "kv_num_heads",
            detail: "LinearAttention: kv_num_heads must be at least 1, got 0".into(),
        });
    }
    if hq % hkv != 0 {
        return Err(OpError::Attribute {
            name: "q_num_heads",
            detail: format!(
                "LinearAttention: q_num_heads ({hq}) must be a multiple of kv_num_heads ({hkv})"
            ),
        });
    }
    let q_t = required(inputs, 0, "query")?;
    expect_float(q_t, 0, "query")?;
    let k_t = required(inputs, 1, "key")?;
    let v_t = required(inputs, 2, "value")?;
    for (index, name, t) in [(1, "key", k_t), (2, "value", v_t)] {
        if t.dtype() != q_t.dtype() {
            return Err(OpError::DType {
                index,
                name,
                expected: format!("{} (the dtype of query)", q_t.dtype()),
                actual: t.dtype(),
            });
        }
    }
    let (batch, seq, dk) = packed_size(q_t, "query", hq)?;
    let (kb, ks, kdk) = packed_size(k_t, "key", hkv)?;
    let (vb, vs, dv) = packed_size(v_t, "value", hkv)?;
    if (kb, ks, kdk) != (batch, seq, dk) || (vb, vs) != (batch, seq) {
        return Err(la_error(format!(
            "query {}, key {} and value {} do not agree on batch, sequence and key size",
            q_t.shape(),
            k_t.shape(),
            v_t.shape()
        )));
    }
    let past = optional(inputs, 3);
    let decay = optional(inputs, 4);
    let beta = optional(inputs, 5);
    let needs =
        |present: bool, wanted: bool, index: usize, name: &'static str| match (present, wanted) {
            (false, true) => Err(OpError::MissingInput { index, name }),
            (true, false) => Err(la_error(format!(
                "update_rule `{}` takes no {name} (input {index})",
                rule.name()
            ))),
            _ => Ok(()),
        };
    needs(decay.is_some(), rule.gated(), 4, "decay")?;
    needs(beta.is_some(), rule.delta(), 5, "beta")?;
    // decay: (batch, seq, kv heads) per head, or (batch, seq, kv heads · d_k) per key dim.
    let decay = decay
        .map(|t| {
            let per_dim = match *t.dims() {
                [b, s, n] if (b, s) == (batch, seq) && n == hkv => false,
                [b, s, n] if (b, s) == (batch, seq) && n == hkv * dk => true,
                _ => {
                    return Err(la_error(format!(
                        "decay must be ({batch}, {seq}, {hkv}) or ({batch}, {seq}, {}), got {}",
                        hkv * dk,
                        t.shape()
                    )))
                }
            };
            Ok((per_dim, t.to_f64_vec()))
        })
        .transpose()?;
    // beta: (batch, seq, kv heads) or (batch, seq, 1).
    let beta = beta
        .map(|t| match *t.dims() {
            [b, s, n] if (b, s) == (batch, seq) && (n == hkv || n == 1) => Ok((n, t.to_f64_vec())),
            _ => Err(la_error(format!(
                "beta must be ({batch}, {seq}, {hkv}) or ({batch}, {seq}, 1), got {}",
                t.shape()
            ))),
        })
        .transpose()?;
    let state_shape = [batch, hkv, dk, dv];
    let (state_dtype, mut state) = match past {
        Some(p) => {
            expect_float(p, 3, "past_state")?;
            if p.dims() != state_shape {
                return Err(la_error(format!(
                    "past_state must be {state_shape:?} (batch, kv heads, d_k, d_v), got {}",
                    p.shape()
                )));
            }
            (p.dtype(), p.to_f64_vec())
        }
        None => (q_t.dtype(), vec![0.0; state_shape.iter().product()]),
    };
    let scale = if attrs.scale == 0.0 {
        1.0 / (dk as f64).sqrt()
    } else {
        f64::from(attrs.scale)
    };
    let (q, k, v) = (q_t.to_f64_vec(), k_t.to_f64_vec(), v_t.to_f64_vec());
    let group = hq / hkv;
    let mut out = vec![0.0; batch * seq * hq * dv];
    let mut retrieved = vec![0.0; dv];
    let mut update = vec![0.0; dv];
    for b in 0..batch {
        for t in 0..seq {
            for h in 0..hkv {
                let s = &mut state[(b * hkv + h) * dk * dv..][..dk * dv];
                let kvec = &k[(b * seq + t) * hkv * dk + h * dk..][..dk];
                let vvec = &v[(b * seq + t) * hkv * dv + h * dv..][..dv];
                if let Some((per_dim, g)) = &decay {
                    for d in 0..dk {
                        let at = if *per_dim {
                            (b * seq + t) * hkv * dk + h * dk + d
                        } else {
                            (b * seq + t) * hkv + h
                        };
                        let factor = g[at].exp();
                        for x in &mut s[d * dv..(d + 1) * dv] {
                            *x *= factor;
                        }
                    }
                }
                update.copy_from_slice(vvec);
                if let Some((n, bvals)) = &beta {
                    // v ← β · (v − Sᵀk), with S already decayed.
                    retrieved.fill(0.0);
                    for (d, &kd) in kvec.iter().enumerate() {
                        for (r, &x) in retrieved.iter_mut().zip(&s[d * dv..(d + 1) * dv]) {
                            *r += x * kd;
                        }
                    }
                    let rate = bvals[(b * seq + t) * n + if *n == 1 { 0 } else { h }];
                    for (u, r) in update.iter_mut().zip(&retrieved) {
                        *u = rate * (*u - r);
                    }
                }
                for (d, &kd) in kvec.iter().enumerate() {
                    for (x, &u) in s[d * dv..(d + 1) * dv].iter_mut().zip(&update) {
                        *x += kd * u;
                    }
                }
            }
            for h in 0..hq {
                let s = &state[(b * hkv + h / group) * dk * dv..][..dk * dv];
                let qvec = &q[(b * seq + t) * hq * dk + h * dk..][..dk];
                let o = &mut out[(b * seq + t) * hq * dv + h * dv..][..dv];
                for (d, &qd) in qvec.iter().enumerate() {
                    for (acc, &x) in o.iter_mut().zip(&s[d * dv..(d + 1) * dv]) {
                        *acc += qd * x;
                    }
                }
                for acc in o.iter_mut() {
                    *acc *= scale;
                }
            }
        }
    }
    Ok(vec![
        Tensor::from_f64(q_t.dtype(), Shape::new(vec![batch, seq, hq * dv]), out)?,
        Tensor::from_f64(state_dtype, Shape::new(state_shape.to_vec()), state)?,
    ])
}

/// CausalConvWithState: each channel of `past_state ++ input` (zeros when there is no past
/// state) convolved with its own kernel of k taps, no padding, so the output has the
/// input's length; plus the bias, then SiLU when asked. present_state is the last k - 1
/// positions of the padded input.
fn causal_conv_with_state(silu: bool, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, OpError> {
    let err = |detail: String| OpError::Shape(format!("CausalConvWithState: {detail}"));
    let x_t = required(inputs, 0, "input")?;
    expect_float(x_t, 0, "input")?;
    let dtype = x_t.dtype();
    let w_t = required(inputs, 1, "weight")?;
    let same = |t: &Tensor, index: usize, name: &'static str| {
        if t.dtype() == dtype {
            Ok(())
        } else {
            Err(OpError::DType {
                index,
                name,
                expected: format!("{dtype} (the dtype of input)"),
                actual: t.dtype(),
            })
        }
    };
    same(w_t, 1, "weight")?;
    let [batch, channels, len] = *x_t.dims() else {
        return Err(err(format!(
            "input must be 3-D (batch, channels, length), got {}",
            x_t.shape()
        )));
    };
    let k = match *w_t.dims() {
        [c, 1, k] if c == channels && k >= 1 => k,
        _ => {
            return Err(err(format!(
                "weight must be ({channels}, 1, k) with k at least 1, got {}",
                w_t.shape()
            )))
        }
    };
    let bias = match optional(inputs, 2) {
        Some(t) => {
            same(t, 2, "bias")?;
            if t.dims() != [channels] {
                return Err(err(format!("bias must be ({channels}), got {}", t.shape())));
            }
            t.to_f64_vec()
        }
        None => vec![0.0; channels],
    };
    let state_len = k - 1;
    let past = match optional(inputs, 3) {
        Some(t) => {
            same(t, 3, "past_state")?;
            if t.dims() != [batch, channels, state_len] {
                return Err(err(format!(
                    "past_state must be ({batch}, {channels}, {state_len}), got {}",
                    t.shape()
                )));
            }
            t.to_f64_vec()
        }
        None => vec![0.0; batch * channels * state_len],
    };
    let (x, w) = (x_t.to_f64_vec(), w_t.to_f64_vec());
    let padded_len = state_len + len;
    let mut out = vec![0.0; batch * channels * len];
    let mut present = vec![0.0; batch * channels * state_len];
    let mut padded = vec![0.0; padded_len];
    for b in 0..batch {
        for c in 0..channels {
            let row = b * channels + c;
            padded[..state_len].copy_from_slice(&past[row * state_len..][..state_len]);
            padded[state_len..].copy_from_slice(&x[row * len..][..len]);
            let taps = &w[c * k..][..k];
            for (i, y) in out[row * len..][..len].iter_mut().enumerate() {
                let sum: f64 = taps
                    .iter()
                    .zip(&padded[i..i + k])
                    .map(|(a, p)| a * p)
                    .sum::<f64>()
                    + bias[c];
                *y = if silu {
                    sum / (1.0 + (-sum).exp())
                } else {
                    sum
                };
            }
            present[row * state_len..][..state_len]
                .copy_from_slice(&padded[padded_len - state_len..]);
        }
    }
    Ok(vec![
        Tensor::from_f64(dtype, x_t.shape().clone(), out)?,
        Tensor::from_f64(dtype, Shape::new(vec![batch, channels, state_len]), present)?,
    ])
}
