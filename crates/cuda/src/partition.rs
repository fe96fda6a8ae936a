//! [`CudaPartition`]: a partition prepared for the device — its weights uploaded once and
//! shared by every run, its kernel families compiled, its core [`Schedule`] made. A run
//! walks the schedule (which resolves operands and frees each value after its last reader)
//! and supplies only the node launches. A run borrows a lane (stream, cuBLAS handle,
//! staging memory) of its own from the device's [`crate::lanes::LanePool`], so any number
//! of threads may run the same partition at once; how the run ends decides whether the
//! lane is reused.

use crate::device::{Device, Lane};
use crate::error::CudaError;
use crate::kernels::Family;
use crate::lanes::{DeviceFailure, RunError};
use crate::ops::{run_node, Fail, Launcher, Value};
use crate::tensor::{self, DeviceTensor, Place, Storage};
use concord_core::{
    Error, Graph, MemoryBudget, PreparedPartition, ProfileSink, Schedule, Target, Tensor,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// A partition ready to run on one CUDA device.
#[derive(Debug)]
pub struct CudaPartition {
    graph: Graph,
    target: Target,
    /// Initializers on the device, in the target's storage. Read-only after `new`.
    /// Declared before `device`: fields drop in order, and the weights are freed on the
    /// device's upload stream, which must still exist (this may hold the last reference
    /// to the device).
    weights: HashMap<String, DeviceTensor>,
    /// Run order, value slots and free points; a run walks it.
    schedule: Schedule,
    device: Arc<Device>,
    budget: MemoryBudget,
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
    pub fn new(
        device: Arc<Device>,
        graph: &Graph,
        target: Target,
        budget: MemoryBudget,
    ) -> Result<Self, Error> {
        let setup = |e: CudaError| e.in_partition("preparing a partition");
        if let Some(lost) = device.lost() {
            return Err(setup(lost));
        }
        crate::driver::bind(&device.ctx).map_err(setup)?;
        // Every family is compiled once per executor (the cache lives in `device.modules`),
        // so a kernel that does not compile, or does not load, fails here, when the net is
        // built, whichever ops the partition has; no per-op list of families to keep in
        // step.
        for family in Family::ALL {
            device
                .modules
                .warm(&device.ctx, device.code, family)
                .map_err(setup)?;
        }
        let runtime: HashSet<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
        let mut weights = HashMap::new();
        {
            // Weights are uploaded (from pageable memory: once, at prepare) and later freed
            // on the device's upload stream, which outlives them.
            let uploads = device.uploads().map_err(setup)?;
            let place = Place {
                stream: &uploads,
                allocation: device.allocation,
                faults: None,
                staging: None,
                budget,
            };
            for (name, t) in &graph.initializers {
                if runtime.contains(name.as_str()) {
                    continue;
                }
                let storage = Storage::of(t.dtype(), crate::executor::float_storage(&target));
                let dev = tensor::upload(&place, t, storage).map_err(setup)?;
                weights.insert(name.clone(), dev);
            }
            // Runs use the weights from other streams: the uploads must be complete first.
            uploads.synchronize().map_err(setup)?;
        }

        let schedule = Schedule::for_graph(graph)?;
        Ok(CudaPartition {
            device,
            graph: graph.clone(),
            target,
            weights,
            schedule,
            budget,
        })
    }

    /// One run on `lane`. Request errors (inputs, operands, a kernel's status word) and
    /// device errors are told apart, so the pool keeps a lane whose run failed only on its
    /// request.
    fn run_on(
        &self,
        lane: &Lane,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, RunError> {
        crate::driver::bind(&self.device.ctx)
            .map_err(|e| RunError::device(e, "binding the context"))?;
        // Page-locked regions handed out to the previous run on this lane are free again:
        // the pool hands out a lane only once its stream is idle.
        lane.staging
            .lock()
            .map_err(|_| RunError::device(CudaError::Poisoned, "taking the staging memory"))?
            .reset();
        let place = Place {
            stream: &lane.stream,
            allocation: self.device.allocation,
            faults: Some(&lane.faults),
            staging: Some(&lane.staging),
            budget: self.budget,
        };
        // The status word: an int kernels set (first error wins) on operands only visible
        // on the device, such as an out-of-range Gather index.
        let status = lane
            .stream
            .alloc(4, self.device.allocation, Some(&lane.faults))
            .and_then(|word| lane.stream.zero(&word).map(|()| word))
            .map_err(|e| RunError::device(e, "allocating the status word"))?;
        let launcher = Launcher {
            device: &self.device,
            lane,
            status: status.ptr(),
            target: &self.target,
            budget: self.budget,
        };
        // Which failures are the request's: the walk's own errors (inputs, operands) and
        // those of run_node that are operand errors. Device errors are kept aside with
        // their CudaError, since the walk's error type is the contract's.
        let device_error: std::cell::RefCell<Option<CudaError>> = Default::default();
        let device_failed = |e: CudaError| {
            device_error.borrow_mut().get_or_insert(e.clone());
            e
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
                    &place,
                    t,
                    Storage::of(t.dtype(), crate::executor::float_storage(&self.target)),
                )
                .map_err(|e| device_failed(e).in_partition("uploading an input"))?;
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
                    CudaError::Runtime(format!("no node {}", step.node))
                        .in_partition("walking the schedule")
                })?;
                let started = Instant::now();
                let operands: Vec<Option<Value>> = operands
                    .iter()
                    .map(|operand| operand.map(RunValue::value))
                    .collect();
                let outputs = run_node(&launcher, node, &operands).map_err(|f| match f {
                    Fail::Op(e) => Error::at_node(node, e),
                    Fail::Cuda(e) => crate::error::classify(device_failed(e)).at_node(node),
                })?;
                drop(operands);
                if let Some(sink) = profile {
                    lane.stream
                        .synchronize()
                        .map_err(|e| crate::error::classify(device_failed(e)).at_node(node))?;
                    sink.record_on(&node.name, "cuda", started.elapsed());
                }
                Ok(outputs.into_iter().map(RunValue::Run).collect())
            },
        );
        let split = |error: Error| match device_error.borrow_mut().take() {
            Some(cause) => RunError::Device(Box::new(DeviceFailure {
                error,
                cause: crate::error::classify(cause),
            })),
            None => RunError::Request(error),
        };
        let walked = walked.map_err(split)?;

        let mut outputs = Vec::with_capacity(walked.len());
        for (name, value) in self.graph.outputs.iter().zip(walked) {
            match value {
                RunValue::Run(dev) => {
                    let started = Instant::now();
                    let t = tensor::download(&lane.stream, &dev)
                        .map_err(|e| RunError::device(e, "downloading an output"))?;
                    if let Some(sink) = profile {
                        sink.record_transfer(name, t.size_in_bytes() as u64, started.elapsed());
                    }
                    outputs.push(t);
                }
                RunValue::Weight(_, Some(host)) => outputs.push(host.clone()),
                RunValue::Weight(_, None) => {
                    return Err(RunError::Request(Error::DanglingOutput {
                        value: name.clone(),
                    }))
                }
            }
        }
        let mut word = [0u8; 4];
        lane.stream
            .copy_to_host(&mut word, status.ptr())
            .map_err(|e| RunError::device(e, "reading the status word"))?;
        // Reading the status word synchronised the stream: every kernel of the run has
        // finished, and a fault would have been returned by name above. CUDA devices are
        // little-endian.
        let request = |what: &str| {
            RunError::Request(CudaError::Runtime(what.to_string()).in_partition("running"))
        };
        match i32::from_le_bytes(word) {
            0 => Ok(outputs),
            1 => Err(request("a Gather index is out of range for its axis")),
            2 => Err(request("an integer division by zero")),
            other => Err(request(&format!("a kernel reported status {other}"))),
        }
    }
}

impl PreparedPartition for CudaPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        self.device
            .lanes()
            .run("taking a stream", |lane| self.run_on(lane, inputs, profile))
            .map_err(RunError::into_error)
    }
}
