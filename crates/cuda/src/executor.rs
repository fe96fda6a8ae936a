//! [`CudaExecutor`]: the CUDA backend as an [`Executor`]. It answers the planner's questions
//! (probe, targets, supports) and prepares partitions; it never decides fallback.

use crate::device::{self, Device, Discovery, Unavailable};
use crate::error::CudaError;
use crate::partition::CudaPartition;
use concord_core::{
    Availability, Capability, DType, Error, Executor, FallbackCause, Graph, MemoryBudget, Node,
    PreparedPartition, Support, Target, TargetSpec,
};
use std::sync::{Arc, OnceLock};

/// CUDA device memory, f32 storage and compute: the CUDA executor's default target.
pub const CUDA: Target = Target::new("cuda");

/// CUDA device memory, f16 storage, f32 accumulation; needs compute capability ≥ 5.3 (else
/// [`CUDA`] runs instead).
pub const CUDA_FP16: Target = Target::new("cuda-fp16");

/// The CUDA executor. Cheap to create: nothing is loaded until the first probe or prepare.
/// Everything it caches (the context, compiled modules, streams) belongs to this instance;
/// share it (the registry holds it in an `Arc`) to share those.
#[derive(Debug, Default)]
pub struct CudaExecutor {
    discovery: OnceLock<Result<Discovery, Unavailable>>,
    device: OnceLock<Result<Arc<Device>, Unavailable>>,
}

impl CudaExecutor {
    pub fn new() -> Self {
        Self::default()
    }

    fn discovery(&self) -> &Result<Discovery, Unavailable> {
        self.discovery.get_or_init(device::discover)
    }

    /// The device, opened on first use.
    pub fn device(&self) -> Result<Arc<Device>, Unavailable> {
        self.device
            .get_or_init(|| {
                let discovery = self.discovery().as_ref().map_err(Clone::clone)?;
                Device::open(discovery)
                    .map(Arc::new)
                    .map_err(|e| Unavailable {
                        cause: FallbackCause::NoDevice,
                        reason: format!("opening CUDA device {}: {e}", discovery.info.name),
                    })
            })
            .clone()
    }

    /// How many kernel modules this instance has compiled and loaded.
    pub fn modules_loaded(&self) -> usize {
        match self.device.get() {
            Some(Ok(d)) => d.modules.len(),
            _ => 0,
        }
    }
}

impl Executor for CudaExecutor {
    fn name(&self) -> &str {
        "cuda"
    }

    fn probe(&self) -> Availability {
        match self.discovery() {
            Err(unavailable) => unavailable.clone().into_availability(),
            Ok(discovery) => match self.device() {
                // A sticky error ends the context for the process: from then on new nets
                // are told so up front, and fall back (or are refused) by the planner.
                Ok(device) => match device.lost() {
                    Some(lost) => Availability::Unavailable {
                        cause: FallbackCause::NoDevice,
                        reason: format!("{}: {lost}", discovery.info.name),
                    },
                    None => Availability::Available {
                        devices: vec![discovery.info.clone()],
                    },
                },
                Err(unavailable) => unavailable.into_availability(),
            },
        }
    }

    fn probe_details(&self) -> Vec<String> {
        crate::library::search_report(&crate::library::all())
    }

    fn targets(&self) -> Vec<TargetSpec> {
        target_specs()
    }

    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        crate::support::supports(graph, node, target)
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
        // Whether the device can run `target` (fp16) was decided by the planner through
        // `resolve_target`; this only refuses a target the executor does not serve.
        if !serves(target) {
            return Err(CudaError::Unavailable(format!(
                "the CUDA executor does not serve target {target}"
            ))
            .in_partition("preparing a partition"));
        }
        let device = self
            .device()
            .map_err(|u| CudaError::Unavailable(u.reason).in_partition("preparing a partition"))?;
        Ok(Box::new(CudaPartition::new(
            device,
            partition,
            target.clone(),
            budget,
        )?))
    }
}

/// The targets the CUDA executor declares, default first.
fn target_specs() -> Vec<TargetSpec> {
    vec![
        TargetSpec::new(CUDA, DType::F32, DType::F32),
        TargetSpec::new(CUDA_FP16, DType::F16, DType::F32).needing(Capability::Fp16, Some(CUDA)),
    ]
}

/// Whether `target` is one of the CUDA executor's.
pub(crate) fn serves(target: &Target) -> bool {
    target_specs().iter().any(|s| s.target == *target)
}

/// The element type f32 values are stored in on `target` (its declared storage).
pub(crate) fn float_storage(target: &Target) -> DType {
    target_specs()
        .into_iter()
        .find(|s| s.target == *target)
        .map_or(DType::F32, |s| s.storage)
}
