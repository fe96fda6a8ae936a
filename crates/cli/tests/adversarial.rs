//! The adversarial corpus (`adversarial/corpus.rs`) run through `concord run` on every
//! executor this machine has (cpu, and opencl when an OpenCL device is found), each case in a
//! child process under a 4 GiB address-space limit and a watchdog. Each must end as the case
//! says — a one-line typed error with exit status 1, or success — never a panic (exit 101),
//! a signal, a hang, or a file written outside its output directory.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod adversarial {
    pub mod corpus;
}

use adversarial::corpus::{self, Case, Class, Expect, Feed};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod limited;

/// A watchdog, not a timing assertion: a case still running after this long is a hang.
const HANG: Duration = Duration::from_secs(120);

/// The executors to run on: cpu always; opencl when `concord info` finds a device. Without
/// one, a visible skip locally and a failure under CI (which has PoCL).
fn backends() -> Vec<&'static str> {
    let info = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(["info", "--require", "opencl"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run concord info: {e}"));
    if info.status.success() {
        return vec!["cpu", "opencl"];
    }
    let why = String::from_utf8_lossy(&info.stderr).into_owned();
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and OpenCL is unavailable, so the corpus would skip it: {why}"
    );
    println!("opencl: unavailable here, the corpus runs on cpu only ({why})");
    vec!["cpu"]
}

/// Every file under `dir`, relative to it, except those under any directory named `out`.
fn files_outside_out(dir: &Path) -> BTreeSet<PathBuf> {
    fn walk(root: &Path, dir: &Path, acc: &mut BTreeSet<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if is_dir && e.file_name() == "out" {
                continue;
            }
            acc.insert(rel);
            if is_dir {
                walk(root, &p, acc);
            }
        }
    }
    let mut acc = BTreeSet::new();
    walk(dir, dir, &mut acc);
    acc
}

fn write_case(dir: &Path, case: &Case) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
    std::fs::write(dir.join("model.onnx"), &case.model).unwrap_or_else(|e| panic!("{e}"));
    for (name, bytes) in &case.files {
        if let Some(link) = name.strip_suffix("@symlink") {
            let target = String::from_utf8_lossy(bytes).into_owned();
            std::os::unix::fs::symlink(target, dir.join(link)).unwrap_or_else(|e| panic!("{e}"));
        } else {
            std::fs::write(dir.join(name), bytes).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// Runs one case on one backend in `dir` (the child's working directory) and returns what
/// was wrong, if anything.
fn run_case(case: &Case, backend: &str, dir: &Path) -> Result<(), String> {
    let out_dir = dir.join("out");
    let mut args: Vec<String> = vec![
        "run".into(),
        "model.onnx".into(),
        "--backend".into(),
        backend.into(),
        "--fallback".into(),
        "allow".into(),
        "--output-dir".into(),
        out_dir.display().to_string(),
    ];
    match &case.feed {
        Feed::Random => args.extend(["--random-seed".into(), "7".into()]),
        Feed::Files(files) => {
            for (name, file) in files {
                args.extend(["--input".into(), format!("{name}={file}")]);
            }
        }
        Feed::Args(a) => args.extend(a.iter().cloned()),
    }
    args.extend(case.extra_args.iter().cloned());
    let before = files_outside_out(dir);
    let log = dir.join("..").join(format!(
        "{}.{backend}.stderr",
        dir.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let stderr_file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
    let mut child = limited::concord(&args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr_file)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start concord: {e}"));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap_or_else(|e| panic!("{e}")) {
            break s;
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {HANG:?}: a hang"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let err = std::fs::read_to_string(&log).unwrap_or_default();
    let after = files_outside_out(dir);
    let written: Vec<_> = after.difference(&before).collect();
    if !written.is_empty() {
        return Err(format!("wrote outside the output directory: {written:?}"));
    }
    if err.contains("panicked") {
        return Err(format!("a panic reached the user: {err}"));
    }
    let code = match status.code() {
        Some(c) => c,
        None => return Err(format!("killed by a signal ({status}): {err}")),
    };
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    let check_refusal = |needles: &[String]| -> Result<(), String> {
        if code != 1 {
            return Err(format!("exit status {code}, expected 1: {err}"));
        }
        if lines.len() != 1 || !lines[0].starts_with("error: ") {
            return Err(format!("expected one `error:` line, got: {err}"));
        }
        if lines[0].len() > 1100 {
            return Err(format!("an error line of {} bytes", lines[0].len()));
        }
        let missing: Vec<_> = needles.iter().filter(|n| !lines[0].contains(*n)).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("`{}` lacks {missing:?}", lines[0]))
        }
    };
    let check_success = |outputs: bool| -> Result<(), String> {
        if code != 0 {
            return Err(format!("exit status {code}, expected success: {err}"));
        }
        let written = std::fs::read_dir(&out_dir).map(|d| d.count()).unwrap_or(0);
        if outputs && written == 0 {
            return Err("succeeded but wrote no output".into());
        }
        if !outputs && written != 0 {
            return Err(format!("wrote {written} files for a model with no outputs"));
        }
        Ok(())
    };
    match &case.expect {
        Expect::Runs => check_success(true),
        Expect::RunsWritingNothing => check_success(false),
        Expect::Refused(needles) => check_refusal(needles),
        Expect::RunsOrRefused(needles) => {
            if code == 0 {
                check_success(true)
            } else {
                check_refusal(needles)
            }
        }
    }
}

#[test]
fn the_adversarial_corpus_ends_in_typed_errors_or_success_on_every_executor() {
    let cases = corpus::all();
    let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), cases.len(), "two cases share a name");
    let root = std::env::temp_dir().join(format!("concord-adversarial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let backends = backends();
    let mut jobs = vec![];
    for case in &cases {
        for backend in &backends {
            let dir = root.join(format!("{}.{backend}", case.name));
            write_case(&dir, case);
            jobs.push((case, *backend, dir));
        }
    }
    let root_before: BTreeSet<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let escapes = [
        PathBuf::from("/tmp/concord-adversarial-escape.npy"),
        std::env::temp_dir().join("concord-adversarial-escape.npy"),
    ];
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((case, backend, dir)) = jobs.get(i) else {
                    break;
                };
                if let Err(why) = run_case(case, backend, dir) {
                    failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(format!("{} on {backend}: {why}", case.name));
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    // Nothing new beside the case directories and their logs.
    for entry in std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
    {
        let name = entry.file_name();
        let is_log = name.to_string_lossy().ends_with(".stderr");
        if !root_before.contains(&name) && !is_log {
            failures.push(format!("a file appeared beside the cases: {name:?}"));
        }
    }
    for e in escapes {
        if e.exists() {
            failures.push(format!("{e:?} was written"));
        }
    }
    let mut counts: BTreeMap<Class, usize> = BTreeMap::new();
    for c in &cases {
        *counts.entry(c.class).or_default() += 1;
    }
    println!(
        "adversarial corpus: {} cases × {} executors ({})",
        cases.len(),
        backends.len(),
        backends.join(", ")
    );
    for (class, n) in &counts {
        println!("  {class:?}: {n}");
    }
    failures.sort();
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
    assert!(cases.len() >= 150, "the corpus shrank to {}", cases.len());
    let _ = std::fs::remove_dir_all(&root);
}
