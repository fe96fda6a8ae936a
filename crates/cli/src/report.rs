//! `concord report merge DIR…`: joins the conformance.json of several runs — the shards of
//! `concord conform --shard K/N`, or whole runs on several machines and devices — into one
//! conformance.json, junit.xml and matrix (columns executor × target × device), so that a CI
//! matrix of runners gets one page. Only the flags live here; the merge is
//! `concord_conformance::report::merge`.

use clap::{Args, Subcommand};
use concord_conformance::report::{self, merge};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: ReportCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Merge the reports of several runs into one; exits non-zero when the merged run
    /// fails (a failing trial, a run-level failure, a missing shard, a floor not met).
    Merge(MergeArgs),
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Report directories (each holding a conformance.json) or conformance.json files.
    #[arg(value_name = "DIR", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the merged conformance.json, junit.xml, matrix.md and matrix.html.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "target/conformance-report/merged"
    )]
    pub out: PathBuf,
}

pub fn run(args: ReportArgs) -> Result<(), String> {
    match args.command {
        ReportCommand::Merge(args) => run_merge(args),
    }
}

fn run_merge(args: MergeArgs) -> Result<(), String> {
    let reports = args
        .inputs
        .iter()
        .map(|path| merge::RunReport::read(path))
        .collect::<Result<Vec<_>, _>>()?;
    let merged = merge::merge(&reports)?;
    report::write_report(
        &args.out,
        &merged.records,
        &merged.run_failures,
        &merged.run,
    )?;
    let summary = report::summarize(&merged.records, &merged.run_failures);
    println!(
        "merged {} report(s): {}",
        reports.len(),
        report::totals_sentence(&summary)
    );
    for g in &summary.by_executor_target {
        println!(
            "  {}/{} on {}: {} pass, {} partial, {} fail, {} skip; node coverage {}",
            g.executor,
            g.target,
            if g.device.is_empty() { "-" } else { &g.device },
            g.counts.pass,
            g.counts.partial,
            g.counts.failed(),
            g.counts.skip,
            g.coverage.describe()
        );
    }
    for f in &summary.run_failures {
        println!("run-level failure: {f}");
    }
    println!("reports in {}", args.out.display());
    if summary.passed() {
        Ok(())
    } else {
        Err(format!(
            "the merged run failed: {} failing trial(s), {} run-level failure(s)",
            summary.failed,
            summary.run_failures.len()
        ))
    }
}
