//! The reports written from a fixed, hand-made set of records: every verdict kind (a
//! partial pass and a failure that ran partly on the reference among them), two executors,
//! two targets of one of them, duplicated fallback notices and a run-level failure. Counts
//! are checked against the hand tally below; the rendered text is pinned by insta snapshots
//! (update with `cargo insta review`, and read the diff).

use concord_conformance::compare::Comparison;
use concord_conformance::outcome::DeclinedNode;
use concord_conformance::progress::RunSummary;
use concord_conformance::report::{
    self, junit_xml, matrix_html, matrix_markdown, merge::RunReport, summarize, Counts, Matrix,
    NodeCount, RunInfo, SkipCause, Status,
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
        unsupported: 0,
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

const DELIBERATE_NOTICE: &str =
    "opencl/cpu: target cpu is not valid for backend opencl (valid: opencl, opencl-fp16)";
const CUDA_REASON: &str = "cuda is unavailable: libcuda.so.1 not found (searched LD_LIBRARY_PATH and the system paths; `concord info` lists every name tried)";
const FP16_REASON: &str = "unsupported: no opencl device supports fp16 (pthread-cpu): running opencl instead (target opencl-fp16)";

/// [`records`] with what the summary's classes and the matrix's unsupported status need:
/// node tests excluded for a dtype Concord lacks (alone, and next to passes of the same
/// op), an op outside the op table, a dtype the executor declines, a deliberate notice of
/// the fallback/ self-test next to the same text raised for real, an expected failure
/// with a large error, a pass with a large absolute but small relative error, and an
/// unavailable target; then nine more declined ops, so that the printed list of skip
/// reasons (thirteen, besides the unavailable ones) is cut at ten.
fn classified_records() -> Vec<Record> {
    let mut records = records();
    // records() names the cuda probe's reason as "not compiled in"; a machine without
    // the library is the case the summary leads with.
    records.retain(|r| r.category != "unavailable");
    records.push(record(
        "cuda/cuda/unavailable/probe",
        "",
        Verdict::Skip {
            reason: CUDA_REASON.to_string(),
        },
    ));
    records.push(record(
        "opencl/opencl-fp16/unavailable/probe",
        "",
        Verdict::Skip {
            reason: FP16_REASON.to_string(),
        },
    ));
    let int4 = |name: &str| {
        record(
            name,
            "Cast",
            Verdict::ExpectedFail {
                reason: "dtype: the Cast target type int4 is not a Concord dtype".to_string(),
            },
        )
    };
    records.push(int4("cpu/cpu/node/test_cast_FLOAT_to_INT4"));
    records.push(int4("opencl/opencl/node/test_cast_FLOAT_to_INT4"));
    let mut cast_pass = record(
        "cpu/cpu/node/test_cast_FLOAT_to_DOUBLE",
        "Cast",
        Verdict::Pass,
    );
    cast_pass.comparisons = vec![comparison(0.0, 0.0, 1.0, 1.0, 1e-6)];
    records.push(cast_pass);
    records.push(record(
        "cpu/cpu/node/test_unique_sorted",
        "Unique",
        Verdict::Skip {
            reason: "op Unique is not supported by Concord".to_string(),
        },
    ));
    records.push(record(
        "opencl/opencl/node/test_unique_sorted",
        "Unique",
        Verdict::Skip {
            reason: "op Unique is not supported by Concord".to_string(),
        },
    ));
    records.push(record(
        "opencl/opencl/op/Neg/int32",
        "Neg",
        Verdict::Skip {
            reason: "unsupported: opencl declines Neg: `x` is i32; the OpenCL kernels handle f32, f16, i64 and bool".to_string(),
        },
    ));
    let mut notice_once = record(
        "opencl/opencl/fallback/notice_once",
        "notice_once",
        Verdict::Pass,
    );
    notice_once.notices = vec![DELIBERATE_NOTICE.to_string()];
    records.push(notice_once);
    // The same text raised by a trial that was not asking for it is a real fallback.
    let mut honesty = record(
        "opencl/opencl/fallback/placement_honesty",
        "placement_honesty",
        Verdict::Pass,
    );
    honesty.notices = vec![DELIBERATE_NOTICE.to_string()];
    records.push(honesty);
    // An expected failure far off, and a pass whose absolute error is large only because
    // its values are: the cell's figures come from the pass alone.
    let mut resize_xfail = record(
        "opencl/opencl/node/test_resize_cubic",
        "Resize",
        Verdict::ExpectedFail {
            reason: "convention: Resize cubic with align_corners".to_string(),
        },
    );
    resize_xfail.comparisons = vec![comparison(0.5, 0.273, 1.5, 1.0, 1e-5)];
    records.push(resize_xfail);
    let mut resize_pass = record("opencl/opencl/prop/Resize", "Resize", Verdict::Pass);
    resize_pass.comparisons = vec![comparison(2.62e5, 1.7e-7, 1.54e12 + 2.62e5, 1.54e12, 8.0e6)];
    records.push(resize_pass);
    for i in 0..9 {
        records.push(record(
            &format!("opencl/opencl/node/test_decline_{i}"),
            &format!("Op{i}"),
            Verdict::Skip {
                reason: format!("unsupported: opencl declines Op{i}: Op{i} has no OpenCL kernel"),
            },
        ));
    }
    records
}

fn run_summary(records: Vec<Record>, run_failures: &[String]) -> RunSummary {
    RunSummary {
        summary: summarize(&records, run_failures),
        records,
        report_dir: Some("target/conformance-report".into()),
        filtered: false,
        run: RunInfo::default(),
        threads: 2,
        elapsed: std::time::Duration::from_millis(12_345),
        recorded_floors: Vec::new(),
    }
}

#[test]
fn skips_fall_into_causes_per_executor_and_unavailable_targets_are_listed() {
    let s = summarize(&classified_records(), &run_failures());
    let causes: Vec<(&str, SkipCause, usize)> = s
        .skip_causes
        .iter()
        .map(|c| (c.executor.as_str(), c.cause, c.trials))
        .collect();
    // By hand: cpu skips Conv by expectations and Unique for the op table; cuda is
    // unavailable; opencl skips Unique, declines Neg and the residual_block model on fp16
    // for their dtypes (i32; the Gather's INT64 indices) and nine ops for want of a
    // kernel, and fp16 itself is unavailable.
    assert_eq!(
        causes,
        vec![
            ("cpu", SkipCause::OpNotSupported, 1),
            ("cpu", SkipCause::ByExpectations, 1),
            ("cuda", SkipCause::Unavailable, 1),
            ("opencl", SkipCause::OpNotSupported, 1),
            ("opencl", SkipCause::DtypeNotSupported, 2),
            ("opencl", SkipCause::DeclinedByExecutor, 9),
            ("opencl", SkipCause::Unavailable, 1),
        ]
    );
    let unavailable: Vec<(&str, &str, bool)> = s
        .unavailable
        .iter()
        .map(|u| (u.under.as_str(), u.reason.as_str(), u.fails_run))
        .collect();
    assert_eq!(
        unavailable,
        vec![
            ("cuda/cuda", CUDA_REASON, false),
            ("opencl/opencl-fp16", FP16_REASON, false),
        ]
    );
    let unique = s
        .skips
        .iter()
        .find(|k| k.reason == "op Unique is not supported by Concord")
        .expect("the Unique skip is listed");
    assert_eq!(unique.trials, 2);
    assert_eq!(unique.under, vec!["cpu/cpu", "opencl/opencl"]);
    // The notice of fallback/notice_once is deliberate; the same text raised by
    // placement_honesty is a separate, real entry.
    let deliberate: Vec<(&str, bool, usize)> = s
        .notices
        .iter()
        .filter(|n| n.notice == DELIBERATE_NOTICE)
        .map(|n| (n.first_trial.as_str(), n.deliberate, n.trials))
        .collect();
    assert_eq!(
        deliberate,
        vec![
            ("opencl/opencl/fallback/placement_honesty", false, 1),
            ("opencl/opencl/fallback/notice_once", true, 1),
        ]
    );
    // Two dtype exclusions of node tests: expected failures, and unsupported ones.
    let cpu = &s.by_executor_target[0];
    assert_eq!((cpu.counts.expected_fail, cpu.counts.unsupported), (1, 1));
}

#[test]
fn unsupported_never_outweighs_a_pass_and_errors_come_from_passes_only() {
    let m = Matrix::from_records(&classified_records());
    let cell = |label: &str, column: usize| {
        let row = m
            .rows
            .iter()
            .find(|r| r.label == label)
            .expect("the matrix has a row for every op of the records");
        row.cells[column].clone()
    };
    let columns: Vec<String> = m.columns.iter().map(|c| c.title()).collect();
    assert_eq!(
        columns,
        vec![
            "cpu/cpu on host",
            "cuda/cuda",
            "opencl/opencl on pthread-cpu",
            "opencl/opencl-fp16 on pthread-cpu",
        ]
    );
    // Cast on cpu: one pass, one dtype exclusion: a pass, never orange.
    let cast_cpu = cell("Cast", 0).expect("Cast ran on cpu");
    assert_eq!(cast_cpu.status(), Status::Pass);
    assert_eq!(cast_cpu.counts.unsupported, 1);
    // Cast on opencl: the dtype exclusion alone: unsupported, not expected-fail.
    assert_eq!(
        cell("Cast", 2).map(|c| c.status()),
        Some(Status::Unsupported)
    );
    // Resize on opencl: a convention exclusion is an expected failure still; its error
    // (0.5 absolute, 0.273 relative) is not among the cell's figures, the pass's are.
    let resize = cell("Resize", 2).expect("Resize ran on opencl");
    assert_eq!(resize.status(), Status::ExpectedFail);
    assert_eq!(resize.max_abs_error, Some(2.62e5));
    assert_eq!(resize.max_rel_error, Some(1.7e-7));
    // 2.62e5 / 8e6 by hand.
    let ratio = resize.worst_ratio.expect("the pass compared");
    assert!((ratio - 0.03275).abs() < 1e-9, "worst ratio {ratio}");
    // Unavailable columns carry their probe's reason; available ones none.
    let reasons: Vec<Option<&str>> = m.columns.iter().map(|c| c.unavailable.as_deref()).collect();
    assert_eq!(
        reasons,
        vec![None, Some(CUDA_REASON), None, Some(FP16_REASON)]
    );
    let md = matrix_markdown(&m, &summarize(&classified_records(), &[]));
    // A reason that says "unavailable" itself is not prefixed with it again.
    assert!(md.contains(&format!("cuda/cuda — {CUDA_REASON}")));
    assert!(md.contains(&format!(
        "opencl/opencl-fp16 on pthread-cpu — unavailable: {FP16_REASON}"
    )));
    assert!(md.contains("3.3% of allowance · abs 2.62e5 · rel 1.70e-7"));
    let html = matrix_html(&m, &summarize(&classified_records(), &[]));
    assert!(
        html.contains("fill=\"#cbc3e3\" stroke=\"#ffffff\""),
        "no unsupported cell"
    );
    assert!(
        html.contains("<span class=\"unavailable\">cuda is unavailable: libcuda.so.1 not found")
    );
    // The heat map's header wraps the reason under the column's title.
    assert!(html.contains("dy=\"0\">cuda is</tspan>"));
    assert!(html.contains("dy=\"14\">unavailable:</tspan>"));
}

#[test]
fn printed_summary_snapshot() {
    let text = run_summary(classified_records(), &run_failures()).render();
    // What a CI reader needs first comes first: the verdict, then the totals, what is
    // unavailable, and the failures; the skips after them.
    let position = |needle: &str| {
        text.find(needle)
            .expect("the summary holds every heading looked for")
    };
    assert!(text.starts_with("conformance: FAIL — 32 trials"));
    assert!(position("unavailable here (2):") < position("failures (3):"));
    assert!(position("failures (3):") < position("skipped: 16 trial(s)"));
    assert!(position("skipped: 16 trial(s)") < position("skip reasons, most trials first"));
    assert!(text.contains("  … and 3 more skip reasons: `summary.skips` in target/conformance-report/conformance.json"));
    assert!(text.contains("deliberate notices: 1 distinct"));
    for line in text.lines() {
        assert!(
            line.chars().count() <= 300,
            "a {}-character line: {line}",
            line.chars().count()
        );
    }
    insta::assert_snapshot!(text);
}

#[test]
fn printed_summary_of_a_clean_run_says_so_first() {
    let records: Vec<Record> = records()
        .into_iter()
        .filter(|r| !r.verdict.fails_run())
        .collect();
    let text = run_summary(records, &[]).render();
    assert!(
        text.starts_with(
            "conformance: PASS — 9 trials, 6 executed, 0 failing, 0 run-level failure(s)"
        ),
        "{text}"
    );
    assert!(text.contains("\nfailures: none\n"));
    assert!(text.ends_with("result: PASS (0 failing trial(s), 0 run-level failure(s))\n"));
}

#[test]
fn matrix_legend_snapshot() {
    let records = classified_records();
    let m = Matrix::from_records(&records);
    let s = summarize(&records, &run_failures());
    let html = matrix_html(&m, &s);
    let md = matrix_markdown(&m, &s);
    // The legends: matrix.md's two paragraphs, matrix.html's heat-map paragraph and the
    // swatches under the heat map.
    let mut legend = String::new();
    for line in md
        .lines()
        .filter(|l| l.starts_with("*pass*") || l.starts_with("Each cell"))
    {
        legend.push_str(line);
        legend.push('\n');
    }
    let paragraph = html
        .split("<h2>Heat map</h2>\n")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .expect("a paragraph under the heat map's heading");
    legend.push_str(paragraph);
    legend.push('\n');
    for line in html
        .lines()
        .filter(|l| l.contains("width=\"14\" height=\"14\""))
    {
        legend.push_str(line);
        legend.push('\n');
    }
    insta::assert_snapshot!(legend);
}
