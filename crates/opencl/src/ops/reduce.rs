//! Reductions (kernels/reduce.cl): ReduceSum, ReduceMean and ReduceMax over any axes.

use super::{input, optional_input, output};
use crate::plan::StorageDefines;
use crate::plan::{i32_arg, int8, strides_of, Arg, Builder};
use crate::programs::Family;
use concord_core::op::ReduceKind;
use concord_core::shape::normalize_axes;
use concord_core::{Node, Op, OpError};

pub(super) fn build(b: &mut Builder, node: &Node) -> Result<(), OpError> {
    let (x, y) = (input(node, 0, "data")?, output(node)?);
    let (attrs, op) = match &node.op {
        Op::Reduce(ReduceKind::Sum, a) => (a, 0),
        Op::Reduce(ReduceKind::Mean, a) => (a, 1),
        Op::Reduce(ReduceKind::Max, a) => (a, 2),
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a reduction",
                other.name()
            )))
        }
    };
    let xd = b.shape(x)?.dims().to_vec();
    let axes: Vec<i64> = match (&attrs.axes, optional_input(node, 1)) {
        (Some(a), _) => a.clone(),
        (None, Some(name)) => b
            .host_value(name)
            .and_then(|t| t.to_i64_vec())
            .ok_or_else(|| OpError::Unsupported("reduction axes must be a constant".into()))?,
        (None, None) => Vec::new(),
    };
    if axes.is_empty() && attrs.noop_with_empty_axes {
        return b.alias(y, x);
    }
    let reduced: Vec<usize> = if axes.is_empty() {
        (0..xd.len()).collect()
    } else {
        normalize_axes(&axes, xd.len())?
    };
    let strides = strides_of(&xd);
    let (mut kept_dims, mut kept_strides, mut red_dims, mut red_strides) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (axis, &d) in xd.iter().enumerate() {
        if reduced.contains(&axis) {
            red_dims.push(d as i64);
            red_strides.push(strides[axis]);
        } else {
            kept_dims.push(d as i64);
            kept_strides.push(strides[axis]);
        }
    }
    let n_out: usize = kept_dims.iter().product::<i64>() as usize;
    let n_red: usize = red_dims.iter().product::<i64>() as usize;
    let variant = b.storage(b.dtype(x)?).variant();
    let program = b.program(Family::Reduce, variant)?;
    let xl = b.input(x)?;
    let yl = b.alloc(y)?;
    b.launch_1d(
        &program,
        "reduce",
        n_out,
        vec![
            Arg::Buf(xl),
            Arg::Buf(yl),
            Arg::I32(i32_arg(n_out, "output count")?),
            Arg::I32(kept_dims.len() as i32),
            Arg::Int8(int8(&kept_dims)?),
            Arg::Int8(int8(&kept_strides)?),
            Arg::I32(red_dims.len() as i32),
            Arg::Int8(int8(&red_dims)?),
            Arg::Int8(int8(&red_strides)?),
            Arg::I32(i32_arg(n_red, "reduced count")?),
            Arg::I32(op),
        ],
    );
    Ok(())
}
