//! Resize (kernels/resize.cl), nearest and linear, one axis at a time with tap tables made
//! on the host exactly as the reference computes them; on CPU devices a resize of the last
//! two axes only (an image's height and width) is one pass over output rows (`resize_hw`).

use super::{input, optional_input, output};
use crate::plan::StorageDefines;
use crate::plan::{i32_arg, Arg, Builder, GemmKernel, Loc, Storage};
use crate::programs::Family;
use concord_core::op::{CoordinateTransform, Resize, ResizeMode};
use concord_core::resize::resize_taps;
use concord_core::{DType, Node, OpError, Tensor};

pub(super) fn check(attrs: &Resize) -> Result<(), String> {
    if attrs.axes.is_some()
        || attrs.keep_aspect_ratio != concord_core::op::AspectRatioPolicy::Stretch
    {
        return Err("Resize with axes or a keep_aspect_ratio_policy is not implemented".into());
    }
    if attrs.mode == ResizeMode::Cubic {
        return Err("Resize mode cubic is not implemented (nearest and linear are)".into());
    }
    if attrs.antialias && attrs.mode != ResizeMode::Nearest {
        return Err("Resize antialias = 1 is not implemented".into());
    }
    if attrs.coordinate_transformation_mode == CoordinateTransform::TfCropAndResize {
        return Err(
            "Resize coordinate_transformation_mode tf_crop_and_resize is not implemented".into(),
        );
    }
    Ok(())
}

pub(super) fn build(b: &mut Builder, node: &Node, attrs: &Resize) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "X")?, output(node)?);
    let xd = b.shape(x)?.dims().to_vec();
    let out = b.shape(y)?.dims().to_vec();
    let scales: Option<Vec<f32>> = optional_input(node, 2)
        .and_then(|n| b.host_value(n))
        .filter(|t| !t.is_empty())
        .map(|t| t.to_f64_vec().into_iter().map(|v| v as f32).collect());
    let variant = b.storage(b.dtype(x)?).variant();
    let program = b.program(Family::Resize, variant)?;
    let mut current = b.input(x)?;
    let mut dims = xd.clone();
    // Axes whose taps are the identity are skipped, as the reference skips them.
    let mut plan = Vec::new();
    for axis in 0..xd.len() {
        let (in_len, out_len) = (xd[axis], out[axis]);
        let scale = match &scales {
            Some(s) => s.get(axis).copied().unwrap_or(1.0),
            None => out_len as f32 / in_len.max(1) as f32,
        };
        let taps = taps(attrs, in_len, out_len, scale);
        let identity = out_len == in_len
            && taps
                .iter()
                .enumerate()
                .all(|(i, t)| t.i0 == i && t.w1 == 0.0);
        if !identity {
            plan.push((axis, taps));
        }
    }
    if plan.is_empty() {
        return b.alias(y, x);
    }
    let rank = xd.len();
    let last_two = plan.len() == 2 && plan[0].0 + 2 == rank && plan[1].0 + 1 == rank;
    if b.gemm == GemmKernel::RegisterBlocked && last_two {
        let [h, w] = [&plan[0], &plan[1]].map(|(axis, taps)| upload_taps(b, node, *axis, taps));
        let [h, w] = [h?, w?];
        let planes: usize = xd[..rank - 2].iter().product();
        let (oh, ow) = (out[rank - 2], out[rank - 1]);
        let target = b.alloc(y)?;
        let mut args = vec![Arg::Buf(current), Arg::Buf(target)];
        args.extend(h.into_iter().chain(w).map(Arg::Buf));
        for (v, what) in [
            (xd[rank - 2], "input height"),
            (xd[rank - 1], "input width"),
            (oh, "output height"),
            (ow, "output width"),
            (planes, "plane count"),
        ] {
            args.push(Arg::I32(i32_arg(v, what)?));
        }
        b.launch(&program, "resize_hw", &[oh, planes], Some(&[1, 4]), args);
        return Ok(());
    }
    let steps = plan.len();
    for (step, (axis, taps)) in plan.into_iter().enumerate() {
        let (in_len, out_len) = (xd[axis], out[axis]);
        let [i0, i1, w0, w1] = upload_taps(b, node, axis, &taps)?;
        let outer: usize = dims[..axis].iter().product();
        let inner: usize = dims[axis + 1..].iter().product();
        dims[axis] = out_len;
        let target = if step + 1 == steps {
            b.alloc(y)?
        } else {
            let temp = format!("{}::resized{axis}", node.name);
            b.shapes
                .insert(temp.clone(), concord_core::Shape::new(dims.clone()));
            b.dtypes
                .insert(temp.clone(), b.dtype(x).unwrap_or(DType::F32));
            b.alloc(&temp)?
        };
        let n = outer * out_len * inner;
        b.launch_1d(
            &program,
            "resize_axis",
            n,
            vec![
                Arg::Buf(current),
                Arg::Buf(target.clone()),
                Arg::Buf(i0),
                Arg::Buf(i1),
                Arg::Buf(w0),
                Arg::Buf(w1),
                Arg::I32(i32_arg(outer, "outer extent")?),
                Arg::I32(i32_arg(in_len, "input extent")?),
                Arg::I32(i32_arg(out_len, "output extent")?),
                Arg::I32(i32_arg(inner, "inner extent")?),
            ],
        );
        current = target;
    }
    Ok(())
}

/// Uploads one axis's tap table as resize.cl reads it: source indices i0, i1 (i64) and
/// weights w0, w1 (f32), one entry per output coordinate.
fn upload_taps(
    b: &mut Builder,
    node: &Node,
    axis: usize,
    taps: &[Tap],
) -> Result<[Loc; 4], OpError> {
    let key = format!("{}::taps{axis}", node.name);
    let col = |f: fn(&Tap) -> i64| Tensor::vec_i64(taps.iter().map(f).collect());
    let i0 = b.constant(&format!("{key}.i0"), &col(|t| t.i0 as i64), Storage::I64)?;
    let i1 = b.constant(&format!("{key}.i1"), &col(|t| t.i1 as i64), Storage::I64)?;
    let w0 = Tensor::from_f32([taps.len()], taps.iter().map(|t| t.w0 as f32).collect())
        .map_err(|e| OpError::Shape(e.to_string()))?;
    let w1 = Tensor::from_f32([taps.len()], taps.iter().map(|t| t.w1 as f32).collect())
        .map_err(|e| OpError::Shape(e.to_string()))?;
    let w0 = b.constant(&format!("{key}.w0"), &w0, Storage::F32)?;
    let w1 = b.constant(&format!("{key}.w1"), &w1, Storage::F32)?;
    Ok([i0, i1, w0, w1])
}

/// One output coordinate's sources: value = w0·x[i0] + w1·x[i1] (nearest: w1 = 0).
#[derive(Clone, Copy, Debug)]
struct Tap {
    i0: usize,
    i1: usize,
    w0: f64,
    w1: f64,
}

/// Core's one Resize tap rule, with both weights as the plan's f32 tables are built from.
fn taps(attrs: &Resize, in_len: usize, out_len: usize, scale: f32) -> Vec<Tap> {
    resize_taps(attrs, in_len, out_len, scale)
        .into_iter()
        .map(|t| {
            let w1 = f64::from(t.w1);
            Tap {
                i0: t.i0,
                i1: t.i1,
                w0: 1.0 - w1,
                w1,
            }
        })
        .collect()
}
