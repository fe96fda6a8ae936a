//! matrix.html: the matrix as one self-contained page — inline CSS, an inline SVG heat map
//! coloured by status and by how close the worst element came to its allowance, and the
//! same failures, skips and notices as matrix.md. No script and no external asset, so the
//! page opens the same from a CI artefact, a mail attachment or a machine without network.

use super::markdown::{counts_text, totals_sentence, verdict_word};
use super::{sci, Cell, Matrix, Status, Summary};
use std::fmt::Write;

const CELL_WIDTH: usize = 120;
const CELL_HEIGHT: usize = 20;
/// Two header lines: executor/target, then the device (several columns may share the
/// first line when a merged report holds runs on several devices).
const HEADER_HEIGHT: usize = 42;
/// Longer device names are cut (with "…") in the heat map's header; the table shows them
/// whole.
const MAX_DEVICE_CHARS: usize = 17;
const LEGEND_HEIGHT: usize = 44;
/// Longer row labels are cut (with "…") in the heat map; the table shows them whole.
const MAX_LABEL_CHARS: usize = 48;
/// Approximate width of one character of the 12px sans-serif labels, for layout only.
const CHAR_WIDTH: usize = 7;

const FAIL_COLOUR: &str = "#d73027";
const EXPECTED_FAIL_COLOUR: &str = "#fdae61";
const SKIP_COLOUR: &str = "#d9d9d9";
/// Passed, but partly on the reference: blue, apart from the full passes' greens.
const PARTIAL_COLOUR: &str = "#74add1";
/// Pass cells run from this green (errors far below the allowance)…
const PASS_LOW: (u8, u8, u8) = (26, 152, 80);
/// …to this yellow-green (the worst element at its allowance).
const PASS_HIGH: (u8, u8, u8) = (217, 239, 139);
/// Ratios at or below this colour as the darkest green; the scale is logarithmic above it.
const RATIO_FLOOR: f64 = 1e-4;

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em;color:#222;max-width:80em}
h1{margin-bottom:.2em}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.num{text-align:right}
.result-pass{color:#1a7f37;font-weight:bold}
.result-fail{color:#b42318;font-weight:bold}
td.status-pass{background:#e6f4ea}
td.status-partial{background:#e3eef8}
td.status-expected-fail{background:#fff1e0}
td.status-skip{background:#f2f2f2;color:#666}
td.status-fail{background:#fde7e7;font-weight:bold}
pre{background:#f7f7f7;padding:.5em;overflow-x:auto;font-size:12px}
svg text{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:12px}
";

/// Renders the page.
pub fn matrix_html(matrix: &Matrix, summary: &Summary) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; the results are ignored for that reason.
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Concord conformance matrix</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n"
    );
    let _ = writeln!(out, "<h1>Conformance matrix</h1>");
    let word = verdict_word(summary);
    let _ = writeln!(
        out,
        "<p><span class=\"result-{}\">{word}</span>: {}</p>",
        word.to_ascii_lowercase(),
        escape(&totals_sentence(summary))
    );
    totals_table(&mut out, summary);
    let _ = writeln!(out, "<h2>Heat map</h2>");
    let _ = writeln!(
        out,
        "<p>Red: a trial fails the run. Orange: failed as the expectations say. Grey: skipped. \
         Blue: passed with some nodes on the reference (partial). Green to yellow: passed, coloured by the worst element's error as a fraction of its \
         allowance (dark green ≤ {RATIO_FLOOR:e}, yellow = at the allowance). Hover a cell for \
         its figures.</p>"
    );
    heat_map(&mut out, matrix);
    matrix_table(&mut out, matrix);
    lists(&mut out, summary);
    let _ = writeln!(out, "</body>\n</html>");
    out
}

fn totals_table(out: &mut String, summary: &Summary) {
    let _ = writeln!(
        out,
        "<table class=\"totals\">\n<tr><th>executor</th><th>target</th><th>device</th>\
         <th>pass</th><th>partial</th><th>node coverage</th><th>expected-fail</th><th>skip</th>\
         <th>fail</th><th>unexpected-pass</th><th>executed</th></tr>"
    );
    for g in &summary.by_executor_target {
        let c = &g.counts;
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&g.executor),
            escape(&g.target),
            escape(if g.device.is_empty() { "-" } else { &g.device }),
            c.pass,
            c.partial,
            escape(&g.coverage.describe()),
            c.expected_fail,
            c.skip,
            c.fail,
            c.unexpected_pass,
            g.executed
        );
    }
    let _ = writeln!(out, "</table>");
}

fn heat_map(out: &mut String, matrix: &Matrix) {
    let label_width = matrix
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(8, MAX_LABEL_CHARS)
        * CHAR_WIDTH
        + 12;
    let width = label_width + matrix.columns.len() * CELL_WIDTH + 2;
    let grid_height = matrix.rows.len() * CELL_HEIGHT;
    let height = HEADER_HEIGHT + grid_height + LEGEND_HEIGHT;
    let _ = writeln!(
        out,
        "<svg width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"conformance heat map\">"
    );
    for (j, c) in matrix.columns.iter().enumerate() {
        let x = label_width + j * CELL_WIDTH + CELL_WIDTH / 2;
        let device = if c.device.is_empty() { "-" } else { &c.device };
        let _ = writeln!(
            out,
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" font-weight=\"bold\">\
             <title>{}</title>{}/{}</text>\
             <text x=\"{x}\" y=\"{}\" text-anchor=\"middle\"><title>{}</title>{}</text>",
            HEADER_HEIGHT - 23,
            escape(&c.title()),
            escape(&c.executor),
            escape(&c.target),
            HEADER_HEIGHT - 8,
            escape(&c.title()),
            escape(&shorten(device, MAX_DEVICE_CHARS))
        );
    }
    for (i, row) in matrix.rows.iter().enumerate() {
        let y = HEADER_HEIGHT + i * CELL_HEIGHT;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\"><title>{}</title>{}</text>",
            label_width - 6,
            y + CELL_HEIGHT - 6,
            escape(&row.label),
            escape(&shorten(&row.label, MAX_LABEL_CHARS))
        );
        for (j, (cell, column)) in row.cells.iter().zip(&matrix.columns).enumerate() {
            let x = label_width + j * CELL_WIDTH;
            let Some(cell) = cell else {
                let _ = writeln!(
                    out,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{CELL_WIDTH}\" height=\"{CELL_HEIGHT}\" \
                     fill=\"#ffffff\" stroke=\"#eeeeee\"/>"
                );
                continue;
            };
            let status = cell.status();
            let _ = writeln!(
                out,
                "<g><title>{}</title><rect x=\"{x}\" y=\"{y}\" width=\"{CELL_WIDTH}\" \
                 height=\"{CELL_HEIGHT}\" fill=\"{}\" stroke=\"#ffffff\"/>\
                 <text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text></g>",
                escape(&tooltip(&row.label, column, cell)),
                colour(cell),
                x + CELL_WIDTH / 2,
                y + CELL_HEIGHT - 6,
                if status == Status::Fail {
                    "#ffffff"
                } else {
                    "#222222"
                },
                escape(&short_label(cell))
            );
        }
    }
    legend(out, HEADER_HEIGHT + grid_height + 12);
    let _ = writeln!(out, "</svg>");
}

fn legend(out: &mut String, y: usize) {
    let items = [
        (FAIL_COLOUR.to_string(), "fail"),
        (EXPECTED_FAIL_COLOUR.to_string(), "expected-fail"),
        (SKIP_COLOUR.to_string(), "skip"),
        (PARTIAL_COLOUR.to_string(), "partial"),
        (pass_colour(Some(0.0)), "pass, error ≪ allowance"),
        (pass_colour(Some(1.0)), "pass, error at allowance"),
    ];
    let mut x = 4;
    for (fill, label) in items {
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"{y}\" width=\"14\" height=\"14\" fill=\"{fill}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            x + 18,
            y + 12,
            escape(label)
        );
        x += 18 + label.chars().count() * CHAR_WIDTH + 16;
    }
}

fn matrix_table(out: &mut String, matrix: &Matrix) {
    let _ = writeln!(out, "<h2>Op × executor × target</h2>");
    let _ = write!(out, "<table class=\"matrix\">\n<tr><th>op</th>");
    for c in &matrix.columns {
        let _ = write!(out, "<th>{}</th>", escape(&c.title()));
    }
    let _ = writeln!(out, "</tr>");
    for row in &matrix.rows {
        let _ = write!(out, "<tr><th>{}</th>", escape(&row.label));
        for cell in &row.cells {
            match cell {
                None => {
                    let _ = write!(out, "<td></td>");
                }
                Some(cell) => {
                    let status = cell.status();
                    let _ = write!(
                        out,
                        "<td class=\"status-{}\">{}<br>{}",
                        status.label(),
                        status.label(),
                        escape(&counts_text(&cell.counts))
                    );
                    if cell.coverage.nodes_on_executor < cell.coverage.nodes {
                        let _ = write!(out, "<br>nodes {}", escape(&cell.coverage.describe()));
                    }
                    if cell.max_abs_error.is_some() || cell.max_rel_error.is_some() {
                        let _ = write!(
                            out,
                            "<br>abs {} · rel {}",
                            sci(cell.max_abs_error),
                            sci(cell.max_rel_error)
                        );
                    }
                    let _ = write!(out, "</td>");
                }
            }
        }
        let _ = writeln!(out, "</tr>");
    }
    let _ = writeln!(out, "</table>");
}

fn lists(out: &mut String, summary: &Summary) {
    if !summary.run_failures.is_empty() {
        let _ = writeln!(out, "<h2>Run-level failures</h2>\n<ul>");
        for f in &summary.run_failures {
            let _ = writeln!(out, "<li>{}</li>", escape(f));
        }
        let _ = writeln!(out, "</ul>");
    }
    if !summary.failures.is_empty() {
        let _ = writeln!(out, "<h2>Failures</h2>");
        for f in &summary.failures {
            let _ = writeln!(
                out,
                "<h3><code>{}</code> ({})</h3>\n<pre>{}</pre>",
                escape(&f.trial),
                f.verdict,
                escape(&f.message)
            );
        }
    }
    if !summary.declined.is_empty() {
        let _ = writeln!(
            out,
            "<h2>Ops declined in trials that ran partly on the reference</h2>\n<table>\n\
             <tr><th>trials</th><th>nodes</th><th>under</th><th>op</th><th>reason</th></tr>"
        );
        for d in &summary.declined {
            let _ = writeln!(
                out,
                "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td></tr>",
                d.trials,
                d.nodes,
                escape(&d.under),
                escape(&d.op),
                escape(&d.reason)
            );
        }
        let _ = writeln!(out, "</table>");
    }
    if !summary.skips.is_empty() {
        let _ = writeln!(
            out,
            "<h2>Skips, by reason</h2>\n<table>\n<tr><th>trials</th><th>reason</th></tr>"
        );
        for s in &summary.skips {
            let _ = writeln!(
                out,
                "<tr><td class=\"num\">{}</td><td>{}</td></tr>",
                s.trials,
                escape(&s.reason)
            );
        }
        let _ = writeln!(out, "</table>");
    }
    let _ = writeln!(out, "<h2>Fallback notices</h2>");
    if summary.notices.is_empty() {
        let _ = writeln!(out, "<p>No fallback notice was raised.</p>");
    } else {
        let _ = writeln!(
            out,
            "<table>\n<tr><th>trials</th><th>raised under</th><th>notice</th><th>first trial</th></tr>"
        );
        for n in &summary.notices {
            let _ = writeln!(
                out,
                "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                n.trials,
                escape(&n.raised_under.join(", ")),
                escape(&n.notice),
                escape(&n.first_trial)
            );
        }
        let _ = writeln!(out, "</table>");
    }
}

/// The fill of a cell: by status, and for passes by the worst error-to-allowance ratio.
fn colour(cell: &Cell) -> String {
    match cell.status() {
        Status::Fail => FAIL_COLOUR.to_string(),
        Status::ExpectedFail => EXPECTED_FAIL_COLOUR.to_string(),
        Status::Skip => SKIP_COLOUR.to_string(),
        Status::Partial => PARTIAL_COLOUR.to_string(),
        Status::Pass => pass_colour(cell.worst_ratio),
    }
}

/// Interpolates between the pass colours on a log scale of the ratio.
fn pass_colour(ratio: Option<f64>) -> String {
    let r = ratio.unwrap_or(0.0);
    let t = if r.is_nan() || r <= RATIO_FLOOR {
        0.0
    } else {
        ((r.log10() - RATIO_FLOOR.log10()) / -RATIO_FLOOR.log10()).clamp(0.0, 1.0)
    };
    let mix = |a: u8, b: u8| -> u8 {
        // t is clamped to [0, 1], so the result lies between a and b and fits in a u8.
        (f64::from(a) + (f64::from(b) - f64::from(a)) * t).round() as u8
    };
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(PASS_LOW.0, PASS_HIGH.0),
        mix(PASS_LOW.1, PASS_HIGH.1),
        mix(PASS_LOW.2, PASS_HIGH.2)
    )
}

/// The few characters written inside a heat-map cell.
fn short_label(cell: &Cell) -> String {
    let c = &cell.counts;
    match cell.status() {
        Status::Fail => format!("{} of {} fail", c.failed(), c.total()),
        Status::ExpectedFail => format!("{} of {} xfail", c.expected_fail, c.total()),
        Status::Pass => format!("{}/{} pass", c.pass, c.total()),
        Status::Partial => format!("{}/{} partial", c.partial, c.total()),
        Status::Skip => format!("{} skip", c.skip),
    }
}

fn tooltip(row: &str, column: &super::Column, cell: &Cell) -> String {
    let mut text = format!(
        "{row} on {}: {} ({})",
        column.title(),
        cell.status().label(),
        counts_text(&cell.counts)
    );
    if cell.coverage.nodes_on_executor < cell.coverage.nodes {
        let _ = write!(text, "; nodes {}", cell.coverage.describe());
    }
    if cell.max_abs_error.is_some() {
        let _ = write!(
            text,
            "; max abs error {}, max rel error {}, worst error / allowance {}",
            sci(cell.max_abs_error),
            sci(cell.max_rel_error),
            sci(cell.worst_ratio)
        );
    }
    if let Some(reason) = &cell.skip_reason {
        let _ = write!(text, "; skipped: {reason}");
    }
    text
}

/// `s` cut to `max` characters, the last one "…" when anything was cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Escapes text for HTML and SVG content and attribute values.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
