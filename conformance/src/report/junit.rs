//! junit.xml: one testsuite per executor/target/device, one testcase per trial, so CI
//! systems show the suite's trials as they show unit tests. Failures carry their message,
//! skips their reason; an expected failure is a success whose output says why it was
//! expected; the run-level failures are testcases of their own suite, so they cannot be
//! missed. JUnit has no "partial": a partial pass is a passing testcase with a `partial`
//! property ("3 of 5 nodes on opencl") and a system-out line naming the declined ops, and
//! the suite's `partial` property counts them, so a partial is never a plain pass there.
//! Each testsuite counts its skips in `skipped=`, the attribute CI dashboards (Jenkins,
//! GitLab, the surefire schema) read, as well as quick-junit's `disabled=`.

use crate::outcome::{Record, Verdict};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The name of the testsuite that holds the run-level failures.
pub const RUN_SUITE: &str = "run";

/// Renders the JUnit XML of `records` and the run-level failures.
pub fn junit_xml(records: &[Record], run_failures: &[String]) -> Result<String, String> {
    // Keyed by (executor/target, device): one suite per device, named after the device
    // only where the report holds the same executor/target on several devices.
    let mut suites: BTreeMap<(String, String), (TestSuite, usize)> = BTreeMap::new();
    let mut devices: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for r in records {
        devices
            .entry(format!("{}/{}", r.executor, r.target))
            .or_default()
            .insert(r.device.as_str());
    }
    for r in records {
        let prefix = format!("{}/{}", r.executor, r.target);
        let several = devices.get(&prefix).is_some_and(|d| d.len() > 1);
        let suite_name = if several {
            format!("{prefix} on {}", r.device)
        } else {
            prefix.clone()
        };
        let (suite, partial) = suites
            .entry((prefix.clone(), r.device.clone()))
            .or_insert_with(|| {
                let mut s = TestSuite::new(suite_name.clone());
                s.add_property(("executor", r.executor.as_str()));
                s.add_property(("target", r.target.as_str()));
                s.add_property(("device", r.device.as_str()));
                (s, 0)
            });
        if matches!(r.verdict, Verdict::Partial { .. }) {
            *partial += 1;
        }
        suite.add_test_case(test_case(r, &prefix, &suite_name));
    }
    let mut report = Report::new("concord-conformance");
    let mut total = Duration::ZERO;
    for (_, (mut suite, partial)) in suites {
        // Passing testcases that ran partly on the reference, so that a reader of the
        // suite's totals can tell full passes from partial ones.
        suite.add_property(("partial", partial.to_string().as_str()));
        let time: Duration = suite.test_cases.iter().filter_map(|c| c.time).sum();
        suite.set_time(time);
        total += time;
        count_skipped(&mut suite);
        report.add_test_suite(suite);
    }
    if !run_failures.is_empty() {
        let mut suite = TestSuite::new(RUN_SUITE);
        for (i, failure) in run_failures.iter().enumerate() {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_message(first_line(failure))
                .set_type("run-level")
                .set_description(failure.as_str());
            let mut case = TestCase::new(format!("run-level failure {}", i + 1), status);
            case.set_classname(RUN_SUITE);
            suite.add_test_case(case);
        }
        count_skipped(&mut suite);
        report.add_test_suite(suite);
    }
    report.set_time(total);
    report
        .to_string()
        .map_err(|e| format!("serialising junit.xml: {e}"))
}

fn test_case(r: &Record, prefix: &str, suite_name: &str) -> TestCase {
    let status = match &r.verdict {
        Verdict::Pass | Verdict::Partial { .. } | Verdict::ExpectedFail { .. } => {
            TestCaseStatus::success()
        }
        v @ (Verdict::Fail { .. } | Verdict::UnexpectedPass { .. }) => {
            let message = v.message().unwrap_or_default();
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(first_line(&message))
                .set_type(v.label())
                .set_description(message);
            s
        }
        Verdict::Skip { reason } => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(reason.as_str());
            s
        }
    };
    // The trial name without its `<executor>/<target>/` prefix: the suite already says it.
    let name = r
        .name
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(&r.name);
    let mut case = TestCase::new(name, status);
    case.set_classname(format!("{suite_name}/{}", r.category));
    if let (Verdict::Partial { .. }, Some(coverage)) = (&r.verdict, &r.coverage) {
        case.add_property(("partial", coverage.describe(&r.executor).as_str()));
    }
    // Duration::from_secs_f64 panics on NaN or a negative value; a record is data, so a
    // bad duration is written as zero rather than trusted.
    let seconds = r.duration_ms / 1e3;
    if seconds.is_finite() && (0.0..1e9).contains(&seconds) {
        case.set_time(Duration::from_secs_f64(seconds));
    }
    let mut output = Vec::new();
    if let Verdict::ExpectedFail { reason } = &r.verdict {
        output.push(format!("expected failure: {reason}"));
    }
    if let Some(note) = r.partial_note() {
        output.push(note);
    }
    for notice in &r.notices {
        output.push(format!("fallback notice: {notice}"));
    }
    if !output.is_empty() {
        case.set_system_out(output.join("\n"));
    }
    case
}

/// Writes the suite's skip count as `skipped=`: quick-junit counts skipped testcases as
/// `disabled=` only, which most CI dashboards do not read.
fn count_skipped(suite: &mut TestSuite) {
    let skipped = suite.disabled.to_string();
    suite.extra.insert("skipped".into(), skipped.into());
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}
