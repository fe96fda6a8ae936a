//! Every kernel family compiles with NVRTC, through the executor's own compile path
//! (`concord_cuda::compile::compile`), for compute_80 and compute_90, with no diagnostic at
//! all: an error or a warning fails the test. This needs libnvrtc, not a GPU: .ci/run
//! installs it from the PyPI package nvidia-cuda-nvrtc-cu12 and puts it on LD_LIBRARY_PATH.
//! Where libnvrtc is missing the test says that it skipped the check and why.

use concord_cuda::compile::{compile, Arch};
use concord_cuda::kernels::Family;
use concord_cuda::library;

/// The architectures CI compiles for: Ampere (A100) and Hopper (H100/H200).
const ARCHES: [Arch; 2] = [Arch { major: 8, minor: 0 }, Arch { major: 9, minor: 0 }];

#[test]
fn every_kernel_family_compiles_without_diagnostics() {
    let nvrtc = library::nvrtc();
    if let Some(reason) = library::missing_reason(std::slice::from_ref(&nvrtc)) {
        println!(
            "SKIPPED the NVRTC kernel compile check: {reason}. Install the PyPI package \
             nvidia-cuda-nvrtc-cu12 and put its lib directory on LD_LIBRARY_PATH (.ci/run does)."
        );
        return;
    }
    let kernels = launched_kernels();
    let mut failures = Vec::new();
    let mut compiled = 0;
    for arch in ARCHES {
        for family in Family::ALL {
            match compile(family, arch) {
                Ok(out) if out.diagnostics().is_empty() => {
                    for (_, kernel) in kernels.iter().filter(|(f, _)| *f == family) {
                        if !out.ptx.contains(&format!(".entry {kernel}(")) {
                            failures.push(format!(
                                "{} for {arch}: no entry point `{kernel}`, which src/ops launches",
                                family.name()
                            ));
                        }
                    }
                    assert!(
                        out.options
                            .iter()
                            .any(|o| o == &format!("--gpu-architecture={arch}")),
                        "{} was not compiled for {arch}: options {:?}",
                        family.name(),
                        out.options
                    );
                    compiled += 1;
                }
                Ok(out) => failures.push(format!(
                    "{} for {arch} compiled with diagnostics:\n{}",
                    family.name(),
                    out.diagnostics()
                )),
                Err(e) => failures.push(format!("{} for {arch}: {e}", family.name())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(compiled, ARCHES.len() * Family::ALL.len());
    println!(
        "compiled {compiled} kernel modules with NVRTC ({:?})",
        concord_cuda::compile::nvrtc_version()
    );
}

/// Every kernel the launch code (src/ops) names, by family. The launch code builds names
/// from storage suffixes; each must be an entry point of its family's PTX, or the first
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
