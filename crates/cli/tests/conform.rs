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

#[test]
fn conform_fails_on_an_unknown_executor_and_a_selection_of_nothing() {
    let dir = report_dir("conform-unknown");
    let output = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(["conform", "--executor", "no-such-executor", "--no-progress"])
        .arg("--report-dir")
        .arg(&dir)
        .output()
        .expect("the concord binary starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "stdout:\n{stdout}");
    assert!(
        stdout.contains("no executor named `no-such-executor`"),
        "stdout:\n{stdout}"
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
    assert!(stdout.contains("no trial matches"), "stdout:\n{stdout}");
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
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "stdout:\n{stdout}");
    assert!(
        stdout.contains("CONCORD_REQUIRE=\"bogus\""),
        "stdout:\n{stdout}"
    );
}
