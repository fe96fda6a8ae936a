//! `cargo xtask golden`: regenerates the golden cases in conformance/golden/ with onnxruntime as the
//! oracle, inside a Python virtual environment pinned by xtask/golden/requirements.txt.
//!
//! Steps, each printed as it runs: create target/xtask-venv with `python3 -m venv` if it is
//! missing; `pip install -r` the pinned requirements when they changed since the last install
//! (a stamp file in the venv remembers what was installed); run xtask/golden/generate.py.
//! With `--check`, the generator writes to target/golden-check instead and every file is
//! compared byte for byte with conformance/golden/, so a CI job with Python can prove the committed data
//! is what the pinned oracle produces.
//!
//! With `--export`, the PyTorch/torchvision models are exported first: a second venv,
//! target/export-venv pinned by xtask/golden/requirements-export.txt (torch is large and the
//! oracle must not depend on it), runs xtask/golden/export.py, which rewrites
//! conformance/golden/exported/ (model.onnx and spec.json per case); then the generator runs as without
//! the flag, and makes those cases' inputs and onnxruntime outputs. Without `--export` the
//! committed conformance/golden/exported/ models are used as they are, so only the oracle's venv is needed.

use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `--check` regenerates, under target/ so it is never committed.
const CHECK_DIR: &str = "target/golden-check";
const VENV_DIR: &str = "target/xtask-venv";
const REQUIREMENTS: &str = "xtask/golden/requirements.txt";
const GENERATOR: &str = "xtask/golden/generate.py";
/// The exporter's environment and script, and where it writes (inside conformance/golden/).
const EXPORT_VENV_DIR: &str = "target/export-venv";
const EXPORT_REQUIREMENTS: &str = "xtask/golden/requirements-export.txt";
const EXPORTER: &str = "xtask/golden/export.py";
const EXPORTED_DIR: &str = "conformance/golden/exported";
/// The golden cases: suite data, so they live in (and are packaged with) the conformance crate.
const GOLDEN_DIR: &str = "conformance/golden";
/// The venv's record of the requirements it was last installed from.
const STAMP: &str = "concord-requirements.txt";

/// Which mode `golden` runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Rewrite conformance/golden/ in place.
    Write,
    /// Generate elsewhere and compare with conformance/golden/.
    Check,
    /// Export the PyTorch models into conformance/golden/exported/, then rewrite conformance/golden/.
    Export,
}

pub fn run(args: &[String]) -> Result<()> {
    let mode = match args {
        [] => Mode::Write,
        [flag] if flag == "--check" => Mode::Check,
        [flag] if flag == "--export" => Mode::Export,
        _ => bail!(
            "usage: cargo xtask golden [--check | --export]; got `{}`",
            args.join(" ")
        ),
    };
    let root = crate::workspace_root();
    if mode == Mode::Export {
        let exporter = ensure_venv_at(&root, EXPORT_VENV_DIR, EXPORT_REQUIREMENTS)?;
        println!("xtask golden: running {EXPORTER} --out {EXPORTED_DIR}");
        let status = Command::new(&exporter)
            .arg(root.join(EXPORTER))
            .arg("--out")
            .arg(root.join(EXPORTED_DIR))
            .current_dir(&root)
            .status()
            .with_context(|| format!("starting {}", exporter.display()))?;
        if !status.success() {
            bail!("{EXPORTER} failed ({status}); its output above says which model and why");
        }
    }
    let python = ensure_venv(&root)?;
    let out = match mode {
        Mode::Write | Mode::Export => root.join(GOLDEN_DIR),
        Mode::Check => root.join(CHECK_DIR),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    if mode == Mode::Check {
        // The generator reads the exported models from <out>/exported: the committed ones.
        copy_tree(&root.join(EXPORTED_DIR), &out.join("exported"))?;
    }
    println!("xtask golden: running {GENERATOR} --out {}", out.display());
    let status = Command::new(&python)
        .arg(root.join(GENERATOR))
        .arg("--out")
        .arg(&out)
        .current_dir(&root)
        .status()
        .with_context(|| format!("starting {}", python.display()))?;
    if !status.success() {
        bail!("{GENERATOR} failed ({status}); its output above says which case and why");
    }
    match mode {
        Mode::Write | Mode::Export => {
            println!(
                "xtask golden: done. Read the diff before committing: git status conformance/golden/ && git diff --stat conformance/golden/"
            );
            Ok(())
        }
        Mode::Check => compare_trees(&root.join(GOLDEN_DIR), &out),
    }
}

/// Makes sure the oracle's pinned venv exists and is up to date; returns its Python. The
/// adapters' onnxruntime is the same wheel (`cargo xtask adapters`).
pub(crate) fn ensure_venv(root: &Path) -> Result<PathBuf> {
    ensure_venv_at(root, VENV_DIR, REQUIREMENTS)
}

/// Makes sure the venv `dir`, pinned by `requirements`, exists and is up to date; returns
/// its Python interpreter.
fn ensure_venv_at(root: &Path, dir: &str, requirements_file: &str) -> Result<PathBuf> {
    let venv = root.join(dir);
    let python = venv.join("bin").join("python");
    if !python.exists() {
        println!("xtask golden: creating Python venv {}", venv.display());
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .context(
                "could not run python3: install Python 3 (Debian: apt-get install python3 python3-venv)",
            )?;
        if !status.success() {
            bail!(
                "`python3 -m venv {}` failed ({status}); on Debian the venv module is in the \
                 python3-venv package",
                venv.display()
            );
        }
    }
    let requirements_path = root.join(requirements_file);
    let requirements = std::fs::read_to_string(&requirements_path)
        .with_context(|| format!("reading {}", requirements_path.display()))?;
    let stamp = venv.join(STAMP);
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(requirements.as_str()) {
        println!(
            "xtask golden: venv {} already has the pinned packages",
            venv.display()
        );
        return Ok(python);
    }
    println!("xtask golden: pip install -r {requirements_file}");
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "-r",
        ])
        .arg(&requirements_path)
        .status()
        .with_context(|| format!("starting {}", python.display()))?;
    if !status.success() {
        bail!(
            "pip install -r {requirements_file} failed ({status}): check that PyPI is reachable and \
             that the pinned versions have wheels for this Python ({})",
            python.display()
        );
    }
    std::fs::write(&stamp, &requirements)
        .with_context(|| format!("writing {}", stamp.display()))?;
    Ok(python)
}

/// Compares two directory trees file by file and fails naming every difference.
fn compare_trees(committed: &Path, fresh: &Path) -> Result<()> {
    let left = list_files(committed)?;
    let right = list_files(fresh)?;
    let mut problems = Vec::new();
    for path in left.union(&right) {
        match (left.contains(path), right.contains(path)) {
            (true, false) => problems.push(format!("only in conformance/golden/: {path}")),
            (false, true) => problems.push(format!("missing from conformance/golden/: {path}")),
            _ => {
                let a = std::fs::read(committed.join(path))?;
                let b = std::fs::read(fresh.join(path))?;
                if a != b {
                    problems.push(format!("differs: {path}"));
                }
            }
        }
    }
    if problems.is_empty() {
        println!(
            "xtask golden --check: conformance/golden/ matches a fresh generation ({} files)",
            left.len()
        );
        Ok(())
    } else {
        bail!(
            "conformance/golden/ does not match a fresh generation in {}:\n  {}\nrun `cargo xtask golden` and read the diff",
            fresh.display(),
            problems.join("\n  ")
        )
    }
}

/// Copies every file under `from` to the same place under `to`, replacing `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to).with_context(|| format!("removing {}", to.display()))?;
    }
    if !from.exists() {
        return Ok(());
    }
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((source, target)) = stack.pop() {
        std::fs::create_dir_all(&target)
            .with_context(|| format!("creating {}", target.display()))?;
        for entry in
            std::fs::read_dir(&source).with_context(|| format!("listing {}", source.display()))?
        {
            let path = entry?.path();
            let Some(name) = path.file_name() else {
                continue;
            };
            if path.is_dir() {
                stack.push((path.clone(), target.join(name)));
            } else {
                std::fs::copy(&path, target.join(name))
                    .with_context(|| format!("copying {}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// Every file the generator owns under `dir` (the manifest and cases/), relative to `dir`.
/// Hand-written files such as conformance/golden/README.md are not the generator's and are left out.
fn list_files(dir: &Path) -> Result<BTreeSet<String>> {
    let mut files = BTreeSet::new();
    if dir.join("manifest.json").exists() {
        files.insert("manifest.json".to_string());
    }
    let mut stack = vec![dir.join("cases")];
    while let Some(current) = stack.pop() {
        if !current.exists() {
            continue;
        }
        for entry in
            std::fs::read_dir(&current).with_context(|| format!("listing {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir) {
                files.insert(relative.to_string_lossy().into_owned());
            }
        }
    }
    Ok(files)
}
