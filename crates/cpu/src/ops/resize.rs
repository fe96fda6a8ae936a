//! Resize with `nearest`, `linear` and `cubic` modes over any axes (bilinear, trilinear, … are
//! separable, so the output is built one axis at a time), antialiased or not.
//!
//! Coordinate mapping follows onnxruntime exactly, including its f32 arithmetic: output
//! extents are `floor(in · scale)` computed in f32, the scale used to map coordinates is the
//! f32 `scales` value (or `out / in` in f32 when `sizes` is given), and the original
//! coordinate of each output index is computed in f32. Nearest-neighbour choices flip on
//! exact halves, so doing this in f64 would pick different pixels than the runtime the
//! golden cases come from. The interpolation itself is accumulated in f64.
//!
//! `tf_crop_and_resize` maps each axis into its `roi` (ONNX's formula in onnxruntime's f32
//! order of operations) and writes `extrapolation_value` to every output element with a
//! coordinate outside the input on any axis. Its output extents are those of every other
//! mode, `floor(in · scale)` or `sizes`: the spec's text scales by `roi_end − roi_start`
//! too, but onnxruntime and the ONNX reference implementation both ignore the roi there,
//! and Concord follows them.
//!
//! Two places where onnxruntime and the ONNX reference implementation disagree, and the
//! choice made here:
//! - `align_corners` divides by `length_resized − 1` with the integer output length, as
//!   onnxruntime and PyTorch do; the ONNX reference uses the fractional `in · scale`, which
//!   only differs when `scales` does not give a whole number of outputs (onnxruntime lists
//!   `test_resize_downsample_scales_{linear,cubic}_align_corners` as known mismatches).
//! - When the output shape equals the input shape, onnxruntime (1.23) copies the input
//!   without mapping coordinates. Here the coordinates are mapped as the spec says, which
//!   differs when a scale other than 1 floors back to the input extent (for example
//!   `half_pixel_symmetric` with scale 1.3333 on an axis of 2), matching the ONNX reference.

use super::spatial::checked_product;
use super::{expect_float, i64_operand, optional, required};
use concord_core::op::{CoordinateTransform, Resize, ResizeMode};
use concord_core::resize::{antialias_taps, extrapolated, resize_axis_taps, ResizeAxis};
use concord_core::{DType, MemoryBudget, OpError, Shape, Tensor};

/// Resize on inputs X, roi? (read by tf_crop_and_resize only), scales?, sizes?.
pub(crate) fn resize(
    attrs: &Resize,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let scales = optional(inputs, 2).filter(|t| !t.is_empty());
    let sizes = optional(inputs, 3).filter(|t| !t.is_empty());
    let target = match (scales, sizes) {
        (Some(s), None) => {
            let values = match s.dtype() {
                DType::F32 | DType::F16 => s.to_f64_vec().into_iter().map(|v| v as f32).collect(),
                other => {
                    return Err(OpError::DType {
                        index: 2,
                        name: "scales",
                        expected: "f32".into(),
                        actual: other,
                    })
                }
            };
            Target::Scales(values)
        }
        (None, Some(s)) => Target::Sizes(i64_operand(s, 3, "sizes")?),
        (Some(_), Some(_)) => {
            return Err(OpError::Shape(
                "Resize takes exactly one of scales and sizes, and both were given".into(),
            ))
        }
        (None, None) => {
            return Err(OpError::Shape(
                "Resize needs one of scales (input 2) or sizes (input 3); neither was given".into(),
            ))
        }
    };
    let plan = match &target {
        Target::Scales(v) => attrs.plan(x.dims(), Some(v), None)?,
        Target::Sizes(v) => attrs.plan(x.dims(), None, Some(v))?,
    };
    // Axes are resized one at a time, so every intermediate is at most max(in, out) long
    // on each axis; that bound must be addressable.
    let largest: Vec<usize> = plan
        .iter()
        .zip(x.dims())
        .map(|(&(out, _), &d)| out.max(d))
        .collect();
    checked_product(&largest, "Resize output and intermediate shape")?;
    let rois = if attrs.coordinate_transformation_mode == CoordinateTransform::TfCropAndResize {
        attrs.roi_per_axis(x.rank(), &roi_values(optional(inputs, 1))?)?
    } else {
        attrs.roi_per_axis(x.rank(), &[])?
    };

    let mut dims = x.dims().to_vec();
    let mut values = x.to_f64_vec();
    // The output indices of each axis that tf_crop_and_resize extrapolates; they are
    // overwritten once every axis is resized, so what the taps read there does not matter.
    let mut outside: Vec<(usize, Vec<bool>)> = Vec::new();
    for (axis, (&(out_len, scale), &roi)) in plan.iter().zip(&rois).enumerate() {
        // The values after this axis (an intermediate that may be larger than the output,
        // when another axis shrinks later) and this axis's taps and flags, one per output
        // index even when the output is empty, are checked against the budget first.
        let mut next = dims.clone();
        next[axis] = out_len;
        budget.check_tensor(DType::F64, &next)?;
        // The budget bounds each allocation on its own; the flags (a byte an index) are
        // smaller than the taps, so the taps' check covers both.
        let tap = std::mem::size_of::<Tap>();
        budget.check_bytes(out_len.checked_mul(tap).map(|b| b as u64), || {
            format!("Resize's {out_len} taps along axis {axis}")
        })?;
        let span = ResizeAxis::new(dims[axis], out_len, scale).with_roi(roi);
        let flags = extrapolated(attrs, &span);
        if flags.contains(&true) {
            outside.push((axis, flags));
        }
        let taps = axis_taps(attrs, &span);
        if out_len == span.in_len && taps.iter().enumerate().all(|(i, t)| t.copies(i)) {
            continue;
        }
        values = resize_axis(&values, &dims, axis, &taps);
        dims[axis] = out_len;
    }
    let fill = f64::from(attrs.extrapolation_value);
    for (axis, flags) in &outside {
        fill_outside(&mut values, &dims, *axis, flags, fill);
    }
    Tensor::from_f64(x.dtype(), Shape::new(dims), values)
}

/// The values of the `roi` operand as f32 (onnxruntime reads it in f32); empty when it is
/// absent.
fn roi_values(roi: Option<&Tensor>) -> Result<Vec<f32>, OpError> {
    let Some(roi) = roi else {
        return Ok(Vec::new());
    };
    if !roi.dtype().is_float() {
        return Err(OpError::DType {
            index: 1,
            name: "roi",
            expected: "a float type".into(),
            actual: roi.dtype(),
        });
    }
    if roi.rank() != 1 {
        return Err(OpError::Shape(format!(
            "Resize: input 1 (roi) must be 1-D, got shape {}",
            roi.shape()
        )));
    }
    Ok(roi.to_f64_vec().into_iter().map(|v| v as f32).collect())
}

/// Writes `value` to every element of `values` (row-major, shape `dims`) whose index along
/// `axis` is flagged.
fn fill_outside(values: &mut [f64], dims: &[usize], axis: usize, flags: &[bool], value: f64) {
    let inner: usize = dims[axis + 1..].iter().product();
    let len = dims[axis];
    if inner == 0 || len == 0 {
        return;
    }
    for block in values.chunks_exact_mut(len * inner) {
        for (i, _) in flags.iter().enumerate().filter(|(_, &f)| f) {
            block[i * inner..(i + 1) * inner].fill(value);
        }
    }
}

/// How the resize target was given.
enum Target {
    Scales(Vec<f32>),
    Sizes(Vec<i64>),
}

/// Where one output index along an axis reads from.
#[derive(Clone, Debug)]
enum Tap {
    /// Copies input index `i`.
    Nearest(usize),
    /// `w0·x[i0] + w1·x[i1]`.
    Linear {
        i0: usize,
        i1: usize,
        w0: f64,
        w1: f64,
    },
    /// `Σ w[k]·x[i[k]]` over four neighbours (cubic mode).
    Cubic { i: [usize; 4], w: [f64; 4] },
    /// `Σ w·x[i]` over an antialiasing window of (i, w) pairs.
    Window(Vec<(usize, f64)>),
}

impl Tap {
    /// Whether the tap reads input index `i` alone, with weight 1. An axis whose every tap
    /// does (an axis at scale 1: linear and cubic taps at whole coordinates weigh the
    /// neighbours by 0) is left as it is, as onnxruntime leaves the axes it does not resize:
    /// an infinity must not make 0·inf = NaN beside it. On a resized axis such a tap is
    /// computed like the others, NaN included, as onnxruntime and the ONNX reference do.
    fn copies(&self, i: usize) -> bool {
        match *self {
            Tap::Nearest(j) => j == i,
            Tap::Linear { i0, w1, .. } => i0 == i && w1 == 0.0,
            Tap::Cubic { i: ref at, w } => at[1] == i && w == [0.0, 1.0, 0.0, 0.0],
            Tap::Window(_) => false,
        }
    }
}

/// The tap of every output index along `axis`: core's one Resize tap rule, with the
/// weights widened to f64 for the reference's f64 blend (exactly: see
/// [`concord_core::resize::Tap::w1`]).
fn axis_taps(attrs: &Resize, axis: &ResizeAxis) -> Vec<Tap> {
    // Antialiasing widens the filter by 1 / scale when downsampling. At a scale of 1 or more
    // its taps are the plain ones (the same filter, support and edge rule, only normalised
    // apart), so only a scale below 1 takes them: an axis at scale 1 stays a copy, and an
    // upscaled one differs from onnxruntime's antialiased taps by rounding alone.
    if attrs.antialias && attrs.mode != ResizeMode::Nearest && axis.scale < 1.0 {
        return antialias_taps(attrs, axis)
            .into_iter()
            .map(Tap::Window)
            .collect();
    }
    if attrs.mode == ResizeMode::Cubic {
        return cubic_taps(attrs, axis);
    }
    resize_axis_taps(attrs, axis)
        .into_iter()
        .map(|t| {
            if t.is_copy() {
                // A plain copy, so an infinite value does not become NaN through 0·inf.
                return Tap::Nearest(t.i0);
            }
            let w1 = f64::from(t.w1);
            Tap::Linear {
                i0: t.i0,
                i1: t.i1,
                w0: 1.0 - w1,
                w1,
            }
        })
        .collect()
}

/// Cubic taps, as the ONNX spec and its reference implementation define them: the
/// neighbours floor(x) - 1 ..= floor(x) + 2 of the (unclamped) original coordinate x, with
/// Keys' cubic convolution weights for coefficient A = cubic_coeff_a; a neighbour outside
/// the input repeats the edge element, or with exclude_outside gets weight 0 and the
/// others are renormalised. The coordinate is computed in f32 as for the other modes, the
/// weights in f64.
fn cubic_taps(attrs: &Resize, axis: &ResizeAxis) -> Vec<Tap> {
    let a = f64::from(attrs.cubic_coeff_a);
    let last = axis.in_len.saturating_sub(1) as i64;
    (0..axis.out_len)
        .map(|o| {
            let x = axis.original(attrs, o);
            let base = x.floor();
            let r = f64::from(x - base);
            let base = base as i64;
            let mut w = [
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                ((a * (2.0 - r) - 5.0 * a) * (2.0 - r) + 8.0 * a) * (2.0 - r) - 4.0 * a,
            ];
            let mut i = [0usize; 4];
            for k in 0..4 {
                let at = base - 1 + k as i64;
                if attrs.exclude_outside && !(0..=last).contains(&at) {
                    w[k] = 0.0;
                }
                i[k] = at.clamp(0, last.max(0)) as usize;
            }
            if attrs.exclude_outside {
                let sum: f64 = w.iter().sum();
                if sum != 0.0 {
                    w.iter_mut().for_each(|v| *v /= sum);
                }
            }
            Tap::Cubic { i, w }
        })
        .collect()
}

/// Resizes `values` (row-major, shape `dims`) along `axis` to `taps.len()` entries.
fn resize_axis(values: &[f64], dims: &[usize], axis: usize, taps: &[Tap]) -> Vec<f64> {
    let inner: usize = dims[axis + 1..].iter().product();
    let in_len = dims[axis];
    let outer: usize = dims[..axis].iter().product();
    // No inner elements: the output, outer · taps · 0 long, is empty. An empty axis is never
    // resized (`plan` refuses to grow one, and one that stays empty is skipped), but its
    // blocks would be `chunks_exact(0)`'s panic.
    if inner == 0 || in_len == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(outer * taps.len() * inner);
    for block in values.chunks_exact(in_len * inner) {
        for tap in taps {
            match *tap {
                Tap::Window(ref window) => {
                    let start = out.len();
                    out.resize(start + inner, 0.0);
                    for &(ik, wk) in window {
                        let src = &block[ik * inner..(ik + 1) * inner];
                        for (o, &v) in out[start..].iter_mut().zip(src) {
                            *o += wk * v;
                        }
                    }
                }
                Tap::Nearest(i) => out.extend_from_slice(&block[i * inner..(i + 1) * inner]),
                Tap::Linear { i0, i1, w0, w1 } => {
                    let a = &block[i0 * inner..(i0 + 1) * inner];
                    let b = &block[i1 * inner..(i1 + 1) * inner];
                    out.extend(a.iter().zip(b).map(|(&a, &b)| w0 * a + w1 * b));
                }
                Tap::Cubic { i, w } => {
                    let start = out.len();
                    out.resize(start + inner, 0.0);
                    for (&ik, &wk) in i.iter().zip(&w) {
                        let src = &block[ik * inner..(ik + 1) * inner];
                        for (o, &v) in out[start..].iter_mut().zip(src) {
                            *o += wk * v;
                        }
                    }
                }
            }
        }
    }
    out
}
