//! Normalisation kernels: Softmax, LogSoftmax and Hardmax (opset 13: along one axis),
//! LayerNormalization (output Y only) and BatchNormalization in inference mode. All compute in f64 and round once.

use super::elementwise::{broadcast_map, expect_same_dtype, nan_max};
use super::{expect_float, optional, required};
use concord_core::shape::normalize_axis;
use concord_core::{DType, Op, OpError, Shape, Tensor};

/// Runs one normalisation op.
pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    if let Op::LayerNormalization { axis, epsilon } = *op {
        return layer_normalization(axis, epsilon, inputs, num_outputs);
    }
    single(op, inputs).map(|t| vec![t])
}

/// The normalisation ops with one output.
fn single(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    match *op {
        Op::Softmax { axis } => softmax(axis, false, inputs),
        Op::LogSoftmax { axis } => softmax(axis, true, inputs),
        Op::Hardmax { axis } => hardmax(axis, inputs),
        Op::BatchNormalization { epsilon } => batch_normalization(epsilon, inputs),
        Op::InstanceNormalization { epsilon } => {
            group_norm("InstanceNormalization", epsilon, None, inputs)
        }
        Op::GroupNormalization {
            epsilon,
            num_groups,
        } => group_norm("GroupNormalization", epsilon, Some(num_groups), inputs),
        Op::RMSNormalization { axis, epsilon } => rms_normalization(axis, epsilon, inputs),
        Op::LpNormalization { axis, p } => lp_normalization(axis, p, inputs),
        Op::MeanVarianceNormalization { ref axes } => mean_variance(axes, inputs),
        Op::LRN {
            alpha,
            beta,
            bias,
            size,
        } => lrn(alpha, beta, bias, size, inputs),
        ref other => Err(OpError::Unsupported(format!(
            "{} is not a normalisation op",
            other.name()
        ))),
    }
}

/// A tensor viewed as (outer, n, inner) around one axis: element (o, k, i) sits at
/// `(o * n + k) * inner + i`.
struct AxisView {
    outer: usize,
    n: usize,
    inner: usize,
}

impl AxisView {
    /// Splits `shape` around `axis` (already normalised, so `axis < rank`); an empty
    /// shape walks nothing ([`super::walk_extents`]).
    fn around(shape: &Shape, axis: usize) -> Self {
        let dims = shape.dims();
        let (outer, inner) = super::walk_extents(dims, axis);
        AxisView {
            outer,
            n: dims[axis],
            inner,
        }
    }

    fn index(&self, o: usize, k: usize, i: usize) -> usize {
        (o * self.n + k) * self.inner + i
    }
}

/// Resolves an op's `axis` attribute against the rank of input 0, naming the shape.
fn resolve_axis(op: &str, axis: i64, x: &Tensor) -> Result<usize, OpError> {
    normalize_axis(axis, x.rank()).map_err(|_| OpError::Attribute {
        name: "axis",
        detail: format!(
            "{op}: axis {axis} is out of range for input 0 of shape {} (rank {})",
            x.shape(),
            x.rank()
        ),
    })
}

/// Softmax along `axis`: exp(x - max) / Σ exp(x - max), so that large inputs cannot
/// overflow; LogSoftmax (`log`) is (x - max) - ln Σ exp(x - max), computed directly rather
/// than as the log of a softmax that may have underflowed to 0. A NaN anywhere along the
/// axis makes that whole slice NaN, as in numpy.
fn softmax(axis: i64, log: bool, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    expect_float(x, 0, "input")?;
    let op = if log { "LogSoftmax" } else { "Softmax" };
    let axis = resolve_axis(op, axis, x)?;
    let view = AxisView::around(x.shape(), axis);
    let v = x.to_f64_vec();
    let mut out = vec![0.0f64; v.len()];
    for o in 0..view.outer {
        for i in 0..view.inner {
            let max = (0..view.n)
                .map(|k| v[view.index(o, k, i)])
                .fold(f64::NEG_INFINITY, nan_max);
            let mut sum = 0.0;
            for k in 0..view.n {
                let e = (v[view.index(o, k, i)] - max).exp();
                out[view.index(o, k, i)] = e;
                sum += e;
            }
            for k in 0..view.n {
                let at = view.index(o, k, i);
                out[at] = if log {
                    v[at] - max - sum.ln()
                } else {
                    out[at] / sum
                };
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// LayerNormalization: each slice over axes [axis, rank) is normalised to zero mean and
/// unit variance (biased variance, epsilon inside the square root), then scaled by Scale
/// and shifted by B, both of which broadcast to the normalised shape.
/// LayerNormalization's Y, and with `num_outputs` 3 its Mean and InvStdDev (f32, the
/// stash type 1; the normalised axes kept as extent 1).
fn layer_normalization(
    axis: i64,
    epsilon: f32,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let scale = required(inputs, 1, "Scale")?;
    let bias = optional(inputs, 2);
    let axis = resolve_axis("LayerNormalization", axis, x)?;
    let normalized = Shape::new(&x.dims()[axis..]);
    let param_map = |t: &Tensor, index: usize, name: &'static str| {
        expect_same_dtype(t, index, name, x.dtype(), "input 0 (X)")?;
        broadcast_map(&normalized, t.shape()).map_err(|_| {
            OpError::Shape(format!(
                "LayerNormalization: input {index} ({name}) has shape {}, which does not \
                 broadcast to the normalised shape {normalized} (input 0 (X) {} from axis \
                 {axis})",
                t.shape(),
                x.shape()
            ))
        })
    };
    let scale_map = param_map(scale, 1, "Scale")?;
    let scale_v = scale.to_f64_vec();
    let bias_params = match bias {
        Some(b) => Some((param_map(b, 2, "B")?, b.to_f64_vec())),
        None => None,
    };

    let inner = normalized.numel();
    let v = x.to_f64_vec();
    let mut out = vec![0.0f64; v.len()];
    let mut means = Vec::new();
    let mut inv_stds = Vec::new();
    let eps = f64::from(epsilon);
    // `inner` > 0 inside the loop: chunks_exact of an empty row length is not taken.
    if inner > 0 {
        for (row, out_row) in v.chunks_exact(inner).zip(out.chunks_exact_mut(inner)) {
            let mean = row.iter().sum::<f64>() / inner as f64;
            let var = row.iter().map(|&e| (e - mean) * (e - mean)).sum::<f64>() / inner as f64;
            let inv_std = 1.0 / (var + eps).sqrt();
            means.push(mean);
            inv_stds.push(inv_std);
            for (j, (&e, y)) in row.iter().zip(out_row.iter_mut()).enumerate() {
                let mut r = (e - mean) * inv_std * scale_v[scale_map[j]];
                if let Some((map, b)) = &bias_params {
                    r += b[map[j]];
                }
                *y = r;
            }
        }
    }
    let y = Tensor::from_f64(x.dtype(), x.shape().clone(), out)?;
    if num_outputs <= 1 {
        return Ok(vec![y]);
    }
    let mut stat_dims = x.dims()[..axis].to_vec();
    stat_dims.resize(x.rank(), 1);
    let mean = Tensor::from_f64(DType::F32, Shape::new(stat_dims.clone()), means)?;
    let inv = Tensor::from_f64(DType::F32, Shape::new(stat_dims), inv_stds)?;
    let mut outs = vec![y, mean, inv];
    outs.truncate(num_outputs);
    Ok(outs)
}

/// BatchNormalization, inference mode: y = (x - mean[c]) / √(var[c] + ε) · scale[c] + B[c]
/// for X of shape (N, C, D1, …) and per-channel parameters of shape (C).
fn batch_normalization(epsilon: f32, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    if x.rank() < 2 {
        return Err(OpError::Shape(format!(
            "BatchNormalization: input 0 (X) has shape {}; it needs rank 2 or more (N, C, …)",
            x.shape()
        )));
    }
    let channels = x.dims()[1];
    let param = |index: usize, name: &'static str| -> Result<Vec<f64>, OpError> {
        let t = required(inputs, index, name)?;
        expect_float(t, index, name)?;
        if t.dims() != [channels] {
            return Err(OpError::Shape(format!(
                "BatchNormalization: input {index} ({name}) has shape {}, expected [{channels}] \
                 (the channel dim of input 0 (X) {})",
                t.shape(),
                x.shape()
            )));
        }
        Ok(t.to_f64_vec())
    };
    let scale = param(1, "scale")?;
    let bias = param(2, "B")?;
    let mean = param(3, "input_mean")?;
    let var = param(4, "input_var")?;
    let eps = f64::from(epsilon);
    let view = AxisView::around(x.shape(), 1);
    let v = x.to_f64_vec();
    let mut out = vec![0.0f64; v.len()];
    for o in 0..view.outer {
        for c in 0..view.n {
            let inv_std = 1.0 / (var[c] + eps).sqrt();
            for i in 0..view.inner {
                let at = view.index(o, c, i);
                out[at] = (v[at] - mean[c]) * inv_std * scale[c] + bias[c];
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// Hardmax along `axis`: 1 at the first largest value of each slice, 0 elsewhere (a NaN
/// counts as largest, as numpy's argmax has it).
fn hardmax(axis: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    expect_float(x, 0, "input")?;
    let axis = resolve_axis("Hardmax", axis, x)?;
    let view = AxisView::around(x.shape(), axis);
    let v = x.to_f64_vec();
    let mut out = vec![0.0f64; v.len()];
    for o in 0..view.outer {
        for i in 0..view.inner {
            let mut best: Option<usize> = None;
            for k in 0..view.n {
                let at = view.index(o, k, i);
                let better = match best {
                    None => true,
                    Some(b) => (v[at].is_nan() && !v[b].is_nan()) || v[at] > v[b],
                };
                if better {
                    best = Some(at);
                }
            }
            if let Some(b) = best {
                out[b] = 1.0;
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// One float parameter vector of `len` entries, or an error naming it.
fn param(
    inputs: &[Option<&Tensor>],
    index: usize,
    name: &'static str,
    op: &str,
    len: usize,
) -> Result<Vec<f64>, OpError> {
    let t = required(inputs, index, name)?;
    expect_float(t, index, name)?;
    if t.len() != len {
        return Err(OpError::Shape(format!(
            "{op}: input {index} ({name}) has shape {}, expected {len} elements",
            t.shape()
        )));
    }
    Ok(t.to_f64_vec())
}

/// InstanceNormalization (`groups` None: one group per channel) and GroupNormalization:
/// (x - mean) / sqrt(var + epsilon) over each sample's group of channels and the spatial
/// axes, then scale and bias per channel (or per group, opset 18's form).
fn group_norm(
    op: &str,
    epsilon: f32,
    groups: Option<usize>,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let dims = x.dims();
    if dims.len() < 2 {
        return Err(OpError::Shape(format!(
            "{op} needs X of rank 2 or more, got {}",
            x.shape()
        )));
    }
    let (n, c) = (dims[0], dims[1]);
    let g = groups.unwrap_or(c);
    if g == 0 || c % g != 0 {
        return Err(OpError::Attribute {
            name: "num_groups",
            detail: format!("{op}: {g} groups do not divide {c} channels"),
        });
    }
    let scale_t = required(inputs, 1, "scale")?;
    // Per channel, or (GroupNormalization opset 18) per group.
    let per_group = groups.is_some() && scale_t.len() == g && g != c;
    let plen = if per_group { g } else { c };
    let scale = param(inputs, 1, "scale", op, plen)?;
    let bias = param(inputs, 2, "B", op, plen)?;
    if x.is_empty() {
        // Nothing to normalise, and N alone may be 2^62 blocks of nothing.
        return Ok(x.clone());
    }
    // X has elements, so this product is bounded by its length.
    let spatial: usize = dims[2..].iter().product();
    let v = x.to_f64_vec();
    let mut out = vec![0.0; v.len()];
    let cg = c / g;
    let block = cg * spatial;
    let eps = f64::from(epsilon);
    for s in 0..n {
        for gi in 0..g {
            let start = (s * c + gi * cg) * spatial;
            let slice = &v[start..start + block];
            let mean = slice.iter().sum::<f64>() / block.max(1) as f64;
            let var =
                slice.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / block.max(1) as f64;
            let inv = 1.0 / (var + eps).sqrt();
            for (k, &xv) in slice.iter().enumerate() {
                let ch = gi * cg + k / spatial.max(1);
                let p = if per_group { gi } else { ch };
                out[start + k] = (xv - mean) * inv * scale[p] + bias[p];
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// RMSNormalization: x / sqrt(mean(x²) + epsilon) over the axes from `axis` on, times a
/// scale broadcast to those axes.
fn rms_normalization(
    axis: i64,
    epsilon: f32,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let axis = resolve_axis("RMSNormalization", axis, x)?;
    let inner = super::walk_product(x.dims(), &x.dims()[axis..]);
    let scale_t = required(inputs, 1, "scale")?;
    let scale_shape = Shape::from(&x.dims()[axis..]);
    let scale_map = broadcast_map(&scale_shape, scale_t.shape())?;
    let scale = scale_t.to_f64_vec();
    let v = x.to_f64_vec();
    let mut out = vec![0.0; v.len()];
    let eps = f64::from(epsilon);
    for (row, chunk) in v.chunks(inner.max(1)).enumerate() {
        let ms = chunk.iter().map(|x| x * x).sum::<f64>() / inner.max(1) as f64;
        let inv = 1.0 / (ms + eps).sqrt();
        for (k, &xv) in chunk.iter().enumerate() {
            out[row * inner + k] = xv * inv * scale[scale_map[k]];
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// LpNormalization: x / ||x||_p along `axis` (p 1 or 2). A zero norm (every element along
/// the axis zero) gives zeros, not 0/0: the spec says so from onnx 1.23 for every opset,
/// and onnxruntime 1.23.2 computes zeros too.
fn lp_normalization(axis: i64, p: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    expect_float(x, 0, "input")?;
    if p != 1 && p != 2 {
        return Err(OpError::Attribute {
            name: "p",
            detail: format!("LpNormalization: p must be 1 or 2, got {p}"),
        });
    }
    let axis = resolve_axis("LpNormalization", axis, x)?;
    let view = AxisView::around(x.shape(), axis);
    let v = x.to_f64_vec();
    let mut out = vec![0.0; v.len()];
    for o in 0..view.outer {
        for i in 0..view.inner {
            let norm = (0..view.n)
                .map(|k| v[view.index(o, k, i)].abs().powi(p as i32))
                .sum::<f64>()
                .powf(1.0 / p as f64);
            for k in 0..view.n {
                let at = view.index(o, k, i);
                out[at] = if norm == 0.0 { 0.0 } else { v[at] / norm };
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9) over `axes`, as the
/// op's ONNX function body defines it.
fn mean_variance(axes: &[i64], inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let rank = x.rank();
    let axes = concord_core::shape::normalize_axes(axes, rank)?;
    if x.is_empty() {
        // Nothing to normalise; the kept axes' product, which sizes the sums below, is
        // bounded by the element count only when there are elements.
        return Ok(x.clone());
    }
    let dims = x.dims();
    let strides = x.shape().strides();
    // The cell of each element: its coordinates on the kept axes.
    let mut cell_of = Vec::with_capacity(x.len());
    let mut cells = 1usize;
    let kept: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    for &a in &kept {
        cells *= dims[a];
    }
    for flat in 0..x.len() {
        let mut cell = 0;
        for &a in &kept {
            cell = cell * dims[a] + (flat / strides[a]) % dims[a];
        }
        cell_of.push(cell);
    }
    let count = (x.len() / cells.max(1)).max(1) as f64;
    let v = x.to_f64_vec();
    let mut sum = vec![0.0; cells];
    let mut sq = vec![0.0; cells];
    for (&c, &xv) in cell_of.iter().zip(&v) {
        sum[c] += xv;
        sq[c] += xv * xv;
    }
    let out = cell_of
        .iter()
        .zip(&v)
        .map(|(&c, &xv)| {
            let mean = sum[c] / count;
            let var = sq[c] / count - mean * mean;
            (xv - mean) / (var.sqrt() + 1e-9)
        })
        .collect();
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// LRN: x / (bias + alpha / size · Σ x²)^beta, the sum over the `size` channels around each
/// (floor((size-1)/2) before, ceil((size-1)/2) after).
fn lrn(
    alpha: f32,
    beta: f32,
    bias: f32,
    size: usize,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let dims = x.dims();
    if dims.len() < 2 || size == 0 {
        return Err(OpError::Shape(format!(
            "LRN needs X of rank 2 or more and size >= 1, got {} and {size}",
            x.shape()
        )));
    }
    let (n, c) = (dims[0], dims[1]);
    if x.is_empty() {
        // Nothing to normalise, and N alone may be 2^62 blocks of nothing.
        return Ok(x.clone());
    }
    // X has elements, so this product is bounded by its length.
    let spatial: usize = dims[2..].iter().product();
    let before = (size - 1) / 2;
    let after = size - 1 - before;
    let v = x.to_f64_vec();
    let (alpha, beta, bias) = (f64::from(alpha), f64::from(beta), f64::from(bias));
    let mut out = vec![0.0; v.len()];
    for s in 0..n {
        for ch in 0..c {
            let lo = ch.saturating_sub(before);
            let hi = (ch + after).min(c - 1);
            for p in 0..spatial {
                let sq: f64 = (lo..=hi)
                    .map(|k| v[(s * c + k) * spatial + p].powi(2))
                    .sum();
                let at = (s * c + ch) * spatial + p;
                out[at] = v[at] / (bias + alpha / size as f64 * sq).powf(beta);
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}
