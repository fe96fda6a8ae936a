//! Which code this device can load: a cubin for its `sm_XY`, or PTX that the driver
//! JIT-compiles when the module is loaded, decided once by the probe from three facts — the
//! device's compute capability, the driver's CUDA version and the loaded NVRTC's version
//! and architecture list — so that a probe that says Available is never followed by a
//! `prepare` that fails to load its kernels.
//!
//! The rules, from NVIDIA's compatibility guarantees:
//! - A cubin for `sm_XY` runs on every device of major version X with minor version ≥ Y,
//!   and (minor-version compatibility) under any driver of NVRTC's major CUDA version or
//!   newer, even one older than NVRTC's minor version: NVRTC 12.9 cubins load on a 12.4
//!   driver. A cubin from NVRTC 13 does not load on a 12.x driver.
//! - PTX is compiled by the driver at load, and a driver only understands the PTX ISA of
//!   its own CUDA version and older: PTX from NVRTC 12.9 (ISA 8.8) fails on a 12.4 driver
//!   with `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`. PTX for `compute_XY` runs on any device of
//!   compute capability ≥ X.Y, so it is the way onto a device newer than NVRTC knows.
//!
//! Everything here is plain data and pure functions, tested without a GPU.

use std::fmt;

/// A GPU architecture, by compute capability: `sm_90` (real) or `compute_90` (virtual)
/// is `Arch { major: 9, minor: 0 }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    pub major: u32,
    pub minor: u32,
}

/// A CUDA version as the driver (`cuDriverGetVersion`, 12040) or NVRTC (`nvrtcVersion`,
/// 12 and 9) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CudaVersion {
    pub major: u32,
    pub minor: u32,
}

/// What the kernels are compiled to, and for which architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelCode {
    /// Machine code for `sm_XY`, loaded as is.
    Cubin(Arch),
    /// PTX for `compute_XY`, JIT-compiled by the driver when the module is loaded.
    Ptx(Arch),
}

/// The compilers and driver the probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toolchain {
    pub driver: CudaVersion,
    pub nvrtc: CudaVersion,
    /// The architectures the loaded NVRTC compiles for (`nvrtcGetSupportedArchs`).
    pub nvrtc_archs: Vec<Arch>,
}

/// The probe's decision: the code to build, and a warning when it is the JIT path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub code: KernelCode,
    /// Said out loud by `concord info` (the device's `warning` detail) when the kernels
    /// are PTX for the driver to JIT-compile.
    pub warning: Option<String>,
    /// One line for `concord info`: what is built, and why.
    pub summary: String,
}

impl Arch {
    /// The architecture of a device of compute capability `major.minor`.
    pub fn of_capability(major: u32, minor: u32) -> Arch {
        Arch { major, minor }
    }

    /// An architecture as NVRTC's `nvrtcGetSupportedArchs` lists it (90 is 9.0, 120 is
    /// 12.0); None for a negative number.
    pub fn from_nvrtc(code: i32) -> Option<Arch> {
        let code = u32::try_from(code).ok()?;
        Some(Arch {
            major: code / 10,
            minor: code % 10,
        })
    }

    /// `sm_90`: the real architecture, what a cubin is built for.
    pub fn real(self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }

    /// `compute_90`: the virtual architecture, what PTX is built for.
    pub fn virtual_arch(self) -> String {
        format!("compute_{}{}", self.major, self.minor)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl CudaVersion {
    /// The driver's encoding: 1000 · major + 10 · minor (12040 is 12.4).
    pub fn from_driver(version: i32) -> CudaVersion {
        let v = version.max(0) as u32;
        CudaVersion {
            major: v / 1000,
            minor: (v % 1000) / 10,
        }
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl KernelCode {
    pub fn arch(self) -> Arch {
        match self {
            KernelCode::Cubin(a) | KernelCode::Ptx(a) => a,
        }
    }

    /// The value of NVRTC's `--gpu-architecture`: `sm_XY` makes a cubin (with
    /// `nvrtcGetCUBIN`), `compute_XY` makes PTX only.
    pub fn gpu_architecture(self) -> String {
        match self {
            KernelCode::Cubin(a) => a.real(),
            KernelCode::Ptx(a) => a.virtual_arch(),
        }
    }
}

impl fmt::Display for KernelCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelCode::Cubin(a) => write!(f, "a cubin for {}", a.real()),
            KernelCode::Ptx(a) => write!(f, "PTX for {}", a.virtual_arch()),
        }
    }
}

/// Decides what to build for `device` with `toolchain`, or why nothing this NVRTC makes
/// can run on this device under this driver (the probe's Unavailable reason).
pub fn decide(device: Arch, toolchain: &Toolchain) -> Result<Decision, String> {
    let Toolchain {
        driver,
        nvrtc,
        nvrtc_archs,
    } = toolchain;
    let (driver, nvrtc) = (*driver, *nvrtc);
    let device_name = format!(
        "the device (compute capability {device}, {})",
        device.real()
    );
    if nvrtc.major > driver.major {
        return Err(format!(
            "NVRTC {nvrtc} builds kernels for CUDA {}.x drivers, but this driver supports CUDA \
             {driver}, and neither cubins nor PTX cross a major version downwards: update \
             the NVIDIA driver to one for CUDA {nvrtc} or newer, or put an NVRTC {}.x \
             library first on LD_LIBRARY_PATH",
            nvrtc.major, driver.major
        ));
    }
    let mut archs = nvrtc_archs.clone();
    archs.sort();
    archs.dedup();
    let (Some(&oldest), Some(&newest)) = (archs.first(), archs.last()) else {
        return Err(format!(
            "NVRTC {nvrtc} reports no GPU architecture it can compile for"
        ));
    };
    // A cubin for sm_XY runs on every device of major X and minor at least Y: the newest
    // such architecture NVRTC knows.
    if let Some(&arch) = archs
        .iter()
        .rev()
        .find(|a| a.major == device.major && a.minor <= device.minor)
    {
        let code = KernelCode::Cubin(arch);
        let summary = if arch == device {
            format!("{code} (NVRTC {nvrtc}, driver CUDA {driver})")
        } else {
            format!(
                "{code}, which runs on {} (NVRTC {nvrtc} does not know {}; driver CUDA \
                 {driver})",
                device.real(),
                device.real()
            )
        };
        return Ok(Decision {
            code,
            warning: None,
            summary,
        });
    }
    // No cubin NVRTC can make runs here. PTX for the newest virtual architecture at or
    // below the device's does, JIT-compiled by the driver — if the driver reads PTX of
    // NVRTC's version.
    let Some(&arch) = archs.iter().rev().find(|a| **a <= device) else {
        return Err(format!(
            "{device_name} is older than every architecture NVRTC {nvrtc} compiles for \
             ({} to {}): use an NVRTC from a CUDA release that still supports {}",
            oldest.real(),
            newest.real(),
            device.real()
        ));
    };
    let code = KernelCode::Ptx(arch);
    if driver < nvrtc {
        return Err(format!(
            "NVRTC {nvrtc} does not know {device_name} (it knows up to {}), so the kernels \
             would be {code} for the driver to JIT-compile, and this driver (CUDA {driver}) \
             is older than NVRTC and cannot read its PTX (CUDA_ERROR_UNSUPPORTED_PTX_VERSION): \
             update the NVIDIA driver to CUDA {nvrtc} or newer, or use an NVRTC that knows {}",
            newest.real(),
            device.real()
        ));
    }
    let warning = format!(
        "NVRTC {nvrtc} does not know {} (it knows up to {}): the kernels are {code}, \
         JIT-compiled by the driver (CUDA {driver}) when first loaded, which makes the first \
         prepare slower; an NVRTC that knows {} builds cubins instead",
        device.real(),
        newest.real(),
        device.real()
    );
    Ok(Decision {
        code,
        summary: format!(
            "{code}, JIT-compiled by the driver (NVRTC {nvrtc}, driver CUDA {driver})"
        ),
        warning: Some(warning),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u32, minor: u32) -> CudaVersion {
        CudaVersion { major, minor }
    }

    fn a(major: u32, minor: u32) -> Arch {
        Arch { major, minor }
    }

    /// NVRTC 12.9's list (nvrtcGetSupportedArchs), as the PyPI nvidia-cuda-nvrtc-cu12
    /// 12.9.86 reports it.
    fn nvrtc_12_9() -> Vec<Arch> {
        [
            50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121,
        ]
        .into_iter()
        .filter_map(Arch::from_nvrtc)
        .collect()
    }

    /// NVRTC 12.4's list: nothing past Hopper.
    fn nvrtc_12_4() -> Vec<Arch> {
        [50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90]
            .into_iter()
            .filter_map(Arch::from_nvrtc)
            .collect()
    }

    /// NVRTC 13.0 dropped Maxwell, Pascal and Volta.
    fn nvrtc_13_0() -> Vec<Arch> {
        [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121]
            .into_iter()
            .filter_map(Arch::from_nvrtc)
            .collect()
    }

    fn toolchain(driver: CudaVersion, nvrtc: CudaVersion, archs: Vec<Arch>) -> Toolchain {
        Toolchain {
            driver,
            nvrtc,
            nvrtc_archs: archs,
        }
    }

    /// One row of the decision table: device, driver, NVRTC and its list, and either the
    /// code expected or words the refusal must contain.
    fn check(device: Arch, t: Toolchain, expected: Result<KernelCode, &[&str]>) {
        let got = decide(device, &t);
        assert_eq!(
            got.is_ok(),
            expected.is_ok(),
            "{device:?} with {t:?}: expected {expected:?}, got {got:?}"
        );
        match (&got, expected) {
            (Ok(d), Ok(code)) => {
                assert_eq!(d.code, code, "{device:?} with {t:?}");
                assert_eq!(
                    d.warning.is_some(),
                    matches!(code, KernelCode::Ptx(_)),
                    "only the JIT path warns: {d:?}"
                );
            }
            (Err(reason), Err(words)) => {
                for w in words {
                    assert!(reason.contains(w), "`{w}` missing from: {reason}");
                }
            }
            _ => {}
        }
    }

    #[test]
    fn a_known_device_gets_its_own_cubin_whatever_the_driver_minor() {
        // The CI pin (NVRTC 12.9) on an H100/H200 under drivers of CUDA 12.4 (R550),
        // 12.8 (R570) and 13.0 (R580): minor-version compatibility covers cubins.
        for driver in [v(12, 4), v(12, 8), v(12, 9), v(13, 0)] {
            check(
                a(9, 0),
                toolchain(driver, v(12, 9), nvrtc_12_9()),
                Ok(KernelCode::Cubin(a(9, 0))),
            );
        }
        // An A100 under a 12.0 driver.
        check(
            a(8, 0),
            toolchain(v(12, 0), v(12, 9), nvrtc_12_9()),
            Ok(KernelCode::Cubin(a(8, 0))),
        );
        // The GPU machine this project is lent: NVRTC 13.0 and a 13.0 driver on an H200.
        check(
            a(9, 0),
            toolchain(v(13, 0), v(13, 0), nvrtc_13_0()),
            Ok(KernelCode::Cubin(a(9, 0))),
        );
    }

    #[test]
    fn a_newer_minor_of_a_known_major_runs_the_older_minors_cubin() {
        // NVRTC 11.0 knew sm_80 but not sm_86: its sm_80 cubin runs on an 8.6 device.
        let old = vec![a(7, 5), a(8, 0)];
        let d = decide(a(8, 6), &toolchain(v(12, 0), v(11, 0), old)).expect("cubin");
        assert_eq!(d.code, KernelCode::Cubin(a(8, 0)));
        assert!(d.summary.contains("sm_86"), "{}", d.summary);
    }

    #[test]
    fn a_device_newer_than_nvrtc_knows_gets_ptx_only_from_a_driver_at_least_as_new() {
        // Blackwell (12.0) with NVRTC 12.4, which stops at sm_90: PTX for compute_90.
        check(
            a(12, 0),
            toolchain(v(12, 8), v(12, 4), nvrtc_12_4()),
            Ok(KernelCode::Ptx(a(9, 0))),
        );
        // Same NVRTC as the driver: still readable.
        check(
            a(12, 0),
            toolchain(v(12, 4), v(12, 4), nvrtc_12_4()),
            Ok(KernelCode::Ptx(a(9, 0))),
        );
        // An older driver cannot read NVRTC's PTX: refused with the fix, before prepare.
        check(
            a(12, 0),
            toolchain(v(12, 2), v(12, 4), nvrtc_12_4()),
            Err(&[
                "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                "CUDA 12.2",
                "NVRTC 12.4",
                "sm_120",
                "update the NVIDIA driver",
            ]),
        );
        let warned =
            decide(a(12, 0), &toolchain(v(12, 8), v(12, 4), nvrtc_12_4())).expect("the JIT path");
        let warning = warned.warning.expect("the JIT path is said out loud");
        assert!(warning.contains("JIT"), "{warning}");
        assert!(warning.contains("compute_90"), "{warning}");
    }

    #[test]
    fn nvrtc_of_a_newer_major_than_the_driver_is_refused() {
        // NVRTC 13 on a 12.8 driver: neither its cubins nor its PTX load.
        check(
            a(9, 0),
            toolchain(v(12, 8), v(13, 0), nvrtc_13_0()),
            Err(&["NVRTC 13.0", "CUDA 12.8", "LD_LIBRARY_PATH"]),
        );
    }

    #[test]
    fn a_device_older_than_nvrtc_supports_is_refused() {
        // A Pascal card (6.1) with NVRTC 13, which starts at sm_75.
        check(
            a(6, 1),
            toolchain(v(13, 0), v(13, 0), nvrtc_13_0()),
            Err(&["older than every architecture", "sm_75", "sm_61"]),
        );
        // An empty list is a refusal too, not a panic.
        check(
            a(9, 0),
            toolchain(v(12, 9), v(12, 9), Vec::new()),
            Err(&["no GPU architecture"]),
        );
    }

    #[test]
    fn versions_and_names_read_as_the_driver_and_nvrtc_write_them() {
        assert_eq!(CudaVersion::from_driver(12040), v(12, 4));
        assert_eq!(CudaVersion::from_driver(13000), v(13, 0));
        assert_eq!(Arch::from_nvrtc(120), Some(a(12, 0)));
        assert_eq!(Arch::from_nvrtc(-1), None);
        assert_eq!(KernelCode::Cubin(a(9, 0)).gpu_architecture(), "sm_90");
        assert_eq!(KernelCode::Ptx(a(8, 6)).gpu_architecture(), "compute_86");
        assert!(
            v(12, 10) > v(12, 9),
            "versions order numerically, not as text"
        );
    }
}
