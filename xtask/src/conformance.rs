//! `cargo xtask conformance`: builds the `concord` binary in release mode and runs
//! `concord conform` with the same flags, so the suite runs exactly as the README's main
//! job does; then says where the reports are. `--features F` goes to cargo (for example
//! `--features cuda`) instead of to `concord conform`. `--record-floors` goes to
//! `concord conform`, which then records each executor's floors and trial list into
//! conformance/expectations/ instead of checking them (conformance/src/floors.rs).

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// Where the reports go unless `--report-dir` says otherwise (under the workspace root).
const DEFAULT_REPORT_DIR: &str = "target/conformance-report";
/// What `conform` writes, to list after the run.
const REPORT_FILES: [&str; 4] = ["matrix.html", "matrix.md", "junit.xml", "conformance.json"];

/// The flags split between cargo and `concord conform`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Split {
    cargo_features: Vec<String>,
    conform_args: Vec<String>,
    report_dir: Option<PathBuf>,
}

pub fn run(args: &[String]) -> Result<()> {
    let root = crate::workspace_root();
    let mut split = split_args(args)?;
    let report_dir = match &split.report_dir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        // A relative directory means relative to where the user ran the command, but
        // `concord conform` runs from the workspace root: make it absolute here.
        Some(dir) => std::env::current_dir()
            .context("reading the current directory")?
            .join(dir),
        None => root.join(DEFAULT_REPORT_DIR),
    };
    split.conform_args.push("--report-dir".to_string());
    split
        .conform_args
        .push(report_dir.to_string_lossy().into_owned());
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["run", "--release", "-p", "concord-cli"]);
    for feature in &split.cargo_features {
        command.args(["--features", feature]);
    }
    command
        .arg("--")
        .arg("conform")
        .args(&split.conform_args)
        .current_dir(&root);
    println!(
        "xtask conformance: cargo run --release -p concord-cli{} -- conform {}",
        split
            .cargo_features
            .iter()
            .map(|f| format!(" --features {f}"))
            .collect::<String>(),
        split.conform_args.join(" ")
    );
    let status = command.status().context("starting cargo")?;
    let written: Vec<PathBuf> = REPORT_FILES
        .iter()
        .map(|name| report_dir.join(name))
        .filter(|p| p.is_file())
        .collect();
    if written.is_empty() {
        println!("xtask conformance: no report was written");
    } else {
        println!("xtask conformance: reports");
        for path in &written {
            println!("  {}", path.display());
        }
    }
    if !status.success() {
        bail!("concord conform failed ({status}); the summary above lists every failure");
    }
    Ok(())
}

/// Takes `--features` (for cargo) and `--report-dir` (made absolute) out of the flags;
/// everything else goes to `concord conform` unchanged, which checks it.
fn split_args(args: &[String]) -> Result<Split> {
    let mut split = Split::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if let Some(value) = arg.strip_prefix("--features=") {
            split.cargo_features.push(value.to_string());
        } else if arg == "--features" {
            let Some(value) = rest.next() else {
                bail!("--features needs a value");
            };
            split.cargo_features.push(value.clone());
        } else if let Some(value) = arg.strip_prefix("--report-dir=") {
            split.report_dir = Some(PathBuf::from(value));
        } else if arg == "--report-dir" {
            let Some(value) = rest.next() else {
                bail!("--report-dir needs a value");
            };
            split.report_dir = Some(PathBuf::from(value));
        } else {
            split.conform_args.push(arg.clone());
        }
    }
    Ok(split)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn features_go_to_cargo_and_the_report_dir_is_taken_out() {
        let split = split_args(&strings(&[
            "--executor",
            "cpu",
            "--features",
            "cuda",
            "--report-dir=out",
            "--filter",
            "golden/",
        ]))
        .expect("valid flags");
        assert_eq!(
            split,
            Split {
                cargo_features: strings(&["cuda"]),
                conform_args: strings(&["--executor", "cpu", "--filter", "golden/"]),
                report_dir: Some(PathBuf::from("out")),
            }
        );
    }

    #[test]
    fn a_flag_without_its_value_is_an_error() {
        assert!(split_args(&strings(&["--report-dir"])).is_err());
        assert!(split_args(&strings(&["--features"])).is_err());
    }
}
