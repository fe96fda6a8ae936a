//! Normalisation (kernels/norm.cl): Softmax, LayerNormalization and BatchNormalization in
//! inference mode (a BatchNormalization after a Conv is folded into it instead, see
//! fuse.rs). With the GPU-shaped kernel family, Softmax over a contiguous axis and
//! LayerNormalization normalise each row with one work-group, reducing in local memory;
//! with the CPU-device kernels, a work-item walks a row, a Softmax's exps 16 at a time
//! (softmax_vec).

use super::{broadcast_strides, input, optional_input, output};
use crate::plan::StorageDefines;
use crate::plan::{i32_arg, int8, strides_of, Arg, Builder, GemmKernel};
use crate::programs::Family;
use concord_core::shape::normalize_axis;
use concord_core::{Node, Op, OpError};

/// Work-items of norm.cl's `ROW_GROUP`: the most a row kernel's work-group has.
const ROW_GROUP: usize = 64;

/// The work-group size for normalising rows of `len` elements one work-group per row
/// (softmax_rows, layer_norm_rows), or None for one work-item per row. The GPU-shaped
/// kernel family only ([`GemmKernel::LocalTiled`]): on PoCL the work-group form was slower
/// (torchvision_vit's Softmax, 34 rows of 17: 45 µs against 20 µs) and no faster for its
/// LayerNorm (17 rows of 32: 14–17 µs either way, about a launch's cost). Rows shorter than
/// [`ROW_MIN`] gain nothing from a reduction, and a device whose work-groups cannot hold
/// the group keeps the one-item kernels. A power of two, at most `ROW_GROUP`.
fn row_group(b: &Builder, len: usize) -> Option<usize> {
    if b.gemm != GemmKernel::LocalTiled || len < ROW_MIN {
        return None;
    }
    let group = len.next_power_of_two().min(ROW_GROUP);
    (group <= b.device.max_work_group_size).then_some(group)
}

/// Rows per work-group of the one-item-per-row LayerNorm and Softmax on CPU devices.
const ROW_ITEMS: usize = 4;

/// The shortest row normalised by a work-group rather than one work-item.
const ROW_MIN: usize = 16;

pub(super) fn build(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "X")?, output(node)?);
    let xd = b.shape(x)?.dims().to_vec();
    let variant = b.storage(b.dtype(x)?).variant();
    let program = b.program(Family::Norm, variant)?;
    match node.op {
        Op::Softmax { axis } => {
            let axis = normalize_axis(axis, xd.len())?;
            let outer: usize = xd[..axis].iter().product();
            let inner: usize = xd[axis + 1..].iter().product();
            let xl = b.input(x)?;
            let yl = b.alloc(y)?;
            if let Some(group) = row_group(b, xd[axis]).filter(|_| inner == 1) {
                b.launch(
                    &program,
                    "softmax_rows",
                    &[outer * group],
                    Some(&[group]),
                    vec![
                        Arg::Buf(xl),
                        Arg::Buf(yl),
                        Arg::I32(i32_arg(xd[axis], "axis extent")?),
                    ],
                );
                return Ok(());
            }
            if inner == 1 && b.gemm == GemmKernel::RegisterBlocked {
                b.launch(
                    &program,
                    "softmax_vec",
                    &[outer],
                    Some(&[ROW_ITEMS]),
                    vec![
                        Arg::Buf(xl),
                        Arg::Buf(yl),
                        Arg::I32(i32_arg(outer, "rows")?),
                        Arg::I32(i32_arg(xd[axis], "axis extent")?),
                    ],
                );
                return Ok(());
            }
            b.launch_1d(
                &program,
                "softmax",
                outer * inner,
                vec![
                    Arg::Buf(xl),
                    Arg::Buf(yl),
                    Arg::I32(i32_arg(outer, "outer extent")?),
                    Arg::I32(i32_arg(xd[axis], "axis extent")?),
                    Arg::I32(i32_arg(inner, "inner extent")?),
                ],
            );
        }
        Op::LayerNormalization { axis, epsilon } => {
            let axis = normalize_axis(axis, xd.len())?;
            let rows: usize = xd[..axis].iter().product();
            let cols: usize = xd[axis..].iter().product();
            let scale = input(node, 1, "Scale")?;
            let normalised = &xd[axis..];
            let strides = |b: &Builder, name: &str| -> Result<[i32; 8], OpError> {
                let dims = b.shape(name)?.dims().to_vec();
                let fits = dims.len() <= normalised.len()
                    && dims
                        .iter()
                        .zip(&normalised[normalised.len() - dims.len()..])
                        .all(|(&p, &n)| p == 1 || p == n);
                if !fits {
                    return Err(OpError::Shape(format!(
                        "LayerNormalization: `{name}` of shape {dims:?} does not broadcast to \
                         the normalised shape {normalised:?}"
                    )));
                }
                int8(&broadcast_strides(&dims, normalised))
            };
            let scale_strides = strides(b, scale)?;
            let bias = optional_input(node, 2);
            let bias_strides = match bias {
                Some(name) => strides(b, name)?,
                None => [0; 8],
            };
            let ndims: Vec<i64> = normalised.iter().map(|&d| d as i64).collect();
            // Scale and B of the normalised shape are read at each element's own index
            // (rank 0 for the kernels).
            let own = strides_of(normalised);
            let own_layout = |s: &[i32; 8]| {
                normalised
                    .iter()
                    .zip(s)
                    .zip(&own)
                    .all(|((&d, &a), &b)| d == 1 || i64::from(a) == b)
            };
            let flat = own_layout(&scale_strides) && (bias.is_none() || own_layout(&bias_strides));
            let nrank = if flat { 0 } else { ndims.len() as i32 };
            let xl = b.input(x)?;
            let sl = b.input(scale)?;
            let bl = match bias {
                Some(name) => b.input(name)?,
                None => sl.clone(),
            };
            let yl = b.alloc(y)?;
            // Both kernels take the same arguments, the one-item kernel also its row count.
            let mut args = vec![
                Arg::Buf(xl),
                Arg::Buf(sl),
                Arg::Buf(bl),
                Arg::Buf(yl),
                Arg::I32(i32_arg(cols, "normalised size")?),
                Arg::I32(nrank),
                Arg::Int8(int8(&ndims)?),
                Arg::Int8(scale_strides),
                Arg::Int8(bias_strides),
                Arg::I32(bias.is_some() as i32),
                Arg::F32(epsilon),
            ];
            match row_group(b, cols) {
                Some(group) => b.launch(
                    &program,
                    "layer_norm_rows",
                    &[rows * group],
                    Some(&[group]),
                    args,
                ),
                None => {
                    args.insert(4, Arg::I32(i32_arg(rows, "rows")?));
                    if b.gemm == GemmKernel::RegisterBlocked {
                        // Work-groups of ROW_ITEMS rows: on PoCL a work-group of 64 items
                        // walking rows ran 2-3x slower than small ones (vectorised across
                        // items), and a transformer's few rows fitted in one group, so one
                        // core did them all.
                        b.launch(&program, "layer_norm", &[rows], Some(&[ROW_ITEMS]), args);
                    } else {
                        b.launch_1d(&program, "layer_norm", rows, args);
                    }
                }
            }
        }
        Op::BatchNormalization { epsilon } => {
            if xd.len() < 2 {
                return Err(OpError::Shape(format!(
                    "BatchNormalization needs X of rank 2 or more, got {xd:?}"
                )));
            }
            let channels = xd[1];
            let inner: usize = xd[2..].iter().product();
            let n: usize = xd.iter().product();
            let mut params = Vec::new();
            for (index, name) in [(1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")] {
                let p = input(node, index, name)?;
                if b.shape(p)?.dims() != [channels] {
                    return Err(OpError::Shape(format!(
                        "BatchNormalization: input {index} ({name}) has shape {}, expected \
                         [{channels}]",
                        b.shape(p)?
                    )));
                }
                params.push(b.input(p)?);
            }
            let xl = b.input(x)?;
            let yl = b.alloc(y)?;
            let mut args = vec![Arg::Buf(xl)];
            args.extend(params.into_iter().map(Arg::Buf));
            args.extend([
                Arg::Buf(yl),
                Arg::I32(i32_arg(n, "element count")?),
                Arg::I32(i32_arg(channels, "channels")?),
                Arg::I32(i32_arg(inner.max(1), "inner extent")?),
                Arg::F32(epsilon),
            ]);
            b.launch_1d(&program, "batch_norm", n, args);
        }
        _ => {
            return Err(OpError::Unsupported(format!(
                "{} is not a normalisation",
                node.op.name()
            )))
        }
    }
    Ok(())
}
