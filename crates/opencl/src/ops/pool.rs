//! Pooling (kernels/pool.cl): MaxPool and AveragePool over 1-D and 2-D windows, and
//! GlobalAveragePool.

use super::linear::{as_2d, launch_pad_planes, pad_in_group_arg, resolve_axes, Axis};
use super::optional_input;
use super::{input, output};
use crate::cl::Program;
use crate::fuse::{Excite, EXCITE_MAX_CHANNELS};
use crate::plan::StorageDefines;
use crate::plan::{i32_arg, int8, window_local, Arg, Builder};
use crate::plan::{GemmKernel, Loc, Storage};
use crate::programs::Family;
use concord_core::op::Pool;
use concord_core::Shape;
use concord_core::{Graph, Node, Op, OpError};
use std::sync::Arc;

pub(super) fn check(_graph: &Graph, _node: &Node, attrs: &Pool) -> Result<(), String> {
    if attrs.kernel_shape.len() > 2 {
        return Err(format!(
            "{}-D pooling is not implemented (1-D and 2-D are)",
            attrs.kernel_shape.len()
        ));
    }
    Ok(())
}

pub(super) fn build(b: &mut Builder, node: &Node, excite: Option<Excite>) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "X")?, output(node)?);
    let xd = b.shape(x)?.dims().to_vec();
    if xd.len() < 3 {
        return Err(OpError::Shape(format!(
            "{} needs X of rank 3 or more (N, C, spatial…), got {xd:?}",
            node.op.name()
        )));
    }
    let planes = xd[0] * xd[1];
    let variant = b.storage(b.dtype(x)?).variant();
    let program = b.program(Family::Pool, variant)?;
    let xl = b.input(x)?;
    let yl = b.alloc(y)?;
    let attrs = match &node.op {
        Op::MaxPool(p) | Op::AveragePool(p) => p,
        _ => {
            let size: usize = xd[2..].iter().product();
            if let Some(excite) = excite {
                return squeeze_excite(b, &program, node, excite, (xl, yl), &xd);
            }
            b.launch_1d(
                &program,
                "global_average_pool",
                planes,
                vec![
                    Arg::Buf(xl),
                    Arg::Buf(yl),
                    Arg::I32(i32_arg(planes, "planes")?),
                    Arg::I32(i32_arg(size, "plane size")?),
                ],
            );
            return Ok(());
        }
    };
    let axes = resolve_axes(
        &xd[2..],
        &attrs.kernel_shape,
        &attrs.strides,
        &attrs.dilations,
        &attrs.pads,
        attrs.auto_pad,
        attrs.ceil_mode,
    )?;
    let (h, w) = as_2d(&axes)?;
    let geo0 = [
        h.input,
        w.input,
        h.kernel,
        w.kernel,
        h.stride,
        w.stride,
        h.pad_begin,
        w.pad_begin,
    ]
    .map(|v| v as i64);
    let geo1 = [
        h.dilation,
        w.dilation,
        h.output,
        w.output,
        h.pad_end,
        w.pad_end,
        usize::from(attrs.count_include_pad),
        0,
    ]
    .map(|v| v as i64);
    if matches!(node.op, Op::MaxPool(_))
        && b.gemm == GemmKernel::RegisterBlocked
        && w.stride <= 2
        && every_window_holds_a_pixel(&h)
        && every_window_holds_a_pixel(&w)
    {
        return max_pool_padded(b, &program, node, x, xl, yl, planes, h, w);
    }
    let kernel = if matches!(node.op, Op::MaxPool(_)) {
        "max_pool"
    } else {
        "average_pool"
    };
    b.launch(
        &program,
        kernel,
        &[w.output, h.output, planes],
        Some(&window_local(w.output, h.output)),
        vec![
            Arg::Buf(xl),
            Arg::Buf(yl),
            Arg::Int8(int8(&geo0)?),
            Arg::Int8(int8(&geo1)?),
        ],
    );
    Ok(())
}

/// True when every window along the axis covers at least one input position: the first
/// window reaches the image (pad_begin < reach) and the last starts inside it. Then padding
/// with -inf gives max_pool's result (a window of padding alone would give LOWEST there).
fn every_window_holds_a_pixel(a: &Axis) -> bool {
    let reach = (a.kernel - 1) * a.dilation;
    a.output > 0
        && a.pad_begin <= reach
        && reach - a.pad_begin < a.input
        && (a.output - 1) * a.stride < a.input + a.pad_begin
}

/// MaxPool on a CPU device: a -inf-padded copy of X and 16-lane taps (max_pool_padded in
/// pool.cl).
#[allow(clippy::too_many_arguments)]
fn max_pool_padded(
    b: &mut Builder,
    program: &Arc<Program>,
    node: &Node,
    x: &str,
    xl: Loc,
    yl: Loc,
    planes: usize,
    h: Axis,
    w: Axis,
) -> Result<(), OpError> {
    // Wide enough for the last window (ceil_mode can take it past the end pad).
    let extent = |a: &Axis| {
        (a.input + a.pad_begin + a.pad_end)
            .max((a.output - 1) * a.stride + (a.kernel - 1) * a.dilation + 1)
    };
    let (hp, wp) = (extent(&h), extent(&w));
    // The last chunk of a row loads up to 16·stride lanes plus the window's reach past its
    // start; rows of padding after the image keep those loads inside the copy.
    let tail_rows = (16 * w.stride + (w.kernel - 1) * w.dilation).div_ceil(wp) + 1;
    let rows = hp + tail_rows;
    let dtype = b.dtype(x)?;
    let storage = b.storage(dtype);
    let minus_infinity = match storage {
        Storage::F16 => i64::from(half::f16::NEG_INFINITY.to_bits()),
        _ => i64::from(f32::NEG_INFINITY.to_bits()),
    };
    let temp = format!("{}::padded", node.name);
    b.shapes
        .insert(temp.clone(), Shape::new([planes * rows * wp]));
    b.dtypes.insert(temp.clone(), dtype);
    let padded = b.alloc(&temp)?;
    let geo = [
        h.kernel, w.kernel, h.stride, w.stride, h.dilation, w.dilation, rows, wp,
    ]
    .map(|v| v as i64);
    let (oh, ow) = (
        Arg::I32(i32_arg(h.output, "OH")?),
        Arg::I32(i32_arg(w.output, "OW")?),
    );
    // A small pool is one work-group that pads its image itself (max_pool_padding), one
    // command instead of two, as a small conv is (see `linear::padded_conv`).
    if h.output * planes <= ONE_GROUP_ROWS && planes * rows * wp <= ONE_GROUP_PADDED {
        let global = [h.output, planes];
        b.launch(
            program,
            "max_pool_padding",
            &global,
            Some(&global),
            vec![
                Arg::Buf(xl),
                Arg::Buf(padded),
                Arg::Buf(yl),
                Arg::Int8(int8(&geo)?),
                oh,
                ow,
                pad_in_group_arg(planes, h, w, rows, wp, false)?,
            ],
        );
    } else {
        launch_pad_planes(
            b,
            storage,
            xl,
            padded.clone(),
            planes,
            h,
            w,
            rows,
            wp,
            minus_infinity,
            false,
        )?;
        b.launch(
            program,
            "max_pool_padded",
            &[h.output, planes],
            Some(&[h.output.min(8), 1]),
            vec![
                Arg::Buf(padded),
                Arg::Buf(yl),
                Arg::Int8(int8(&geo)?),
                oh,
                ow,
            ],
        );
    }
    b.release(&temp);
    Ok(())
}

/// The most output rows (work-items), and padded values, of a MaxPool that runs as one
/// work-group padding its own image.
const ONE_GROUP_ROWS: usize = 128;
const ONE_GROUP_PADDED: usize = 1 << 16;

/// GlobalAveragePool with a squeeze-excite tail folded in (see `fuse::absorb_excite`):
/// one launch of squeeze_excite in pool.cl, a work-group per batch entry. The node reads
/// X, then the two convs' weights and biases, and writes the channel scales or, with
/// `scales_input`, X times them; the shapes are checked here, where they are concrete.
fn squeeze_excite(
    b: &mut Builder,
    program: &Arc<Program>,
    node: &Node,
    excite: Excite,
    (xl, yl): (Loc, Loc),
    xd: &[usize],
) -> Result<(), OpError> {
    let (batch, c) = (xd[0], xd[1]);
    let size: usize = xd[2..].iter().product();
    let w1 = input(node, 1, "the folded squeeze conv's W")?;
    let w2 = input(node, 3, "the folded excite conv's W")?;
    let (d1, d2) = (b.shape(w1)?.dims().to_vec(), b.shape(w2)?.dims().to_vec());
    let m = d1.first().copied().unwrap_or(0);
    if xd.len() != 4 || d1 != [m, c, 1, 1] || d2 != [c, m, 1, 1] || m.max(c) > EXCITE_MAX_CHANNELS {
        return Err(OpError::Shape(format!(
            "{}: the folded squeeze-excite convs take X {xd:?} to {d1:?} and {d2:?}, which do \
             not fit (1×1 convs C → M → C, at most {EXCITE_MAX_CHANNELS} channels)",
            node.name
        )));
    }
    let mut args = vec![Arg::Buf(xl.clone())];
    for (weight, bias) in [(w1, 2), (w2, 4)] {
        args.push(Arg::Buf(b.input(weight)?));
        match optional_input(node, bias) {
            Some(name) => {
                args.push(Arg::Buf(b.input(name)?));
                args.push(Arg::I32(1));
            }
            // Bound to X and never read.
            None => {
                args.push(Arg::Buf(xl.clone()));
                args.push(Arg::I32(0));
            }
        }
    }
    args.push(Arg::Buf(yl));
    args.extend([
        Arg::I32(i32::from(excite.scales_input)),
        Arg::I32(i32_arg(c, "channels")?),
        Arg::I32(i32_arg(m, "squeezed channels")?),
        Arg::I32(i32_arg(size, "plane size")?),
    ]);
    for activation in [excite.reduce, excite.expand] {
        let (code, p, q) = activation.code();
        args.extend([Arg::I32(code), Arg::F32(p), Arg::F32(q)]);
    }
    let local = 64.min(b.device.max_work_group_size.max(1));
    b.launch(
        program,
        "squeeze_excite",
        &[batch * local],
        Some(&[local]),
        args,
    );
    Ok(())
}
