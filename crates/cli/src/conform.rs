//! `concord conform`: the main job — run the conformance suite on every built-in executor
//! compiled in (or the ones named), show progress, print the summary and write the reports.
//! Only the flags live here; the driver is `concord_conformance::progress`, shared with
//! `cargo xtask conformance`.

use clap::Args;
use concord::ExecutorRegistry;
use concord_conformance::progress::{self, FloorMode, ProgressDisplay, RunOptions};
use concord_conformance::Shard;
use std::num::NonZeroUsize;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ConformArgs {
    /// Run only this executor (cpu, opencl, cuda, …); repeatable. Default: every executor
    /// compiled in, and a visible skip for each built-in backend this build lacks.
    #[arg(long = "executor", value_name = "X")]
    pub executors: Vec<String>,
    /// Run only this target (cpu, opencl, opencl-fp16, cuda, cuda-fp16); repeatable.
    #[arg(long = "target", value_name = "T")]
    pub targets: Vec<String>,
    /// Run only the trials whose name (`<executor>/<target>/<category>/<case>`) contains
    /// SUBSTRING.
    #[arg(long, value_name = "SUBSTRING")]
    pub filter: Option<String>,
    /// Run only shard K of N: a stable hash of each trial's name picks its shard, so N
    /// machines run the suite between them; `concord report merge` joins their reports
    /// and checks the floors over every shard.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    /// Where to write conformance.json, junit.xml, matrix.md and matrix.html.
    #[arg(long, value_name = "DIR", default_value = "target/conformance-report")]
    pub report_dir: PathBuf,
    /// Worker threads (default: the machine's available parallelism).
    #[arg(long, value_name = "N")]
    pub threads: Option<NonZeroUsize>,
    /// Do not draw the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Record the floors instead of checking them: write each executor's executed trials
    /// per target and category, its node coverage and the list of executed trials into its
    /// expectations file (measured where it is available here, derived from what its
    /// supports() takes where it is not). Needs an unfiltered, unsharded run with the ONNX
    /// node-test data.
    #[arg(long)]
    pub record_floors: bool,
}

pub fn run(args: ConformArgs) -> Result<(), String> {
    let mut options = RunOptions::new(ExecutorRegistry::with_builtins());
    options.executors = args.executors;
    options.targets = args.targets;
    options.filter = args.filter;
    options.shard = args.shard;
    options.report_dir = Some(args.report_dir);
    options.threads = args.threads;
    if args.no_progress {
        options.progress = ProgressDisplay::Hidden;
    }
    if args.record_floors {
        options.floors = FloorMode::Record;
    }
    // An unknown name is a usage error, refused before the suite starts, not a failed run
    // with reports.
    let usage = progress::selection_errors(&options);
    if !usage.is_empty() {
        return Err(usage.join("; "));
    }
    let outcome = progress::run(&options);
    print!("{}", outcome.render());
    if outcome.passed() {
        Ok(())
    } else {
        Err(format!(
            "conformance failed: {} failing trial(s), {} run-level failure(s)",
            outcome.summary.failed,
            outcome.summary.run_failures.len()
        ))
    }
}
