//! Data movement (kernels/movement.cl and cast.cl). Reshape, Flatten, Squeeze, Unsqueeze,
//! Identity and Dropout move nothing: their output is another name for the input's buffer.
//! Transpose, Slice, Split, Expand and a Gather of constant, evenly stepping indices copy
//! nothing either: their output is a [`View`], a strided window onto the input's buffer
//! (and a reshape of a view is a view where strides for the new shape exist). MatMul, Gemm,
//! the binary kernels and the unary ones read views in place, Concat copies them into its
//! output, and any other consumer gets a contiguous copy (see [`Builder::input`]), over the
//! fewest axes that visit the same elements (see [`coalesce`]). Pad, Cast and other Gathers
//! have their own kernels.

use super::{input, optional_input, output, view_broadcast_strides};
use crate::plan::StorageDefines;
use crate::plan::{
    coalesce, i32_arg, i32_offset, int8, strides_of, Arg, Builder, GemmKernel, Loc, Storage, View,
};
use crate::programs::Family;
use concord_core::shape::normalize_axis;
use concord_core::{DType, Node, Op, OpError, Tensor, TensorData};
use half::f16;

pub(super) fn build(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    match &node.op {
        Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Squeeze
        | Op::Unsqueeze
        | Op::Identity
        | Op::Dropout => reshape(b, input(node, 0, "data")?, output(node)?),
        Op::Transpose { perm } => transpose(b, node, perm.as_deref()),
        Op::Slice => slice(b, node),
        Op::Expand => expand(b, node),
        Op::Concat { axis } => concat(b, node, *axis),
        Op::Split { axis, .. } => split(b, node, *axis),
        Op::Pad { .. } => pad(b, node),
        Op::Gather { axis } => gather(b, node, *axis),
        Op::Cast { to } => cast(b, node, *to),
        other => Err(OpError::Unsupported(format!(
            "{} is computed on the host when the plan is made and has no kernel",
            other.name()
        ))),
    }
}

/// The shortest innermost axis that copy_runs walks in a loop; shorter ones leave too
/// little per work-item to pay for the lost parallelism.
const COPY_RUN_MIN: usize = 8;

/// A strided copy: for every coordinate of `dims`, dst[dst_off + c·ds] = src[src_off + c·ss].
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_nd(
    b: &mut Builder,
    storage: Storage,
    src: Loc,
    dst: Loc,
    dims: &[usize],
    ss: &[i64],
    ds: &[i64],
    src_off: i64,
    dst_off: i64,
) -> Result<(), OpError> {
    let n: usize = dims.iter().product();
    if n == 0 {
        return Ok(());
    }
    let program = b.program(Family::Movement, storage.bits_variant())?;
    let (dims, strides) = coalesce(dims, &[ss, ds]);
    let (ss, ds) = (&strides[0], &strides[1]);
    // A copy that is flat on both sides needs no index arithmetic (rank 0).
    let rank = if ss == &[1] && ds == &[1] {
        0
    } else {
        dims.len()
    };
    // On CPU devices a real permutation or strided copy walks its innermost axis in a loop
    // (copy_runs): the per-element index arithmetic, not the bytes, is what such a copy
    // costs there. On a GPU neighbouring work-items should touch neighbouring elements.
    let inner = dims.last().copied().unwrap_or(1);
    if rank >= 2 && inner >= COPY_RUN_MIN && b.gemm == GemmKernel::RegisterBlocked {
        let outer = rank - 1;
        let runs = n / inner;
        let dims64: Vec<i64> = dims[..outer].iter().map(|&d| d as i64).collect();
        b.launch_1d(
            &program,
            "copy_runs",
            runs,
            vec![
                Arg::Buf(src),
                Arg::Buf(dst),
                Arg::I32(i32_arg(runs, "run count")?),
                Arg::I32(outer as i32),
                Arg::Int8(int8(&dims64)?),
                Arg::Int8(int8(&ss[..outer])?),
                Arg::Int8(int8(&ds[..outer])?),
                Arg::I32(i32_offset(src_off)?),
                Arg::I32(i32_offset(dst_off)?),
                Arg::I32(i32_arg(inner, "run length")?),
                Arg::I32(i32_offset(ss[outer])?),
                Arg::I32(i32_offset(ds[outer])?),
            ],
        );
        return Ok(());
    }
    let dims64: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    b.launch_1d(
        &program,
        "copy_nd",
        n,
        vec![
            Arg::Buf(src),
            Arg::Buf(dst),
            Arg::I32(i32_arg(n, "element count")?),
            Arg::I32(rank as i32),
            Arg::Int8(int8(&dims64)?),
            Arg::Int8(int8(ss)?),
            Arg::Int8(int8(ds)?),
            Arg::I32(i32_offset(src_off)?),
            Arg::I32(i32_offset(dst_off)?),
        ],
    );
    Ok(())
}

fn transpose(b: &mut Builder, node: &Node, perm: Option<&[i64]>) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "data")?, output(node)?);
    let rank = b.shape(x)?.rank();
    let perm: Vec<usize> = match perm {
        Some(p) => p
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).rev().collect(),
    };
    let v = b.view(x)?;
    let strides = perm
        .iter()
        .map(|&p| {
            v.strides.get(p).copied().ok_or_else(|| {
                OpError::Shape(format!(
                    "Transpose: perm names axis {p} of a rank-{rank} input"
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    b.set_view(y, View { strides, ..v })
}

/// A Reshape, Flatten, Squeeze, Unsqueeze, Identity or Dropout: another name for the
/// input's buffer, or for a view the same window with the new shape's strides where one
/// exists (else the view is copied out first).
fn reshape(b: &mut Builder, x: &str, y: &str) -> Result<(), OpError> {
    if !b.is_view(x) {
        return b.alias(y, x);
    }
    let dims = b.shape(x)?.dims().to_vec();
    let new = b.shape(y)?.dims().to_vec();
    let v = b.view(x)?;
    match reshaped_strides(&dims, &v.strides, &new) {
        Some(strides) => b.set_view(y, View { strides, ..v }),
        None => b.alias(y, x),
    }
}

/// Strides with which `new` walks the same elements, in the same order, as `dims` with
/// `strides` do, when some exist: each group of new axes must cover a group of old axes
/// that steps through memory as one run. None for a size mismatch or an empty value.
fn reshaped_strides(dims: &[usize], strides: &[i64], new: &[usize]) -> Option<Vec<i64>> {
    let count: usize = dims.iter().product();
    if count == 0 || count != new.iter().product::<usize>() || dims.len() != strides.len() {
        return None;
    }
    let old: Vec<(usize, i64)> = dims
        .iter()
        .zip(strides)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &s)| (d, s))
        .collect();
    let mut out = vec![0i64; new.len()];
    let (mut ni, mut oi) = (0, 0);
    while ni < new.len() && oi < old.len() {
        if new[ni] == 1 {
            ni += 1;
            continue;
        }
        let (n0, o0) = (ni, oi);
        let (mut np, mut op) = (new[ni], old[oi].0);
        while np != op {
            if np < op {
                ni += 1;
                np *= *new.get(ni)?;
            } else {
                oi += 1;
                op *= old.get(oi)?.0;
            }
        }
        if (o0..oi).any(|k| old[k].1 != old[k + 1].1 * old[k + 1].0 as i64) {
            return None;
        }
        let mut stride = old[oi].1;
        for k in (n0..=ni).rev() {
            out[k] = stride;
            stride *= new[k] as i64;
        }
        ni += 1;
        oi += 1;
    }
    if oi != old.len() || new[ni.min(new.len())..].iter().any(|&d| d != 1) {
        return None;
    }
    Some(out)
}

/// Reads an i64 operand known on the host.
fn host_ints(b: &Builder, name: &str, what: &str) -> Result<Vec<i64>, OpError> {
    let t = b.host_value(name).ok_or_else(|| {
        OpError::Unsupported(format!(
            "{what} `{name}` must be a constant for the OpenCL executor"
        ))
    })?;
    t.to_i64_vec().ok_or_else(|| {
        OpError::Unsupported(format!("{what} `{name}` must be i64, it is {}", t.dtype()))
    })
}

fn slice(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "data")?, output(node)?);
    let in_dims = b.shape(x)?.dims().to_vec();
    let rank = in_dims.len();
    let starts = host_ints(b, input(node, 1, "starts")?, "Slice starts")?;
    let ends = host_ints(b, input(node, 2, "ends")?, "Slice ends")?;
    let axes = match optional_input(node, 3) {
        Some(n) => host_ints(b, n, "Slice axes")?,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = match optional_input(node, 4) {
        Some(n) => host_ints(b, n, "Slice steps")?,
        None => vec![1; starts.len()],
    };
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(OpError::Shape(format!(
            "Slice: starts, ends, axes and steps must have one entry each per sliced axis \
             ({}, {}, {}, {})",
            starts.len(),
            ends.len(),
            axes.len(),
            steps.len()
        )));
    }
    let mut first = vec![0i64; rank];
    let mut step_of = vec![1i64; rank];
    for i in 0..starts.len() {
        let axis = normalize_axis(axes[i], rank)?;
        let dim = in_dims[axis] as i64;
        let step = steps[i];
        if step == 0 {
            return Err(OpError::Attribute {
                name: "steps",
                detail: "a step of 0 is not allowed".into(),
            });
        }
        let mut start = starts[i];
        if start < 0 {
            start = start.saturating_add(dim);
        }
        start = if step > 0 {
            start.clamp(0, dim)
        } else {
            start.clamp(0, (dim - 1).max(0))
        };
        first[axis] = start;
        step_of[axis] = step;
    }
    let v = b.view(x)?;
    let strides = (0..rank).map(|a| v.strides[a] * step_of[a]).collect();
    let offset = v.offset + (0..rank).map(|a| first[a] * v.strides[a]).sum::<i64>();
    b.set_view(
        y,
        View {
            base: v.base,
            offset,
            strides,
        },
    )
}

fn expand(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "input")?, output(node)?);
    let in_dims = b.shape(x)?.dims().to_vec();
    let out_dims = b.shape(y)?.dims().to_vec();
    let v = b.view(x)?;
    // Each output axis steps as the input axis it comes from, and not at all where the
    // input repeats (absent or of extent 1).
    let strides = view_broadcast_strides(&in_dims, &v.strides, &out_dims);
    b.set_view(y, View { strides, ..v })
}

fn concat(b: &mut Builder, node: &Node, axis: i64) -> Result<(), OpError> {
    let y = output(node)?;
    let out_dims = b.shape(y)?.dims().to_vec();
    let axis = normalize_axis(axis, out_dims.len())?;
    let out_strides = strides_of(&out_dims);
    let dtype = b.dtype(y)?;
    let storage = b.storage(dtype);
    let dst = b.alloc(y)?;
    let mut at = 0i64;
    for name in node.present_inputs() {
        let dims = b.shape(name)?.dims().to_vec();
        // An input its producer wrote in place (a ConcatPart) is there already.
        let offset = at * out_strides[axis] * storage.size() as i64;
        let in_place = match (&dst, usize::try_from(offset)) {
            (Loc::Slot(slot), Ok(offset)) => b.is_part_at(name, *slot, offset),
            _ => false,
        };
        if in_place {
            at += dims.get(axis).copied().unwrap_or(0) as i64;
            continue;
        }
        let src = b.view(name)?;
        copy_nd(
            b,
            storage,
            src.base,
            dst.clone(),
            &dims,
            &src.strides,
            &out_strides,
            src.offset,
            at * out_strides[axis],
        )?;
        at += dims.get(axis).copied().unwrap_or(0) as i64;
    }
    Ok(())
}

fn split(b: &mut Builder, node: &Node, axis: i64) -> Result<(), OpError> {
    let x = input(node, 0, "input")?;
    let in_dims = b.shape(x)?.dims().to_vec();
    let axis = normalize_axis(axis, in_dims.len())?;
    let v = b.view(x)?;
    let mut at = 0i64;
    for name in node.outputs.iter().filter(|o| !o.is_empty()) {
        let dims = b.shape(name)?.dims().to_vec();
        b.set_view(
            name,
            View {
                offset: v.offset + at * v.strides[axis],
                ..v.clone()
            },
        )?;
        at += dims.get(axis).copied().unwrap_or(0) as i64;
    }
    Ok(())
}

fn pad(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "data")?, output(node)?);
    let in_dims = b.shape(x)?.dims().to_vec();
    let rank = in_dims.len();
    let pads = host_ints(b, input(node, 1, "pads")?, "Pad pads")?;
    let axes: Vec<usize> = match optional_input(node, 3) {
        Some(n) => host_ints(b, n, "Pad axes")?
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(OpError::Shape(format!(
            "Pad: pads has {} values, expected {} (begin and end for each padded axis)",
            pads.len(),
            2 * axes.len()
        )));
    }
    let mut begin = vec![0i64; rank];
    for (i, &axis) in axes.iter().enumerate() {
        begin[axis] = pads[i];
    }
    let dtype = b.dtype(x)?;
    let storage = b.storage(dtype);
    let fill = match optional_input(node, 2) {
        None => 0,
        Some(name) => {
            let t = b.host_value(name).ok_or_else(|| {
                OpError::Unsupported("Pad constant_value must be a constant".into())
            })?;
            fill_bits(t, storage)?
        }
    };
    let out_dims = b.shape(y)?.dims().to_vec();
    let n: usize = out_dims.iter().product();
    let program = b.program(Family::Movement, storage.bits_variant())?;
    let src = b.input(x)?;
    let dst = b.alloc(y)?;
    let as64 = |d: &[usize]| d.iter().map(|&v| v as i64).collect::<Vec<_>>();
    b.launch_1d(
        &program,
        "pad_constant",
        n,
        vec![
            Arg::Buf(src),
            Arg::Buf(dst),
            Arg::I32(i32_arg(n, "element count")?),
            Arg::I32(rank as i32),
            Arg::Int8(int8(&as64(&out_dims))?),
            Arg::Int8(int8(&as64(&in_dims))?),
            Arg::Int8(int8(&begin)?),
            Arg::Int8(int8(&strides_of(&in_dims))?),
            Arg::I64(fill),
        ],
    );
    Ok(())
}

/// The bits of a one-element constant in `storage` layout, for Pad's fill value.
fn fill_bits(t: &Tensor, storage: Storage) -> Result<i64, OpError> {
    let bits = match (t.data(), storage) {
        (TensorData::F32(v), Storage::F32) => v.first().map(|x| i64::from(x.to_bits())),
        (TensorData::F32(v), Storage::F16) => {
            v.first().map(|x| i64::from(f16::from_f32(*x).to_bits()))
        }
        (TensorData::F16(v), Storage::F16) => v.first().map(|x| i64::from(x.to_bits())),
        (TensorData::I64(v), Storage::I64) => v.first().copied(),
        (TensorData::Bool(v), Storage::U8) => v.first().map(|&x| i64::from(x)),
        _ => None,
    };
    Ok(bits.unwrap_or(0))
}

fn gather(b: &mut Builder, node: &Node, axis: i64) -> Result<(), OpError> {
    let (data, indices, y) = (
        input(node, 0, "data")?,
        input(node, 1, "indices")?,
        output(node)?,
    );
    let dims = b.shape(data)?.dims().to_vec();
    let axis = normalize_axis(axis, dims.len())?;
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let n_idx = b.shape(indices)?.numel();
    if b.dtype(indices)? != DType::I64 {
        return Err(OpError::DType {
            index: 1,
            name: "indices",
            expected: "i64".into(),
            actual: b.dtype(indices)?,
        });
    }
    let n = outer * n_idx * inner;
    // Indices known now and all in range: the kernel never reports, so the forward needs
    // no status word for this node (two transfers fewer per forward where no other node
    // needs one). Known but out of range, the forward reports it as any Gather does.
    let extent = dims[axis] as f64;
    let known = b.host_value(indices).map(Tensor::to_f64_vec);
    let in_range = known
        .as_ref()
        .is_some_and(|v| v.iter().all(|i| (-extent..extent).contains(i)));
    // Constant indices in range that step evenly (one index, or a run such as 2, 4, 6)
    // select a window of the data: a view, no copy.
    let rank = b.shape(indices)?.rank();
    if let (Some(idx), true, true) = (known, in_range, rank <= 1) {
        let wrap = |i: f64| if i < 0.0 { i + extent } else { i } as i64;
        let first = idx.first().map_or(0, |&i| wrap(i));
        let step = idx.get(1).map_or(1, |&i| wrap(i) - first);
        if idx.windows(2).all(|w| wrap(w[1]) - wrap(w[0]) == step) {
            let v = b.view(data)?;
            let mut strides = v.strides.clone();
            if rank == 0 {
                strides.remove(axis);
            } else {
                strides[axis] *= step;
            }
            return b.set_view(
                y,
                View {
                    offset: v.offset + first * v.strides[axis],
                    strides,
                    base: v.base,
                },
            );
        }
    }
    let storage = b.storage(b.dtype(data)?);
    let program = b.program(Family::Movement, storage.bits_variant())?;
    let src = b.input(data)?;
    let idx = b.input(indices)?;
    let dst = b.alloc(y)?;
    let status = if in_range {
        Arg::Buf(dst.clone())
    } else {
        Arg::Status
    };
    // On CPU devices a run of at least COPY_RUN_MIN elements per index is copied by one
    // work-item (gather_runs); otherwise one work-item per element.
    let runs = inner >= COPY_RUN_MIN && b.gemm == GemmKernel::RegisterBlocked;
    let (kernel, items, count) = if runs {
        ("gather_runs", outer * n_idx, "run count")
    } else {
        ("gather", n, "element count")
    };
    b.launch_1d(
        &program,
        kernel,
        items,
        vec![
            Arg::Buf(src),
            Arg::Buf(idx),
            Arg::Buf(dst),
            Arg::I32(i32_arg(items, count)?),
            Arg::I32(i32_arg(n_idx, "index count")?),
            Arg::I32(i32_arg(dims[axis], "axis extent")?),
            Arg::I32(i32_arg(inner.max(1), "inner extent")?),
            status,
        ],
    );
    Ok(())
}

fn cast(b: &mut Builder, node: &Node, to: DType) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "input")?, output(node)?);
    let from = b.storage(b.dtype(x)?);
    let into = b.storage(to);
    if from == into {
        // Same device layout (f32 and f16 are both half on the fp16 target): same bits.
        return b.alias(y, x);
    }
    let name = |s: Storage| match s {
        Storage::F32 => "F32",
        Storage::F16 => "F16",
        Storage::I64 => "I64",
        Storage::U8 => "U8",
    };
    let variant = format!("-DSRC_{} -DDST_{}", name(from), name(into));
    let n = b.shape(y)?.numel();
    let program = b.program(Family::Cast, &variant)?;
    let src = b.input(x)?;
    let dst = b.alloc(y)?;
    b.launch_1d(
        &program,
        "cast",
        n,
        vec![
            Arg::Buf(src),
            Arg::Buf(dst),
            Arg::I32(i32_arg(n, "element count")?),
        ],
    );
    Ok(())
}
