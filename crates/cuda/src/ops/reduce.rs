//! ReduceSum, ReduceMean, ReduceMax over any axes, and GlobalAveragePool
//! (kernels/reduce.cu).

use super::{
    constant_ints, contiguous, expect_float, grid, optional, required, rows_grid, single, Fail,
    Launcher, OpResult, Strided, Value,
};
use crate::kernels::Family;
use crate::tensor::DeviceTensor;
use crate::tensor::StorageSuffix;
use concord_core::op::{Reduce, ReduceKind};
use concord_core::shape::normalize_axes;
use concord_core::{DType, Op, OpError, Shape};

/// How a reduction is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceLaunch {
    /// `reduce_*`: a block of REDUCE_THREADS threads per output, reducing in shared memory.
    BlockPerOutput,
    /// `reduce_small_*`: a thread per output, looping over its few values.
    ThreadPerOutput,
}

/// The most values per output that a thread reduces alone: a warp's worth. Past it, a
/// block per output splits the work; below it, that block would leave at least seven of
/// its eight warps idle and wait at eight barriers for a few additions.
pub const SMALL_REDUCTION: usize = 32;

/// How to launch a reduction of `reduced` values into each output.
pub fn launch_kind(reduced: usize) -> ReduceLaunch {
    if reduced <= SMALL_REDUCTION {
        ReduceLaunch::ThreadPerOutput
    } else {
        ReduceLaunch::BlockPerOutput
    }
}

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
    let (name, cfg) = match launch_kind(red.n as usize) {
        ReduceLaunch::ThreadPerOutput => ("reduce_small", grid(kept.n as usize)),
        ReduceLaunch::BlockPerOutput => ("reduce", rows_grid(kept.n as usize)),
    };
    let f = l.function(Family::Reduce, &format!("{name}_{}", x.storage.suffix()))?;
    l.launch(&f, cfg, |a| {
        a.arg(&kept).arg(&red).arg(&kind).arg(&x.ptr).arg(&y.ptr);
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_values_per_output_take_a_thread_each_and_many_a_block() {
        // GlobalAveragePool of a 7x7 map reduces 49 values: a block. ReduceSum over a
        // channel axis of 3, or a 2x2 window, or nothing at all: a thread.
        assert_eq!(launch_kind(49), ReduceLaunch::BlockPerOutput);
        assert_eq!(
            launch_kind(SMALL_REDUCTION + 1),
            ReduceLaunch::BlockPerOutput
        );
        assert_eq!(launch_kind(SMALL_REDUCTION), ReduceLaunch::ThreadPerOutput);
        assert_eq!(launch_kind(3), ReduceLaunch::ThreadPerOutput);
        assert_eq!(launch_kind(0), ReduceLaunch::ThreadPerOutput);
    }
}
