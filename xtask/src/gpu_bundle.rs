//! `cargo xtask gpu-bundle`: packs what a GPU machine needs to run Concord's GPU checks
//! without a Rust toolchain or the source tree, into target/gpu-bundle.tar.gz.
//!
//! Steps, each printed as it runs: build the CUDA crate's test binaries and the conformance
//! test binaries in release mode (`cargo test --no-run --release --message-format=json`,
//! whose compiler-artifact messages name every test executable), build the `concord` CLI in
//! release mode, build the CUDA models benchmark, copy them with golden/, the conformance
//! data (cases, expectations, tolerances.toml, regressions and any other data file in
//! conformance/) and the ONNX node-test data when target/onnx-node-tests exists into
//! target/gpu-bundle/, write run.sh, and tar it. The
//! archive must stay under 60 MiB; debug info is stripped when `strip` is available.
//!
//! run.sh sets CONCORD_REQUIRE=cuda (so a runner whose driver broke fails instead of passing
//! on the CPU), points CONCORD_CONFORMANCE_DIR, CONCORD_GOLDEN_DIR and (when bundled)
//! CONCORD_ONNX_NODE_TESTS at the bundled data, asserts `concord info --require cuda`,
//! runs every test binary, then the models benchmark (batch 1 and 32), writes the
//! conformance reports and the benchmark's medians under reports/ and exits non-zero when
//! anything failed.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BUNDLE_DIR: &str = "target/gpu-bundle";
const ARCHIVE: &str = "target/gpu-bundle.tar.gz";
/// The most the archive may weigh: it is uploaded as a CI artifact and copied to runners.
const MAX_BYTES: u64 = 60 << 20;
/// Packages whose test binaries are bundled whole.
const WHOLE_PACKAGES: &[&str] = &["concord-cuda"];
/// Test targets bundled from every package that has one.
const SHARED_TARGETS: &[&str] = &["conformance"];
/// What in conformance/ is the crate rather than suite data.
const CRATE_ITEMS: &[&str] = &["src", "tests", "examples", "Cargo.toml"];
/// Packages that have a `conformance` test target (the built-in executors).
const CONFORMANCE_PACKAGES: &[&str] = &["concord-cpu", "concord-opencl"];

pub fn run(args: &[String]) -> Result<()> {
    if let Some(extra) = args.first() {
        bail!("`gpu-bundle` takes no arguments, got `{extra}`");
    }
    let root = crate::workspace_root();
    let bundle = root.join(BUNDLE_DIR);
    if bundle.exists() {
        std::fs::remove_dir_all(&bundle)
            .with_context(|| format!("removing the previous {}", bundle.display()))?;
    }
    for dir in ["bin", "tests", "data/conformance"] {
        std::fs::create_dir_all(bundle.join(dir))
            .with_context(|| format!("creating {}", bundle.join(dir).display()))?;
    }

    println!("xtask gpu-bundle: building the test binaries (release)");
    let mut cargo = Command::new(cargo_bin());
    cargo
        .args(["test", "--no-run", "--release", "--message-format=json"])
        .current_dir(&root)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for package in WHOLE_PACKAGES.iter().chain(CONFORMANCE_PACKAGES) {
        cargo.args(["-p", package]);
    }
    let output = cargo.output().context("starting cargo test --no-run")?;
    if !output.status.success() {
        bail!(
            "cargo test --no-run --release failed ({}); its errors are above",
            output.status
        );
    }
    let tests = test_executables(&String::from_utf8_lossy(&output.stdout))?;
    if tests.is_empty() {
        bail!("cargo reported no test executables to bundle");
    }
    for test in &tests {
        let dest = bundle.join("tests").join(&test.name);
        copy_stripped(&test.path, &dest)?;
        println!("  tests/{}", test.name);
    }

    println!("xtask gpu-bundle: building the concord CLI (release)");
    let status = Command::new(cargo_bin())
        .args(["build", "--release", "-p", "concord-cli"])
        .current_dir(&root)
        .status()
        .context("starting cargo build")?;
    if !status.success() {
        bail!("cargo build --release -p concord-cli failed ({status})");
    }
    copy_stripped(
        &root.join("target/release/concord"),
        &bundle.join("bin/concord"),
    )?;

    println!("xtask gpu-bundle: building the CUDA models benchmark (release)");
    let output = Command::new(cargo_bin())
        .args([
            "bench",
            "--no-run",
            "--message-format=json",
            "-p",
            "concord-cuda",
            "--bench",
            "models",
        ])
        .current_dir(&root)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .context("starting cargo bench --no-run")?;
    if !output.status.success() {
        bail!(
            "cargo bench --no-run -p concord-cuda failed ({}); its errors are above",
            output.status
        );
    }
    let bench = bench_executable(&String::from_utf8_lossy(&output.stdout), "models")?
        .context("cargo reported no executable for the concord-cuda `models` bench")?;
    copy_stripped(&bench, &bundle.join("bin/bench-models"))?;
    println!("  bin/bench-models");

    println!("xtask gpu-bundle: copying golden/ and the conformance data");
    copy_tree(&root.join("golden"), &bundle.join("data/golden"))?;
    // Everything in conformance/ but the crate itself is suite data (cases, expectations,
    // tolerances.toml, regressions, the ONNX node-test list…); copying all of it keeps the
    // bundle complete when a new data file appears.
    let conformance = root.join("conformance");
    for entry in std::fs::read_dir(&conformance)
        .with_context(|| format!("reading {}", conformance.display()))?
    {
        let entry = entry?;
        let name = entry.file_name();
        if CRATE_ITEMS.iter().any(|item| name == *item) {
            continue;
        }
        copy_tree(&entry.path(), &bundle.join("data/conformance").join(&name))?;
    }
    // The ONNX node tests are generated, not committed: bundle them when this checkout has
    // them, so the GPU run covers the node/ category too.
    let node_tests = root.join("target/onnx-node-tests");
    if node_tests.is_dir() {
        println!("xtask gpu-bundle: copying the ONNX node-test data");
        copy_tree(&node_tests, &bundle.join("data/onnx-node-tests"))?;
    } else {
        println!(
            "xtask gpu-bundle: no target/onnx-node-tests (run `cargo xtask onnx-node-tests` \
             first): the bundle's node/ category will report its data missing"
        );
    }
    let run_sh = bundle.join("run.sh");
    std::fs::write(&run_sh, RUN_SH).with_context(|| format!("writing {}", run_sh.display()))?;
    make_executable(&run_sh)?;

    println!("xtask gpu-bundle: packing {ARCHIVE}");
    let archive = root.join(ARCHIVE);
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(root.join("target"))
        .arg("gpu-bundle")
        .status()
        .context("starting tar")?;
    if !status.success() {
        bail!("tar failed ({status})");
    }
    let bytes = std::fs::metadata(&archive)
        .with_context(|| format!("reading {}", archive.display()))?
        .len();
    if bytes > MAX_BYTES {
        bail!(
            "{ARCHIVE} is {:.1} MiB, over the {} MiB limit: bundle fewer binaries or strip them",
            bytes as f64 / (1 << 20) as f64,
            MAX_BYTES >> 20
        );
    }
    println!(
        "xtask gpu-bundle: {ARCHIVE} ({:.1} MiB, {} test binaries). On the GPU machine:\n  \
         tar xzf gpu-bundle.tar.gz && gpu-bundle/run.sh",
        bytes as f64 / (1 << 20) as f64,
        tests.len()
    );
    Ok(())
}

/// One test executable cargo built.
#[derive(Debug, PartialEq)]
struct TestExecutable {
    /// `<package>-<target>`, the file name in the bundle.
    name: String,
    path: PathBuf,
}

/// The test executables to bundle, from cargo's JSON messages: every test target of the
/// whole packages, and the shared targets of the others.
fn test_executables(messages: &str) -> Result<Vec<TestExecutable>> {
    let mut out = Vec::new();
    for line in messages.lines().filter(|l| l.starts_with('{')) {
        let message: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("parsing cargo output `{line}`"))?;
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let Some(path) = message["executable"].as_str() else {
            continue;
        };
        let package = message["package_id"]
            .as_str()
            .and_then(package_name)
            .unwrap_or_default();
        let target = message["target"]["name"].as_str().unwrap_or_default();
        let whole = WHOLE_PACKAGES.contains(&package.as_str());
        if whole || SHARED_TARGETS.contains(&target) {
            out.push(TestExecutable {
                name: format!("{package}-{target}"),
                path: PathBuf::from(path),
            });
        }
    }
    Ok(out)
}

/// The executable of the bench target `name`, from cargo's JSON messages.
fn bench_executable(messages: &str, name: &str) -> Result<Option<PathBuf>> {
    for line in messages.lines().filter(|l| l.starts_with('{')) {
        let message: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("parsing cargo output `{line}`"))?;
        let is_bench = message["target"]["kind"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == "bench"));
        if message["reason"] == "compiler-artifact" && is_bench && message["target"]["name"] == name
        {
            if let Some(path) = message["executable"].as_str() {
                return Ok(Some(PathBuf::from(path)));
            }
        }
    }
    Ok(None)
}

/// The package name in a cargo package id: `path+file:///…/crates/cuda#concord-cuda@0.1.0`
/// (or the older `concord-cuda 0.1.0 (path+file:///…)`).
fn package_name(id: &str) -> Option<String> {
    if let Some((path, rest)) = id.rsplit_once('#') {
        // `#name@version`, or just `#version` when the name is the directory's.
        return Some(match rest.split_once('@') {
            Some((name, _)) => name.to_string(),
            None => path.rsplit('/').next().unwrap_or(path).to_string(),
        });
    }
    id.split_whitespace().next().map(str::to_string)
}

/// Copies an executable, then strips its debug info when `strip` is on the PATH (the
/// archive must stay small; line tables are not needed to run).
fn copy_stripped(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    make_executable(to)?;
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg(to)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !stripped {
        println!(
            "  (strip is not available; {} keeps its debug info)",
            to.display()
        );
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    if from.is_file() {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
        return Ok(());
    }
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        copy_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<()> {
    Ok(())
}

fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// The bundle's entry point. It needs bash and a driver, nothing else.
const RUN_SH: &str = r#"#!/usr/bin/env bash
# Runs Concord's GPU checks from a bundle made by `cargo xtask gpu-bundle`: no Rust
# toolchain or source tree needed, only the NVIDIA driver (and, for the kernel compile
# check, libnvrtc on LD_LIBRARY_PATH; without it that one test says it skipped).
#
# CONCORD_REQUIRE=cuda (the default here) makes any CUDA fallback a failure, so a runner
# whose driver broke fails instead of passing on the CPU. Reports go to reports/<binary>/.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CONCORD_REQUIRE="${CONCORD_REQUIRE:-cuda}"
export CONCORD_CONFORMANCE_DIR="$here/data/conformance"
export CONCORD_GOLDEN_DIR="$here/data/golden"
if [[ -d "$here/data/onnx-node-tests" ]]; then
    export CONCORD_ONNX_NODE_TESTS="$here/data/onnx-node-tests"
fi
reports="${CONCORD_REPORTS:-$here/reports}"
failed=()

echo "== concord info --require cuda"
"$here/bin/concord" info || true
"$here/bin/concord" info --require cuda || failed+=("concord info --require cuda")

for test in "$here"/tests/*; do
    name="$(basename "$test")"
    echo "== $name"
    mkdir -p "$reports/$name"
    if [[ "$name" == concord-opencl-* && ",$CONCORD_REQUIRE," != *",opencl,"* ]]; then
        # OpenCL runs where the driver exposes a platform; it is only required when
        # CONCORD_REQUIRE names it, so CI=true alone must not fail an absent platform.
        env -u CI CONCORD_REPORT_DIR="$reports/$name" "$test" || failed+=("$name")
    else
        CONCORD_REPORT_DIR="$reports/$name" "$test" || failed+=("$name")
    fi
done

# One page for the run: every conformance binary's conformance.json merged into
# reports/merged/ (columns executor × target × device). Reports from several runners
# merge the same way: `concord report merge runner-a/reports/merged runner-b/reports/merged`.
merge_inputs=()
for json in "$reports"/*/conformance.json; do
    [[ -f "$json" && "$(basename "$(dirname "$json")")" != merged ]] && merge_inputs+=("$json")
done
if ((${#merge_inputs[@]})); then
    echo "== concord report merge"
    "$here/bin/concord" report merge "${merge_inputs[@]}" --out "$reports/merged" \
        || failed+=("concord report merge")
fi

# The models benchmark (batch 1 and 32, cuda and cuda-fp16, the reference at batch 1):
# medians in reports/bench-models.txt, criterion's data under reports/criterion/.
if [[ -x "$here/bin/bench-models" ]]; then
    echo "== bench-models"
    CRITERION_HOME="$reports/criterion" "$here/bin/bench-models" --bench 2>&1 \
        | tee "$reports/bench-models.txt" || failed+=("bench-models")
fi

if ((${#failed[@]})); then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all GPU checks passed"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_cuda_tests_and_every_conformance_binary() {
        let messages = [
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/cuda#concord-cuda@0.1.0","target":{"name":"fallback","kind":["test"]},"profile":{"test":true},"executable":"/w/target/release/deps/fallback-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/cpu#concord-cpu@0.1.0","target":{"name":"conformance","kind":["test"]},"profile":{"test":true},"executable":"/w/target/release/deps/conformance-2"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/cpu#concord-cpu@0.1.0","target":{"name":"nn_conv","kind":["test"]},"profile":{"test":true},"executable":"/w/target/release/deps/nn_conv-3"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/cuda#concord-cuda@0.1.0","target":{"name":"concord_cuda","kind":["lib"]},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        let picked = test_executables(&messages).expect("parses");
        assert_eq!(
            picked,
            vec![
                TestExecutable {
                    name: "concord-cuda-fallback".into(),
                    path: "/w/target/release/deps/fallback-1".into()
                },
                TestExecutable {
                    name: "concord-cpu-conformance".into(),
                    path: "/w/target/release/deps/conformance-2".into()
                },
            ]
        );
    }

    #[test]
    fn package_names_come_from_both_id_formats() {
        assert_eq!(
            package_name("path+file:///w/crates/cuda#concord-cuda@0.1.0").as_deref(),
            Some("concord-cuda")
        );
        assert_eq!(
            package_name("path+file:///w/xtask#0.1.0").as_deref(),
            Some("xtask")
        );
        assert_eq!(
            package_name("concord-cuda 0.1.0 (path+file:///w/crates/cuda)").as_deref(),
            Some("concord-cuda")
        );
    }

    #[test]
    fn run_sh_requires_cuda_and_points_at_the_bundled_data() {
        assert!(RUN_SH.contains("CONCORD_REQUIRE=\"${CONCORD_REQUIRE:-cuda}\""));
        assert!(RUN_SH.contains("CONCORD_CONFORMANCE_DIR=\"$here/data/conformance\""));
        assert!(RUN_SH.contains("CONCORD_GOLDEN_DIR=\"$here/data/golden\""));
        assert!(RUN_SH.contains("exit 1"));
        assert!(RUN_SH.contains("CONCORD_ONNX_NODE_TESTS=\"$here/data/onnx-node-tests\""));
        assert!(RUN_SH.contains("\"$here/bin/bench-models\" --bench"));
        assert!(RUN_SH.contains("report merge \"${merge_inputs[@]}\" --out \"$reports/merged\""));
    }

    #[test]
    fn finds_the_bench_executable() {
        let messages = [
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/cuda#concord-cuda@0.1.0","target":{"name":"fallback","kind":["test"]},"profile":{"test":true},"executable":"/w/target/release/deps/fallback-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/cuda#concord-cuda@0.1.0","target":{"name":"models","kind":["bench"]},"profile":{"test":true},"executable":"/w/target/release/deps/models-9"}"#,
        ]
        .join("\n");
        assert_eq!(
            bench_executable(&messages, "models").expect("parses"),
            Some(PathBuf::from("/w/target/release/deps/models-9"))
        );
        assert_eq!(bench_executable(&messages, "other").expect("parses"), None);
    }
}
