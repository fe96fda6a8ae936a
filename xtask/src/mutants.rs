//! `cargo xtask mutants`: mutation testing of the oracle. Runs cargo-mutants (pinned, installed
//! from crates.io into target/tools on first use, so nothing global changes) over the
//! reference executor's kernels, `crates/cpu/src/ops`, with the reference's own tests as the
//! test command, and prints caught / missed / timeout / unviable at the end. Not part of CI:
//! each mutant is an incremental build of concord-cpu and its dependants plus a test run.
//!
//! The test command is `cargo test -p concord-cpu --tests` with `CONCORD_ONNX_NODE_TESTS`
//! set: the crate's hand-derived kernel tests (crates/cpu/tests/*.rs, each expected value
//! worked out from the ONNX definition or a naive loop written in the test) and its
//! `conformance` binary, which compares the reference with onnxruntime on every op/ case
//! (conformance/golden/op-cases/), on the 101 golden and model cases, and with the ONNX
//! node tests' data. concord's `--test golden` runs the same golden manifest through the same
//! `Net` path and is left out: it would add a build of the `concord` test binary to every
//! mutant and catch nothing the conformance binary's golden trials do not. The property
//! trials (`prop/`) are skipped: they compare the reference with itself, so a mutant can fail
//! them only by an error, and they are the slowest trials.
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
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The cargo-mutants release this command installs and runs.
const CARGO_MUTANTS_VERSION: &str = "27.1.0";
/// Where it is installed (`cargo install --root`), under the workspace root.
const TOOLS_ROOT: &str = "target/tools";
/// The directory whose files are mutated, relative to the workspace root.
const OPS_DIR: &str = "crates/cpu/src/ops";
/// cargo-mutants writes `mutants.out/` under this directory.
const OUTPUT_DIR: &str = "target/mutants";

const USAGE: &str = "usage: cargo xtask mutants [--list] [--file GLOB]... [--shard K/N] \
                     [--timeout SECS] [-- EXTRA-CARGO-MUTANTS-ARGS]";

pub fn run(args: &[String]) -> Result<()> {
    let mut files: Vec<String> = Vec::new();
    let mut shard: Option<String> = None;
    let mut timeout: Option<String> = None;
    let mut list = false;
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
            "--" => {
                extra.extend(it.by_ref().cloned());
            }
            other => bail!("unknown argument `{other}` ({USAGE})"),
        }
    }
    let root = crate::workspace_root();
    let tool = ensure_cargo_mutants(&root)?;

    let mut command = Command::new(&tool);
    // Installed as a cargo subcommand, the binary expects `mutants` as its first argument.
    command.arg("mutants").current_dir(&root);
    command.args(["--dir", "."]);
    command.args(["--package", "concord-cpu"]);
    // --file selects the files to mutate; given as paths under crates/cpu/src/ops (or as
    // globs already starting with crates/), and defaulting to the whole directory.
    if files.is_empty() {
        command.args(["--file", &format!("{OPS_DIR}/**")]);
    }
    for file in &files {
        let glob = if file.starts_with("crates/") {
            file.clone()
        } else {
            format!("{OPS_DIR}/{file}")
        };
        command.args(["--file", &glob]);
    }
    if list {
        command.arg("--list");
        command.args(&extra);
        let status = command.status().context("starting cargo-mutants --list")?;
        if !status.success() {
            bail!("cargo-mutants --list failed ({status})");
        }
        return Ok(());
    }
    command.arg("--in-place");
    command.args(["--output", OUTPUT_DIR]);
    // `--tests`: the lib's unit tests and every integration test binary, not the doctests
    // (one compile each, and none of them checks a kernel's values).
    command.arg("--cargo-test-arg=--tests");
    if let Some(shard) = &shard {
        command.args(["--shard", shard]);
    }
    if let Some(timeout) = &timeout {
        command.args(["--timeout", timeout]);
    }
    command.args(&extra);
    // cargo-mutants hands what follows its own `--` to `cargo test`, and cargo what follows a
    // second `--` to every test binary: skip the self-comparing property trials. (With one
    // `--`, cargo itself rejects `--skip` and every mutant would count as caught.)
    command.args(["--", "--", "--skip", "prop/"]);
    match node_tests_dir(&root) {
        Some(dir) => {
            println!("xtask mutants: ONNX node tests from {}", dir.display());
            command.env("CONCORD_ONNX_NODE_TESTS", dir);
        }
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
    let status = command.status().context("starting cargo-mutants")?;
    // cargo-mutants exits non-zero when a mutant is missed or times out; the summary is what
    // matters, so print it first and then pass the verdict on.
    let out = root.join(OUTPUT_DIR).join("mutants.out");
    if status.success() && !out.join("outcomes.json").is_file() {
        // cargo-mutants writes no outcomes when the filters leave no mutant.
        println!("xtask mutants: no mutant matched the filters; nothing was tested");
        return Ok(());
    }
    print_summary(&out)?;
    if !status.success() {
        bail!(
            "cargo-mutants exited with {status}: see {}/missed.txt and timeout.txt (kill each \
             missed mutant with a test, or argue it equivalent in .cargo/mutants.toml)",
            out.display()
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

/// Prints the outcome counts of `mutants.out/outcomes.json`, in total and per file.
fn print_summary(out: &Path) -> Result<()> {
    let path = out.join("outcomes.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (did cargo-mutants start?)", path.display()))?;
    let outcomes: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let Some(list) = outcomes["outcomes"].as_array() else {
        bail!("{}: no `outcomes` array", path.display());
    };
    const KINDS: [&str; 4] = ["caught", "missed", "timeout", "unviable"];
    let mut per_file: BTreeMap<String, [usize; 4]> = BTreeMap::new();
    let mut seconds = 0.0;
    let mut mutants = 0usize;
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
        per_file.entry(file).or_default()[kind] += 1;
        mutants += 1;
        if let Some(phases) = outcome["phase_results"].as_array() {
            for phase in phases {
                seconds += phase["duration"].as_f64().unwrap_or(0.0);
            }
        }
    }
    println!(
        "\nxtask mutants: {mutants} mutants tested ({})",
        out.display()
    );
    println!(
        "  {:<44} {:>7} {:>7} {:>7} {:>8}",
        "file", KINDS[0], KINDS[1], KINDS[2], KINDS[3]
    );
    let mut total = [0usize; 4];
    for (file, counts) in &per_file {
        println!(
            "  {:<44} {:>7} {:>7} {:>7} {:>8}",
            file, counts[0], counts[1], counts[2], counts[3]
        );
        for (sum, count) in total.iter_mut().zip(counts) {
            *sum += count;
        }
    }
    println!(
        "  {:<44} {:>7} {:>7} {:>7} {:>8}",
        "total", total[0], total[1], total[2], total[3]
    );
    if mutants > 0 {
        println!(
            "  {:.0} s of build and test per mutant on average",
            seconds / mutants as f64
        );
    }
    Ok(())
}
