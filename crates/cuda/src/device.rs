//! Finding the CUDA libraries and the device (the probe), and the one device an executor
//! instance runs on: its context, capabilities, compiled modules and stream pool.

use crate::compile::{self, Arch, ModuleCache};
use crate::error::{driver_error_name, CudaError};
use crate::library;
use concord_core::{Availability, DeviceInfo, FallbackCause};
use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;
use cudarc::driver::result as drv;
use cudarc::driver::sys as drv_sys;
use cudarc::driver::{CudaContext, CudaStream};
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
    pub arch: Arch,
    pub modules: ModuleCache,
    lanes: Mutex<Vec<Lane>>,
}

/// One run's queue: a stream and a cuBLAS handle bound to it. A run takes a lane from the
/// pool and gives it back, so no two runs ever share a stream or a handle.
#[derive(Debug)]
pub struct Lane {
    /// Declared first so that it is destroyed before the stream it is bound to.
    pub blas: BlasHandle,
    pub stream: Arc<CudaStream>,
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
        // SAFETY: the handle came from cublasCreate and is destroyed only here.
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
            "the CUDA driver supports CUDA {}.{}; concord-cuda needs 12.0 or newer (update \
             the NVIDIA driver)",
            driver / 1000,
            (driver % 1000) / 10
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
    let driver_version = format!("CUDA {}.{}", driver / 1000, (driver % 1000) / 10);
    let (major, minor) = (major.max(0) as u32, minor.max(0) as u32);
    // Half arithmetic (and so the f16 target) needs compute capability 5.3 or above.
    let fp16 = (major, minor) >= (5, 3);
    let mut details = BTreeMap::new();
    details.insert("ordinal".into(), ordinal.to_string());
    details.insert("devices".into(), count.to_string());
    details.insert("memory_bytes".into(), memory.to_string());
    details.insert(
        "nvrtc".into(),
        compile::nvrtc_version().unwrap_or_else(|| "missing".into()),
    );
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
            driver_version,
            compute_capability: Some(format!("{major}.{minor}")),
            fp16,
            details,
        },
        arch: Arch::of_capability(major, minor),
    })
}

impl Device {
    /// Opens the discovered device: retains its primary context.
    pub fn open(discovery: &Discovery) -> Result<Device, CudaError> {
        let ctx = CudaContext::new(discovery.ordinal)
            .map_err(|e| CudaError::driver("cuDevicePrimaryCtxRetain", e))?;
        // SAFETY: every buffer is used on one stream only (a run's own, or the upload
        // stream of `prepare`, which is synchronised before any run can see the buffer),
        // and buffers are freed on the stream that used them last, so the per-buffer event
        // tracking cudarc would otherwise add is not needed.
        unsafe { ctx.disable_event_tracking() };
        Ok(Device {
            ctx,
            info: discovery.info.clone(),
            arch: discovery.arch,
            modules: ModuleCache::default(),
            lanes: Mutex::new(Vec::new()),
        })
    }

    /// Takes an idle lane, or makes one.
    pub fn take_lane(&self) -> Result<Lane, CudaError> {
        if let Some(lane) = self.lanes.lock().map_err(|_| CudaError::Poisoned)?.pop() {
            return Ok(lane);
        }
        let stream = self
            .ctx
            .new_stream()
            .map_err(|e| CudaError::driver("cuStreamCreate", e))?;
        self.ctx
            .bind_to_thread()
            .map_err(|e| CudaError::driver("cuCtxSetCurrent", e))?;
        let handle = blas::create_handle().map_err(|e| CudaError::blas("cublasCreate", e))?;
        let blas = BlasHandle(handle);
        // SAFETY: both handles are valid, and the stream outlives the handle (a lane keeps
        // both and drops the handle first).
        unsafe { blas::set_stream(blas.0, stream.cu_stream() as _) }
            .map_err(|e| CudaError::blas("cublasSetStream", e))?;
        Ok(Lane { blas, stream })
    }

    /// Gives a lane back after a successful run.
    pub fn return_lane(&self, lane: Lane) {
        if let Ok(mut lanes) = self.lanes.lock() {
            lanes.push(lane);
        }
    }

    /// The sticky error of the context, if it has one: a kernel fault leaves every later
    /// call failing, and the run that saw it must say so with the driver's error name.
    pub fn sticky_error(&self) -> Result<(), CudaError> {
        if let Err(e) = self.ctx.check_err() {
            return Err(CudaError::Sticky {
                call: "a deferred free or release",
                name: driver_error_name(e),
            });
        }
        Ok(())
    }
}
