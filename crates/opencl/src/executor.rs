//! [`OpenClExecutor`]: the OpenCL backend as an [`Executor`]. It answers the planner's
//! questions (probe, targets, supports) and prepares partitions; it never decides fallback.

use crate::device::{self, Device, DeviceSelection, Discovery, Unavailable};
use crate::error::OpenClError;
use crate::partition::OpenClPartition;
use crate::plan::{BlockRows, GemmKernel, SlotMemory};
use crate::programs::ProgramCache;
use concord_core::{
    Availability, Capability, DType, Error, Executor, FallbackCause, Graph, MemoryBudget, Node,
    PreparedPartition, Support, Target, TargetSpec,
};
use std::sync::{Arc, OnceLock};

/// OpenCL device memory, f32 storage and compute: the OpenCL executor's default target.
pub const OPENCL: Target = Target::new("opencl");

/// OpenCL device memory, f16 storage, f32 arithmetic. Runs on every device where a
/// `vload_half`/`vstore_half` kernel builds (else [`OPENCL`] runs instead); on a device
/// without `cl_khr_fp16` the build says, as a note, that it is slower than [`OPENCL`].
pub const OPENCL_FP16: Target = Target::new("opencl-fp16");

/// What storage-only fp16 costs, as measured on PoCL 3.1 by
/// `cargo run -p concord-opencl --example fp16_cost` (both targets in one run, the kernels'
/// device time per forward from the profile, median of 20; docs/opencl-speed.md has the
/// whole figures); part of the note a build on such a device gets.
const STORAGE_ONLY_COST: &str = "measured on PoCL 3.1, mobilenet_v2_like at 224², batch 1: \
     13.95 ms of kernel time per forward with opencl-fp16 vs 6.30 ms with opencl, 2.22x; \
     resnet18_like 3.20x";

/// The OpenCL executor. Cheap to create: nothing is loaded until the first probe or
/// prepare. Everything it caches (the device context, built programs) belongs to this
/// instance; share it (it is what `ExecutorRegistry` holds in an `Arc`) to share caches.
#[derive(Debug, Default)]
pub struct OpenClExecutor {
    options: OpenClOptions,
    discovery: OnceLock<Result<Discovery, Unavailable>>,
    runtime: OnceLock<Result<Arc<Runtime>, Unavailable>>,
}

/// Choices an executor instance makes the same way for every partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenClOptions {
    /// The GEMM kernel behind Conv, Gemm and MatMul (default: `CONCORD_OPENCL_GEMM` if set,
    /// else chosen by device type).
    pub gemm: GemmKernel,
    /// Rows of the CPU-device kernels' register blocks (default: chosen by the device's
    /// native vector width).
    pub block_rows: BlockRows,
    /// Where workspaces keep their slots (default: `CONCORD_OPENCL_MEMORY` if set, else
    /// shared memory on CPU devices with fine-grained buffer SVM, buffers elsewhere).
    pub memory: SlotMemory,
    /// The device to run on (default: `CONCORD_OPENCL_DEVICE` if set, else the ranking in
    /// [`DeviceSelection`]); a selection matching no device leaves the executor
    /// unavailable, with every device listed.
    pub device: Option<DeviceSelection>,
    /// A deliberately wrong fusion, planted by a test to prove that a named case catches
    /// it; `None` in every real use.
    #[doc(hidden)]
    pub planted_fusion_fault: Option<crate::fuse::FusionFault>,
}

/// What a prepared partition shares with the executor: the device and the programs.
#[derive(Debug)]
pub struct Runtime {
    pub device: Device,
    pub programs: ProgramCache,
    pub options: OpenClOptions,
    /// Held while a plan runs for the first time (drivers compile a kernel for its
    /// work-group shape on first launch), and on PoCL for every run: PoCL 3.1's cache of
    /// those binaries is not safe under concurrent launches from several queues (it aborts
    /// the process with `pocl_release_dlhandle_cache: Assertion 'found->ref_count > 0'`),
    /// and a CPU device runs each kernel on all its cores anyway, so runs take turns.
    pub first_runs: std::sync::Mutex<()>,
    /// Workspaces keep their slots in fine-grained SVM (see [`SlotMemory`]).
    pub shared_slots: bool,
    /// Every run takes `first_runs` (see there), not only first runs.
    pub serialize_runs: bool,
}

impl OpenClExecutor {
    pub fn new() -> Self {
        Self::default()
    }

    /// An executor with explicit options (e.g. a GEMM kernel forced for testing it on a
    /// device that would not pick it).
    pub fn with_options(options: OpenClOptions) -> Self {
        OpenClExecutor {
            options,
            ..Self::default()
        }
    }

    fn discovery(&self) -> &Result<Discovery, Unavailable> {
        self.discovery.get_or_init(|| {
            let selection = self
                .options
                .device
                .clone()
                .or_else(DeviceSelection::from_env);
            // Two executors discovering devices on two threads at once crashed PoCL inside
            // clGetDeviceInfo (a segfault in strlen while answering a string query, seen with
            // PoCL 3.1 when two test threads each built an executor). Discovery runs once per
            // executor, so serialising it across the process costs nothing after start-up;
            // the lock guards no data. A poisoned lock only means another discovery panicked.
            static DISCOVERY: std::sync::Mutex<()> = std::sync::Mutex::new(());
            let _one_at_a_time = DISCOVERY.lock().unwrap_or_else(|p| p.into_inner());
            device::discover(selection.as_ref())
        })
    }

    /// The device and program cache, opened on first use.
    pub fn runtime(&self) -> Result<Arc<Runtime>, Unavailable> {
        self.runtime
            .get_or_init(|| {
                let discovery = self.discovery().as_ref().map_err(Clone::clone)?;
                let mut options = self.options.clone();
                if options.gemm == GemmKernel::Auto {
                    options.gemm = GemmKernel::from_env()?;
                }
                let device = device::open(discovery).map_err(|e| Unavailable {
                    cause: FallbackCause::NoDevice,
                    reason: format!(
                        "opening OpenCL device {}: {e}",
                        discovery
                            .devices
                            .get(discovery.chosen)
                            .map(|d| d.name.as_str())
                            .unwrap_or("?")
                    ),
                })?;
                if options.block_rows == BlockRows::Auto {
                    options.block_rows = BlockRows::from_env()?;
                }
                let block_rows = options
                    .block_rows
                    .rows(device.is_cpu, device.native_float_lanes);
                if options.memory == SlotMemory::Auto {
                    options.memory = SlotMemory::from_env()?;
                }
                let shared_slots = options
                    .memory
                    .shares(device.is_cpu, device.fine_grain_svm, &device.info.name)
                    .map_err(|reason| Unavailable {
                        cause: FallbackCause::NoDevice,
                        reason,
                    })?;
                Ok(Arc::new(Runtime {
                    shared_slots,
                    serialize_runs: device.is_pocl,
                    device,
                    programs: ProgramCache::new(block_rows),
                    options,
                    first_runs: std::sync::Mutex::new(()),
                }))
            })
            .clone()
    }

    /// How many programs this instance has built (or is building); a test of cache sharing.
    pub fn programs_built(&self) -> usize {
        match self.runtime.get() {
            Some(Ok(rt)) => rt.programs.len(),
            _ => 0,
        }
    }
}

impl Executor for OpenClExecutor {
    fn name(&self) -> &str {
        "opencl"
    }

    fn probe(&self) -> Availability {
        match self.discovery() {
            Err(unavailable) => unavailable.clone().into_availability(),
            Ok(discovery) => match self.runtime() {
                Ok(runtime) => {
                    let mut devices = discovery.devices.clone();
                    // The chosen device's fp16 answer is the storage check's, made when it
                    // was opened: a device on which a vload_half kernel does not build
                    // cannot run opencl-fp16 at all.
                    if let (Some(chosen), Err(why)) = (
                        devices.get_mut(discovery.chosen),
                        &runtime.device.half_storage,
                    ) {
                        chosen.fp16 = false;
                        chosen.details.insert("fp16".into(), format!("none: {why}"));
                    }
                    // Where a workspace keeps its tensors (see SlotMemory).
                    if let Some(chosen) = devices.get_mut(discovery.chosen) {
                        let memory = if runtime.shared_slots {
                            "shared (fine-grained SVM: inputs and outputs are host copies)"
                        } else {
                            "device buffers (inputs and outputs are transfer commands)"
                        };
                        chosen.details.insert("memory".into(), memory.into());
                    }
                    Availability::Available { devices }
                }
                Err(unavailable) => unavailable.into_availability(),
            },
        }
    }

    fn targets(&self) -> Vec<TargetSpec> {
        target_specs()
    }

    fn notes(&self, target: &Target) -> Vec<String> {
        let Ok(runtime) = self.runtime() else {
            return Vec::new();
        };
        let device = &runtime.device;
        if *target != OPENCL_FP16 || device.fp16_arithmetic || device.half_storage.is_err() {
            return Vec::new();
        }
        vec![format!(
            "device `{}` has no native half arithmetic (no cl_khr_fp16): opencl-fp16 runs \
             storage-only, f16 in device memory converted to f32 for every operation, so it \
             halves the memory but is slower than opencl, not faster ({STORAGE_ONLY_COST})",
            device.info.name
        )]
    }

    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        if !serves(target) {
            return Support::No(format!(
                "the OpenCL executor runs the opencl and opencl-fp16 targets, not {target}"
            ));
        }
        crate::ops::supports(graph, node, target)
    }

    fn prepare(
        &self,
        partition: &Graph,
        target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        self.prepare_within(partition, target, MemoryBudget::default())
    }

    fn prepare_within(
        &self,
        partition: &Graph,
        target: &Target,
        budget: MemoryBudget,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        if !serves(target) {
            return Err(OpenClError::Unavailable(format!(
                "the OpenCL executor does not serve target {target}"
            ))
            .in_partition("preparing a partition"));
        }
        let runtime = self.runtime().map_err(|u| {
            OpenClError::Unavailable(u.reason).in_partition("preparing a partition")
        })?;
        Ok(Box::new(OpenClPartition::new(
            runtime,
            partition,
            target.clone(),
            budget,
        )?))
    }
}

/// The targets the OpenCL executor declares, default first.
fn target_specs() -> Vec<TargetSpec> {
    vec![
        TargetSpec::new(OPENCL, DType::F32, DType::F32),
        TargetSpec::new(OPENCL_FP16, DType::F16, DType::F32)
            .needing(Capability::Fp16, Some(OPENCL)),
    ]
}

/// Whether `target` is one of the OpenCL executor's.
fn serves(target: &Target) -> bool {
    target_specs().iter().any(|s| s.target == *target)
}

/// The element type f32 values are stored in on `target` (its declared storage).
pub(crate) fn float_storage(target: &Target) -> DType {
    target_specs()
        .into_iter()
        .find(|s| s.target == *target)
        .map_or(DType::F32, |s| s.storage)
}
