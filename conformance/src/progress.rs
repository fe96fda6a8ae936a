//! The main-job driver behind `concord conform` and `cargo xtask conformance`: runs the suite
//! in-process for every chosen executor on a small thread pool, shows a progress bar, and
//! writes every report. The libtest-mimic harness ([`crate::main`]) and this driver share
//! [`Suite`], so both run the same trials and judge them the same way.

use crate::outcome::{Record, Verdict};
use crate::report::{self, Counts, RunInfo, SkipCause, Summary};
use crate::shard::Shard;
use crate::suite::{required_here, Case, Suite, SuiteConfig};
use concord::{Capability, Executor, ExecutorRegistry, Target, BUILTIN_BACKENDS};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fmt::Write;
use std::io::IsTerminal;
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to run and where to write the reports.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The executors to choose from; every one runs unless `executors` names some.
    pub registry: ExecutorRegistry,
    /// Executor names to run (empty: every executor in the registry, and a visible skip for
    /// each built-in backend this build lacks).
    pub executors: Vec<String>,
    /// Target names to run (empty: every target of each executor).
    pub targets: Vec<String>,
    /// Only trials whose name contains this.
    pub filter: Option<String>,
    /// Only the trials of this shard (a stable hash of the trial name picks one of N):
    /// the run checks what needs no other shard's results, and leaves its floors to
    /// `concord report merge`.
    pub shard: Option<Shard>,
    /// Where the reports go; `None` writes none.
    pub report_dir: Option<PathBuf>,
    /// Worker threads; `None` uses the machine's available parallelism.
    pub threads: Option<NonZeroUsize>,
    pub progress: ProgressDisplay,
    pub config: SuiteConfig,
    /// Whether to record the floors instead of checking them ([`FloorMode::Record`]).
    pub floors: FloorMode,
}

/// What an unfiltered run does with the executors' recorded floors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FloorMode {
    /// Check them: a run that executes fewer trials fails (the default).
    #[default]
    Check,
    /// Record them from this run into each executor's expectations file and trial list
    /// (`concord conform --record-floors`): measured for an executor available here,
    /// derived from `supports()` for one that is not ([`crate::floors`]).
    Record,
}

/// Whether the driver draws a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressDisplay {
    /// A bar on stderr when stderr is a terminal; when it is not (a CI log, a pipe), a
    /// line every [`PROGRESS_EVERY`] with trials done, the total and failures so far, and
    /// one at the end.
    Bar,
    Hidden,
}

/// How often a run whose stderr is not a terminal says how far it is.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What a run whose stderr is not a terminal prints every [`PROGRESS_EVERY`].
pub fn progress_line(done: usize, total: usize, failures: usize, elapsed: Duration) -> String {
    let plural = if failures == 1 { "" } else { "s" };
    format!(
        "conform: {done}/{total} trials done, {failures} failure{plural} so far ({}s)",
        elapsed.as_secs()
    )
}

/// What a run found: every record, the summary every report shows, and where the reports
/// went.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub records: Vec<Record>,
    pub summary: Summary,
    /// Where the reports were written, if they were.
    pub report_dir: Option<PathBuf>,
    /// Whether a filter selected only some trials (the floor and stale-entry checks are
    /// then not applied).
    pub filtered: bool,
    /// What the run knew besides its records (devices, shard, floors left to the merge),
    /// as conformance.json holds it.
    pub run: RunInfo,
    pub threads: usize,
    pub elapsed: Duration,
    /// What `--record-floors` wrote, one line per executor.
    pub recorded_floors: Vec<String>,
}

/// One trial waiting for a worker, with the suite that runs it.
struct Job<'a> {
    suite: &'a Suite,
    case: Case,
}

impl RunOptions {
    /// Every executor of `registry`, every target, no filter, reports in
    /// target/conformance-report, a progress bar, the suite's data from the environment.
    pub fn new(registry: ExecutorRegistry) -> RunOptions {
        RunOptions {
            registry,
            executors: Vec::new(),
            targets: Vec::new(),
            filter: None,
            shard: None,
            report_dir: Some(PathBuf::from("target").join("conformance-report")),
            threads: None,
            progress: ProgressDisplay::Bar,
            config: SuiteConfig::from_env(),
            floors: FloorMode::Check,
        }
    }
}

impl RunSummary {
    /// Whether the run passed: no failing trial and no run-level failure.
    pub fn passed(&self) -> bool {
        self.summary.passed()
    }

    /// The text a terminal shows after the run, what a CI reader needs first: the verdict
    /// with the totals, the executor × target table, every unavailable executor and target
    /// with its reason, every failure with its message and the run-level failures; then
    /// the skips by executor and cause, the ten most common skip reasons, declined ops and
    /// fallback notices (ten each, the rest in conformance.json), the deliberate notices of
    /// the fallback/ self-test as one line, where the reports are, and the result again.
    pub fn render(&self) -> String {
        let s = &self.summary;
        let mut out = String::new();
        // Writing into a String cannot fail; the results are ignored for that reason.
        let shard = self
            .run
            .shard
            .map(|k| format!(" (shard {k})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "conformance{shard}: {} — {} trials, {} executed, {} failing, {} run-level failure(s); {:.1} s on {} thread(s)\n",
            if self.passed() { "PASS" } else { "FAIL" },
            s.trials,
            s.executed,
            s.failed,
            s.run_failures.len(),
            self.elapsed.as_secs_f64(),
            self.threads
        );
        out.push_str(&table(s));
        if !s.unavailable.is_empty() {
            let _ = writeln!(out, "\nunavailable here ({}):", s.unavailable.len());
            let width = s
                .unavailable
                .iter()
                .map(|u| u.under.len())
                .max()
                .unwrap_or(0);
            for u in &s.unavailable {
                let _ = writeln!(out, "  {:width$}  {}", u.under, u.reason);
            }
        }
        if s.failures.is_empty() {
            let _ = writeln!(out, "\nfailures: none");
        } else {
            let _ = writeln!(out, "\nfailures ({}):", s.failures.len());
            for f in &s.failures {
                let _ = writeln!(out, "  {} ({})", f.trial, f.verdict);
                for line in f.message.lines() {
                    let _ = writeln!(out, "      {line}");
                }
            }
        }
        if !s.run_failures.is_empty() {
            let _ = writeln!(out, "\nrun-level failures ({}):", s.run_failures.len());
            for f in &s.run_failures {
                let _ = writeln!(out, "  {f}");
            }
        }
        let json = self.json_pointer();
        out.push_str(&skip_sections(s, &json));
        if !s.declined.is_empty() {
            let _ = writeln!(
                out,
                "\ndeclined in trials that ran partly on the reference (trials, nodes{}):",
                top_of(s.declined.len())
            );
            for d in s.declined.iter().take(TOP) {
                let _ = writeln!(
                    out,
                    "  {:6} {:6}  {} {}: {}",
                    d.trials,
                    d.nodes,
                    d.under,
                    d.op,
                    shorten(&d.reason)
                );
            }
            rest_line(
                &mut out,
                s.declined.len(),
                "declined ops",
                "summary.declined",
                &json,
            );
        }
        let (deliberate, mut real): (Vec<_>, Vec<_>) = s.notices.iter().partition(|n| n.deliberate);
        // The notice raised by the most trials first (the summary keeps text order).
        real.sort_by(|a, b| {
            b.trials
                .cmp(&a.trials)
                .then_with(|| a.notice.cmp(&b.notice))
        });
        if !real.is_empty() {
            let _ = writeln!(
                out,
                "\nfallback notices (trials raising each; first trial{}):",
                top_of(real.len())
            );
            for n in real.iter().take(TOP) {
                let _ = writeln!(
                    out,
                    "  {:6}  {} [{}; first: {}]",
                    n.trials,
                    shorten(&n.notice),
                    n.raised_under.join(", "),
                    n.first_trial
                );
            }
            rest_line(&mut out, real.len(), "notices", "summary.notices", &json);
        }
        if !deliberate.is_empty() {
            let trials: usize = deliberate.iter().map(|n| n.trials).sum();
            let _ = writeln!(
                out,
                "\ndeliberate notices: {} distinct, raised {trials} time(s) by the fallback/ self-test \
                 trials ({}), which ask for a target the executor lacks on purpose: not real \
                 fallbacks (listed in matrix.md and {json})",
                deliberate.len(),
                crate::fallback::DELIBERATE_NOTICES.join(", ")
            );
        }
        if !self.run.deferred_floors.is_empty() {
            let _ = writeln!(
                out,
                "\nthe floors on executed trials and node coverage count every shard: \
                 `concord report merge` checks them"
            );
        }
        if !self.recorded_floors.is_empty() {
            let _ = writeln!(out, "\nfloors recorded:");
            for line in &self.recorded_floors {
                let _ = writeln!(out, "  {line}");
            }
        }
        if let Some(dir) = &self.report_dir {
            let _ = writeln!(out, "\nreports in {}:", dir.display());
            for name in report::REPORT_FILES {
                let _ = writeln!(out, "  {}", dir.join(name).display());
            }
        }
        let _ = writeln!(
            out,
            "\nresult: {} ({} failing trial(s), {} run-level failure(s))",
            if self.passed() { "PASS" } else { "FAIL" },
            s.failed,
            s.run_failures.len()
        );
        out
    }

    /// Where the full lists are: conformance.json in the report directory, if one was
    /// written.
    fn json_pointer(&self) -> String {
        match &self.report_dir {
            Some(dir) => dir.join(report::REPORT_FILES[0]).display().to_string(),
            None => "conformance.json (not written: no report directory)".to_string(),
        }
    }
}

/// How many entries of each long list the printed summary shows.
pub const TOP: usize = 10;

/// Longer reasons and notices are cut to this many characters in the printed summary
/// (conformance.json and matrix.md hold them whole).
const MAX_REASON_CHARS: usize = 160;

/// The skips, if any: a table of executor × cause, then the [`TOP`] most common reasons
/// other than unavailability (said above) with their cause and executors, and where the
/// others are.
fn skip_sections(s: &Summary, json: &str) -> String {
    let mut out = String::new();
    if s.skips.is_empty() {
        return out;
    }
    let total: usize = s.skip_causes.iter().map(|c| c.trials).sum();
    let causes: Vec<SkipCause> = SkipCause::ALL
        .into_iter()
        .filter(|cause| s.skip_causes.iter().any(|c| c.cause == *cause))
        .collect();
    let _ = writeln!(out, "\nskipped: {total} trial(s), by executor and cause:");
    let mut rows: Vec<Vec<String>> = vec![std::iter::once("executor")
        .chain(causes.iter().map(|c| c.label()))
        .map(str::to_string)
        .collect()];
    for c in &s.skip_causes {
        if rows.last().map_or(true, |r| r[0] != c.executor) || rows.len() == 1 {
            let mut row = vec![c.executor.clone()];
            row.extend(causes.iter().map(|_| "0".to_string()));
            rows.push(row);
        }
        if let (Some(row), Some(i)) = (rows.last_mut(), causes.iter().position(|k| *k == c.cause)) {
            row[i + 1] = c.trials.to_string();
        }
    }
    out.push_str(&aligned(&rows, 1));
    let reasons: Vec<_> = s
        .skips
        .iter()
        .filter(|k| k.cause != SkipCause::Unavailable)
        .collect();
    if reasons.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\nskip reasons, most trials first (trials, cause, executors{}):",
        top_of(reasons.len())
    );
    let cause_width = reasons
        .iter()
        .take(TOP)
        .map(|k| k.cause.label().len())
        .max()
        .unwrap_or(0);
    let executors: Vec<String> = reasons
        .iter()
        .take(TOP)
        .map(|k| {
            let mut names: Vec<&str> = k
                .under
                .iter()
                .map(|u| u.split('/').next().unwrap_or(u))
                .collect();
            names.dedup();
            names.join(", ")
        })
        .collect();
    let executor_width = executors.iter().map(String::len).max().unwrap_or(0);
    for (k, executors) in reasons.iter().zip(&executors) {
        let _ = writeln!(
            out,
            "  {:6}  {:cause_width$}  {:executor_width$}  {}",
            k.trials,
            k.cause.label(),
            executors,
            shorten(&k.reason)
        );
    }
    rest_line(
        &mut out,
        reasons.len(),
        "skip reasons",
        "summary.skips",
        json,
    );
    out
}

/// "; top 10 of 57" when a list is longer than [`TOP`], else "".
fn top_of(len: usize) -> String {
    if len > TOP {
        format!("; top {TOP} of {len}")
    } else {
        String::new()
    }
}

/// Says where the entries past the first [`TOP`] are, when there are any.
fn rest_line(out: &mut String, len: usize, what: &str, field: &str, json: &str) {
    if len > TOP {
        let _ = writeln!(
            out,
            "  … and {} more {what}: `{field}` in {json} (and matrix.md)",
            len - TOP
        );
    }
}

/// `s` cut to [`MAX_REASON_CHARS`], with "…" when cut.
fn shorten(s: &str) -> String {
    if s.chars().count() <= MAX_REASON_CHARS {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX_REASON_CHARS - 1).collect();
    out.push('…');
    out
}

/// `rows` as columns two spaces apart, indented two: the first `left` columns
/// left-aligned (names), the others right-aligned (counts).
fn aligned(rows: &[Vec<String>], left: usize) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; columns];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i < left {
                let _ = write!(line, "{cell:<w$}  ");
            } else {
                let _ = write!(line, "{cell:>w$}  ");
            }
        }
        let _ = writeln!(out, "  {}", line.trim_end());
    }
    out
}

/// Runs the suite as `options` say and writes the reports. Never panics on a trial that
/// panics: that trial fails with the panic's message.
pub fn run(options: &RunOptions) -> RunSummary {
    let started = Instant::now();
    let mut run_failures = Vec::new();
    // The property seed is drawn (and printed) before any trial runs.
    if let Err(e) = crate::prop::run_seed() {
        run_failures.push(e);
    }
    let mut leading_records = Vec::new();
    let targets = parse_targets(&options.targets, &options.registry, &mut run_failures);
    let chosen = choose_executors(options, &targets, &mut run_failures, &mut leading_records);
    // An unknown target or executor, a CONCORD_REQUIRE naming nothing known or a bad seed is
    // a usage error: the run fails at once instead of running every trial first.
    let usage_error = !run_failures.is_empty();
    let mut suites = Vec::new();
    let mut config = options.config.clone();
    config.recording_floors = options.floors == FloorMode::Record;
    for executor in chosen.into_iter().filter(|_| !usage_error) {
        let name = executor.name().to_string();
        match Suite::new(executor, config.clone()) {
            Ok(suite) => suites.push(suite),
            Err(e) => run_failures.push(format!("{name}: the conformance suite cannot start: {e}")),
        }
    }
    let filtered = options.filter.is_some() || !targets.is_empty();
    let in_shard = |name: &str| options.shard.map_or(true, |s| s.selects(name));
    // A built-in backend this build lacks is one probe trial per target, sharded like
    // any other so that merged shards hold it once.
    let mut selected = leading_records.len();
    leading_records.retain(|r| in_shard(&r.name));
    // Every suite's trials, selected, in suite order; `per_suite` keeps each suite's full
    // list for its run-level checks.
    let mut per_suite = Vec::new();
    let mut jobs = Vec::new();
    for suite in &suites {
        let cases = suite.cases();
        for case in &cases {
            let wanted_target = targets.is_empty() || targets.contains(&case.target);
            let wanted_name = options
                .filter
                .as_deref()
                .map_or(true, |f| case.name.contains(f));
            if wanted_target && wanted_name {
                selected += 1;
                if in_shard(&case.name) {
                    jobs.push(Job {
                        suite,
                        case: case.clone(),
                    });
                }
            }
        }
        per_suite.push(cases);
    }
    // A shard may hold none of a small selection; only a selection of nothing at all is
    // an error.
    if selected == 0 && run_failures.is_empty() {
        run_failures.push(format!(
            "no trial matches the selection (executors {}, targets {}, filter {})",
            list_or_all(&options.executors),
            list_or_all(&options.targets),
            options
                .filter
                .as_deref()
                .map_or_else(|| "none".to_string(), |f| format!("`{f}`"))
        ));
    }
    let threads = options
        .threads
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get)
        .clamp(1, jobs.len().max(1));
    let trial_records = run_jobs(&jobs, threads, options.progress);
    let mut recorded_floors = Vec::new();
    if options.floors == FloorMode::Record && options.shard.is_some() {
        run_failures
            .push("--record-floors needs the whole suite in one run, not a shard".to_string());
    }
    let mut run = RunInfo {
        shard: options.shard,
        devices: suites.iter().map(Suite::device_entry).collect(),
        ..RunInfo::default()
    };
    for (suite, cases) in suites.iter().zip(&per_suite) {
        if options.shard.is_some() && !filtered {
            // A shard has every trial's name but only its own results: it checks the
            // stale entries and leaves the floors to the merge.
            run_failures.extend(suite.stale_entries(cases));
            run.deferred_floors.push(suite.floor());
            continue;
        }
        let own: Vec<Record> = trial_records
            .iter()
            .filter(|r| r.executor == suite.executor.name())
            .cloned()
            .collect();
        if options.floors == FloorMode::Record {
            // The old floors are being replaced: only the list checks apply.
            run_failures.extend(suite.stale_entries(cases));
            if filtered {
                run_failures.push(
                    "--record-floors needs an unfiltered run: a filter or --target would \
                     record a suite that shrank"
                        .to_string(),
                );
                continue;
            }
            match crate::floors::record(suite, &own) {
                Ok(line) => recorded_floors.push(line),
                Err(e) => run_failures.push(e),
            }
            continue;
        }
        run_failures.extend(suite.finish(cases, &own, filtered));
    }
    let mut records = leading_records;
    records.extend(trial_records);
    let mut report_dir = None;
    if let Some(dir) = &options.report_dir {
        match report::write_report(dir, &records, &run_failures, &run) {
            Ok(()) => report_dir = Some(dir.clone()),
            Err(e) => run_failures.push(format!("the reports could not be written: {e}")),
        }
    }
    RunSummary {
        summary: report::summarize(&records, &run_failures),
        records,
        report_dir,
        filtered,
        run,
        threads,
        elapsed: started.elapsed(),
        recorded_floors,
    }
}

/// The usage errors in `options`' selection: an unknown target or executor name, a
/// `CONCORD_REQUIRE` naming nothing known. Found without probing or running anything, so a
/// command line refuses them at once, as it refuses an unknown flag (`concord conform`
/// does); [`run`] finds the same ones and fails with them before any trial.
pub fn selection_errors(options: &RunOptions) -> Vec<String> {
    let mut errors = Vec::new();
    let targets = parse_targets(&options.targets, &options.registry, &mut errors);
    choose_executors(options, &targets, &mut errors, &mut Vec::new());
    errors
}

/// Parses `--target` names; an unknown one is a run-level failure naming the known ones.
fn parse_targets(
    names: &[String],
    registry: &ExecutorRegistry,
    run_failures: &mut Vec<String>,
) -> Vec<Target> {
    let mut out = Vec::new();
    for name in names {
        match registry.target_named(name) {
            Some(t) => out.push(t),
            None => {
                let known: Vec<String> = registry
                    .known_names()
                    .into_iter()
                    .filter(|n| registry.target_named(n).is_some())
                    .collect();
                let hint = concord::did_you_mean(name, &known)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                run_failures.push(format!(
                    "unknown target `{name}` (known: {}){hint}",
                    known.join(", ")
                ))
            }
        }
    }
    out
}

/// The executors to run. A built-in backend this build lacks becomes a visible skip (a
/// failure when `CONCORD_REQUIRE` names it); a name that is neither registered nor built in
/// is a run-level failure.
fn choose_executors(
    options: &RunOptions,
    targets: &[Target],
    run_failures: &mut Vec<String>,
    records: &mut Vec<Record>,
) -> Vec<Arc<dyn Executor>> {
    // A CONCORD_REQUIRE that names nothing known would loosen the gate it is meant to be:
    // the run fails at once, whatever the executors chosen.
    if let Ok(list) = std::env::var("CONCORD_REQUIRE") {
        if let Err(e) = concord::parse_require(&list, &options.registry) {
            run_failures.push(e.to_string());
        }
    }
    let registered = options.registry.executors();
    let find = |name: &str| {
        registered
            .iter()
            .find(|e| e.name() == concord::canonical_backend(name).name())
            .cloned()
    };
    let mut chosen: Vec<Arc<dyn Executor>> = Vec::new();
    let mut missing: Vec<&str> = Vec::new();
    if options.executors.is_empty() {
        chosen.extend(registered.iter().cloned());
        missing.extend(
            BUILTIN_BACKENDS
                .iter()
                .map(|b| b.backend)
                .filter(|b| find(b).is_none()),
        );
    } else {
        for name in &options.executors {
            let name = name.to_ascii_lowercase();
            if let Some(e) = find(&name) {
                if !chosen.iter().any(|c| c.name() == e.name()) {
                    chosen.push(e);
                }
            } else if let Some(b) = BUILTIN_BACKENDS.iter().find(|b| b.backend == name) {
                missing.push(b.backend);
            } else {
                let names: Vec<String> = registered.iter().map(|e| e.name().to_string()).collect();
                let hint = concord::did_you_mean(&name, &names)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                run_failures.push(format!(
                    "no executor named `{name}` (this build has: {}){hint}",
                    names.join(", ")
                ));
            }
        }
    }
    for backend in missing {
        records.extend(missing_builtin_records(backend, targets, &options.registry));
    }
    chosen
}

/// One probe record per target of a built-in backend this run has no executor for.
fn missing_builtin_records(
    backend: &str,
    targets: &[Target],
    registry: &ExecutorRegistry,
) -> Vec<Record> {
    let Some(builtin) = BUILTIN_BACKENDS.iter().find(|b| b.backend == backend) else {
        return Vec::new();
    };
    let reason = if builtin.compiled_in {
        format!("{backend} is compiled in, but the executor registry has no {backend} executor")
    } else {
        format!(
            "{backend} is not compiled into this build (rebuild with cargo feature `{}`)",
            builtin.feature
        )
    };
    builtin
        .targets
        .iter()
        .enumerate()
        .filter(|(_, t)| targets.is_empty() || targets.contains(t))
        .map(|(index, target)| {
            // The specs of a built-in this run lacks live in its crate; by name only, its
            // default (first) target needs no capability and the others (fp16) do.
            let needs = if index == 0 {
                Capability::None
            } else {
                Capability::Fp16
            };
            // What a build contains is the build's choice, not a broken machine, so `CI`
            // alone does not fail it (hence the `unavailable_in_ci` reason passed here);
            // `CONCORD_REQUIRE` naming it does.
            let verdict =
                match required_here(backend, target, needs, registry, Some("not compiled in")) {
                    Some(why) => Verdict::Fail {
                        message: format!("{reason} — and {why}, so it fails the run"),
                    },
                    None => Verdict::Skip {
                        reason: reason.clone(),
                    },
                };
            Record {
                name: format!("{backend}/{target}/unavailable/probe"),
                executor: backend.to_string(),
                target: target.name().to_string(),
                device: String::new(),
                category: "unavailable".to_string(),
                subject: String::new(),
                verdict,
                comparisons: Vec::new(),
                notices: Vec::new(),
                coverage: None,
                duration_ms: 0.0,
            }
        })
        .collect()
}

/// Runs `jobs` on `threads` workers; the records come back in the jobs' order.
fn run_jobs(jobs: &[Job<'_>], threads: usize, display: ProgressDisplay) -> Vec<Record> {
    let total = jobs.len();
    let bar = progress_bar(total, display);
    let next = AtomicUsize::new(0);
    let failures = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Record>>> = Mutex::new(vec![None; total]);
    let done = AtomicUsize::new(0);
    // indicatif draws nothing when stderr is not a terminal; a CI log gets lines instead.
    let lines = display == ProgressDisplay::Bar && !std::io::stderr().is_terminal();
    // Set when the workers are done (or their scope unwinds), so the reporter never
    // outlives them.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|outer| {
        if lines {
            outer.spawn(|| {
                let started = Instant::now();
                let mut said = Instant::now();
                let say = || {
                    eprintln!(
                        "{}",
                        progress_line(
                            done.load(Ordering::Relaxed),
                            total,
                            failures.load(Ordering::Relaxed),
                            started.elapsed()
                        )
                    );
                };
                while !stop.load(Ordering::Relaxed) {
                    if said.elapsed() >= PROGRESS_EVERY {
                        say();
                        said = Instant::now();
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                say();
            });
        }
        let _stop = StopOnDrop(&stop);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(index) else {
                        break;
                    };
                    bar.set_message(format!(
                        "{} failed · {}",
                        failures.load(Ordering::Relaxed),
                        job.case.name
                    ));
                    let record = run_one(job);
                    if record.verdict.fails_run() {
                        failures.fetch_add(1, Ordering::Relaxed);
                        bar.println(format!(
                            "FAIL {}: {}",
                            record.name,
                            record
                                .verdict
                                .message()
                                .unwrap_or_default()
                                .lines()
                                .next()
                                .unwrap_or("")
                        ));
                    }
                    // A poisoned lock means another worker panicked outside `run_one`'s
                    // catch; its slot stays empty and is reported below.
                    if let Ok(mut slots) = slots.lock() {
                        if let Some(slot) = slots.get_mut(index) {
                            *slot = Some(record);
                        }
                    }
                    bar.inc(1);
                    done.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
    });
    bar.finish_and_clear();
    let slots = slots
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    slots
        .into_iter()
        .zip(jobs)
        .map(|(slot, job)| {
            slot.unwrap_or_else(|| {
                failed_record(
                    job,
                    "the trial's result was lost (a worker thread died)".into(),
                    0.0,
                )
            })
        })
        .collect()
}

/// Names as a user typed them, or "all" for an empty selection.
fn list_or_all(names: &[String]) -> String {
    if names.is_empty() {
        "all".to_string()
    } else {
        names.join(", ")
    }
}

/// Sets its flag when dropped: the progress reporter stops when the workers' scope ends,
/// however it ends.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs one trial; a panic becomes a failure of that trial.
fn run_one(job: &Job<'_>) -> Record {
    let started = Instant::now();
    match catch_unwind(AssertUnwindSafe(|| job.suite.run_case(&job.case))) {
        Ok(record) => record,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_string());
            failed_record(
                job,
                format!("the trial panicked: {what}"),
                started.elapsed().as_secs_f64() * 1e3,
            )
        }
    }
}

fn failed_record(job: &Job<'_>, message: String, duration_ms: f64) -> Record {
    Record {
        name: job.case.name.clone(),
        executor: job.suite.executor.name().to_string(),
        target: job.case.target.name().to_string(),
        device: job.suite.device.clone(),
        category: job.case.category.to_string(),
        subject: job.case.subject.clone(),
        verdict: Verdict::Fail { message },
        comparisons: Vec::new(),
        notices: Vec::new(),
        coverage: None,
        duration_ms,
    }
}

fn progress_bar(total: usize, display: ProgressDisplay) -> ProgressBar {
    let target = match display {
        ProgressDisplay::Bar => ProgressDrawTarget::stderr(),
        ProgressDisplay::Hidden => ProgressDrawTarget::hidden(),
    };
    let bar = ProgressBar::with_draw_target(Some(total as u64), target);
    // The template is a literal; should indicatif ever reject it, the default style still
    // shows done/total.
    if let Ok(style) =
        ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// The executor × target table of the summary, columns aligned: full passes, partial
/// passes and node coverage side by side, so a partial never reads as a pass.
fn table(s: &Summary) -> String {
    const COLUMNS: usize = 12;
    let header = [
        "executor", "target", "device", "pass", "partial", "nodes", "xfail", "unsup", "skip",
        "fail", "xpass", "executed",
    ];
    let mut rows: Vec<[String; COLUMNS]> = vec![header.map(str::to_string)];
    let mut totals = Counts::default();
    let mut total_nodes = report::NodeCount::default();
    for g in &s.by_executor_target {
        let c = &g.counts;
        totals.add_counts(c);
        total_nodes.nodes_on_executor += g.coverage.nodes_on_executor;
        total_nodes.nodes += g.coverage.nodes;
        rows.push([
            g.executor.clone(),
            g.target.clone(),
            if g.device.is_empty() {
                "-".to_string()
            } else {
                g.device.clone()
            },
            c.pass.to_string(),
            c.partial.to_string(),
            coverage_text(&g.coverage),
            (c.expected_fail - c.unsupported).to_string(),
            c.unsupported.to_string(),
            c.skip.to_string(),
            c.fail.to_string(),
            c.unexpected_pass.to_string(),
            g.executed.to_string(),
        ]);
    }
    if s.by_executor_target.len() > 1 {
        rows.push([
            "total".to_string(),
            String::new(),
            String::new(),
            totals.pass.to_string(),
            totals.partial.to_string(),
            coverage_text(&total_nodes),
            (totals.expected_fail - totals.unsupported).to_string(),
            totals.unsupported.to_string(),
            totals.skip.to_string(),
            totals.fail.to_string(),
            totals.unexpected_pass.to_string(),
            totals.executed().to_string(),
        ]);
    }
    let mut widths = [0usize; COLUMNS];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            // Names left-aligned, counts right-aligned.
            if i < 3 {
                let _ = write!(line, "{cell:<w$}  ");
            } else {
                let _ = write!(line, "{cell:>w$}  ");
            }
        }
        let _ = writeln!(out, "  {}", line.trim_end());
    }
    out
}

/// "83.3%" (nodes on the executor over golden, model and node trials), or "-".
fn coverage_text(count: &report::NodeCount) -> String {
    count
        .fraction()
        .map_or_else(|| "-".to_string(), |f| format!("{:.1}%", f * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_line_says_done_total_and_failures() {
        let line = progress_line(40, 120, 1, Duration::from_millis(12_500));
        assert_eq!(line, "conform: 40/120 trials done, 1 failure so far (12s)");
        assert!(progress_line(0, 3, 2, Duration::ZERO).contains("2 failures so far"));
    }
}
