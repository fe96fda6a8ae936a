//! MaxPool and AveragePool (kernels/pool.cu), and the sliding-window geometry they share
//! with Conv's im2col: kernel extent, stride, dilation, pads and output length per spatial
//! axis, resolved from the ONNX attributes as the reference executor resolves them.

use super::{expect_float, grid, required, single, Fail, Launcher, OpResult, Value};
use crate::kernels::Family;
use crate::tensor::DeviceTensor;
use crate::tensor::StorageSuffix;
use concord_core::op::{AutoPad, Pool};
use concord_core::{DType, OpError, Shape};
use cudarc::driver::DeviceRepr;

/// The most spatial axes the window kernels take.
pub const MAX_SPATIAL: usize = 3;

/// Window geometry for up to three spatial axes, laid out as `struct Window` in
/// kernels/pool.cu. Unused trailing axes have extent 1, kernel 1, stride 1, no padding.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    pub planes: i64,
    pub input: [i64; 3],
    pub kernel: [i64; 3],
    pub stride: [i64; 3],
    pub dilation: [i64; 3],
    pub pad_begin: [i64; 3],
    pub pad_end: [i64; 3],
    pub output: [i64; 3],
}

// SAFETY: Window is #[repr(C)], made only of i64 fields, and matches the kernel's struct
// field for field.
unsafe impl DeviceRepr for Window {}

/// The window attributes of a Conv or pooling node.
#[derive(Clone, Copy, Debug)]
pub struct WindowAttrs<'a> {
    pub auto_pad: AutoPad,
    pub kernel_shape: &'a [usize],
    pub strides: &'a [usize],
    pub dilations: &'a [usize],
    pub pads: &'a [usize],
    pub ceil_mode: bool,
}

impl Window {
    /// Resolves the geometry of spatial extents `input` (1 to 3 axes) for `planes` planes.
    pub fn resolve(planes: usize, input: &[usize], attrs: &WindowAttrs) -> OpResult<Window> {
        let n = input.len();
        if n == 0 || n > MAX_SPATIAL {
            return Err(Fail::Op(OpError::Unsupported(format!(
                "the CUDA window kernels take 1 to {MAX_SPATIAL} spatial axes, not {n}"
            ))));
        }
        let per_axis =
            |name: &'static str, values: &[usize], default: usize| -> OpResult<Vec<usize>> {
                if values.is_empty() {
                    return Ok(vec![default; n]);
                }
                if values.len() != n || values.contains(&0) {
                    return Err(Fail::Op(OpError::Attribute {
                        name,
                        detail: format!(
                            "{values:?} must hold one value of at least 1 per spatial axis ({n})"
                        ),
                    }));
                }
                Ok(values.to_vec())
            };
        let kernel = per_axis("kernel_shape", attrs.kernel_shape, 1)?;
        let strides = per_axis("strides", attrs.strides, 1)?;
        let dilations = per_axis("dilations", attrs.dilations, 1)?;
        let pads = if attrs.pads.is_empty() {
            vec![0; 2 * n]
        } else if attrs.pads.len() == 2 * n {
            attrs.pads.to_vec()
        } else {
            return Err(Fail::Op(OpError::Attribute {
                name: "pads",
                detail: format!("{:?} must hold begin and end pads for {n} axes", attrs.pads),
            }));
        };
        let mut w = Window {
            planes: planes as i64,
            input: [1; 3],
            kernel: [1; 3],
            stride: [1; 3],
            dilation: [1; 3],
            pad_begin: [0; 3],
            pad_end: [0; 3],
            output: [1; 3],
        };
        for i in 0..n {
            let (len, k, s, d) = (input[i], kernel[i], strides[i], dilations[i]);
            let dilated = (k - 1).saturating_mul(d).saturating_add(1);
            let (pb, pe, out) = match attrs.auto_pad {
                AutoPad::SameUpper | AutoPad::SameLower => {
                    // Output = ceil(in / stride); the padding makes that many windows fit,
                    // the odd cell at the end (UPPER) or the beginning (LOWER).
                    let out = len.div_ceil(s);
                    let needed = (out.saturating_sub(1) * s + dilated).saturating_sub(len);
                    let (small, large) = (needed / 2, needed - needed / 2);
                    if attrs.auto_pad == AutoPad::SameUpper {
                        (small, large, out)
                    } else {
                        (large, small, out)
                    }
                }
                AutoPad::NotSet | AutoPad::Valid => {
                    let (pb, pe) = if attrs.auto_pad == AutoPad::Valid {
                        (0, 0)
                    } else {
                        (pads[i], pads[i + n])
                    };
                    let padded = len + pb + pe;
                    if padded < dilated {
                        return Err(Fail::Op(OpError::Shape(format!(
                            "spatial axis {i}: input extent {len} plus pads {pb}+{pe} is smaller \
                             than the dilated kernel extent {dilated}"
                        ))));
                    }
                    let span = padded - dilated;
                    let out = if attrs.ceil_mode {
                        // A window may run past the padded end but must start inside the
                        // input or the begin padding.
                        let mut out = span.div_ceil(s) + 1;
                        if (out - 1) * s >= len + pb {
                            out -= 1;
                        }
                        out
                    } else {
                        span / s + 1
                    };
                    (pb, pe, out)
                }
            };
            w.input[i] = len as i64;
            w.kernel[i] = k as i64;
            w.stride[i] = s as i64;
            w.dilation[i] = d as i64;
            w.pad_begin[i] = pb as i64;
            w.pad_end[i] = pe as i64;
            w.output[i] = out as i64;
        }
        Ok(w)
    }

    pub fn output_volume(&self) -> usize {
        self.output.iter().product::<i64>() as usize
    }

    pub fn kernel_volume(&self) -> usize {
        self.kernel.iter().product::<i64>() as usize
    }

    pub fn input_volume(&self) -> usize {
        self.input.iter().product::<i64>() as usize
    }

    /// A 1×…×1 window with stride 1 and no padding reads its input as is.
    pub fn is_pointwise(&self) -> bool {
        self.kernel == [1; 3]
            && self.stride == [1; 3]
            && self.pad_begin == [0; 3]
            && self.pad_end == [0; 3]
    }
}

pub fn pool(
    l: &Launcher,
    attrs: &Pool,
    average: bool,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let dims = x.dev.shape.dims();
    if dims.len() < 3 {
        return Err(Fail::Op(OpError::Shape(format!(
            "pooling needs X of rank 3 or more (N, C, spatial…), got X {}",
            x.dev.shape
        ))));
    }
    let w = Window::resolve(
        dims[0] * dims[1],
        &dims[2..],
        &WindowAttrs {
            auto_pad: attrs.auto_pad,
            kernel_shape: &attrs.kernel_shape,
            strides: &attrs.strides,
            dilations: &attrs.dilations,
            pads: &attrs.pads,
            ceil_mode: attrs.ceil_mode,
        },
    )?;
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    if y.numel() != dims[0] * dims[1] * w.output_volume() {
        return Err(Fail::Op(OpError::Shape(format!(
            "pooling window geometry gives {} outputs per plane, shape inference {}",
            w.output_volume(),
            y.shape
        ))));
    }
    let average = i32::from(average);
    let include_pad = i32::from(attrs.count_include_pad);
    let empty = empty_window_value(x.dev.dtype);
    let f = l.function(Family::Pool, &format!("pool_{}", x.dev.storage.suffix()))?;
    l.launch(&f, grid(y.numel()), |a| {
        a.arg(&w)
            .arg(&average)
            .arg(&include_pad)
            .arg(&empty)
            .arg(&x.dev.ptr)
            .arg(&y.ptr);
    })?;
    Ok(y)
}

/// What MaxPool writes for a window that reads no input cell: the lowest finite value of
/// the model's dtype, as the reference writes — f16's (-65504) for an f16 model, f32's for
/// an f32 model — whatever the storage. On the cuda-fp16 target an f32 model's value is
/// then stored in half like every other f32 result, by round-to-nearest: f32::MIN is past
/// half's range and becomes -inf. That is the target's contract (f16 storage of the f32
/// result, the same rounding that makes 60000 + 60000 inf there), and it equals the
/// reference's f32 output rounded through f16; the -65504 this kernel used to write for f16
/// storage was the f16 dtype's value applied to an f32 model.
pub fn empty_window_value(dtype: DType) -> f32 {
    match dtype {
        DType::F16 => half::f16::MIN.to_f32(),
        _ => f32::MIN,
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
        // (7 + 1 + 1 - 3) / 2 + 1 = 4, and the unused axes are 1-extent identity axes.
        let w = Window::resolve(2, &[7], &attrs(&[3], &[2], &[1, 1])).expect("resolves");
        assert_eq!(w.output, [4, 1, 1]);
        assert_eq!((w.pad_begin[0], w.pad_end[0]), (1, 1));
        assert_eq!(w.planes, 2);
    }

    #[test]
    fn ceil_mode_keeps_only_windows_that_start_inside() {
        // in 2, kernel 1, stride 2: ceil(1/2)+1 = 2, but window 1 starts at 2, past the
        // input, so 1 remains.
        let mut a = attrs(&[1], &[2], &[]);
        a.ceil_mode = true;
        assert_eq!(Window::resolve(1, &[2], &a).expect("resolves").output[0], 1);
        // in 4, kernel 2, stride 2, pads 1+1: 3 windows, the last starts at 4 < 5.
        let mut b = attrs(&[2], &[2], &[1, 1]);
        b.ceil_mode = true;
        assert_eq!(Window::resolve(1, &[4], &b).expect("resolves").output[0], 3);
    }

    #[test]
    fn same_padding_puts_the_odd_cell_where_asked() {
        // in 5, kernel 4, stride 1: output 5 and 3 padded cells, (1, 2) upper, (2, 1) lower.
        let mut a = attrs(&[4], &[], &[]);
        a.auto_pad = AutoPad::SameUpper;
        let upper = Window::resolve(1, &[5], &a).expect("resolves");
        assert_eq!(
            (upper.pad_begin[0], upper.pad_end[0], upper.output[0]),
            (1, 2, 5)
        );
        a.auto_pad = AutoPad::SameLower;
        let lower = Window::resolve(1, &[5], &a).expect("resolves");
        assert_eq!(
            (lower.pad_begin[0], lower.pad_end[0], lower.output[0]),
            (2, 1, 5)
        );
    }

    #[test]
    fn an_empty_window_is_the_dtypes_lowest_stored_like_any_result() {
        assert_eq!(empty_window_value(DType::F32), f32::MIN);
        assert_eq!(empty_window_value(DType::F16), -65504.0);
        // On f16 storage the f32 model's value rounds (as the kernel's cvt.rn.f16.f32 does,
        // and as the reference's f32::MIN rounds through f16) to -inf; the f16 model's
        // value is exact.
        assert_eq!(
            half::f16::from_f32(empty_window_value(DType::F32)),
            half::f16::NEG_INFINITY
        );
        assert_eq!(
            half::f16::from_f32(empty_window_value(DType::F16)),
            half::f16::MIN
        );
    }

    #[test]
    fn four_spatial_axes_are_refused_with_a_reason() {
        let k = [1, 1, 1, 1];
        assert!(matches!(
            Window::resolve(1, &[2, 2, 2, 2], &attrs(&k, &[], &[])),
            Err(Fail::Op(OpError::Unsupported(_)))
        ));
    }
}
