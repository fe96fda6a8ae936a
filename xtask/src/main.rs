//! cargo xtask: Concord's developer tasks, run as `cargo xtask <command>`.
//!
//! The dispatcher stays small on purpose: each command lives in its own module and is one
//! entry in [`COMMANDS`], so adding one (conformance matrix, ONNX node tests, GPU bundle)
//! touches this file in two lines.

mod adapters;
mod conformance;
mod fuzz;
mod golden;
mod gpu_bundle;
mod mutants;
mod oclgrind;
mod onnx_node_tests;
mod op_oracle;

use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::ExitCode;

/// One `cargo xtask` command: its name, a one-line summary for `help`, and what it runs.
struct Command {
    name: &'static str,
    usage: &'static str,
    summary: &'static str,
    run: fn(&[String]) -> Result<()>,
}

const COMMANDS: &[Command] = &[
    Command {
        name: "golden",
        usage: "golden [--check | --export]",
        summary: "regenerate conformance/golden/ from onnxruntime in a pinned Python venv \
                  (--check: regenerate elsewhere and compare with it; --export: first \
                  re-export the PyTorch/torchvision models into conformance/golden/exported/ \
                  in a second venv)",
        run: golden::run,
    },
    Command {
        name: "op-oracle",
        usage: "op-oracle [--check] [--compare]",
        summary: "compute every op case's expected output with onnxruntime (the suite's own \
                  model and inputs, the golden venv) into conformance/golden/op-cases/ \
                  (--check: regenerate elsewhere and compare; --compare: also print where \
                  onnx.reference differs)",
        run: op_oracle::run,
    },
    Command {
        name: "conformance",
        usage: "conformance [flags] [--record-floors]",
        summary: "run `concord conform` from a release build with the same flags \
                  (--executor, --target, --filter, --report-dir; --features goes to cargo) \
                  and list the reports; --record-floors writes each executor's floors and \
                  trial list into conformance/expectations/ (measured, or derived from \
                  supports() where the executor is unavailable; needs the ONNX node-test data)",
        run: conformance::run,
    },
    Command {
        name: "onnx-node-tests",
        usage: "onnx-node-tests [--source onnx-node|golden] [--data-dir DIR] [--force] \
                [--write-list [--executor NAME]]",
        summary: "generate the ONNX backend node tests into target/onnx-node-tests from the \
                  onnx pinned in xtask/onnx-node/requirements.txt (--write-list: draft \
                  conformance/onnx-node.toml from a run)",
        run: onnx_node_tests::run,
    },
    Command {
        name: "adapters",
        usage: "adapters [--adapter NAME] [-- TEST-ARGS]",
        summary: "build the engine adapters in adapters/ (onnxruntime via ort, tract) and run \
                  the whole conformance suite on each, onnxruntime loaded from the pinned \
                  wheel in target/xtask-venv; reports in target/adapters-report/",
        run: adapters::run,
    },
    Command {
        name: "gpu-bundle",
        usage: "gpu-bundle",
        summary: "build the CUDA and conformance test binaries and the CLI (release) and pack \
                  them with the conformance data (golden cases included) into target/gpu-bundle.tar.gz, \
                  with a run.sh for a GPU machine without a Rust toolchain",
        run: gpu_bundle::run,
    },
    Command {
        name: "oclgrind",
        usage: "oclgrind",
        summary: "run the OpenCL executor's golden, op and model trials on Oclgrind (the \
                  Debian package oclgrind) with its API, bounds and data-race checks, on the \
                  GPU-shaped and the CPU-device kernels, and the padded MaxPool with its \
                  uninitialized-value check; any Oclgrind report fails the run",
        run: oclgrind::run,
    },
    Command {
        name: "fuzz",
        usage: "fuzz --minutes N [--seed S]",
        summary: "run the structure-aware fuzzer (crates/fuzz, release build) for N minutes on \
                  the golden and ONNX node-test models: replays crates/fuzz/regressions first, \
                  prints executions, executions/s, outcomes by kind and crashes, and writes \
                  each crash's mutant into crates/fuzz/regressions",
        run: fuzz::run,
    },
    Command {
        name: "mutants",
        usage: "mutants [--list] [--file GLOB]... [--shard K/N] [--timeout SECS] [--all-tests] \
                [-- ARGS]",
        summary: "mutation testing of the reference's kernels: runs cargo-mutants (pinned, \
                  installed into target/tools) in place over crates/cpu/src/ops (--file: \
                  globs under it), once per group of files sharing a test set: concord-cpu's \
                  conformance binary (op/ cases against onnxruntime, goldens, node tests) and \
                  the kernel-test binaries that run the file's code (--all-tests: every test \
                  binary); output in target/mutants/<test set>/, caught / missed / timeout / \
                  unviable and seconds per mutant per file at the end; ARGS go to \
                  cargo-mutants. Not in CI: slow",
        run: mutants::run,
    },
    Command {
        name: "help",
        usage: "help",
        summary: "list the commands",
        run: help,
    },
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first() else {
        print_help();
        return ExitCode::FAILURE;
    };
    // `--help` and `-h` are what people type first; they mean `help`.
    let name = match name.as_str() {
        "--help" | "-h" => "help",
        other => other,
    };
    let Some(command) = COMMANDS.iter().find(|c| c.name == name) else {
        eprintln!("xtask: unknown command `{name}`");
        print_help();
        return ExitCode::FAILURE;
    };
    match (command.run)(&args[1..]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask {}: error: {error:#}", command.name);
            ExitCode::FAILURE
        }
    }
}

fn help(args: &[String]) -> Result<()> {
    if let Some(extra) = args.first() {
        bail!("`help` takes no arguments, got `{extra}`");
    }
    print_help();
    Ok(())
}

fn print_help() {
    println!("usage: cargo xtask <command> [args]\n\ncommands:");
    for command in COMMANDS {
        println!("  {:<18} {}", command.usage, command.summary);
    }
}

/// The workspace root: xtask is always built from its own directory inside the workspace.
fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // xtask/Cargo.toml sits one level below the root, so its parent always exists.
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}
