//! Convolution and matrix multiplication (kernels/gemm.cl, kernels/conv.cl).
//!
//! On a GPU every non-depthwise Conv is an implicit GEMM on the local-memory tiled kernel
//! (im2col on the fly in the tile loads; a 1×1 stride-1 unpadded conv reads the image
//! directly as the B matrix), depthwise Conv has its own kernel, and Gemm and MatMul are the
//! same tiled GEMM with strided operands.
//!
//! On a CPU device (PoCL) local memory is ordinary cache and barriers cost, so the kernels
//! are register-blocked instead: a work-item keeps an 8-row × 16- or 32-column block of the
//! output in 16-lane registers (one AVX-512 register each), every weight feeds a
//! multiply-add with a broadcast operand, and the fused epilogue (bias, residual,
//! activation) runs on whole 16-lane rows. Which kernel a Conv gets:
//! - 1×1, stride 1, no padding: `gemm_block` with the image itself as B;
//! - stride 1: `conv_shift`, shifted contiguous views of a zero-padded copy of the image
//!   (no im2col matrix);
//! - stride 2 with few input channels (stems): `conv_rows`, output rows of the padded copy,
//!   even lanes of two loads;
//! - otherwise: `im2col` into packed panels, then `gemm_block`;
//! - depthwise: `depthwise_flat` (small planes in rows of at most 8, stride 1, 3×3 or 5×5
//!   with "same" padding: the plane as one flat run of 16-lane chunks),
//!   `depthwise_inplace` (width stride 1 or 2, left pad up to 3, the image read
//!   in place, four output rows at a time; 3×3 and 5×5 kernels with equal strides and a
//!   left pad of K/2 with K and S fixed) or `depthwise_rows` (each input row padded in a
//!   private buffer), else the generic `depthwise`.
//!
//! A conv_shift or conv_rows small enough to be one work-group pads its image itself
//! (`conv_shift_padding`, `conv_rows_padding`), one launch instead of pad_planes' and its
//! own.
//!
//! Vector loads may run past a value's end; every slot has [`crate::plan::SLOT_SLACK`]
//! bytes for that, and those lanes are dropped.

use super::{input, optional_input, output};
use crate::fuse::{Activation, Epilogue, FusedNode};
use crate::plan::StorageDefines;
use crate::plan::{i32_arg, int8, Arg, Builder, GemmKernel, Loc, Storage, View};
use crate::programs::Family;
use concord_core::op::{AutoPad, Conv, Gemm};
use concord_core::{DType, Shape, Tensor};
use concord_core::{Dim, Graph, Node, OpError};

/// Tile shape of the GEMM kernel, as build options; the work-group is
/// (TSN / WPTN) × (TSM / WPTM).
#[derive(Clone, Copy, Debug)]
struct Tiles {
    tsm: usize,
    tsn: usize,
    tsk: usize,
    wptm: usize,
    wptn: usize,
}

const TILES: Tiles = Tiles {
    tsm: 64,
    tsn: 64,
    tsk: 16,
    wptm: 4,
    wptn: 4,
};

/// Whether the local-memory tiled GEMM fits a device: its work-group (reqd_work_group_size)
/// and its two local tiles.
pub(crate) fn local_tiled_fits(max_work_group_size: usize, local_mem_bytes: u64) -> bool {
    let t = TILES;
    let items = (t.tsm / t.wptm) * (t.tsn / t.wptn);
    let local = (t.tsk * (t.tsm + t.tsn) * std::mem::size_of::<f32>()) as u64;
    items <= max_work_group_size && local <= local_mem_bytes
}

impl Tiles {
    fn defines(&self) -> String {
        format!(
            "-DTSM={} -DTSN={} -DTSK={} -DWPTM={} -DWPTN={}",
            self.tsm, self.tsn, self.tsk, self.wptm, self.wptn
        )
    }

    fn local(&self) -> [usize; 3] {
        [self.tsn / self.wptn, self.tsm / self.wptm, 1]
    }
}

pub(super) fn check_conv(graph: &Graph, node: &Node, attrs: &Conv) -> Result<(), String> {
    match super::input_rank(graph, node, 0) {
        Some(3 | 4) | None => {}
        Some(r) => {
            return Err(format!(
                "{}-D convolution is not implemented (1-D and 2-D are)",
                r.saturating_sub(2)
            ))
        }
    }
    if attrs.kernel_shape.len() > 2 {
        return Err("3-D convolution is not implemented (1-D and 2-D are)".into());
    }
    Ok(())
}

pub(super) fn check_matmul(graph: &Graph, node: &Node) -> Result<(), String> {
    let rank = |i: usize| super::input_rank(graph, node, i);
    let batch = rank(0)
        .unwrap_or(2)
        .max(rank(1).unwrap_or(2))
        .saturating_sub(2);
    if batch > 2 {
        return Err(format!(
            "MatMul with {batch} batch dims is not implemented (at most 2 are)"
        ));
    }
    let _ = Dim::Unknown;
    Ok(())
}

/// The arguments of one GEMM launch, before they are bound.
struct GemmCall {
    a: Loc,
    b: Loc,
    y: Loc,
    /// Value name of B, to pack a constant B on the host.
    b_name: String,
    node: String,
    m: usize,
    n: usize,
    k: usize,
    /// (a_sm, a_sk, a_s0, a_s1, a_offset): A's strides per row, per k and per batch index,
    /// and where its first element is (a view's offset).
    sa: [i64; 5],
    /// (b_sk, b_sn, b_s0, b_s1, b_offset)
    sb: [i64; 5],
    batch: usize,
    batch1: usize,
    bias: Option<(Loc, [i64; 3])>,
    alpha: f32,
    beta: f32,
    epilogue: (Option<Loc>, Activation),
    /// (geo0, geo1) for an implicit-GEMM convolution.
    conv: Option<([i64; 8], [i64; 8])>,
    /// Where the output's rows go when not contiguous (see `permuted_rows`; register-blocked
    /// GEMM only): the strides of the batch indices b0, b1 and of a row.
    y_strides: Option<[i64; 3]>,
}

fn launch_gemm(b: &mut Builder, dtype_variant: &str, call: GemmCall) -> Result<(), OpError> {
    if b.gemm == GemmKernel::RegisterBlocked && call.conv.is_none() {
        return gemm_via_blocked(b, dtype_variant, call);
    }
    let tiles = TILES;
    let variant = format!("{dtype_variant} {}", tiles.defines());
    let program = b.program(Family::Gemm, &variant)?;
    let local = tiles.local();
    let global = [
        call.n.div_ceil(tiles.tsn) * local[0],
        call.m.div_ceil(tiles.tsm) * local[1],
        call.batch,
    ];
    let (bias, sbias, has_bias) = match call.bias {
        Some((loc, s)) => (loc, [s[0], s[1], s[2], 1], true),
        None => (call.y.clone(), [0, 0, 0, 0], false),
    };
    let _ = has_bias;
    let (res, has_res) = match call.epilogue.0 {
        Some(loc) => (loc, 1),
        None => (call.y.clone(), 0),
    };
    let (act, act_a, act_b) = call.epilogue.1.code();
    let (geo0, geo1, conv) = match call.conv {
        Some((g0, g1)) => (g0, g1, 1),
        None => ([0; 8], [0; 8], 0),
    };
    let args = vec![
        Arg::Buf(call.a),
        Arg::Buf(call.b),
        Arg::Buf(call.y),
        Arg::I32(i32_arg(call.m, "M")?),
        Arg::I32(i32_arg(call.n, "N")?),
        Arg::I32(i32_arg(call.k, "K")?),
        Arg::Int8(int8(&call.sa)?),
        Arg::Int8(int8(&call.sb)?),
        Arg::I32(i32_arg(call.batch1.max(1), "batch")?),
        Arg::Buf(bias),
        Arg::Int8(int8(&sbias)?),
        Arg::F32(call.alpha),
        Arg::F32(call.beta),
        Arg::Buf(res),
        Arg::I32(has_res),
        Arg::I32(act),
        Arg::F32(act_a),
        Arg::F32(act_b),
        Arg::I32(conv),
        Arg::Int8(int8(&geo0)?),
        Arg::Int8(int8(&geo1)?),
    ];
    b.launch(&program, "gemm_tiled", &global, Some(&local), args);
    Ok(())
}

/// One spatial axis of a sliding window, resolved.
#[derive(Clone, Copy, Debug)]
pub(super) struct Axis {
    pub input: usize,
    pub kernel: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_begin: usize,
    pub pad_end: usize,
    pub output: usize,
}

/// Resolves kernel, stride, dilation and padding per spatial axis, as the reference does
/// (explicit pads, SAME_UPPER/SAME_LOWER, VALID, ceil mode).
#[allow(clippy::too_many_arguments)]
pub(super) fn resolve_axes(
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
    auto_pad: AutoPad,
    ceil_mode: bool,
) -> Result<Vec<Axis>, OpError> {
    let n = input.len();
    let per = |v: &[usize], name: &'static str| -> Result<Vec<usize>, OpError> {
        if v.is_empty() {
            Ok(vec![1; n])
        } else if v.len() == n && !v.contains(&0) {
            Ok(v.to_vec())
        } else {
            Err(OpError::Attribute {
                name,
                detail: format!("{v:?} does not give one positive value per spatial axis ({n})"),
            })
        }
    };
    let kernel = per(kernel, "kernel_shape")?;
    let strides = per(strides, "strides")?;
    let dilations = per(dilations, "dilations")?;
    let pads = if pads.is_empty() {
        vec![0; 2 * n]
    } else if pads.len() == 2 * n {
        pads.to_vec()
    } else {
        return Err(OpError::Attribute {
            name: "pads",
            detail: format!("{pads:?} does not have 2 values per spatial axis ({n})"),
        });
    };
    let mut axes = Vec::with_capacity(n);
    for i in 0..n {
        let (len, k, s, d) = (input[i], kernel[i], strides[i], dilations[i]);
        let dilated = (k - 1) * d + 1;
        let (pb, pe, out) = match auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                let out = len.div_ceil(s);
                let needed = ((out.max(1) - 1) * s + dilated).saturating_sub(len);
                let (small, large) = (needed / 2, needed - needed / 2);
                if auto_pad == AutoPad::SameUpper {
                    (small, large, out)
                } else {
                    (large, small, out)
                }
            }
            AutoPad::NotSet | AutoPad::Valid => {
                let (pb, pe) = if auto_pad == AutoPad::Valid {
                    (0, 0)
                } else {
                    (pads[i], pads[i + n])
                };
                let padded = len + pb + pe;
                if padded < dilated {
                    return Err(OpError::Shape(format!(
                        "spatial axis {i}: input {len} plus pads {pb}+{pe} is smaller than the \
                         dilated kernel {dilated}"
                    )));
                }
                let span = padded - dilated;
                let out = if ceil_mode {
                    let mut o = span.div_ceil(s) + 1;
                    if (o - 1) * s >= len + pb {
                        o -= 1;
                    }
                    o
                } else {
                    span / s + 1
                };
                (pb, pe, out)
            }
        };
        axes.push(Axis {
            input: len,
            kernel: k,
            stride: s,
            dilation: d,
            pad_begin: pb,
            pad_end: pe,
            output: out,
        });
    }
    Ok(axes)
}

/// A 1-D axis list as 2-D with a unit height axis in front.
pub(super) fn as_2d(axes: &[Axis]) -> Result<(Axis, Axis), OpError> {
    match axes {
        [w] => Ok((
            Axis {
                input: 1,
                kernel: 1,
                stride: 1,
                dilation: 1,
                pad_begin: 0,
                pad_end: 0,
                output: 1,
            },
            *w,
        )),
        [h, w] => Ok((*h, *w)),
        _ => Err(OpError::Unsupported(format!(
            "{}-D windows are not implemented on OpenCL (1-D and 2-D are)",
            axes.len()
        ))),
    }
}

pub(super) fn conv(b: &mut Builder, fused: &FusedNode, attrs: &Conv) -> Result<(), OpError> {
    let node = &fused.node;
    let (x, w, y) = (input(node, 0, "X")?, input(node, 1, "W")?, output(node)?);
    let xd = b.shape(x)?.dims().to_vec();
    let wd = b.shape(w)?.dims().to_vec();
    if xd.len() < 3 || wd.len() != xd.len() {
        return Err(OpError::Shape(format!(
            "Conv needs X (N, C, spatial…) and W of the same rank, got X {xd:?} and W {wd:?}"
        )));
    }
    let group = attrs.group.max(1);
    let (batch, cin, cout) = (xd[0], xd[1], wd[0]);
    if cin % group != 0 || cout % group != 0 || wd[1] * group != cin {
        return Err(OpError::Shape(format!(
            "Conv: X has {cin} channels and W {wd:?} with group {group}, which do not fit"
        )));
    }
    let kernel: Vec<usize> = if attrs.kernel_shape.is_empty() {
        wd[2..].to_vec()
    } else {
        attrs.kernel_shape.clone()
    };
    let axes = resolve_axes(
        &xd[2..],
        &kernel,
        &attrs.strides,
        &attrs.dilations,
        &attrs.pads,
        attrs.auto_pad,
        false,
    )?;
    let (h, wa) = as_2d(&axes)?;
    let dtype = b.dtype(x)?;
    let variant = b.storage(dtype).variant();
    let xl = b.input(x)?;
    let wl = b.input(w)?;
    let bias = match optional_input(node, 2) {
        Some(name) => Some(b.input(name)?),
        None => None,
    };
    let residual = match &fused.epilogue.residual {
        Some(name) => Some(b.input(name)?),
        None => None,
    };
    let yl = b.alloc(y)?;
    let Epilogue { activation, .. } = fused.epilogue;
    let geo0 = [
        h.input as i64,
        wa.input as i64,
        h.kernel as i64,
        wa.kernel as i64,
        h.stride as i64,
        wa.stride as i64,
        h.pad_begin as i64,
        wa.pad_begin as i64,
    ];
    if group == cin && cout % cin == 0 && group > 1 {
        let program = b.program(Family::Conv, variant)?;
        let d = DepthwiseCall {
            xl,
            wl,
            yl,
            bias,
            residual,
            activation,
            h,
            wa,
            batch,
            cin,
            cout,
        };
        if b.gemm == GemmKernel::RegisterBlocked {
            // depthwise_flat reads past its plane's end into a slot's slack.
            if flat_plane(h, wa) && xl_is_slot(&d.xl) {
                return launch_depthwise_rows_of_planes(b, &program, "depthwise_flat", &d, [0, 0]);
            }
            // depthwise_inplace shifts lanes for left pads of up to 3 and reads past a row's
            // end into a slot's slack.
            if wa.stride <= 2 && wa.pad_begin <= 3 && xl_is_slot(&d.xl) {
                return depthwise_inplace(b, &program, &d);
            }
            if wa.stride <= 2 && depthwise_rows(b, &program, &d)?.is_some() {
                return Ok(());
            }
        }
        let args = depthwise_args(&d, [0, 0])?;
        b.launch(
            &program,
            "depthwise",
            &[h.output, batch * cout],
            Some(&[h.output.min(8), 1]),
            args,
        );
        return Ok(());
    }
    let (m, cg) = (cout / group, cin / group);
    if b.gemm == GemmKernel::RegisterBlocked {
        return conv_blocked(
            b,
            ConvBlocked {
                node,
                w,
                xl,
                yl,
                bias,
                residual,
                activation,
                geo0,
                h,
                wa,
                batch,
                cin,
                group,
                m,
            },
        );
    }
    let plane = h.input * wa.input;
    let n = h.output * wa.output;
    let k = cg * h.kernel * wa.kernel;
    let pointwise = h.kernel == 1
        && wa.kernel == 1
        && h.stride == 1
        && wa.stride == 1
        && h.pad_begin + h.pad_end + wa.pad_begin + wa.pad_end == 0;
    let conv_geo = if pointwise {
        None
    } else {
        let geo1 = [
            h.dilation as i64,
            wa.dilation as i64,
            wa.output as i64,
            (h.kernel * wa.kernel) as i64,
            0,
            0,
            0,
            0,
        ];
        Some((geo0, geo1))
    };
    let call = GemmCall {
        a: wl,
        b: xl,
        y: yl,
        b_name: x.to_string(),
        node: node.name.clone(),
        m,
        n,
        k,
        sa: [k as i64, 1, 0, (m * k) as i64, 0],
        sb: [
            plane as i64,
            1,
            (cin * plane) as i64,
            (cg * plane) as i64,
            0,
        ],
        batch: batch * group,
        batch1: group,
        bias: bias.map(|l| (l, [1, 0, m as i64])),
        alpha: 1.0,
        beta: 1.0,
        epilogue: (residual, activation),
        conv: conv_geo,
        y_strides: None,
    };
    launch_gemm(b, variant, call)
}

pub(super) fn gemm(b: &mut Builder, fused: &FusedNode, attrs: &Gemm) -> Result<(), OpError> {
    if split_residual(b, fused, |b, head| gemm(b, head, attrs))? {
        return Ok(());
    }
    let node = &fused.node;
    let (a, bn, y) = (input(node, 0, "A")?, input(node, 1, "B")?, output(node)?);
    let ad = b.shape(a)?.dims().to_vec();
    let bd = b.shape(bn)?.dims().to_vec();
    if ad.len() != 2 || bd.len() != 2 {
        return Err(OpError::Shape(format!(
            "Gemm needs 2-D A and B, got {ad:?} and {bd:?}"
        )));
    }
    let (m, k) = if attrs.trans_a {
        (ad[1], ad[0])
    } else {
        (ad[0], ad[1])
    };
    let n = if attrs.trans_b { bd[0] } else { bd[1] };
    let dtype = b.dtype(a)?;
    let variant = b.storage(dtype).variant();
    // As in the reference (and onnxruntime), C is not read at all when beta is 0, so an
    // infinite or NaN C (an f16-stored 1e5 is inf) does not turn the output into NaN.
    let bias = match optional_input(node, 2).filter(|_| attrs.beta != 0.0) {
        Some(c) => {
            let cd = b.shape(c)?.dims().to_vec();
            let (cm, cn) = match cd.len() {
                0 => (1, 1),
                1 => (1, cd[0]),
                2 => (cd[0], cd[1]),
                _ => {
                    return Err(OpError::Shape(format!(
                        "Gemm: C {cd:?} must have rank 2 at most"
                    )))
                }
            };
            if (cm != 1 && cm != m) || (cn != 1 && cn != n) {
                return Err(OpError::Shape(format!(
                    "Gemm: C {cd:?} does not broadcast to ({m}, {n})"
                )));
            }
            let sm = if cm == 1 { 0 } else { cn as i64 };
            let sn = if cn == 1 { 0 } else { 1 };
            Some((b.input(c)?, [sm, sn, 0]))
        }
        None => None,
    };
    let epilogue = fused_epilogue(b, fused, y)?;
    // A and B are read where they are, views included (a transposed activation).
    let av = operand_view(b, a)?;
    let bv = operand_view(b, bn)?;
    let (sa, sb) = (&av.strides, &bv.strides);
    let sa = if attrs.trans_a {
        [sa[1], sa[0], 0, 0, av.offset]
    } else {
        [sa[0], sa[1], 0, 0, av.offset]
    };
    let sb = if attrs.trans_b {
        [sb[1], sb[0], 0, 0, bv.offset]
    } else {
        [sb[0], sb[1], 0, 0, bv.offset]
    };
    let yl = b.alloc(y)?;
    let call = GemmCall {
        a: av.base,
        b: bv.base,
        y: yl,
        b_name: bn.to_string(),
        node: node.name.clone(),
        m,
        n,
        k,
        sa,
        sb,
        batch: 1,
        batch1: 1,
        bias,
        alpha: attrs.alpha,
        beta: attrs.beta,
        epilogue,
        conv: None,
        y_strides: None,
    };
    launch_gemm(b, variant, call)
}

pub(super) fn matmul(b: &mut Builder, fused: &FusedNode) -> Result<(), OpError> {
    if split_residual(b, fused, matmul)? {
        return Ok(());
    }
    // A folded Transpose (see `Epilogue::output_perm`): the register-blocked GEMM stores
    // its rows permuted; the tiled one makes the product, and the output is a permuted view
    // of it.
    let y_strides = match &fused.epilogue.output_perm {
        Some(perm) if b.gemm == GemmKernel::RegisterBlocked => Some(permuted_rows(b, fused, perm)?),
        Some(perm) => return unpermuted_then_viewed(b, fused, perm),
        None => None,
    };
    let node = &fused.node;
    let (a, bn, y) = (input(node, 0, "A")?, input(node, 1, "B")?, output(node)?);
    let mut ad = b.shape(a)?.dims().to_vec();
    let mut bd = b.shape(bn)?.dims().to_vec();
    if ad.is_empty() || bd.is_empty() {
        return Err(OpError::Shape(
            "MatMul operands must have rank 1 or more".into(),
        ));
    }
    if ad.len() == 1 {
        ad.insert(0, 1);
    }
    if bd.len() == 1 {
        bd.push(1);
    }
    let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
    let (k2, n) = (bd[bd.len() - 2], bd[bd.len() - 1]);
    if k != k2 {
        return Err(OpError::Shape(format!(
            "MatMul: A {ad:?} and B {bd:?} disagree on the inner dim"
        )));
    }
    let a_batch = &ad[..ad.len() - 2];
    let b_batch = &bd[..bd.len() - 2];
    let rank = a_batch.len().max(b_batch.len());
    if rank > 2 {
        return Err(OpError::Unsupported(format!(
            "MatMul with {rank} batch dims is not implemented on OpenCL (at most 2 are)"
        )));
    }
    // Batch dims padded to two, each operand with its own strides (0 where broadcast).
    let pad = |dims: &[usize]| -> [usize; 2] {
        let mut out = [1usize; 2];
        for (i, &d) in dims.iter().rev().enumerate() {
            out[1 - i] = d;
        }
        out
    };
    let (pa, pb) = (pad(a_batch), pad(b_batch));
    let mut out_batch = [1usize; 2];
    for i in 0..2 {
        out_batch[i] = if pa[i] == 1 { pb[i] } else { pa[i] };
        if pa[i] != 1 && pb[i] != 1 && pa[i] != pb[i] {
            return Err(OpError::Shape(format!(
                "MatMul batch dims {a_batch:?} and {b_batch:?} do not broadcast"
            )));
        }
    }
    // Each operand is read where it is, views included (a transposed or sliced
    // activation): its strides per row, per k (per column for B) and per batch index, 0
    // along axes of extent 1 that broadcast.
    let av = operand_view(b, a)?;
    let bv = operand_view(b, bn)?;
    let matrix_strides = |dims: &[usize], st: &[i64], vector_is_row: bool| -> [i64; 4] {
        let r = st.len();
        let (s_outer, s_inner) = match r {
            1 if vector_is_row => (0, st[0]),
            1 => (st[0], 0),
            _ => (st[r - 2], st[r - 1]),
        };
        let mut batch = [0i64; 2];
        let batch_dims = &dims[..r.saturating_sub(2)];
        for (i, (&d, &s)) in batch_dims
            .iter()
            .rev()
            .zip(st[..r.saturating_sub(2)].iter().rev())
            .enumerate()
        {
            batch[1 - i] = if d == 1 { 0 } else { s };
        }
        [s_outer, s_inner, batch[0], batch[1]]
    };
    let a_dims = b.shape(a)?.dims().to_vec();
    let b_dims = b.shape(bn)?.dims().to_vec();
    let [sm, sk, a0, a1] = matrix_strides(&a_dims, &av.strides, true);
    let [bk, bn_s, b0, b1] = matrix_strides(&b_dims, &bv.strides, false);
    // B without batch dims (a weight) meets every batch of A alike: A's batches are then
    // more rows of one GEMM ([17, 1, 32] × [32, 96] is 17 × 32 by 32 × 96, not 17 GEMMs of
    // one row), each output element summed over k exactly as before, where A's rows are
    // evenly spaced across its batches (always, unless A is a view).
    let row = if m > 1 {
        sm
    } else if pa[1] > 1 {
        a1
    } else {
        a0
    };
    let rows_even = (m == 1 || sm == row)
        && (pa[1] == 1 || a1 == m as i64 * row)
        && (pa[0] == 1 || a0 == (pa[1] * m) as i64 * row);
    let (m, out_batch, [sm, a0, a1]) = if pb == [1, 1] && rows_even && y_strides.is_none() {
        (m * out_batch[0] * out_batch[1], [1, 1], [row, 0, 0])
    } else {
        (m, out_batch, [sm, a0, a1])
    };
    let dtype = b.dtype(a)?;
    let variant = b.storage(dtype).variant();
    // A fused bias ([1, …, 1, N], checked when it was fused) is read along the columns of
    // every row and batch.
    let bias = match &fused.epilogue.bias {
        Some(name) => {
            let dims = b.shape(name)?.dims().to_vec();
            if dims.last() != Some(&n) || dims.iter().rev().skip(1).any(|&d| d != 1) {
                return Err(OpError::Shape(format!(
                    "MatMul: the fused bias `{name}` of shape {dims:?} does not add along \
                     the output's last axis ({n})"
                )));
            }
            Some((b.input(name)?, [0, 1, 0]))
        }
        None => None,
    };
    let epilogue = fused_epilogue(b, fused, y)?;
    let yl = b.alloc(y)?;
    let call = GemmCall {
        a: av.base,
        b: bv.base,
        y: yl,
        b_name: bn.to_string(),
        node: node.name.clone(),
        m,
        n,
        k,
        sa: [sm, sk, a0, a1, av.offset],
        sb: [bk, bn_s, b0, b1, bv.offset],
        batch: out_batch[0] * out_batch[1],
        batch1: out_batch[1],
        bias,
        alpha: 1.0,
        beta: 1.0,
        epilogue,
        conv: None,
        y_strides,
    };
    launch_gemm(b, variant, call)
}

/// Where a MatMul's rows go in its output permuted by `perm` (which keeps the last axis
/// last): the strides (b0, b1, row) in the permuted output of the product's batch indices
/// and rows.
fn permuted_rows(b: &Builder, fused: &FusedNode, perm: &[usize]) -> Result<[i64; 3], OpError> {
    let y = output(&fused.node)?;
    let permuted_strides = crate::plan::strides_of(b.shape(y)?.dims());
    let r = perm.len();
    // Axis perm[j] of the product is axis j of the output.
    let mut strides = vec![0i64; r];
    for (j, &axis) in perm.iter().enumerate() {
        strides[axis] = permuted_strides[j];
    }
    let at = |i: Option<usize>| i.map_or(0, |i| strides[i]);
    Ok([at(r.checked_sub(4)), at(r.checked_sub(3)), strides[r - 2]])
}

/// A MatMul with a folded Transpose on the tiled GEMM: the product into a value of its own,
/// and the output a permuted [`View`] of it (read in place or copied out by its consumer,
/// as an unfolded Transpose's would be).
fn unpermuted_then_viewed(
    b: &mut Builder,
    fused: &FusedNode,
    perm: &[usize],
) -> Result<(), OpError> {
    let y = output(&fused.node)?;
    let permuted = b.shape(y)?.dims().to_vec();
    let mut dims = vec![0usize; perm.len()];
    for (j, &axis) in perm.iter().enumerate() {
        dims[axis] = permuted[j];
    }
    let product = format!("{y}::unpermuted");
    let mut head = fused.clone();
    head.epilogue.output_perm = None;
    build_head_as(b, head, &product, Shape::new(dims.clone()), y, matmul)?;
    let own = crate::plan::strides_of(&dims);
    let view = View {
        base: b.input(&product)?,
        offset: 0,
        strides: perm.iter().map(|&axis| own[axis]).collect(),
    };
    b.set_view(y, view)?;
    b.release(&product);
    Ok(())
}

/// Builds `head` (a fused node that gave up part of what it absorbed) with its output
/// renamed `product`, of `shape` and of the dtype of `like`.
fn build_head_as(
    b: &mut Builder,
    mut head: FusedNode,
    product: &str,
    shape: Shape,
    like: &str,
    build: impl Fn(&mut Builder, &FusedNode) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let dtype = b.dtype(like)?;
    b.shapes.insert(product.to_string(), shape);
    b.dtypes.insert(product.to_string(), dtype);
    head.node.outputs = vec![product.to_string()];
    build(b, &head)
}

/// A residual Add fused on the condition that the concrete shapes agree (see
/// `Epilogue::unchecked_add`) whose shapes in this plan do not (it broadcasts): `build`
/// makes the GEMM's own output (bias included), then the Add runs as its own node, as the
/// graph has them. True when it split; false leaves the fused node to be built whole.
fn split_residual(
    b: &mut Builder,
    fused: &FusedNode,
    build: impl Fn(&mut Builder, &FusedNode) -> Result<(), OpError>,
) -> Result<bool, OpError> {
    let (Some(add), Some(residual)) = (&fused.epilogue.unchecked_add, &fused.epilogue.residual)
    else {
        return Ok(false);
    };
    let y = output(&fused.node)?;
    if b.shape(residual)? == b.shape(y)? {
        return Ok(false);
    }
    // The Add's other operand: the value the GEMM makes.
    let product = add
        .present_inputs()
        .find(|n| *n != residual.as_str())
        .ok_or_else(|| OpError::Shape(format!("{}: the Add reads its residual twice", add.name)))?
        .to_string();
    let mut head = fused.clone();
    head.epilogue.residual = None;
    head.epilogue.unchecked_add = None;
    let shape = b.shape(y)?.clone();
    build_head_as(b, head, &product, shape, y, build)?;
    crate::partition::infer_concrete(b, add)?;
    super::build(
        b,
        &FusedNode {
            node: add.clone(),
            epilogue: Epilogue::default(),
            fused: Vec::new(),
            excite: None,
        },
    )?;
    b.release(&product);
    Ok(true)
}

/// A GEMM operand as a window onto a buffer (see [`View`]): a view with a negative stride
/// (a reversing Slice) is copied out first, as the GEMM kernels step forward only.
fn operand_view(b: &mut Builder, name: &str) -> Result<View, OpError> {
    let view = b.view(name)?;
    if view.strides.iter().all(|&s| s >= 0) {
        return Ok(view);
    }
    b.input(name)?;
    b.view(name)
}

/// The residual (checked to have the output's shape) and the activation a MatMul or Gemm
/// absorbed.
fn fused_epilogue(
    b: &mut Builder,
    fused: &FusedNode,
    y: &str,
) -> Result<(Option<Loc>, Activation), OpError> {
    let residual = match &fused.epilogue.residual {
        Some(r) => {
            let out = b.shape(y)?;
            if b.shape(r)? != out {
                return Err(OpError::Shape(format!(
                    "{}: the fused residual `{r}` has shape {}, the output {out}",
                    fused.node.op.name(),
                    b.shape(r)?
                )));
            }
            Some(b.input(r)?)
        }
        None => None,
    };
    Ok((residual, fused.epilogue.activation))
}

/// What the register-blocked conv path needs from `conv`.
struct ConvBlocked<'n> {
    node: &'n Node,
    w: &'n str,
    xl: Loc,
    yl: Loc,
    bias: Option<Loc>,
    residual: Option<Loc>,
    activation: Activation,
    geo0: [i64; 8],
    h: Axis,
    wa: Axis,
    batch: usize,
    cin: usize,
    group: usize,
    /// Output channels per group.
    m: usize,
}

/// Rows of A per register block of `gemm_block` (MR in gemm.cl).
const MR: usize = 8;
/// Row blocks one conv_rows or conv_shift work-item walks (MBLOCKS in gemm.cl), and at most
/// one gemm_block work-item does (its launch may choose fewer).
const MBLOCKS: usize = 8;

/// Columns of B per register block of `gemm_block` (NR in gemm.cl).
const NR: usize = 16;
/// Rows of a B panel one packing work-item writes (KC in gemm.cl).
const KC: usize = 32;

/// Conv as im2col into B panels (a plain panel copy for 1×1 stride-1 unpadded kernels) and
/// the register-blocked GEMM, with the weights packed into MR-row panels once, on the host.
fn conv_blocked(b: &mut Builder, c: ConvBlocked) -> Result<(), OpError> {
    let (h, wa) = (c.h, c.wa);
    let dtype = b.dtype(c.w)?;
    let storage = b.storage(dtype);
    let variant = storage.variant();
    let cg = c.cin / c.group;
    let k = cg * h.kernel * wa.kernel;
    let n = h.output * wa.output;
    let plane = h.input * wa.input;
    let (ap, ap_s1) = packed_weights(b, c.node, c.w, c.group, c.m, k, storage)?;
    let pointwise = h.kernel == 1
        && wa.kernel == 1
        && h.stride == 1
        && wa.stride == 1
        && h.pad_begin + h.pad_end + wa.pad_begin + wa.pad_end == 0;
    let program = b.program(Family::Gemm, variant)?;
    let batches = c.batch * c.group;
    if pointwise && (n % NR == 0 || xl_is_slot(&c.xl)) {
        // The image itself is B: rows of N contiguous columns. A ragged last panel's loads
        // run past a row's end (into the next row, or the slot's slack after the last) and
        // feed only dropped columns.
        let call = BlockedCall {
            ap,
            b: c.xl,
            y: c.yl,
            m: c.m,
            n,
            k,
            p: [(c.cin * plane) as i64, (cg * plane) as i64, 0, ap_s1 as i64],
            ldb: plane,
            lda: 0,
            a_first: 0,
            b_first: 0,
            y_strides: None,
            batch: batches,
            batch1: c.group,
            bias: c.bias.map(|l| (l, [1, 0, c.m as i64])),
            alpha: 1.0,
            beta: 1.0,
            epilogue: (c.residual, c.activation),
        };
        return launch_blocked(b, &program, call);
    }
    if h.stride == 1 && wa.stride == 1 && c.group == 1 && !pointwise {
        return conv_shifted(b, &program, &c, ap, k, storage);
    }
    // Strided convs with few input channels (stems): im2col would write a matrix KH·KW
    // times the image while the GEMM has little to do per column. With many channels the
    // packed panels of im2col stream better than strided rows, which measured faster.
    if wa.stride <= 2 && c.group == 1 && !pointwise && cg <= 16 {
        return conv_rows(b, &program, &c, ap, k, storage);
    }
    let panel_set = n.div_ceil(NR) * k * NR;
    let temp = format!("{}::b_panels", c.node.name);
    b.shapes
        .insert(temp.clone(), Shape::new([batches * panel_set]));
    b.dtypes.insert(temp.clone(), dtype);
    let panels = b.alloc(&temp)?;
    if pointwise {
        let sb = [
            plane as i64,
            1,
            (c.cin * plane) as i64,
            (cg * plane) as i64,
            0,
        ];
        launch_pack_b(
            b,
            &program,
            c.xl,
            panels.clone(),
            k,
            n,
            sb,
            c.group,
            batches,
        )?;
    } else {
        let geo1 = [
            h.dilation as i64,
            wa.dilation as i64,
            wa.output as i64,
            (h.kernel * wa.kernel) as i64,
            0,
            0,
            0,
            0,
        ];
        b.launch(
            &program,
            "im2col",
            &[n.div_ceil(NR), k.div_ceil(KC), batches],
            Some(&[4, 1, 1]),
            vec![
                Arg::Buf(c.xl),
                Arg::Buf(panels.clone()),
                Arg::I32(i32_arg(k, "K")?),
                Arg::I32(i32_arg(n, "N")?),
                Arg::Int8(int8(&c.geo0)?),
                Arg::Int8(int8(&geo1)?),
                Arg::I32(i32_arg(c.cin * plane, "image size")?),
                Arg::I32(i32_arg(cg * plane, "group size")?),
                Arg::I32(i32_arg(c.group, "groups")?),
            ],
        );
    }
    let call = BlockedCall {
        ap,
        b: panels,
        y: c.yl,
        m: c.m,
        n,
        k,
        p: [
            (c.group * panel_set) as i64,
            panel_set as i64,
            0,
            ap_s1 as i64,
        ],
        ldb: 0,
        lda: 0,
        a_first: 0,
        b_first: 0,
        y_strides: None,
        batch: batches,
        batch1: c.group,
        bias: c.bias.map(|l| (l, [1, 0, c.m as i64])),
        alpha: 1.0,
        beta: 1.0,
        epilogue: (c.residual, c.activation),
    };
    launch_blocked(b, &program, call)?;
    b.release(&temp);
    Ok(())
}

/// A stride-1 conv as shifted contiguous views of a zero-padded copy of the image (see
/// conv_shift in gemm.cl): one cheap pad pass instead of an im2col matrix KH·KW times the
/// image's size.
fn conv_shifted(
    b: &mut Builder,
    program: &std::sync::Arc<crate::cl::Program>,
    c: &ConvBlocked,
    ap: Loc,
    k: usize,
    storage: Storage,
) -> Result<(), OpError> {
    let (h, wa) = (c.h, c.wa);
    let padded = wa.input + wa.pad_begin + wa.pad_end;
    // Planes as wide as the padded image, or rounded up to whole NR-column chunks where that
    // leaves no more chunks to compute: every chunk then starts at a multiple of NR in its
    // output row, so its epilogue stores whole vectors (a chunk that straddles two rows
    // stores lane by lane) and the chunks wholly past a row's end are skipped.
    let wp = if h.output * wa.output.div_ceil(NR) <= (h.output * padded).div_ceil(NR) {
        padded.next_multiple_of(NR)
    } else {
        padded
    };
    // A work-item's shifted loads (one NR vector per tap) reach this far past its first
    // column.
    let reach = NR + (wa.kernel - 1) * wa.dilation;
    let n_wide = h.output * wp;
    let (chunks, row_groups) = (n_wide.div_ceil(NR), c.m.div_ceil(MR).div_ceil(MBLOCKS));
    let per_item = paired(b);
    let p = [wp, wa.output, n_wide, h.output * wa.output, per_item, 0];
    let geo = [c.cin, h.kernel, wa.kernel, h.dilation, wa.dilation, 0, 0, 0];
    let global = [chunks.div_ceil(per_item), row_groups, c.batch];
    padded_conv(
        b,
        program,
        "conv_shift",
        c,
        (ap, k, storage),
        (wp, reach),
        p,
        geo,
        global,
    )
}

/// A conv with width stride 1 or 2 over output rows of a zero-padded copy of the image
/// (see conv_rows in gemm.cl): strided convs without an im2col matrix.
fn conv_rows(
    b: &mut Builder,
    program: &std::sync::Arc<crate::cl::Program>,
    c: &ConvBlocked,
    ap: Loc,
    k: usize,
    storage: Storage,
) -> Result<(), OpError> {
    let (h, wa) = (c.h, c.wa);
    let wp = wa.input + wa.pad_begin + wa.pad_end;
    // A row's last chunk loads up to NR·stride lanes plus the kernel's reach.
    let reach = NR * wa.stride + (wa.kernel - 1) * wa.dilation;
    let chunks = wa.output.div_ceil(NR);
    let per_item = paired(b);
    let p = [wp, wa.output, h.output, chunks, per_item, 0];
    let geo = [
        c.cin,
        h.kernel,
        wa.kernel,
        h.dilation,
        wa.dilation,
        h.stride,
        wa.stride,
        0,
    ];
    let global = [
        h.output * chunks.div_ceil(per_item),
        c.m.div_ceil(MR).div_ceil(MBLOCKS),
        c.batch,
    ];
    padded_conv(
        b,
        program,
        "conv_rows",
        c,
        (ap, k, storage),
        (wp, reach),
        p,
        geo,
        global,
    )
}

/// The shared half of conv_shift and conv_rows: a zero-padded copy of the image in planes
/// of `wp` columns, with zero rows after the image so that loads reaching `reach` elements
/// past a row's start stay inside the copy, then `kernel` with the arguments both take:
/// (Ap, Xp, Y, M, K, p, geo, bias, has_bias, R, has_res, act, act_a, act_b), where p is
/// (x_s0, plane) followed by the kernel's own `p`. A small conv is one launch of the
/// kernel's `_padding` variant instead, which also takes the image and pads it first.
#[allow(clippy::too_many_arguments)]
fn padded_conv(
    b: &mut Builder,
    program: &std::sync::Arc<crate::cl::Program>,
    kernel: &'static str,
    c: &ConvBlocked,
    (ap, k, storage): (Loc, usize, Storage),
    (wp, reach): (usize, usize),
    p: [usize; 6],
    geo: [usize; 8],
    global: [usize; 3],
) -> Result<(), OpError> {
    let (h, wa) = (c.h, c.wa);
    let rows = h.input + h.pad_begin + h.pad_end + reach.div_ceil(wp) + 1;
    let plane = rows * wp;
    let temp = format!("{}::padded", c.node.name);
    b.shapes
        .insert(temp.clone(), Shape::new([c.batch * c.cin * plane]));
    b.dtypes.insert(temp.clone(), b.dtype(c.w)?);
    let padded = b.alloc(&temp)?;
    let split = kernel == "conv_rows" && wa.stride == 2;
    // A conv of a few thousand multiply-adds per work-item and few work-items runs as one
    // work-group that pads its image itself (conv_rows_padding, conv_shift_padding): its
    // two commands cost more than its work on a device that charges per command, and a
    // second thread would not have arrived in time to take a share of it.
    let items: usize = global.iter().product();
    let macs = [c.batch, c.m, k, h.output, wa.output]
        .iter()
        .fold(1usize, |a, &v| a.saturating_mul(v));
    let one_group = items <= ONE_GROUP_ITEMS && macs <= ONE_GROUP_MACS;
    if !one_group {
        launch_pad_planes(
            b,
            storage,
            c.xl.clone(),
            padded.clone(),
            c.batch * c.cin,
            h,
            wa,
            rows,
            wp,
            0,
            split,
        )?;
    }
    let p = [c.cin * plane, plane, p[0], p[1], p[2], p[3], p[4], p[5]].map(|v| v as i64);
    let geo = geo.map(|v| v as i64);
    let (bias, has_bias) = match &c.bias {
        Some(l) => (l.clone(), 1),
        None => (c.yl.clone(), 0),
    };
    let (res, has_res) = match &c.residual {
        Some(l) => (l.clone(), 1),
        None => (c.yl.clone(), 0),
    };
    let (act, act_a, act_b) = c.activation.code();
    let mut args = vec![
        Arg::Buf(ap),
        Arg::Buf(padded),
        Arg::Buf(c.yl.clone()),
        Arg::I32(i32_arg(c.m, "M")?),
        Arg::I32(i32_arg(k, "K")?),
        Arg::Int8(int8(&p)?),
        Arg::Int8(int8(&geo)?),
        Arg::Buf(bias),
        Arg::I32(has_bias),
        Arg::Buf(res),
        Arg::I32(has_res),
        Arg::I32(act),
        Arg::F32(act_a),
        Arg::F32(act_b),
    ];
    if one_group {
        args.insert(1, Arg::Buf(c.xl.clone()));
        args.push(pad_in_group_arg(c.batch * c.cin, h, wa, rows, wp, split)?);
        let name = match kernel {
            "conv_rows" => "conv_rows_padding",
            _ => "conv_shift_padding",
        };
        b.launch(program, name, &global, Some(&global), args);
    } else {
        b.launch(program, kernel, &global, Some(&[4, 1, 1]), args);
    }
    b.release(&temp);
    Ok(())
}

/// The most work-items, and multiply-adds, of a conv that runs as one work-group padding
/// its own image (see `padded_conv`): about 20 µs of one core's work at most.
const ONE_GROUP_ITEMS: usize = 64;
const ONE_GROUP_MACS: usize = 1 << 20;

/// The `pad` argument of a kernel that pads its own input (pad_in_group in common.cl):
/// what [`launch_pad_planes`] passes pad_planes, as (planes, H, W, rows, Wp, PH, PW, split).
pub(super) fn pad_in_group_arg(
    planes: usize,
    h: Axis,
    wa: Axis,
    rows: usize,
    wp: usize,
    split: bool,
) -> Result<Arg, OpError> {
    let pad = [
        planes,
        h.input,
        wa.input,
        rows,
        wp,
        h.pad_begin,
        wa.pad_begin,
        usize::from(split),
    ]
    .map(|v| v as i64);
    Ok(Arg::Int8(int8(&pad)?))
}

/// Pads `planes` planes of `h.input`×`wa.input` into planes of `rows`×`wp` with the bits of
/// `fill` (the pad before, `fill` after) with pad_planes in movement.cl; with `split`, each
/// padded row's even columns first, then its odd ones (for conv_rows with width stride 2).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch_pad_planes(
    b: &mut Builder,
    storage: Storage,
    src: Loc,
    dst: Loc,
    planes: usize,
    h: Axis,
    wa: Axis,
    rows: usize,
    wp: usize,
    fill: i64,
    split: bool,
) -> Result<(), OpError> {
    let program = b.program(Family::Movement, storage.bits_variant())?;
    b.launch(
        &program,
        "pad_planes",
        &[rows, planes],
        Some(&[rows.min(64), 1]),
        vec![
            Arg::Buf(src),
            Arg::Buf(dst),
            Arg::I32(i32_arg(h.input, "H")?),
            Arg::I32(i32_arg(wa.input, "W")?),
            Arg::I32(i32_arg(rows, "padded rows")?),
            Arg::I32(i32_arg(wp, "padded width")?),
            Arg::I32(i32_arg(h.pad_begin, "top pad")?),
            Arg::I32(i32_arg(wa.pad_begin, "left pad")?),
            Arg::I64(fill),
            Arg::I32(split as i32),
        ],
    );
    Ok(())
}

/// A depthwise conv on a CPU device: what depthwise_rows in conv.cl needs.
struct DepthwiseCall {
    xl: Loc,
    wl: Loc,
    yl: Loc,
    bias: Option<Loc>,
    residual: Option<Loc>,
    activation: Activation,
    h: Axis,
    wa: Axis,
    batch: usize,
    cin: usize,
    cout: usize,
}

/// The longest padded row depthwise_rows buffers (DW_BUF in conv.cl), and the most
/// 16-lane chunks of an output row (DW_CHUNKS).
const DW_BUF: usize = 640;
const DW_CHUNKS: usize = 32;

/// The arguments every depthwise kernel starts with: (X, W, Y, bias, has_bias, R, has_res,
/// act, act_a, act_b, geo0, geo1), with geo0 = (H, W, KH, KW, SH, SW, PH, PW) and geo1 =
/// (DH, DW, OH, OW, C_in, multiplier, tail…), `tail` being the kernel's own two values.
fn depthwise_args(d: &DepthwiseCall, tail: [usize; 2]) -> Result<Vec<Arg>, OpError> {
    let (h, wa) = (d.h, d.wa);
    let geo0 = [
        h.input,
        wa.input,
        h.kernel,
        wa.kernel,
        h.stride,
        wa.stride,
        h.pad_begin,
        wa.pad_begin,
    ]
    .map(|v| v as i64);
    let geo1 = [
        h.dilation,
        wa.dilation,
        h.output,
        wa.output,
        d.cin,
        d.cout / d.cin,
        tail[0],
        tail[1],
    ]
    .map(|v| v as i64);
    let (act, a, bb) = d.activation.code();
    Ok(vec![
        Arg::Buf(d.xl.clone()),
        Arg::Buf(d.wl.clone()),
        Arg::Buf(d.yl.clone()),
        Arg::Buf(d.bias.clone().unwrap_or(d.yl.clone())),
        Arg::I32(d.bias.is_some() as i32),
        Arg::Buf(d.residual.clone().unwrap_or(d.yl.clone())),
        Arg::I32(d.residual.is_some() as i32),
        Arg::I32(act),
        Arg::F32(a),
        Arg::F32(bb),
        Arg::Int8(int8(&geo0)?),
        Arg::Int8(int8(&geo1)?),
    ])
}

/// Launches one of the CPU depthwise kernels (depthwise_inplace, depthwise_rows), which take
/// `rpi` consecutive output rows of one plane per work-item: about 2,048 outputs' worth,
/// so a small plane is one item.
fn launch_depthwise_rows_of_planes(
    b: &mut Builder,
    program: &std::sync::Arc<crate::cl::Program>,
    kernel: &'static str,
    d: &DepthwiseCall,
    tail: [usize; 2],
) -> Result<(), OpError> {
    let (h, wa) = (d.h, d.wa);
    let rpi = (2048 / wa.output.max(1)).clamp(1, h.output.max(1));
    let planes = d.batch * d.cout;
    let mut args = depthwise_args(d, tail)?;
    args.push(Arg::I32(i32_arg(rpi, "rows per item")?));
    args.push(Arg::I32(i32_arg(planes, "planes")?));
    b.launch(
        program,
        kernel,
        &[h.output.div_ceil(rpi), planes],
        Some(&[1, 4]),
        args,
    );
    Ok(())
}

/// The most values of a plane depthwise_flat takes (DWF_PLANE in conv.cl), and the widest
/// row its margins allow: where depthwise_inplace fills at most half of its 16 lanes
/// (`layer_bench`, alternate runs, `pthread`: 960 channels at 7×7 with 3×3 taps 110 → 80
/// µs, 576 at 7×7 with 5×5 101 → 72 µs, 256 at 8×8 33 → 22 µs; 576 at 14×14 120 → 145
/// µs, 192 at 28×28 137 → 175 µs, so wider rows stay on depthwise_inplace).
const DWF_PLANE: usize = 1024;
const DWF_WIDTH: usize = 8;
/// The fewest values of a plane depthwise_flat takes: three chunks. It sums four chunks at a
/// time, so a smaller plane pays for work it drops (golden torchvision_mobilenet_v3_small's
/// 2×2 planes with 5×5 taps: 9.7 → 17.8 µs).
const DWF_MIN_PLANE: usize = 48;

/// Whether a depthwise conv's plane goes to depthwise_flat: stride 1, a square 3×3 or 5×5
/// kernel with dilation 1 and "same" padding (K / 2 on every side), and a plane of
/// DWF_MIN_PLANE to DWF_PLANE values in rows of at most DWF_WIDTH.
fn flat_plane(h: Axis, wa: Axis) -> bool {
    let same = |a: Axis| {
        a.stride == 1
            && a.dilation == 1
            && a.kernel == h.kernel
            && a.pad_begin == a.kernel / 2
            && a.pad_end == a.kernel / 2
    };
    matches!(h.kernel, 3 | 5)
        && same(h)
        && same(wa)
        && wa.input <= DWF_WIDTH
        && (DWF_MIN_PLANE..=DWF_PLANE).contains(&(h.input * wa.input))
}

/// True when the value lives in a slot (so its buffer has [`SLOT_SLACK`] bytes past its
/// end for vector loads that run over).
fn xl_is_slot(l: &Loc) -> bool {
    matches!(l, Loc::Slot(_))
}

/// Depthwise conv with width stride 1 or 2 reading the image in place (see
/// depthwise_inplace in conv.cl).
fn depthwise_inplace(
    b: &mut Builder,
    program: &std::sync::Arc<crate::cl::Program>,
    d: &DepthwiseCall,
) -> Result<(), OpError> {
    launch_depthwise_rows_of_planes(b, program, "depthwise_inplace", d, [0, 0])
}

/// Depthwise conv with width stride 1 or 2 as 16-lane taps over a private zero-padded copy
/// of each input row (see depthwise_rows in conv.cl). None when a row is too wide for the
/// kernel's buffers (the caller then uses the generic kernel).
fn depthwise_rows(
    b: &mut Builder,
    program: &std::sync::Arc<crate::cl::Program>,
    d: &DepthwiseCall,
) -> Result<Option<()>, OpError> {
    let wa = d.wa;
    let chunks = wa.output.div_ceil(16);
    // The last chunk's loads reach 16·stride lanes (two loads for stride 2) plus the
    // kernel's reach past its start.
    let span =
        (chunks * 16 * wa.stride + (wa.kernel - 1) * wa.dilation + 16).max(wa.input + wa.pad_begin);
    if span > DW_BUF || chunks > DW_CHUNKS {
        return Ok(None);
    }
    launch_depthwise_rows_of_planes(b, program, "depthwise_rows", d, [chunks, span])?;
    Ok(Some(()))
}

/// B panels (gemm_block) or column chunks (conv_shift, conv_rows) per work-item: two where
/// the build sums eight rows at a time (PAIR, conv_taps_pair in gemm.cl), even where that
/// halves the work-items, since each A value loaded then feeds two multiply-adds and the A
/// panels (the weights) are read half as often (`forward_loop`, 3 alternate runs on
/// `pthread`: resnet18_like 22.5 → 20.8 ms, where pairing only at 32 work-items or more
/// gave 24.7 → 23.0; mobilenet_v2_like's 1×1 convs on 7×7 and 14×14 images 7.04 → 6.24 ms).
fn paired(b: &Builder) -> usize {
    if b.programs.block_rows() == 8 {
        2
    } else {
        1
    }
}

/// Packs a strided B into NR-column panels per batch.
#[allow(clippy::too_many_arguments)]
fn launch_pack_b(
    b: &mut Builder,
    program: &std::sync::Arc<crate::cl::Program>,
    src: Loc,
    dst: Loc,
    k: usize,
    n: usize,
    sb: [i64; 5],
    batch1: usize,
    batches: usize,
) -> Result<(), OpError> {
    let sb8 = [sb[0], sb[1], sb[2], sb[3], sb[4], 0, 0, 0];
    b.launch(
        program,
        "pack_b",
        &[n.div_ceil(NR), k.div_ceil(KC), batches],
        Some(&[4, 1, 1]),
        vec![
            Arg::Buf(src),
            Arg::Buf(dst),
            Arg::I32(i32_arg(k, "K")?),
            Arg::I32(i32_arg(n, "N")?),
            Arg::Int8(int8(&sb8)?),
            Arg::I32(i32_arg(batch1.max(1), "batch")?),
        ],
    );
    Ok(())
}

/// The weights of a conv (or a constant A) packed into [group][ceil(m / MR)][k][MR] panels,
/// on the host when they are known there, else by the pack_a kernel. Returns the location
/// and the packed size of one group.
fn packed_weights(
    b: &mut Builder,
    node: &Node,
    w: &str,
    groups: usize,
    m: usize,
    k: usize,
    storage: Storage,
) -> Result<(Loc, usize), OpError> {
    let blocks = m.div_ceil(MR);
    let per_group = blocks * k * MR;
    if let Some(values) = b.host_value(w).map(Tensor::to_f64_vec) {
        let mut packed = vec![0f32; groups * per_group];
        for g in 0..groups {
            for row in 0..m {
                let (mb, i) = (row / MR, row % MR);
                for kk in 0..k {
                    let src = (g * m + row) * k + kk;
                    packed[g * per_group + (mb * k + kk) * MR + i] =
                        values.get(src).copied().unwrap_or(0.0) as f32;
                }
            }
        }
        let t =
            Tensor::from_f32([packed.len()], packed).map_err(|e| OpError::Shape(e.to_string()))?;
        let loc = b.constant(&format!("{}::packed_a", node.name), &t, storage)?;
        return Ok((loc, per_group));
    }
    let temp = format!("{}::packed_a", node.name);
    b.shapes
        .insert(temp.clone(), Shape::new([groups * per_group]));
    b.dtypes.insert(temp.clone(), DType::F32);
    let ap = b.alloc(&temp)?;
    let src = b.input(w)?;
    let program = b.program(Family::Gemm, storage.variant())?;
    b.launch(
        &program,
        "pack_a",
        &[blocks * MR, k, groups],
        Some(&[MR, 1, 1]),
        vec![
            Arg::Buf(src),
            Arg::Buf(ap.clone()),
            Arg::I32(i32_arg(m, "M")?),
            Arg::I32(i32_arg(k, "K")?),
            Arg::Int8(int8(&[k as i64, 1, 0, (m * k) as i64])?),
            Arg::I32(i32_arg(groups, "groups")?),
            Arg::I32(i32_arg(per_group, "packed size")?),
        ],
    );
    Ok((ap, per_group))
}

/// One `gemm_block` launch.
struct BlockedCall {
    ap: Loc,
    b: Loc,
    y: Loc,
    m: usize,
    n: usize,
    k: usize,
    /// (bp_s0, bp_s1, ap_s0, ap_s1): the panel offsets of B and A per b0 and per b1.
    p: [i64; 4],
    /// B's row stride when B is used in place (N a multiple of NR), 0 for B panels.
    ldb: usize,
    /// A's row stride when A is read in place (M ≤ MR, its k contiguous; `p`'s A offsets
    /// are then its batch strides), 0 for A panels.
    lda: usize,
    /// Where A's first element is when A is read in place (a view's offset).
    a_first: i64,
    /// Where B's first element is when B is read in place (a view's offset).
    b_first: i64,
    /// The output's row placement when not contiguous (see `GemmCall::y_strides`).
    y_strides: Option<[i64; 3]>,
    batch: usize,
    batch1: usize,
    bias: Option<(Loc, [i64; 3])>,
    alpha: f32,
    beta: f32,
    epilogue: (Option<Loc>, Activation),
}

fn launch_blocked(
    b: &mut Builder,
    program: &std::sync::Arc<crate::cl::Program>,
    call: BlockedCall,
) -> Result<(), OpError> {
    let (bias, sbias) = match call.bias {
        Some((loc, s)) => (loc, [s[0], s[1], s[2], 1]),
        None => (call.y.clone(), [0, 0, 0, 0]),
    };
    let (res, has_res) = match call.epilogue.0 {
        Some(loc) => (loc, 1),
        None => (call.y.clone(), 0),
    };
    let (act, act_a, act_b) = call.epilogue.1.code();
    let p = [
        call.p[0],
        call.p[1],
        call.p[2],
        call.p[3],
        call.ldb as i64,
        call.lda as i64,
        call.a_first,
        call.b_first,
    ];
    // A work-item walks MBLOCKS row panels of A with its B panel, and work-groups hold four
    // B panels; where that leaves fewer than 32 work-groups (a 1×1 conv on a 7×7 or 14×14
    // image has 4 or 13 panels), fewer row panels per work-item and one B panel per group.
    // PoCL hands its threads runs of whole work-groups: three of them split 2 : 1 between
    // two threads, and 13 of 8 row panels then 13 of 4 split 8 : 4 (mobilenet_v2_like's
    // 960 → 160 1×1 conv on `pthread`: 146 → 102 µs).
    let (panels, a_panels) = (call.n.div_ceil(NR), call.m.div_ceil(MR));
    let mut mblocks = MBLOCKS;
    while mblocks > 1 && panels * a_panels.div_ceil(mblocks) * call.batch < 32 {
        mblocks /= 2;
    }
    let row_groups = a_panels.div_ceil(mblocks);
    // The paired loop reads A packed; A in place goes one panel at a time.
    let per_item = if call.lda == 0 { paired(b) } else { 1 };
    let items = panels.div_ceil(per_item);
    // Row stride 0: the output is contiguous.
    let ys = call.y_strides.unwrap_or([0, 0, 0]);
    let local_x = if items.div_ceil(4) * row_groups * call.batch < 32 {
        1
    } else {
        4
    };
    b.launch(
        program,
        "gemm_block",
        &[items, row_groups, call.batch],
        Some(&[local_x, 1, 1]),
        vec![
            Arg::Buf(call.ap),
            Arg::Buf(call.b),
            Arg::Buf(call.y),
            Arg::I32(i32_arg(call.m, "M")?),
            Arg::I32(i32_arg(call.n, "N")?),
            Arg::I32(i32_arg(call.k, "K")?),
            Arg::Int8(int8(&p)?),
            Arg::I32(i32_arg(call.batch1.max(1), "batch")?),
            Arg::Buf(bias),
            Arg::Int8(int8(&sbias)?),
            Arg::F32(call.alpha),
            Arg::F32(call.beta),
            Arg::Buf(res),
            Arg::I32(has_res),
            Arg::I32(act),
            Arg::F32(act_a),
            Arg::F32(act_b),
            Arg::I32(mblocks as i32),
            Arg::I64(ys[0]),
            Arg::I64(ys[1]),
            Arg::I64(ys[2]),
            Arg::I32(per_item as i32),
        ],
    );
    Ok(())
}

/// Gemm and MatMul on the register-blocked kernel: A read in place when its k is
/// contiguous, else packed into row panels (on the device, as it is usually an
/// activation); B packed into column panels on the host once when it is a constant (a
/// weight, transposed or not), read in place when it is an activation with contiguous
/// rows, else packed on the device.
fn gemm_via_blocked(b: &mut Builder, variant: &str, call: GemmCall) -> Result<(), OpError> {
    let storage = if variant == Storage::F16.variant() {
        Storage::F16
    } else {
        Storage::F32
    };
    let program = b.program(Family::Gemm, variant)?;
    let (m, n, k) = (call.m, call.n, call.k);
    let blocks = m.div_ceil(MR);
    let per_batch = blocks * k * MR;
    let a_batches = call.batch;
    let mut temps = Vec::new();
    let mut temp = |b: &mut Builder, suffix: &str, len: usize| -> Result<Loc, OpError> {
        let name = format!("{}::{suffix}", call.node);
        b.shapes.insert(name.clone(), Shape::new([len]));
        b.dtypes.insert(name.clone(), DType::F32);
        temps.push(name.clone());
        b.alloc(&name)
    };
    // A with contiguous k is read in place, each of a block's rows a stream of its own; only
    // A with strided k is packed into row panels first. Packing was a launch and a pass
    // over A that the GEMM's loop did not win back at any size measured (`fwd_time`-style
    // timing of a MatMul on one PoCL thread, packed vs in place: M×K×N 64×128×128 101 vs
    // 92 µs, 256×128×128 316 vs 293, 1024×128×128 1,247 vs 1,123, 1024×512×512 18.4 vs
    // 18.7 ms, within noise; torchvision_vit 466 vs 412 µs a forward).
    let a_in_place = call.sa[1] == 1 && call.sa.iter().all(|&s| s >= 0);
    let (ap, lda, a_offsets, a_first) = if a_in_place {
        (
            call.a.clone(),
            call.sa[0].max(1) as usize,
            [call.sa[2], call.sa[3]],
            call.sa[4],
        )
    } else {
        let ap = temp(b, "packed_a", a_batches * per_batch)?;
        let sa8 = [
            call.sa[0], call.sa[1], call.sa[2], call.sa[3], call.sa[4], 0, 0, 0,
        ];
        b.launch(
            &program,
            "pack_a",
            &[blocks * MR, k.div_ceil(KC), a_batches],
            Some(&[MR, 1, 1]),
            vec![
                Arg::Buf(call.a),
                Arg::Buf(ap.clone()),
                Arg::I32(i32_arg(m, "M")?),
                Arg::I32(i32_arg(k, "K")?),
                Arg::Int8(int8(&sa8)?),
                Arg::I32(i32_arg(call.batch1.max(1), "batch")?),
                Arg::I32(i32_arg(per_batch, "packed size")?),
            ],
        );
        let per_b1 = per_batch as i64;
        (ap, 0, [per_b1 * call.batch1.max(1) as i64, per_b1], 0)
    };
    // B becomes NR-column panels, one panel set per batch index: on the host once when it
    // is a constant (a Gemm's weight), else by the pack_b kernel.
    let [b_sk, b_sn, b_s0, b_s1, b_first] = call.sb;
    let panel_set = n.div_ceil(NR) * k * NR;
    let batch1 = call.batch1.max(1);
    let host_b = b
        .host_value(&call.b_name)
        .filter(|_| b_s0 == 0 && b_s1 == 0)
        .map(Tensor::to_f64_vec);
    // B with contiguous rows in a slot (an activation, a view of one included) is read in
    // place, its rows `b_sk` apart: a ragged last panel's 16-lane loads run past a row's end
    // into the value's next row or the slot's slack, and those lanes are dropped. Packing it
    // was one more launch and pass over B.
    let b_in_place = host_b.is_none()
        && b_sn == 1
        && b_sk > 0
        && [b_s0, b_s1, b_first].iter().all(|&s| s >= 0)
        && matches!(call.b, Loc::Slot(_));
    let (bl, p, ldb, b_first) = if b_in_place {
        (call.b, [b_s0, b_s1], b_sk as usize, b_first)
    } else {
        match host_b {
            Some(values) => {
                let mut packed = vec![0f32; panel_set];
                for kk in 0..k {
                    for nn in 0..n {
                        let src = (b_first + kk as i64 * b_sk + nn as i64 * b_sn) as usize;
                        packed[((nn / NR) * k + kk) * NR + nn % NR] =
                            values.get(src).copied().unwrap_or(0.0) as f32;
                    }
                }
                let t = Tensor::from_f32([panel_set], packed)
                    .map_err(|e| OpError::Shape(e.to_string()))?;
                let loc = b.constant(&format!("{}::b_panels", call.node), &t, storage)?;
                // The same panels serve every batch.
                (loc, [0, 0], 0, 0)
            }
            None => {
                let bp = temp(b, "b_panels", call.batch * panel_set)?;
                launch_pack_b(
                    b,
                    &program,
                    call.b,
                    bp.clone(),
                    k,
                    n,
                    call.sb,
                    batch1,
                    call.batch,
                )?;
                let panels = [(batch1 * panel_set) as i64, panel_set as i64];
                (bp, panels, 0, 0)
            }
        }
    };
    let blocked = BlockedCall {
        ap,
        b: bl,
        y: call.y,
        m,
        n,
        k,
        p: [p[0], p[1], a_offsets[0], a_offsets[1]],
        ldb,
        lda,
        a_first,
        b_first,
        y_strides: call.y_strides,
        batch: call.batch,
        batch1: call.batch1,
        bias: call.bias,
        alpha: call.alpha,
        beta: call.beta,
        epilogue: call.epilogue,
    };
    launch_blocked(b, &program, blocked)?;
    for t in temps {
        b.release(&t);
    }
    Ok(())
}
