//! The `concord` command: run models (and, as they land, report backends and run the
//! conformance suite). Every error prints one line and exits non-zero; it never panics.

mod conform;
mod info;
mod npy;
mod report;
mod repro;
mod run;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "concord",
    version,
    about = "Run ONNX models on Concord's executors."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a model on inputs from .npy files (or seeded random inputs) and write every
    /// output to DIR/<output name>.npy.
    Run(run::RunArgs),
    /// Show the backends compiled in and what their runtime probes found.
    Info(info::InfoArgs),
    /// Run the conformance suite on the executors compiled in and write its reports.
    Conform(conform::ConformArgs),
    /// Replay a repro written by a failing property trial; non-zero exit on a mismatch.
    Repro(repro::ReproArgs),
    /// Work with conformance reports: `merge` joins the reports of several runs, shards,
    /// machines and devices into one.
    Report(report::ReportArgs),
}

/// The longest error line the CLI prints.
const MAX_ERROR_CHARS: usize = 1000;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap formats help and version itself; those are not errors.
            let code = if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Info(args) => info::run(args),
        Command::Conform(args) => conform::run(args),
        Command::Repro(args) => repro::run(args),
        Command::Report(args) => report::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // Models are hostile input and their names reach messages: one line, at most
            // about 1 KB, however long the names, lists or protobuf paths inside.
            eprintln!(
                "error: {}",
                concord::text::one_line(&message, MAX_ERROR_CHARS)
            );
            ExitCode::FAILURE
        }
    }
}
