//! `cargo xtask op-oracle`: computes the expected output of every op case in
//! conformance/cases/ with onnxruntime, into conformance/golden/op-cases/ (the reference
//! executor's op/ trials compare with it; see conformance/src/op_oracle.rs).
//!
//! Steps, each printed as it runs: the suite's own case builder writes every case's model and
//! inputs into target/op-oracle-work (`cargo run -p concord-conformance --example
//! op_oracle_export`), so the oracle runs exactly what the suite runs; then
//! xtask/golden/op_oracle.py runs each through onnxruntime in the golden oracle's pinned venv
//! (target/xtask-venv) and writes the outputs and manifest. With `--check` it writes to
//! target/op-oracle-check instead and compares every file byte for byte with the committed
//! data. With `--compare` the script also runs onnx.reference on every case and prints where
//! it and onnxruntime differ.

use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const WORK_DIR: &str = "target/op-oracle-work";
const CHECK_DIR: &str = "target/op-oracle-check";
const OUT_DIR: &str = "conformance/golden/op-cases";
const SCRIPT: &str = "xtask/golden/op_oracle.py";

pub fn run(args: &[String]) -> Result<()> {
    let mut check = false;
    let mut compare = false;
    for arg in args {
        match arg.as_str() {
            "--check" => check = true,
            "--compare" => compare = true,
            other => bail!("usage: cargo xtask op-oracle [--check] [--compare]; got `{other}`"),
        }
    }
    let root = crate::workspace_root();
    let python = crate::golden::ensure_venv(&root)?;
    let work = root.join(WORK_DIR);
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    println!("xtask op-oracle: writing the op cases' models and inputs to {WORK_DIR}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .args([
            "run",
            "--quiet",
            "-p",
            "concord-conformance",
            "--example",
            "op_oracle_export",
            "--",
        ])
        .arg(&work)
        .current_dir(&root)
        .status()
        .context("starting cargo run --example op_oracle_export")?;
    if !status.success() {
        bail!("op_oracle_export failed ({status}); its output above names the case");
    }
    let out = root.join(if check { CHECK_DIR } else { OUT_DIR });
    if check && out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("removing {}", out.display()))?;
    }
    println!("xtask op-oracle: running {SCRIPT} --out {}", out.display());
    let mut command = Command::new(&python);
    command
        .arg(root.join(SCRIPT))
        .arg("--work")
        .arg(&work)
        .arg("--out")
        .arg(&out)
        .current_dir(&root);
    if compare {
        command.arg("--compare");
    }
    let status = command
        .status()
        .with_context(|| format!("starting {}", python.display()))?;
    if !status.success() {
        bail!("{SCRIPT} failed ({status}); its output above says which case and why");
    }
    if check {
        return compare_trees(&root.join(OUT_DIR), &out);
    }
    println!(
        "xtask op-oracle: done. Read the diff before committing: git status {OUT_DIR} && git diff --stat {OUT_DIR}"
    );
    Ok(())
}

/// Fails naming every file that differs between the committed data and a fresh generation.
fn compare_trees(committed: &Path, fresh: &Path) -> Result<()> {
    let left = list_files(committed, committed)?;
    let right = list_files(fresh, fresh)?;
    let mut problems = Vec::new();
    for path in left.union(&right) {
        match (left.contains(path), right.contains(path)) {
            (true, false) => problems.push(format!("only in {OUT_DIR}: {path}")),
            (false, true) => problems.push(format!("missing from {OUT_DIR}: {path}")),
            _ => {
                if std::fs::read(committed.join(path))? != std::fs::read(fresh.join(path))? {
                    problems.push(format!("differs: {path}"));
                }
            }
        }
    }
    if problems.is_empty() {
        println!(
            "xtask op-oracle --check: {OUT_DIR} matches a fresh generation ({} files)",
            left.len()
        );
        Ok(())
    } else {
        bail!(
            "{OUT_DIR} does not match a fresh generation in {}:\n  {}\nrun `cargo xtask op-oracle` and read the diff",
            fresh.display(),
            problems.join("\n  ")
        )
    }
}

/// Every file under `dir`, relative to `root`.
fn list_files(root: &Path, dir: &Path) -> Result<BTreeSet<String>> {
    let mut files = BTreeSet::new();
    if !dir.exists() {
        return Ok(files);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in
            std::fs::read_dir(&current).with_context(|| format!("listing {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(relative) = path.strip_prefix(root) {
                files.insert(relative.to_string_lossy().into_owned());
            }
        }
    }
    Ok(files)
}
