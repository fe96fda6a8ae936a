//! [`OpenClPartition`]: a prepared partition. Prepare fuses, schedules the fused nodes (a
//! core [`Schedule`], whose free points release device slots while the plan is built),
//! uploads the weights and, when every input shape is fixed, builds the execution plan and
//! one workspace, so the first
//! forward only runs. `run(&self)` takes a workspace from the plan's pool (making one when
//! every workspace is busy), enqueues the uploads, the kernels and the downloads on the
//! workspace's own queue without waiting between them, waits once, and gives the workspace
//! back.

use crate::cl::{as_bytes, as_bytes_mut, ClError, Event, Memory, Scope};
use crate::error::{device_error, OpenClError};
use crate::executor::Runtime;
use crate::fuse::{fuse, FusedNode};
use crate::ops;
use crate::plan::{
    shape_key, to_storage_bytes, Builder, ConcatPart, ExecPlan, InputSpec, Loc, NodeSteps,
    OutputSpec, Storage, WeightStore, Workspace,
};
use concord_core::infer::{infer_op, ValueFact};
use concord_core::{
    DType, Error, Graph, MemoryBudget, Op, OpError, PreparedPartition, ProfileSink, Schedule,
    Shape, StepValues, Target, Tensor, TensorData,
};
use half::f16;
use half::slice::HalfFloatSliceExt;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A partition prepared for the OpenCL device.
#[derive(Debug)]
pub struct OpenClPartition {
    runtime: Arc<Runtime>,
    graph: Graph,
    nodes: Vec<FusedNode>,
    /// The fused nodes' schedule: a fused node also reads its residual, so that value lives
    /// until the fused node has run.
    schedule: Schedule,
    target: Target,
    weights: WeightStore,
    /// Execution plans by input shapes.
    plans: Mutex<HashMap<Vec<Vec<usize>>, Arc<ExecPlan>>>,
    /// Every weight upload and device buffer is checked against it.
    budget: MemoryBudget,
}

impl OpenClPartition {
    pub fn new(
        runtime: Arc<Runtime>,
        partition: &Graph,
        target: Target,
        budget: MemoryBudget,
    ) -> Result<Self, Error> {
        let mut graph = partition.clone();
        let mut nodes = fuse(&mut graph);
        if let Some(fault) = runtime.options.planted_fusion_fault {
            crate::fuse::plant(&mut nodes, fault);
        }
        let schedule = Schedule::from_steps(
            nodes.iter().enumerate().map(|(i, fused)| {
                StepValues::of_node(i, &fused.node).with_read(fused.epilogue.residual.as_deref())
            }),
            graph.inputs.iter().map(|i| i.name.as_str()),
            &graph.initializers,
            graph.outputs.iter().map(String::as_str),
        )?;
        let this = OpenClPartition {
            runtime,
            graph,
            nodes,
            schedule,
            target,
            weights: WeightStore::default(),
            plans: Mutex::new(HashMap::new()),
            budget,
        };
        this.upload_weights()?;
        // With fixed input shapes everything can be decided now.
        let fixed: Option<Vec<Shape>> = this
            .graph
            .inputs
            .iter()
            .map(|i| i.concrete_shape())
            .collect();
        if let Some(shapes) = fixed {
            let key: Vec<Vec<usize>> = shapes.iter().map(|s| s.dims().to_vec()).collect();
            let plan = Arc::new(this.build_plan(&shapes)?);
            let workspace = plan.new_workspace(&this.runtime.device, this.runtime.shared_slots)?;
            plan.pool
                .lock()
                .map_err(|_| OpenClError::Poisoned.in_partition("preparing"))?
                .push(workspace);
            this.plans
                .lock()
                .map_err(|_| OpenClError::Poisoned.in_partition("preparing"))?
                .insert(key, plan);
        }
        Ok(this)
    }

    /// Uploads every initializer a kernel reads as data (not the shape, axes and similar
    /// operands, which stay on the host).
    fn upload_weights(&self) -> Result<(), Error> {
        for fused in &self.nodes {
            let host_only = ops::host_operands(&fused.node.op);
            for (index, input) in fused.node.inputs.iter().enumerate() {
                let Some(name) = input else { continue };
                if host_only.contains(&index) {
                    continue;
                }
                if let Some(t) = self.graph.initializers.get(name) {
                    let storage =
                        Storage::of(t.dtype(), crate::executor::float_storage(&self.target));
                    let bytes = t
                        .dims()
                        .iter()
                        .try_fold(storage.size() as u64, |acc, &d| acc.checked_mul(d as u64));
                    let checked = self
                        .budget
                        .check_bytes(bytes, || {
                            format!(
                                "the device copy of weight `{}` ({storage:?} {})",
                                concord_core::text::elide_middle(name, 80),
                                t.shape()
                            )
                        })
                        .map_err(|e| Error::at_node(&fused.node, e))?;
                    self.weights
                        .get_or_upload(&self.runtime.device, name, t, storage)
                        .map_err(|e| {
                            e.at_step(
                                &fused.node.name,
                                fused.node.op.name(),
                                &format!(
                                    "uploading weight `{}` ({checked} bytes)",
                                    concord_core::text::elide_middle(name, 80)
                                ),
                            )
                        })?;
                }
            }
        }
        Ok(())
    }

    /// A plan builder for this partition that knows the weights' shapes and types.
    fn builder(&self) -> Builder<'_> {
        let rt = &self.runtime;
        let mut b = Builder::new(
            &rt.device,
            &rt.programs,
            self.target.clone(),
            &self.weights,
            &self.graph.initializers,
            rt.options.gemm,
        );
        b.budget = self.budget;
        for (name, t) in &self.graph.initializers {
            b.shapes.insert(name.clone(), t.shape().clone());
            b.dtypes.insert(name.clone(), t.dtype());
        }
        b
    }

    fn build_plan(&self, input_shapes: &[Shape]) -> Result<ExecPlan, Error> {
        let mut b = self.builder();
        b.concat_parts = self.concat_parts(input_shapes)?;
        b.materialized = self.graph.outputs.iter().cloned().collect();
        let mut inputs = Vec::new();
        for (info, shape) in self.graph.inputs.iter().zip(input_shapes) {
            b.shapes.insert(info.name.clone(), shape.clone());
            b.dtypes.insert(info.name.clone(), info.dtype);
            let loc = b
                .alloc(&info.name)
                .map_err(|e| device_error(format!("input `{}`: {e}", info.name)))?;
            let Loc::Slot(slot) = loc else {
                return Err(device_error(format!(
                    "input `{}` did not get a slot",
                    info.name
                )));
            };
            inputs.push(InputSpec {
                name: info.name.clone(),
                slot,
                storage: b.storage(info.dtype),
            });
        }
        let mut steps = Vec::with_capacity(self.nodes.len());
        for step in self.schedule.steps() {
            let fused = self.nodes.get(step.node).ok_or_else(|| {
                device_error(format!(
                    "the schedule names fused node {}, which the plan lacks",
                    step.node
                ))
            })?;
            let node = &fused.node;
            let at = |e: OpError| Error::at_node(node, e);
            infer_fused(&mut b, fused).map_err(at)?;
            if host_evaluable(&b, node) {
                evaluate_on_host(&mut b, node).map_err(at)?;
            } else {
                ops::build(&mut b, fused).map_err(at)?;
            }
            steps.push(NodeSteps {
                node: node.name.clone(),
                op: node.op.name(),
                fused: fused.fused.clone(),
                launches: b.take_launches().map_err(at)?,
            });
            for &slot in &step.frees {
                b.release(self.schedule.name(slot));
            }
        }
        let mut output_specs = Vec::with_capacity(self.graph.outputs.len());
        for name in &self.graph.outputs {
            let spec = if let Some(t) = b.host_value(name) {
                OutputSpec::Host(t.clone())
            } else {
                let loc = b
                    .loc
                    .get(name)
                    .cloned()
                    .ok_or_else(|| Error::DanglingOutput {
                        value: name.clone(),
                    })?;
                let dtype = b.dtype(name).map_err(|e| device_error(e.to_string()))?;
                let shape = b
                    .shape(name)
                    .map_err(|e| device_error(e.to_string()))?
                    .clone();
                OutputSpec::Device {
                    loc,
                    dtype,
                    storage: b.storage(dtype),
                    shape,
                }
            };
            output_specs.push(spec);
        }
        Ok(ExecPlan {
            inputs,
            outputs: output_specs,
            nodes: steps,
            slot_bytes: b.slot_bytes(),
            slot_parents: b.slot_parents(),
            needs_status: b.needs_status,
            pool: Mutex::new(Vec::new()),
            warmed: AtomicBool::new(false),
        })
    }

    /// The Concat inputs that their producers can write straight into the Concat's output
    /// (see [`ConcatPart`]), from every value's shape under these input shapes (a pass of
    /// shape inference ahead of the plan: a Concat's size and offsets are needed when its
    /// first input is made). A value qualifies when a kernel of this partition makes it (not
    /// an input, weight, host-known value or another Concat's output), it is read once by
    /// the Concat (by other nodes any number of times), no other Concat claimed it, the
    /// Concat's axis has outer extent 1, and its offset is a multiple of the device's base
    /// address alignment.
    fn concat_parts(&self, input_shapes: &[Shape]) -> Result<HashMap<String, ConcatPart>, Error> {
        let mut b = self.builder();
        for (info, shape) in self.graph.inputs.iter().zip(input_shapes) {
            b.shapes.insert(info.name.clone(), shape.clone());
            b.dtypes.insert(info.name.clone(), info.dtype);
        }
        // Values a kernel makes (a Concat's output is not a part of another Concat).
        let mut made = HashSet::new();
        for step in self.schedule.steps() {
            let Some(fused) = self.nodes.get(step.node) else {
                continue;
            };
            let node = &fused.node;
            let at = |e: OpError| Error::at_node(node, e);
            infer_fused(&mut b, fused).map_err(at)?;
            if host_evaluable(&b, node) {
                evaluate_on_host(&mut b, node).map_err(at)?;
            } else if !matches!(node.op, Op::Concat { .. }) {
                made.extend(node.outputs.iter().filter(|o| !o.is_empty()).cloned());
            }
        }
        let align = self.runtime.device.base_align_bytes.max(1);
        let mut parts = HashMap::new();
        for fused in &self.nodes {
            let node = &fused.node;
            let Op::Concat { axis } = node.op else {
                continue;
            };
            let (Some(y), Ok(dtype)) = (node.outputs.first(), b.dtype(&node.outputs[0])) else {
                continue;
            };
            let Ok(shape) = b.shape(y) else { continue };
            let dims = shape.dims().to_vec();
            let Ok(axis) = concord_core::shape::normalize_axis(axis, dims.len()) else {
                continue;
            };
            if dims[..axis].iter().product::<usize>() != 1 {
                continue;
            }
            let size = b.storage(dtype).size();
            let row: usize = dims[axis + 1..].iter().product::<usize>() * size;
            let concat_bytes = dims.iter().product::<usize>() * size;
            let inputs: Vec<&str> = node.present_inputs().collect();
            let mut at = 0usize;
            for name in &inputs {
                let Ok(extent) = b
                    .shape(name)
                    .map(|s| s.dims().get(axis).copied().unwrap_or(0))
                else {
                    break;
                };
                let offset = at * row;
                at += extent;
                let once = inputs.iter().filter(|n| *n == name).count() == 1;
                if made.contains(*name)
                    && once
                    && extent > 0
                    && offset % align == 0
                    && !parts.contains_key(*name)
                    && !self.graph.outputs.iter().any(|o| o == name)
                {
                    parts.insert(
                        name.to_string(),
                        ConcatPart {
                            concat: y.clone(),
                            concat_bytes,
                            offset,
                        },
                    );
                }
            }
        }
        Ok(parts)
    }

    fn plan_for(&self, inputs: &BTreeMap<String, Tensor>) -> Result<Arc<ExecPlan>, Error> {
        let names: Vec<String> = self.graph.inputs.iter().map(|i| i.name.clone()).collect();
        let key = shape_key(inputs, &names);
        let mut plans = self
            .plans
            .lock()
            .map_err(|_| OpenClError::Poisoned.in_partition("finding a plan"))?;
        if let Some(plan) = plans.get(&key) {
            return Ok(plan.clone());
        }
        let shapes: Vec<Shape> = key.iter().map(|d| Shape::new(d.clone())).collect();
        let plan = Arc::new(self.build_plan(&shapes)?);
        plans.insert(key, plan.clone());
        Ok(plan)
    }

    fn execute(
        &self,
        plan: &ExecPlan,
        ws: &Workspace,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        // The inputs' bytes as the device stores them: the tensors' own memory where the
        // storage is theirs, else a converted copy. Made before the queue's scope, which
        // borrows them until the forward's one wait.
        let mut uploads = Vec::with_capacity(plan.inputs.len());
        for spec in &plan.inputs {
            let tensor = inputs.get(&spec.name).ok_or_else(|| Error::InvalidInput {
                name: spec.name.clone(),
                detail: "the OpenCL partition needs it and it was not given".into(),
            })?;
            let upload = Upload::of(tensor, spec.storage).map_err(|e| Error::InvalidInput {
                name: spec.name.clone(),
                detail: e.to_string(),
            })?;
            uploads.push(upload);
        }
        // Where each device output lands: host memory of the output tensor's own type where
        // the storage is the dtype's, so the download is the only copy.
        let mut downloads: Vec<Option<HostValues>> = plan
            .outputs
            .iter()
            .map(|spec| match spec {
                OutputSpec::Host(_) => None,
                OutputSpec::Device { storage, shape, .. } => {
                    Some(HostValues::zeroed(*storage, shape.numel()))
                }
            })
            .collect();
        let mut status = [0u8; 4];
        let mut timeline = {
            let (uploads, downloads, status) = (&uploads[..], &mut downloads[..], &mut status);
            ws.queue.scope(move |scope| {
                self.enqueue(
                    plan,
                    ws,
                    scope,
                    uploads,
                    downloads,
                    status,
                    profile.is_some(),
                )
            })?
        };
        // The forward is done: shared memory holds its results.
        if let (true, Memory::Svm(region)) = (plan.needs_status, &ws.status) {
            region
                .read(&mut status)
                .map_err(|e| OpenClError::from(e).in_partition("reading the status word"))?;
        }
        for &(output, slot, at) in &timeline.shared {
            let start = Instant::now();
            let (Some(Memory::Svm(region)), Some(Some(values))) =
                (ws.slots.get(slot), downloads.get_mut(output))
            else {
                return Err(device_error(format!(
                    "output {output} has no shared slot {slot} or no host memory"
                )));
            };
            region.read(values.bytes_mut()).map_err(|e| {
                let name = self.graph.outputs.get(output).map_or("?", String::as_str);
                OpenClError::from(e).in_partition(&format!("downloading `{name}`"))
            })?;
            if let Some(time) = timeline.downloads.get_mut(at) {
                *time = Transfer::Host(start.elapsed());
            }
        }
        if let Some(sink) = profile {
            self.record_profile(plan, &uploads, &downloads, &timeline, sink)?;
        }
        if plan.needs_status {
            match i32::from_ne_bytes(status) {
                0 => ws.status_clear.store(true, Ordering::Release),
                1 => {
                    return Err(device_error(
                        "OpenCL executor: an integer Div or Mod divided by zero".into(),
                    ))
                }
                2 => {
                    return Err(device_error(
                        "OpenCL executor: a Gather index is out of range for its axis".into(),
                    ))
                }
                other => {
                    return Err(device_error(format!(
                        "OpenCL executor: a kernel reported status {other}"
                    )))
                }
            }
        }
        let mut outputs = Vec::with_capacity(plan.outputs.len());
        for ((spec, name), values) in plan.outputs.iter().zip(&self.graph.outputs).zip(downloads) {
            match (spec, values) {
                (OutputSpec::Host(t), _) => outputs.push(t.clone()),
                (
                    OutputSpec::Device {
                        dtype,
                        storage,
                        shape,
                        ..
                    },
                    Some(values),
                ) => outputs.push(
                    values
                        .into_tensor(*storage, *dtype, shape.clone())
                        .map_err(|e| device_error(format!("output `{name}`: {e}")))?,
                ),
                (OutputSpec::Device { .. }, None) => {
                    return Err(device_error(format!(
                        "output `{name}` has no host memory to land in"
                    )))
                }
            }
        }
        Ok(outputs)
    }

    /// Enqueues one forward on the workspace's queue without waiting between commands:
    /// the uploads, the status word's reset (unless the last forward left it 0), every
    /// kernel, the status word and the downloads; then waits once. Where the workspace is
    /// in shared memory the uploads and the reset are host copies made here, and the status
    /// word and the outputs are left for `execute` to copy once the wait is over (listed in
    /// the timeline's `shared`). The commands' events come back when profiling.
    #[allow(clippy::too_many_arguments)]
    fn enqueue<'host>(
        &self,
        plan: &ExecPlan,
        ws: &Workspace,
        scope: &Scope<'_, 'host>,
        uploads: &'host [Upload<'_>],
        downloads: &'host mut [Option<HostValues>],
        status: &'host mut [u8; 4],
        profiling: bool,
    ) -> Result<Timeline, Error> {
        let transfer_error = |what: &str, e: OpenClError| e.in_partition(what);
        let mut timeline = Timeline::default();
        // Shared memory is written in place: no command of this workspace is running (the
        // last forward's scope waited for them all), and this forward's are enqueued after
        // these copies.
        for (spec, upload) in plan.inputs.iter().zip(uploads) {
            let slot = ws
                .slots
                .get(spec.slot)
                .ok_or_else(|| device_error(format!("input slot {} is missing", spec.slot)))?;
            let what = || format!("uploading `{}`", spec.name);
            let time = match slot {
                Memory::Buffer(buffer) => Transfer::Command(
                    scope
                        .write(buffer, upload.bytes())
                        .map_err(|e| transfer_error(&what(), e.into()))?,
                ),
                Memory::Svm(region) => {
                    let start = Instant::now();
                    region
                        .write(upload.bytes())
                        .map_err(|e| transfer_error(&what(), e.into()))?;
                    Transfer::Host(start.elapsed())
                }
            };
            if profiling {
                timeline.uploads.push(time);
            }
        }
        // Until this forward reads the word back as 0, it may hold a report.
        if plan.needs_status && !ws.status_clear.swap(false, Ordering::AcqRel) {
            let clearing = |e: ClError| transfer_error("clearing the status word", e.into());
            match &ws.status {
                Memory::Buffer(buffer) => {
                    scope.write(buffer, &STATUS_CLEAR).map_err(clearing)?;
                }
                Memory::Svm(region) => region.write(&STATUS_CLEAR).map_err(clearing)?,
            }
        }
        // Profiled, each node's time is the device time of its kernels, read from their
        // events once the queue is done: no wait between nodes, so the device runs the
        // forward as it does unprofiled.
        for (steps, kernels) in plan.nodes.iter().zip(&ws.kernels) {
            let mut node_events = Vec::new();
            for (launch, kernel) in steps.launches.iter().zip(kernels) {
                let event = scope
                    .launch(kernel, &launch.global, launch.local.as_deref())
                    .map_err(|e| {
                        OpenClError::from(e).at_step(
                            &steps.node,
                            steps.op,
                            &format!("kernel {}", launch.kernel),
                        )
                    })?;
                if profiling {
                    node_events.extend(event);
                }
            }
            if profiling {
                timeline.nodes.push(node_events);
            }
        }
        let reading_status = |e: ClError| transfer_error("reading the status word", e.into());
        if let (true, Memory::Buffer(buffer)) = (plan.needs_status, &ws.status) {
            scope.read(buffer, status).map_err(reading_status)?;
        }
        // Each output's source: a buffer read by a command now, or shared memory copied
        // once the forward is done (`execute`).
        for (i, ((spec, name), values)) in plan
            .outputs
            .iter()
            .zip(&self.graph.outputs)
            .zip(downloads.iter_mut())
            .enumerate()
        {
            let (OutputSpec::Device { loc, .. }, Some(values)) = (spec, values) else {
                continue;
            };
            let buffer = match loc {
                Loc::Slot(s) => match ws.slots.get(*s) {
                    Some(Memory::Buffer(buffer)) => buffer,
                    Some(Memory::Svm(_)) => {
                        // Copied once the forward is done, and timed in its place among
                        // the downloads.
                        timeline.shared.push((i, *s, timeline.downloads.len()));
                        if profiling {
                            timeline.downloads.push(Transfer::Host(Duration::ZERO));
                        }
                        continue;
                    }
                    None => return Err(device_error(format!("output slot {s} is missing"))),
                },
                Loc::Const(b) => b,
            };
            let event = scope
                .read(buffer, values.bytes_mut())
                .map_err(|e| transfer_error(&format!("downloading `{name}`"), e.into()))?;
            if profiling {
                timeline.downloads.push(Transfer::Command(event));
            }
        }
        scope
            .finish()
            .map_err(|e| OpenClError::from(e).in_partition("waiting for the forward"))?;
        Ok(timeline)
    }

    /// Hands a profiled forward's device times to the sink: each node's kernels, each
    /// upload and download.
    fn record_profile(
        &self,
        plan: &ExecPlan,
        uploads: &[Upload<'_>],
        downloads: &[Option<HostValues>],
        timeline: &Timeline,
        sink: &dyn ProfileSink,
    ) -> Result<(), Error> {
        let device_time = |transfer: &Transfer, what: &str| match transfer {
            Transfer::Command(event) => event.as_ref().map_or(Ok(Duration::ZERO), |e| {
                e.device_time()
                    .map_err(|e| OpenClError::from(e).in_partition(what))
            }),
            Transfer::Host(time) => Ok(*time),
        };
        for ((spec, upload), event) in plan.inputs.iter().zip(uploads).zip(&timeline.uploads) {
            let time = device_time(event, "profiling an upload")?;
            sink.record_transfer(&spec.name, upload.bytes().len() as u64, time);
        }
        for (steps, node_events) in plan.nodes.iter().zip(&timeline.nodes) {
            let mut time = Duration::ZERO;
            for event in node_events {
                time += event.device_time().map_err(|e| {
                    OpenClError::from(e).at_step(&steps.node, steps.op, "profiling")
                })?;
            }
            sink.record_on(&steps.node, "opencl", time);
            for fused in &steps.fused {
                sink.record_fused(fused, &steps.node, "opencl");
            }
        }
        let downloaded = self
            .graph
            .outputs
            .iter()
            .zip(downloads)
            .filter_map(|(name, values)| Some((name, values.as_ref()?)));
        for ((name, values), event) in downloaded.zip(&timeline.downloads) {
            let time = device_time(event, "profiling a download")?;
            sink.record_transfer(name, values.byte_len() as u64, time);
        }
        Ok(())
    }
}

/// What clears the status word at the start of a forward.
static STATUS_CLEAR: [u8; 4] = [0; 4];

/// A forward's record: the outputs left in shared memory, and when profiling, each upload's
/// time, each node's kernels' events and each download's time.
#[derive(Debug, Default)]
struct Timeline {
    uploads: Vec<Transfer>,
    nodes: Vec<Vec<Event>>,
    downloads: Vec<Transfer>,
    /// The outputs in shared memory, copied out once the forward is done: the output's
    /// index, its slot, and its entry among `downloads` when profiling.
    shared: Vec<(usize, usize, usize)>,
}

/// How a transfer's time is known: from its command's event (none for an empty one), or
/// timed on the host, for a copy into or out of shared memory.
#[derive(Debug)]
enum Transfer {
    Command(Option<Event>),
    Host(Duration),
}

/// An input's bytes in device storage: the tensor's own memory when the storage is its
/// dtype's, else a converted copy.
#[derive(Debug)]
enum Upload<'t> {
    Borrowed(&'t [u8]),
    Half(Vec<f16>),
    Converted(Vec<u8>),
}

impl<'t> Upload<'t> {
    fn of(tensor: &'t Tensor, storage: Storage) -> Result<Self, OpError> {
        Ok(match (tensor.data(), storage) {
            (TensorData::F32(v), Storage::F32) => Upload::Borrowed(as_bytes(v)),
            (TensorData::F16(v), Storage::F16) => Upload::Borrowed(as_bytes(v)),
            (TensorData::I64(v), Storage::I64) => Upload::Borrowed(as_bytes(v)),
            (TensorData::F32(v), Storage::F16) => {
                // Round to nearest even, as `to_storage_bytes` does, but a slice at a time.
                let mut half = vec![f16::ZERO; v.len()];
                half.convert_from_f32_slice(v);
                Upload::Half(half)
            }
            _ => Upload::Converted(to_storage_bytes(tensor, storage)?),
        })
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Upload::Borrowed(b) => b,
            Upload::Half(h) => as_bytes(h),
            Upload::Converted(b) => b,
        }
    }
}

/// A device output's values on the host, in the element type its storage has.
#[derive(Debug)]
enum HostValues {
    F32(Vec<f32>),
    F16(Vec<f16>),
    I64(Vec<i64>),
    U8(Vec<u8>),
}

impl HostValues {
    fn zeroed(storage: Storage, len: usize) -> Self {
        match storage {
            Storage::F32 => HostValues::F32(vec![0.0; len]),
            Storage::F16 => HostValues::F16(vec![f16::ZERO; len]),
            Storage::I64 => HostValues::I64(vec![0; len]),
            Storage::U8 => HostValues::U8(vec![0; len]),
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            HostValues::F32(v) => as_bytes_mut(v),
            HostValues::F16(v) => as_bytes_mut(v),
            HostValues::I64(v) => as_bytes_mut(v),
            HostValues::U8(v) => as_bytes_mut(v),
        }
    }

    fn byte_len(&self) -> usize {
        match self {
            HostValues::F32(v) => std::mem::size_of_val(&v[..]),
            HostValues::F16(v) => std::mem::size_of_val(&v[..]),
            HostValues::I64(v) => std::mem::size_of_val(&v[..]),
            HostValues::U8(v) => v.len(),
        }
    }

    /// The output tensor; the values become its data where the dtype is the storage's.
    fn into_tensor(self, storage: Storage, dtype: DType, shape: Shape) -> Result<Tensor, OpError> {
        let data = match (self, dtype) {
            (HostValues::F32(v), DType::F32) => TensorData::F32(v),
            (HostValues::F16(v), DType::F16) => TensorData::F16(v),
            (HostValues::F16(v), DType::F32) => {
                let mut wide = vec![0.0f32; v.len()];
                v.convert_to_f32_slice(&mut wide);
                TensorData::F32(wide)
            }
            (HostValues::I64(v), DType::I64) => TensorData::I64(v),
            (HostValues::U8(v), DType::Bool) => {
                TensorData::Bool(v.iter().map(|&b| b != 0).collect())
            }
            (_, dtype) => {
                return Err(OpError::Unsupported(format!(
                    "device storage {storage:?} does not hold {dtype} values"
                )))
            }
        };
        Tensor::from_parts(shape, data)
    }
}

impl PreparedPartition for OpenClPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let plan = self.plan_for(inputs)?;
        let pooled = plan
            .pool
            .lock()
            .map_err(|_| OpenClError::Poisoned.in_partition("taking a workspace"))?
            .pop();
        let ws = match pooled {
            Some(ws) => ws,
            None => plan.new_workspace(&self.runtime.device, self.runtime.shared_slots)?,
        };
        let result = if plan.warmed.load(Ordering::Acquire) && !self.runtime.serialize_runs {
            self.execute(&plan, &ws, inputs, profile)
        } else {
            // A poisoned lock only means another first run panicked; the guard is still
            // good for taking turns.
            let _turn = self
                .runtime
                .first_runs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // `execute` waits for the queue, so the first run's kernels have been compiled
            // and run when the turn ends.
            let result = self.execute(&plan, &ws, inputs, profile);
            if result.is_ok() {
                plan.warmed.store(true, Ordering::Release);
            }
            result
        };
        // A workspace that saw a device error is dropped rather than reused.
        if result.is_ok() {
            if let Ok(mut pool) = plan.pool.lock() {
                pool.push(ws);
            }
        }
        result
    }
}

/// Infers the node's output shapes from the (now concrete) input shapes and host-known
/// values, and records them.
/// [`infer_concrete`] for a fused node: a GlobalAveragePool that also applies its folded
/// squeeze-excite scales to its input writes the input's shape, not the pooled one.
fn infer_fused(b: &mut Builder, fused: &FusedNode) -> Result<(), OpError> {
    infer_concrete(b, &fused.node)?;
    if let Some(perm) = &fused.epilogue.output_perm {
        // The Transpose folded into a MatMul, GRU or LSTM: its output has the permuted
        // shape.
        let y = ops::output(&fused.node)?;
        let dims = b.shape(y)?.dims().to_vec();
        if dims.len() != perm.len() {
            return Err(OpError::Shape(format!(
                "{}: the folded Transpose's perm {perm:?} does not fit the output {dims:?}",
                fused.node.name
            )));
        }
        let permuted: Vec<usize> = perm.iter().map(|&a| dims[a]).collect();
        b.shapes.insert(y.to_string(), Shape::new(permuted));
    }
    if let Some(like) = &fused.epilogue.residual_view {
        // The residual Add fused through layout-only steps: the output has its shape.
        let y = ops::output(&fused.node)?;
        let shape = b.shape(like)?.clone();
        if shape.numel() != b.shape(y)?.numel() {
            return Err(OpError::Shape(format!(
                "{}: the output {} cannot take the shape {shape} of `{like}`, whose Add was \
                 fused through layout-only steps",
                fused.node.name,
                b.shape(y)?
            )));
        }
        b.shapes.insert(y.to_string(), shape);
    }
    if fused.excite.is_some_and(|e| e.scales_input) {
        let x = ops::input(&fused.node, 0, "X")?;
        let shape = b.shape(x)?.clone();
        let y = ops::output(&fused.node)?;
        b.shapes.insert(y.to_string(), shape);
    }
    Ok(())
}

pub(crate) fn infer_concrete(b: &mut Builder, node: &concord_core::Node) -> Result<(), OpError> {
    let mut dims: Vec<Option<(concord_core::DType, Vec<concord_core::Dim>)>> = Vec::new();
    for input in &node.inputs {
        match input {
            None => dims.push(None),
            Some(name) => dims.push(Some((b.dtype(name)?, b.shape(name)?.to_sym()))),
        }
    }
    let facts: Vec<Option<ValueFact>> = node
        .inputs
        .iter()
        .zip(&dims)
        .map(|(input, d)| {
            let (name, (dtype, shape)) = (input.as_deref()?, d.as_ref()?);
            Some(ValueFact {
                dtype: *dtype,
                shape,
                value: b.host_value(name),
            })
        })
        .collect();
    let outs = infer_op(&node.op, &facts, node.outputs.len())?;
    for (name, fact) in node.outputs.iter().zip(outs) {
        let shape = Shape::from_sym(&fact.shape).ok_or_else(|| {
            OpError::Shape(format!(
                "the shape of `{name}` is not known even with concrete inputs \
                 (an operand the OpenCL executor needs as a constant is computed at run time)"
            ))
        })?;
        b.shapes.insert(name.clone(), shape);
        b.dtypes.insert(name.clone(), fact.dtype);
    }
    Ok(())
}

/// Whether every value the node needs is known on the host (Shape needs only shapes).
fn host_evaluable(b: &Builder, node: &concord_core::Node) -> bool {
    match node.op {
        concord_core::Op::Shape { .. } | concord_core::Op::Constant { .. } => true,
        _ => node.present_inputs().all(|n| b.host_value(n).is_some()),
    }
}

/// Computes a node whose inputs are all host-known with the reference kernels, once, when
/// the plan is made: shape arithmetic never reaches the device.
fn evaluate_on_host(b: &mut Builder, node: &concord_core::Node) -> Result<(), OpError> {
    let results = if let concord_core::Op::Shape { start, end } = node.op {
        let name = node
            .inputs
            .first()
            .and_then(|i| i.as_deref())
            .ok_or(OpError::MissingInput {
                index: 0,
                name: "data",
            })?;
        let dims = b.shape(name)?.dims();
        let range = concord_core::shape_range(dims.len(), start, end);
        vec![Tensor::vec_i64(
            dims[range].iter().map(|&d| d as i64).collect(),
        )]
    } else {
        let operands: Vec<Option<&Tensor>> = node
            .inputs
            .iter()
            .map(|i| i.as_deref().and_then(|n| b.host_value(n)))
            .collect();
        concord_cpu::run_op(&node.op, &operands, node.outputs.len())?
    };
    for (name, t) in node.outputs.iter().zip(results) {
        b.shapes.insert(name.clone(), t.shape().clone());
        b.dtypes.insert(name.clone(), t.dtype());
        b.host.insert(name.clone(), t);
    }
    Ok(())
}
