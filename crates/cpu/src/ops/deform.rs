//! DeformConv: N-d grouped convolution whose every kernel tap reads X at its window position
//! moved by a learned offset, by multilinear (bilinear in 2-D) interpolation, and is scaled
//! by an optional mask; computed in f64 and rounded once when stored.
//!
//! The interpolation reads X at the real position p as the tensor product, over the spatial
//! axes, of the two integer taps floor(p) and floor(p) + 1 weighted 1 − frac and frac, a tap
//! outside X reading 0: what the ONNX reference computes with GridSample (align_corners,
//! zero padding) and torchvision's deform_conv2d with its bilinear sampler. onnxruntime has
//! no DeformConv kernel, so the node tests are the independent check.
//!
//! As Conv does (`conv.rs`), each (batch, group) pair is one matrix product on the blocked
//! f64 multiply: the group's weights times a column matrix, here with one column per output
//! position and one row per (input channel, tap), holding the mask times the sampled value.

use super::gemm::expect_same_dtype;
use super::matrix::{multiply_add, MatRef};
use super::spatial::{advance, checked_product, resolve, Axis, WindowAttrs};
use super::{expect_float, optional, required};
use concord_core::op::{AutoPad, DeformConv};
use concord_core::{OpError, Shape, Tensor};

/// Runs DeformConv on X (N, C, D1…Dr), W (M, C/group, k1…kr), offset (N,
/// offset_group·∏k·r, O1…Or), B (M)? and mask (N, offset_group·∏k, O1…Or)?.
pub(crate) fn deform_conv(
    attrs: &DeformConv,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let w = required(inputs, 1, "W")?;
    let offset = required(inputs, 2, "offset")?;
    let bias = optional(inputs, 3);
    let mask = optional(inputs, 4);
    expect_float(x, 0, "X")?;
    expect_same_dtype(w, 1, "W", x.dtype())?;
    expect_same_dtype(offset, 2, "offset", x.dtype())?;
    if let Some(b) = bias {
        expect_same_dtype(b, 3, "B", x.dtype())?;
    }
    if let Some(m) = mask {
        expect_same_dtype(m, 4, "mask", x.dtype())?;
    }
    let plan = Plan::new(attrs, x, w, offset, bias, mask)?;
    let Plan {
        batch: n,
        channels: c,
        out_channels: m,
        group,
        offset_group,
        ref axes,
        input_plane,
        output_plane: p,
        kernel_size: k,
    } = plan;
    let r = axes.len();
    let mut output_shape = vec![n, m];
    output_shape.extend(axes.iter().map(|a| a.output));
    let out_len = checked_product(&output_shape, "DeformConv output shape")?;
    let mut y = vec![0.0; out_len];
    if let Some(b) = bias {
        let b_f = b.to_f64_vec();
        for (plane, &b) in y.chunks_exact_mut(p.max(1)).zip(b_f.iter().cycle()) {
            plane.fill(b);
        }
    }
    if y.is_empty() || c == 0 {
        // No batch entries, output channels or positions, or no input channels: the output
        // is empty or the bias alone.
        return Tensor::from_f64(x.dtype(), Shape::new(output_shape), y);
    }
    let (cg, mg) = (c / group, m / group);
    let rows = cg * k;
    let cols_len = c
        .checked_mul(k)
        .and_then(|v| v.checked_mul(p))
        .ok_or_else(|| {
            OpError::Shape(format!(
                "DeformConv: the column matrix ({c}·{k} x {p}) has more elements than this \
                 machine can address"
            ))
        })?;
    let x_f = x.to_f64_vec();
    let w_f = w.to_f64_vec();
    let offsets = offset.to_f64_vec();
    let masks = mask.map(Tensor::to_f64_vec);
    let kernel: Vec<usize> = axes.iter().map(|a| a.kernel).collect();
    let output: Vec<usize> = axes.iter().map(|a| a.output).collect();
    let input: Vec<usize> = axes.iter().map(|a| a.input).collect();
    let input_strides = Shape::new(input.clone()).strides();
    let per_offset_group = c / offset_group;
    let mut cols = vec![0.0; cols_len];
    let mut tap = vec![0usize; r];
    let mut position = vec![0usize; r];
    let mut point = vec![0.0f64; r];
    for b in 0..n {
        // The columns of this batch entry: row (channel, tap), column output position.
        for t in 0..k {
            if t == 0 {
                tap.fill(0);
            } else {
                advance(&mut tap, &kernel);
            }
            for og in 0..offset_group {
                let mask_plane = masks
                    .as_ref()
                    .map(|v| &v[((b * offset_group + og) * k + t) * p..][..p]);
                let offset_base = ((b * offset_group + og) * k + t) * r * p;
                position.fill(0);
                for o in 0..p {
                    if o > 0 {
                        advance(&mut position, &output);
                    }
                    for (a, axis) in axes.iter().enumerate() {
                        // The tap's place in the padded window, moved by its offset.
                        let start = (position[a] * axis.stride + tap[a] * axis.dilation) as f64
                            - axis.pad_begin as f64;
                        point[a] = start + offsets[offset_base + a * p + o];
                    }
                    let scale = mask_plane.map_or(1.0, |plane| plane[o]);
                    for ch in og * per_offset_group..(og + 1) * per_offset_group {
                        let image = &x_f[(b * c + ch) * input_plane..][..input_plane];
                        let value = interpolate(image, &input, &input_strides, &point);
                        cols[(ch * k + t) * p + o] = scale * value;
                    }
                }
            }
        }
        let y_image = &mut y[b * m * p..(b + 1) * m * p];
        for (g, y_group) in y_image.chunks_exact_mut(mg * p).enumerate() {
            let weights = MatRef::row_major(&w_f[g * mg * rows..], mg, rows)?;
            let columns = MatRef::row_major(&cols[g * rows * p..], rows, p)?;
            multiply_add(weights, columns, y_group)?;
        }
    }
    Tensor::from_f64(x.dtype(), Shape::new(output_shape), y)
}

/// The value of `image` (extents `dims`, row-major `strides`) at the real position `point`:
/// the multilinear interpolation of its 2^r surrounding taps, each outside the image
/// reading 0. A non-finite coordinate reads 0.
fn interpolate(image: &[f64], dims: &[usize], strides: &[usize], point: &[f64]) -> f64 {
    let r = dims.len();
    let mut sum = 0.0;
    // Corner bit a set: the upper tap along axis a. `Plan::new` made sure 2^r fits.
    for corner in 0..1usize << r {
        let mut weight = 1.0;
        let mut at = Some(0usize);
        for a in 0..r {
            let low = point[a].floor();
            let frac = point[a] - low;
            // `== 1` with `!=` (cargo-mutants) visits each corner's complement instead: the
            // same 2^r (tap, weight) pairs, summed in another order, which ONNX leaves open.
            // Only the last bit of a sum can tell, so it is excluded in .cargo/mutants.toml.
            let upper = corner >> a & 1 == 1;
            let index = if upper { low + 1.0 } else { low };
            weight *= if upper { frac } else { 1.0 - frac };
            let inside = index >= 0.0 && index < dims[a] as f64;
            // `index` is a whole number within the axis when inside, so the cast is exact.
            at = at
                .filter(|_| inside)
                .map(|o| o + index as usize * strides[a]);
        }
        if let Some(at) = at {
            sum += weight * image[at];
        }
    }
    sum
}

/// Everything about one DeformConv call that follows from the shapes and attributes.
#[derive(Debug)]
struct Plan {
    batch: usize,
    channels: usize,
    out_channels: usize,
    group: usize,
    offset_group: usize,
    axes: Vec<Axis>,
    input_plane: usize,
    output_plane: usize,
    kernel_size: usize,
}

impl Plan {
    fn new(
        attrs: &DeformConv,
        x: &Tensor,
        w: &Tensor,
        offset: &Tensor,
        bias: Option<&Tensor>,
        mask: Option<&Tensor>,
    ) -> Result<Plan, OpError> {
        let (xs, ws, os) = (x.dims(), w.dims(), offset.dims());
        let rank = xs.len();
        let bad = |detail: String| {
            OpError::Shape(format!(
                "DeformConv: X {}, W {}, offset {}{}{}: {detail}",
                x.shape(),
                w.shape(),
                offset.shape(),
                bias.map_or(String::new(), |b| format!(", B {}", b.shape())),
                mask.map_or(String::new(), |m| format!(", mask {}", m.shape())),
            ))
        };
        if rank < 3 || ws.len() != rank || os.len() != rank {
            return Err(bad(
                "X (N, C, D1…Dr), W (M, C/group, k1…kr) and offset (N, offset_group·∏k·r, \
                 O1…Or) need one rank, 3 or more"
                    .into(),
            ));
        }
        let (group, offset_group) = (attrs.group, attrs.offset_group);
        for (name, value) in [("group", group), ("offset_group", offset_group)] {
            if value == 0 {
                return Err(OpError::Attribute {
                    name,
                    detail: "is 0; it must be at least 1".into(),
                });
            }
        }
        let (n, c, m) = (xs[0], xs[1], ws[0]);
        if ws[1].checked_mul(group) != Some(c) || m % group != 0 || c % offset_group != 0 {
            return Err(bad(format!(
                "X's {c} channels must be W[1]·group ({}·{group}) and divisible by \
                 offset_group {offset_group}, and group must divide W's {m} output channels",
                ws[1]
            )));
        }
        let kernel = &ws[2..];
        if !attrs.kernel_shape.is_empty() && attrs.kernel_shape != kernel {
            return Err(OpError::Attribute {
                name: "kernel_shape",
                detail: format!(
                    "{:?} does not match the spatial extents {kernel:?} of W {}",
                    attrs.kernel_shape,
                    w.shape()
                ),
            });
        }
        let axes = resolve(
            &xs[2..],
            &WindowAttrs {
                auto_pad: AutoPad::NotSet,
                kernel_shape: kernel,
                strides: &attrs.strides,
                dilations: &attrs.dilations,
                pads: &attrs.pads,
                ceil_mode: false,
            },
        )?;
        let r = rank - 2;
        // Each sample interpolates 2^r taps (`interpolate` shifts by r).
        if u32::try_from(r)
            .ok()
            .and_then(|r| 1usize.checked_shl(r))
            .is_none()
        {
            return Err(bad(format!(
                "{r} spatial axes is more than a sample's 2^r taps can be counted for"
            )));
        }
        let kernel_size = checked_product(kernel, "DeformConv kernel shape")?;
        let taps = offset_group
            .checked_mul(kernel_size)
            .ok_or_else(|| bad("the kernel is too large".into()))?;
        let output: Vec<usize> = axes.iter().map(|a| a.output).collect();
        let mut want_offset = vec![n, taps.saturating_mul(r)];
        want_offset.extend(&output);
        if os != want_offset.as_slice() {
            return Err(bad(format!(
                "offset must be {} (offset_group·∏kernel·r channels, Conv's output extents)",
                Shape::new(want_offset)
            )));
        }
        if let Some(mask) = mask {
            let mut want = vec![n, taps];
            want.extend(&output);
            if mask.dims() != want.as_slice() {
                return Err(bad(format!(
                    "mask must be {} (offset_group·∏kernel channels)",
                    Shape::new(want)
                )));
            }
        }
        if let Some(b) = bias {
            if b.dims() != [m] {
                return Err(bad(format!(
                    "B must be 1-D with one value per output channel ({m})"
                )));
            }
        }
        Ok(Plan {
            batch: n,
            channels: c,
            out_channels: m,
            group,
            offset_group,
            input_plane: checked_product(&xs[2..], "DeformConv input spatial shape")?,
            output_plane: checked_product(&output, "DeformConv output spatial shape")?,
            kernel_size,
            axes,
        })
    }
}
