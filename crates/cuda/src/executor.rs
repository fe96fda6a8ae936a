//! [`CudaExecutor`]: the CUDA backend as an [`Executor`]. It answers the planner's questions
//! (probe, targets, supports) and prepares partitions; it never decides fallback.

use crate::device::{self, Device, Discovery, Unavailable};
use crate::error::CudaError;
use crate::partition::CudaPartition;
use concord_core::{
    Availability, Backend, Error, Executor, FallbackCause, Graph, Node, PreparedPartition, Support,
    Target,
};
use std::sync::{Arc, OnceLock};

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

    fn backend(&self) -> Backend {
        Backend::Cuda
    }

    fn probe(&self) -> Availability {
        match self.discovery() {
            Err(unavailable) => unavailable.clone().into_availability(),
            Ok(discovery) => match self.device() {
                Ok(_) => Availability::Available {
                    devices: vec![discovery.info.clone()],
                },
                Err(unavailable) => unavailable.into_availability(),
            },
        }
    }

    fn targets(&self) -> Vec<Target> {
        vec![Target::Cuda, Target::CudaFp16]
    }

    fn supports(&self, graph: &Graph, node: &Node, target: Target) -> Support {
        crate::support::supports(graph, node, target)
    }

    fn prepare(
        &self,
        partition: &Graph,
        target: Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        let device = self
            .device()
            .map_err(|u| CudaError::Unavailable(u.reason).in_partition("preparing a partition"))?;
        if target.is_fp16() && !device.info.fp16 {
            return Err(CudaError::Unavailable(format!(
                "{} (compute capability {}) cannot run {target}",
                device.info.name,
                device.info.compute_capability.as_deref().unwrap_or("?")
            ))
            .in_partition("preparing a partition"));
        }
        Ok(Box::new(CudaPartition::new(device, partition, target)?))
    }
}
