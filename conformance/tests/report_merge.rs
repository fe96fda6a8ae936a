//! Fleets: `concord conform --shard K/N` runs a deterministic part of the trials, and
//! `concord report merge` joins reports into one. N shards of a real run merged equal the
//! whole run (records, summary, matrix); the merge refuses two copies of one run, names a
//! missing shard, checks the floors the shards left to it, refuses a report of another
//! format, and keeps two devices of one executor/target apart as two columns.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::ExecutorRegistry;
use concord_conformance::progress::{self, ProgressDisplay, RunOptions, RunSummary};
use concord_conformance::report::merge::{self, RunReport};
use concord_conformance::report::{
    self, junit_xml, matrix_markdown, summarize, Floor, Matrix, RunInfo,
};
use concord_conformance::{NodeCoverage, Record, Shard, Verdict};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-merge-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The reference executor's golden trials (and a probe record for each built-in backend
/// the reference-only registry lacks), as one shard or whole, reports in `dir`.
fn golden_run(shard: Option<Shard>, dir: &Path) -> RunSummary {
    let mut options = RunOptions::new(ExecutorRegistry::reference_only());
    options.filter = Some("cpu/cpu/golden/".into());
    options.shard = shard;
    options.report_dir = Some(dir.to_path_buf());
    options.progress = ProgressDisplay::Hidden;
    progress::run(&options)
}

/// Records without their durations (which differ from run to run), in merge order.
fn comparable(records: &[Record]) -> Vec<Record> {
    let mut out: Vec<Record> = records
        .iter()
        .cloned()
        .map(|mut r| {
            r.duration_ms = 0.0;
            r
        })
        .collect();
    out.sort_by(|a, b| (&a.name, &a.device).cmp(&(&b.name, &b.device)));
    out
}

#[test]
fn n_shards_merged_equal_one_whole_run() {
    let root = scratch("shards");
    let whole = golden_run(None, &root.join("whole"));
    assert!(
        whole.records.len() > 50,
        "the golden run is big enough to split: {}",
        whole.records.len()
    );
    let count = 3;
    let mut reports = Vec::new();
    let mut sizes = Vec::new();
    for index in 1..=count {
        let shard = Shard::new(index, count).unwrap_or_else(|e| panic!("{e}"));
        let dir = root.join(format!("shard-{index}"));
        let run = golden_run(Some(shard), &dir);
        assert_eq!(run.run.shard, Some(shard));
        assert!(
            run.records.iter().all(|r| shard.selects(&r.name)),
            "shard {shard} ran a trial of another shard"
        );
        sizes.push(run.records.len());
        reports.push(RunReport::read(&dir).unwrap_or_else(|e| panic!("{e}")));
    }
    assert_eq!(sizes.iter().sum::<usize>(), whole.records.len());
    assert!(
        sizes.iter().all(|&n| n > 0),
        "every shard holds some trials: {sizes:?}"
    );
    let merged = merge::merge(&reports).unwrap_or_else(|e| panic!("{e}"));
    assert_same_records(&merged.records, &whole.records);
    assert_eq!(merged.run_failures, whole.summary.run_failures);
    let merged_summary = summarize(&merged.records, &merged.run_failures);
    assert_eq!(merged_summary, whole.summary);
    let whole_markdown = std::fs::read_to_string(root.join("whole").join("matrix.md"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        matrix_markdown(&Matrix::from_records(&merged.records), &merged_summary),
        whole_markdown
    );
    // The merged report lists where it came from and what each machine's probe found.
    assert_eq!(merged.run.merged_from.len(), count);
    assert!(merged.run.devices.iter().any(|d| d.executor == "cpu"));
    // Merging the whole run alone gives the same records: the merge adds nothing.
    let alone =
        merge::merge(&[RunReport::read(&root.join("whole")).unwrap_or_else(|e| panic!("{e}"))])
            .unwrap_or_else(|e| panic!("{e}"));
    assert_same_records(&alone.records, &merged.records);
}

/// Equal records but for durations; on a difference, shows the first differing pair
/// rather than two lists of hundreds.
fn assert_same_records(got: &[Record], want: &[Record]) {
    let (got, want) = (comparable(got), comparable(want));
    assert_eq!(got.len(), want.len());
    if let Some((g, w)) = got.iter().zip(&want).find(|(g, w)| g != w) {
        panic!("records differ:\n{g:?}\n{w:?}");
    }
}

fn record(name: &str, device: &str, verdict: Verdict) -> Record {
    let mut parts = name.splitn(4, '/');
    let executor = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let category = parts.next().unwrap_or_default().to_string();
    Record {
        name: name.to_string(),
        executor,
        target,
        device: device.to_string(),
        category,
        subject: "Relu".to_string(),
        verdict,
        comparisons: Vec::new(),
        notices: Vec::new(),
        coverage: None,
        duration_ms: 1.0,
    }
}

fn report(path: &str, records: Vec<Record>, run: RunInfo) -> RunReport {
    RunReport {
        path: PathBuf::from(path),
        run,
        run_failures: Vec::new(),
        records,
    }
}

fn shard(index: usize, count: usize) -> RunInfo {
    RunInfo {
        shard: Some(Shard::new(index, count).unwrap_or_else(|e| panic!("{e}"))),
        ..RunInfo::default()
    }
}

#[test]
fn the_same_trial_on_the_same_device_twice_is_refused() {
    let a = report(
        "a/conformance.json",
        vec![record("x/x/golden/relu", "gpu0", Verdict::Pass)],
        RunInfo::default(),
    );
    let b = report(
        "b/conformance.json",
        vec![record("x/x/golden/relu", "gpu0", Verdict::Pass)],
        RunInfo::default(),
    );
    let error = merge::merge(&[a, b]).err().unwrap_or_default();
    assert!(
        error.contains("x/x/golden/relu")
            && error.contains("a/conformance.json")
            && error.contains("b/conformance.json"),
        "{error}"
    );
}

#[test]
fn a_missing_shard_and_a_floor_below_are_run_level_failures() {
    let on = |name: &str| record(name, "gpu0", Verdict::Pass);
    let mut first = shard(1, 3);
    first.deferred_floors = vec![Floor {
        executor: "x".into(),
        device: "gpu0".into(),
        available: true,
        min_executed: 3,
        min_node_coverage: Some(0.9),
        expectations: "x.toml".into(),
        recorded: Vec::new(),
        trials: Vec::new(),
    }];
    let mut partial = on("x/x/model/m");
    partial.verdict = Verdict::Partial {
        on_executor: 1,
        nodes: 2,
    };
    partial.coverage = Some(NodeCoverage {
        on_executor: 1,
        nodes: 2,
        declined: Vec::new(),
    });
    let reports = [
        report("s1", vec![on("x/x/golden/a")], first.clone()),
        report("s3", vec![partial], shard(3, 3)),
    ];
    let merged = merge::merge(&reports).unwrap_or_else(|e| panic!("{e}"));
    // Two trials executed of a floor of three; 1 of 2 nodes is below 0.9 (the golden
    // trial has no coverage recorded, so it adds no node).
    let failures = merged.run_failures.join("\n");
    assert_eq!(merged.run_failures.len(), 3, "{failures}");
    assert!(
        failures.contains("shard(s) 2/3 of the run on no recorded device missing"),
        "{failures}"
    );
    assert!(
        failures.contains("only 2 cases executed, below the floor of 3 in x.toml"),
        "{failures}"
    );
    assert!(
        failures.contains("x/x: node coverage 50.0% (1 of 2 nodes)")
            && failures.contains("min_node_coverage = 0.9"),
        "{failures}"
    );
    // With the missing shard back, the floor on executed trials is met.
    let reports = [
        reports[0].clone(),
        report("s2", vec![on("x/x/golden/b")], shard(2, 3)),
        reports[1].clone(),
    ];
    let merged = merge::merge(&reports).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(merged.run_failures.len(), 1, "{:?}", merged.run_failures);
    assert!(merged.run_failures[0].contains("min_node_coverage"));
    // The floors were checked here, so the merged report defers nothing further.
    assert!(merged.run.deferred_floors.is_empty());
    // One shard given twice is refused, even when it holds no trial.
    let empty = report("s2-again", Vec::new(), shard(2, 3));
    let error = merge::merge(&[reports[1].clone(), empty.clone(), empty])
        .err()
        .unwrap_or_default();
    assert!(
        error.contains("shard 2/3") && error.contains("given twice"),
        "{error}"
    );
}

#[test]
fn shards_on_several_devices_are_complete_per_device() {
    let on = |device: &str| RunInfo {
        devices: vec![report::DeviceEntry {
            executor: "x".into(),
            device: device.into(),
            ..Default::default()
        }],
        ..shard(1, 2)
    };
    let second = |device: &str| RunInfo {
        shard: Some(Shard::new(2, 2).unwrap_or_else(|e| panic!("{e}"))),
        ..on(device)
    };
    let reports = [
        report("a1", Vec::new(), on("gpu A")),
        report("a2", Vec::new(), second("gpu A")),
        report("b1", Vec::new(), on("gpu B")),
    ];
    let merged = merge::merge(&reports).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        merged.run_failures,
        vec!["shard(s) 2/2 of the run on x on gpu B missing from the merge: the merged report covers only part of the run"]
    );
}

#[test]
fn a_report_of_another_format_is_refused() {
    let dir = scratch("format");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let old =
        r#"{"format":"concord-conformance-report/1","summary":{"run_failures":[]},"records":[]}"#;
    std::fs::write(dir.join("conformance.json"), old).unwrap_or_else(|e| panic!("{e}"));
    let error = RunReport::read(&dir).err().unwrap_or_default();
    assert!(
        error.contains("concord-conformance-report/1") && error.contains(report::JSON_FORMAT),
        "{error}"
    );
    std::fs::write(dir.join("conformance.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
    let error = RunReport::read(&dir).err().unwrap_or_default();
    assert!(error.contains("not a conformance report"), "{error}");
}

#[test]
fn two_devices_of_one_executor_are_two_columns() {
    let a = report(
        "runner-a",
        vec![record("x/x/golden/relu", "gpu A", Verdict::Pass)],
        RunInfo::default(),
    );
    let b = report(
        "runner-b",
        vec![record(
            "x/x/golden/relu",
            "gpu B",
            Verdict::Fail {
                message: "output `y`: 1 of 4 elements out of tolerance".into(),
            },
        )],
        RunInfo::default(),
    );
    let merged = merge::merge(&[a, b]).unwrap_or_else(|e| panic!("{e}"));
    let matrix = Matrix::from_records(&merged.records);
    let titles: Vec<String> = matrix.columns.iter().map(|c| c.title()).collect();
    assert_eq!(titles, vec!["x/x on gpu A", "x/x on gpu B"]);
    let summary = summarize(&merged.records, &merged.run_failures);
    let groups: Vec<(&str, usize, usize)> = summary
        .by_executor_target
        .iter()
        .map(|g| (g.device.as_str(), g.counts.pass, g.counts.fail))
        .collect();
    assert_eq!(groups, vec![("gpu A", 1, 0), ("gpu B", 0, 1)]);
    let xml = junit_xml(&merged.records, &merged.run_failures).unwrap_or_else(|e| panic!("{e}"));
    assert!(xml.contains("<testsuite name=\"x/x on gpu A\""), "{xml}");
    assert!(xml.contains("<testsuite name=\"x/x on gpu B\""), "{xml}");
}
