//! `cargo xtask adapters`: builds the third-party engine adapters in adapters/ (a separate
//! Cargo workspace: onnxruntime through `ort`, and tract) and runs the whole conformance
//! suite on each, with each adapter's own expectations file.
//!
//! Steps, each printed and timed as it runs:
//!
//! 1. Make sure target/xtask-venv has the packages pinned in xtask/golden/requirements.txt,
//!    exactly as `cargo xtask golden` does (creating the venv when missing); onnxruntime's
//!    wheel is one of them, and its shared library (onnxruntime/capi/libonnxruntime.so.*)
//!    is what the onnxruntime adapter loads. `ORT_DYLIB_PATH`, when already set, wins.
//! 2. `cargo fmt --check` over adapters/ (the main workspace's fmt does not reach it).
//! 3. `cargo test --locked` of each adapter crate, in adapters/target, with
//!    `ORT_DYLIB_PATH` set and the reports written to target/adapters-report/<adapter>/.
//!    The suite reads the ONNX node-test data from `CONCORD_ONNX_NODE_TESTS`, set to
//!    target/onnx-node-tests (where `cargo xtask onnx-node-tests` writes it) unless already
//!    set: named explicitly, as a backend author outside this checkout would name it.
//!
//! `--adapter NAME` runs one adapter; arguments after `--` go to the test binaries (a
//! trial filter such as `onnxruntime/onnxruntime/op/Conv`).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The adapters' workspace, relative to the repository root.
const WORKSPACE: &str = "adapters";
/// Where the suite's reports go, one directory per adapter.
const REPORT_DIR: &str = "target/adapters-report";
/// The adapters: (name, Cargo package).
const ADAPTERS: &[(&str, &str)] = &[
    ("onnxruntime", "concord-adapter-onnxruntime"),
    ("tract", "concord-adapter-tract"),
];
/// The variable the suite reads the ONNX node-test data from, and where
/// `cargo xtask onnx-node-tests` writes that data (relative to the repository root).
const NODE_TESTS_ENV: &str = "CONCORD_ONNX_NODE_TESTS";
const NODE_TESTS_DIR: &str = "target/onnx-node-tests";
/// The package of the helpers both adapters share; its own tests run first.
const COMMON: &str = "concord-adapter-common";

pub fn run(args: &[String]) -> Result<()> {
    let (ours, passed_on) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &args[args.len()..]),
    };
    let chosen: Vec<(&str, &str)> = match ours {
        [] => ADAPTERS.to_vec(),
        [flag, name] if flag == "--adapter" => {
            let found = ADAPTERS.iter().find(|(n, _)| n == name).with_context(|| {
                let known: Vec<&str> = ADAPTERS.iter().map(|(n, _)| *n).collect();
                format!("no adapter `{name}`; the adapters are {}", known.join(", "))
            })?;
            vec![*found]
        }
        _ => bail!(
            "usage: cargo xtask adapters [--adapter NAME] [-- TEST-ARGS]; got `{}`",
            args.join(" ")
        ),
    };
    let root = crate::workspace_root();
    let manifest = root.join(WORKSPACE).join("Cargo.toml");
    let started = Instant::now();

    let library = match std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty()) {
        Some(path) => {
            println!(
                "xtask adapters: ORT_DYLIB_PATH is set: {}",
                Path::new(&path).display()
            );
            PathBuf::from(path)
        }
        None => {
            let python = crate::golden::ensure_venv(&root)?;
            onnxruntime_library(&python)?
        }
    };
    println!("xtask adapters: onnxruntime library {}", library.display());
    let node_tests = match std::env::var_os(NODE_TESTS_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => root.join(NODE_TESTS_DIR),
    };
    println!("xtask adapters: ONNX node tests {}", node_tests.display());

    step("cargo fmt --check (adapters/)", || {
        let mut command = cargo(&root);
        command
            .args(["fmt", "--manifest-path"])
            .arg(&manifest)
            .args(["--all", "--", "--check"]);
        command
    })?;
    step(&format!("cargo test -p {COMMON}"), || {
        let mut command = cargo(&root);
        command
            .args(["test", "--locked", "--manifest-path"])
            .arg(&manifest)
            .args(["-p", COMMON]);
        command
    })?;
    for (name, package) in chosen {
        let report = root.join(REPORT_DIR).join(name);
        step(
            &format!("cargo test -p {package} (the suite on {name})"),
            || {
                let mut command = cargo(&root);
                command
                    .args(["test", "--locked", "--manifest-path"])
                    .arg(&manifest)
                    .args(["-p", package])
                    .env("ORT_DYLIB_PATH", &library)
                    .env(NODE_TESTS_ENV, &node_tests)
                    .env("CONCORD_REPORT_DIR", &report);
                if !passed_on.is_empty() {
                    command.arg("--").args(passed_on);
                }
                command
            },
        )?;
        println!(
            "xtask adapters: {name}'s reports are in {}",
            report.display()
        );
    }
    println!(
        "xtask adapters: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `cargo`, as the one running this xtask, started in the repository root.
fn cargo(root: &Path) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(root);
    command
}

/// Runs one step, printing what it is and how long it took; fails naming the step.
fn step(what: &str, make: impl FnOnce() -> Command) -> Result<()> {
    println!("xtask adapters: {what}");
    let started = Instant::now();
    let mut command = make();
    let status = command
        .status()
        .with_context(|| format!("starting {what}"))?;
    println!(
        "xtask adapters: {what}: {status} after {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if !status.success() {
        bail!("{what} failed ({status}); its output above says which trial and why");
    }
    Ok(())
}

/// The onnxruntime shared library inside the venv's onnxruntime wheel.
fn onnxruntime_library(python: &Path) -> Result<PathBuf> {
    let output = Command::new(python)
        .args([
            "-c",
            "import onnxruntime, os; print(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi'))",
        ])
        .output()
        .with_context(|| format!("starting {}", python.display()))?;
    if !output.status.success() {
        bail!(
            "{} cannot import onnxruntime ({}): {}",
            python.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let capi = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let mut found: Vec<PathBuf> = std::fs::read_dir(&capi)
        .with_context(|| format!("listing {}", capi.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_onnxruntime_library)
        })
        .collect();
    found.sort();
    match found.pop() {
        Some(path) => Ok(path),
        None => bail!(
            "the onnxruntime wheel in {} has no libonnxruntime shared library",
            capi.display()
        ),
    }
}

/// Whether a file in the wheel's capi/ directory is the runtime itself (not the
/// providers' shim library, not the Python extension).
fn is_onnxruntime_library(name: &str) -> bool {
    let runtime = name.starts_with("libonnxruntime.so")
        || (name.starts_with("libonnxruntime.") && name.ends_with(".dylib"))
        || name == "onnxruntime.dll";
    runtime && !name.contains("providers")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_library_is_told_from_its_neighbours() {
        assert!(is_onnxruntime_library("libonnxruntime.so.1.23.2"));
        assert!(is_onnxruntime_library("libonnxruntime.1.23.2.dylib"));
        assert!(!is_onnxruntime_library(
            "libonnxruntime_providers_shared.so"
        ));
        assert!(!is_onnxruntime_library(
            "onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so"
        ));
    }
}
