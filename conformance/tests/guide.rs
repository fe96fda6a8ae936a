//! docs/backend-authors.md, followed by a backend author in another repository: in a
//! scratch directory outside this workspace, `cargo new` a crate, write the files the guide
//! shows (read out of the guide, so the two cannot drift) with the example executor as its
//! `src/lib.rs`, and run its conformance suite with cargo, as the author would, to a passing
//! report. Then break its expectations the ways an author does and check the run says so.
//!
//! The scratch crate depends on this checkout by path and builds into this workspace's
//! target directory with this workspace's Cargo.lock and `--offline`, so only Concord's own
//! crates and the scratch crate are compiled, not the registry dependencies.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The line that marks the next fenced block as a file of the author's crate.
const MARKER: &str = "<!-- guide-test: ";
/// The files the guide must show, each marked with [`MARKER`].
const GUIDE_FILES: [&str; 3] = ["Cargo.toml", "tests/conformance.rs", "conformance/toy.toml"];
/// Where the guide's Cargo.toml expects Concord's checkout, relative to the author's crate.
const GUIDE_CHECKOUT: &str = "\"../concord/";

/// The scratch directory: removed after a passing test, kept after a failing one so that it
/// can be looked at.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the scratch crate is kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn the_guide_builds_a_crate_in_another_repository_that_passes_the_suite() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or_else(|| panic!("the conformance crate has a parent directory"))
        .to_path_buf();
    let guide = read(&workspace.join("docs/backend-authors.md"));
    let files = guide_files(&guide);

    // `cargo new`, outside the workspace: the temporary directory is no part of it.
    let scratch =
        Scratch(std::env::temp_dir().join(format!("concord-guide-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&scratch.0);
    std::fs::create_dir_all(&scratch.0).unwrap_or_else(|e| panic!("creating the scratch dir: {e}"));
    let manifest: toml::Table = toml::from_str(&files["Cargo.toml"])
        .unwrap_or_else(|e| panic!("the guide's Cargo.toml does not parse: {e}"));
    let name = manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or_else(|| panic!("the guide's Cargo.toml names no package"));
    let new = cargo(&scratch.0)
        .args(["new", "--lib", "--vcs", "none", name])
        .output()
        .unwrap_or_else(|e| panic!("running cargo new: {e}"));
    assert_success(&new, "cargo new");
    let krate = scratch.0.join(name);
    assert!(
        krate.join("src/lib.rs").is_file(),
        "cargo new made no src/lib.rs"
    );

    // The guide's files, with the checkout path pointing at this one, and the example
    // executor as the library.
    let checkout = format!("\"{}/", workspace.display());
    assert_eq!(
        files["Cargo.toml"].matches(GUIDE_CHECKOUT).count(),
        2,
        "the guide's Cargo.toml should name concord and concord-conformance in {GUIDE_CHECKOUT}…"
    );
    write(
        &krate.join("Cargo.toml"),
        &files["Cargo.toml"].replace(GUIDE_CHECKOUT, &checkout),
    );
    write(
        &krate.join("tests/conformance.rs"),
        &files["tests/conformance.rs"],
    );
    write(
        &krate.join("conformance/toy.toml"),
        &files["conformance/toy.toml"],
    );
    write(
        &krate.join("src/lib.rs"),
        &read(&workspace.join("conformance/examples/toy_executor.rs")),
    );
    std::fs::copy(workspace.join("Cargo.lock"), krate.join("Cargo.lock"))
        .unwrap_or_else(|e| panic!("copying Cargo.lock: {e}"));
    assert_same_profiles(&workspace, &manifest);

    // The run the guide promises: every trial passes or is a reasoned skip, the author's
    // expectations file is the one read, and the report says PASS.
    // CONCORD_REQUIRE naming the author's executor is understood (the suite's registry
    // holds it), as the guide tells an author to set it on their device's runner.
    let passing = conformance_command(&krate, &[])
        .env("CONCORD_REQUIRE", "toy")
        .output()
        .unwrap_or_else(|e| panic!("running cargo test: {e}"));
    assert_success(&passing, "the guide's conformance suite");
    let stderr = String::from_utf8_lossy(&passing.stderr);
    let expectations = krate.join("conformance/toy.toml");
    assert!(
        stderr.contains(&format!(
            "conformance: toy: expectations from {}",
            expectations.display()
        )),
        "the run does not say it read the author's expectations file:\n{stderr}"
    );
    let floor: toml::Table = toml::from_str(&files["conformance/toy.toml"])
        .unwrap_or_else(|e| panic!("the guide's toy.toml does not parse: {e}"));
    let floor = floor
        .get("min_executed")
        .and_then(|v| v.as_integer())
        .unwrap_or_else(|| panic!("the guide's toy.toml sets no min_executed"));
    let summary = report_summary(&krate);
    // The figures to set the guide's floor by, in the test's output.
    println!(
        "the guide's suite: {} trials, {} executed, floor {floor}",
        summary["trials"], summary["executed"]
    );
    assert_eq!(summary["failed"], 0, "{summary:#}");
    assert_eq!(
        summary["run_failures"],
        serde_json::json!([]),
        "{summary:#}"
    );
    let executed = summary["executed"].as_i64().unwrap_or(-1);
    assert!(
        executed >= floor,
        "{executed} executed, below the guide's floor {floor}"
    );
    let groups = summary["by_executor_target"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        groups.iter().any(|g| g["executor"] == "toy"
            && g["target"] == "toy"
            && g["pass"].as_i64() > Some(0)),
        "no passing toy/toy trials in the report: {summary:#}"
    );
    let skipped = summary["skips"].as_array().cloned().unwrap_or_default();
    assert!(
        skipped.iter().any(|s| s["reason"]
            .as_str()
            .is_some_and(|r| r.contains("toy has no Conv kernel"))),
        "the declined cases are not reported as skips with toy's reason: {summary:#}"
    );

    // The expectations file is really read: an unknown key in it stops the run, and the
    // report says why.
    write(
        &expectations,
        &format!("{}\nmin_execute = 1\n", files["conformance/toy.toml"]),
    );
    let stale = conformance(&krate, &[]);
    let stderr = String::from_utf8_lossy(&stale.stderr);
    assert!(
        !stale.status.success(),
        "an unknown key in the expectations file passed:\n{stderr}"
    );
    assert!(
        stderr.contains("the conformance suite cannot start")
            && stderr.contains(&expectations.display().to_string())
            && stderr.contains("min_execute"),
        "the failure does not name the file and the key:\n{stderr}"
    );
    let summary = report_summary(&krate);
    assert!(
        summary["run_failures"][0]
            .as_str()
            .is_some_and(|f| f.contains("min_execute")),
        "the report does not say why the run did not start: {summary:#}"
    );

    // No expectations file: said before the first trial; a failure under CI.
    std::fs::remove_file(&expectations).unwrap_or_else(|e| panic!("removing toy.toml: {e}"));
    let local = conformance_command(&krate, &["--", "toy/toy/op/Relu"])
        .env_remove("CI")
        .output()
        .unwrap_or_else(|e| panic!("running cargo test: {e}"));
    let stderr = String::from_utf8_lossy(&local.stderr);
    assert_success(
        &local,
        "a filtered run without an expectations file, CI unset",
    );
    let notice = format!(
        "conformance: toy has no expectations file (looked for {})",
        expectations.display()
    );
    assert!(
        stderr.contains(&notice),
        "no notice of the missing file:\n{stderr}"
    );
    let mut in_ci = conformance_command(&krate, &["--", "toy/toy/op/Relu"]);
    let in_ci = in_ci
        .env("CI", "true")
        .output()
        .unwrap_or_else(|e| panic!("running cargo test: {e}"));
    let stderr = String::from_utf8_lossy(&in_ci.stderr);
    assert!(
        !in_ci.status.success(),
        "CI passed without an expectations file:\n{stderr}"
    );
    assert!(
        stderr.contains("executor `toy` has no expectations file") && stderr.contains("CI is set"),
        "the CI failure does not say why:\n{stderr}"
    );
}

/// The fenced block after each [`MARKER`] line, by the file name the marker gives; every
/// one of [`GUIDE_FILES`] must be there, once.
fn guide_files(guide: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut lines = guide.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix(MARKER) else {
            continue;
        };
        let file = rest.trim_end_matches("-->").trim().to_string();
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "the guide's marker for {file} is not followed by a fenced block: {fence:?}"
        );
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        let previous = files.insert(file.clone(), body.join("\n") + "\n");
        assert!(previous.is_none(), "the guide shows {file} twice");
    }
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    let mut expected = GUIDE_FILES.to_vec();
    expected.sort_unstable();
    assert_eq!(names, expected, "the guide's marked files");
    files
}

/// The scratch crate must build with this workspace's `dev` and `test` profiles (the ones
/// `cargo test` uses): otherwise every registry dependency is compiled again, and the test
/// takes tens of minutes instead of a few.
fn assert_same_profiles(workspace: &Path, scratch: &toml::Table) {
    let ours: toml::Table = toml::from_str(&read(&workspace.join("Cargo.toml")))
        .unwrap_or_else(|e| panic!("the workspace Cargo.toml does not parse: {e}"));
    for profile in ["dev", "test"] {
        let get = |t: &toml::Table| t.get("profile").and_then(|p| p.get(profile)).cloned();
        assert_eq!(
            get(scratch),
            get(&ours),
            "the guide's [profile.{profile}] differs from the workspace's; keep them the same"
        );
    }
}

/// `cargo` in `dir`, as the author would run it, building into this workspace's target
/// directory. The suite's data comes from the crate, never from the environment.
fn cargo(dir: &Path) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("CONCORD_CONFORMANCE_DIR")
        .env_remove("CONCORD_GOLDEN_DIR")
        .env_remove("CONCORD_REPORT_DIR");
    command
}

/// `cargo test --offline --test conformance` in the author's crate, with `extra` arguments.
fn conformance_command(krate: &Path, extra: &[&str]) -> Command {
    let mut command = cargo(krate);
    command
        .args(["test", "--offline", "--test", "conformance"])
        .args(extra);
    command
}

fn conformance(krate: &Path, extra: &[&str]) -> Output {
    conformance_command(krate, extra)
        .output()
        .unwrap_or_else(|e| panic!("running cargo test: {e}"))
}

/// This workspace's target directory (cargo gives integration tests `<target>/tmp`).
fn target_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .unwrap_or_else(|| panic!("{} has no parent", tmp.display()))
        .to_path_buf()
}

/// conformance.json's summary, from the report directory the guide's harness names.
fn report_summary(krate: &Path) -> serde_json::Value {
    let path = krate.join("target/conformance-report/conformance.json");
    let report: serde_json::Value = serde_json::from_str(&read(&path))
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
    report["summary"].clone()
}

fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
        output.status,
        tail(&output.stdout),
        tail(&output.stderr)
    );
}

/// The last lines of a command's output: enough to see the failure, not the whole run.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
