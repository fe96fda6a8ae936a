//! Attention (opsets 23 to 25) and RotaryEmbedding (opset 23), following the ONNX spec as
//! onnx 1.23 states it for every Attention opset: the softcap comes before the mask, the
//! causal mask and the sliding window are aligned bottom-right (offset by the past length,
//! or by `nonpad_kv_seqlen - q_len` per batch for an external cache), and a query row whose
//! every key is masked gives zeros, not NaN. Both compute in f64 and round each output once,
//! so `softmax_precision` (the dtype the spec computes the softmax in) changes nothing here:
//! f64 is at least as precise as every dtype it may name.

use super::{expect_float, i64_operand, optional, required};
use concord_core::{DType, Op, OpError, Shape, Tensor};

/// Runs Attention or RotaryEmbedding, returning `num_outputs` tensors.
pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    match *op {
        Op::Attention {
            is_causal,
            kv_num_heads,
            q_num_heads,
            qk_matmul_output_mode,
            scale,
            softcap,
            softmax_precision: _,
            left_window_size,
            right_window_size,
        } => attention(
            &Attrs {
                is_causal,
                kv_num_heads,
                q_num_heads,
                qk_matmul_output_mode,
                scale,
                softcap,
                window: [left_window_size, right_window_size],
            },
            inputs,
            num_outputs,
        ),
        Op::RotaryEmbedding {
            interleaved,
            num_heads,
            rotary_embedding_dim,
        } => Ok(vec![rotary_embedding(
            interleaved,
            num_heads,
            rotary_embedding_dim,
            inputs,
        )?]),
        ref other => Err(super::not_in_family(other)),
    }
}

struct Attrs {
    is_causal: bool,
    kv_num_heads: Option<usize>,
    q_num_heads: Option<usize>,
    qk_matmul_output_mode: i64,
    scale: Option<f32>,
    softcap: f32,
    /// Left and right window sizes; -1 leaves that side unbounded.
    window: [i64; 2],
}

/// One of Q, K, V, past_key, past_value as (batch, heads, seq, size), row-major.
struct Heads {
    batch: usize,
    heads: usize,
    seq: usize,
    size: usize,
    data: Vec<f64>,
}

impl Heads {
    fn at(&self, b: usize, h: usize, s: usize) -> usize {
        ((b * self.heads + h) * self.seq + s) * self.size
    }

    fn dims(&self) -> [usize; 4] {
        [self.batch, self.heads, self.seq, self.size]
    }
}

fn shape_error(detail: String) -> OpError {
    OpError::Shape(format!("Attention: {detail}"))
}

/// Reads a 4-D input as it is, or a 3-D (batch, seq, heads · size) one split into `heads`
/// heads and transposed to (batch, heads, seq, size).
fn heads_of(
    t: &Tensor,
    name: &'static str,
    heads_attr: (&'static str, Option<usize>),
) -> Result<Heads, OpError> {
    let v = t.to_f64_vec();
    match *t.dims() {
        [batch, heads, seq, size] => Ok(Heads {
            batch,
            heads,
            seq,
            size,
            data: v,
        }),
        [batch, seq, hidden] => {
            let heads = heads_attr
                .1
                .filter(|&h| h > 0)
                .ok_or_else(|| OpError::Attribute {
                    name: heads_attr.0,
                    detail: format!("Attention with a 3-D {name} needs it (at least 1)"),
                })?;
            if hidden % heads != 0 {
                return Err(shape_error(format!(
                    "{name} {} has a hidden size that is not a multiple of {} = {heads}",
                    t.shape(),
                    heads_attr.0
                )));
            }
            let size = hidden / heads;
            let mut data = vec![0.0; v.len()];
            for b in 0..batch {
                for s in 0..seq {
                    for h in 0..heads {
                        let from = (b * seq + s) * hidden + h * size;
                        let to = ((b * heads + h) * seq + s) * size;
                        data[to..to + size].copy_from_slice(&v[from..from + size]);
                    }
                }
            }
            Ok(Heads {
                batch,
                heads,
                seq,
                size,
                data,
            })
        }
        _ => Err(shape_error(format!(
            "{name} must be 3-D or 4-D, got {}",
            t.shape()
        ))),
    }
}

/// Concatenates a past cache and the new keys or values along the sequence axis.
fn concat_past(past: Option<Heads>, new: Heads, name: &str) -> Result<Heads, OpError> {
    let Some(past) = past else {
        return Ok(new);
    };
    if past.batch != new.batch || past.heads != new.heads || past.size != new.size {
        return Err(shape_error(format!(
            "{name} {:?} does not match the new (batch, kv heads, _, size) {:?}",
            past.dims(),
            new.dims()
        )));
    }
    let seq = past.seq + new.seq;
    let mut data = Vec::with_capacity(past.data.len() + new.data.len());
    for b in 0..new.batch {
        for h in 0..new.heads {
            let p = past.at(b, h, 0);
            data.extend_from_slice(&past.data[p..p + past.seq * past.size]);
            let n = new.at(b, h, 0);
            data.extend_from_slice(&new.data[n..n + new.seq * new.size]);
        }
    }
    Ok(Heads {
        batch: new.batch,
        heads: new.heads,
        seq,
        size: new.size,
        data,
    })
}

/// The attention mask broadcast to (batch, q heads, q seq, total seq): the mask's last axis
/// may be shorter than the total sequence, the rest counting as masked out (-inf).
struct Mask {
    /// Strides of the mask's 4 axes (0 where it broadcasts).
    strides: [usize; 4],
    len: usize,
    /// Additive bias per element (bool masks: 0 where true, -inf where false).
    bias: Vec<f64>,
}

impl Mask {
    fn read(t: &Tensor, q_dtype: DType, target: [usize; 4]) -> Result<Self, OpError> {
        let is_bool = t.dtype() == DType::Bool;
        if !is_bool && t.dtype() != q_dtype {
            return Err(OpError::DType {
                index: 3,
                name: "attn_mask",
                expected: format!("bool or {q_dtype} (the dtype of Q)"),
                actual: t.dtype(),
            });
        }
        let dims = t.dims();
        if dims.is_empty() || dims.len() > 4 {
            return Err(shape_error(format!(
                "attn_mask must have rank 1 to 4, got {}",
                t.shape()
            )));
        }
        let mut full = [1usize; 4];
        full[4 - dims.len()..].copy_from_slice(dims);
        let len = full[3];
        if len > target[3] {
            return Err(shape_error(format!(
                "attn_mask {} is longer than the total sequence length {}",
                t.shape(),
                target[3]
            )));
        }
        let mut strides = [0usize; 4];
        let mut stride = 1;
        for axis in (0..4).rev() {
            if axis < 3 && full[axis] != 1 && full[axis] != target[axis] {
                return Err(shape_error(format!(
                    "attn_mask {} does not broadcast to (batch, q heads, q seq, total seq) {:?}",
                    t.shape(),
                    target
                )));
            }
            strides[axis] = if full[axis] == 1 { 0 } else { stride };
            stride *= full[axis];
        }
        let bias = t
            .to_f64_vec()
            .into_iter()
            .map(|m| match (is_bool, m != 0.0) {
                (true, true) => 0.0,
                (true, false) => f64::NEG_INFINITY,
                (false, _) => m,
            })
            .collect();
        Ok(Mask { strides, len, bias })
    }

    fn at(&self, b: usize, h: usize, i: usize, j: usize) -> f64 {
        if j >= self.len {
            return f64::NEG_INFINITY;
        }
        let s = &self.strides;
        self.bias[b * s[0] + h * s[1] + i * s[2] + j * s[3]]
    }
}

fn attention(
    attrs: &Attrs,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    if !(1..=4).contains(&num_outputs) {
        return Err(shape_error(format!(
            "has 1 to 4 outputs, the node declares {num_outputs}"
        )));
    }
    if !(0..=3).contains(&attrs.qk_matmul_output_mode) {
        return Err(OpError::Attribute {
            name: "qk_matmul_output_mode",
            detail: format!(
                "Attention: must be 0 to 3, got {}",
                attrs.qk_matmul_output_mode
            ),
        });
    }
    let q_t = required(inputs, 0, "Q")?;
    expect_float(q_t, 0, "Q")?;
    let dtype = q_t.dtype();
    let k_t = required(inputs, 1, "K")?;
    let v_t = required(inputs, 2, "V")?;
    for (i, name, t) in [(1, "K", k_t), (2, "V", v_t)] {
        same_dtype(t, i, name, dtype)?;
    }
    let rank = q_t.rank();
    if k_t.rank() != rank || v_t.rank() != rank {
        return Err(shape_error(format!(
            "Q, K and V must have one rank, got Q {}, K {}, V {}",
            q_t.shape(),
            k_t.shape(),
            v_t.shape()
        )));
    }
    let q = heads_of(q_t, "Q", ("q_num_heads", attrs.q_num_heads))?;
    let k = heads_of(k_t, "K", ("kv_num_heads", attrs.kv_num_heads))?;
    let v = heads_of(v_t, "V", ("kv_num_heads", attrs.kv_num_heads))?;
    if k.batch != q.batch
        || v.batch != q.batch
        || k.heads != v.heads
        || k.seq != v.seq
        || k.size != q.size
        || k.heads == 0
        || q.heads % k.heads != 0
    {
        return Err(shape_error(format!(
            "Q {:?}, K {:?} and V {:?} (as batch, heads, seq, head size) do not fit: K and V \
             need Q's batch, one head count dividing Q's and one sequence length, K Q's head size",
            q.dims(),
            k.dims(),
            v.dims()
        )));
    }
    let past_key = optional(inputs, 4);
    let past_value = optional(inputs, 5);
    let read_past = |t: Option<&Tensor>, index: usize, name: &'static str| {
        t.map(|t| {
            same_dtype(t, index, name, dtype)?;
            if t.rank() != 4 {
                return Err(shape_error(format!(
                    "{name} must be 4-D, got {}",
                    t.shape()
                )));
            }
            heads_of(t, name, ("kv_num_heads", None))
        })
        .transpose()
    };
    if past_key.is_some() != past_value.is_some() {
        return Err(shape_error(
            "past_key and past_value must be given together".into(),
        ));
    }
    let past_k = read_past(past_key, 4, "past_key")?;
    let past_len = past_k.as_ref().map_or(0, |p| p.seq);
    let k = concat_past(past_k, k, "past_key")?;
    let past_v = read_past(past_value, 5, "past_value")?;
    let past_v_len = past_v.as_ref().map_or(0, |p| p.seq);
    if past_v_len != past_len {
        // K and V were checked to share a sequence length; their pasts must too, or the
        // values would not line up with the keys they weight.
        return Err(shape_error(format!(
            "past_key has sequence length {past_len} and past_value {past_v_len}: they must agree"
        )));
    }
    let v = concat_past(past_v, v, "past_value")?;

    let (batch, hq, sq, total, dv) = (q.batch, q.heads, q.seq, k.seq, v.size);
    let group = hq / k.heads;
    let mask = optional(inputs, 3)
        .map(|t| Mask::read(t, dtype, [batch, hq, sq, total]))
        .transpose()?;
    let nonpad = match optional(inputs, 6) {
        Some(t) => {
            let n = i64_operand(t, 6, "nonpad_kv_seqlen")?;
            if t.dims() != [batch] {
                return Err(shape_error(format!(
                    "nonpad_kv_seqlen must have shape ({batch}), got {}",
                    t.shape()
                )));
            }
            Some(n)
        }
        None => None,
    };
    // The spec scales Q and K by sqrt(scale) each.
    let root = attrs
        .scale
        .map_or(1.0 / (q.size as f64).sqrt(), f64::from)
        .sqrt();
    let factor = root * root;
    let softcap = f64::from(attrs.softcap);

    let mut y = vec![0.0; batch * hq * sq * dv];
    let want_qk = num_outputs == 4;
    let mut qk_out = if want_qk {
        vec![0.0; batch * hq * sq * total]
    } else {
        Vec::new()
    };
    let mut row = vec![0.0; total];
    for b in 0..batch {
        // Where the query block starts among the keys: after the past cache, or, for an
        // external cache, `nonpad_kv_seqlen - q_len` (negative when there are more queries
        // than valid keys, which masks the leading rows entirely).
        let offset = match (&nonpad, past_len) {
            (Some(n), 0) => n[b] - sq as i64,
            _ => past_len as i64,
        };
        for h in 0..hq {
            let hk = h / group;
            for i in 0..sq {
                let qa = q.at(b, h, i);
                let qrow = &q.data[qa..qa + q.size];
                let out_row = ((b * hq + h) * sq + i) * total;
                let position = i as i64 + offset;
                let mut attends_any = false;
                for (j, score) in row.iter_mut().enumerate() {
                    let ka = k.at(b, hk, j);
                    let dot: f64 = qrow
                        .iter()
                        .zip(&k.data[ka..ka + k.size])
                        .map(|(a, c)| a * c)
                        .sum();
                    let raw = dot * factor;
                    let capped = if softcap > 0.0 {
                        softcap * (raw / softcap).tanh()
                    } else {
                        raw
                    };
                    let mut bias = mask.as_ref().map_or(0.0, |m| m.at(b, h, i, j));
                    let distance = position - j as i64;
                    let [left, right] = attrs.window;
                    let masked = (attrs.is_causal && distance < 0)
                        || (left >= 0 && distance > left)
                        || (right >= 0 && -distance > right)
                        || nonpad.as_ref().is_some_and(|n| j as i64 >= n[b]);
                    if masked {
                        bias = f64::NEG_INFINITY;
                    }
                    attends_any |= bias != f64::NEG_INFINITY;
                    let biased = capped + bias;
                    if want_qk {
                        qk_out[out_row + j] = match attrs.qk_matmul_output_mode {
                            0 => raw,
                            1 => capped,
                            _ => biased,
                        };
                    }
                    *score = biased;
                }
                if attends_any {
                    // A row whose maximum is -inf (every finite score overflowed, say) is
                    // taken as zeros too, where the spec's numpy would divide 0 by 0.
                    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let shift = if max == f64::NEG_INFINITY { 0.0 } else { max };
                    let mut sum = 0.0;
                    for s in row.iter_mut() {
                        *s = (*s - shift).exp();
                        sum += *s;
                    }
                    let sum = if sum == 0.0 { 1.0 } else { sum };
                    for s in row.iter_mut() {
                        *s /= sum;
                    }
                } else {
                    // Every key is masked for this query: the spec gives a zero row (Y and
                    // mode-3 probabilities alike), decided on the bias, not the scores.
                    row.fill(0.0);
                }
                if want_qk && attrs.qk_matmul_output_mode == 3 {
                    qk_out[out_row..out_row + total].copy_from_slice(&row);
                }
                let ya = ((b * hq + h) * sq + i) * dv;
                for (j, &p) in row.iter().enumerate() {
                    let va = v.at(b, hk, j);
                    for (acc, &x) in y[ya..ya + dv].iter_mut().zip(&v.data[va..va + dv]) {
                        *acc += p * x;
                    }
                }
            }
        }
    }
    let y_shape = if rank == 3 {
        // (batch, q heads, seq, v size) back to (batch, seq, q heads · v size).
        let mut t = vec![0.0; y.len()];
        for b in 0..batch {
            for h in 0..hq {
                for i in 0..sq {
                    let from = ((b * hq + h) * sq + i) * dv;
                    let to = (b * sq + i) * hq * dv + h * dv;
                    t[to..to + dv].copy_from_slice(&y[from..from + dv]);
                }
            }
        }
        y = t;
        Shape::new(vec![batch, sq, hq * dv])
    } else {
        Shape::new(vec![batch, hq, sq, dv])
    };
    let mut outputs = vec![Tensor::from_f64(dtype, y_shape, y)?];
    if num_outputs >= 2 {
        outputs.push(Tensor::from_f64(dtype, Shape::new(k.dims()), k.data)?);
    }
    if num_outputs >= 3 {
        outputs.push(Tensor::from_f64(dtype, Shape::new(v.dims()), v.data)?);
    }
    if want_qk {
        let shape = Shape::new(vec![batch, hq, sq, total]);
        outputs.push(Tensor::from_f64(dtype, shape, qk_out)?);
    }
    Ok(outputs)
}

fn same_dtype(t: &Tensor, index: usize, name: &'static str, dtype: DType) -> Result<(), OpError> {
    if t.dtype() == dtype {
        Ok(())
    } else {
        Err(OpError::DType {
            index,
            name,
            expected: format!("{dtype} (the dtype of Q)"),
            actual: t.dtype(),
        })
    }
}

/// RotaryEmbedding: rotates the first `rotary_embedding_dim` values of each head (pairs
/// (k, k + dim/2), or (2k, 2k + 1) when interleaved) by the angle whose cosine and sine the
/// caches hold for the token's position.
fn rotary_embedding(
    interleaved: bool,
    num_heads: Option<usize>,
    rotary_dim: usize,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let err = |detail: String| OpError::Shape(format!("RotaryEmbedding: {detail}"));
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let cos_t = required(inputs, 1, "cos_cache")?;
    let sin_t = required(inputs, 2, "sin_cache")?;
    for (i, name, t) in [(1, "cos_cache", cos_t), (2, "sin_cache", sin_t)] {
        if !t.dtype().is_float() {
            return Err(OpError::DType {
                index: i,
                name,
                expected: format!("{} (the dtype of X)", x.dtype()),
                actual: t.dtype(),
            });
        }
    }
    // Element (b, s, h, d) of X sits at b·sb + s·ss + h·sh + d.
    let (batch, seq, heads, size, sb, ss, sh) = match *x.dims() {
        [b, h, s, d] => (b, s, h, d, h * s * d, d, s * d),
        [b, s, hidden] => {
            let heads = num_heads.filter(|&h| h > 0).ok_or(OpError::Attribute {
                name: "num_heads",
                detail: "RotaryEmbedding with a 3-D X needs it (at least 1)".into(),
            })?;
            if hidden % heads != 0 {
                return Err(err(format!(
                    "X {} has a hidden size that is not a multiple of num_heads = {heads}",
                    x.shape()
                )));
            }
            let d = hidden / heads;
            (b, s, heads, d, s * hidden, hidden, d)
        }
        _ => return Err(err(format!("X must be 3-D or 4-D, got {}", x.shape()))),
    };
    let rot = if rotary_dim == 0 { size } else { rotary_dim };
    if rot > size || rot % 2 != 0 {
        return Err(err(format!(
            "the rotary dimension {rot} must be even and at most the head size {size}"
        )));
    }
    let half = rot / 2;
    if cos_t.shape() != sin_t.shape() {
        return Err(err(format!(
            "cos_cache {} and sin_cache {} differ in shape",
            cos_t.shape(),
            sin_t.shape()
        )));
    }
    // The cache row of each (b, s).
    let rows: Vec<usize> = match optional(inputs, 3) {
        Some(p) => {
            let ids = i64_operand(p, 3, "position_ids")?;
            if p.dims() != [batch, seq] {
                return Err(err(format!(
                    "position_ids must have shape ({batch}, {seq}), got {}",
                    p.shape()
                )));
            }
            let max = match *cos_t.dims() {
                [m, h] if h == half => m,
                _ => {
                    return Err(err(format!(
                        "with position_ids the caches must be (max position + 1, {half}), got {}",
                        cos_t.shape()
                    )))
                }
            };
            ids.iter()
                .map(|&id| {
                    usize::try_from(id)
                        .ok()
                        .filter(|&i| i < max)
                        .ok_or_else(|| {
                            err(format!(
                                "position id {id} is outside the caches' {max} positions"
                            ))
                        })
                })
                .collect::<Result<_, _>>()?
        }
        None => {
            if cos_t.dims() != [batch, seq, half] {
                return Err(err(format!(
                    "without position_ids the caches must be ({batch}, {seq}, {half}), got {}",
                    cos_t.shape()
                )));
            }
            (0..batch * seq).collect()
        }
    };
    let cos = cos_t.to_f64_vec();
    let sin = sin_t.to_f64_vec();
    let v = x.to_f64_vec();
    let mut out = v.clone();
    for b in 0..batch {
        for s in 0..seq {
            let row = rows[b * seq + s] * half;
            for h in 0..heads {
                let base = b * sb + s * ss + h * sh;
                for k in 0..half {
                    let (i1, i2) = if interleaved {
                        (base + 2 * k, base + 2 * k + 1)
                    } else {
                        (base + k, base + k + half)
                    };
                    let (c, sn) = (cos[row + k], sin[row + k]);
                    let (x1, x2) = (v[i1], v[i2]);
                    out[i1] = c * x1 - sn * x2;
                    out[i2] = sn * x1 + c * x2;
                }
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}
