//! Finding the CUDA libraries and the device (the probe), and the one device an executor
//! instance runs on: its context, capabilities, compiled modules, upload stream and lane
//! pool.

use crate::compile::{self, KernelCode, ModuleCache};
use crate::driver::{self, Allocation, CudaPinned, Faults, Stream};
use crate::error::{driver_error_name, CudaError};
use crate::lanes::{LaneDriver, LanePool};
use crate::library;
use crate::loadable::{self, Arch, CudaVersion, Toolchain};
use concord_core::{Availability, DeviceInfo, FallbackCause};
use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;
use cudarc::driver::result as drv;
use cudarc::driver::sys as drv_sys;
use cudarc::driver::CudaContext;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The environment variable choosing the device ordinal (default 0).
pub const DEVICE_VAR: &str = "CONCORD_CUDA_DEVICE";

/// What a probe found: the chosen device, described.
#[derive(Clone, Debug)]
pub struct Discovery {
    pub ordinal: usize,
    pub info: DeviceInfo,
    pub arch: Arch,
    /// What the kernels are built as for this device, driver and NVRTC.
    pub code: KernelCode,
}

/// Why the probe found nothing to run on.
#[derive(Clone, Debug, PartialEq)]
pub struct Unavailable {
    pub cause: FallbackCause,
    pub reason: String,
}

/// The device an executor runs on. Everything cached for it lives here, owned by one
/// executor instance.
#[derive(Debug)]
pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub info: DeviceInfo,
    pub code: KernelCode,
    pub modules: ModuleCache,
    pub allocation: Allocation,
    /// The stream `prepare` uploads weights on, and frees them on when their partition
    /// drops; it lives as long as the device, so it outlives every weight.
    uploads: Mutex<Stream>,
    lanes: LanePool<CudaLanes>,
}

/// The real [`LaneDriver`]: lanes of one context.
#[derive(Debug)]
pub struct CudaLanes {
    ctx: Arc<CudaContext>,
}

/// One run's queue: a stream, a cuBLAS handle bound to it, page-locked staging memory for
/// its uploads and the faults of its deferred frees. A run takes a lane from the pool and
/// gives it back, so no two runs ever share a stream, a handle or staging memory.
#[derive(Debug)]
pub struct Lane {
    /// Declared first so that it is destroyed before the stream it is bound to.
    pub blas: BlasHandle,
    pub staging: Mutex<driver::Staging>,
    pub stream: Stream,
    pub faults: Arc<Faults>,
}

/// A cuBLAS handle, destroyed without a panic (cudarc's own wrapper unwraps the destroy
/// status, which fails when the context has a sticky error).
#[derive(Debug)]
pub struct BlasHandle(pub blas_sys::cublasHandle_t);

// SAFETY: a cuBLAS handle may move between threads; it is used by one run at a time (a Lane
// is owned by exactly one run while it is out of the pool).
unsafe impl Send for BlasHandle {}
// SAFETY: shared references to a lane never call cuBLAS concurrently: runs hold their lane
// exclusively, and the pool only moves lanes in and out under its mutex.
unsafe impl Sync for BlasHandle {}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from cublasCreate and is destroyed only here, with its
        // context current (`CudaLanes::destroy` and `Lane::drop` bind it first).
        let _ = unsafe { blas::destroy_handle(self.0) };
    }
}

impl Unavailable {
    pub fn into_availability(self) -> Availability {
        Availability::Unavailable {
            cause: self.cause,
            reason: self.reason,
        }
    }
}

/// Looks for the libraries and the device, never panicking: each library is checked with
/// `is_culib_present()` before the first call into it.
pub fn discover() -> Result<Discovery, Unavailable> {
    let checks = library::all();
    if let Some(reason) = library::missing_reason(&checks) {
        return Err(Unavailable {
            cause: FallbackCause::LibraryMissing,
            reason,
        });
    }
    let no_device = |reason: String| Unavailable {
        cause: FallbackCause::NoDevice,
        reason,
    };
    drv::init().map_err(|e| {
        no_device(format!(
            "the CUDA driver library loaded but cuInit failed with {} (no GPU, or the kernel \
             module is not loaded)",
            driver_error_name(e)
        ))
    })?;
    let mut driver = 0;
    // SAFETY: libcuda is present and initialised; the pointer is valid for a write.
    unsafe { drv_sys::cuDriverGetVersion(&mut driver) }
        .result()
        .map_err(|e| {
            no_device(format!(
                "cuDriverGetVersion failed: {}",
                driver_error_name(e)
            ))
        })?;
    // The bindings are built for the CUDA 12.0 API: an older driver lacks entry points
    // they would look up (and cudarc panics on a missing symbol), so it is refused here.
    if driver < 12000 {
        return Err(no_device(format!(
            "the CUDA driver supports CUDA {}; concord-cuda needs 12.0 or newer (update the \
             NVIDIA driver)",
            CudaVersion::from_driver(driver)
        )));
    }
    let count = drv::device::get_count()
        .map_err(|e| no_device(format!("cuDeviceGetCount failed: {}", driver_error_name(e))))?;
    if count <= 0 {
        return Err(no_device(
            "the CUDA driver loaded but reports no device".to_string(),
        ));
    }
    let ordinal = match std::env::var(DEVICE_VAR) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse::<usize>()
            .map_err(|_| no_device(format!("{DEVICE_VAR}={v} is not a device ordinal")))?,
        _ => 0,
    };
    if ordinal >= count as usize {
        return Err(no_device(format!(
            "{DEVICE_VAR} asks for device {ordinal}, but the driver reports {count} device(s)"
        )));
    }
    let named =
        |call: &'static str| move |e| no_device(format!("{call} failed: {}", driver_error_name(e)));
    let dev = drv::device::get(ordinal as i32).map_err(named("cuDeviceGet"))?;
    let name = drv::device::get_name(dev).map_err(named("cuDeviceGetName"))?;
    let attribute = |a: drv_sys::CUdevice_attribute| {
        // SAFETY: `dev` is a valid device handle from cuDeviceGet.
        unsafe { drv::device::get_attribute(dev, a) }
    };
    let major =
        attribute(drv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .map_err(named("cuDeviceGetAttribute"))?;
    let minor =
        attribute(drv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            .map_err(named("cuDeviceGetAttribute"))?;
    // SAFETY: `dev` is a valid device handle.
    let memory = unsafe { drv::device::total_mem(dev) }.unwrap_or(0);
    let driver = CudaVersion::from_driver(driver);
    let (major, minor) = (major.max(0) as u32, minor.max(0) as u32);
    let arch = Arch::of_capability(major, minor);
    // What the kernels are built as is decided here, from the device, the driver and the
    // NVRTC that is loaded, so that a device the probe calls available can load them.
    let nvrtc_failed = |e: CudaError| no_device(format!("asking NVRTC what it builds: {e}"));
    let toolchain = Toolchain {
        driver,
        nvrtc: compile::nvrtc_cuda_version().map_err(nvrtc_failed)?,
        nvrtc_archs: compile::supported_archs().map_err(nvrtc_failed)?,
    };
    let decision = loadable::decide(arch, &toolchain).map_err(|reason| {
        no_device(format!(
            "{name} cannot load kernels built by the NVRTC found here: {reason}"
        ))
    })?;
    // Half arithmetic (and so the f16 target) needs compute capability 5.3 or above.
    let fp16 = (major, minor) >= (5, 3);
    let mut details = BTreeMap::new();
    details.insert("ordinal".into(), ordinal.to_string());
    details.insert("devices".into(), count.to_string());
    details.insert("memory_bytes".into(), memory.to_string());
    details.insert("nvrtc".into(), toolchain.nvrtc.to_string());
    details.insert("kernels".into(), decision.summary.clone());
    if let Some(warning) = &decision.warning {
        details.insert("warning".into(), warning.clone());
    }
    if !fp16 {
        details.insert(
            "fp16".into(),
            format!("no: compute capability {major}.{minor} is below 5.3"),
        );
    }
    Ok(Discovery {
        ordinal,
        info: DeviceInfo {
            name,
            vendor: "NVIDIA".into(),
            driver_version: format!("CUDA {driver}"),
            compute_capability: Some(format!("{major}.{minor}")),
            fp16,
            details,
        },
        arch,
        code: decision.code,
    })
}

impl Device {
    /// Opens the discovered device: retains its primary context, raises its memory pool's
    /// release threshold and makes the upload stream.
    pub fn open(discovery: &Discovery) -> Result<Device, CudaError> {
        let ctx = CudaContext::new(discovery.ordinal)
            .map_err(|e| CudaError::driver("cuDevicePrimaryCtxRetain", e))?;
        // SAFETY: no cudarc-tracked buffer is made on this context (device memory is
        // `driver::DeviceBuffer`, used on one stream only), so cudarc's per-buffer event
        // tracking has nothing to track.
        unsafe { ctx.disable_event_tracking() };
        driver::bind(&ctx)?;
        let allocation = driver::configure_allocation(&ctx)?;
        let uploads = Stream::new(&ctx)?;
        Ok(Device {
            info: discovery.info.clone(),
            code: discovery.code,
            modules: ModuleCache::default(),
            allocation,
            uploads: Mutex::new(uploads),
            lanes: LanePool::new(CudaLanes { ctx: ctx.clone() }),
            ctx,
        })
    }

    /// The lanes runs borrow.
    pub(crate) fn lanes(&self) -> &LanePool<CudaLanes> {
        &self.lanes
    }

    /// The error that lost this device's context, once a run has seen a sticky error.
    pub fn lost(&self) -> Option<CudaError> {
        self.lanes.lost().map(|e| match e {
            CudaError::Sticky { call, name } => CudaError::ContextLost { call, name },
            other => other,
        })
    }

    /// The upload stream, held for one `prepare`'s uploads.
    pub fn uploads(&self) -> Result<std::sync::MutexGuard<'_, Stream>, CudaError> {
        self.uploads.lock().map_err(|_| CudaError::Poisoned)
    }
}

impl LaneDriver for CudaLanes {
    type Lane = Lane;

    fn create(&self) -> Result<Lane, CudaError> {
        let stream = Stream::new(&self.ctx)?;
        let handle = blas::create_handle().map_err(|e| CudaError::blas("cublasCreate", e))?;
        let blas = BlasHandle(handle);
        // SAFETY: both handles are valid, and the stream outlives the handle (a lane keeps
        // both and drops the handle first).
        unsafe { blas::set_stream(blas.0, stream.raw() as _) }
            .map_err(|e| CudaError::blas("cublasSetStream", e))?;
        Ok(Lane {
            blas,
            staging: Mutex::new(driver::Staging::new(CudaPinned::new(&self.ctx))),
            stream,
            faults: Arc::default(),
        })
    }

    fn synchronize(&self, lane: &Lane) -> Result<(), CudaError> {
        driver::bind(&self.ctx)?;
        lane.stream.synchronize()
    }

    fn take_faults(&self, lane: &Lane) -> Option<CudaError> {
        lane.faults.take()
    }

    fn destroy(&self, lane: Lane) {
        // cublasDestroy, cuMemFreeHost and cuStreamDestroy all need the lane's context
        // current on this thread; if it cannot be made current, the lane is leaked rather
        // than destroyed in another context.
        if driver::bind(&self.ctx).is_ok() {
            // A discarded lane may still have copies queued from its page-locked staging
            // memory: wait for them before that memory is freed. Its error, if any, was
            // the reason for discarding it and has been reported.
            let _ = lane.stream.synchronize();
            drop(lane);
        } else {
            std::mem::forget(lane);
        }
    }
}
