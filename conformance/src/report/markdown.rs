//! matrix.md: the run's totals (full and partial passes, node coverage, failures), what was
//! unavailable and why, the op × executor × target × device matrix, and every failure, skip
//! (by executor and cause, and by reason), declined op and fallback notice (real ones apart
//! from the self-test's deliberate ones), as a markdown page for a pull request or a CI
//! summary.

use super::{sci, Cell, Column, Counts, Matrix, NoticeEntry, SkipCause, Status, Summary};
use std::fmt::Write;

/// Renders the matrix page.
pub fn matrix_markdown(matrix: &Matrix, summary: &Summary) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; the results are ignored for that reason.
    let _ = writeln!(out, "# Conformance matrix\n");
    let _ = writeln!(
        out,
        "**{}**: {}\n",
        verdict_word(summary),
        totals_sentence(summary)
    );
    let _ = writeln!(
        out,
        "| executor | target | device | pass | partial | node coverage | expected-fail | unsupported | skip | fail | unexpected-pass | executed |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for g in &summary.by_executor_target {
        let c = &g.counts;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell_text(&g.executor),
            cell_text(&g.target),
            cell_text(if g.device.is_empty() { "-" } else { &g.device }),
            c.pass,
            c.partial,
            g.coverage.describe(),
            c.expected_fail - c.unsupported,
            c.unsupported,
            c.skip,
            c.fail,
            c.unexpected_pass,
            g.executed
        );
    }
    let _ = writeln!(out, "\n{LEGEND}\n");
    if !summary.unavailable.is_empty() {
        let _ = writeln!(out, "## Unavailable here\n");
        for u in &summary.unavailable {
            let _ = writeln!(out, "- **{}**: {}", u.under, one_line(&u.reason));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "## Op × executor × target\n");
    let _ = writeln!(out, "{MATRIX_LEGEND}\n");
    let _ = write!(out, "| op |");
    for c in &matrix.columns {
        let _ = write!(out, " {} |", cell_text(&column_header(c)));
    }
    let _ = write!(out, "\n| --- |");
    for _ in &matrix.columns {
        let _ = write!(out, " --- |");
    }
    out.push('\n');
    for row in &matrix.rows {
        let _ = write!(out, "| {} |", cell_text(&row.label));
        for cell in &row.cells {
            let text = cell.as_ref().map(describe_cell).unwrap_or_default();
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    if !summary.run_failures.is_empty() {
        let _ = writeln!(out, "\n## Run-level failures\n");
        for f in &summary.run_failures {
            let _ = writeln!(out, "- {}", one_line(f));
        }
    }
    if !summary.failures.is_empty() {
        let _ = writeln!(out, "\n## Failures\n");
        for (i, f) in summary.failures.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let _ = writeln!(out, "- `{}` ({})\n\n  ```text", f.trial, f.verdict);
            for line in f.message.lines() {
                let _ = writeln!(out, "  {line}");
            }
            let _ = writeln!(out, "  ```");
        }
    }
    if !summary.skips.is_empty() {
        let _ = writeln!(out, "\n## Skips, by executor and cause\n");
        let causes = skip_cause_columns(summary);
        let _ = write!(out, "| executor |");
        for cause in &causes {
            let _ = write!(out, " {} |", cause.label());
        }
        let _ = write!(out, "\n| --- |");
        for _ in &causes {
            let _ = write!(out, " ---: |");
        }
        out.push('\n');
        for (executor, counts) in skip_cause_rows(summary, &causes) {
            let _ = write!(out, "| {} |", cell_text(executor));
            for n in counts {
                let _ = write!(out, " {n} |");
            }
            out.push('\n');
        }
        let _ = writeln!(out, "\n## Skips, by reason\n");
        let _ = writeln!(
            out,
            "| trials | cause | under | reason |\n| ---: | --- | --- | --- |"
        );
        for s in &summary.skips {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                s.trials,
                s.cause.label(),
                cell_text(&s.under.join(", ")),
                cell_text(&s.reason)
            );
        }
    }
    if !summary.declined.is_empty() {
        let _ = writeln!(
            out,
            "\n## Ops declined in trials that ran partly on the reference\n"
        );
        let _ = writeln!(
            out,
            "| trials | nodes | under | op | reason |\n| ---: | ---: | --- | --- | --- |"
        );
        for d in &summary.declined {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                d.trials,
                d.nodes,
                cell_text(&d.under),
                cell_text(&d.op),
                cell_text(&d.reason)
            );
        }
    }
    let _ = writeln!(out, "\n## Fallback notices\n");
    let (deliberate, real): (Vec<_>, Vec<_>) = summary.notices.iter().partition(|n| n.deliberate);
    if real.is_empty() {
        let _ = writeln!(out, "No fallback notice was raised.");
    } else {
        notice_table(&mut out, &real);
    }
    if !deliberate.is_empty() {
        let _ = writeln!(
            out,
            "\n## Deliberate notices (fallback/ self-test trials)\n"
        );
        let _ = writeln!(out, "{DELIBERATE_NOTE}\n");
        notice_table(&mut out, &deliberate);
    }
    out
}

/// One table of fallback notices: trials, where they were raised, the notice, the first trial.
fn notice_table(out: &mut String, notices: &[&NoticeEntry]) {
    let _ = writeln!(
        out,
        "| trials | raised under | notice | first trial |\n| ---: | --- | --- | --- |"
    );
    for n in notices {
        let _ = writeln!(
            out,
            "| {} | {} | {} | `{}` |",
            n.trials,
            cell_text(&n.raised_under.join(", ")),
            cell_text(&n.notice),
            n.first_trial
        );
    }
}

/// What the totals' columns mean.
pub(crate) const LEGEND: &str = "*pass*: every node ran on the executor. *partial*: passed with \
     some nodes on the reference (golden, model and node trials only). *expected-fail*: fails \
     as the expectations say (a known bug, imprecise ONNX data, a convention runtimes differ \
     on). *unsupported*: an expected failure whose \
     reason says Concord lacks the feature (a dtype, an opset, … — the categories of \
     conformance/onnx-node.toml that name an absence), not a wrong result. *node coverage*: \
     nodes placed on the executor over all nodes of the golden, model and node trials that \
     executed.";

/// How to read a matrix cell.
pub(crate) const MATRIX_LEGEND: &str = "Each cell: its status (the worst of its trials: fail, \
     expected-fail, partial, pass, unsupported, skip — unsupported trials never outweigh a \
     pass), the trials by verdict, the node coverage where some ran partly on the reference, \
     and, over the trials that passed only, the worst element's error as a share of its \
     allowance (100% is the limit) with the largest absolute and relative error. A column \
     header says why its executor or target was unavailable.";

/// What the deliberate notices are.
pub(crate) const DELIBERATE_NOTE: &str = "The fallback/notice_once trials ask each executor \
     for a target it does not offer, on purpose, to check that the fallback is said exactly \
     once, refused under Deny and still computes the function: these notices are that test's \
     subject, not fallbacks of real work.";

/// The causes at least one executor's skips had, in [`SkipCause::ALL`]'s order.
pub(crate) fn skip_cause_columns(summary: &Summary) -> Vec<SkipCause> {
    SkipCause::ALL
        .into_iter()
        .filter(|cause| summary.skip_causes.iter().any(|c| c.cause == *cause))
        .collect()
}

/// Each executor with skips, and its skip count per cause of `causes`.
pub(crate) fn skip_cause_rows<'a>(
    summary: &'a Summary,
    causes: &[SkipCause],
) -> Vec<(&'a str, Vec<usize>)> {
    let mut rows: Vec<(&str, Vec<usize>)> = Vec::new();
    for c in &summary.skip_causes {
        if rows.last().map_or(true, |(e, _)| *e != c.executor) {
            rows.push((c.executor.as_str(), vec![0; causes.len()]));
        }
        if let (Some((_, counts)), Some(i)) =
            (rows.last_mut(), causes.iter().position(|k| *k == c.cause))
        {
            counts[i] += c.trials;
        }
    }
    rows
}

/// A matrix column's header: its title, and why it is empty when it is unavailable.
pub(crate) fn column_header(c: &Column) -> String {
    match &c.unavailable {
        Some(reason) => format!("{} — {}", c.title(), unavailable_phrase(reason)),
        None => c.title(),
    }
}

/// "unavailable: <reason>", or the reason alone when it says so itself ("cuda is
/// unavailable: libcuda.so.1 not found …").
pub(crate) fn unavailable_phrase(reason: &str) -> String {
    let reason = one_line(reason);
    if reason.contains("unavailable") {
        reason
    } else {
        format!("unavailable: {reason}")
    }
}

/// The worst element's error as a share of its allowance: "3.1% of allowance".
pub(crate) fn allowance_text(ratio: f64) -> String {
    let percent = ratio * 100.0;
    let figure = if ratio.is_nan() {
        "NaN".to_string()
    } else if ratio.is_infinite() {
        "inf".to_string()
    } else if ratio == 0.0 {
        "0%".to_string()
    } else if percent >= 10.0 {
        format!("{percent:.0}%")
    } else if percent >= 1.0 {
        format!("{percent:.1}%")
    } else if percent >= 0.01 {
        format!("{percent:.2}%")
    } else {
        "<0.01%".to_string()
    };
    format!("{figure} of allowance")
}

/// A cell's error figures, over its passing trials: "3.1% of allowance · abs 2.62e5 · rel
/// 1.70e-7"; empty when no passing trial compared anything.
pub(crate) fn errors_text(cell: &Cell) -> String {
    if cell.max_abs_error.is_none() && cell.max_rel_error.is_none() {
        return String::new();
    }
    let share = cell
        .worst_ratio
        .map(|r| format!("{} · ", allowance_text(r)))
        .unwrap_or_default();
    format!(
        "{share}abs {} · rel {}",
        sci(cell.max_abs_error),
        sci(cell.max_rel_error)
    )
}

/// "PASS" or "FAIL".
pub(crate) fn verdict_word(summary: &Summary) -> &'static str {
    if summary.passed() {
        "PASS"
    } else {
        "FAIL"
    }
}

/// One sentence with the run's totals.
pub fn totals_sentence(summary: &Summary) -> String {
    let mut totals = Counts::default();
    for g in &summary.by_executor_target {
        totals.add_counts(&g.counts);
    }
    format!(
        "{} trials, {} executed; {} pass, {} partial, {} expected-fail, {} unsupported, {} skip, {} fail, {} unexpected-pass; {} run-level failure(s).",
        summary.trials,
        summary.executed,
        totals.pass,
        totals.partial,
        totals.expected_fail - totals.unsupported,
        totals.unsupported,
        totals.skip,
        totals.fail,
        totals.unexpected_pass,
        summary.run_failures.len()
    )
}

/// The non-zero verdict counts of a cell, e.g. "2 pass, 1 fail".
pub(crate) fn counts_text(c: &Counts) -> String {
    [
        (c.pass, "pass"),
        (c.partial, "partial"),
        (c.expected_fail - c.unsupported, "expected-fail"),
        (c.unsupported, "unsupported"),
        (c.skip, "skip"),
        (c.fail, "fail"),
        (c.unexpected_pass, "unexpected-pass"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, label)| format!("{n} {label}"))
    .collect::<Vec<_>>()
    .join(", ")
}

fn describe_cell(cell: &Cell) -> String {
    let status = cell.status();
    let mut text = if status == Status::Fail {
        format!("**{}**", status.label())
    } else {
        status.label().to_string()
    };
    let _ = write!(text, " · {}", counts_text(&cell.counts));
    if cell.coverage.nodes_on_executor < cell.coverage.nodes {
        let _ = write!(text, " · nodes {}", cell.coverage.describe());
    }
    let errors = errors_text(cell);
    if !errors.is_empty() {
        let _ = write!(text, " · {errors}");
    }
    text
}

/// Text safe inside a markdown table cell: pipes escaped, newlines folded.
fn cell_text(s: &str) -> String {
    one_line(s).replace('|', "\\|")
}

pub(crate) fn one_line(s: &str) -> String {
    s.split('\n').collect::<Vec<_>>().join(" ⏎ ")
}
