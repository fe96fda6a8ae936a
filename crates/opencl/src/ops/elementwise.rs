//! Elementwise ops (kernels/elementwise.cl): unary maths and activations, broadcasting
//! binary arithmetic and Equal, Clip, Where.

use super::{broadcast_strides, input, optional_input, output, view_broadcast_strides};
use crate::plan::StorageDefines;
use crate::plan::{coalesce, i32_arg, i32_offset, int8, Arg, Builder, GemmKernel, Storage};
use crate::programs::Family;
use concord_core::op::{Binary, Unary};
use concord_core::{DType, Node, Op, OpError};

pub(super) fn build(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    match &node.op {
        Op::Binary(op) => binary(b, node, *op),
        Op::Unary(op) => unary(b, node, *op),
        Op::Clip => clip(b, node),
        Op::Where => select(b, node),
        other => Err(OpError::Unsupported(format!(
            "{} is not an elementwise op",
            other.name()
        ))),
    }
}

/// Broadcasting binary ops: the `binary` kernel with the op's B_* code (from concord-core's
/// op table), one element per work-item, or `binary_equal`, whose output is bool. With the
/// CPU-device kernels, `binary_rows` instead: 16 values of a row per work-item, on vectors.
fn binary(b: &mut Builder, node: &Node, op: Binary) -> Result<(), OpError> {
    let (a_name, b_name, y) = (input(node, 0, "A")?, input(node, 1, "B")?, output(node)?);
    let dtype = b.dtype(a_name)?;
    let storage = b.storage(dtype);
    let integer = dtype == DType::I64;
    let integer_form = !matches!(op, Binary::Pow);
    let float_form = !matches!(op, Binary::Mod { fmod: false });
    if (integer && !integer_form) || (!integer && !float_form) {
        return Err(OpError::Unsupported(format!(
            "{} on {dtype} has no OpenCL kernel",
            op.name()
        )));
    }
    let out = b.shape(y)?.clone();
    let (sa, sb) = (b.shape(a_name)?.clone(), b.shape(b_name)?.clone());
    let n = out.numel();
    // The operands are read where they are, views included (a transposed activation
    // scaled), except by Equal's kernel, which reads them contiguous.
    if op == Binary::Equal {
        b.input(a_name)?;
        b.input(b_name)?;
    }
    let (av, bv) = (b.view(a_name)?, b.view(b_name)?);
    // Broadcast index arithmetic over the fewest axes that visit the same elements.
    let (dims, strides) = coalesce(
        out.dims(),
        &[
            &view_broadcast_strides(sa.dims(), &av.strides, out.dims()),
            &view_broadcast_strides(sb.dims(), &bv.strides, out.dims()),
        ],
    );
    let program = b.program(Family::Elementwise, storage.variant())?;
    let (a_off, b_off) = (i32_offset(av.offset)?, i32_offset(bv.offset)?);
    let (a, bb) = (av.base, bv.base);
    let yl = b.alloc(y)?;
    let status = if integer && matches!(op, Binary::Div | Binary::Mod { .. }) {
        Arg::Status
    } else {
        Arg::Buf(yl.clone())
    };
    let rows_kernel = op != Binary::Equal && b.gemm == GemmKernel::RegisterBlocked;
    if !rows_kernel {
        let kernel = if op == Binary::Equal {
            "binary_equal"
        } else {
            "binary"
        };
        let flat = strides.iter().all(|s| s[..] == [1]) && a_off == 0 && b_off == 0;
        let (rank, sa, sb) = if flat {
            (0, [0; 8], [0; 8])
        } else {
            (dims.len(), int8(&strides[0])?, int8(&strides[1])?)
        };
        let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let mut args = vec![
            Arg::Buf(a),
            Arg::Buf(bb),
            Arg::Buf(yl),
            Arg::I32(i32_arg(n, "element count")?),
            Arg::I32(rank as i32),
            Arg::Int8(int8(&dims)?),
            Arg::Int8(sa),
            Arg::Int8(sb),
            status,
        ];
        if kernel == "binary" {
            args.extend([Arg::I32(op.code() as i32), Arg::I32(a_off), Arg::I32(b_off)]);
        }
        b.launch_1d(&program, kernel, n, args);
        return Ok(());
    }
    // Rows of the innermost coalesced axis; the outer axes index the rows. Along a row each
    // operand's stride is 1, or 0 where it repeats one value.
    let last = dims.len() - 1;
    let inner = dims[last];
    let rows = n / inner.max(1);
    let chunks = inner.div_ceil(16);
    // The kernel indexes its work-items with an int.
    i32_arg(rows * chunks, "work-items")?;
    let outer_dims: Vec<i64> = dims[..last].iter().map(|&d| d as i64).collect();
    let args = vec![
        Arg::Buf(a),
        Arg::Buf(bb),
        Arg::Buf(yl),
        Arg::I32(i32_arg(rows, "rows")?),
        Arg::I32(i32_arg(inner, "row length")?),
        Arg::I32(i32_arg(chunks, "chunks per row")?),
        Arg::I32(last as i32),
        Arg::Int8(int8(&outer_dims)?),
        Arg::Int8(int8(&strides[0][..last])?),
        Arg::Int8(int8(&strides[1][..last])?),
        status,
        Arg::I32(op.code() as i32),
        Arg::I32(i32_offset(strides[0][last])?),
        Arg::I32(i32_offset(strides[1][last])?),
        Arg::I32(a_off),
        Arg::I32(b_off),
    ];
    b.launch(&program, "binary_rows", &[rows * chunks], Some(&[4]), args);
    Ok(())
}

/// Unary ops: the `unary` kernel with the op's U_* code and parameters, or `unary_strided`
/// over a view.
fn unary(b: &mut Builder, node: &Node, op: Unary) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "X")?, output(node)?);
    let dtype = b.dtype(x)?;
    if dtype == DType::I64 && !op.def().integer() {
        return Err(OpError::Unsupported(format!(
            "{} on i64 has no OpenCL kernel",
            op.name()
        )));
    }
    let [alpha, beta] = op.params();
    let n = b.shape(y)?.numel();
    let program = b.program(Family::Elementwise, b.storage(dtype).variant())?;
    // A view (a slice or transpose) is read where it is, over up to eight axes.
    let strided = if b.is_view(x) {
        let view = b.view(x)?;
        let (dims, strides) = coalesce(b.shape(x)?.dims(), &[&view.strides]);
        Some((view, dims, strides)).filter(|(_, dims, _)| dims.len() <= 8)
    } else {
        None
    };
    if let Some((view, dims, strides)) = strided {
        let dims64: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let yl = b.alloc(y)?;
        b.launch_1d(
            &program,
            "unary_strided",
            n,
            vec![
                Arg::Buf(view.base),
                Arg::Buf(yl),
                Arg::I32(i32_arg(n, "element count")?),
                Arg::I32(dims.len() as i32),
                Arg::Int8(int8(&dims64)?),
                Arg::Int8(int8(&strides[0])?),
                Arg::I32(i32_offset(view.offset)?),
                Arg::I32(op.def().code() as i32),
                Arg::F32(alpha),
                Arg::F32(beta),
            ],
        );
        return Ok(());
    }
    let xl = b.input(x)?;
    let yl = b.alloc(y)?;
    b.launch_1d(
        &program,
        "unary",
        n,
        vec![
            Arg::Buf(xl),
            Arg::Buf(yl),
            Arg::I32(i32_arg(n, "element count")?),
            Arg::I32(op.def().code() as i32),
            Arg::F32(alpha),
            Arg::F32(beta),
        ],
    );
    Ok(())
}

fn clip(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "input")?, output(node)?);
    let dtype = b.dtype(x)?;
    let n = b.shape(y)?.numel();
    let program = b.program(Family::Elementwise, b.storage(dtype).variant())?;
    let xl = b.input(x)?;
    let bound = |b: &mut Builder, index: usize| -> Result<(Arg, i32), OpError> {
        match optional_input(node, index) {
            Some(name) => {
                if b.shape(name)?.numel() != 1 {
                    return Err(OpError::Shape(format!(
                        "Clip: input {index} must hold one element, it has shape {}",
                        b.shape(name)?
                    )));
                }
                Ok((Arg::Buf(b.input(name)?), 1))
            }
            // Never read: the flag says the bound is absent.
            None => Ok((Arg::Buf(xl.clone()), 0)),
        }
    };
    let (lo, has_lo) = bound(b, 1)?;
    let (hi, has_hi) = bound(b, 2)?;
    let yl = b.alloc(y)?;
    b.launch_1d(
        &program,
        "clip",
        n,
        vec![
            Arg::Buf(xl.clone()),
            Arg::Buf(yl),
            Arg::I32(i32_arg(n, "element count")?),
            lo,
            hi,
            Arg::I32(has_lo),
            Arg::I32(has_hi),
        ],
    );
    Ok(())
}

fn select(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    let (c, x, yv) = (
        input(node, 0, "condition")?,
        input(node, 1, "X")?,
        input(node, 2, "Y")?,
    );
    let out_name = output(node)?;
    let dtype = b.dtype(x)?;
    let storage = b.storage(dtype);
    if storage == Storage::U8 {
        return Err(OpError::Unsupported(
            "Where choosing between bool tensors has no OpenCL kernel".into(),
        ));
    }
    let out = b.shape(out_name)?.clone();
    let n = out.numel();
    let dims: Vec<i64> = out.dims().iter().map(|&d| d as i64).collect();
    let strides = |b: &Builder, name: &str| -> Result<[i32; 8], OpError> {
        int8(&broadcast_strides(b.shape(name)?.dims(), out.dims()))
    };
    let (sc, sx, sy) = (strides(b, c)?, strides(b, x)?, strides(b, yv)?);
    let program = b.program(Family::Elementwise, storage.variant())?;
    let (cl, xl, yl) = (b.input(c)?, b.input(x)?, b.input(yv)?);
    let ol = b.alloc(out_name)?;
    b.launch_1d(
        &program,
        "where_select",
        n,
        vec![
            Arg::Buf(cl),
            Arg::Buf(xl),
            Arg::Buf(yl),
            Arg::Buf(ol),
            Arg::I32(i32_arg(n, "element count")?),
            Arg::I32(out.rank() as i32),
            Arg::Int8(int8(&dims)?),
            Arg::Int8(sc),
            Arg::Int8(sx),
            Arg::Int8(sy),
        ],
    );
    Ok(())
}
