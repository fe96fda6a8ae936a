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

/// The environment variable that selects the OpenCL device (see [`DeviceSelection`]).
pub const DEVICE_VAR: &str = "CONCORD_OPENCL_DEVICE";

/// Which OpenCL device to run on, when a machine has several (PoCL and Oclgrind, a GPU and
/// a CPU driver): `P:D` is device D of platform P (indices as `concord info` lists them);
/// any other text is a case-insensitive substring of the platform's name or vendor or the
/// device's name or vendor (`pocl`, `oclgrind`, `nvidia`). Among several matches the usual ranking picks
/// (GPU over accelerator over CPU, fp16 first). A selection that matches nothing makes the
/// executor unavailable with the list of what exists; it never runs on another device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSelection {
    Index { platform: usize, device: usize },
    Name(String),
}

impl DeviceSelection {
    /// Reads `P:D` (two indices) or a name substring. Empty text selects nothing (None).
    pub fn parse(text: &str) -> Option<DeviceSelection> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        if let Some((p, d)) = text.split_once(':') {
            if let (Ok(platform), Ok(device)) = (p.trim().parse(), d.trim().parse()) {
                return Some(DeviceSelection::Index { platform, device });
            }
        }
        Some(DeviceSelection::Name(text.to_lowercase()))
    }

    /// The selection `CONCORD_OPENCL_DEVICE` makes, if set to anything.
    pub fn from_env() -> Option<DeviceSelection> {
        std::env::var(DEVICE_VAR).ok().and_then(|v| Self::parse(&v))
    }

    fn matches(&self, d: &DeviceInfo) -> bool {
        match self {
            DeviceSelection::Index { platform, device } => {
                d.details.get("index").map(String::as_str)
                    == Some(format!("{platform}:{device}").as_str())
            }
            DeviceSelection::Name(needle) => {
                let detail = |k: &str| d.details.get(k).map_or("", String::as_str);
                [
                    detail("platform"),
                    detail("platform_vendor"),
                    d.name.as_str(),
                    d.vendor.as_str(),
                ]
                .iter()
                .any(|h| h.to_lowercase().contains(needle.as_str()))
            }
        }
    }
}

impl std::fmt::Display for DeviceSelection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSelection::Index { platform, device } => write!(f, "{platform}:{device}"),
            DeviceSelection::Name(name) => write!(f, "{name}"),
        }
    }
}

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
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN` in bytes: where a sub-buffer may start.
    pub base_align_bytes: usize,
    /// True for CPU devices (PoCL): kernels pick CPU-friendly tile shapes.
    pub is_cpu: bool,
    /// `CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT`: the floats one of the device's vector
    /// registers holds (PoCL: 8 with AVX2, 16 with AVX-512), 1 when unanswered.
    pub native_float_lanes: usize,
    /// Fine-grained buffer SVM (`CL_DEVICE_SVM_FINE_GRAIN_BUFFER`, OpenCL 2.0): host and
    /// device share the memory, so a workspace may keep its slots there.
    pub fine_grain_svm: bool,
    /// The platform is PoCL, whose kernel-binary cache needs runs to take turns.
    pub is_pocl: bool,
    /// `cl_khr_fp16`: the device has half arithmetic. Without it the opencl-fp16 target
    /// still runs, storage-only (see [`Device::half_storage`]), and says what that costs.
    pub fp16_arithmetic: bool,
    /// Whether a kernel that stores f16 through `vload_half`/`vstore_half_rte` (core
    /// OpenCL, no extension) builds on this device, checked when the device is opened;
    /// the error is the build's, for the probe's reason.
    pub half_storage: Result<(), String>,
}

impl Device {
    /// Whether a forward's commands are held back until it waits (see
    /// [`crate::cl::Queue::scope`]): on CPU devices, where it was measured to help, except
    /// those that run commands inline ([`runs_commands_inline`]).
    pub fn gate_queues(&self) -> bool {
        self.is_cpu && !runs_commands_inline(self.is_pocl, &self.info.name)
    }
}

/// How a device stores and computes the half-precision target, as `concord info` shows it
/// (the `fp16` detail).
pub(crate) const FP16_NATIVE: &str = "native (cl_khr_fp16)";
pub(crate) const FP16_STORAGE_ONLY: &str =
    "storage only (vload_half/vstore_half, arithmetic in f32; no cl_khr_fp16)";

/// The smallest kernel that stores f16 the way the opencl-fp16 kernels do; a device on
/// which it does not build cannot run the target at all.
const HALF_STORAGE_CHECK: &str = "\
__kernel void half_storage_check(__global const half* src, __global half* dst) {
    const size_t i = get_global_id(0);
    vstore_half_rte(vload_half(i, src) * 2.0f, i, dst);
}
";

impl Unavailable {
    pub fn into_availability(self) -> Availability {
        Availability::Unavailable {
            cause: self.cause,
            reason: self.reason,
        }
    }
}

/// Looks for the OpenCL library and its devices, never panicking.
pub fn discover(selection: Option<&DeviceSelection>) -> Result<Discovery, Unavailable> {
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
    for (p, &platform) in platforms.iter().enumerate() {
        let platform_name = cl::platform_string(platform, plat::CL_PLATFORM_NAME)
            .unwrap_or_else(|e| format!("(unnamed platform: {e})"));
        match cl::devices(platform) {
            Ok(found) => {
                for (d, id) in found.into_iter().enumerate() {
                    let mut info = describe(platform, &platform_name, id);
                    info.details.insert("index".into(), format!("{p}:{d}"));
                    devices.push(info);
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
    let chosen = choose(&devices, selection)?;
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
    let half_storage = match context.build_program(HALF_STORAGE_CHECK, "") {
        Ok(_) => Ok(()),
        Err(cl::BuildError::Api(e)) => Err(format!("building a vload_half kernel: {e}")),
        Err(cl::BuildError::Compile { error, log }) => Err(format!(
            "a kernel using vload_half/vstore_half_rte does not build ({error}): {}",
            log.trim()
        )),
    };
    // OpenCL 1.2 devices do not know the query: no SVM. A device that reports it is also
    // asked for a few bytes of it, so that an OpenCL 1.2 ICD loader (without clSVMAlloc)
    // in front of a 2.0 driver leaves the device on buffers instead of failing every
    // forward.
    let fine_grain_svm = cl::device_u64(id, dev::CL_DEVICE_SVM_CAPABILITIES)
        .is_ok_and(|caps| caps & dev::CL_DEVICE_SVM_FINE_GRAIN_BUFFER != 0)
        && context.svm(8).is_ok();
    Ok(Device {
        fp16_arithmetic: extensions.split_whitespace().any(|e| e == "cl_khr_fp16"),
        half_storage,
        context,
        info,
        id: id as usize,
        fp64: extensions.split_whitespace().any(|e| e == "cl_khr_fp64"),
        correctly_rounded_div_sqrt: fp_config & dev::CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT != 0,
        max_work_group_size: cl::device_u64(id, dev::CL_DEVICE_MAX_WORK_GROUP_SIZE)
            .map_or(64, |v| v as usize),
        local_mem_bytes: cl::device_u64(id, dev::CL_DEVICE_LOCAL_MEM_SIZE).unwrap_or(16384),
        // Reported in bits; an unanswered query leaves 4 KiB, which any device accepts.
        base_align_bytes: cl::device_u64(id, dev::CL_DEVICE_MEM_BASE_ADDR_ALIGN)
            .map_or(4096, |bits| (bits as usize / 8).max(1)),
        // As the probe names it ("type"): a device that is also a GPU or an accelerator
        // (Oclgrind reports all three) gets the GPU-shaped kernels.
        is_cpu: device_type & dev::CL_DEVICE_TYPE_CPU != 0
            && device_type & (dev::CL_DEVICE_TYPE_GPU | dev::CL_DEVICE_TYPE_ACCELERATOR) == 0,
        is_pocl,
        fine_grain_svm,
        native_float_lanes: cl::device_u64(id, dev::CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT)
            .map_or(1, |v| v as usize),
    })
}

/// Whether the device runs a queue's commands inline, in the host thread that releases
/// them, rather than on worker threads: PoCL's `basic` device (named `basic-…`; `cpu-minimal…`
/// before PoCL 1.6). Holding a forward's commands behind a user event gains nothing there,
/// and PoCL 3.1's basic device deadlocks in `clSetUserEventStatus` when the event releases
/// them (it runs them while holding the lock they take), so its queues are not gated.
fn runs_commands_inline(is_pocl: bool, device_name: &str) -> bool {
    is_pocl && (device_name.starts_with("basic") || device_name.starts_with("cpu-minimal"))
}

/// The device to run on: among the devices `selection` matches (all when there is none), a
/// GPU over an accelerator over a CPU, native half arithmetic (`cl_khr_fp16`) first within
/// a kind. A selection matching no device is an error
/// naming every device with its index.
pub(crate) fn choose(
    devices: &[DeviceInfo],
    selection: Option<&DeviceSelection>,
) -> Result<usize, Unavailable> {
    let rank = |d: &DeviceInfo| {
        let kind = match d.details.get("type").map(String::as_str) {
            Some("gpu") => 0,
            Some("accelerator") => 1,
            _ => 2,
        };
        let native_half = d
            .details
            .get("fp16")
            .is_some_and(|f| f.as_str() == FP16_NATIVE);
        (kind, !native_half)
    };
    let candidates =
        (0..devices.len()).filter(|&i| selection.map_or(true, |s| s.matches(&devices[i])));
    candidates
        .min_by_key(|&i| rank(&devices[i]))
        .ok_or_else(|| Unavailable {
            cause: FallbackCause::NoDevice,
            reason: format!(
                "{DEVICE_VAR} (or OpenClOptions::device) selects `{}`, which matches no OpenCL \
                 device; the devices are: {}",
                selection.map(ToString::to_string).unwrap_or_default(),
                list_devices(devices)
            ),
        })
}

/// Every device as `P:D name (platform, type)`, for messages.
pub(crate) fn list_devices(devices: &[DeviceInfo]) -> String {
    let detail = |d: &DeviceInfo, k: &str| d.details.get(k).cloned().unwrap_or_default();
    devices
        .iter()
        .map(|d| {
            format!(
                "{} `{}` (platform `{}`, {})",
                detail(d, "index"),
                d.name,
                detail(d, "platform"),
                detail(d, "type")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(platform: cl_platform_id, platform_name: &str, id: cl_device_id) -> DeviceInfo {
    let text = |param| cl::device_string(id, param).unwrap_or_default();
    // Drivers pad the list with runs of spaces; one space apart reads better in reports.
    let extensions = text(dev::CL_DEVICE_EXTENSIONS)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    // Every OpenCL device stores half through vload_half/vstore_half (core since 1.0);
    // only the arithmetic needs cl_khr_fp16. The chosen device's answer is checked by
    // building a kernel when it is opened (`open`), and the probe reports that.
    let fp16_native = extensions.split_whitespace().any(|e| e == "cl_khr_fp16");
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
        "platform_vendor".into(),
        cl::platform_string(platform, plat::CL_PLATFORM_VENDOR).unwrap_or_default(),
    );
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
    details.insert(
        "fp16".into(),
        if fp16_native {
            FP16_NATIVE
        } else {
            FP16_STORAGE_ONLY
        }
        .into(),
    );
    DeviceInfo {
        name: text(dev::CL_DEVICE_NAME),
        vendor: text(dev::CL_DEVICE_VENDOR),
        driver_version: text(dev::CL_DRIVER_VERSION),
        compute_capability: None,
        fp16: true,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn device(index: &str, platform: (&str, &str), name: &str, kind: &str) -> DeviceInfo {
        let mut details = BTreeMap::new();
        details.insert("index".into(), index.into());
        details.insert("platform".into(), platform.0.into());
        details.insert("platform_vendor".into(), platform.1.into());
        details.insert("type".into(), kind.into());
        DeviceInfo {
            name: name.into(),
            vendor: String::new(),
            driver_version: String::new(),
            compute_capability: None,
            fp16: false,
            details,
        }
    }

    /// Only PoCL's inline device goes ungated: its pthread device, another platform's device
    /// that happens to be named `basic…`, and GPUs keep the gate's choice to `is_cpu`.
    #[test]
    fn only_pocls_inline_device_runs_commands_inline() {
        assert!(runs_commands_inline(true, "basic-skylake-avx512-AMD EPYC"));
        assert!(runs_commands_inline(true, "cpu-minimal-haswell"));
        assert!(!runs_commands_inline(true, "pthread-haswell-AMD EPYC"));
        assert!(!runs_commands_inline(true, "cpu-haswell"));
        assert!(!runs_commands_inline(false, "basic device"));
        assert!(!runs_commands_inline(false, "NVIDIA H100 80GB HBM3"));
    }

    /// A machine with PoCL (platform 0) and Oclgrind (platform 1).
    fn two_platforms() -> Vec<DeviceInfo> {
        vec![
            device(
                "0:0",
                ("Portable Computing Language", "The pocl project"),
                "cpu-haswell-Intel",
                "cpu",
            ),
            device(
                "1:0",
                ("Oclgrind", "University of Bristol"),
                "Oclgrind Simulator",
                "gpu",
            ),
        ]
    }

    #[test]
    fn selections_parse_as_indices_or_names() {
        assert_eq!(
            DeviceSelection::parse(" 1:0 "),
            Some(DeviceSelection::Index {
                platform: 1,
                device: 0
            })
        );
        assert_eq!(
            DeviceSelection::parse("PoCL"),
            Some(DeviceSelection::Name("pocl".into()))
        );
        // Not two indices: a name (a device name may hold a colon).
        assert_eq!(
            DeviceSelection::parse("gfx:90a"),
            Some(DeviceSelection::Name("gfx:90a".into()))
        );
        assert_eq!(DeviceSelection::parse("  "), None);
    }

    #[test]
    fn native_half_arithmetic_ranks_first_within_a_kind() {
        let mut devices = vec![
            device(
                "0:0",
                ("Portable Computing Language", "pocl"),
                "cpu-a",
                "cpu",
            ),
            device("1:0", ("Other", "other"), "cpu-b", "cpu"),
        ];
        devices[0]
            .details
            .insert("fp16".into(), FP16_STORAGE_ONLY.into());
        devices[1].details.insert("fp16".into(), FP16_NATIVE.into());
        assert_eq!(choose(&devices, None), Ok(1));
        devices[1]
            .details
            .insert("fp16".into(), FP16_STORAGE_ONLY.into());
        assert_eq!(
            choose(&devices, None),
            Ok(0),
            "a tie keeps the listed order"
        );
    }

    #[test]
    fn without_a_selection_the_gpu_is_chosen() {
        assert_eq!(choose(&two_platforms(), None), Ok(1));
    }

    #[test]
    fn a_selection_picks_by_index_or_by_name_substring() {
        let devices = two_platforms();
        let pick = |text: &str| choose(&devices, DeviceSelection::parse(text).as_ref());
        assert_eq!(pick("0:0"), Ok(0));
        assert_eq!(pick("1:0"), Ok(1));
        assert_eq!(pick("PoCL"), Ok(0), "platform vendor, any case");
        assert_eq!(pick("portable"), Ok(0), "platform name");
        assert_eq!(pick("haswell"), Ok(0), "device name");
        assert_eq!(pick("oclgrind"), Ok(1));
    }

    #[test]
    fn a_selection_matching_nothing_is_an_error_listing_every_device() {
        let devices = two_platforms();
        for text in ["2:0", "0:1", "nvidia"] {
            let err = choose(&devices, DeviceSelection::parse(text).as_ref())
                .expect_err("no device matches");
            assert_eq!(err.cause, FallbackCause::NoDevice);
            assert!(err.reason.contains(DEVICE_VAR), "{}", err.reason);
            assert!(err.reason.contains(&format!("`{}`", text.to_lowercase())));
            for listed in [
                "0:0 `cpu-haswell-Intel` (platform `Portable Computing Language`, cpu)",
                "1:0 `Oclgrind Simulator` (platform `Oclgrind`, gpu)",
            ] {
                assert!(err.reason.contains(listed), "{} lacks {listed}", err.reason);
            }
        }
    }
}
