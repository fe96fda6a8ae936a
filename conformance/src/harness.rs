//! The libtest-mimic driver: one trial per case, named `<executor>/<target>/<category>/<case>`,
//! so `cargo test`, `cargo nextest run` and name filters all work.

use crate::config::HarnessConfig;
use crate::outcome::Record;
use crate::suite::Suite;
use concord::Executor;
use libtest_mimic::{Arguments, Failed, Trial};
use std::sync::{Arc, Mutex};

/// The whole suite for one executor, as a test binary's `main`:
///
/// ```no_run
/// # use concord::CpuExecutor as MyExecutor;
/// // tests/conformance.rs, with `[[test]] name = "conformance"` and `harness = false`
/// fn main() { concord_conformance::main(MyExecutor::new) }
/// ```
///
/// It is [`crate::Conformance`] with every setting at its default: the expectations in
/// `conformance/<executor>.toml` of the crate whose test this is, the shipped tolerances,
/// reports where `CONCORD_REPORT_DIR` says.
pub fn main<E: Executor + 'static>(make: impl FnOnce() -> E) {
    crate::Conformance::new(make).run()
}

/// Runs the suite under libtest-mimic with every setting at its default; returns the
/// process exit code.
pub fn run_harness(executor: Arc<dyn Executor>, args: &Arguments) -> i32 {
    run_configured(executor, args, &HarnessConfig::defaults())
}

/// Runs the suite under libtest-mimic as `config` says; returns the process exit code.
pub(crate) fn run_configured(
    executor: Arc<dyn Executor>,
    args: &Arguments,
    config: &HarnessConfig,
) -> i32 {
    let cannot_start = |e: &dyn std::fmt::Display| {
        let message = format!("the conformance suite cannot start: {e}");
        eprintln!("error: {message}");
        // The CI page still gets a report, saying why there are no trials.
        if let Some(dir) = &config.report_dir {
            if let Err(e) = crate::report::write_run(dir, &[], &[message]) {
                eprintln!("error: writing reports to {}: {e}", dir.display());
            }
        }
        101
    };
    let suite = match Suite::new(executor, config.suite.clone()) {
        Ok(s) => Arc::new(s),
        Err(e) => return cannot_start(&e),
    };
    // Said before the first trial, on stderr: `--list` output is parsed by tools (nextest).
    if !args.list {
        let preamble = crate::config::preamble(&suite);
        for line in &preamble.lines {
            eprintln!("{line}");
        }
        if let Some(refusal) = preamble.refusal {
            return cannot_start(&refusal);
        }
        // The property seed is drawn (and printed) here, before any trial writes its line.
        if let Err(e) = crate::prop::run_seed() {
            return cannot_start(&e);
        }
    }
    let cases = suite.cases();
    let records: Arc<Mutex<Vec<Record>>> = Arc::default();
    let trials: Vec<Trial> = cases
        .iter()
        .cloned()
        .map(|case| {
            let skip = case.skip.clone();
            let name = case.name.clone();
            let suite = suite.clone();
            let records = records.clone();
            let trial = Trial::test(name, move || {
                let record = suite.run_case(&case);
                let message = record.verdict.message();
                if let crate::outcome::Verdict::Skip { reason } = &record.verdict {
                    println!("skipped: {reason}");
                }
                // libtest has no "partial": the trial shows "ok", and this line (and the
                // summary below) says that part of the model ran on the reference.
                if let (crate::outcome::Verdict::Partial { .. }, Some(note)) =
                    (&record.verdict, record.partial_note())
                {
                    println!("{}: {note}", record.name);
                }
                if let Ok(mut r) = records.lock() {
                    r.push(record);
                }
                match message {
                    Some(m) => Err(Failed::from(m)),
                    None => Ok(()),
                }
            });
            match skip {
                Some(_) => trial.with_ignored_flag(true).with_kind("skip"),
                None => trial,
            }
        })
        .collect();
    let listing = args.list;
    let conclusion = libtest_mimic::run(args, trials);
    if listing {
        return 0;
    }
    let records = records.lock().map(|r| r.clone()).unwrap_or_default();
    let filtered =
        args.filter.is_some() || !args.skip.is_empty() || args.ignored || args.include_ignored;
    let mut all_records = records.clone();
    // Trials skipped up front never ran their closure; record them for the reports.
    for case in &cases {
        if case.skip.is_some() && !all_records.iter().any(|r| r.name == case.name) {
            all_records.push(suite.run_case(case));
        }
    }
    let run_failures = suite.finish(&cases, &all_records, filtered);
    print_skips(&all_records);
    print_partials(&all_records);
    if let Some(dir) = &config.report_dir {
        // The run-level failures (floor, stale expectations) go into the reports too, so a
        // CI page never shows a pass for a run that failed; conformance.json also records
        // the device, so reports from several machines merge.
        let run = crate::report::RunInfo {
            devices: vec![suite.device_entry()],
            ..Default::default()
        };
        if let Err(e) = crate::report::write_report(dir, &all_records, &run_failures, &run) {
            eprintln!("error: writing reports to {}: {e}", dir.display());
            return 101;
        }
        println!("reports written to {}", dir.display());
    }
    for f in &run_failures {
        eprintln!("error: {f}");
    }
    if conclusion.has_failed() || !run_failures.is_empty() {
        101
    } else {
        0
    }
}

/// Lists every skip with its reason once, grouped, so a skip is never silent.
fn print_skips(records: &[Record]) {
    let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
    for r in records {
        if let crate::outcome::Verdict::Skip { reason } = &r.verdict {
            *reasons.entry(reason.clone()).or_default() += 1;
        }
    }
    if reasons.is_empty() {
        return;
    }
    println!("skipped cases, by reason:");
    for (reason, n) in reasons {
        println!("  {n:5}  {reason}");
    }
}

/// Counts the partial trials and the node coverage per target, so that a partial "ok" is
/// never read as a pass.
fn print_partials(records: &[Record]) {
    let summary = crate::report::summarize(records, &[]);
    for g in &summary.by_executor_target {
        if g.coverage.nodes == 0 {
            continue;
        }
        println!(
            "{}/{}: {} pass, {} partial (some nodes on the reference); node coverage {} on golden, model and node trials",
            g.executor,
            g.target,
            g.counts.pass,
            g.counts.partial,
            g.coverage.describe()
        );
    }
}
