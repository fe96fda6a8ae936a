//! `cargo xtask mutants`: mutation testing of the oracle. Runs cargo-mutants (pinned, installed
//! from crates.io into target/tools on first use, so nothing global changes) over the
//! reference executor's kernels, `crates/cpu/src/ops`, with the reference's own tests as the
//! test command, and prints caught / missed / timeout / unviable at the end. Not part of CI:
//! each mutant is an incremental build of concord-cpu and its dependants plus a test run.
//!
//! The test command is `cargo test -p concord-cpu` with `CONCORD_ONNX_NODE_TESTS` set, over
//! the test binaries that can run the mutated file's code (`TEST_SETS`): always the
//! `conformance` binary, which compares the reference with onnxruntime on every op/ case
//! (conformance/golden/op-cases/), on the 101 golden and model cases, and with the ONNX node
//! tests' data; and the hand-derived kernel tests (crates/cpu/tests/*.rs, each expected value
//! worked out from the ONNX definition or a naive loop written in the test) of the file's
//! family, of its inference tests (which run the kernels to compare shapes) and of the
//! families whose kernels call into the file. The lib's own unit tests (`--lib`) are run only
//! for the files they reach (matrix.rs, spatial.rs, elementwise/erf.rs): building them
//! compiles concord-cpu a second time, with `cfg(test)`, for every mutant. A file without an
//! entry, or every file under `--all-tests`, gets every test binary (`--tests`). Since
//! cargo-mutants runs one test command per invocation, the xtask invokes it once per group of
//! files sharing a test set, each with its own output directory, and adds up the outcomes.
//!
//! concord's `--test golden` runs the same golden manifest through the same `Net` path and is
//! left out: it would add a build of the `concord` test binary to every mutant and catch
//! nothing the conformance binary's golden trials do not. The property trials (`prop/`) are
//! skipped: they compare the reference with itself, so a mutant can fail them only by an
//! error, and they are the slowest trials.
//!
//! Per-mutant cost: cargo-mutants by default copies the tree to a temporary directory and
//! builds there from cold (minutes of build per run on a 2-core machine before the first
//! mutant). This xtask passes `--in-place`: mutants are applied to this checkout one at a
//! time (and reverted after each) and built in its own `target/`, which is already warm, so
//! each mutant costs one incremental rebuild. The catch is that the checkout must not be
//! edited while it runs. Builds honour `CARGO_BUILD_JOBS` (set it to 1 on a shared machine).
//!
//! Exclusions (mutants argued equivalent, each with its reason) live in
//! `.cargo/mutants.toml`, which cargo-mutants reads from the workspace root.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The cargo-mutants release this command installs and runs.
const CARGO_MUTANTS_VERSION: &str = "27.1.0";
/// Where it is installed (`cargo install --root`), under the workspace root.
const TOOLS_ROOT: &str = "target/tools";
/// The directory whose files are mutated, relative to the workspace root.
const OPS_DIR: &str = "crates/cpu/src/ops";
/// concord-cpu built without optimisation for this run only (a `cargo --config` override, so
/// Cargo.toml and the ordinary builds are untouched). At the test profile's `opt-level = 2`, a
/// mutant's rebuild spent 18 of its 24 seconds optimising concord-cpu; at 0 the rebuild takes
/// 4 seconds and the tests a few seconds longer (the conformance binary 4 s instead of 0.8 s),
/// with the same arithmetic: Rust has no fast-math, and overflow checks are on at every
/// opt-level of the test profile. The crates above it (concord-opencl, concord,
/// concord-conformance) rebuild under their own hash beside the optimised ones, once.
const UNOPTIMISED_REFERENCE: &str = "profile.test.package.concord-cpu.opt-level=0";
/// Each group of files writes its `mutants.out/` under a directory of its own in here.
const OUTPUT_DIR: &str = "target/mutants";

const USAGE: &str = "usage: cargo xtask mutants [--list] [--file GLOB]... [--shard K/N] \
                     [--timeout SECS] [--all-tests] [-- EXTRA-CARGO-MUTANTS-ARGS]";

/// The tests that can catch a mutant of one file of `crates/cpu/src/ops`.
struct TestSet {
    /// The file, relative to `crates/cpu/src/ops`.
    file: &'static str,
    /// Whether the lib's unit tests reach it (only matrix.rs, spatial.rs and erf.rs have any).
    lib: bool,
    /// concord-cpu's kernel-test binaries (crates/cpu/tests/NAME.rs) that run its code, besides
    /// `conformance`, which every set has.
    binaries: &'static [&'static str],
}

const fn kernel_tests(file: &'static str, binaries: &'static [&'static str]) -> TestSet {
    TestSet {
        file,
        lib: false,
        binaries,
    }
}

const fn with_unit_tests(file: &'static str, binaries: &'static [&'static str]) -> TestSet {
    TestSet {
        file,
        lib: true,
        binaries,
    }
}

/// Which test binaries run each file's code: the file's family kernel tests, its family's
/// inference tests (they run the kernels to compare shapes), and the kernel tests of the
/// files that call into it. A file not listed here (mod.rs, elementwise.rs, movement.rs,
/// spatial.rs: helpers of every family) gets all of concord-cpu's test binaries.
const TEST_SETS: &[TestSet] = &[
    kernel_tests("algebra.rs", &["algebra_selection"]),
    kernel_tests("attention.rs", &["elementwise_attention"]),
    kernel_tests("control.rs", &["control_flow"]),
    // QLinearConv and ConvInteger (quant.rs) call conv(); quant.rs's own tests check dtypes only.
    kernel_tests("conv.rs", &["nn_col2im", "nn_conv", "nn_infer"]),
    // DeformConv is in sampling_regions, and sampling.rs calls into deform.rs.
    kernel_tests("deform.rs", &["sampling", "sampling_regions"]),
    // control_flow's subgraphs and opset_26_to_28_ops' BitShift run Binary ops.
    kernel_tests(
        "elementwise/binary.rs",
        &[
            "control_flow",
            "elementwise_binary",
            "elementwise_infer",
            "opset_26_to_28_ops",
        ],
    ),
    with_unit_tests("elementwise/erf.rs", &["elementwise_unary"]),
    kernel_tests(
        "elementwise/unary.rs",
        &["elementwise_infer", "elementwise_unary"],
    ),
    // conv.rs, deform.rs and roi.rs use its dtype check; quant.rs calls matmul().
    kernel_tests(
        "gemm.rs",
        &["nn_conv", "nn_gemm", "nn_infer", "sampling_regions"],
    ),
    // Indexing also routes CumProd, BitCast and TensorScatter, and NonMaxSuppression and
    // Unique (selection.rs), TfIdfVectorizer (ngram.rs).
    kernel_tests(
        "indexing.rs",
        &[
            "algebra_selection",
            "indexing",
            "opset_26_to_28_ops",
            "scatter_tfidf",
        ],
    ),
    kernel_tests("loss.rs", &["loss"]),
    // Gemm, MatMul, Conv, ConvTranspose and DeformConv multiply on it.
    with_unit_tests(
        "matrix.rs",
        &["nn_conv", "nn_gemm", "nn_infer", "sampling_regions"],
    ),
    kernel_tests("movement/arrange.rs", &["movement_arrange"]),
    kernel_tests("movement/cast.rs", &["movement_cast"]),
    kernel_tests("movement/join.rs", &["movement_join"]),
    kernel_tests("movement/reshape.rs", &["movement_reshape"]),
    kernel_tests("movement/select.rs", &["movement_select"]),
    kernel_tests("ngram.rs", &["scatter_tfidf"]),
    kernel_tests("norm.rs", &["elementwise_infer", "elementwise_norm"]),
    kernel_tests("pool.rs", &["nn_infer", "nn_pool"]),
    kernel_tests("quant.rs", &["quant"]),
    kernel_tests("random.rs", &["random"]),
    kernel_tests("recurrent.rs", &["nn_recurrent"]),
    kernel_tests("reduce.rs", &["elementwise_infer", "elementwise_reduce"]),
    kernel_tests("resize.rs", &["nn_infer", "nn_resize"]),
    // RoiAlign and MaxRoiPool; sampling.rs calls into roi.rs.
    kernel_tests("roi.rs", &["sampling", "sampling_regions"]),
    kernel_tests("sampling.rs", &["sampling", "sampling_regions"]),
    kernel_tests("selection.rs", &["algebra_selection"]),
    // SwiGLU, LinearAttention and CausalConvWithState.
    kernel_tests("sequence.rs", &["opset_26_to_28_ops"]),
    kernel_tests("signal.rs", &["signal"]),
];

/// The `cargo test` selection of one group: `--tests` (every binary), or the lib's unit tests
/// (or not) and the named binaries, `conformance` first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TestSelection {
    All,
    Some {
        lib: bool,
        binaries: Vec<&'static str>,
    },
}

impl TestSelection {
    fn for_file(file: &str, all_tests: bool) -> TestSelection {
        let relative = file
            .strip_prefix(OPS_DIR)
            .map(|f| f.trim_start_matches('/'));
        match TEST_SETS.iter().find(|set| Some(set.file) == relative) {
            Some(set) if !all_tests => {
                let mut binaries = vec!["conformance"];
                binaries.extend(set.binaries);
                TestSelection::Some {
                    lib: set.lib,
                    binaries,
                }
            }
            _ => TestSelection::All,
        }
    }

    /// cargo-mutants' arguments for this selection: `--cargo-arg`, which goes to both the
    /// build (`cargo test --no-run`) and the test run; `--cargo-test-arg` would reach only the
    /// test run, and the build would compile every test binary for every mutant anyway.
    fn cargo_args(&self) -> Vec<String> {
        match self {
            TestSelection::All => vec!["--cargo-arg=--tests".to_string()],
            TestSelection::Some { lib, binaries } => {
                let lib = lib.then(|| "--cargo-arg=--lib".to_string());
                lib.into_iter()
                    .chain(binaries.iter().map(|b| format!("--cargo-arg=--test={b}")))
                    .collect()
            }
        }
    }

    /// The group's output directory name, e.g. `conformance+nn_gemm+nn_infer`.
    fn label(&self) -> String {
        match self {
            TestSelection::All => "all-tests".to_string(),
            TestSelection::Some { lib, binaries } => {
                let lib = lib.then_some("lib");
                lib.into_iter()
                    .chain(binaries.iter().copied())
                    .collect::<Vec<_>>()
                    .join("+")
            }
        }
    }
}

pub fn run(args: &[String]) -> Result<()> {
    let mut files: Vec<String> = Vec::new();
    let mut shard: Option<String> = None;
    let mut timeout: Option<String> = None;
    let mut list = false;
    let mut all_tests = false;
    let mut extra: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--file" | "-f" => files.push(it.next().context("--file needs a glob")?.clone()),
            "--shard" => shard = Some(it.next().context("--shard needs K/N")?.clone()),
            "--timeout" => {
                let value = it.next().context("--timeout needs seconds")?;
                value
                    .parse::<f64>()
                    .with_context(|| format!("--timeout {value:?}: expected seconds"))?;
                timeout = Some(value.clone());
            }
            "--list" => list = true,
            "--all-tests" => all_tests = true,
            "--" => {
                extra.extend(it.by_ref().cloned());
            }
            other => bail!("unknown argument `{other}` ({USAGE})"),
        }
    }
    let root = crate::workspace_root();
    let tool = ensure_cargo_mutants(&root)?;
    // --file selects the files to mutate; given as paths under crates/cpu/src/ops (or as
    // globs already starting with crates/), and defaulting to the whole directory.
    let globs: Vec<String> = if files.is_empty() {
        vec![format!("{OPS_DIR}/**")]
    } else {
        files
            .iter()
            .map(|file| {
                if file.starts_with("crates/") {
                    file.clone()
                } else {
                    format!("{OPS_DIR}/{file}")
                }
            })
            .collect()
    };
    let cargo_mutants = |file_globs: &[String]| {
        let mut command = Command::new(&tool);
        // Installed as a cargo subcommand, the binary expects `mutants` as its first argument.
        command.arg("mutants").current_dir(&root);
        command.args(["--dir", "."]);
        command.args(["--package", "concord-cpu"]);
        for glob in file_globs {
            command.args(["--file", glob]);
        }
        command
    };
    if list {
        let mut command = cargo_mutants(&globs);
        command.arg("--list");
        command.args(&extra);
        let status = command.status().context("starting cargo-mutants --list")?;
        if !status.success() {
            bail!("cargo-mutants --list failed ({status})");
        }
        return Ok(());
    }

    // Which files the filters leave mutants in, as cargo-mutants itself resolves the globs,
    // `--re`, `--exclude` and the exclusions of .cargo/mutants.toml; then one group per test set.
    let mut command = cargo_mutants(&globs);
    command.args(["--list", "--json"]).args(&extra);
    let output = command
        .output()
        .context("starting cargo-mutants --list --json")?;
    if !output.status.success() {
        bail!(
            "cargo-mutants --list --json failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout)
        .context("parsing the mutants cargo-mutants --list --json printed")?;
    let mut groups: BTreeMap<TestSelection, BTreeSet<String>> = BTreeMap::new();
    for mutant in listed
        .as_array()
        .context("cargo-mutants --list --json: not an array")?
    {
        let file = mutant["file"]
            .as_str()
            .context("a listed mutant without `file`")?;
        groups
            .entry(TestSelection::for_file(file, all_tests))
            .or_default()
            .insert(file.to_string());
    }
    if groups.is_empty() {
        println!("xtask mutants: no mutant matched the filters; nothing was tested");
        return Ok(());
    }

    let node_tests = node_tests_dir(&root);
    match &node_tests {
        Some(dir) => println!("xtask mutants: ONNX node tests from {}", dir.display()),
        None => println!(
            "xtask mutants: no ONNX node tests (set CONCORD_ONNX_NODE_TESTS or run `cargo \
             xtask onnx-node-tests`): the reference is checked by its kernel tests, op/ \
             oracles and goldens only, so more mutants may be missed"
        ),
    }
    if std::env::var_os("CARGO_BUILD_JOBS").is_none() {
        println!("xtask mutants: CARGO_BUILD_JOBS is unset; on a shared machine set it to 1");
    }
    println!(
        "xtask mutants: mutating this checkout in place (do not edit it until this ends; an \
         interrupted run reverts the file it was mutating)"
    );
    let mut outputs = Vec::new();
    let mut failures = Vec::new();
    for (selection, files) in &groups {
        let out = Path::new(OUTPUT_DIR).join(selection.label());
        println!(
            "\nxtask mutants: {} with `cargo test -p concord-cpu {}`",
            files
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            selection
                .cargo_args()
                .iter()
                .map(|arg| arg.trim_start_matches("--cargo-arg="))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let files: Vec<String> = files.iter().cloned().collect();
        let mut command = cargo_mutants(&files);
        command.arg("--in-place");
        // cargo-mutants' own jobserver (on by default, one token per CPU) would override
        // CARGO_BUILD_JOBS in the cargo it starts; without it cargo keeps to that limit.
        command.arg("--jobserver=false");
        command.arg("--output").arg(&out);
        command.arg(format!("--cargo-arg=--config={UNOPTIMISED_REFERENCE}"));
        command.args(selection.cargo_args());
        if let Some(shard) = &shard {
            command.args(["--shard", shard]);
        }
        if let Some(timeout) = &timeout {
            command.args(["--timeout", timeout]);
        }
        command.args(&extra);
        // cargo-mutants hands what follows its own `--` to `cargo test`, and cargo what
        // follows a second `--` to every test binary: skip the self-comparing property trials.
        // (With one `--`, cargo itself rejects `--skip` and every mutant would count as caught.)
        command.args(["--", "--", "--skip", "prop/"]);
        if let Some(dir) = &node_tests {
            command.env("CONCORD_ONNX_NODE_TESTS", dir);
        }
        // cargo-mutants creates mutants.out/ but not the directory that holds it.
        std::fs::create_dir_all(root.join(&out))
            .with_context(|| format!("creating {}", out.display()))?;
        // Outcomes of an earlier run in the same directory must not be counted as this one's.
        let outcomes = root.join(&out).join("mutants.out/outcomes.json");
        if outcomes.is_file() {
            std::fs::remove_file(&outcomes)
                .with_context(|| format!("removing the stale {}", outcomes.display()))?;
        }
        let status = command.status().context("starting cargo-mutants")?;
        // cargo-mutants exits non-zero when a mutant is missed or times out; the summary is
        // what matters, so it is printed first and the verdict passed on after it. It writes
        // no outcomes when a shard leaves this group no mutant.
        if outcomes.is_file() {
            outputs.push(root.join(&out).join("mutants.out"));
        }
        if !status.success() {
            failures.push(format!("{} ({status})", out.display()));
        }
    }
    print_summary(&outputs)?;
    if !failures.is_empty() {
        bail!(
            "cargo-mutants failed in {}: see missed.txt and timeout.txt there (kill each missed \
             mutant with a test, or argue it equivalent in .cargo/mutants.toml)",
            failures.join(", ")
        );
    }
    Ok(())
}

/// The pinned cargo-mutants binary, installed under target/tools when missing or when the
/// one there is another version.
fn ensure_cargo_mutants(root: &Path) -> Result<PathBuf> {
    let tool = root.join(TOOLS_ROOT).join("bin/cargo-mutants");
    let wanted = format!("cargo-mutants {CARGO_MUTANTS_VERSION}");
    if tool.is_file() {
        let output = Command::new(&tool)
            .args(["mutants", "--version"])
            .output()
            .with_context(|| format!("running {} --version", tool.display()))?;
        if String::from_utf8_lossy(&output.stdout).trim() == wanted {
            return Ok(tool);
        }
    }
    println!("xtask mutants: installing {wanted} into {TOOLS_ROOT}");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "install",
            "--locked",
            &format!("cargo-mutants@{CARGO_MUTANTS_VERSION}"),
            "--root",
        ])
        .arg(root.join(TOOLS_ROOT))
        .current_dir(root)
        .status()
        .context("starting cargo install")?;
    if !status.success() {
        bail!("cargo install cargo-mutants@{CARGO_MUTANTS_VERSION} failed ({status})");
    }
    Ok(tool)
}

/// `CONCORD_ONNX_NODE_TESTS` when set, else target/onnx-node-tests when generated.
fn node_tests_dir(root: &Path) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CONCORD_ONNX_NODE_TESTS") {
        return Some(PathBuf::from(dir));
    }
    let generated = root.join("target/onnx-node-tests");
    generated.is_dir().then_some(generated)
}

/// Prints the outcome counts of the groups' `mutants.out/outcomes.json`, in total and per
/// file, with each file's mean seconds of build and test per mutant.
fn print_summary(outputs: &[PathBuf]) -> Result<()> {
    const KINDS: [&str; 4] = ["caught", "missed", "timeout", "unviable"];
    let mut per_file: BTreeMap<String, ([usize; 4], f64)> = BTreeMap::new();
    for out in outputs {
        let path = out.join("outcomes.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {} (did cargo-mutants start?)", path.display()))?;
        let outcomes: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let Some(list) = outcomes["outcomes"].as_array() else {
            bail!("{}: no `outcomes` array", path.display());
        };
        for outcome in list {
            // The baseline is recorded as an outcome too; only mutants are counted.
            let Some(mutant) = outcome["scenario"].get("Mutant") else {
                continue;
            };
            let file = mutant["file"].as_str().unwrap_or("?").to_string();
            let summary = outcome["summary"].as_str().unwrap_or("?");
            let kind = match summary {
                "CaughtMutant" => 0,
                "MissedMutant" => 1,
                "Timeout" => 2,
                "Unviable" => 3,
                other => bail!("{}: unknown outcome `{other}`", path.display()),
            };
            let entry = per_file.entry(file).or_default();
            entry.0[kind] += 1;
            if let Some(phases) = outcome["phase_results"].as_array() {
                for phase in phases {
                    entry.1 += phase["duration"].as_f64().unwrap_or(0.0);
                }
            }
        }
    }
    let mutants: usize = per_file
        .values()
        .map(|(counts, _)| counts.iter().sum::<usize>())
        .sum();
    let places: Vec<String> = outputs
        .iter()
        .map(|out| out.display().to_string())
        .collect();
    println!(
        "\nxtask mutants: {mutants} mutants tested ({})",
        places.join(", ")
    );
    println!(
        "  {:<44} {:>7} {:>7} {:>7} {:>8} {:>9}",
        "file", KINDS[0], KINDS[1], KINDS[2], KINDS[3], "s/mutant"
    );
    let mut total = [0usize; 4];
    let mut seconds = 0.0;
    for (file, (counts, file_seconds)) in &per_file {
        let n = counts.iter().sum::<usize>().max(1) as f64;
        println!(
            "  {:<44} {:>7} {:>7} {:>7} {:>8} {:>9.0}",
            file,
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            file_seconds / n
        );
        for (sum, count) in total.iter_mut().zip(counts) {
            *sum += count;
        }
        seconds += file_seconds;
    }
    println!(
        "  {:<44} {:>7} {:>7} {:>7} {:>8} {:>9.0}",
        "total",
        total[0],
        total[1],
        total[2],
        total[3],
        seconds / mutants.max(1) as f64
    );
    Ok(())
}
