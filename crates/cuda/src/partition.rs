//! [`CudaPartition`]: a partition prepared for the device — its weights uploaded once and
//! shared by every run, its kernel families compiled. A run borrows a lane (stream and
//! cuBLAS handle) of its own, so any number of threads may run the same partition at once.

use crate::device::{Device, Lane};
use crate::error::{is_sticky, CudaError};
use crate::kernels::Family;
use crate::ops::{run_node, Fail, Launcher, Value};
use crate::tensor::{self, DeviceTensor, Storage};
use concord_core::{Error, Graph, Op, OpError, PreparedPartition, ProfileSink, Target, Tensor};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// A partition ready to run on one CUDA device.
#[derive(Debug)]
pub struct CudaPartition {
    device: Arc<Device>,
    graph: Graph,
    target: Target,
    /// Initializers on the device, in the target's storage. Read-only after `new`.
    weights: HashMap<String, DeviceTensor>,
    /// Per node: the values whose last reader it is (dropped after it runs).
    last_reads: Vec<Vec<String>>,
}

impl CudaPartition {
    /// Uploads the partition's initializers and compiles the kernel families its nodes use.
    pub fn new(device: Arc<Device>, graph: &Graph, target: Target) -> Result<Self, Error> {
        let setup = |e: CudaError| e.in_partition("preparing a partition");
        let families: BTreeSet<Family> = graph
            .nodes
            .iter()
            .flat_map(|n| families_of(&n.op))
            .collect();
        for family in families {
            device
                .modules
                .warm(&device.ctx, device.arch, family)
                .map_err(setup)?;
        }
        let lane = device.take_lane().map_err(setup)?;
        let runtime: HashSet<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
        let mut weights = HashMap::new();
        for (name, t) in &graph.initializers {
            if runtime.contains(name.as_str()) {
                continue;
            }
            let storage = Storage::of(t.dtype(), crate::executor::float_storage(&target));
            let dev = tensor::upload(&lane.stream, t, storage).map_err(setup)?;
            weights.insert(name.clone(), dev);
        }
        // Runs use the weights from other streams: the uploads must be complete first.
        lane.stream
            .synchronize()
            .map_err(|e| setup(CudaError::driver("cuStreamSynchronize", e)))?;
        device.return_lane(lane);

        let outputs: HashSet<&str> = graph.outputs.iter().map(|s| s.as_str()).collect();
        let mut last: HashMap<&str, usize> = HashMap::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            for name in node.present_inputs() {
                last.insert(name, i);
            }
        }
        let mut last_reads = vec![Vec::new(); graph.nodes.len()];
        for (name, i) in last {
            if !outputs.contains(name) && !weights.contains_key(name) {
                last_reads[i].push(name.to_string());
            }
        }
        Ok(CudaPartition {
            device,
            graph: graph.clone(),
            target,
            weights,
            last_reads,
        })
    }

    fn run_on(
        &self,
        lane: &Lane,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let setup = |what: &str, e: CudaError| classify(e).in_partition(what);
        self.device.ctx.bind_to_thread().map_err(|e| {
            setup(
                "binding the context",
                CudaError::driver("cuCtxSetCurrent", e),
            )
        })?;
        let status = lane.stream.alloc_zeros::<i32>(1).map_err(|e| {
            setup(
                "allocating the status word",
                CudaError::driver("cuMemAlloc", e),
            )
        })?;
        let (status_ptr, _) = cudarc::driver::DevicePtr::device_ptr(&status, &lane.stream);
        let launcher = Launcher {
            device: &self.device,
            lane,
            status: status_ptr,
            target: &self.target,
        };

        let mut values: HashMap<String, DeviceTensor> = HashMap::new();
        for info in &self.graph.inputs {
            let t = inputs.get(&info.name).ok_or_else(|| Error::InvalidInput {
                name: info.name.clone(),
                detail: "the partition input was not given".into(),
            })?;
            if t.dtype() != info.dtype {
                return Err(Error::InvalidInput {
                    name: info.name.clone(),
                    detail: format!("expected {}, got {}", info.dtype, t.dtype()),
                });
            }
            let started = Instant::now();
            let dev = tensor::upload(
                &lane.stream,
                t,
                Storage::of(t.dtype(), crate::executor::float_storage(&self.target)),
            )
            .map_err(|e| setup("uploading an input", e))?;
            if let Some(sink) = profile {
                sink.record_transfer(&info.name, t.size_in_bytes() as u64, started.elapsed());
            }
            values.insert(info.name.clone(), dev);
        }

        for (i, node) in self.graph.nodes.iter().enumerate() {
            let started = Instant::now();
            let operands: Vec<Option<Value>> = node
                .inputs
                .iter()
                .map(|input| {
                    let name = input.as_deref()?;
                    if let Some(dev) = values.get(name) {
                        return Some(Value { dev, host: None });
                    }
                    self.weights.get(name).map(|dev| Value {
                        dev,
                        host: self.graph.initializers.get(name),
                    })
                })
                .collect();
            for (index, (name, operand)) in node.inputs.iter().zip(&operands).enumerate() {
                if let (Some(name), None) = (name, operand) {
                    return Err(Error::at_node(
                        node,
                        OpError::Unsupported(format!(
                            "input {index} `{name}` is not on the device (no producer ran)"
                        )),
                    ));
                }
            }
            let outputs = run_node(&launcher, node, &operands).map_err(|f| match f {
                Fail::Op(e) => Error::at_node(node, e),
                Fail::Cuda(e) => classify(e).at_node(node),
            })?;
            drop(operands);
            if let Some(sink) = profile {
                lane.stream.synchronize().map_err(|e| {
                    classify(CudaError::driver("cuStreamSynchronize", e)).at_node(node)
                })?;
                sink.record_on(&node.name, "cuda", started.elapsed());
            }
            for name in &self.last_reads[i] {
                values.remove(name);
            }
            for (name, t) in node.outputs.iter().zip(outputs) {
                if !name.is_empty() {
                    values.insert(name.clone(), t);
                }
            }
        }

        let mut outputs = Vec::with_capacity(self.graph.outputs.len());
        for name in &self.graph.outputs {
            if let Some(dev) = values.get(name) {
                let started = Instant::now();
                let t = tensor::download(&lane.stream, dev)
                    .map_err(|e| setup("downloading an output", e))?;
                if let Some(sink) = profile {
                    sink.record_transfer(name, t.size_in_bytes() as u64, started.elapsed());
                }
                outputs.push(t);
            } else if let Some(t) = inputs
                .get(name)
                .or_else(|| self.graph.initializers.get(name))
            {
                outputs.push(t.clone());
            } else {
                return Err(Error::DanglingOutput {
                    value: name.clone(),
                });
            }
        }
        lane.stream.synchronize().map_err(|e| {
            setup(
                "finishing the run",
                CudaError::driver("cuStreamSynchronize", e),
            )
        })?;
        self.device
            .sticky_error()
            .map_err(|e| e.in_partition("checking the context after the run"))?;
        let code = lane.stream.clone_dtoh(&status).map_err(|e| {
            setup(
                "reading the status word",
                CudaError::driver("cuMemcpyDtoH", e),
            )
        })?;
        match code.first().copied().unwrap_or(0) {
            0 => Ok(outputs),
            1 => Err(
                CudaError::Runtime("a Gather index is out of range for its axis".into())
                    .in_partition("running"),
            ),
            2 => {
                Err(CudaError::Runtime("an integer division by zero".into())
                    .in_partition("running"))
            }
            other => Err(
                CudaError::Runtime(format!("a kernel reported status {other}"))
                    .in_partition("running"),
            ),
        }
    }
}

impl PreparedPartition for CudaPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let lane = self
            .device
            .take_lane()
            .map_err(|e| classify(e).in_partition("taking a stream"))?;
        let result = self.run_on(&lane, inputs, profile);
        if result.is_ok() {
            self.device.return_lane(lane);
        } else {
            // A failed run may have left work or an error on the stream; drop it rather
            // than hand it to the next run.
            drop(lane);
        }
        result
    }
}

/// A driver error that leaves the context unusable becomes [`CudaError::Sticky`].
fn classify(e: CudaError) -> CudaError {
    match e {
        CudaError::Driver { call, name } if is_sticky(&name) => CudaError::Sticky { call, name },
        other => other,
    }
}

/// The kernel families a node's launch code uses.
pub fn families_of(op: &Op) -> Vec<Family> {
    use Family::*;
    match op {
        Op::Conv(_) => vec![Pool, Elementwise],
        Op::Gemm(_) | Op::MatMul => vec![Movement],
        Op::Softmax { .. } => vec![Norm],
        Op::LayerNormalization { .. } => vec![Norm, Movement],
        Op::MaxPool(_) | Op::AveragePool(_) => vec![Pool],
        Op::GlobalAveragePool | Op::ReduceMean(_) | Op::ReduceSum(_) | Op::ReduceMax(_) => {
            vec![Reduce]
        }
        Op::Resize(_) => vec![Resize],
        Op::Add
        | Op::Sub
        | Op::Mul
        | Op::Div
        | Op::Pow
        | Op::Mod { .. }
        | Op::Equal
        | Op::Sqrt
        | Op::Exp
        | Op::Neg
        | Op::Abs
        | Op::Erf
        | Op::Relu
        | Op::Sigmoid
        | Op::Tanh
        | Op::HardSwish
        | Op::LeakyRelu { .. }
        | Op::HardSigmoid { .. }
        | Op::Clip
        | Op::Where
        | Op::BatchNormalization { .. } => vec![Elementwise],
        Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Squeeze
        | Op::Unsqueeze
        | Op::Identity
        | Op::Dropout
        | Op::Shape { .. }
        | Op::Constant { .. } => Vec::new(),
        Op::Concat { .. }
        | Op::Split { .. }
        | Op::Slice
        | Op::Gather { .. }
        | Op::Transpose { .. }
        | Op::Cast { .. }
        | Op::Pad { .. }
        | Op::Expand => vec![Movement],
    }
}
