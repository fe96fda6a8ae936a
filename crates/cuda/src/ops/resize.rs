//! Resize, nearest and linear, one axis at a time (kernels/resize.cu). The taps of every
//! output index (which input indices, which weights) are computed here on the host with
//! onnxruntime's f32 coordinate arithmetic, as the reference does, so the device picks the
//! same pixels; the device only gathers and blends.

use super::{expect_float, grid, required, single, Fail, Launcher, OpResult, Value};
use crate::kernels::Family;
use crate::tensor::StorageSuffix;
use crate::tensor::{DeviceTensor, Storage};
use concord_core::op::{CoordinateTransform, Resize, ResizeMode};
use concord_core::{DType, OpError, Shape, Tensor};

/// One output index's taps: `i0 == i1` is a plain copy of `i0` (core's one tap type).
pub use concord_core::resize::Tap;

pub fn resize(
    l: &Launcher,
    attrs: &Resize,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    if attrs.mode == ResizeMode::Cubic
        || attrs.coordinate_transformation_mode == CoordinateTransform::TfCropAndResize
    {
        return Err(Fail::Op(OpError::Unsupported(
            "Resize: cubic mode and tf_crop_and_resize are not supported".into(),
        )));
    }
    let (dtype, shape) = single(facts)?;
    let in_dims = x.dev.shape.dims().to_vec();
    let out_dims = shape.dims().to_vec();
    // The coordinate scale of each axis: the scales input when given (non-empty), else
    // out/in in f32, as the reference does.
    let scales: Option<Vec<f32>> = match inputs.get(2).copied().flatten() {
        Some(v) => match v.host {
            Some(t) if !t.is_empty() => {
                Some(t.to_f64_vec().into_iter().map(|s| s as f32).collect())
            }
            Some(_) => None,
            None => {
                return Err(Fail::Op(OpError::NotConstant {
                    index: 2,
                    name: "scales",
                }))
            }
        },
        None => None,
    };
    let mut axes: Vec<(usize, Vec<Tap>)> = Vec::new();
    for (axis, &in_len) in in_dims.iter().enumerate() {
        let out_len = out_dims.get(axis).copied().unwrap_or(0);
        let scale = match &scales {
            Some(s) => s.get(axis).copied().unwrap_or(1.0),
            None => out_len as f32 / in_len as f32,
        };
        let taps = axis_taps(attrs, in_len, out_len, scale);
        let identity =
            out_len == in_len && taps.iter().enumerate().all(|(i, t)| t.i0 == i && t.i1 == i);
        if !identity {
            axes.push((axis, taps));
        }
    }
    let y = l.output(dtype, shape)?;
    if axes.is_empty() || y.numel() == 0 {
        if axes.is_empty() {
            // Every axis maps index to index: the output is the input.
            return Ok(x.dev.reshaped(y.shape.clone()));
        }
        return Ok(y);
    }
    let mut dims = in_dims.clone();
    let mut current = x.dev.clone();
    let last = axes.len() - 1;
    for (step, (axis, taps)) in axes.iter().enumerate() {
        let in_len = dims[*axis];
        let out_len = taps.len();
        let outer = dims[..*axis].iter().product::<usize>() as i64;
        let inner = dims[axis + 1..].iter().product::<usize>() as i64;
        dims[*axis] = out_len;
        // Intermediate axes stay in f32 so that f16 storage rounds once, at the end.
        let next = if step == last {
            y.clone()
        } else {
            l.scratch(Storage::F32, DType::F32, Shape::new(dims.clone()))?
        };
        let i0 = l.upload(
            &Tensor::vec_i64(taps.iter().map(|t| t.i0 as i64).collect()),
            Storage::I64,
        )?;
        let i1 = l.upload(
            &Tensor::vec_i64(taps.iter().map(|t| t.i1 as i64).collect()),
            Storage::I64,
        )?;
        let w1 = Tensor::from_f32([taps.len()], taps.iter().map(|t| t.w1).collect())
            .map_err(|e| Fail::Op(OpError::Shape(e.to_string())))?;
        let w1 = l.upload(&w1, Storage::F32)?;
        let f = l.function(
            Family::Resize,
            &format!(
                "resize_axis_{}_{}",
                current.storage.suffix(),
                next.storage.suffix()
            ),
        )?;
        let (in_len, out_len) = (in_len as i64, out_len as i64);
        l.launch(&f, grid((outer * out_len * inner) as usize), |a| {
            a.arg(&outer)
                .arg(&in_len)
                .arg(&out_len)
                .arg(&inner)
                .arg(&i0.ptr)
                .arg(&i1.ptr)
                .arg(&w1.ptr)
                .arg(&current.ptr)
                .arg(&next.ptr);
        })?;
        current = next;
    }
    Ok(y)
}

/// The taps of every output index along one axis of length `in_len` resized to `out_len`:
/// core's one Resize tap rule, whose f32 weights the kernel blends with.
pub fn axis_taps(attrs: &Resize, in_len: usize, out_len: usize, scale: f32) -> Vec<Tap> {
    concord_core::resize::resize_taps(attrs, in_len, out_len, scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use concord_core::op::NearestMode;

    #[test]
    fn asymmetric_nearest_doubling_repeats_each_input() {
        // Output o reads floor(o / 2) (asymmetric, floor): 0 0 1 1 2 2.
        let attrs = Resize {
            mode: ResizeMode::Nearest,
            coordinate_transformation_mode: CoordinateTransform::Asymmetric,
            nearest_mode: NearestMode::Floor,
            ..Resize::default()
        };
        let taps = axis_taps(&attrs, 3, 6, 2.0);
        let picked: Vec<usize> = taps.iter().map(|t| t.i0).collect();
        assert_eq!(picked, vec![0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn half_pixel_linear_upsampling_weights() {
        // in 2 → out 4, scale 2: x = (o + 0.5)/2 - 0.5 = -0.25, 0.25, 0.75, 1.25; clamped to
        // [0, 1]: 0 (taps 0 and 1, all weight on 0), 0.25, 0.75, 1 (a copy of the last).
        let attrs = Resize {
            mode: ResizeMode::Linear,
            ..Resize::default()
        };
        let taps = axis_taps(&attrs, 2, 4, 2.0);
        assert_eq!(
            taps[0],
            Tap {
                i0: 0,
                i1: 1,
                w1: 0.0
            }
        );
        assert_eq!(
            taps[1],
            Tap {
                i0: 0,
                i1: 1,
                w1: 0.25
            }
        );
        assert_eq!(
            taps[2],
            Tap {
                i0: 0,
                i1: 1,
                w1: 0.75
            }
        );
        assert_eq!(
            taps[3],
            Tap {
                i0: 1,
                i1: 1,
                w1: 0.0
            }
        );
    }
}
