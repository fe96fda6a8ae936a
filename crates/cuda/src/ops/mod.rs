//! Routes each node to its family's launch code, and what every family shares: the
//! [`Launcher`] (device, stream, status word), operand access, output allocation from shape
//! inference, and the [`Strided`] iteration space the kernels take.

mod elementwise;
mod linear;
mod movement;
mod norm;
pub(crate) mod pool;
mod reduce;
mod resize;

use crate::device::{Device, Lane};
use crate::driver::KernelArgs;
use crate::error::CudaError;
use crate::kernels::Family;
use crate::tensor::StorageSuffix;
use crate::tensor::{self, DeviceTensor, Place, Storage};
use concord_core::infer::{infer_op, OutputFact, ValueFact};
use concord_core::op::Family as OpFamily;
use concord_core::op::ReduceKind;
use concord_core::{DType, MemoryBudget, Node, Op, OpError, Shape, Target, Tensor};
use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig};

/// The most axes a kernel's iteration space has (kernels/prelude.cu's MAX_RANK).
pub const MAX_RANK: usize = 8;

/// Threads per block of the row kernels (kernels/prelude.cu's REDUCE_THREADS).
pub const REDUCE_THREADS: u32 = 256;

/// Everything a family needs to launch work for one node of one run.
pub struct Launcher<'a> {
    pub device: &'a Device,
    pub lane: &'a Lane,
    /// Device address of the run's status word (an i32 kernels set on bad operands).
    pub status: u64,
    pub target: &'a Target,
    /// The net's memory budget, which every output and scratch allocation is checked against.
    pub budget: MemoryBudget,
}

/// One operand of a node: always on the device; also on the host when it is a constant of
/// the partition (an initializer), for operands that decide shapes or parameters.
#[derive(Clone, Copy, Debug)]
pub struct Value<'a> {
    pub dev: &'a DeviceTensor,
    pub host: Option<&'a Tensor>,
}

/// Why one node failed: its operands (as the reference would say) or the device.
#[derive(Debug)]
pub enum Fail {
    Op(OpError),
    Cuda(CudaError),
}

/// A row-major iteration space of up to [`MAX_RANK`] axes with three stride sets, laid out
/// exactly as `struct Strided` in kernels/prelude.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Strided {
    pub rank: i64,
    pub n: i64,
    pub dims: [i64; MAX_RANK],
    pub a: [i64; MAX_RANK],
    pub b: [i64; MAX_RANK],
    pub c: [i64; MAX_RANK],
    pub a_offset: i64,
    pub b_offset: i64,
    pub c_offset: i64,
}

// SAFETY: Strided is #[repr(C)], made only of i64 fields, and matches the kernel's struct
// field for field, so its bytes are a valid kernel parameter.
unsafe impl DeviceRepr for Strided {}

impl From<OpError> for Fail {
    fn from(e: OpError) -> Self {
        Fail::Op(e)
    }
}

impl From<CudaError> for Fail {
    fn from(e: CudaError) -> Self {
        Fail::Cuda(e)
    }
}

pub type OpResult<T> = Result<T, Fail>;

/// Runs one node on the device, returning its outputs.
pub fn run_node(
    l: &Launcher,
    node: &Node,
    inputs: &[Option<Value>],
) -> OpResult<Vec<DeviceTensor>> {
    let facts = infer(node, inputs)?;
    let one = |t: DeviceTensor| Ok(vec![t]);
    match &node.op {
        Op::Conv(attrs) => one(linear::conv(l, attrs, inputs, &facts)?),
        Op::Gemm(attrs) => one(linear::gemm(l, attrs, inputs, &facts)?),
        Op::MatMul => one(linear::matmul(l, inputs, &facts)?),
        Op::Binary(_) => one(elementwise::binary(l, &node.op, inputs, &facts)?),
        Op::Unary(_) | Op::Clip => one(elementwise::unary(l, &node.op, inputs, &facts)?),
        Op::Where => one(elementwise::select(l, inputs, &facts)?),
        Op::BatchNormalization { epsilon } => {
            one(elementwise::batch_norm(l, *epsilon, inputs, &facts)?)
        }
        Op::Softmax { axis } => one(norm::softmax(l, *axis, inputs, &facts)?),
        Op::LayerNormalization { axis, epsilon } => {
            one(norm::layer_norm(l, *axis, *epsilon, inputs, &facts)?)
        }
        Op::MaxPool(attrs) => one(pool::pool(l, attrs, false, inputs, &facts)?),
        Op::AveragePool(attrs) => one(pool::pool(l, attrs, true, inputs, &facts)?),
        Op::GlobalAveragePool => one(reduce::global_average_pool(l, inputs, &facts)?),
        Op::Reduce(ReduceKind::Mean | ReduceKind::Sum | ReduceKind::Max, attrs) => {
            one(reduce::reduce(l, &node.op, attrs, inputs, &facts)?)
        }
        Op::Resize(attrs) => one(resize::resize(l, attrs, inputs, &facts)?),
        op if op.family() == OpFamily::Movement => movement::run(l, op, inputs, &facts),
        // `supports` declines every op without a kernel, so this is a planner bug.
        other => Err(Fail::Op(OpError::Unsupported(format!(
            "{} has no CUDA kernel",
            other.name()
        )))),
    }
}

/// The output types of a node from its concrete operands, by the same shape inference the
/// planner and the reference use: one source of truth for output shapes and operand checks.
fn infer(node: &Node, inputs: &[Option<Value>]) -> OpResult<Vec<(DType, Shape)>> {
    let dims: Vec<Option<Vec<concord_core::Dim>>> = inputs
        .iter()
        .map(|v| v.map(|v| v.dev.shape.to_sym()))
        .collect();
    let facts: Vec<Option<ValueFact>> = inputs
        .iter()
        .zip(&dims)
        .map(|(v, d)| match (v, d) {
            (Some(v), Some(d)) => Some(ValueFact {
                dtype: v.dev.dtype,
                shape: d,
                value: v.host,
            }),
            _ => None,
        })
        .collect();
    let outputs = infer_op(&node.op, &facts, node.outputs.len())?;
    outputs
        .into_iter()
        .map(|OutputFact { dtype, shape }| {
            Shape::from_sym(&shape).map(|s| (dtype, s)).ok_or_else(|| {
                Fail::Op(OpError::Shape(format!(
                    "{}: the output shape is not known from the operands' shapes",
                    node.op.name()
                )))
            })
        })
        .collect()
}

impl<'a> Launcher<'a> {
    /// A kernel of `family`, compiled and loaded on first use.
    pub fn function(&self, family: Family, kernel: &str) -> Result<CudaFunction, CudaError> {
        self.device
            .modules
            .function(&self.device.ctx, self.device.code, family, kernel)
    }

    /// Where this run's memory comes from: its lane's stream, staging memory and faults.
    pub fn place(&self) -> Place<'_> {
        Place {
            stream: &self.lane.stream,
            allocation: self.device.allocation,
            faults: Some(&self.lane.faults),
            staging: Some(&self.lane.staging),
            budget: self.budget,
        }
    }

    /// Allocates an output of `dtype` and `shape` in this target's storage.
    pub fn output(&self, dtype: DType, shape: Shape) -> Result<DeviceTensor, CudaError> {
        tensor::alloc(
            &self.place(),
            Storage::of(dtype, crate::executor::float_storage(self.target)),
            dtype,
            shape,
        )
    }

    /// Allocates a scratch buffer of `storage` elements.
    pub fn scratch(
        &self,
        storage: Storage,
        dtype: DType,
        shape: Shape,
    ) -> Result<DeviceTensor, CudaError> {
        tensor::alloc(&self.place(), storage, dtype, shape)
    }

    /// Uploads a small host tensor (taps, indices) in `storage` layout on this run's stream.
    pub fn upload(&self, t: &Tensor, storage: Storage) -> Result<DeviceTensor, CudaError> {
        tensor::upload(&self.place(), t, storage)
    }

    /// Launches `function` with `args` pushed by the closure; `n` sizes a grid-stride grid.
    /// Nothing is launched for an empty iteration space.
    pub fn launch<'f>(
        &'f self,
        function: &'f CudaFunction,
        cfg: LaunchConfig,
        push: impl FnOnce(&mut KernelArgs<'f>),
    ) -> Result<(), CudaError> {
        if cfg.grid_dim.0 == 0 {
            return Ok(());
        }
        let mut args = KernelArgs::new();
        push(&mut args);
        // SAFETY: every argument pushed matches the kernel's parameter list (each call site
        // mirrors its kernel's signature in kernels/*.cu), device pointers come from live
        // buffers the caller keeps until the stream is synchronised, and the sizes passed
        // keep every access inside those buffers.
        unsafe { self.lane.stream.launch(function, cfg, &mut args) }
    }
}

/// A grid-stride launch over `n` elements: 256 threads, at most 65535 · 16 blocks.
pub fn grid(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(256).min(65_535 * 16) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One block of [`REDUCE_THREADS`] per row (grid-striding past 65535 rows).
pub fn rows_grid(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.min(65_535) as u32, 1, 1),
        block_dim: (REDUCE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The device operand at `index`, or a MissingInput error.
pub fn required<'v>(
    inputs: &[Option<Value<'v>>],
    index: usize,
    name: &'static str,
) -> OpResult<Value<'v>> {
    inputs
        .get(index)
        .copied()
        .flatten()
        .ok_or(Fail::Op(OpError::MissingInput { index, name }))
}

/// The operand at `index` if present.
pub fn optional<'v>(inputs: &[Option<Value<'v>>], index: usize) -> Option<Value<'v>> {
    inputs.get(index).copied().flatten()
}

/// The host value of an operand that must be a constant of the partition.
pub fn constant<'v>(value: Value<'v>, index: usize, name: &'static str) -> OpResult<&'v Tensor> {
    value
        .host
        .ok_or(Fail::Op(OpError::NotConstant { index, name }))
}

/// An i64 constant operand as a list.
pub fn constant_ints(value: Value, index: usize, name: &'static str) -> OpResult<Vec<i64>> {
    let t = constant(value, index, name)?;
    t.to_i64_vec().ok_or(Fail::Op(OpError::DType {
        index,
        name,
        expected: "i64".into(),
        actual: t.dtype(),
    }))
}

/// The single inferred output type.
pub fn single(facts: &[(DType, Shape)]) -> OpResult<(DType, Shape)> {
    facts
        .first()
        .cloned()
        .ok_or_else(|| Fail::Op(OpError::Shape("the node declares no output".into())))
}

/// Row-major strides of `dims`.
pub fn contiguous(dims: &[usize]) -> Vec<i64> {
    let mut strides = vec![1i64; dims.len()];
    for axis in (0..dims.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * dims[axis + 1] as i64;
    }
    strides
}

/// The strides that read an input of shape `input` broadcast to `out` (right-aligned,
/// 0 on broadcast axes).
pub fn broadcast_strides(input: &[usize], out: &[usize]) -> Vec<i64> {
    let own = contiguous(input);
    let offset = out.len().saturating_sub(input.len());
    (0..out.len())
        .map(|axis| {
            if axis < offset {
                0
            } else {
                let i = axis - offset;
                if input[i] == 1 && out[axis] != 1 {
                    0
                } else {
                    own[i]
                }
            }
        })
        .collect()
}

impl Strided {
    /// An iteration space over `dims` with stride sets a, b, c (each `dims.len()` long).
    pub fn new(dims: &[usize], a: &[i64], b: &[i64], c: &[i64]) -> OpResult<Strided> {
        if dims.len() > MAX_RANK {
            return Err(Fail::Op(OpError::Unsupported(format!(
                "the CUDA kernels iterate over at most {MAX_RANK} axes; this operand has {} ({dims:?})",
                dims.len()
            ))));
        }
        let mut s = Strided {
            rank: dims.len() as i64,
            n: dims.iter().product::<usize>() as i64,
            ..Strided::default()
        };
        for (axis, &d) in dims.iter().enumerate() {
            s.dims[axis] = d as i64;
            s.a[axis] = a.get(axis).copied().unwrap_or(0);
            s.b[axis] = b.get(axis).copied().unwrap_or(0);
            s.c[axis] = c.get(axis).copied().unwrap_or(0);
        }
        Ok(s)
    }
}

/// A device-to-device copy of `src` (of shape `dims`, read with strides `read` from
/// `read_offset`) into `dst` (written with strides `write` from `write_offset`).
#[allow(clippy::too_many_arguments)]
pub fn strided_copy(
    l: &Launcher,
    src: &DeviceTensor,
    dst: &DeviceTensor,
    dims: &[usize],
    read: &[i64],
    read_offset: i64,
    write: &[i64],
    write_offset: i64,
) -> OpResult<()> {
    let mut s = Strided::new(dims, read, &[], write)?;
    s.a_offset = read_offset;
    s.c_offset = write_offset;
    let f = l.function(Family::Movement, &format!("copy_{}", src.storage.bits()))?;
    let n = s.n as usize;
    l.launch(&f, grid(n), |a| {
        a.arg(&s).arg(&src.ptr).arg(&dst.ptr);
    })?;
    Ok(())
}

/// `t` broadcast (or copied) into a new contiguous tensor of shape `out`.
pub fn expand_to(l: &Launcher, t: &DeviceTensor, out: &Shape) -> OpResult<DeviceTensor> {
    let y = l.scratch(t.storage, t.dtype, out.clone())?;
    let read = broadcast_strides(t.shape.dims(), out.dims());
    strided_copy(l, t, &y, out.dims(), &read, 0, &contiguous(out.dims()), 0)?;
    Ok(y)
}

/// Checks that an operand is in float storage (f32 or f16).
pub fn expect_float(v: Value, index: usize, name: &'static str) -> OpResult<()> {
    if v.dev.storage.is_float() {
        Ok(())
    } else {
        Err(Fail::Op(OpError::DType {
            index,
            name,
            expected: "f32 or f16".into(),
            actual: v.dev.dtype,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_row_major_and_zero_on_broadcast_axes() {
        assert_eq!(contiguous(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous(&[]), Vec::<i64>::new());
        // [3, 1] against [2, 3, 4]: the missing leading axis and the size-1 axis read 0.
        assert_eq!(broadcast_strides(&[3, 1], &[2, 3, 4]), vec![0, 1, 0]);
        // A same-shape operand keeps its own strides.
        assert_eq!(broadcast_strides(&[2, 3], &[2, 3]), vec![3, 1]);
    }

    #[test]
    fn iteration_spaces_past_eight_axes_are_refused() {
        let dims = [1usize; 9];
        assert!(matches!(
            Strided::new(&dims, &[], &[], &[]),
            Err(Fail::Op(OpError::Unsupported(_)))
        ));
        let s = Strided::new(&[2, 5], &[5, 1], &[0, 1], &[5, 1]).expect("fits");
        assert_eq!((s.rank, s.n), (2, 10));
        assert_eq!(s.b[..2], [0, 1]);
    }

    #[test]
    fn grids_cover_every_element_and_launch_nothing_for_none() {
        assert_eq!(grid(0).grid_dim.0, 0);
        assert_eq!(grid(257).grid_dim.0, 2);
        assert_eq!(grid(usize::MAX / 2).grid_dim.0, 65_535 * 16);
        assert_eq!(rows_grid(3).block_dim.0, REDUCE_THREADS);
    }
}
