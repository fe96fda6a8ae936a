//! The reports written from a fixed, hand-made set of records: every verdict kind (a
//! partial pass and a failure that ran partly on the reference among them), two executors,
//! two targets of one of them, duplicated fallback notices and a run-level failure. Counts
//! are checked against the hand tally below; the rendered text is pinned by insta snapshots
//! (update with `cargo insta review`, and read the diff).

use concord_conformance::compare::Comparison;
use concord_conformance::outcome::DeclinedNode;
use concord_conformance::report::{
    self, junit_xml, matrix_html, matrix_markdown, merge::RunReport, summarize, Counts, Matrix,
    NodeCount, Status,
};
use concord_conformance::{NodeCoverage, Record, Verdict};

const FP16_NOTICE: &str =
    "opencl-fp16 requested for node `conv0` (Conv), ran on opencl: the device has no cl_khr_fp16";
const CPU_NOTICE: &str =
    "node `gather0` (Gather) ran on cpu instead of opencl: INT64 indices are not supported";

fn comparison(abs: f64, rel: f64, actual: f64, expected: f64, allowed: f64) -> Comparison {
    Comparison {
        output: "y".to_string(),
        elements: 12,
        violations: usize::from((actual - expected).abs() > allowed),
        max_abs_error: abs,
        max_rel_error: rel,
        worst_index: Some(vec![0, 3]),
        worst_actual: Some(actual),
        worst_expected: Some(expected),
        worst_allowed: Some(allowed),
        mismatch: None,
    }
}

fn record(name: &str, subject: &str, verdict: Verdict) -> Record {
    let mut parts = name.splitn(4, '/');
    let executor = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let category = parts.next().unwrap_or_default().to_string();
    Record {
        name: name.to_string(),
        device: match executor.as_str() {
            "cpu" => "host",
            "opencl" => "pthread-cpu",
            _ => "",
        }
        .to_string(),
        executor,
        target,
        category,
        subject: subject.to_string(),
        verdict,
        comparisons: Vec::new(),
        notices: Vec::new(),
        coverage: None,
        duration_ms: 1.5,
    }
}

const INT64_REASON: &str = "opencl does not support Gather on opencl: INT64 indices";

/// `on` of `on + declined.len()` nodes on the executor; the declined ones are Gathers.
fn coverage(on: usize, declined: &[&str]) -> Option<NodeCoverage> {
    Some(NodeCoverage {
        on_executor: on,
        nodes: on + declined.len(),
        declined: declined
            .iter()
            .map(|node| DeclinedNode {
                node: node.to_string(),
                op: "Gather".to_string(),
                placed_on: "cpu/cpu".to_string(),
                reason: INT64_REASON.to_string(),
            })
            .collect(),
    })
}

/// Twelve trials; the hand tally per executor/target is in
/// `summary_counts_match_the_hand_tally`.
fn records() -> Vec<Record> {
    let mut add_cpu = record("cpu/cpu/op/Add/broadcast", "Add", Verdict::Pass);
    add_cpu.comparisons = vec![comparison(0.0, 0.0, 2.0, 2.0, 0.0)];
    let mut relu_cpu = record("cpu/cpu/golden/relu", "Relu", Verdict::Pass);
    relu_cpu.comparisons = vec![comparison(1e-7, 2e-7, 0.5000001, 0.5, 1e-6)];
    relu_cpu.coverage = coverage(1, &[]);
    let conv_cpu = record(
        "cpu/cpu/op/Conv/pads",
        "Conv",
        Verdict::Skip {
            reason: "skipped by expectations: slow on the reference".to_string(),
        },
    );
    let mut add_ocl = record("opencl/opencl/op/Add/broadcast", "Add", Verdict::Pass);
    add_ocl.comparisons = vec![comparison(1.2e-7, 6e-8, 2.00000012, 2.0, 2.4e-6)];
    add_ocl.notices = vec![CPU_NOTICE.to_string(), CPU_NOTICE.to_string()];
    let mut conv_ocl = record(
        "opencl/opencl/op/Conv/pads",
        "Conv",
        Verdict::Fail {
            message: "output `y`: 3 of 12 elements out of tolerance\nworst at [0, 3]: got 1.5 < expected 1.0 | allowed 1e-5".to_string(),
        },
    );
    conv_ocl.comparisons = vec![comparison(0.5, 0.5, 1.5, 1.0, 1e-5)];
    let add_f16 = record(
        "opencl/opencl-fp16/op/Add/broadcast",
        "Add",
        Verdict::ExpectedFail {
            reason: "f16 rounding of large magnitudes".to_string(),
        },
    );
    let mut conv_f16 = record(
        "opencl/opencl-fp16/op/Conv/pads",
        "Conv",
        Verdict::UnexpectedPass {
            reason: "pads on fp16 were broken".to_string(),
        },
    );
    conv_f16.notices = vec![FP16_NOTICE.to_string()];
    let mut model_f16 = record(
        "opencl/opencl-fp16/model/residual_block",
        "residual_block",
        Verdict::Skip {
            reason: "unsupported: opencl declines Gather: INT64 indices".to_string(),
        },
    );
    model_f16.notices = vec![FP16_NOTICE.to_string(), CPU_NOTICE.to_string()];
    let mut relu_ocl = record("opencl/opencl/golden/relu", "Relu", Verdict::Pass);
    relu_ocl.comparisons = vec![comparison(3e-7, 1e-6, 0.5000003, 0.5, 3e-6)];
    relu_ocl.coverage = coverage(1, &[]);
    // 3 of 5 nodes on opencl, two Gathers on the reference, within tolerance: partial.
    let mut model_ocl = record(
        "opencl/opencl/model/residual_block",
        "residual_block",
        Verdict::Partial {
            on_executor: 3,
            nodes: 5,
        },
    );
    model_ocl.comparisons = vec![comparison(2e-6, 4e-6, 1.000002, 1.0, 1e-5)];
    model_ocl.coverage = coverage(3, &["gather0", "gather1"]);
    model_ocl.notices = vec![CPU_NOTICE.to_string()];
    // 1 of 2 nodes on opencl and a wrong value where zero was expected (an infinite
    // relative error): a failure, partial placement or not.
    let mut chain_ocl = record(
        "opencl/opencl/node/test_gather_relu",
        "Gather+Relu",
        Verdict::Fail {
            message: "output `y`: 1 of 12 elements out of tolerance\n(partial placement: 1 of 2 nodes on opencl; declined Gather: opencl does not support Gather on opencl: INT64 indices)".to_string(),
        },
    );
    chain_ocl.comparisons = vec![comparison(0.25, f64::INFINITY, 0.25, 0.0, 1e-6)];
    chain_ocl.coverage = coverage(1, &["gather"]);
    let probe = record(
        "cuda/cuda/unavailable/probe",
        "",
        Verdict::Skip {
            reason: "cuda is not compiled into this build (rebuild with cargo feature `cuda`)"
                .to_string(),
        },
    );
    vec![
        add_cpu, relu_cpu, conv_cpu, add_ocl, conv_ocl, add_f16, conv_f16, model_f16, relu_ocl,
        model_ocl, chain_ocl, probe,
    ]
}

fn run_failures() -> Vec<String> {
    vec!["opencl: expectation `opencl/*/op/Slice/*` (steps) matches no trial: remove it".into()]
}

fn counts(
    pass: usize,
    partial: usize,
    xfail: usize,
    xpass: usize,
    fail: usize,
    skip: usize,
) -> Counts {
    Counts {
        pass,
        partial,
        expected_fail: xfail,
        unexpected_pass: xpass,
        fail,
        skip,
    }
}

#[test]
fn summary_counts_match_the_hand_tally() {
    let s = summarize(&records(), &run_failures());
    let groups: Vec<(&str, &str, Counts, usize)> = s
        .by_executor_target
        .iter()
        .map(|g| (g.executor.as_str(), g.target.as_str(), g.counts, g.executed))
        .collect();
    assert_eq!(
        groups,
        vec![
            ("cpu", "cpu", counts(2, 0, 0, 0, 0, 1), 2),
            ("cuda", "cuda", counts(0, 0, 0, 0, 0, 1), 0),
            ("opencl", "opencl", counts(2, 1, 0, 0, 2, 0), 5),
            ("opencl", "opencl-fp16", counts(0, 0, 1, 1, 0, 1), 2),
        ]
    );
    // Node coverage over golden, model and node trials that executed: on opencl/opencl
    // relu 1 of 1, residual_block 3 of 5 and test_gather_relu 1 of 2 (a failure counts
    // too) make 5 of 8; on cpu, relu 1 of 1; nothing where nothing of the kind executed.
    let coverage: Vec<(NodeCount, Option<f64>)> = s
        .by_executor_target
        .iter()
        .map(|g| (g.coverage, g.node_coverage))
        .collect();
    let nodes = |on, all| NodeCount {
        nodes_on_executor: on,
        nodes: all,
    };
    assert_eq!(
        coverage,
        vec![
            (nodes(1, 1), Some(1.0)),
            (nodes(0, 0), None),
            (nodes(5, 8), Some(0.625)),
            (nodes(0, 0), None),
        ]
    );
    assert_eq!((s.trials, s.executed, s.failed), (12, 9, 3));
    assert!(!s.passed());
    let failing: Vec<&str> = s.failures.iter().map(|f| f.trial.as_str()).collect();
    assert_eq!(
        failing,
        vec![
            "opencl/opencl-fp16/op/Conv/pads",
            "opencl/opencl/node/test_gather_relu",
            "opencl/opencl/op/Conv/pads"
        ]
    );
    // Three Gathers declined in two trials, one reason.
    let declined: Vec<(&str, &str, &str, usize, usize)> = s
        .declined
        .iter()
        .map(|d| {
            (
                d.under.as_str(),
                d.op.as_str(),
                d.reason.as_str(),
                d.nodes,
                d.trials,
            )
        })
        .collect();
    assert_eq!(
        declined,
        vec![("opencl/opencl", "Gather", INT64_REASON, 3, 2)]
    );
    // The CPU notice is raised twice by one trial and once by another: two trials.
    let notices: Vec<(&str, usize, Vec<&str>)> = s
        .notices
        .iter()
        .map(|n| {
            (
                n.notice.as_str(),
                n.trials,
                n.raised_under.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        notices,
        vec![
            (CPU_NOTICE, 3, vec!["opencl/opencl", "opencl/opencl-fp16"]),
            (FP16_NOTICE, 2, vec!["opencl/opencl-fp16"]),
        ]
    );
    assert_eq!(
        s.notices[0].first_trial,
        "opencl/opencl-fp16/model/residual_block"
    );
    assert_eq!(s.skips.len(), 3);
}

#[test]
fn matrix_cells_take_the_worst_status_and_largest_errors() {
    let m = Matrix::from_records(&records());
    let columns: Vec<String> = m.columns.iter().map(|c| c.title()).collect();
    assert_eq!(
        columns,
        vec![
            "cpu/cpu on host",
            "cuda/cuda",
            "opencl/opencl on pthread-cpu",
            "opencl/opencl-fp16 on pthread-cpu"
        ]
    );
    let labels: Vec<&str> = m.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        vec![
            "Add",
            "Conv",
            "Relu",
            "several ops (node)",
            "model: residual_block",
            "executor probe"
        ]
    );
    let status = |row: usize, col: usize| m.rows[row].cells[col].as_ref().map(|c| c.status());
    assert_eq!(status(0, 0), Some(Status::Pass));
    assert_eq!(status(0, 1), None);
    assert_eq!(status(0, 3), Some(Status::ExpectedFail));
    assert_eq!(status(1, 0), Some(Status::Skip));
    assert_eq!(status(1, 2), Some(Status::Fail));
    assert_eq!(status(1, 3), Some(Status::Fail), "an unexpected pass fails");
    let relu_ocl = m.rows[2].cells[2].as_ref().expect("relu ran on opencl");
    assert_eq!(relu_ocl.max_abs_error, Some(3e-7));
    assert_eq!(relu_ocl.max_rel_error, Some(1e-6));
    // |0.5000003 - 0.5| / 3e-6 = 0.1, by hand.
    let ratio = relu_ocl.worst_ratio.expect("compared");
    assert!((ratio - 0.1).abs() < 1e-6, "worst ratio {ratio}");
    // A partial pass is its own status, never a pass, and the cell keeps its coverage.
    let model = m.rows[4].cells[2]
        .as_ref()
        .expect("the model ran on opencl");
    assert_eq!(model.status(), Status::Partial);
    assert_eq!(
        (model.coverage.nodes_on_executor, model.coverage.nodes),
        (3, 5)
    );
    assert_eq!(status(4, 3), Some(Status::Skip));
    assert_eq!(
        status(3, 2),
        Some(Status::Fail),
        "a partial failure is a failure"
    );
}

#[test]
fn several_op_cases_share_one_row_per_category() {
    let long = "Add+Cast+Concat+Constant+Div+Gather+Identity+Mul+Reshape+Shape+Slice+Split";
    let records = vec![
        record("cpu/cpu/node/test_abs", "Abs", Verdict::Pass),
        record("cpu/cpu/node/test_layer_norm_expanded", long, Verdict::Pass),
        record(
            "cpu/cpu/node/test_gelu_expanded",
            "Erf+Mul+Add",
            Verdict::Pass,
        ),
        record("cpu/cpu/golden/abs", "Abs", Verdict::Pass),
    ];
    let m = Matrix::from_records(&records);
    let rows: Vec<(&str, usize)> = m
        .rows
        .iter()
        .map(|r| {
            (
                r.label.as_str(),
                r.cells[0].as_ref().map_or(0, |c| c.counts.total()),
            )
        })
        .collect();
    assert_eq!(rows, vec![("Abs", 2), ("several ops (node)", 2)]);
    let html = matrix_html(&m, &summarize(&records, &[]));
    assert!(html.contains("several ops (node)"));
}

#[test]
fn json_summary_snapshot() {
    insta::assert_json_snapshot!(summarize(&records(), &run_failures()));
}

#[test]
fn markdown_matrix_snapshot() {
    let records = records();
    let text = matrix_markdown(
        &Matrix::from_records(&records),
        &summarize(&records, &run_failures()),
    );
    insta::assert_snapshot!(text);
}

#[test]
fn junit_xml_snapshot() {
    let xml = junit_xml(&records(), &run_failures()).expect("serialises");
    // One suite per executor/target plus the run-level suite.
    assert_eq!(xml.matches("<testsuite ").count(), 5);
    assert_eq!(xml.matches("<failure").count(), 4);
    assert_eq!(xml.matches("<skipped").count(), 3);
    // Every suite counts its skips where CI dashboards read them.
    assert_eq!(
        xml.matches(" skipped=\"").count(),
        xml.matches("<testsuite ").count()
    );
    let skipped: usize = xml
        .split(" skipped=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(skipped, 3, "{xml}");
    // The partial pass is a passing testcase that says it is partial.
    assert!(xml.contains("<property name=\"partial\" value=\"3 of 5 nodes on opencl\"/>"));
    assert!(xml.contains("partial: 3 of 5 nodes on opencl; declined Gather: "));
    insta::assert_snapshot!(xml);
}

#[test]
fn html_is_self_contained_and_has_the_heat_map() {
    let records = records();
    let html = matrix_html(
        &Matrix::from_records(&records),
        &summarize(&records, &run_failures()),
    );
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("http:"), "no external reference");
    assert!(!html.contains("https:"), "no external reference");
    assert!(!html.contains("<script"), "no script");
    assert!(!html.contains("<link"), "no stylesheet link");
    assert!(html.contains("<style>"));
    assert_eq!(html.matches("<svg").count(), 1);
    assert!(html.contains("</svg>"));
    // The fail, expected-fail, skip and partial colours each fill a cell.
    for fill in ["#d73027", "#fdae61", "#d9d9d9", "#74add1"] {
        assert!(
            html.contains(&format!("fill=\"{fill}\" stroke=\"#ffffff\"")),
            "no cell filled {fill}"
        );
    }
    // The failure message is escaped, not injected.
    assert!(html.contains("got 1.5 &lt; expected 1.0"));
    assert!(!html.contains("got 1.5 < expected"));
    assert!(html.contains(CPU_NOTICE));
    assert!(html.contains(&run_failures()[0]));
}

#[test]
fn write_run_writes_every_report_and_the_json_parses() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-snapshots-write");
    let _ = std::fs::remove_dir_all(&dir);
    report::write_run(&dir, &records(), &run_failures()).expect("writes");
    for name in report::REPORT_FILES {
        assert!(dir.join(name).is_file(), "{name} missing");
    }
    let text = std::fs::read_to_string(dir.join("conformance.json")).expect("reads");
    let json: serde_json::Value = serde_json::from_str(&text).expect("parses");
    assert_eq!(json["format"], report::JSON_FORMAT);
    assert_eq!(json["records"].as_array().map(Vec::len), Some(12));
    assert_eq!(json["summary"]["failed"], 3);
    assert_eq!(
        json["summary"]["run_failures"].as_array().map(Vec::len),
        Some(1)
    );
    // The infinite relative error is written as a string JSON can hold, not as null.
    assert_eq!(
        json["records"][10]["comparisons"][0]["max_rel_error"],
        "inf"
    );
}

#[test]
fn conformance_json_reads_back_every_record_and_run_failure() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-snapshots-read");
    let _ = std::fs::remove_dir_all(&dir);
    report::write_run(&dir, &records(), &run_failures()).expect("writes");
    let back = RunReport::read(&dir).expect("reads");
    assert_eq!(back.records, records());
    assert_eq!(back.run_failures, run_failures());
}
