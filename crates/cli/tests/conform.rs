//! End to end: `concord conform` on the reference executor with a name filter runs the
//! selected golden trials, prints the summary, exits zero, and writes every report.

use std::path::PathBuf;
use std::process::Command;

fn report_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    // A report left by an earlier run must not make this one look written.
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn conform_on_cpu_writes_every_report() {
    let dir = report_dir("conform-cpu-relu");
    let output = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(["conform", "--executor", "cpu", "--filter", "golden/relu"])
        .arg("--report-dir")
        .arg(&dir)
        .env_remove("CONCORD_REQUIRE")
        .output()
        .expect("the concord binary starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(stdout.contains("result: PASS"), "stdout:\n{stdout}");
    // stderr is a pipe here, as in a CI log: the run says how far it got in lines (every
    // few seconds, and once at the end) instead of drawing a bar nobody sees.
    assert!(
        stderr.contains("conform: 2/2 trials done, 0 failures so far"),
        "stderr:\n{stderr}"
    );
    for name in ["conformance.json", "junit.xml", "matrix.md", "matrix.html"] {
        assert!(dir.join(name).is_file(), "{name} was not written");
    }
    let text = std::fs::read_to_string(dir.join("conformance.json")).expect("reads");
    let json: serde_json::Value = serde_json::from_str(&text).expect("conformance.json parses");
    // conformance/golden/ holds `relu` and `relu_f16`; the filter selects exactly those two.
    let names: Vec<&str> = json["records"]
        .as_array()
        .expect("records is an array")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec!["cpu/cpu/golden/relu", "cpu/cpu/golden/relu_f16"],
        "records: {names:?}"
    );
    assert_eq!(json["summary"]["executed"], 2);
    assert_eq!(json["summary"]["failed"], 0);
    let junit = std::fs::read_to_string(dir.join("junit.xml")).expect("reads");
    assert!(junit.contains("<testsuite name=\"cpu/cpu\""), "{junit}");
}

/// A usage error of `concord conform` (an unknown name on the command line or in
/// CONCORD_REQUIRE): one `error:` line on stderr naming the known names, a non-zero exit,
/// and nothing run — no summary, no property seed, no report written.
fn assert_usage_error(output: &std::process::Output, dir: &std::path::Path, contains: &str) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "stdout:\n{stdout}");
    assert!(stdout.is_empty(), "a usage error ran something:\n{stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "stderr:\n{stderr}");
    assert!(lines[0].contains(contains), "stderr:\n{stderr}");
    assert!(!dir.exists(), "a usage error wrote reports into {dir:?}");
}

#[test]
fn conform_fails_on_an_unknown_executor_and_a_selection_of_nothing() {
    let dir = report_dir("conform-unknown");
    let output = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(["conform", "--executor", "no-such-executor", "--no-progress"])
        .arg("--report-dir")
        .arg(&dir)
        .env_remove("CONCORD_REQUIRE")
        .output()
        .expect("the concord binary starts");
    assert_usage_error(
        &output,
        &dir,
        "no executor named `no-such-executor` (this build has: cpu, ",
    );
    let filtered_out = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args([
            "conform",
            "--executor",
            "cpu",
            "--filter",
            "matches/nothing",
        ])
        .arg("--report-dir")
        .arg(&dir)
        .output()
        .expect("the concord binary starts");
    let stdout = String::from_utf8_lossy(&filtered_out.stdout);
    assert!(
        !filtered_out.status.success(),
        "a selection of no trial must not pass: {stdout}"
    );
    // An unknown target is a usage error, refused before the suite starts.
    let typo_dir = report_dir("conform-unknown-target");
    let typo = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(["conform", "--target", "fp16", "--no-progress"])
        .arg("--report-dir")
        .arg(&typo_dir)
        .env_remove("CONCORD_REQUIRE")
        .output()
        .expect("the concord binary starts");
    assert_usage_error(
        &typo,
        &typo_dir,
        "unknown target `fp16` (known: cpu, opencl, opencl-fp16, cuda, cuda-fp16)",
    );
    let near = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(["conform", "--target", "opencl-fp61", "--no-progress"])
        .arg("--report-dir")
        .arg(&typo_dir)
        .env_remove("CONCORD_REQUIRE")
        .output()
        .expect("the concord binary starts");
    assert_usage_error(&near, &typo_dir, "did you mean `opencl-fp16`?");
    assert!(
        stdout.contains(
            "no trial matches the selection (executors cpu, targets all, filter `matches/nothing`)"
        ),
        "stdout:\n{stdout}"
    );
}

#[test]
fn conform_fails_when_concord_require_names_nothing_known() {
    let dir = report_dir("conform-require-typo");
    let output = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args([
            "conform",
            "--executor",
            "cpu",
            "--filter",
            "op/Relu",
            "--no-progress",
        ])
        .arg("--report-dir")
        .arg(&dir)
        .env("CONCORD_REQUIRE", "bogus")
        .output()
        .expect("the concord binary starts");
    assert_usage_error(&output, &dir, "CONCORD_REQUIRE=\"bogus\"");
}

/// Runs `concord` with `args` (CONCORD_REQUIRE removed); returns success and stdout.
fn concord(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(args)
        .env_remove("CONCORD_REQUIRE")
        .output()
        .expect("the concord binary starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (
        output.status.success(),
        format!("{stdout}\nstderr:\n{stderr}"),
    )
}

#[test]
fn shards_of_a_run_merge_into_one_report() {
    let root = report_dir("conform-shards");
    let dir = |name: &str| root.join(name).to_string_lossy().into_owned();
    let names_in = |name: &str| -> Vec<String> {
        let text = std::fs::read_to_string(root.join(name).join("conformance.json"))
            .expect("conformance.json is written");
        let json: serde_json::Value = serde_json::from_str(&text).expect("parses");
        let mut names: Vec<String> = json["records"]
            .as_array()
            .expect("records")
            .iter()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    };
    let conform = |shard: Option<&str>, out: &str| {
        let mut args = vec![
            "conform",
            "--executor",
            "cpu",
            "--filter",
            "cpu/cpu/golden/",
            "--no-progress",
        ];
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        let out = dir(out);
        args.extend(["--report-dir", &out]);
        let (ok, text) = concord(&args);
        assert!(ok, "{text}");
        if let Some(s) = shard {
            assert!(text.contains(&format!("(shard {s})")), "{text}");
        }
    };
    conform(None, "whole");
    conform(Some("1/2"), "shard-1");
    conform(Some("2/2"), "shard-2");
    let (first, second) = (names_in("shard-1"), names_in("shard-2"));
    assert!(!first.is_empty() && !second.is_empty());
    // The two shards hold the whole run's trials between them, each once.
    let mut both: Vec<String> = first.iter().chain(&second).cloned().collect();
    both.sort();
    assert_eq!(both, names_in("whole"));

    let (ok, text) = concord(&[
        "report",
        "merge",
        &dir("shard-1"),
        &dir("shard-2"),
        "--out",
        &dir("merged"),
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("merged 2 report(s)"), "{text}");
    for name in ["conformance.json", "junit.xml", "matrix.md", "matrix.html"] {
        assert!(
            root.join("merged").join(name).is_file(),
            "{name} was not written"
        );
    }
    assert_eq!(names_in("merged"), names_in("whole"));
    // The merged matrix page is the whole run's.
    let page =
        |name: &str| std::fs::read_to_string(root.join(name).join("matrix.md")).expect("reads");
    assert_eq!(page("merged"), page("whole"));

    // One shard alone is not the run: the merge says which shard is missing and fails.
    let (ok, text) = concord(&["report", "merge", &dir("shard-1"), "--out", &dir("half")]);
    assert!(!ok, "{text}");
    assert!(text.contains("shard(s) 2/2 of the run on cpu on"), "{text}");
    // A shard merged twice is two copies of one run, refused.
    let (ok, text) = concord(&[
        "report",
        "merge",
        &dir("shard-1"),
        &dir("shard-1"),
        "--out",
        &dir("twice"),
    ]);
    assert!(!ok, "{text}");
    assert!(text.contains("is in both"), "{text}");
    // A bad shard is a usage error.
    let (ok, text) = concord(&["conform", "--shard", "3/2", "--executor", "cpu"]);
    assert!(!ok, "{text}");
    assert!(text.contains("is not a shard"), "{text}");
}
