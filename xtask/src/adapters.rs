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
//! 3. One `cargo test --locked --workspace --no-run` over adapters/, in adapters/target. One
//!    build for all: Cargo unifies features over the packages it is asked for, so a
//!    `cargo test -p` per adapter would resolve tract's and ort's shared dependencies with
//!    different features and rebuild most of the tree a second time.
//! 4. The test binaries that build made, run one by one from their package's directory with
//!    `CARGO_MANIFEST_DIR` set to it (as `cargo test` runs them): concord-adapter-common's, then each chosen adapter's, with
//!    `ORT_DYLIB_PATH` set and the suite's reports written to target/adapters-report/<adapter>/.
//!    The suite reads the ONNX node-test data from `CONCORD_ONNX_NODE_TESTS`, set to
//!    target/onnx-node-tests (where `cargo xtask onnx-node-tests` writes it) unless already
//!    set: named explicitly, as a backend author outside this checkout would name it. The
//!    command refuses to start, before building, when that directory holds no data.
//!
//! Any step that fails (a test binary's non-zero exit included) ends the command with an
//! error, so `cargo xtask adapters` exits non-zero: .ci/run runs it as a gate.
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
/// The property seed the adapters run with unless `CONCORD_PROP_SEED` is set. Their
/// expectations record the engines' known disagreements, some of them on shrunk property
/// cases; with a new seed every run such a disagreement would be found in one run and not
/// the next, and an expected failure that passes fails the run. Set the variable to search
/// with other seeds.
const PROP_SEED: u64 = 20261202;
const PROP_SEED_ENV: &str = "CONCORD_PROP_SEED";
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

    let node_tests = match std::env::var_os(NODE_TESTS_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => root.join(NODE_TESTS_DIR),
    };
    println!("xtask adapters: ONNX node tests {}", node_tests.display());
    // Without the data each adapter's run would fail its floor only after the build (the
    // node/ trials count towards it); say why now, before minutes of compiling.
    let stamp = node_tests.join(crate::onnx_node_tests::STAMP_FILE);
    if !stamp.is_file() {
        bail!(
            "no ONNX node-test data in {} (its {} is missing): run `cargo xtask \
             onnx-node-tests` first (.ci/run does, before this step), or point \
             {NODE_TESTS_ENV} at the data",
            node_tests.display(),
            crate::onnx_node_tests::STAMP_FILE
        );
    }

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

    step("cargo fmt --check (adapters/)", || {
        let mut command = cargo(&root);
        command
            .args(["fmt", "--manifest-path"])
            .arg(&manifest)
            .args(["--all", "--", "--check"]);
        command
    })?;
    let binaries = build_tests(&root, &manifest)?;
    let packages = std::iter::once(COMMON).chain(chosen.iter().map(|(_, package)| *package));
    for package in packages {
        let name = ADAPTERS
            .iter()
            .find(|(_, p)| *p == package)
            .map(|(n, _)| *n);
        let ours: Vec<&TestBinary> = binaries.iter().filter(|b| b.package == package).collect();
        if ours.is_empty() {
            bail!("the build of {WORKSPACE}/ made no test binary of {package}");
        }
        for binary in ours {
            let what = format!("{package}: {} `{}`", binary.kind, binary.target);
            step(&what, || {
                let mut command = Command::new(&binary.executable);
                command
                    .current_dir(&binary.package_dir)
                    // As `cargo test` sets it: the suite finds the author's expectations
                    // file (conformance/<executor>.toml) beside this Cargo.toml through it.
                    .env("CARGO_MANIFEST_DIR", &binary.package_dir)
                    .env("ORT_DYLIB_PATH", &library)
                    .env(NODE_TESTS_ENV, &node_tests);
                if let Some(name) = name {
                    command.env("CONCORD_REPORT_DIR", root.join(REPORT_DIR).join(name));
                }
                if std::env::var_os(PROP_SEED_ENV).is_none() {
                    command.env(PROP_SEED_ENV, PROP_SEED.to_string());
                }
                if !passed_on.is_empty() && binary.target == "conformance" {
                    command.args(passed_on);
                }
                command
            })?;
        }
        if let Some(name) = name {
            println!(
                "xtask adapters: {name}'s reports are in {}",
                root.join(REPORT_DIR).join(name).display()
            );
        }
    }
    println!(
        "xtask adapters: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One test binary of the adapters' workspace, as `cargo test --no-run` reported it.
#[derive(Debug)]
struct TestBinary {
    package: String,
    /// The directory of the package's Cargo.toml: `cargo test` runs a test binary there.
    package_dir: PathBuf,
    /// "lib" for unit tests, "test" for an integration test.
    kind: String,
    target: String,
    executable: PathBuf,
}

/// Builds every test binary of the adapters' workspace in one cargo invocation and lists
/// them, from cargo's JSON messages.
fn build_tests(root: &Path, manifest: &Path) -> Result<Vec<TestBinary>> {
    let what = format!("cargo test --workspace --no-run ({WORKSPACE}/)");
    println!("xtask adapters: {what}");
    let started = Instant::now();
    let output = cargo(root)
        .args([
            "test",
            "--locked",
            "--workspace",
            "--no-run",
            "--manifest-path",
        ])
        .arg(manifest)
        .args(["--message-format", "json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("starting {what}"))?;
    println!(
        "xtask adapters: {what}: {} after {:.0} s",
        output.status,
        started.elapsed().as_secs_f64()
    );
    if !output.status.success() {
        bail!(
            "{what} failed ({}); its output above says why",
            output.status
        );
    }
    let binaries = test_binaries(&String::from_utf8_lossy(&output.stdout))?;
    if binaries.is_empty() {
        bail!("{what} reported no test binary");
    }
    Ok(binaries)
}

/// The test binaries among cargo's JSON messages (one JSON object a line).
fn test_binaries(messages: &str) -> Result<Vec<TestBinary>> {
    let mut found = Vec::new();
    for line in messages.lines().filter(|l| l.starts_with('{')) {
        let message: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("cargo printed `{line}`"))?;
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(executable) = message["executable"].as_str() else {
            continue;
        };
        if message["profile"]["test"] != true {
            continue;
        }
        let field = |value: &serde_json::Value, what: &str| -> Result<String> {
            value
                .as_str()
                .map(str::to_string)
                .with_context(|| format!("cargo's message has no {what}: {line}"))
        };
        let manifest = PathBuf::from(field(&message["manifest_path"], "manifest_path")?);
        let package_dir = manifest
            .parent()
            .map(Path::to_path_buf)
            .with_context(|| format!("{} has no directory", manifest.display()))?;
        let package = package_name(&message)
            .with_context(|| format!("cargo's message names no package: {line}"))?;
        let kind = message["target"]["kind"]
            .get(0)
            .and_then(|k| k.as_str())
            .unwrap_or("test")
            .to_string();
        found.push(TestBinary {
            package,
            package_dir,
            kind,
            target: field(&message["target"]["name"], "target name")?,
            executable: PathBuf::from(executable),
        });
    }
    Ok(found)
}

/// The package name in a cargo message's `package_id`: "path+file:///…/common#concord-adapter-common@0.1.0"
/// (or, for a package whose directory is its name, "path+file:///…/tract#0.1.0").
fn package_name(message: &serde_json::Value) -> Option<String> {
    let id = message["package_id"].as_str()?;
    let (location, rest) = id.rsplit_once('#')?;
    match rest.split_once('@') {
        Some((name, _version)) => Some(name.to_string()),
        None => location.rsplit('/').next().map(str::to_string),
    }
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
    fn test_binaries_are_read_from_cargo_messages() {
        let messages = [
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/adapters/tract#concord-adapter-tract@0.1.0","manifest_path":"/r/adapters/tract/Cargo.toml","target":{"kind":["test"],"name":"conformance"},"profile":{"test":true},"executable":"/r/adapters/target/debug/deps/conformance-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/adapters/tract#concord-adapter-tract@0.1.0","manifest_path":"/r/adapters/tract/Cargo.toml","target":{"kind":["lib"],"name":"concord_adapter_tract"},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/adapters/common#0.1.0","manifest_path":"/r/adapters/common/Cargo.toml","target":{"kind":["lib"],"name":"concord_adapter_common"},"profile":{"test":true},"executable":"/r/adapters/target/debug/deps/concord_adapter_common-2"}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "Compiling is not JSON and is skipped",
        ]
        .join("\n");
        let found = test_binaries(&messages).expect("well-formed messages");
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].package, "concord-adapter-tract");
        assert_eq!(found[0].kind, "test");
        assert_eq!(found[0].target, "conformance");
        assert_eq!(found[0].package_dir, PathBuf::from("/r/adapters/tract"));
        assert_eq!(
            found[0].executable,
            PathBuf::from("/r/adapters/target/debug/deps/conformance-1")
        );
        assert_eq!(found[1].package, "common");
        assert_eq!(found[1].kind, "lib");
    }

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
