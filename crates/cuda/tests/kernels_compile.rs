//! Every kernel family compiles with NVRTC, through the executor's own compile path
//! (`concord_cuda::compile::compile`), to cubins for sm_80 and sm_90 (what the executor
//! loads on an A100 and an H100/H200) and to PTX for compute_80 and compute_90 (its JIT
//! path), with no diagnostic at all: an error or a warning fails the test. This needs
//! libnvrtc, not a GPU: .ci/run installs it from the PyPI package nvidia-cuda-nvrtc-cu12 and
//! puts it on LD_LIBRARY_PATH. Where libnvrtc is missing the test says that it skipped the
//! check and why.

use concord_cuda::compile::{compile, supported_archs, Arch, Compiled, KernelCode};
use concord_cuda::kernels::Family;
use concord_cuda::library;
use concord_cuda::loadable::{decide, Toolchain};

/// The architectures CI compiles for: Ampere (A100) and Hopper (H100/H200).
const ARCHES: [Arch; 2] = [Arch { major: 8, minor: 0 }, Arch { major: 9, minor: 0 }];

/// Whether libnvrtc is here; prints why the check is skipped when it is not.
fn nvrtc_present(check: &str) -> bool {
    let nvrtc = library::nvrtc();
    match library::missing_reason(std::slice::from_ref(&nvrtc)) {
        None => true,
        Some(reason) => {
            println!(
                "SKIPPED {check}: {reason}. Install the PyPI package nvidia-cuda-nvrtc-cu12 \
                 and put its lib directory on LD_LIBRARY_PATH (.ci/run does)."
            );
            false
        }
    }
}

#[test]
fn every_kernel_family_compiles_to_cubins_and_ptx_without_diagnostics() {
    if !nvrtc_present("the NVRTC kernel compile check") {
        return;
    }
    let kernels = launched_kernels();
    let mut failures = Vec::new();
    let mut compiled = 0;
    for arch in ARCHES {
        for code in [KernelCode::Cubin(arch), KernelCode::Ptx(arch)] {
            for family in Family::ALL {
                match compile(family, code) {
                    Ok(out) if out.diagnostics().is_empty() => {
                        failures.extend(missing_entries(&out, family, code, &kernels));
                        assert!(
                            out.options
                                .iter()
                                .any(|o| o
                                    == &format!("--gpu-architecture={}", code.gpu_architecture())),
                            "{} was not compiled to {code}: options {:?}",
                            family.name(),
                            out.options
                        );
                        compiled += 1;
                    }
                    Ok(out) => failures.push(format!(
                        "{} to {code} compiled with diagnostics:\n{}",
                        family.name(),
                        out.diagnostics()
                    )),
                    Err(e) => failures.push(format!("{} to {code}: {e}", family.name())),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(compiled, 2 * ARCHES.len() * Family::ALL.len());
    println!(
        "compiled {compiled} kernel modules with NVRTC ({:?})",
        concord_cuda::compile::nvrtc_version()
    );
}

#[test]
fn the_loaded_nvrtc_builds_cubins_for_the_ci_architectures() {
    if !nvrtc_present("the NVRTC architecture check") {
        return;
    }
    let archs = supported_archs().expect("nvrtcGetSupportedArchs answers");
    for arch in ARCHES {
        assert!(
            archs.contains(&arch),
            "{} missing from {archs:?}",
            arch.real()
        );
    }
    assert!(archs.windows(2).all(|w| w[0] < w[1]), "sorted: {archs:?}");
    // With this NVRTC and a driver of its own version, an H200 gets its own cubin: the
    // decision the probe makes, fed by the real NVRTC.
    let nvrtc = concord_cuda::compile::nvrtc_cuda_version().expect("nvrtcVersion answers");
    let decision = decide(
        Arch { major: 9, minor: 0 },
        &Toolchain {
            driver: nvrtc,
            nvrtc,
            nvrtc_archs: archs,
        },
    )
    .expect("decides");
    assert_eq!(
        decision.code,
        KernelCode::Cubin(Arch { major: 9, minor: 0 })
    );
}

/// The entry points `kernels` names for `family` that the compiled module lacks. PTX
/// declares each as `.entry name(`; a cubin is an ELF file whose string table holds each
/// kernel's name between NULs.
fn missing_entries(
    out: &Compiled,
    family: Family,
    code: KernelCode,
    kernels: &[(Family, String)],
) -> Vec<String> {
    if let Some(cubin) = out.cubin() {
        if !cubin.starts_with(b"\x7fELF") {
            return vec![format!("{} to {code} is not an ELF cubin", family.name())];
        }
    }
    kernels
        .iter()
        .filter(|(f, _)| *f == family)
        .filter(|(_, kernel)| match (out.ptx(), out.cubin()) {
            (Some(ptx), _) => !ptx.contains(&format!(".entry {kernel}(")),
            (None, Some(cubin)) => {
                let needle = [b"\0", kernel.as_bytes(), b"\0"].concat();
                !cubin.windows(needle.len()).any(|w| w == needle.as_slice())
            }
            (None, None) => true,
        })
        .map(|(_, kernel)| {
            format!(
                "{} to {code}: no entry point `{kernel}`, which src/ops launches",
                family.name()
            )
        })
        .collect()
}

/// Every kernel the launch code (src/ops) names, by family. The launch code builds names
/// from storage suffixes; each must be an entry point of its family's module, or the first
/// launch would fail with CUDA_ERROR_NOT_FOUND on a GPU.
fn launched_kernels() -> Vec<(Family, String)> {
    let floats = ["f32", "f16"];
    let mut expected: Vec<(Family, String)> = Vec::new();
    for s in floats {
        for k in ["unary", "binary", "batch_norm", "bias_add"] {
            expected.push((Family::Elementwise, format!("{k}_{s}")));
        }
        expected.push((Family::Norm, format!("softmax_{s}")));
        expected.push((Family::Norm, format!("layer_norm_{s}")));
        expected.push((Family::Reduce, format!("reduce_{s}")));
        expected.push((Family::Reduce, format!("reduce_small_{s}")));
        expected.push((Family::Pool, format!("pool_{s}")));
        expected.push((Family::Pool, format!("im2col_{s}")));
        for d in floats {
            expected.push((Family::Resize, format!("resize_axis_{s}_{d}")));
        }
    }
    expected.push((Family::Elementwise, "binary_i64".into()));
    for s in ["f32", "f16", "i64", "u8"] {
        expected.push((Family::Elementwise, format!("equal_{s}")));
        for d in ["f32", "f16", "i64", "u8"] {
            if s != d {
                expected.push((Family::Movement, format!("cast_{s}_{d}")));
            }
        }
    }
    for b in ["b8", "b16", "b32", "b64"] {
        expected.push((Family::Elementwise, format!("where_{b}")));
        for k in ["copy", "pad", "gather"] {
            expected.push((Family::Movement, format!("{k}_{b}")));
        }
    }
    for family in Family::ALL {
        expected.push((family, family.probe_kernel().to_string()));
    }
    expected
}
