//! `cargo xtask gpu-bundle`: packs what a GPU machine needs to run Concord's GPU checks
//! without a Rust toolchain or the source tree, into target/gpu-bundle.tar.gz.
//!
//! Steps, each printed as it runs: build the CUDA crate's test binaries and the conformance
//! test binaries in release mode (`cargo test --no-run --release --message-format=json`,
//! whose compiler-artifact messages name every test executable), build the `concord` CLI in
//! release mode, build the CUDA models benchmark, copy them with the conformance data
//! (cases, golden cases, expectations, tolerances.toml, regressions and any other data file
//! in conformance/) and the ONNX node-test data when target/onnx-node-tests exists into
//! target/gpu-bundle/, write run.sh, and tar it. The
//! archive must stay under 60 MiB; debug info is stripped when `strip` is available.
//!
//! run.sh sets CONCORD_REQUIRE=cuda (so a runner whose driver broke fails instead of passing
//! on the CPU), points CONCORD_CONFORMANCE_DIR, CONCORD_GOLDEN_DIR and (when bundled)
//! CONCORD_ONNX_NODE_TESTS at the bundled data, links the machine's libnvrtc and libcublas
//! where the executor looks for them, and runs two stages: `--quick` (the probe, `concord
//! info --require cuda`, stopping there without CUDA; the kernel compile check, the golden
//! and model trials on cuda and cuda-fp16, the fallback tests, a per-node profile of a
//! small CNN) and `--full` (every test binary, then the models benchmark at batch 1 and
//! 32). Each step's output, the conformance reports, the benchmark's medians and a
//! one-screen summary (reports/summary.txt, ending in the verdict) go under reports/; it
//! exits non-zero when anything failed.

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
    // Two builds: every test target of the whole packages, and only the shared targets of
    // the others (building all of concord-cpu's test files would take long and bundle
    // nothing).
    let mut messages = String::new();
    let whole: Vec<&str> = WHOLE_PACKAGES
        .iter()
        .flat_map(|p| ["-p", p])
        .chain(["--tests"])
        .collect();
    let shared: Vec<&str> = CONFORMANCE_PACKAGES
        .iter()
        .flat_map(|p| ["-p", p])
        .chain(SHARED_TARGETS.iter().flat_map(|t| ["--test", t]))
        .collect();
    for selection in [whole, shared] {
        let output = Command::new(cargo_bin())
            .args(["test", "--no-run", "--release", "--message-format=json"])
            .args(&selection)
            .current_dir(&root)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .output()
            .context("starting cargo test --no-run")?;
        if !output.status.success() {
            bail!(
                "cargo test --no-run --release {} failed ({}); its errors are above",
                selection.join(" "),
                output.status
            );
        }
        messages.push_str(&String::from_utf8_lossy(&output.stdout));
        messages.push('\n');
    }
    let tests = test_executables(&messages)?;
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

    println!("xtask gpu-bundle: copying the conformance data");
    // Everything in conformance/ but the crate itself is suite data (cases, golden cases,
    // expectations, tolerances.toml, regressions, the ONNX node-test list…); copying all of
    // it keeps the bundle complete when a new data file appears.
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
         tar xzf gpu-bundle.tar.gz && gpu-bundle/run.sh --quick   (then reports/summary.txt)",
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

/// The bundle's entry point. It needs bash, the driver, libnvrtc and libcublas, nothing
/// else.
const RUN_SH: &str = r#"#!/usr/bin/env bash
# Concord's GPU checks, from a bundle made by `cargo xtask gpu-bundle`: no Rust toolchain or
# source tree, only the NVIDIA driver and the CUDA libraries libnvrtc and libcublas (found
# below, or where CONCORD_CUDA_LIBS points).
#
#   run.sh --quick   the verdict, meant to take under three minutes on an H200: the probe,
#                    `concord info --require cuda`, the kernel compile check, the golden and
#                    model trials on cuda and cuda-fp16, the fallback tests, one per-node
#                    profile of a small CNN on each target
#   run.sh --full    every test binary (the whole conformance suite, with the ONNX node
#                    tests when bundled) and the batch-1 and batch-32 models benchmark
#                    against the reference
#   run.sh           the quick stage, then (if it passed) the full stage
#
# Each stage has a deadline (CONCORD_QUICK_SECONDS, default 420; CONCORD_FULL_SECONDS,
# default 14400): steps are cut short to it, and steps past it are skipped as failures.
#
# Read reports/summary.txt first: one line per step (PASS or FAIL, seconds, its last
# result line) and the verdict. reports/<step>.log is each step's whole output;
# reports/<step>/ holds the conformance reports (JSON, JUnit XML, matrix);
# reports/bench-models.txt the benchmark's medians.
#
# CONCORD_REQUIRE=cuda (the default here) makes any CUDA fallback a failure, so a machine
# whose driver broke fails instead of passing on the CPU; where CUDA is unavailable the run
# stops after the probe and says why.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
stages="quick full"
case "${1:-}" in
    --quick) stages="quick" ;;
    --full) stages="full" ;;
    "") ;;
    -h | --help)
        sed -n '2,25p' "$0"
        exit 0
        ;;
    *)
        echo "run.sh: unknown argument '$1' (expected --quick, --full or nothing)" >&2
        exit 2
        ;;
esac
export CONCORD_REQUIRE="${CONCORD_REQUIRE:-cuda}"
export CONCORD_CONFORMANCE_DIR="$here/data/conformance"
export CONCORD_GOLDEN_DIR="$here/data/conformance/golden"
if [[ -d "$here/data/onnx-node-tests" ]]; then
    export CONCORD_ONNX_NODE_TESTS="$here/data/onnx-node-tests"
fi
reports="${CONCORD_REPORTS:-$here/reports}"
mkdir -p "$reports"
summary="$reports/summary.txt"
failed=()

say() {
    echo "$*" | tee -a "$summary"
}

# The libraries' directories to search, most specific first.
library_dirs() {
    local d
    local -a dirs=()
    IFS=: read -r -a dirs <<< "${CONCORD_CUDA_LIBS:-}:${LD_LIBRARY_PATH:-}"
    printf '%s\n' "${dirs[@]}"
    if command -v python3 > /dev/null; then
        python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2> /dev/null |
            while IFS= read -r d; do
                printf '%s\n' "$d"/nvidia/*/lib "$d"/nvidia/lib
            done
    fi
    printf '%s\n' /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
        /usr/local/cuda-*/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib
}

# find_library NAME: the first libNAME.so, libNAME.so.12 or libNAME.so.1N in library_dirs.
find_library() {
    local name="$1" dir f
    while IFS= read -r dir; do
        [[ -n "$dir" && -d "$dir" ]] || continue
        for f in "$dir/lib$name.so" "$dir/lib$name.so.12" "$dir/lib$name".so.1[0-9]; do
            if [[ -e "$f" ]]; then
                echo "$f"
                return 0
            fi
        done
    done < <(library_dirs)
    return 1
}

# The executor (cudarc, built for the CUDA 12 API) opens libNAME.so or libNAME.so.12. A
# CUDA 13 machine has libnvrtc.so.13 and libcublas.so.13, often only inside Python wheels
# (nvidia/cu13/lib): each library found is linked as lib/libNAME.so here, and its own
# directory goes on LD_LIBRARY_PATH too, for what it loads beside itself
# (libnvrtc-builtins, libcublasLt).
link_cuda_libraries() {
    local libdir="$here/lib" name found path="$here/lib"
    mkdir -p "$libdir"
    for name in nvrtc cublas; do
        if found="$(find_library "$name")"; then
            ln -sf "$found" "$libdir/lib$name.so"
            path="$path:$(dirname "$found")"
            say "lib$name: $found"
        else
            say "lib$name: not found (point CONCORD_CUDA_LIBS at the directory that holds it)"
        fi
    done
    export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# The time the current stage must end by (seconds since the epoch): a step is cut short
# to what is left of it, and one that finds nothing left is skipped and counts as failed,
# so a hung device cannot eat a short lease.
deadline=0

# step NAME SECONDS COMMAND...: runs COMMAND with its output in reports/NAME.log, and adds
# one line to the summary: PASS or FAIL, the seconds it took, its last result line.
step() {
    local name="$1" limit="$2" start code line status left
    shift 2
    start=$(date +%s)
    left=$((deadline - start))
    if ((left < 5)); then
        printf '%-4s %-32s %4ss  %s\n' SKIP "$name" 0 "the stage's time ran out" >> "$summary"
        failed+=("$name")
        return 1
    fi
    if ((limit > left)); then
        limit=$left
    fi
    echo "== $name"
    if command -v timeout > /dev/null; then
        timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$reports/$name.log"
        code=${PIPESTATUS[0]}
    else
        "$@" 2>&1 | tee "$reports/$name.log"
        code=${PIPESTATUS[0]}
    fi
    line="$(grep -E '^test result:|^error|requirement|not met|FAILED|panicked' "$reports/$name.log" | tail -n 1)"
    if ((code == 124)); then
        line="timed out after ${limit}s"
    elif ((code == 0)) && [[ "$line" == "test result: ok. 0 passed;"* ]]; then
        # A filter that matched nothing passes vacuously: here it means the trials are
        # missing, which is a failure.
        code=1
        line="no trial ran: $line"
    fi
    if ((code == 0)); then
        status=PASS
    else
        status=FAIL
        failed+=("$name")
    fi
    printf '%-4s %-32s %4ss  %s\n' "$status" "$name" "$(($(date +%s) - start))" "${line:0:100}" >> "$summary"
    return "$code"
}

# The conformance binaries' reports go to reports/NAME/.
suite() {
    local name="$1" limit="$2" binary="$3"
    shift 3
    mkdir -p "$reports/$name"
    step "$name" "$limit" env CONCORD_REPORT_DIR="$reports/$name" "$binary" "$@"
}

quick() {
    deadline=$(($(date +%s) + ${CONCORD_QUICK_SECONDS:-420}))
    say "== quick stage, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    if command -v nvidia-smi > /dev/null; then
        say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)"
    else
        say "gpu: nvidia-smi is not on the PATH"
    fi
    "$here/bin/concord" info > "$reports/info.txt" 2>&1
    "$here/bin/concord" info --json > "$reports/info.json" 2>&1
    if ! step info-require-cuda 60 "$here/bin/concord" info --require cuda; then
        say "CUDA is unavailable here, so nothing else ran. concord info says:"
        say "$(tail -n 1 "$reports/info-require-cuda.log" | cut -c 1-400)"
        say "VERDICT: FAIL (no usable CUDA device; the probe's whole answer is in reports/info.txt)"
        exit 1
    fi
    grep -E '^ +(kernels|nvrtc|warning): ' "$reports/info.txt" | sed 's/^ */probe: /' | tee -a "$summary"
    step kernels-compile 120 "$here/tests/concord-cuda-kernels_compile"
    suite cuda-golden 240 "$here/tests/concord-cuda-conformance" /golden/
    suite cuda-model 240 "$here/tests/concord-cuda-conformance" /model/
    step cuda-fallback 120 "$here/tests/concord-cuda-fallback"
    local model="$here/data/conformance/golden/exported/torch_resnet/model.onnx" target
    for target in cuda cuda-fp16; do
        step "profile-$target" 120 "$here/bin/concord" run "$model" --target "$target" \
            --random-seed 1 --placement --profile 20
    done
}

full() {
    deadline=$(($(date +%s) + ${CONCORD_FULL_SECONDS:-14400}))
    say "== full stage, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    local test name
    for test in "$here"/tests/*; do
        name="$(basename "$test")"
        if [[ "$name" == concord-opencl-* && ",$CONCORD_REQUIRE," != *",opencl,"* ]]; then
            # OpenCL runs where the driver exposes a platform; it is only required when
            # CONCORD_REQUIRE names it, so CI=true alone must not fail an absent platform.
            suite "$name" 1800 env -u CI "$test"
        else
            suite "$name" 1800 "$test"
        fi
    done
    # The models benchmark: batch 1 and 32 on cuda and cuda-fp16, the reference at batch
    # 1; criterion's data under reports/criterion/, the medians in reports/bench-models.txt.
    if [[ -x "$here/bin/bench-models" ]]; then
        step bench-models 1800 env CRITERION_HOME="$reports/criterion" "$here/bin/bench-models" --bench
        awk '/time:/ { for (i = 1; i <= NF; i++) if ($i == "time:") break;
                       printf "%-40s %s %s\n", (i > 1 ? $1 : name), $(i + 3), $(i + 4); next }
             /^[^ ]/ { name = $1 }' "$reports/bench-models.log" > "$reports/bench-models.txt"
        sed 's/^/bench: /' "$reports/bench-models.txt" | tee -a "$summary"
    fi
}

say "== concord GPU bundle, $(basename "$here"), stages: $stages"
link_cuda_libraries
for stage in $stages; do
    "$stage"
    if ((${#failed[@]})); then
        break
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
    step report-merge 120 "$here/bin/concord" report merge "${merge_inputs[@]}" --out "$reports/merged"
fi

if ((${#failed[@]})); then
    say "VERDICT: FAIL (${failed[*]}); read reports/summary.txt, then each failed step's reports/<step>.log"
    exit 1
fi
say "VERDICT: PASS ($stages)"
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
        assert!(RUN_SH.contains("CONCORD_GOLDEN_DIR=\"$here/data/conformance/golden\""));
        assert!(RUN_SH.contains("exit 1"));
        assert!(RUN_SH.contains("CONCORD_ONNX_NODE_TESTS=\"$here/data/onnx-node-tests\""));
        assert!(RUN_SH.contains("\"$here/bin/bench-models\" --bench"));
        assert!(RUN_SH.contains("report merge \"${merge_inputs[@]}\" --out \"$reports/merged\""));
    }

    #[test]
    fn run_sh_has_a_quick_stage_that_stops_without_cuda() {
        assert!(RUN_SH.contains("--quick) stages=\"quick\""));
        assert!(RUN_SH.contains("--full) stages=\"full\""));
        // The quick stage asserts CUDA first and stops there when it is missing.
        let quick = &RUN_SH[RUN_SH.find("quick() {").expect("a quick stage")..];
        let require = quick.find("info --require cuda").expect("asserts CUDA");
        let golden = quick.find("/golden/").expect("runs the golden trials");
        assert!(require < golden);
        assert!(quick[require..golden].contains("exit 1"));
        for needle in ["/model/", "concord-cuda-kernels_compile", "--profile"] {
            assert!(quick.contains(needle), "the quick stage lacks {needle}");
        }
        // Every test binary named in the quick stage is one the bundle builds.
        for binary in ["concord-cuda-conformance", "concord-cuda-fallback"] {
            assert!(
                WHOLE_PACKAGES.iter().any(|p| binary.starts_with(p)),
                "{binary}"
            );
        }
    }

    #[test]
    fn run_sh_parses() {
        // `bash -n` reads the whole script without running it: a syntax error fails here,
        // not on the GPU machine.
        let dir = std::env::temp_dir().join(format!("concord-run-sh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("run.sh");
        std::fs::write(&path, RUN_SH).expect("writes");
        let status = Command::new("bash").arg("-n").arg(&path).status();
        let _ = std::fs::remove_dir_all(&dir);
        match status {
            Ok(status) => assert!(status.success(), "bash -n run.sh failed"),
            // No bash on this machine: nothing can run run.sh here either.
            Err(e) => println!("SKIPPED bash -n: bash could not be started ({e})"),
        }
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
