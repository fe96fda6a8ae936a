//! Shape and dtype inference for Attention and RotaryEmbedding (opsets 23 to 25), and the
//! sequence-model blocks of opsets 27 and 28: LinearAttention, CausalConvWithState and
//! SwiGLU. Extents that depend on unknown dims (a 3-D input's head size, past + new
//! sequence length) are [`Dim::Unknown`] unless both operands are fixed; the kernel checks
//! every shape.

use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::Op;
use crate::shape::{format_sym, Dim};

const FLOAT: [DType; 4] = DType::FLOATS;

/// `a + b` when both are fixed.
fn add(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (Dim::Fixed(a), Dim::Fixed(b)) => Dim::Fixed(a + b),
        _ => Dim::Unknown,
    }
}

/// `a * b` when `a` is fixed.
fn mul(a: &Dim, b: usize) -> Dim {
    match a {
        Dim::Fixed(a) => Dim::Fixed(a * b),
        _ => Dim::Unknown,
    }
}

/// A 3-D input's head size: its hidden size over its head count, which must divide it.
fn head_size(op: &str, name: &str, hidden: &Dim, heads: usize) -> Result<Dim, OpError> {
    match hidden {
        Dim::Fixed(h) if heads > 0 && h % heads == 0 => Ok(Dim::Fixed(h / heads)),
        Dim::Fixed(h) => Err(OpError::Shape(format!(
            "{op}: {name}'s hidden size {h} is not a multiple of its {heads} heads"
        ))),
        _ => Ok(Dim::Unknown),
    }
}

/// The head count a 3-D input needs from an attribute.
fn heads_attr(name: &'static str, heads: Option<usize>) -> Result<usize, OpError> {
    heads.filter(|&h| h > 0).ok_or_else(|| OpError::Attribute {
        name,
        detail: "Attention with 3-D inputs needs it (at least 1)".into(),
    })
}

/// Attention: Y, present_key, present_value, qk_matmul_output, as many as the node
/// declares.
pub(super) fn attention(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let Op::Attention {
        q_num_heads,
        kv_num_heads,
        ..
    } = *op
    else {
        return Err(OpError::Unsupported(format!(
            "{} is not Attention",
            op.name()
        )));
    };
    let q = required(inputs, 0, "Q")?;
    expect_dtype(&q, 0, "Q", &FLOAT)?;
    let k = required(inputs, 1, "K")?;
    let v = required(inputs, 2, "V")?;
    for (i, name, f) in [(1, "K", &k), (2, "V", &v)] {
        expect_dtype(f, i, name, &[q.dtype])?;
    }
    let rank = q.shape.len();
    if !(rank == 3 || rank == 4) || k.shape.len() != rank || v.shape.len() != rank {
        return Err(OpError::Shape(format!(
            "Attention needs Q, K and V all 3-D or all 4-D, got Q {}, K {}, V {}",
            format_sym(q.shape),
            format_sym(k.shape),
            format_sym(v.shape)
        )));
    }
    // (batch, q heads, q sequence, head size, kv heads, kv sequence, v head size)
    let (batch, hq, sq, d, hkv, skv, dv, y_shape) = if rank == 4 {
        let y = vec![
            q.shape[0].clone(),
            q.shape[1].clone(),
            q.shape[2].clone(),
            v.shape[3].clone(),
        ];
        (
            q.shape[0].clone(),
            q.shape[1].clone(),
            q.shape[2].clone(),
            q.shape[3].clone(),
            k.shape[1].clone(),
            k.shape[2].clone(),
            v.shape[3].clone(),
            y,
        )
    } else {
        let hq = heads_attr("q_num_heads", q_num_heads)?;
        let hkv = heads_attr("kv_num_heads", kv_num_heads)?;
        let d = head_size("Attention", "Q", &q.shape[2], hq)?;
        head_size("Attention", "K", &k.shape[2], hkv)?;
        let dv = head_size("Attention", "V", &v.shape[2], hkv)?;
        let y = vec![q.shape[0].clone(), q.shape[1].clone(), mul(&dv, hq)];
        (
            q.shape[0].clone(),
            Dim::Fixed(hq),
            q.shape[1].clone(),
            d,
            Dim::Fixed(hkv),
            k.shape[1].clone(),
            dv,
            y,
        )
    };
    let past = match optional(inputs, 4) {
        Some(p) => {
            expect_dtype(&p, 4, "past_key", &[q.dtype])?;
            match p.shape {
                [_, _, s, _] => s.clone(),
                _ => {
                    return Err(OpError::Shape(format!(
                        "Attention: past_key must be 4-D, got {}",
                        format_sym(p.shape)
                    )))
                }
            }
        }
        None => Dim::Fixed(0),
    };
    let total = add(&past, &skv);
    let facts = [
        OutputFact::new(q.dtype, y_shape),
        OutputFact::new(q.dtype, vec![batch.clone(), hkv.clone(), total.clone(), d]),
        OutputFact::new(q.dtype, vec![batch.clone(), hkv, total.clone(), dv]),
        OutputFact::new(q.dtype, vec![batch, hq, sq, total]),
    ];
    Ok(facts.into_iter().take(num_outputs.max(1)).collect())
}

/// RotaryEmbedding: the output has X's shape and dtype.
pub(super) fn rotary_embedding(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_dtype(&x, 0, "X", &FLOAT)?;
    if !(x.shape.len() == 3 || x.shape.len() == 4) {
        return Err(OpError::Shape(format!(
            "RotaryEmbedding needs a 3-D or 4-D X, got {}",
            format_sym(x.shape)
        )));
    }
    for (i, name) in [(1, "cos_cache"), (2, "sin_cache")] {
        let c = required(inputs, i, name)?;
        expect_dtype(&c, i, name, &[x.dtype])?;
    }
    Ok(OutputFact::new(x.dtype, x.shape.to_vec()))
}

/// SwiGLU: A and B of one float dtype and one shape (the spec applies no broadcasting).
pub(super) fn swiglu(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let a = required(inputs, 0, "A")?;
    expect_dtype(&a, 0, "A", &FLOAT)?;
    let b = required(inputs, 1, "B")?;
    expect_dtype(&b, 1, "B", &[a.dtype])?;
    let clash = a.shape.len() != b.shape.len()
        || a.shape
            .iter()
            .zip(b.shape)
            .any(|(x, y)| matches!((x, y), (Dim::Fixed(x), Dim::Fixed(y)) if x != y));
    if clash {
        return Err(OpError::Shape(format!(
            "SwiGLU needs A and B of one shape (no broadcasting), got {} and {}",
            format_sym(a.shape),
            format_sym(b.shape)
        )));
    }
    let dims = a
        .shape
        .iter()
        .zip(b.shape)
        .map(|(x, y)| {
            if matches!(x, Dim::Fixed(_)) {
                x.clone()
            } else {
                y.clone()
            }
        })
        .collect();
    Ok(OutputFact::new(a.dtype, dims))
}

/// LinearAttention: output (batch, seq, q heads · d_v) in the query's dtype, present_state
/// (batch, kv heads, d_k, d_v) in past_state's dtype (the query's when there is none).
pub(super) fn linear_attention(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let Op::LinearAttention {
        kv_num_heads,
        q_num_heads,
        ..
    } = *op
    else {
        return Err(OpError::Unsupported(format!(
            "{} is not LinearAttention",
            op.name()
        )));
    };
    let q = required(inputs, 0, "query")?;
    expect_dtype(&q, 0, "query", &[DType::F32, DType::F16, DType::BF16])?;
    let k = required(inputs, 1, "key")?;
    let v = required(inputs, 2, "value")?;
    for (i, name, f) in [(1, "key", &k), (2, "value", &v)] {
        expect_dtype(f, i, name, &[q.dtype])?;
    }
    for (name, f) in [("query", &q), ("key", &k), ("value", &v)] {
        if f.shape.len() != 3 {
            return Err(OpError::Shape(format!(
                "LinearAttention: {name} must be 3-D (batch, seq, heads · size), got {}",
                format_sym(f.shape)
            )));
        }
    }
    let d_k = head_size("LinearAttention", "query", &q.shape[2], q_num_heads)?;
    head_size("LinearAttention", "key", &k.shape[2], kv_num_heads)?;
    let d_v = head_size("LinearAttention", "value", &v.shape[2], kv_num_heads)?;
    let state_dtype = match optional(inputs, 3) {
        Some(p) => {
            expect_dtype(&p, 3, "past_state", &[DType::F32, DType::F16, DType::BF16])?;
            p.dtype
        }
        None => q.dtype,
    };
    let facts = [
        OutputFact::new(
            q.dtype,
            vec![
                q.shape[0].clone(),
                q.shape[1].clone(),
                mul(&d_v, q_num_heads),
            ],
        ),
        OutputFact::new(
            state_dtype,
            vec![q.shape[0].clone(), Dim::Fixed(kv_num_heads), d_k, d_v],
        ),
    ];
    Ok(facts.into_iter().take(num_outputs.max(1)).collect())
}

/// CausalConvWithState: output has the input's shape; present_state is
/// (batch, channels, k - 1), k being the weight's last extent.
pub(super) fn causal_conv_with_state(
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let x = required(inputs, 0, "input")?;
    expect_dtype(&x, 0, "input", &[DType::F32, DType::F16, DType::BF16])?;
    let w = required(inputs, 1, "weight")?;
    expect_dtype(&w, 1, "weight", &[x.dtype])?;
    if x.shape.len() != 3 || w.shape.len() != 3 {
        return Err(OpError::Shape(format!(
            "CausalConvWithState needs a 3-D input (batch, channels, length) and a 3-D weight \
             (channels, 1, k), got {} and {}",
            format_sym(x.shape),
            format_sym(w.shape)
        )));
    }
    let state_len = match &w.shape[2] {
        Dim::Fixed(0) => {
            return Err(OpError::Shape(
                "CausalConvWithState: the kernel size (weight's last extent) is 0".into(),
            ))
        }
        Dim::Fixed(k) => Dim::Fixed(k - 1),
        _ => Dim::Unknown,
    };
    let facts = [
        OutputFact::new(x.dtype, x.shape.to_vec()),
        OutputFact::new(
            x.dtype,
            vec![x.shape[0].clone(), x.shape[1].clone(), state_len],
        ),
    ];
    Ok(facts.into_iter().take(num_outputs.max(1)).collect())
}
