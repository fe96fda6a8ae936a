//! Sliding-window geometry shared by Conv and the pooling kernels: for each spatial axis, the
//! kernel extent, stride, dilation, begin and end padding and output length, resolved from
//! the ONNX attributes (`auto_pad`, `pads`, `ceil_mode`, defaults for empty vectors).
//!
//! The transposed window (ConvTranspose, Col2Im) is [`TransposedAxis`], resolved once in
//! concord-core (`ConvTranspose::plan`) for inference and the reference alike; this file
//! scatters columns along it ([`col2im_add`]).
//!
//! Shape inference in concord-core (`infer/nn.rs`) implements the same arithmetic on
//! possibly-symbolic dims; the tests in `crates/cpu/tests/nn_infer.rs` hold the two together.

use concord_core::op::{AutoPad, TransposedAxis};
use concord_core::{OpError, Shape};

/// The window attributes of one Conv or pooling node, as ONNX spells them: an empty
/// `strides`, `dilations` or `pads` means the default (ones, ones, zeros).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowAttrs<'a> {
    pub auto_pad: AutoPad,
    /// One extent per spatial axis, already resolved (Conv takes it from W when empty).
    pub kernel_shape: &'a [usize],
    pub strides: &'a [usize],
    pub dilations: &'a [usize],
    /// `[begin_0, begin_1, …, end_0, end_1, …]`.
    pub pads: &'a [usize],
    /// Pooling only: round the output length up instead of down.
    pub ceil_mode: bool,
}

/// One spatial axis of a sliding window, fully resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Axis {
    pub input: usize,
    pub kernel: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_begin: usize,
    pub pad_end: usize,
    pub output: usize,
}

impl Axis {
    /// The input coordinate that kernel tap `tap` of output position `out` reads, or None
    /// when that tap falls in the padding (or past the padded end, which ceil_mode allows).
    pub fn input_coord(&self, out: usize, tap: usize) -> Option<usize> {
        let padded = out * self.stride + tap * self.dilation;
        padded
            .checked_sub(self.pad_begin)
            .filter(|&i| i < self.input)
    }
}

/// Resolves the window geometry of every spatial axis of an input whose spatial extents are
/// `input`. Errors name the attribute or the axis that is wrong.
pub(crate) fn resolve(input: &[usize], attrs: &WindowAttrs) -> Result<Vec<Axis>, OpError> {
    let n = input.len();
    let per_axis = |name: &'static str, values: &[usize], default: usize| {
        if values.is_empty() {
            return Ok(vec![default; n]);
        }
        if values.len() != n {
            return Err(OpError::Attribute {
                name,
                detail: format!(
                    "has {} values {values:?}, expected one per spatial axis ({n})",
                    values.len()
                ),
            });
        }
        if values.contains(&0) {
            return Err(OpError::Attribute {
                name,
                detail: format!("values {values:?} must all be at least 1"),
            });
        }
        Ok(values.to_vec())
    };
    if attrs.kernel_shape.is_empty() && n > 0 {
        return Err(OpError::Attribute {
            name: "kernel_shape",
            detail: "is required and was not given".into(),
        });
    }
    let kernel = per_axis("kernel_shape", attrs.kernel_shape, 1)?;
    let strides = per_axis("strides", attrs.strides, 1)?;
    let dilations = per_axis("dilations", attrs.dilations, 1)?;
    let pads = if attrs.pads.is_empty() {
        vec![0; 2 * n]
    } else if attrs.pads.len() == 2 * n {
        attrs.pads.to_vec()
    } else {
        return Err(OpError::Attribute {
            name: "pads",
            detail: format!(
                "has {} values {:?}, expected {} (begin and end for each of {n} spatial axes)",
                attrs.pads.len(),
                attrs.pads,
                2 * n
            ),
        });
    };

    let mut axes = Vec::with_capacity(n);
    for i in 0..n {
        let (in_len, k, s, d) = (input[i], kernel[i], strides[i], dilations[i]);
        if in_len == 0 {
            return Err(OpError::Shape(format!(
                "spatial axis {i} of the input has extent 0; only the batch axis may be empty"
            )));
        }
        let too_big = || {
            OpError::Shape(format!(
                "spatial axis {i}: kernel {k}, dilation {d}, stride {s} and pads overflow"
            ))
        };
        let dilated = (k - 1)
            .checked_mul(d)
            .and_then(|v| v.checked_add(1))
            .ok_or_else(too_big)?;
        let (pad_begin, pad_end, output) = match attrs.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                // Output = ceil(in / stride) whatever ceil_mode says; the padding is what
                // makes that many windows fit, with the odd cell at the end (UPPER) or at
                // the beginning (LOWER).
                let output = in_len.div_ceil(s);
                let needed = ((output - 1) * s)
                    .checked_add(dilated)
                    .ok_or_else(too_big)?
                    .saturating_sub(in_len);
                let small = needed / 2;
                let large = needed - small;
                if attrs.auto_pad == AutoPad::SameUpper {
                    (small, large, output)
                } else {
                    (large, small, output)
                }
            }
            AutoPad::NotSet | AutoPad::Valid => {
                let (pb, pe) = if attrs.auto_pad == AutoPad::Valid {
                    (0, 0)
                } else {
                    (pads[i], pads[i + n])
                };
                let padded = in_len
                    .checked_add(pb)
                    .and_then(|v| v.checked_add(pe))
                    .ok_or_else(too_big)?;
                if padded < dilated {
                    return Err(OpError::Shape(format!(
                        "spatial axis {i}: input extent {in_len} plus pads {pb}+{pe} is smaller \
                         than the dilated kernel extent {dilated} (kernel {k}, dilation {d})"
                    )));
                }
                // Window taps are addressed up to about padded + dilated + stride; make sure
                // that arithmetic cannot overflow, whatever the attributes say.
                padded
                    .checked_add(dilated)
                    .and_then(|v| v.checked_add(s))
                    .ok_or_else(too_big)?;
                let span = padded - dilated;
                let output = if attrs.ceil_mode {
                    let mut output = span.div_ceil(s) + 1;
                    // A window may run past the padded end, but it must start inside the
                    // input or the begin padding (ONNX since 1.16, onnxruntime, PyTorch).
                    if (output - 1) * s >= in_len + pb {
                        output -= 1;
                    }
                    output
                } else {
                    span / s + 1
                };
                (pb, pe, output)
            }
        };
        axes.push(Axis {
            input: in_len,
            kernel: k,
            stride: s,
            dilation: d,
            pad_begin,
            pad_end,
            output,
        });
    }
    Ok(axes)
}

/// Adds a column matrix back into an image (the adjoint of im2col): `cols` has one row per
/// (channel, tap₀, …, tapₙ₋₁) in row-major order and one column per position of the
/// `input` extents of `axes` in row-major order; each value is added to `image` (channels
/// of ∏ `output` extents) at the position its tap lands on, or dropped where that is
/// cropped. ConvTranspose and Col2Im both end in this: in f64, and Col2Im of integers in
/// i128.
pub(crate) fn col2im_add<T: Copy + std::ops::AddAssign>(
    cols: &[T],
    axes: &[TransposedAxis],
    image: &mut [T],
) {
    let kernel: Vec<usize> = axes.iter().map(|a| a.kernel).collect();
    let input: Vec<usize> = axes.iter().map(|a| a.input).collect();
    let output: Vec<usize> = axes.iter().map(|a| a.output).collect();
    let output_strides = Shape::new(output.clone()).strides();
    let (kernel_size, input_plane, output_plane): (usize, usize, usize) = (
        kernel.iter().product(),
        input.iter().product(),
        output.iter().product(),
    );
    if input_plane == 0 || kernel_size == 0 {
        return;
    }
    let mut taps = vec![0usize; axes.len()];
    let mut position = vec![0usize; axes.len()];
    for (row_index, row) in cols.chunks_exact(input_plane).enumerate() {
        let channel = row_index / kernel_size;
        let Some(plane) = image.get_mut(channel * output_plane..(channel + 1) * output_plane)
        else {
            return;
        };
        if row_index % kernel_size == 0 {
            taps.fill(0);
        } else {
            advance(&mut taps, &kernel);
        }
        position.fill(0);
        for (column, &value) in row.iter().enumerate() {
            if column > 0 {
                advance(&mut position, &input);
            }
            let target = axes
                .iter()
                .zip(&position)
                .zip(&taps)
                .zip(&output_strides)
                .try_fold(0usize, |acc, (((axis, &i), &k), &stride)| {
                    axis.output_coord(i, k).map(|o| acc + o * stride)
                });
            if let Some(target) = target {
                plane[target] += value;
            }
        }
    }
}

/// The product of `dims`, or a shape error naming `what` when it overflows.
pub(crate) fn checked_product(dims: &[usize], what: &str) -> Result<usize, OpError> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            OpError::Shape(format!(
                "{what} {dims:?} has more elements than this machine can address"
            ))
        })
}

/// Moves a row-major multi-index one step forward within `dims` (wrapping to all zeros
/// after the last position).
pub(crate) fn advance(coords: &mut [usize], dims: &[usize]) {
    for (c, &d) in coords.iter_mut().zip(dims).rev() {
        *c += 1;
        if *c < d {
            return;
        }
        *c = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs<'a>(kernel: &'a [usize], strides: &'a [usize], pads: &'a [usize]) -> WindowAttrs<'a> {
        WindowAttrs {
            auto_pad: AutoPad::NotSet,
            kernel_shape: kernel,
            strides,
            dilations: &[],
            pads,
            ceil_mode: false,
        }
    }

    #[test]
    fn explicit_pads_floor_the_output() {
        // (7 + 1 + 1 - 3) / 2 + 1 = 4.
        let axes = resolve(&[7], &attrs(&[3], &[2], &[1, 1])).unwrap_or_default();
        assert_eq!(axes.first().map(|a| a.output), Some(4));
    }

    #[test]
    fn ceil_mode_drops_a_window_that_starts_in_the_end_padding() {
        // in 4, kernel 2, stride 2, pads 1+1: span 4, ceil(4/2)+1 = 3, and window 2 starts
        // at padded 4 >= 4 + 1? No: 4 < 5, so 3 is kept.
        let mut a = attrs(&[2], &[2], &[1, 1]);
        a.ceil_mode = true;
        assert_eq!(resolve(&[4], &a).ok().map(|v| v[0].output), Some(3));
        // in 2, kernel 1, stride 2, no pads: ceil(1/2)+1 = 2, but window 1 starts at 2,
        // outside the input, so only 1 remains.
        let mut b = attrs(&[1], &[2], &[]);
        b.ceil_mode = true;
        assert_eq!(resolve(&[2], &b).ok().map(|v| v[0].output), Some(1));
    }

    #[test]
    fn same_padding_splits_the_odd_cell() {
        // in 5, kernel 4, stride 1: output 5, total pad 3 → upper (1, 2), lower (2, 1).
        let mut a = attrs(&[4], &[], &[]);
        a.auto_pad = AutoPad::SameUpper;
        let upper = resolve(&[5], &a).unwrap_or_default();
        assert_eq!(
            upper.first().map(|x| (x.pad_begin, x.pad_end, x.output)),
            Some((1, 2, 5))
        );
        a.auto_pad = AutoPad::SameLower;
        let lower = resolve(&[5], &a).unwrap_or_default();
        assert_eq!(
            lower.first().map(|x| (x.pad_begin, x.pad_end, x.output)),
            Some((2, 1, 5))
        );
    }

    #[test]
    fn bad_attributes_are_named() {
        assert!(matches!(
            resolve(&[5, 5], &attrs(&[3, 3], &[1], &[])),
            Err(OpError::Attribute {
                name: "strides",
                ..
            })
        ));
        assert!(matches!(
            resolve(&[5], &attrs(&[3], &[], &[1])),
            Err(OpError::Attribute { name: "pads", .. })
        ));
        assert!(matches!(
            resolve(&[2], &attrs(&[3], &[], &[])),
            Err(OpError::Shape(_))
        ));
    }

    #[test]
    fn a_kernel_shape_is_needed_only_where_there_are_spatial_axes() {
        assert!(matches!(
            resolve(&[5], &attrs(&[], &[], &[])),
            Err(OpError::Attribute {
                name: "kernel_shape",
                ..
            })
        ));
        assert_eq!(resolve(&[], &attrs(&[], &[], &[])).ok(), Some(Vec::new()));
    }

    #[test]
    fn col2im_add_without_input_positions_adds_nothing() {
        // ConvTranspose and Col2Im refuse empty spatial extents before they get here, so
        // only this test reaches the guard: no positions must mean no rows, not
        // `chunks_exact(0)`'s panic, whatever the kernel.
        let axis = TransposedAxis {
            input: 0,
            kernel: 2,
            stride: 1,
            dilation: 1,
            pad_begin: 0,
            output: 1,
        };
        let mut image = [7.0];
        col2im_add(&[1.0, 2.0], &[axis], &mut image);
        assert_eq!(image, [7.0]);
        // And the positions with no kernel taps: no rows either.
        let axis = TransposedAxis {
            input: 2,
            kernel: 0,
            ..axis
        };
        col2im_add(&[1.0, 2.0], &[axis], &mut image);
        assert_eq!(image, [7.0]);
    }
}
