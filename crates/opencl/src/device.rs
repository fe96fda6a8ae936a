//! Finding the OpenCL runtime and its devices: the probe, and the one device (with its
//! context and capabilities) an executor instance runs on.

use crate::cl::{self, ClError, Context};
use concord_core::{Availability, DeviceInfo, FallbackCause};
use opencl3::device as dev;
use opencl3::platform::platform as plat;
use opencl3::types::{cl_device_id, cl_platform_id};
use std::collections::BTreeMap;

/// The environment variable cl3 reads for where to load the OpenCL library from
/// (`;`-separated), before the platform's default library name.
pub const DYLIB_PATH_VAR: &str = "OPENCL_DYLIB_PATH";

/// The library name cl3 loads when `OPENCL_DYLIB_PATH` gives none that loads.
pub const DEFAULT_LIBRARY: &str = if cfg!(target_os = "windows") {
    "OpenCL.dll"
} else if cfg!(target_os = "macos") {
    "/System/Library/Frameworks/OpenCL.framework/OpenCL"
} else {
    "libOpenCL.so.1"
};

/// What a probe found: every device of every platform, and the one chosen to run on.
#[derive(Debug)]
pub struct Discovery {
    pub devices: Vec<DeviceInfo>,
    /// Index into `devices` of the device the executor runs on.
    pub chosen: usize,
    pub chosen_id: cl_device_id,
}

// SAFETY: device ids are plain handles valid for the life of the process, and every API
// call taking them is thread-safe.
unsafe impl Send for Discovery {}
// SAFETY: as above; the struct is never mutated after the probe.
unsafe impl Sync for Discovery {}

/// Why the probe found nothing to run on.
#[derive(Clone, Debug, PartialEq)]
pub struct Unavailable {
    pub cause: FallbackCause,
    pub reason: String,
}

/// The device an executor runs on, with what kernels need to know about it.
#[derive(Debug)]
pub struct Device {
    pub context: Context,
    pub info: DeviceInfo,
    /// An opaque number identifying the device, for program cache keys.
    pub id: usize,
    /// `cl_khr_fp64`: kernels may accumulate in double.
    pub fp64: bool,
    /// The device rounds f32 division and sqrt correctly when asked to.
    pub correctly_rounded_div_sqrt: bool,
    pub max_work_group_size: usize,
    pub local_mem_bytes: u64,
    /// True for CPU devices (PoCL): kernels pick CPU-friendly tile shapes.
    pub is_cpu: bool,
    /// The platform is PoCL, whose kernel-binary cache needs runs to take turns.
    pub is_pocl: bool,
}

impl Unavailable {
    pub fn into_availability(self) -> Availability {
        Availability::Unavailable {
            cause: self.cause,
            reason: self.reason,
        }
    }
}

/// Looks for the OpenCL library and its devices, never panicking.
pub fn discover() -> Result<Discovery, Unavailable> {
    if let Some(missing) = dylib_path_points_nowhere() {
        return Err(missing);
    }
    let platforms = match cl::platforms() {
        Ok(p) => p,
        Err(e) if e.code == cl::LIBRARY_NOT_LOADED => {
            return Err(Unavailable {
                cause: FallbackCause::LibraryMissing,
                reason: library_missing_reason(),
            })
        }
        Err(e) if e.code == cl::PLATFORM_NOT_FOUND => {
            return Err(Unavailable {
                cause: FallbackCause::NoDevice,
                reason: format!(
                    "the OpenCL library loaded but reports no platform ({}); is an ICD such as \
                     pocl-opencl-icd installed under /etc/OpenCL/vendors?",
                    e.name()
                ),
            })
        }
        Err(e) => {
            return Err(Unavailable {
                cause: FallbackCause::NoDevice,
                reason: format!("listing OpenCL platforms: {e}"),
            })
        }
    };
    if platforms.is_empty() {
        return Err(Unavailable {
            cause: FallbackCause::NoDevice,
            reason: "the OpenCL library loaded but reports no platform; is an ICD such as \
                     pocl-opencl-icd installed under /etc/OpenCL/vendors?"
                .into(),
        });
    }
    let mut devices = Vec::new();
    let mut ids = Vec::new();
    let mut problems = Vec::new();
    for &platform in &platforms {
        let platform_name = cl::platform_string(platform, plat::CL_PLATFORM_NAME)
            .unwrap_or_else(|e| format!("(unnamed platform: {e})"));
        match cl::devices(platform) {
            Ok(found) => {
                for id in found {
                    devices.push(describe(platform, &platform_name, id));
                    ids.push(id);
                }
            }
            Err(e) => problems.push(format!("platform {platform_name}: {e}")),
        }
    }
    if devices.is_empty() {
        let extra = if problems.is_empty() {
            String::new()
        } else {
            format!(" ({})", problems.join("; "))
        };
        return Err(Unavailable {
            cause: FallbackCause::NoDevice,
            reason: format!(
                "{} OpenCL platform(s) found but no device{extra}",
                platforms.len()
            ),
        });
    }
    let chosen = choose(&devices);
    for (i, d) in devices.iter_mut().enumerate() {
        d.details.insert(
            "selected".into(),
            if i == chosen { "yes" } else { "no" }.into(),
        );
    }
    Ok(Discovery {
        chosen_id: ids[chosen],
        devices,
        chosen,
    })
}

/// Opens the chosen device: its context and capabilities.
pub fn open(discovery: &Discovery) -> Result<Device, ClError> {
    let id = discovery.chosen_id;
    let context = Context::new(id)?;
    let info = discovery.devices[discovery.chosen].clone();
    let extensions = cl::device_string(id, dev::CL_DEVICE_EXTENSIONS).unwrap_or_default();
    let fp_config = cl::device_u64(id, dev::CL_DEVICE_SINGLE_FP_CONFIG).unwrap_or(0);
    let device_type = cl::device_u64(id, dev::CL_DEVICE_TYPE).unwrap_or(0);
    let is_pocl = info
        .details
        .get("platform")
        .is_some_and(|p| p.contains("Portable Computing Language"));
    Ok(Device {
        context,
        info,
        id: id as usize,
        fp64: extensions.split_whitespace().any(|e| e == "cl_khr_fp64"),
        correctly_rounded_div_sqrt: fp_config & dev::CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT != 0,
        max_work_group_size: cl::device_u64(id, dev::CL_DEVICE_MAX_WORK_GROUP_SIZE)
            .map_or(64, |v| v as usize),
        local_mem_bytes: cl::device_u64(id, dev::CL_DEVICE_LOCAL_MEM_SIZE).unwrap_or(16384),
        is_cpu: device_type & dev::CL_DEVICE_TYPE_CPU != 0,
        is_pocl,
    })
}

/// The device to run on: a GPU over an accelerator over a CPU, fp16-capable first within
/// a kind, so that the probe's fp16 answer is the chosen device's.
fn choose(devices: &[DeviceInfo]) -> usize {
    let rank = |d: &DeviceInfo| {
        let kind = match d.details.get("type").map(String::as_str) {
            Some("gpu") => 0,
            Some("accelerator") => 1,
            _ => 2,
        };
        (kind, !d.fp16)
    };
    (0..devices.len())
        .min_by_key(|&i| rank(&devices[i]))
        .unwrap_or(0)
}

fn describe(platform: cl_platform_id, platform_name: &str, id: cl_device_id) -> DeviceInfo {
    let text = |param| cl::device_string(id, param).unwrap_or_default();
    // Drivers pad the list with runs of spaces; one space apart reads better in reports.
    let extensions = text(dev::CL_DEVICE_EXTENSIONS)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let fp16 = extensions.split_whitespace().any(|e| e == "cl_khr_fp16");
    let device_type = cl::device_u64(id, dev::CL_DEVICE_TYPE).unwrap_or(0);
    let kind = if device_type & dev::CL_DEVICE_TYPE_GPU != 0 {
        "gpu"
    } else if device_type & dev::CL_DEVICE_TYPE_ACCELERATOR != 0 {
        "accelerator"
    } else if device_type & dev::CL_DEVICE_TYPE_CPU != 0 {
        "cpu"
    } else {
        "other"
    };
    let mut details = BTreeMap::new();
    details.insert("platform".into(), platform_name.to_string());
    details.insert(
        "platform_version".into(),
        cl::platform_string(platform, plat::CL_PLATFORM_VERSION).unwrap_or_default(),
    );
    details.insert("version".into(), text(dev::CL_DEVICE_VERSION));
    details.insert(
        "opencl_c_version".into(),
        text(dev::CL_DEVICE_OPENCL_C_VERSION),
    );
    details.insert("type".into(), kind.into());
    if let Ok(units) = cl::device_u64(id, dev::CL_DEVICE_MAX_COMPUTE_UNITS) {
        details.insert("compute_units".into(), units.to_string());
    }
    if let Ok(bytes) = cl::device_u64(id, dev::CL_DEVICE_GLOBAL_MEM_SIZE) {
        details.insert("global_memory_mib".into(), (bytes >> 20).to_string());
    }
    details.insert("extensions".into(), extensions);
    DeviceInfo {
        name: text(dev::CL_DEVICE_NAME),
        vendor: text(dev::CL_DEVICE_VENDOR),
        driver_version: text(dev::CL_DRIVER_VERSION),
        compute_capability: None,
        fp16,
        details,
    }
}

/// cl3 tries each `OPENCL_DYLIB_PATH` entry and then silently loads the default library.
/// A user who points the variable somewhere means that library: when every entry is a
/// path that does not exist, the library is missing, whatever the default would find.
fn dylib_path_points_nowhere() -> Option<Unavailable> {
    let value = std::env::var(DYLIB_PATH_VAR).ok()?;
    let entries: Vec<&str> = value.split(';').filter(|e| !e.trim().is_empty()).collect();
    if entries.is_empty() {
        return None;
    }
    let all_missing_paths = entries.iter().all(|e| {
        let path = std::path::Path::new(e.trim());
        path.components().count() > 1 && !path.exists()
    });
    all_missing_paths.then(|| Unavailable {
        cause: FallbackCause::LibraryMissing,
        reason: format!(
            "the OpenCL library was not found: {DYLIB_PATH_VAR}={value:?} names no existing \
             file (looked for {})",
            entries.join(", ")
        ),
    })
}

fn library_missing_reason() -> String {
    let from_env = std::env::var(DYLIB_PATH_VAR)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| format!("the entries of {DYLIB_PATH_VAR}={v:?}, then "))
        .unwrap_or_default();
    format!(
        "the OpenCL library was not found (looked for {from_env}{DEFAULT_LIBRARY} on the \
         dynamic loader's search path); install an ICD loader and a driver, e.g. the Debian \
         packages ocl-icd-libopencl1 and pocl-opencl-icd, or set {DYLIB_PATH_VAR}"
    )
}
