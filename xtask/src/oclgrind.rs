//! `cargo xtask oclgrind`: the OpenCL executor's golden, op and model trials on Oclgrind, a
//! simulated OpenCL device that checks every memory access, with its API and data-race
//! checks on; any report it prints fails the run, as does any failing trial.
//!
//! Oclgrind is the Debian package `oclgrind` (`.ci/run` installs it); this command installs
//! nothing and says so when it is missing. The executor's probe loads the simulator through
//! `OPENCL_DYLIB_PATH`, so no ICD is registered and PoCL stays the default elsewhere.
//!
//! Oclgrind calls itself a GPU, an accelerator and a CPU; the executor treats it as a GPU,
//! so the trials run the GPU-shaped kernels (local-memory tiled GEMM, generic depthwise and
//! MaxPool), the PyTorch exports left out there for time. They run a second time with
//! `CONCORD_OPENCL_GEMM=register-blocked`, the CPU-device kernels whose 16-lane loads run
//! past a value's end into its slot's slack: Oclgrind checks each such load against the
//! buffer's real size. The model trials run a third time with those kernels summing eight
//! rows at a time (`CONCORD_OPENCL_BLOCK_ROWS=8`, what AVX-512 CPU devices get: two B panels
//! or column chunks per work-item), which Oclgrind, not a CPU device, would not choose. Last, golden case tiny_fpn runs with the uninitialized-value check
//! on, counting the reports about the padded MaxPool (max_pool_padded) only: Oclgrind
//! 21.10's plugin aborts on the `freeze` instruction in most other kernels.
//!
//! The trials run one at a time: Oclgrind 21.10 crashed (SIGSEGV) running trials from two
//! threads at once.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The Debian package, and the runtime library it installs.
const PACKAGE: &str = "oclgrind";
const LIBRARY: &str = "/usr/lib/oclgrind/liboclgrind-rt.so";

/// One run of the conformance suite's OpenCL trials on Oclgrind.
struct Step {
    what: &'static str,
    /// The suite's trial-name filter (a substring).
    filter: &'static str,
    /// Trials left out (libtest's `--skip`, substrings).
    skip: &'static [&'static str],
    /// Extra environment.
    env: &'static [(&'static str, &'static str)],
    /// Count only the reports about this kernel, and let trials fail: for the
    /// uninitialized-value check, whose plugin aborts on instructions it does not support
    /// (`freeze`) in other kernels, leaving their outputs wrong.
    only_kernel: Option<&'static str>,
}

const CPU_KERNELS: (&str, &str) = ("CONCORD_OPENCL_GEMM", "register-blocked");

/// The PyTorch and torchvision exports, left out on the GPU-shaped kernels: Oclgrind
/// simulates every work-item of the 256-item tiled GEMM groups one by one, and those 19
/// trials took over 5 minutes there (the CPU-device kernels run all 26 in about 80 s).
const LARGE_MODELS: &[&str] = &["model/torch", "model/transformer_encoder"];

const STEPS: &[Step] = &[
    Step {
        what: "golden trials, GPU-shaped kernels",
        filter: "opencl/opencl/golden/",
        skip: &[],
        env: &[],
        only_kernel: None,
    },
    Step {
        what: "op trials, GPU-shaped kernels",
        filter: "opencl/opencl/op/",
        skip: &[],
        env: &[],
        only_kernel: None,
    },
    Step {
        what: "model trials but the exported ones, GPU-shaped kernels",
        filter: "opencl/opencl/model/",
        skip: LARGE_MODELS,
        env: &[],
        only_kernel: None,
    },
    Step {
        what: "golden trials, CPU-device kernels",
        filter: "opencl/opencl/golden/",
        skip: &[],
        env: &[CPU_KERNELS],
        only_kernel: None,
    },
    Step {
        what: "op trials, CPU-device kernels",
        filter: "opencl/opencl/op/",
        skip: &[],
        env: &[CPU_KERNELS],
        only_kernel: None,
    },
    Step {
        what: "model trials, CPU-device kernels",
        filter: "opencl/opencl/model/",
        skip: &[],
        env: &[CPU_KERNELS],
        only_kernel: None,
    },
    Step {
        what: "model trials, CPU-device kernels with eight-row register blocks",
        filter: "opencl/opencl/model/",
        skip: &[],
        env: &[CPU_KERNELS, ("CONCORD_OPENCL_BLOCK_ROWS", "8")],
        only_kernel: None,
    },
    Step {
        what: "tiny_fpn, padded MaxPool, uninitialized-value check",
        filter: "opencl/opencl/model/tiny_fpn",
        skip: &[],
        env: &[CPU_KERNELS, ("OCLGRIND_UNINITIALIZED", "1")],
        only_kernel: Some("max_pool_padded"),
    },
];

/// What one step found.
struct Outcome {
    passed: usize,
    reports: Vec<String>,
    success: bool,
    seconds: f64,
}

pub fn run(args: &[String]) -> Result<()> {
    if let Some(extra) = args.first() {
        bail!("`oclgrind` takes no arguments, got `{extra}`");
    }
    check_installed()?;
    let root = crate::workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    println!("xtask oclgrind: building the OpenCL conformance trials");
    let built = Command::new(&cargo)
        .args([
            "test",
            "-p",
            "concord-opencl",
            "--locked",
            "--test",
            "conformance",
            "--no-run",
        ])
        .current_dir(&root)
        .status()
        .context("starting cargo")?;
    if !built.success() {
        bail!("building the conformance test binary failed ({built})");
    }
    let started = Instant::now();
    let mut failed = Vec::new();
    let mut total = 0;
    for step in STEPS {
        println!("xtask oclgrind: {} ({})", step.what, step.filter);
        let outcome = run_step(&cargo, &root, step)?;
        total += outcome.passed;
        println!(
            "xtask oclgrind: {}: {} trials passed in {:.0} s, {} Oclgrind report(s)",
            step.what,
            outcome.passed,
            outcome.seconds,
            outcome.reports.len()
        );
        if outcome.passed == 0 && step.only_kernel.is_none() {
            failed.push(format!("{}: no trial ran", step.what));
        }
        if !outcome.success && step.only_kernel.is_none() {
            failed.push(format!("{}: trials failed", step.what));
        }
        for report in outcome.reports.iter().take(5) {
            failed.push(format!("{}: Oclgrind: {report}", step.what));
        }
    }
    println!(
        "xtask oclgrind: {total} trial runs in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("on Oclgrind:\n  {}", failed.join("\n  "));
    }
    Ok(())
}

/// The package's runtime library, or an error saying how to get it.
fn check_installed() -> Result<()> {
    let status = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", PACKAGE])
        .output();
    let installed = status
        .as_ref()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"));
    if !installed || !Path::new(LIBRARY).exists() {
        bail!(
            "Oclgrind is not installed (the Debian package `{PACKAGE}`, which provides \
             {LIBRARY}); install it with `apt-get install {PACKAGE}` (.ci/run does)"
        );
    }
    Ok(())
}

fn run_step(cargo: &std::ffi::OsStr, root: &Path, step: &Step) -> Result<Outcome> {
    let started = Instant::now();
    let mut command = Command::new(cargo);
    command
        .args([
            "test",
            "-p",
            "concord-opencl",
            "--locked",
            "--test",
            "conformance",
            "--",
            step.filter,
            "--test-threads",
            "1",
        ])
        .args(step.skip.iter().flat_map(|s| ["--skip", s]))
        .current_dir(root)
        .env("OPENCL_DYLIB_PATH", LIBRARY)
        .env("OCLGRIND_CHECK_API", "1")
        .env("OCLGRIND_DATA_RACES", "1")
        // Fail rather than fall back: every OpenCL trial must run on the simulator.
        .env("CONCORD_REQUIRE", "opencl")
        .env("CI", "true")
        .env_remove("CONCORD_OPENCL_DEVICE")
        .env_remove("CONCORD_OPENCL_GEMM")
        .env_remove("OCLGRIND_UNINITIALIZED")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in step.env {
        command.env(key, value);
    }
    let mut child = command.spawn().context("starting cargo test")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let stderr = child.stderr.take().context("no stderr")?;
    // Oclgrind writes its diagnostics to stderr; read both streams as they come (a thread
    // for stdout, so neither pipe fills up), echo them, and keep what Oclgrind said.
    let out_thread = std::thread::spawn(move || scan(stdout, false));
    let (err_passed, mut reports) = scan(stderr, true);
    let (out_passed, out_reports) = out_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the stdout reader panicked"))?;
    reports.extend(out_reports);
    let status = child.wait().context("waiting for cargo test")?;
    let reports = reports
        .into_iter()
        .filter(|(_, kernel)| {
            step.only_kernel
                .is_none_or(|k| kernel.as_deref() == Some(k))
        })
        .map(|(report, kernel)| match kernel {
            Some(k) => format!("{report} (kernel {k})"),
            None => report,
        })
        .collect();
    Ok(Outcome {
        passed: err_passed + out_passed,
        reports,
        success: status.success(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Echoes a stream line by line; returns the passed-trial count from libtest's summary and
/// the Oclgrind diagnostics it held, each with the kernel its next line names.
fn scan(stream: impl Read, to_stderr: bool) -> (usize, Vec<(String, Option<String>)>) {
    let mut passed = 0;
    let mut reports: Vec<(String, Option<String>)> = Vec::new();
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        if to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
        if let Some(n) = passed_count(&line) {
            passed += n;
        }
        if is_oclgrind_report(&line) {
            reports.push((line.trim().to_string(), None));
        } else if let Some(kernel) = line.trim().strip_prefix("Kernel: ") {
            if let Some(last) = reports.last_mut().filter(|(_, k)| k.is_none()) {
                last.1 = Some(kernel.trim().to_string());
            }
        }
    }
    (passed, reports)
}

/// `N` from libtest's "test result: ok. N passed; …".
fn passed_count(line: &str) -> Option<usize> {
    let rest = line.strip_prefix("test result: ")?;
    let (_, after) = rest.split_once(". ")?;
    after.split_once(" passed")?.0.trim().parse().ok()
}

/// The first line of an Oclgrind diagnostic: an invalid access, a data race, an API error,
/// an uninitialized value, or Oclgrind's own fatal error.
fn is_oclgrind_report(line: &str) -> bool {
    const MARKS: [&str; 8] = [
        "Invalid read",
        "Invalid write",
        "data race",
        "Oclgrind - OpenCL runtime error",
        "OCLGRIND FATAL",
        "uninitialized value",
        "Uninitialized value",
        "Work-group divergence",
    ];
    MARKS.iter().any(|m| line.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_summaries_give_the_passed_count() {
        assert_eq!(
            passed_count("test result: ok. 98 passed; 0 failed; 136 ignored; 0 measured"),
            Some(98)
        );
        assert_eq!(
            passed_count("test result: FAILED. 3 passed; 1 failed; 0 ignored"),
            Some(3)
        );
        assert_eq!(passed_count("test x ... ok"), None);
    }

    #[test]
    fn oclgrind_diagnostics_are_recognised() {
        for line in [
            "Invalid read of size 64 at global memory address 0x1000000000040",
            "Read-write data race at global memory address 0x3000000000000",
            "Oclgrind - OpenCL runtime error detected",
            "OCLGRIND FATAL ERROR (./src/core/WorkItem.cpp:1681)",
            "Controlflow depends on uninitialized value",
            "Uninitialized value written to global memory address 0xf000000000000",
        ] {
            assert!(is_oclgrind_report(line), "{line}");
        }
        assert!(!is_oclgrind_report(
            "golden_cases_on_opencl: OpenCL available (Oclgrind Simulator)"
        ));
    }
}
