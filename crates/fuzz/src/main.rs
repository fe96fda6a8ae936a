//! `concord-fuzz`: the fuzzer's supervisor and its worker.
//!
//! - `run [--seconds N | --executions N] [--seed S] [--regressions DIR] [--crash-dir DIR]`:
//!   replays every model in `--regressions` first, then fuzzes: a worker child (this binary,
//!   `worker`) under an address-space limit runs mutant after mutant and prints each
//!   outcome; a panic it catches, an exit or signal it dies of, or an execution that prints
//!   nothing for `--timeout` seconds (then it is killed) is a crash (each execution runs
//!   under the net's time limit, `concord_fuzz::TIME_LIMIT`, well under the watchdog, so
//!   slow mutants end in a typed error first). Each crash's mutant is
//!   rebuilt here from (seed, index) and written to `--crash-dir`, and a new worker goes on
//!   after it. Prints executions, executions/s, outcomes by kind and crashes; exits 1 when
//!   there was a crash.
//! - `replay DIR|FILE…`: each model in a child under the same limit and watchdog.
//! - `exec FILE`: one model, in this process (what `replay` runs in its child).
//! - `mutant --seed S --index I --out FILE`: writes one mutant.
//! - `worker --seed S --start I [--count N]`: the loop the supervisor runs.
//!
//! The seed is `--seed`, else `CONCORD_FUZZ_SEED`, else taken from the clock; it is printed.
//! The corpus is `conformance/golden` (`--golden DIR`) and the node tests' models under
//! `CONCORD_ONNX_NODE_TESTS` (`--node-tests DIR`), when that directory exists.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use concord_fuzz::{execute, Corpus};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The address-space limit of every child, in KiB (`ulimit -v`): 4 GiB, as the CLI's
/// adversarial corpus runs under.
const ADDRESS_LIMIT_KIB: u64 = 4 * 1024 * 1024;

/// How long one execution may print nothing before it counts as a hang (`--timeout`).
const DEFAULT_TIMEOUT_S: u64 = 30;

/// The most crash files one run writes (the same crash found again and again is kept once:
/// see [`Crash::signature`]).
const MAX_SAVED: usize = 50;

const USAGE: &str = "usage: concord-fuzz run [--seconds N | --executions N] [--seed S] \
[--timeout S] [--regressions DIR] [--crash-dir DIR] [--golden DIR] [--node-tests DIR]
       concord-fuzz replay DIR|FILE...
       concord-fuzz exec FILE
       concord-fuzz mutant --seed S --index I --out FILE [--golden DIR] [--node-tests DIR]
       concord-fuzz worker --seed S --start I [--count N] [--golden DIR] [--node-tests DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run(&Flags::parse(&args[1..])),
        Some("replay") => replay_all(&args[1..], timeout_of(&Flags::default())),
        Some("exec") => exec_one(&args[1..]),
        Some("mutant") => write_mutant(&Flags::parse(&args[1..])),
        Some("worker") => worker(&Flags::parse(&args[1..])),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("concord-fuzz: {message}");
            ExitCode::from(2)
        }
    }
}

/// `--name value` pairs.
#[derive(Debug, Default)]
struct Flags(BTreeMap<String, String>, Vec<String>);

impl Flags {
    fn parse(args: &[String]) -> Flags {
        let mut flags = Flags::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.strip_prefix("--") {
                Some(name) => {
                    let value = it.next().cloned().unwrap_or_default();
                    flags.0.insert(name.to_string(), value);
                }
                None => flags.1.push(a.clone()),
            }
        }
        flags
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    fn number(&self, name: &str) -> Result<Option<u64>, String> {
        self.get(name)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("--{name} {v:?}: expected a whole number"))
            })
            .transpose()
    }

    fn golden(&self) -> PathBuf {
        self.get("golden").map(PathBuf::from).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/golden")
        })
    }

    fn node_tests(&self) -> Option<PathBuf> {
        self.get("node-tests")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("CONCORD_ONNX_NODE_TESTS").map(PathBuf::from))
            .filter(|p| p.is_dir())
    }

    fn corpus(&self) -> Result<Corpus, String> {
        Corpus::load(Some(&self.golden()), self.node_tests().as_deref())
    }

    /// The corpus arguments to pass on to a worker.
    fn corpus_args(&self) -> Vec<String> {
        let mut args = vec!["--golden".to_string(), self.golden().display().to_string()];
        if let Some(dir) = self.node_tests() {
            args.extend(["--node-tests".to_string(), dir.display().to_string()]);
        }
        args
    }
}

fn timeout_of(flags: &Flags) -> Duration {
    Duration::from_secs(
        flags
            .number("timeout")
            .ok()
            .flatten()
            .unwrap_or(DEFAULT_TIMEOUT_S),
    )
}

/// The last panic's location and message, kept by the hook for the worker to print.
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = format!("{location}: {message}").replace('\n', " ");
        }
    }));
}

fn last_panic() -> String {
    LAST_PANIC.lock().map(|s| s.clone()).unwrap_or_default()
}

fn worker(flags: &Flags) -> Result<bool, String> {
    let seed = flags.number("seed")?.ok_or("worker needs --seed")?;
    let start = flags.number("start")?.unwrap_or(0);
    let count = flags.number("count")?;
    let corpus = flags.corpus()?;
    quiet_panics();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let plant = planted_fault();
    let mut index = start;
    while count.map_or(true, |c| index < start + c) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if let Some((what, at)) = &plant {
                if *at == index {
                    plant_fault(what);
                }
            }
            let (_, bytes) = corpus.mutant(seed, index);
            execute(&bytes)
        }));
        let line = match result {
            Ok(outcome) => format!("{index} {outcome}"),
            Err(_) => format!("{index} panic {}", last_panic()),
        };
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return Ok(false);
        }
        index += 1;
    }
    Ok(true)
}

/// `CONCORD_FUZZ_PLANT=panic@K|abort@K|hang@K`: the worker fails that way at mutant K
/// instead of running it. Only for the fuzzer's own test, which proves the supervisor
/// catches each kind of crash.
fn planted_fault() -> Option<(String, u64)> {
    let plant = std::env::var("CONCORD_FUZZ_PLANT").ok()?;
    let (what, at) = plant.split_once('@')?;
    Some((what.to_string(), at.parse().ok()?))
}

#[allow(clippy::panic)]
fn plant_fault(what: &str) {
    match what {
        "panic" => panic!("planted panic"),
        "abort" => std::process::abort(),
        "hang" => loop {
            std::thread::sleep(Duration::from_secs(1));
        },
        _ => {}
    }
}

fn write_mutant(flags: &Flags) -> Result<bool, String> {
    let seed = flags.number("seed")?.ok_or("mutant needs --seed")?;
    let index = flags.number("index")?.ok_or("mutant needs --index")?;
    let out = flags.get("out").ok_or("mutant needs --out")?;
    let corpus = flags.corpus()?;
    let (pick, bytes) = corpus.mutant(seed, index);
    std::fs::write(out, bytes).map_err(|e| format!("{out}: {e}"))?;
    println!(
        "{out}: mutant {index} of seed {seed}, from {}",
        corpus.seeds[pick].path.display()
    );
    Ok(true)
}

fn exec_one(args: &[String]) -> Result<bool, String> {
    let [file] = args else {
        return Err(USAGE.to_string());
    };
    let bytes = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
    // With RUST_BACKTRACE set, a panic prints where it happened, as Rust's own hook does.
    if std::env::var_os("RUST_BACKTRACE").is_none() {
        quiet_panics();
    }
    match std::panic::catch_unwind(|| execute(&bytes)) {
        Ok(outcome) => {
            println!("{outcome}");
            Ok(true)
        }
        Err(_) => {
            println!("panic {}", last_panic());
            Ok(false)
        }
    }
}

/// This binary under the address-space limit, with Concord's environment settings removed
/// (each execution sets its own budget and policy).
fn limited(args: &[String]) -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("concord-fuzz"));
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_LIMIT_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(exe)
        .args(args)
        .env_remove("CONCORD_FALLBACK")
        .env_remove("CONCORD_REQUIRE")
        .env_remove("CONCORD_MEMORY_LIMIT")
        .env_remove("CONCORD_TIME_LIMIT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Lines a child prints, as they come, and the child's stderr once it ends.
struct Watched {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

fn watch(mut command: Command) -> Result<Watched, String> {
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start a child: {e}"))?;
    let (send, lines) = mpsc::channel();
    let stdout = child.stdout.take().ok_or("the child has no stdout")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let mut err = child.stderr.take().ok_or("the child has no stderr")?;
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut text);
        text
    });
    Ok(Watched {
        child,
        lines,
        stderr,
    })
}

impl Watched {
    /// Kills the child (a hang) and waits for it.
    fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.join().unwrap_or_default()
    }

    /// The child's end after its stdout closed: `None` for a clean exit, else what it died of.
    fn finish(mut self) -> (Option<String>, String) {
        let status = self.child.wait();
        let stderr = self.stderr.join().unwrap_or_default();
        let death = match status {
            Ok(s) if s.success() => None,
            Ok(s) => Some(match s.code() {
                Some(code) => format!("exit status {code}"),
                None => format!("killed by a signal ({s})"),
            }),
            Err(e) => Some(format!("cannot wait for the child: {e}")),
        };
        (death, stderr)
    }
}

/// The last line of a child's stderr worth showing (an abort's message), cut short.
fn tail(stderr: &str) -> String {
    let line = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    line.chars().take(300).collect()
}

/// One model in a child; `Err` says how it crashed.
fn replay_one(file: &Path, timeout: Duration) -> Result<String, String> {
    let watched = watch(limited(&["exec".to_string(), file.display().to_string()]))?;
    match watched.lines.recv_timeout(timeout) {
        Ok(line) => {
            let (death, stderr) = watched.finish();
            match (line.starts_with("panic"), death) {
                (false, None) => Ok(line),
                (true, _) => Err(line),
                (false, Some(d)) => Err(format!("{d}: {}", tail(&stderr))),
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            watched.kill();
            Err(format!("no outcome after {timeout:?}: a hang"))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let (death, stderr) = watched.finish();
            Err(format!(
                "{}: {}",
                death.unwrap_or_else(|| "exited without an outcome".to_string()),
                tail(&stderr)
            ))
        }
    }
}

fn model_files(args: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for a in args {
        let path = PathBuf::from(a);
        if path.is_dir() {
            let entries = std::fs::read_dir(&path).map_err(|e| format!("{a}: {e}"))?;
            files.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "onnx")),
            );
        } else {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn replay_all(args: &[String], timeout: Duration) -> Result<bool, String> {
    let files = model_files(args)?;
    let mut failed = 0;
    for file in &files {
        match replay_one(file, timeout) {
            Ok(outcome) => println!("replay {}: {outcome}", file.display()),
            Err(crash) => {
                failed += 1;
                println!("replay {}: CRASH {crash}", file.display());
            }
        }
    }
    println!(
        "replayed {} regression models, {failed} crashed",
        files.len()
    );
    Ok(failed == 0)
}

/// A crash the supervisor saw.
#[derive(Debug)]
struct Crash {
    index: u64,
    /// "panic", "hang", "signal", "exit".
    kind: &'static str,
    detail: String,
    seed_model: PathBuf,
    saved: Option<PathBuf>,
}

impl Crash {
    /// What makes two crashes the same one: the kind, and for a panic its location and
    /// message with the numbers blanked, else the seed model it came from.
    fn signature(&self) -> String {
        let what = if self.kind == "panic" {
            self.detail.replace(|c: char| c.is_ascii_digit(), "#")
        } else {
            self.seed_model.display().to_string()
        };
        format!("{} {what}", self.kind)
    }
}

fn run(flags: &Flags) -> Result<bool, String> {
    let timeout = timeout_of(flags);
    let mut clean = true;
    if let Some(dir) = flags.get("regressions") {
        println!("replaying the regression models in {dir} first");
        clean &= replay_all(&[dir.to_string()], timeout)?;
    }
    let seed = match flags.number("seed")? {
        Some(s) => s,
        None => match std::env::var("CONCORD_FUZZ_SEED") {
            Ok(v) => v
                .parse()
                .map_err(|_| format!("CONCORD_FUZZ_SEED={v:?}: expected a whole number"))?,
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
        },
    };
    let budget_executions = flags.number("executions")?;
    let budget_time = flags.number("seconds")?.map(Duration::from_secs);
    if budget_executions.is_none() && budget_time.is_none() {
        return Err("run needs --executions N or --seconds N".to_string());
    }
    let crash_dir = flags.get("crash-dir").map(PathBuf::from);
    let corpus = flags.corpus()?;
    println!(
        "seed {seed} (replay with CONCORD_FUZZ_SEED={seed}); corpus: {} models, {} op types (golden: {}; node tests: {})",
        corpus.seeds.len(),
        corpus.op_types.len(),
        flags.golden().display(),
        flags
            .node_tests()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "absent: set CONCORD_ONNX_NODE_TESTS".to_string())
    );
    let started = Instant::now();
    let mut next: u64 = 0;
    let mut executions: u64 = 0;
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    let mut crashes: Vec<Crash> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let done = |next: u64| {
        budget_executions.is_some_and(|n| next >= n)
            || budget_time.is_some_and(|t| started.elapsed() >= t)
    };
    while !done(next) {
        let mut args = vec![
            "worker".to_string(),
            "--seed".to_string(),
            seed.to_string(),
            "--start".to_string(),
            next.to_string(),
        ];
        if let Some(n) = budget_executions {
            args.extend(["--count".to_string(), (n - next).to_string()]);
        }
        args.extend(flags.corpus_args());
        let watched = watch(limited(&args))?;
        let crash: Option<(&'static str, String)> = loop {
            if done(next) {
                watched.kill();
                break None;
            }
            match watched.lines.recv_timeout(timeout) {
                Ok(line) => {
                    let (_, outcome) = line.split_once(' ').unwrap_or((&line, ""));
                    executions += 1;
                    next += 1;
                    if let Some(detail) = outcome.strip_prefix("panic ") {
                        // The worker caught it and goes on; a new one is not needed.
                        record(
                            &corpus,
                            seed,
                            next - 1,
                            "panic",
                            detail.to_string(),
                            crash_dir.as_deref(),
                            &mut crashes,
                            &mut seen,
                        );
                    } else {
                        *outcomes.entry(outcome.to_string()).or_default() += 1;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let stderr = watched.kill();
                    break Some((
                        "hang",
                        format!("no outcome after {timeout:?} {}", tail(&stderr)),
                    ));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let (death, stderr) = watched.finish();
                    break death.map(|d| {
                        let kind = if d.contains("signal") {
                            "signal"
                        } else {
                            "exit"
                        };
                        (kind, format!("{d}: {}", tail(&stderr)))
                    });
                }
            }
        };
        if let Some((kind, detail)) = crash {
            // The execution after the last one reported is the one that never returned.
            executions += 1;
            next += 1;
            record(
                &corpus,
                seed,
                next - 1,
                kind,
                detail,
                crash_dir.as_deref(),
                &mut crashes,
                &mut seen,
            );
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "executions: {executions} in {elapsed:.1} s ({:.1}/s)",
        executions as f64 / elapsed.max(1e-9)
    );
    let mut by_count: Vec<(&String, &u64)> = outcomes.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    println!("outcomes ({} distinct):", by_count.len());
    for (kind, count) in by_count {
        println!("  {count:>8}  {kind}");
    }
    println!("crashes: {} ({} distinct)", crashes.len(), seen.len());
    for c in &crashes {
        println!(
            "  CRASH {} at mutant {} of seed {seed} (from {}): {}{}",
            c.kind,
            c.index,
            c.seed_model.display(),
            c.detail,
            c.saved
                .as_ref()
                .map(|p| format!("; saved as {}", p.display()))
                .unwrap_or_default()
        );
    }
    Ok(clean && crashes.is_empty())
}

#[allow(clippy::too_many_arguments)]
fn record(
    corpus: &Corpus,
    seed: u64,
    index: u64,
    kind: &'static str,
    detail: String,
    crash_dir: Option<&Path>,
    crashes: &mut Vec<Crash>,
    seen: &mut std::collections::BTreeSet<String>,
) {
    let (pick, bytes) = corpus.mutant(seed, index);
    let mut crash = Crash {
        index,
        kind,
        detail,
        seed_model: corpus.seeds[pick].path.clone(),
        saved: None,
    };
    let new = seen.insert(crash.signature());
    if let Some(dir) = crash_dir.filter(|_| new && seen.len() <= MAX_SAVED) {
        let path = dir.join(format!("{kind}-{seed}-{index}.onnx"));
        let note = format!(
            "{kind} at mutant {index} of seed {seed}, from {}:\n{}\nrebuild: concord-fuzz mutant --seed {seed} --index {index} --out FILE\n",
            crash.seed_model.display(),
            crash.detail
        );
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, &bytes))
            .and_then(|()| std::fs::write(path.with_extension("txt"), note));
        match written {
            Ok(()) => crash.saved = Some(path),
            Err(e) => eprintln!("cannot save the crash in {}: {e}", dir.display()),
        }
    }
    println!(
        "CRASH {kind} at mutant {index}: {}",
        crash.detail.chars().take(300).collect::<String>()
    );
    crashes.push(crash);
}
