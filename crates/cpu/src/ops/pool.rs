//! MaxPool (with its optional Indices), MaxUnpool, AveragePool and GlobalAveragePool over
//! any number of spatial axes.
//!
//! The window of every output position is worked out once per call (the input offsets it
//! reads inside one channel plane, and how many of its taps lie inside the padded input)
//! and then applied to every (batch, channel) plane. Both walks check the run's deadline
//! as they go: a huge kernel over a small input makes few outputs of many taps each.
//!
//! Padding semantics, matching the ONNX reference implementation and onnxruntime:
//! - padded cells never take part in a max, and never add to a sum;
//! - with `count_include_pad`, an average divides by the taps inside the padded input
//!   (input plus both pads); taps that a ceil_mode window pushes past the padded end are
//!   not counted. Without it, the divisor is the number of real input cells read.
//! - a window that reads no input cell at all gives the lowest finite value of the dtype
//!   for MaxPool and 0 for AveragePool, as onnxruntime does.
//!
//! Known onnxruntime divergence (1.23): for 2-D and 3-D AveragePool with
//! `count_include_pad`, onnxruntime limits the first spatial axis's windows with the second
//! axis's *begin* pad instead of the first axis's *end* pad, so with pads such as
//! `[0, 0, 1, 0]` it divides the last row by fewer taps than the spec says. This kernel
//! follows the spec and agrees with the ONNX reference implementation there.

use super::spatial::{advance, checked_product, resolve, Axis, WindowAttrs};
use super::{expect_float, i64_operand, optional, required};
use concord_core::deadline::Ticker;
use concord_core::op::{max_unpool_extents, Pool};
use concord_core::{DType, Deadline, OpError, Shape, Tensor, TensorData};
use half::f16;

/// MaxPool: Y, and with `num_outputs` 2 the Indices of each maximum (i64, Y's shape): its
/// flat position in X, the spatial axes of its plane row-major, or column-major with
/// `storage_order` 1. The first of equal maxima wins, and a NaN wins once seen (as in
/// numpy's max). A window that reads no input cell gives the lowest finite value and
/// index -1.
pub(crate) fn max_pool(
    attrs: &Pool,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
    deadline: Option<Deadline>,
) -> Result<Vec<Tensor>, OpError> {
    let x = required(inputs, 0, "X")?;
    if !matches!(x.dtype(), DType::I8 | DType::U8) {
        expect_float(x, 0, "X")?;
    }
    let windows = Windows::new(attrs, x.shape(), "MaxPool", deadline)?;
    // A window entirely in the padding has no element: the lowest finite value of the type.
    let empty_window = match x.dtype() {
        DType::F16 => f16::MIN.to_f64(),
        DType::BF16 => half::bf16::MIN.to_f64(),
        DType::F64 => f64::MIN,
        other => match other.integer_range() {
            Some((lo, _)) => lo as f64,
            None => f32::MIN as f64,
        },
    };
    let x_f = x.to_f64_vec();
    let argmax = windows.apply(&x_f, |plane, offsets, _| {
        let best = offsets.iter().copied().reduce(|a, b| {
            if plane[a].is_nan() || plane[a] >= plane[b] {
                a
            } else {
                b
            }
        });
        best.map_or(-1.0, |b| b as f64)
    })?;
    // `apply` walks the planes in order, one window after another.
    let windows_per_plane = windows.starts.len() - 1;
    let spatial = &x.dims()[2..];
    // Each spatial axis's step in the Indices' numbering of a plane.
    let index_strides: Vec<usize> = if attrs.column_major_indices {
        spatial
            .iter()
            .scan(1usize, |acc, &d| {
                let step = *acc;
                *acc *= d;
                Some(step)
            })
            .collect()
    } else {
        Shape::new(spatial.to_vec()).strides()
    };
    let row_major = Shape::new(spatial.to_vec()).strides();
    let mut y = Vec::with_capacity(argmax.len());
    let mut indices = Vec::with_capacity(argmax.len());
    for (i, &best) in argmax.iter().enumerate() {
        let plane_index = i / windows_per_plane.max(1);
        let plane_start = plane_index * windows.input_plane;
        if best < 0.0 {
            y.push(empty_window);
            indices.push(-1);
            continue;
        }
        // Offsets within a plane are below its size, which fits a usize; f64 holds them
        // exactly (they are far below 2^53 for any tensor this machine holds).
        let offset = best as usize;
        y.push(x_f[plane_start + offset]);
        let mut rest = offset;
        let mut numbered = 0usize;
        for (&rm, &st) in row_major.iter().zip(&index_strides) {
            numbered += (rest / rm) * st;
            rest %= rm;
        }
        indices.push(i64::try_from(plane_start + numbered).unwrap_or(i64::MAX));
    }
    let y = Tensor::from_f64(x.dtype(), Shape::new(windows.output_shape.clone()), y)?;
    if num_outputs < 2 {
        return Ok(vec![y]);
    }
    let indices = Tensor::from_parts(Shape::new(windows.output_shape), TensorData::I64(indices))?;
    Ok(vec![y, indices])
}

/// MaxUnpool: zeros of the output shape (`output_shape`'s value, else the window's default
/// extents), with each X value written at the flat position its I entry names, as
/// onnxruntime does (positions count over the whole output, batch and channel included).
pub(crate) fn max_unpool(
    kernel_shape: &[usize],
    pads: &[usize],
    strides: &[usize],
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let i = required(inputs, 1, "I")?;
    expect_float(x, 0, "X")?;
    let indices = i64_operand(i, 1, "I")?;
    if i.shape() != x.shape() {
        return Err(OpError::Shape(format!(
            "MaxUnpool: I {} must have the shape of X {}",
            i.shape(),
            x.shape()
        )));
    }
    if x.rank() < 3 || kernel_shape.len() != x.rank() - 2 {
        return Err(OpError::Shape(format!(
            "MaxUnpool needs X (N, C, spatial…) of rank 3 or more with one kernel_shape value \
             per spatial axis, got X {} and kernel_shape {kernel_shape:?}",
            x.shape()
        )));
    }
    let output_shape: Vec<usize> = match optional(inputs, 2) {
        Some(shape) => {
            let given = i64_operand(shape, 2, "output_shape")?;
            let dims: Option<Vec<usize>> = given.iter().map(|&d| usize::try_from(d).ok()).collect();
            match dims {
                Some(dims) if dims.len() == x.rank() => dims,
                _ => {
                    return Err(OpError::Shape(format!(
                        "MaxUnpool: output_shape {given:?} must hold {} non-negative extents, \
                         one per axis of X {}",
                        x.rank(),
                        x.shape()
                    )))
                }
            }
        }
        None => {
            let mut dims = x.dims()[..2].to_vec();
            dims.extend(max_unpool_extents(
                &x.dims()[2..],
                kernel_shape,
                pads,
                strides,
            )?);
            dims
        }
    };
    let len = checked_product(&output_shape, "MaxUnpool output shape")?;
    let mut y = vec![0.0; len];
    for (&index, value) in indices.iter().zip(x.to_f64_vec()) {
        let slot = usize::try_from(index)
            .ok()
            .and_then(|at| y.get_mut(at))
            .ok_or_else(|| {
                OpError::Shape(format!(
                    "MaxUnpool: index {index} in I is outside the output {} ({len} elements)",
                    Shape::new(output_shape.clone())
                ))
            })?;
        *slot = value;
    }
    Tensor::from_f64(x.dtype(), Shape::new(output_shape), y)
}

/// GlobalMaxPool (`p` None) and GlobalLpPool: one value per (N, C) plane.
pub(crate) fn global_pool(inputs: &[Option<&Tensor>], p: Option<i64>) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let op = if p.is_some() {
        "GlobalLpPool"
    } else {
        "GlobalMaxPool"
    };
    if x.rank() < 2 {
        return Err(OpError::Shape(format!(
            "{op} needs X of rank 2 or more (N, C, spatial…), got X {}",
            x.shape()
        )));
    }
    let plane = checked_product(&x.dims()[2..], "spatial shape")?;
    if plane == 0 {
        return Err(OpError::Shape(format!(
            "{op}: X {} has an empty spatial axis",
            x.shape()
        )));
    }
    let values = x.to_f64_vec();
    let y: Vec<f64> = values
        .chunks_exact(plane)
        .map(|w| match p {
            None => w
                .iter()
                .copied()
                .reduce(|a, b| if a.is_nan() || a >= b { a } else { b })
                .unwrap_or(f64::NAN),
            Some(p) => lp_norm(w.iter().copied(), p),
        })
        .collect();
    let mut out = x.dims()[..2].to_vec();
    out.extend(std::iter::repeat(1).take(x.rank() - 2));
    Tensor::from_f64(x.dtype(), Shape::new(out), y)
}

/// (Σ |v|^p)^(1/p).
fn lp_norm(values: impl Iterator<Item = f64>, p: i64) -> f64 {
    let p = p as f64;
    values.map(|v| v.abs().powf(p)).sum::<f64>().powf(1.0 / p)
}

/// LpPool: the p-norm of each window; padded cells are zeros and add nothing.
pub(crate) fn lp_pool(
    attrs: &Pool,
    p: i64,
    inputs: &[Option<&Tensor>],
    deadline: Option<Deadline>,
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    if p < 1 {
        return Err(OpError::Attribute {
            name: "p",
            detail: format!("LpPool: p must be at least 1, got {p}"),
        });
    }
    let windows = Windows::new(attrs, x.shape(), "LpPool", deadline)?;
    let y = windows.apply(&x.to_f64_vec(), |plane, offsets, _| {
        lp_norm(offsets.iter().map(|&i| plane[i]), p)
    })?;
    Tensor::from_f64(x.dtype(), Shape::new(windows.output_shape), y)
}

pub(crate) fn average_pool(
    attrs: &Pool,
    inputs: &[Option<&Tensor>],
    deadline: Option<Deadline>,
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let windows = Windows::new(attrs, x.shape(), "AveragePool", deadline)?;
    let include_pad = attrs.count_include_pad;
    let y = windows.apply(&x.to_f64_vec(), |plane, offsets, padded_taps| {
        if offsets.is_empty() {
            return 0.0;
        }
        let sum: f64 = offsets.iter().map(|&i| plane[i]).sum();
        let divisor = if include_pad {
            padded_taps
        } else {
            offsets.len()
        };
        sum / divisor as f64
    })?;
    Tensor::from_f64(x.dtype(), Shape::new(windows.output_shape), y)
}

/// The mean of each (batch, channel) plane: (N, C, D1…) → (N, C, 1…).
pub(crate) fn global_average_pool(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    if x.rank() < 2 {
        return Err(OpError::Shape(format!(
            "GlobalAveragePool needs X of rank 2 or more (N, C, spatial…), got X {}",
            x.shape()
        )));
    }
    let plane = checked_product(&x.dims()[2..], "GlobalAveragePool spatial shape")?;
    if plane == 0 {
        return Err(OpError::Shape(format!(
            "GlobalAveragePool: X {} has an empty spatial axis, so there is nothing to average",
            x.shape()
        )));
    }
    let values = x.to_f64_vec();
    let y: Vec<f64> = values
        .chunks_exact(plane)
        .map(|p| p.iter().sum::<f64>() / plane as f64)
        .collect();
    let mut out = x.dims()[..2].to_vec();
    out.extend(std::iter::repeat(1).take(x.rank() - 2));
    Tensor::from_f64(x.dtype(), Shape::new(out), y)
}

/// Every output position's window within one channel plane, stored flat: the input offsets
/// of window `p` are `offsets[starts[p]..starts[p + 1]]`.
#[derive(Debug)]
struct Windows {
    offsets: Vec<usize>,
    starts: Vec<usize>,
    /// Per window, the number of taps inside the padded input (the count_include_pad
    /// divisor).
    padded_taps: Vec<usize>,
    input_plane: usize,
    output_shape: Vec<usize>,
    op: &'static str,
    deadline: Option<Deadline>,
}

impl Windows {
    fn new(
        attrs: &Pool,
        x: &Shape,
        op: &'static str,
        deadline: Option<Deadline>,
    ) -> Result<Windows, OpError> {
        if x.rank() < 3 {
            return Err(OpError::Shape(format!(
                "{op} needs X of rank 3 or more (N, C, spatial…), got X {x}"
            )));
        }
        let spatial = &x.dims()[2..];
        if attrs.kernel_shape.len() != spatial.len() {
            return Err(OpError::Attribute {
                name: "kernel_shape",
                detail: format!(
                    "{:?} has {} values but X {x} has {} spatial axes",
                    attrs.kernel_shape,
                    attrs.kernel_shape.len(),
                    spatial.len()
                ),
            });
        }
        let axes = resolve(
            spatial,
            &WindowAttrs {
                auto_pad: attrs.auto_pad,
                kernel_shape: &attrs.kernel_shape,
                strides: &attrs.strides,
                dilations: &attrs.dilations,
                pads: &attrs.pads,
                ceil_mode: attrs.ceil_mode,
            },
        )?;
        let input_plane = checked_product(spatial, "pooling input spatial shape")?;
        let out_spatial: Vec<usize> = axes.iter().map(|a| a.output).collect();
        let output_plane = checked_product(&out_spatial, "pooling output spatial shape")?;
        let mut output_shape = x.dims()[..2].to_vec();
        output_shape.extend(&out_spatial);
        checked_product(&output_shape, "pooling output shape")?;

        // Per axis and output coordinate: the input coordinates read, and the taps inside
        // the padded input. A window is the Cartesian product of its axes' taps.
        let per_axis: Vec<Vec<(Vec<usize>, usize)>> = axes.iter().map(axis_taps).collect();
        let input_strides = Shape::new(spatial.to_vec()).strides();
        let mut offsets = Vec::new();
        let mut starts = Vec::with_capacity(output_plane + 1);
        let mut padded_taps = Vec::with_capacity(output_plane);
        starts.push(0);
        let mut position = vec![0usize; axes.len()];
        let mut partial: Vec<usize> = Vec::new();
        let mut ticker = Ticker::new(deadline);
        for p in 0..output_plane {
            ticker.tick(|| format!("{op}'s window {p} of {output_plane}"))?;
            if p > 0 {
                advance(&mut position, &out_spatial);
            }
            partial.clear();
            partial.push(0);
            let mut padded = 1usize;
            for ((table, &o), &stride) in per_axis.iter().zip(&position).zip(&input_strides) {
                let (coords, inside) = &table[o];
                // A window of more than 2^64 padded taps (huge kernels under SAME padding)
                // saturates: its average's divisor is then beyond any sum's precision anyway.
                padded = padded.saturating_mul(*inside);
                partial = partial
                    .iter()
                    .flat_map(|&base| coords.iter().map(move |&i| base + i * stride))
                    .collect();
            }
            offsets.extend_from_slice(&partial);
            starts.push(offsets.len());
            padded_taps.push(padded);
        }
        Ok(Windows {
            offsets,
            starts,
            padded_taps,
            input_plane,
            output_shape,
            op,
            deadline,
        })
    }

    /// Applies `reduce(plane, window offsets, padded taps)` to every window of every
    /// (batch, channel) plane of `x`, in output order; an error once past the deadline.
    fn apply(
        &self,
        x: &[f64],
        reduce: impl Fn(&[f64], &[usize], usize) -> f64,
    ) -> Result<Vec<f64>, OpError> {
        let windows: Vec<(&[usize], usize)> = self
            .starts
            .windows(2)
            .zip(&self.padded_taps)
            .map(|(se, &padded)| (&self.offsets[se[0]..se[1]], padded))
            .collect();
        let mut y = Vec::with_capacity(x.len() / self.input_plane.max(1) * windows.len());
        let mut ticker = Ticker::new(self.deadline);
        for (p, plane) in x.chunks_exact(self.input_plane).enumerate() {
            for (w, &(offsets, padded)) in windows.iter().enumerate() {
                ticker.tick(|| format!("{}'s window {w} of plane {p}", self.op))?;
                y.push(reduce(plane, offsets, padded));
            }
        }
        Ok(y)
    }
}

/// For each output coordinate of one axis: the input coordinates its taps read, and how
/// many of its taps lie inside the padded input. Both come from the window's bounds, not
/// from visiting every tap: a kernel of 2^40 taps (valid under SAME padding, which pads it
/// to fit) costs no more than the input it reads.
fn axis_taps(axis: &Axis) -> Vec<(Vec<usize>, usize)> {
    // `resolve` refuses a dilation of 0; `max(1)` only keeps the divisions below defined.
    let (s, d, k) = (
        axis.stride as u128,
        axis.dilation.max(1) as u128,
        axis.kernel as u128,
    );
    let pad_begin = axis.pad_begin as u128;
    let input_end = pad_begin + axis.input as u128;
    let padded_end = input_end + axis.pad_end as u128;
    // How many taps t in [0, k) have base + t·d < limit.
    let below = |base: u128, limit: u128| {
        if base >= limit {
            0
        } else {
            k.min((limit - base).div_ceil(d))
        }
    };
    (0..axis.output)
        .map(|o| {
            let base = o as u128 * s;
            let first = pad_begin.saturating_sub(base).div_ceil(d);
            let last = below(base, input_end);
            let coords = (first..last.max(first))
                .map(|t| (base + t * d - pad_begin) as usize)
                .collect();
            (coords, below(base, padded_end) as usize)
        })
        .collect()
}
