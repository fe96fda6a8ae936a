//! Sampling kernels: GridSample and AffineGrid, computed in f64 and rounded once when
//! stored; RoiAlign and MaxRoiPool (`roi.rs`) and DeformConv (`deform.rs`) route from here.
//!
//! GridSample follows onnxruntime's kernel where it and the ONNX reference differ: every tap
//! an interpolation reads outside X is padded (zero, the clamped index, or the reflected
//! index truncated towards zero), and for border padding the sampled position itself is not
//! moved. The ONNX reference clamps an out-of-range position into X first, which changes the
//! cubic result (the fraction between taps becomes 0); onnxruntime 1.23 and PyTorch, where the
//! op comes from, pad only the taps, and the golden case grid_sample_bicubic checks it. For
//! nearest and linear the two readings agree. Reflection padding reflects the position first,
//! as the ONNX reference does; with every tap reflected too, that gives onnxruntime's values.
//! Nearest rounds half to even (`nearbyint`), and cubic uses Keys' kernel with a = -0.75.
//! onnxruntime implements cubic for 4-D X only; here every mode works in any rank, each
//! spatial axis interpolated independently (the tensor product the ONNX reference takes).

use super::{expect_float, i64_operand, required};
use concord_core::op::{GridPadding, GridSampleMode, Op};
use concord_core::{Deadline, MemoryBudget, OpError, Shape, Tensor};

pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
    deadline: Option<Deadline>,
) -> Result<Tensor, OpError> {
    match op {
        Op::GridSample {
            mode,
            padding_mode,
            align_corners,
        } => grid_sample(*mode, *padding_mode, *align_corners, inputs),
        Op::AffineGrid { align_corners } => affine_grid(*align_corners, inputs),
        Op::RoiAlign(attrs) => super::roi::roi_align(attrs, inputs, budget, deadline),
        Op::MaxRoiPool {
            pooled_shape,
            spatial_scale,
        } => super::roi::max_roi_pool(*pooled_shape, *spatial_scale, inputs),
        Op::DeformConv(attrs) => super::deform::deform_conv(attrs, inputs),
        other => Err(super::not_in_family(other)),
    }
}

/// The position in X, along an axis of `len` elements, of the normalised coordinate `n`:
/// -1 and 1 are the centres of the end elements with `align_corners`, their outer edges
/// without.
fn denormalize(n: f64, len: usize, align_corners: bool) -> f64 {
    let len = len as f64;
    if align_corners {
        (n + 1.0) / 2.0 * (len - 1.0)
    } else {
        ((n + 1.0) * len - 1.0) / 2.0
    }
}

/// Reflects `x` at `lo` and `hi` until it lies between them (an x between them, or NaN,
/// as it is; an x outside an empty range, lo).
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    // x equal to lo or hi may take either branch: it is d = 0 from that end, which gives x
    // back. `toward` compares lo with hi, which the return below makes different.
    let (d, near, far) = if x < lo {
        (lo - x, lo, hi)
    } else if x > hi {
        (x - hi, hi, lo)
    } else {
        return x;
    };
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let n = (d / range).floor();
    let r = d - n * range;
    // An even number of whole ranges lands on the near side, an odd one on the far side.
    let toward = |from: f64, to: f64| if to > from { from + r } else { from - r };
    if n % 2.0 == 0.0 {
        toward(near, far)
    } else {
        toward(far, near)
    }
}

/// One spatial axis of X as GridSample reads it.
#[derive(Clone, Copy)]
struct Axis {
    len: usize,
    /// The range coordinates are reflected into.
    lo: f64,
    hi: f64,
}

impl Axis {
    /// The element of X at integer position `i` along this axis, after padding; None
    /// reads zero.
    fn tap(&self, i: i64, padding: GridPadding) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let last = self.len as i64 - 1;
        let i = match padding {
            GridPadding::Zeros => i,
            GridPadding::Border => i.clamp(0, last),
            // Truncation towards zero, as onnxruntime casts the reflected position.
            GridPadding::Reflection => (reflect(i as f64, self.lo, self.hi) as i64).clamp(0, last),
        };
        if (0..=last).contains(&i) {
            Some(i as usize)
        } else {
            None
        }
    }
}

/// Keys' cubic convolution weights of the four taps at offsets -1, 0, 1, 2 from the floor
/// of a position whose fractional part is `t`.
fn cubic_weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |d: f64| ((A + 2.0) * d - (A + 3.0)) * d * d + 1.0;
    let far = |d: f64| ((A * d - 5.0 * A) * d + 8.0 * A) * d - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

fn grid_sample(
    mode: GridSampleMode,
    padding: GridPadding,
    align_corners: bool,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let grid = required(inputs, 1, "grid")?;
    expect_float(x, 0, "X")?;
    expect_float(grid, 1, "grid")?;
    let (xd, gd) = (x.dims(), grid.dims());
    let rank = xd.len();
    if rank < 3 || gd.len() != rank || gd[0] != xd[0] || gd[rank - 1] != rank - 2 {
        return Err(OpError::Shape(format!(
            "GridSample needs X (N, C, D1…Dr) and grid (N, H1…Hr, r) with r ≥ 1, got X {} and \
             grid {}",
            x.shape(),
            grid.shape()
        )));
    }
    let r = rank - 2;
    let (n, c) = (xd[0], xd[1]);
    let spatial_in = &xd[2..];
    let spatial_out = &gd[1..rank - 1];
    let points: usize = spatial_out.iter().product();
    let plane: usize = spatial_in.iter().product();
    let axes: Vec<Axis> = spatial_in
        .iter()
        .map(|&len| {
            let (lo, hi) = if align_corners {
                (0.0, len as f64 - 1.0)
            } else {
                (-0.5, len as f64 - 0.5)
            };
            Axis { len, lo, hi }
        })
        .collect();
    // Row-major strides of X's spatial axes.
    let mut strides = vec![1usize; r];
    for k in (0..r.saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * spatial_in[k + 1];
    }
    let xs = x.to_f64_vec();
    let gs = grid.to_f64_vec();
    let mut out = vec![0.0f64; n * c * points];
    let taps_per_axis: usize = match mode {
        GridSampleMode::Nearest => 1,
        GridSampleMode::Linear => 2,
        GridSampleMode::Cubic => 4,
    };
    let combos = taps_per_axis.pow(r as u32);
    // Per point: each axis's taps as (offset in the plane or None, weight).
    let mut taps: Vec<Vec<(Option<usize>, f64)>> = vec![Vec::new(); r];
    for b in 0..n {
        for p in 0..points {
            let g = &gs[(b * points + p) * r..(b * points + p + 1) * r];
            for (k, axis) in axes.iter().enumerate() {
                // grid's last axis lists the coordinates innermost axis first.
                let mut pos = denormalize(g[r - 1 - k], axis.len, align_corners);
                if mode == GridSampleMode::Nearest {
                    pos = pos.round_ties_even();
                }
                // Border padding leaves the position where it is: its taps are clamped below.
                if padding == GridPadding::Reflection {
                    pos = reflect(pos, axis.lo, axis.hi);
                }
                let at = |i: f64| axis.tap(i as i64, padding).map(|i| i * strides[k]);
                let floor = pos.floor();
                let t = pos - floor;
                taps[k] = match mode {
                    GridSampleMode::Nearest => vec![(at(pos), 1.0)],
                    GridSampleMode::Linear => vec![(at(floor), 1.0 - t), (at(floor + 1.0), t)],
                    GridSampleMode::Cubic => {
                        let w = cubic_weights(t);
                        (0..4).map(|j| (at(floor - 1.0 + j as f64), w[j])).collect()
                    }
                };
            }
            for ch in 0..c {
                let base = (b * c + ch) * plane;
                let mut sum = 0.0f64;
                for combo in 0..combos {
                    let mut rest = combo;
                    let mut offset = Some(0usize);
                    let mut weight = 1.0f64;
                    for axis_taps in taps.iter().rev() {
                        let (o, w) = axis_taps[rest % taps_per_axis];
                        rest /= taps_per_axis;
                        offset = offset.zip(o).map(|(a, o)| a + o);
                        weight *= w;
                    }
                    if let Some(o) = offset {
                        sum += weight * xs[base + o];
                    }
                }
                out[(b * c + ch) * points + p] = sum;
            }
        }
    }
    let mut dims = vec![n, c];
    dims.extend_from_slice(spatial_out);
    Tensor::from_f64(x.dtype(), Shape::new(dims), out)
}

/// The normalised coordinate of element `i` of `len` along an output axis. A single
/// element sits at 0, as in PyTorch (the ONNX reference divides by zero there).
fn base_coordinate(i: usize, len: usize, align_corners: bool) -> f64 {
    let (i, l) = (i as f64, len as f64);
    if len <= 1 {
        0.0
    } else if align_corners {
        -1.0 + 2.0 * i / (l - 1.0)
    } else {
        (2.0 * i + 1.0) / l - 1.0
    }
}

fn affine_grid(align_corners: bool, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let theta = required(inputs, 0, "theta")?;
    expect_float(theta, 0, "theta")?;
    let size = i64_operand(required(inputs, 1, "size")?, 1, "size")?;
    let td = theta.dims();
    let r = size.len().saturating_sub(2);
    if !(r == 2 || r == 3) || size.iter().any(|&e| e < 0) || td != [size[0] as usize, r, r + 1] {
        return Err(OpError::Shape(format!(
            "AffineGrid needs theta (N, 2, 3) with size [N, C, H, W], or theta (N, 3, 4) with \
             size [N, C, D, H, W], got theta {} and size {size:?}",
            theta.shape()
        )));
    }
    let n = td[0];
    let spatial: Vec<usize> = size[2..].iter().map(|&e| e as usize).collect();
    let points: usize = spatial.iter().product();
    let th = theta.to_f64_vec();
    let mut out = Vec::with_capacity(n * points * r);
    let mut index = vec![0usize; r];
    for b in 0..n {
        let m = &th[b * r * (r + 1)..(b + 1) * r * (r + 1)];
        for p in 0..points {
            let mut rest = p;
            for k in (0..r).rev() {
                index[k] = rest % spatial[k];
                rest /= spatial[k];
            }
            // The base point (x, y[, z], 1): x along the innermost axis.
            let mut base: Vec<f64> = (0..r)
                .map(|j| base_coordinate(index[r - 1 - j], spatial[r - 1 - j], align_corners))
                .collect();
            base.push(1.0);
            for row in m.chunks(r + 1) {
                out.push(row.iter().zip(&base).map(|(a, v)| a * v).sum());
            }
        }
    }
    let mut dims = vec![n];
    dims.extend_from_slice(&spatial);
    dims.push(r);
    Tensor::from_f64(theta.dtype(), Shape::new(dims), out)
}
