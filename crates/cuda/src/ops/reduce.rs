//! ReduceSum, ReduceMean, ReduceMax over any axes, and GlobalAveragePool
//! (kernels/reduce.cu).

use super::{
    constant_ints, contiguous, expect_float, optional, required, rows_grid, single, Fail, Launcher,
    OpResult, Strided, Value,
};
use crate::kernels::Family;
use crate::tensor::DeviceTensor;
use crate::tensor::StorageSuffix;
use concord_core::op::{Reduce, ReduceKind};
use concord_core::shape::normalize_axes;
use concord_core::{DType, Op, OpError, Shape};
use cudarc::driver::PushKernelArg;

/// Reduction kinds of kernels/reduce.cu (R_*).
const SUM: i32 = 0;
const MEAN: i32 = 1;
const MAX: i32 = 2;

pub fn reduce(
    l: &Launcher,
    op: &Op,
    attrs: &Reduce,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "data")?;
    expect_float(x, 0, "data")?;
    let kind = match op {
        Op::Reduce(ReduceKind::Sum, _) => SUM,
        Op::Reduce(ReduceKind::Mean, _) => MEAN,
        _ => MAX,
    };
    let axes = match (&attrs.axes, optional(inputs, 1)) {
        (_, Some(v)) => constant_ints(v, 1, "axes")?,
        (Some(a), None) => a.clone(),
        (None, None) => Vec::new(),
    };
    let (dtype, shape) = single(facts)?;
    if axes.is_empty() && attrs.noop_with_empty_axes {
        return Ok(x.dev.reshaped(shape));
    }
    let rank = x.dev.shape.rank();
    let reduced: Vec<bool> = if axes.is_empty() {
        vec![true; rank]
    } else {
        let normal = normalize_axes(&axes, rank)?;
        (0..rank).map(|a| normal.contains(&a)).collect()
    };
    let y = l.output(dtype, shape)?;
    launch_reduce(l, x.dev, &y, &reduced, kind)?;
    Ok(y)
}

/// The mean of each (batch, channel) plane.
pub fn global_average_pool(
    l: &Launcher,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "X")?;
    expect_float(x, 0, "X")?;
    let rank = x.dev.shape.rank();
    if rank < 2 || x.dev.shape.dims()[2..].iter().product::<usize>() == 0 {
        return Err(Fail::Op(OpError::Shape(format!(
            "GlobalAveragePool needs X (N, C, spatial…) with a non-empty spatial volume, got {}",
            x.dev.shape
        ))));
    }
    let reduced: Vec<bool> = (0..rank).map(|a| a >= 2).collect();
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    launch_reduce(l, x.dev, &y, &reduced, MEAN)?;
    Ok(y)
}

fn launch_reduce(
    l: &Launcher,
    x: &DeviceTensor,
    y: &DeviceTensor,
    reduced: &[bool],
    kind: i32,
) -> OpResult<()> {
    let dims = x.shape.dims();
    let own = contiguous(dims);
    let pick = |want: bool| -> (Vec<usize>, Vec<i64>) {
        dims.iter()
            .zip(&own)
            .zip(reduced)
            .filter(|(_, &r)| r == want)
            .map(|((&d, &s), _)| (d, s))
            .unzip()
    };
    let (kept_dims, kept_strides) = pick(false);
    let (red_dims, red_strides) = pick(true);
    let kept = Strided::new(&kept_dims, &kept_strides, &[], &[])?;
    let red = Strided::new(&red_dims, &red_strides, &[], &[])?;
    let f = l.function(Family::Reduce, &format!("reduce_{}", x.storage.suffix()))?;
    l.launch(&f, rows_grid(kept.n as usize), |a| {
        a.arg(&kept).arg(&red).arg(&kind).arg(&x.ptr).arg(&y.ptr);
    })?;
    Ok(())
}
