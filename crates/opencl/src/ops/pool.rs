//! Pooling (kernels/pool.cl): MaxPool and AveragePool over 1-D and 2-D windows, and
//! GlobalAveragePool.

use super::linear::{as_2d, resolve_axes};
use super::{input, output};
use crate::plan::StorageDefines;
use crate::plan::{i32_arg, int8, window_local, Arg, Builder};
use crate::programs::Family;
use concord_core::op::Pool;
use concord_core::{Graph, Node, Op, OpError};

pub(super) fn check(_graph: &Graph, _node: &Node, attrs: &Pool) -> Result<(), String> {
    if attrs.kernel_shape.len() > 2 {
        return Err(format!(
            "{}-D pooling is not implemented (1-D and 2-D are)",
            attrs.kernel_shape.len()
        ));
    }
    Ok(())
}

pub(super) fn build(b: &mut Builder, node: &Node) -> Result<(), OpError> {
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
