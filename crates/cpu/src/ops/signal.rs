//! Signal kernels: the window functions (HannWindow, HammingWindow, BlackmanWindow), DFT,
//! STFT and MelWeightMatrix, in f64 and rounded once to the output type.
//!
//! DFT sums every term directly (no fast transform), with each twiddle angle reduced
//! exactly as `2π·(k·n mod L)/L` so that long signals lose no accuracy to large angles.
//!
//! The twiddle tables and the f64 outputs are sized by `dft_length` and the operands'
//! values, which the output gate (`check_outputs_fit`) does not always see (an empty
//! output with a `dft_length` of 10^9), so each kernel checks its own scratch against the
//! memory budget, returns an empty output before making any, and checks the run's deadline
//! once per output element (each sums up to `dft_length` terms).

use super::spatial::checked_product;
use super::{optional, required};
use concord_core::deadline::Ticker;
use concord_core::op::{Op, WindowKind};
use concord_core::{DType, Deadline, MemoryBudget, OpError, Shape, Tensor};
use std::f64::consts::PI;

pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
    deadline: Option<Deadline>,
) -> Result<Tensor, OpError> {
    let limits = Limits { budget, deadline };
    match op {
        Op::Window {
            kind,
            periodic,
            dtype,
        } => window(*kind, *periodic, *dtype, inputs),
        Op::Dft {
            axis,
            inverse,
            onesided,
        } => dft(*axis, *inverse, *onesided, inputs, limits),
        Op::Stft { onesided } => stft(*onesided, inputs, limits),
        Op::MelWeightMatrix { dtype } => mel_weight_matrix(*dtype, inputs, budget),
        other => Err(super::not_in_family(other)),
    }
}

/// What a transform's scratch and loops are held to.
#[derive(Clone, Copy)]
struct Limits {
    budget: MemoryBudget,
    deadline: Option<Deadline>,
}

impl Limits {
    /// Checks that the two twiddle tables (cos and sin) of `length` entries each and an
    /// f64 output of `out_len` elements fit in the budget, for `op`.
    fn check_scratch(self, op: &str, length: usize, out_len: usize) -> Result<(), OpError> {
        let elements = length.checked_mul(2).and_then(|t| t.checked_add(out_len));
        let bytes = elements.and_then(|e| e.checked_mul(8)).map(|b| b as u64);
        self.budget
            .check_bytes(bytes, || {
                format!(
                    "{op}'s twiddle tables of {length} entries and f64 output of {out_len} \
                     elements"
                )
            })
            .map(|_| ())
    }
}

/// A shape of `dims` with `axis` replaced by `extent` and the last axis by `parts`, and its
/// element count, checked.
fn transformed(
    dims: &[usize],
    axis: usize,
    extent: usize,
    parts: usize,
    op: &str,
) -> Result<(Vec<usize>, usize), OpError> {
    let mut shape = dims.to_vec();
    shape[axis] = extent;
    if let Some(last) = shape.last_mut() {
        *last = parts;
    }
    let len = checked_product(&shape, op)?;
    Ok((shape, len))
}

/// The single integer of a one-element i32/i64 input.
fn int_scalar(t: &Tensor, index: usize, name: &'static str) -> Result<i64, OpError> {
    match (t.dtype(), t.to_i64_vec().as_deref()) {
        (DType::I64 | DType::I32, Some([n])) => Ok(*n),
        (DType::I64 | DType::I32, _) => Err(OpError::Shape(format!(
            "input {index} ({name}) must hold one value, got shape {}",
            t.shape()
        ))),
        (actual, _) => Err(OpError::DType {
            index,
            name,
            expected: "i64 or i32".to_string(),
            actual,
        }),
    }
}

/// The window's value at `n` of `size`: the generalised cosine window
/// a0 − a1·cos(2πn/D) + a2·cos(4πn/D), D = size (periodic) or size − 1 (symmetric).
fn window_value(kind: WindowKind, periodic: bool, size: usize, n: usize) -> f64 {
    let (a0, a1, a2) = match kind {
        WindowKind::Hann => (0.5, 0.5, 0.0),
        // ONNX's Hamming coefficients are 25/46 and 21/46 (not 0.54 and 0.46).
        WindowKind::Hamming => (25.0 / 46.0, 21.0 / 46.0, 0.0),
        WindowKind::Blackman => (0.42, 0.5, 0.08),
    };
    let d = if periodic { size } else { size - 1 };
    // A symmetric window of one sample divides 0 by 0 and is NaN: the spec's formula, the
    // ONNX reference and onnxruntime 1.23 all give NaN there (numpy's windows give 1), and
    // Concord follows them; the golden case `windows` checks it.
    let x = 2.0 * PI * n as f64 / d as f64;
    a0 - a1 * x.cos() + a2 * (2.0 * x).cos()
}

fn window(
    kind: WindowKind,
    periodic: bool,
    dtype: DType,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let size = int_scalar(required(inputs, 0, "size")?, 0, "size")?;
    let size = usize::try_from(size).map_err(|_| {
        OpError::Shape(format!(
            "{} needs a size of 0 or more, got {size}",
            kind.name()
        ))
    })?;
    let values = (0..size)
        .map(|n| window_value(kind, periodic, size, n))
        .collect();
    Tensor::from_f64(dtype, Shape::new(vec![size]), values)
}

fn dft(
    axis: Option<i64>,
    inverse: bool,
    onesided: bool,
    inputs: &[Option<&Tensor>],
    limits: Limits,
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    if !x.dtype().is_float() {
        return Err(OpError::DType {
            index: 0,
            name: "input",
            expected: "a float type".to_string(),
            actual: x.dtype(),
        });
    }
    let dims = x.dims();
    let rank = dims.len();
    let parts = match dims.last() {
        Some(&p @ (1 | 2)) if rank >= 2 => p,
        _ => {
            return Err(OpError::Shape(format!(
                "DFT needs input (…, N, 1) real or (…, N, 2) complex, got {}",
                x.shape()
            )))
        }
    };
    let axis = match axis {
        Some(a) => a,
        None => match optional(inputs, 2) {
            Some(t) => int_scalar(t, 2, "axis")?,
            None => -2,
        },
    };
    let r = rank as i64;
    let resolved = if axis < 0 { axis + r } else { axis };
    if resolved < 0 || resolved > r - 2 {
        return Err(OpError::Shape(format!(
            "DFT axis {axis} is out of range for input {} (the last axis holds the real and \
             imaginary parts)",
            x.shape()
        )));
    }
    let axis = resolved as usize;
    let n_in = dims[axis];
    if onesided && inverse {
        return irfft(x, axis, parts, inputs, limits);
    }
    let length = match optional(inputs, 1) {
        Some(t) => {
            let l = int_scalar(t, 1, "dft_length")?;
            usize::try_from(l).ok().filter(|&l| l >= 1).ok_or_else(|| {
                OpError::Shape(format!("DFT needs a dft_length of 1 or more, got {l}"))
            })?
        }
        None => n_in,
    };
    let k_out = if onesided { length / 2 + 1 } else { length };
    let (shape, out_len) = transformed(dims, axis, k_out, 2, "DFT output shape")?;
    if out_len == 0 {
        return Tensor::from_f64(x.dtype(), Shape::new(shape), Vec::new());
    }
    limits.check_scratch("DFT", length, out_len)?;
    // The output is not empty, so neither is the input outside `axis` (and the last): these
    // products are bounded by the output's length.
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..rank - 1].iter().product();
    let values = x.to_f64_vec();
    // Signal samples past dft_length are dropped; those past the input are zeros.
    let used = n_in.min(length);
    let sign = if inverse { 1.0 } else { -1.0 };
    let scale = if inverse { 1.0 / length as f64 } else { 1.0 };
    let (cos, sin): (Vec<f64>, Vec<f64>) = (0..length.max(1))
        .map(|m| {
            let angle = sign * 2.0 * PI * m as f64 / length as f64;
            (angle.cos(), angle.sin())
        })
        .unzip();
    let mut out = vec![0.0; out_len];
    let mut ticker = Ticker::new(limits.deadline);
    for o in 0..outer {
        for i in 0..inner {
            for k in 0..k_out {
                ticker.tick(|| format!("DFT's output bin {k} of {k_out}"))?;
                let (mut re, mut im) = (0.0, 0.0);
                for n in 0..used {
                    let at = ((o * n_in + n) * inner + i) * parts;
                    let xr = values[at];
                    let xi = if parts == 2 { values[at + 1] } else { 0.0 };
                    let m = (k * n) % length;
                    re += xr * cos[m] - xi * sin[m];
                    im += xr * sin[m] + xi * cos[m];
                }
                let at = ((o * k_out + k) * inner + i) * 2;
                out[at] = re * scale;
                out[at + 1] = im * scale;
            }
        }
    }
    Tensor::from_f64(x.dtype(), Shape::new(shape), out)
}

/// DFT with `inverse = 1, onesided = 1` (IRFFT, which onnx 1.23 defines for DFT-17 and
/// DFT-20): the input holds bins 0 ..= N/2 of a conjugate-symmetric spectrum (missing bins
/// are zeros, extra ones ignored), and the output is the real signal of N = dft_length
/// samples (by default 2 · (bins - 1)), last axis 1. Each sample is the real part of the
/// inverse transform of the spectrum completed by symmetry (X[N - k] = conj X[k]), so the
/// imaginary parts of bin 0 and, for even N, bin N/2 drop out, as numpy's irfft does.
fn irfft(
    x: &Tensor,
    axis: usize,
    parts: usize,
    inputs: &[Option<&Tensor>],
    limits: Limits,
) -> Result<Tensor, OpError> {
    let dims = x.dims();
    let rank = dims.len();
    if parts != 2 {
        return Err(OpError::Shape(format!(
            "an inverse one-sided DFT (IRFFT) needs a complex input (…, 2), got {}",
            x.shape()
        )));
    }
    let bins = dims[axis];
    let length = match optional(inputs, 1) {
        Some(t) => {
            let l = int_scalar(t, 1, "dft_length")?;
            usize::try_from(l).ok().filter(|&l| l >= 1).ok_or_else(|| {
                OpError::Shape(format!("DFT needs a dft_length of 1 or more, got {l}"))
            })?
        }
        None if bins >= 2 => 2 * (bins - 1),
        None => {
            return Err(OpError::Shape(format!(
                "an inverse one-sided DFT (IRFFT) of {bins} bins needs dft_length: its default \
                 2 · (bins - 1) is 0"
            )))
        }
    };
    let (shape, out_len) = transformed(dims, axis, length, 1, "IRFFT output shape")?;
    if out_len == 0 {
        return Tensor::from_f64(x.dtype(), Shape::new(shape), Vec::new());
    }
    limits.check_scratch("DFT (IRFFT)", length, out_len)?;
    // The output is not empty: these products are bounded by its length.
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..rank - 1].iter().product();
    let values = x.to_f64_vec();
    let (cos, sin): (Vec<f64>, Vec<f64>) = (0..length)
        .map(|m| {
            let angle = 2.0 * PI * m as f64 / length as f64;
            (angle.cos(), angle.sin())
        })
        .unzip();
    // The spectrum bin k (0 ≤ k < N): stored for k ≤ N/2, the conjugate of bin N - k above.
    let bin = |o: usize, i: usize, k: usize| -> (f64, f64) {
        let (k, conj) = if k <= length / 2 {
            (k, false)
        } else {
            (length - k, true)
        };
        if k >= bins {
            return (0.0, 0.0);
        }
        let at = ((o * bins + k) * inner + i) * 2;
        let (re, im) = (values[at], values[at + 1]);
        (re, if conj { -im } else { im })
    };
    let mut out = vec![0.0; out_len];
    let mut ticker = Ticker::new(limits.deadline);
    for o in 0..outer {
        for i in 0..inner {
            for n in 0..length {
                ticker.tick(|| format!("IRFFT's output sample {n} of {length}"))?;
                let mut re = 0.0;
                for k in 0..length {
                    let (xr, xi) = bin(o, i, k);
                    let m = (k * n) % length;
                    re += xr * cos[m] - xi * sin[m];
                }
                out[(o * length + n) * inner + i] = re / length as f64;
            }
        }
    }
    Tensor::from_f64(x.dtype(), Shape::new(shape), out)
}

fn stft(onesided: bool, inputs: &[Option<&Tensor>], limits: Limits) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "signal")?;
    if !x.dtype().is_float() {
        return Err(OpError::DType {
            index: 0,
            name: "signal",
            expected: "a float type".to_string(),
            actual: x.dtype(),
        });
    }
    let (batch, len, parts) = match *x.dims() {
        [b, l, p @ (1 | 2)] => (b, l, p),
        _ => {
            return Err(OpError::Shape(format!(
                "STFT needs signal (batch, L, 1) or (batch, L, 2), got {}",
                x.shape()
            )))
        }
    };
    let step = int_scalar(required(inputs, 1, "frame_step")?, 1, "frame_step")?;
    let step = usize::try_from(step)
        .ok()
        .filter(|&s| s >= 1)
        .ok_or_else(|| {
            OpError::Shape(format!("STFT needs a frame_step of 1 or more, got {step}"))
        })?;
    let window = optional(inputs, 2).map(|w| (w.dims().to_vec(), w.to_f64_vec()));
    let frame = match (optional(inputs, 3), &window) {
        (Some(l), _) => {
            let l = int_scalar(l, 3, "frame_length")?;
            usize::try_from(l).map_err(|_| {
                OpError::Shape(format!("STFT needs a frame_length of 1 or more, got {l}"))
            })?
        }
        (None, Some((dims, _))) if dims.len() == 1 => dims[0],
        (None, Some((dims, _))) => {
            return Err(OpError::Shape(format!(
                "STFT needs a 1-D window, got {}",
                Shape::new(dims.clone())
            )))
        }
        (None, None) => {
            return Err(OpError::MissingInput {
                index: 3,
                name: "frame_length (or window)",
            })
        }
    };
    if let Some((dims, _)) = &window {
        if dims.as_slice() != [frame] {
            return Err(OpError::Shape(format!(
                "STFT window {} does not match frame_length {frame}",
                Shape::new(dims.clone())
            )));
        }
    }
    if frame == 0 || frame > len {
        return Err(OpError::Shape(format!(
            "STFT frame_length {frame} must be 1 to the signal length {len}"
        )));
    }
    let frames = (len - frame) / step + 1;
    let bins = if onesided { frame / 2 + 1 } else { frame };
    let out_shape = vec![batch, frames, bins, 2];
    let out_len = checked_product(&out_shape, "STFT output shape")?;
    if out_len == 0 {
        return Tensor::from_f64(x.dtype(), Shape::new(out_shape), Vec::new());
    }
    limits.check_scratch("STFT", frame, out_len)?;
    let values = x.to_f64_vec();
    let (cos, sin): (Vec<f64>, Vec<f64>) = (0..frame)
        .map(|m| {
            let angle = -2.0 * PI * m as f64 / frame as f64;
            (angle.cos(), angle.sin())
        })
        .unzip();
    let mut out = vec![0.0; out_len];
    let mut ticker = Ticker::new(limits.deadline);
    for b in 0..batch {
        for f in 0..frames {
            for k in 0..bins {
                ticker.tick(|| format!("STFT's bin {k} of frame {f}"))?;
                let (mut re, mut im) = (0.0, 0.0);
                for n in 0..frame {
                    let w = window.as_ref().map_or(1.0, |(_, w)| w[n]);
                    let at = (b * len + f * step + n) * parts;
                    let xr = values[at] * w;
                    let xi = if parts == 2 { values[at + 1] * w } else { 0.0 };
                    let m = (k * n) % frame;
                    re += xr * cos[m] - xi * sin[m];
                    im += xr * sin[m] + xi * cos[m];
                }
                let at = ((b * frames + f) * bins + k) * 2;
                out[at] = re;
                out[at + 1] = im;
            }
        }
    }
    Tensor::from_f64(x.dtype(), Shape::new(out_shape), out)
}

/// The mel scale: mel(f) = 2595·log10(1 + f/700).
fn hz_to_mel(hz: f64) -> f64 {
    2595.0 * (1.0 + hz / 700.0).log10()
}

fn mel_to_hz(mel: f64) -> f64 {
    700.0 * (10f64.powf(mel / 2595.0) - 1.0)
}

/// The single value of a one-element float input.
fn float_scalar(t: &Tensor, index: usize, name: &'static str) -> Result<f64, OpError> {
    match t.to_f64_vec().as_slice() {
        [v] if t.dtype().is_float() => Ok(*v),
        _ if !t.dtype().is_float() => Err(OpError::DType {
            index,
            name,
            expected: "a float type".to_string(),
            actual: t.dtype(),
        }),
        _ => Err(OpError::Shape(format!(
            "input {index} ({name}) must hold one value, got shape {}",
            t.shape()
        ))),
    }
}

/// A positive integer scalar operand.
fn positive(
    inputs: &[Option<&Tensor>],
    index: usize,
    name: &'static str,
) -> Result<usize, OpError> {
    let n = int_scalar(required(inputs, index, name)?, index, name)?;
    usize::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| {
        OpError::Shape(format!(
            "MelWeightMatrix needs a {name} of 1 or more, got {n}"
        ))
    })
}

/// MelWeightMatrix as the ONNX reference implementation and onnxruntime compute it (and the
/// node test's data says): the mel range is cut into num_mel_bins + 2 equal steps (so the
/// top filter's right edge stops one step short of upper_edge_hertz), each point maps to
/// spectrogram bin floor((dft_length + 1)·hz / sample_rate), and filter m rises linearly
/// from its left point to 1 at its centre and falls to 0 at its right point; a filter whose
/// left point is its centre is 1 there. The output is (dft_length/2 + 1, num_mel_bins).
fn mel_weight_matrix(
    dtype: DType,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
) -> Result<Tensor, OpError> {
    let mel_bins = positive(inputs, 0, "num_mel_bins")?;
    let dft_length = positive(inputs, 1, "dft_length")?;
    let sample_rate = positive(inputs, 2, "sample_rate")?;
    let lower = float_scalar(
        required(inputs, 3, "lower_edge_hertz")?,
        3,
        "lower_edge_hertz",
    )?;
    let upper = float_scalar(
        required(inputs, 4, "upper_edge_hertz")?,
        4,
        "upper_edge_hertz",
    )?;
    if !lower.is_finite() || !upper.is_finite() {
        return Err(OpError::Shape(format!(
            "MelWeightMatrix needs finite edges, got lower_edge_hertz {lower} and \
             upper_edge_hertz {upper}"
        )));
    }
    let spectrogram_bins = dft_length / 2 + 1;
    let len = spectrogram_bins.checked_mul(mel_bins).ok_or_else(|| {
        OpError::Shape(format!(
            "MelWeightMatrix: {spectrogram_bins} × {mel_bins} elements is too many"
        ))
    })?;
    // The f64 output and the filter edges (fewer than the output's elements).
    budget.check_bytes(len.checked_mul(16).map(|b| b as u64), || {
        format!("MelWeightMatrix's {spectrogram_bins}x{mel_bins} f64 output and edges")
    })?;
    let points = mel_bins + 2;
    let (low_mel, high_mel) = (hz_to_mel(lower), hz_to_mel(upper));
    let step = (high_mel - low_mel) / points as f64;
    let bins: Vec<i64> = (0..points)
        .map(|i| {
            let hz = mel_to_hz(low_mel + step * i as f64);
            ((dft_length as f64 + 1.0) * hz / sample_rate as f64).floor() as i64
        })
        .collect();
    let mut out = vec![0.0; len];
    let mut set = |bin: i64, mel: usize, value: f64| match usize::try_from(bin) {
        Ok(b) if b < spectrogram_bins => {
            out[b * mel_bins + mel] = value;
            Ok(())
        }
        _ => Err(OpError::Shape(format!(
            "MelWeightMatrix: filter {mel} reaches spectrogram bin {bin}, outside the \
             {spectrogram_bins} bins of dft_length {dft_length}: keep the edges within 0 and \
             sample_rate / 2 ({sample_rate} / 2)"
        ))),
    };
    for (mel, edges) in bins.windows(3).enumerate() {
        let (left, centre, right) = (edges[0], edges[1], edges[2]);
        if centre == left {
            set(centre, mel, 1.0)?;
        } else {
            // Empty when the edges are reversed (left past the centre), as in onnxruntime.
            for j in left..=centre {
                set(j, mel, (j - left) as f64 / (centre - left) as f64)?;
            }
        }
        for j in centre..right {
            set(j, mel, (right - j) as f64 / (right - centre) as f64)?;
        }
    }
    Tensor::from_f64(dtype, Shape::new(vec![spectrogram_bins, mel_bins]), out)
}
