//! matrix.md: the run's totals (full and partial passes, node coverage, failures), the op ×
//! executor × target × device matrix, and every failure, skip reason, declined op and
//! fallback notice, as a markdown page for a pull request or a CI summary.

use super::{sci, Cell, Counts, Matrix, Status, Summary};
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
        "| executor | target | device | pass | partial | node coverage | expected-fail | skip | fail | unexpected-pass | executed |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for g in &summary.by_executor_target {
        let c = &g.counts;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell_text(&g.executor),
            cell_text(&g.target),
            cell_text(if g.device.is_empty() { "-" } else { &g.device }),
            c.pass,
            c.partial,
            g.coverage.describe(),
            c.expected_fail,
            c.skip,
            c.fail,
            c.unexpected_pass,
            g.executed
        );
    }
    let _ = writeln!(
        out,
        "\n*pass*: every node ran on the executor. *partial*: passed with some nodes on the \
         reference (golden, model and node trials only). *node coverage*: nodes placed on the \
         executor over all nodes of the golden, model and node trials that executed.\n"
    );
    let _ = writeln!(out, "## Op × executor × target\n");
    let _ = writeln!(
        out,
        "Each cell: its status (the worst of its trials), the trials by verdict, the node \
         coverage where some ran partly on the reference, and the largest absolute and \
         relative error over the outputs compared.\n"
    );
    let _ = write!(out, "| op |");
    for c in &matrix.columns {
        let _ = write!(out, " {} |", cell_text(&c.title()));
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
        let _ = writeln!(out, "\n## Skips, by reason\n");
        let _ = writeln!(out, "| trials | reason |\n| ---: | --- |");
        for s in &summary.skips {
            let _ = writeln!(out, "| {} | {} |", s.trials, cell_text(&s.reason));
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
    if summary.notices.is_empty() {
        let _ = writeln!(out, "No fallback notice was raised.");
    } else {
        let _ = writeln!(
            out,
            "| trials | raised under | notice | first trial |\n| ---: | --- | --- | --- |"
        );
        for n in &summary.notices {
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
    out
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
        "{} trials, {} executed; {} pass, {} partial, {} expected-fail, {} skip, {} fail, {} unexpected-pass; {} run-level failure(s).",
        summary.trials,
        summary.executed,
        totals.pass,
        totals.partial,
        totals.expected_fail,
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
        (c.expected_fail, "expected-fail"),
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
    if cell.max_abs_error.is_some() || cell.max_rel_error.is_some() {
        let _ = write!(
            text,
            " · abs {} · rel {}",
            sci(cell.max_abs_error),
            sci(cell.max_rel_error)
        );
    }
    text
}

/// Text safe inside a markdown table cell: pipes escaped, newlines folded.
fn cell_text(s: &str) -> String {
    one_line(s).replace('|', "\\|")
}

fn one_line(s: &str) -> String {
    s.split('\n').collect::<Vec<_>>().join(" ⏎ ")
}
