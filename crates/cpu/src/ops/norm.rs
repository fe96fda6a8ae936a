//! Normalisation kernels: Softmax (opset 13: along one axis), LayerNormalization (output Y
//! only) and BatchNormalization in inference mode. All compute in f64 and round once.

use super::elementwise::{broadcast_map, expect_same_dtype, nan_max};
use super::{expect_float, optional, required};
use concord_core::shape::normalize_axis;
use concord_core::{Op, OpError, Shape, Tensor};

/// Runs one normalisation op.
pub(crate) fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    match *op {
        Op::Softmax { axis } => softmax(axis, inputs),
        Op::LayerNormalization { axis, epsilon } => layer_normalization(axis, epsilon, inputs),
        Op::BatchNormalization { epsilon } => batch_normalization(epsilon, inputs),
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
    /// Splits `shape` around `axis` (already normalised, so `axis < rank`).
    fn around(shape: &Shape, axis: usize) -> Self {
        let dims = shape.dims();
        AxisView {
            outer: dims[..axis].iter().product(),
            n: dims[axis],
            inner: dims[axis + 1..].iter().product(),
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
/// overflow. A NaN anywhere along the axis makes that whole slice NaN, as in numpy.
fn softmax(axis: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    expect_float(x, 0, "input")?;
    let axis = resolve_axis("Softmax", axis, x)?;
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
                out[view.index(o, k, i)] /= sum;
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// LayerNormalization: each slice over axes [axis, rank) is normalised to zero mean and
/// unit variance (biased variance, epsilon inside the square root), then scaled by Scale
/// and shifted by B, both of which broadcast to the normalised shape.
fn layer_normalization(
    axis: i64,
    epsilon: f32,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
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
    let eps = f64::from(epsilon);
    // `inner` > 0 inside the loop: chunks_exact of an empty row length is not taken.
    if inner > 0 {
        for (row, out_row) in v.chunks_exact(inner).zip(out.chunks_exact_mut(inner)) {
            let mean = row.iter().sum::<f64>() / inner as f64;
            let var = row.iter().map(|&e| (e - mean) * (e - mean)).sum::<f64>() / inner as f64;
            let inv_std = 1.0 / (var + eps).sqrt();
            for (j, (&e, y)) in row.iter().zip(out_row.iter_mut()).enumerate() {
                let mut r = (e - mean) * inv_std * scale_v[scale_map[j]];
                if let Some((map, b)) = &bias_params {
                    r += b[map[j]];
                }
                *y = r;
            }
        }
    }
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
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
