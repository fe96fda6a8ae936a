//! [`CudaPartition`]: a partition prepared for the device — its weights uploaded once and
//! shared by every run, its kernel families compiled, its core [`Schedule`] made. A run
//! walks the schedule (which resolves operands and frees each value after its last reader)
//! and supplies only the node launches. A run borrows a lane (stream and
//! cuBLAS handle) of its own, so any number of threads may run the same partition at once.

use crate::device::{Device, Lane};
use crate::error::{is_sticky, CudaError};
use crate::kernels::Family;
use crate::ops::{run_node, Fail, Launcher, Value};
use crate::tensor::{self, DeviceTensor, Storage};
use concord_core::{Error, Graph, PreparedPartition, ProfileSink, Schedule, Target, Tensor};
use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// Run order, value slots and free points; a run walks it.
    schedule: Schedule,
}

/// A value during one run: uploaded or computed by it, or a weight every run shares (with
/// its host copy, which kernels that need a constant operand read).
enum RunValue<'p> {
    Run(DeviceTensor),
    Weight(&'p DeviceTensor, Option<&'p Tensor>),
}

impl RunValue<'_> {
    fn value(&self) -> Value<'_> {
        match self {
            RunValue::Run(dev) => Value { dev, host: None },
            RunValue::Weight(dev, host) => Value { dev, host: *host },
        }
    }
}

impl CudaPartition {
    /// Uploads the partition's initializers and compiles the kernel families its nodes use.
    pub fn new(device: Arc<Device>, graph: &Graph, target: Target) -> Result<Self, Error> {
        let setup = |e: CudaError| e.in_partition("preparing a partition");
        // Every family is compiled once per executor (the cache lives in `device.modules`),
        // so a kernel that does not compile fails here, when the net is built, whichever
        // ops the partition has; no per-op list of families to keep in step.
        for family in Family::ALL {
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

        let schedule = Schedule::for_graph(graph)?;
        Ok(CudaPartition {
            device,
            graph: graph.clone(),
            target,
            weights,
            schedule,
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

        let walked = self.schedule.walk(
            |k, name| {
                let info = self
                    .graph
                    .inputs
                    .get(k)
                    .ok_or_else(|| Error::InvalidInput {
                        name: name.to_string(),
                        detail: "the partition has no such input".into(),
                    })?;
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
                Ok(Some(RunValue::Run(dev)))
            },
            |name| {
                self.weights
                    .get(name)
                    .map(|dev| RunValue::Weight(dev, self.graph.initializers.get(name)))
            },
            |step, operands| {
                let node = self.graph.nodes.get(step.node).ok_or_else(|| {
                    setup(
                        "walking the schedule",
                        CudaError::Runtime(format!("no node {}", step.node)),
                    )
                })?;
                let started = Instant::now();
                let operands: Vec<Option<Value>> = operands
                    .iter()
                    .map(|operand| operand.map(RunValue::value))
                    .collect();
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
                Ok(outputs.into_iter().map(RunValue::Run).collect())
            },
        )?;

        let mut outputs = Vec::with_capacity(walked.len());
        for (name, value) in self.graph.outputs.iter().zip(walked) {
            match value {
                RunValue::Run(dev) => {
                    let started = Instant::now();
                    let t = tensor::download(&lane.stream, &dev)
                        .map_err(|e| setup("downloading an output", e))?;
                    if let Some(sink) = profile {
                        sink.record_transfer(name, t.size_in_bytes() as u64, started.elapsed());
                    }
                    outputs.push(t);
                }
                RunValue::Weight(_, Some(host)) => outputs.push(host.clone()),
                RunValue::Weight(_, None) => {
                    return Err(Error::DanglingOutput {
                        value: name.clone(),
                    })
                }
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
