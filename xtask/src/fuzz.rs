//! `cargo xtask fuzz --minutes N [--seed S]`: the long run of the structure-aware fuzzer
//! (crates/fuzz). Builds `concord-fuzz` in release mode and runs it for N minutes on the
//! golden models and, when `CONCORD_ONNX_NODE_TESTS` (or target/onnx-node-tests) holds
//! them, the ONNX node tests' models. It replays crates/fuzz/regressions first, prints
//! executions, executions/s, outcomes by kind and crashes, and writes every distinct crash's
//! mutant (with a .txt saying what happened) into crates/fuzz/regressions, where
//! `cargo test -p concord-fuzz` replays it on every run: fix it, then commit it.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// Where crashes are written and replayed from (under the workspace root).
const REGRESSIONS: &str = "crates/fuzz/regressions";

pub fn run(args: &[String]) -> Result<()> {
    let mut minutes: Option<u64> = None;
    let mut seed: Option<String> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--minutes" => {
                let value = it.next().context("--minutes needs a number")?;
                minutes =
                    Some(value.parse().with_context(|| {
                        format!("--minutes {value:?}: expected a whole number")
                    })?);
            }
            "--seed" => seed = Some(it.next().context("--seed needs a number")?.clone()),
            other => bail!("unknown argument `{other}` (usage: fuzz --minutes N [--seed S])"),
        }
    }
    let Some(minutes) = minutes else {
        bail!("usage: fuzz --minutes N [--seed S]");
    };
    let root = crate::workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(&cargo)
        .args(["build", "--release", "-p", "concord-fuzz"])
        .current_dir(&root)
        .status()
        .context("starting cargo")?;
    if !built.success() {
        bail!("cargo build --release -p concord-fuzz failed ({built})");
    }
    let regressions = root.join(REGRESSIONS);
    let mut command = Command::new(root.join("target/release/concord-fuzz"));
    command
        .args(["run", "--seconds", &(minutes * 60).to_string()])
        .arg("--regressions")
        .arg(&regressions)
        .arg("--crash-dir")
        .arg(&regressions)
        .current_dir(&root);
    if let Some(seed) = &seed {
        command.args(["--seed", seed]);
    }
    if std::env::var_os("CONCORD_ONNX_NODE_TESTS").is_none() {
        let generated = root.join("target/onnx-node-tests");
        if generated.is_dir() {
            command.arg("--node-tests").arg(generated);
        } else {
            println!(
                "xtask fuzz: no ONNX node tests (run `cargo xtask onnx-node-tests` or set \
                 CONCORD_ONNX_NODE_TESTS): fuzzing the golden models only"
            );
        }
    }
    let status = command.status().context("starting concord-fuzz")?;
    if !status.success() {
        bail!(
            "the fuzzer found crashes (or a regression model crashed); each is saved in {REGRESSIONS}/ \
             with a .txt saying what happened: fix it before committing it"
        );
    }
    Ok(())
}
