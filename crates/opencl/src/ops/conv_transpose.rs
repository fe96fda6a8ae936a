//! ConvTranspose (kernels/conv.cl's `conv_transpose`): 1-D to 3-D, every attribute
//! (groups, strides, dilations, pads, auto_pad, output_padding, output_shape) resolved by
//! core's [`ConvTranspose::plan`], the one rule the reference follows too; one work-item
//! gathers each output element's contributing taps. On CPU devices, when every axis has
//! kernel == stride and dilation 1 (each output takes one tap per axis, as U-Net
//! upsampling does), `conv_transpose_rows` computes 16 input columns of an output row per
//! work-item in vector registers instead.

use super::{input, optional_input, output};
use crate::plan::{i32_arg, int8, Arg, Builder, GemmKernel, Loc, StorageDefines};
use crate::programs::Family;
use concord_core::op::ConvTranspose;
use concord_core::{Graph, Node, OpError};

/// Whether the kernel implements this node, and why not.
pub(super) fn check(graph: &Graph, node: &Node) -> Result<(), String> {
    match super::input_rank(graph, node, 0) {
        Some(3..=5) | None => Ok(()),
        Some(r) => Err(format!(
            "{}-D ConvTranspose is not implemented (1-D to 3-D are)",
            r.saturating_sub(2)
        )),
    }
}

pub(super) fn build(b: &mut Builder, node: &Node, attrs: &ConvTranspose) -> Result<(), OpError> {
    let (x, w, y) = (input(node, 0, "X")?, input(node, 1, "W")?, output(node)?);
    let bias = optional_input(node, 2);
    let xd = b.shape(x)?.dims().to_vec();
    let wd = b.shape(w)?.dims().to_vec();
    if !(3..=5).contains(&xd.len()) || wd.len() != xd.len() {
        return Err(OpError::Shape(format!(
            "ConvTranspose on OpenCL needs X (N, C, spatial…) with 1 to 3 spatial axes and W \
             of the same rank, got X {xd:?} and W {wd:?}"
        )));
    }
    let group = attrs.conv.group;
    let (n, c) = (xd[0], xd[1]);
    if group == 0 || wd[0] != c || c % group != 0 {
        return Err(OpError::Shape(format!(
            "ConvTranspose: X {xd:?} has {c} channels, W {wd:?} has {} input channels and \
             group is {group}; they must be equal and divisible by a group of at least 1",
            wd[0]
        )));
    }
    let mg = wd[1];
    let m = mg.checked_mul(group).ok_or_else(|| {
        OpError::Shape(format!(
            "ConvTranspose: W {wd:?} times group {group} overflows"
        ))
    })?;
    if let Some(name) = bias {
        let bd = b.shape(name)?.dims();
        if bd != [m] {
            return Err(OpError::Shape(format!(
                "ConvTranspose: B {bd:?} must be 1-D with one value per output channel ({m})"
            )));
        }
    }
    let kernel = &wd[2..];
    if !attrs.conv.kernel_shape.is_empty() && attrs.conv.kernel_shape != kernel {
        return Err(OpError::Attribute {
            name: "kernel_shape",
            detail: format!(
                "{:?} does not match the spatial extents {kernel:?} of W {wd:?}",
                attrs.conv.kernel_shape
            ),
        });
    }
    let axes = attrs.plan(&xd[2..], kernel)?;
    let out_dims = b.shape(y)?.dims().to_vec();
    let mut expected = vec![n, m];
    expected.extend(axes.iter().map(|a| a.output));
    if out_dims != expected {
        return Err(OpError::Shape(format!(
            "ConvTranspose: the output was inferred as {out_dims:?} but the geometry gives \
             {expected:?}"
        )));
    }
    // Spatial axes padded to three with leading axes of extent 1, kernel 1, stride 1, so
    // that the last one is always the innermost (the one conv_transpose_rows vectorises).
    let lead = 3usize.saturating_sub(axes.len());
    let axis = |i: usize| i.checked_sub(lead).and_then(|i| axes.get(i)).copied();
    let pick = |f: &dyn Fn(&concord_core::op::TransposedAxis) -> usize, default: usize| {
        [0, 1, 2].map(|i| axis(i).map_or(default, |a| f(&a)) as i64)
    };
    let ins = pick(&|a| a.input, 1);
    let outs = pick(&|a| a.output, 1);
    let ks = pick(&|a| a.kernel, 1);
    let ss = pick(&|a| a.stride, 1);
    let ds = pick(&|a| a.dilation, 1);
    let ps = pick(&|a| a.pad_begin, 0);
    let cat = |a: [i64; 3], b: [i64; 3], tail: [i64; 2]| -> Vec<i64> {
        a.into_iter().chain(b).chain(tail).collect()
    };
    let total: usize = out_dims.iter().product();
    let gi = int8(&cat(ins, outs, [c as i64, m as i64]))?;
    let gk = int8(&cat(ks, ss, [(c / group) as i64, mg as i64]))?;
    let gd = int8(&cat(ds, ps, [n as i64, 0]))?;
    i32_arg(total, "ConvTranspose's output size")?;
    let variant = b.storage(b.dtype(x)?).variant();
    let program = b.program(Family::Conv, variant)?;
    let xl = b.input(x)?;
    let wl = b.input(w)?;
    let bl = match bias {
        Some(name) => b.input(name)?,
        None => wl.clone(),
    };
    let yl = b.alloc(y)?;
    let args = vec![
        Arg::Buf(xl),
        Arg::Buf(wl),
        Arg::Buf(bl),
        Arg::I32(bias.is_some() as i32),
        Arg::Buf(yl),
        Arg::Int8(gi),
        Arg::Int8(gk),
        Arg::Int8(gd),
    ];
    // One tap per output on every axis; the innermost stride bounds the accumulators a
    // work-item keeps (CT_MAX_S2 in conv.cl).
    let one_tap = axes.iter().all(|a| a.kernel == a.stride && a.dilation == 1);
    let innermost_stride = ss[2] as usize;
    // It loads whole 16-lane vectors past a short row's end, which a slot's slack covers.
    let x_in_slot = matches!(args[0], Arg::Buf(Loc::Slot(_)));
    if b.gemm == GemmKernel::RegisterBlocked
        && one_tap
        && innermost_stride <= ROWS_MAX_S2
        && x_in_slot
    {
        let chunks = (ins[2] as usize).div_ceil(16).max(1);
        let rows = (outs[0] * outs[1]) as usize;
        b.launch(
            &program,
            "conv_transpose_rows",
            &[chunks, rows, n * m],
            Some(&[1, 4, 1]),
            args,
        );
    } else {
        b.launch_1d(&program, "conv_transpose", total, args);
    }
    Ok(())
}

/// The largest innermost stride conv_transpose_rows takes (CT_MAX_S2 in conv.cl).
const ROWS_MAX_S2: usize = 4;
