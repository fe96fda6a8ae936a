//! matrix.html: the matrix as one self-contained page — inline CSS, an inline SVG heat map
//! coloured by status and by how close the worst element of the passing trials came to its
//! allowance, unavailable columns headed by their reason, and the same failures, skips and
//! notices as matrix.md. No script and no external asset, so the
//! page opens the same from a CI artefact, a mail attachment or a machine without network.

use super::markdown::{
    allowance_text, column_header, counts_text, errors_text, skip_cause_columns, skip_cause_rows,
    totals_sentence, unavailable_phrase, verdict_word, DELIBERATE_NOTE,
};
use super::{sci, Cell, Column, Matrix, Status, Summary};
use std::fmt::Write;

const CELL_WIDTH: usize = 120;
const CELL_HEIGHT: usize = 20;
/// Two header lines: executor/target, then the device (several columns may share the
/// first line when a merged report holds runs on several devices).
const HEADER_HEIGHT: usize = 42;
/// Longer device names are cut (with "…") in the heat map's header; the table shows them
/// whole. An unavailable column's reason is wrapped at this width instead.
const MAX_DEVICE_CHARS: usize = 17;
/// An unavailable column's reason takes at most this many lines of the heat map's header
/// (the last ends with "…" when cut); the table's header and the cell's tooltip show it
/// whole.
const MAX_REASON_LINES: usize = 7;
/// The height of one header line.
const LINE_HEIGHT: usize = 14;
const LEGEND_HEIGHT: usize = 44;
/// Longer row labels are cut (with "…") in the heat map; the table shows them whole.
const MAX_LABEL_CHARS: usize = 48;
/// Approximate width of one character of the 12px sans-serif labels, for layout only.
const CHAR_WIDTH: usize = 7;

const FAIL_COLOUR: &str = "#d73027";
const EXPECTED_FAIL_COLOUR: &str = "#fdae61";
const SKIP_COLOUR: &str = "#d9d9d9";
/// Expected failures for a feature Concord lacks: a pale violet, apart from the orange of
/// known wrong results and the grey of skips.
const UNSUPPORTED_COLOUR: &str = "#cbc3e3";
/// The reason of an unavailable column, in its header.
const UNAVAILABLE_TEXT_COLOUR: &str = "#9a3412";
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
td.status-unsupported{background:#efecf6;color:#555}
th span.unavailable{color:#9a3412;font-weight:normal}
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
    if !summary.unavailable.is_empty() {
        let _ = writeln!(out, "<h2>Unavailable here</h2>\n<ul>");
        for u in &summary.unavailable {
            let _ = writeln!(
                out,
                "<li><b>{}</b>: {}</li>",
                escape(&u.under),
                escape(&u.reason)
            );
        }
        let _ = writeln!(out, "</ul>");
    }
    let _ = writeln!(out, "<h2>Heat map</h2>");
    let _ = writeln!(out, "<p>{}</p>", escape(HEAT_MAP_LEGEND));
    heat_map(&mut out, matrix);
    matrix_table(&mut out, matrix);
    lists(&mut out, summary);
    let _ = writeln!(out, "</body>\n</html>");
    out
}

/// How to read the heat map: what each colour means.
const HEAT_MAP_LEGEND: &str = "Red: a trial fails the run. Orange: failed as the expectations \
     say (a known bug, imprecise ONNX data, a convention runtimes differ on). Violet: \
     unsupported — only expected failures for a feature Concord lacks (a dtype, an opset, …), \
     not wrong results; they never outweigh a pass. Grey: skipped. Blue: passed with some \
     nodes on the reference (partial). Green to yellow: passed, coloured by the worst element's \
     error as a share of its allowance over the passing trials only (dark green at 0.01% or \
     less, yellow at the allowance). A blank column's header says why its executor or target \
     was unavailable. Hover a cell for its figures.";

fn totals_table(out: &mut String, summary: &Summary) {
    let _ = writeln!(
        out,
        "<table class=\"totals\">\n<tr><th>executor</th><th>target</th><th>device</th>\
         <th>pass</th><th>partial</th><th>node coverage</th><th>expected-fail</th>\
         <th>unsupported</th><th>skip</th><th>fail</th><th>unexpected-pass</th>\
         <th>executed</th></tr>"
    );
    for g in &summary.by_executor_target {
        let c = &g.counts;
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&g.executor),
            escape(&g.target),
            escape(if g.device.is_empty() { "-" } else { &g.device }),
            c.pass,
            c.partial,
            escape(&g.coverage.describe()),
            c.expected_fail - c.unsupported,
            c.unsupported,
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
    // An unavailable column says why under its title, a few words a line.
    let reasons: Vec<Vec<String>> = matrix
        .columns
        .iter()
        .map(|c| {
            c.unavailable.as_deref().map_or_else(Vec::new, |reason| {
                wrap(
                    &unavailable_phrase(reason),
                    MAX_DEVICE_CHARS,
                    MAX_REASON_LINES,
                )
            })
        })
        .collect();
    let extra_lines = reasons.iter().map(Vec::len).max().unwrap_or(0);
    let header_height = HEADER_HEIGHT + extra_lines.saturating_sub(1) * LINE_HEIGHT;
    // A quarter cell to the right, for a bold column title wider than its cell.
    let grid_width = label_width + matrix.columns.len() * CELL_WIDTH + CELL_WIDTH / 4;
    let width = grid_width.max(legend_width());
    let grid_height = matrix.rows.len() * CELL_HEIGHT;
    let height = header_height + grid_height + LEGEND_HEIGHT;
    let _ = writeln!(
        out,
        "<svg width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"conformance heat map\">"
    );
    for (j, (c, reason)) in matrix.columns.iter().zip(&reasons).enumerate() {
        let x = label_width + j * CELL_WIDTH + CELL_WIDTH / 2;
        let title = escape(&column_header(c));
        let _ = writeln!(
            out,
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" font-weight=\"bold\">\
             <title>{title}</title>{}/{}</text>",
            HEADER_HEIGHT - 23,
            escape(&c.executor),
            escape(&c.target),
        );
        if reason.is_empty() {
            let device = if c.device.is_empty() { "-" } else { &c.device };
            let _ = writeln!(
                out,
                "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\"><title>{title}</title>{}</text>",
                HEADER_HEIGHT - 8,
                escape(&shorten(device, MAX_DEVICE_CHARS))
            );
            continue;
        }
        let _ = write!(
            out,
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" fill=\"{UNAVAILABLE_TEXT_COLOUR}\" \
             class=\"unavailable\"><title>{title}</title>",
            HEADER_HEIGHT - 8
        );
        for (k, line) in reason.iter().enumerate() {
            let _ = write!(
                out,
                "<tspan x=\"{x}\" dy=\"{}\">{}</tspan>",
                if k == 0 { 0 } else { LINE_HEIGHT },
                escape(line)
            );
        }
        let _ = writeln!(out, "</text>");
    }
    for (i, row) in matrix.rows.iter().enumerate() {
        let y = header_height + i * CELL_HEIGHT;
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
    legend(out, header_height + grid_height + 12);
    let _ = writeln!(out, "</svg>");
}

/// The heat map's legend: a swatch and a label per colour.
fn legend_items() -> [(String, &'static str); 7] {
    [
        (FAIL_COLOUR.to_string(), "fail"),
        (EXPECTED_FAIL_COLOUR.to_string(), "expected-fail"),
        (UNSUPPORTED_COLOUR.to_string(), "unsupported"),
        (SKIP_COLOUR.to_string(), "skip"),
        (PARTIAL_COLOUR.to_string(), "partial"),
        (pass_colour(Some(0.0)), "pass, error ≪ allowance"),
        (pass_colour(Some(1.0)), "pass, error at allowance"),
    ]
}

/// Where the legend item after `label` starts, relative to the one of `label`.
fn legend_step(label: &str) -> usize {
    18 + label.chars().count() * CHAR_WIDTH + 16
}

/// The width the legend needs, so that a matrix of few columns does not cut it.
fn legend_width() -> usize {
    4 + legend_items()
        .iter()
        .map(|(_, label)| legend_step(label))
        .sum::<usize>()
}

fn legend(out: &mut String, y: usize) {
    let mut x = 4;
    for (fill, label) in legend_items() {
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"{y}\" width=\"14\" height=\"14\" fill=\"{fill}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            x + 18,
            y + 12,
            escape(label)
        );
        x += legend_step(label);
    }
}

fn matrix_table(out: &mut String, matrix: &Matrix) {
    let _ = writeln!(out, "<h2>Op × executor × target</h2>");
    let _ = write!(out, "<table class=\"matrix\">\n<tr><th>op</th>");
    for c in &matrix.columns {
        match &c.unavailable {
            Some(reason) => {
                let _ = write!(
                    out,
                    "<th>{}<br><span class=\"unavailable\">{}</span></th>",
                    escape(&c.title()),
                    escape(&unavailable_phrase(reason))
                );
            }
            None => {
                let _ = write!(out, "<th>{}</th>", escape(&c.title()));
            }
        }
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
                    let errors = errors_text(cell);
                    if !errors.is_empty() {
                        let _ = write!(out, "<br>{}", escape(&errors));
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
        let causes = skip_cause_columns(summary);
        let _ = write!(
            out,
            "<h2>Skips, by executor and cause</h2>\n<table>\n<tr><th>executor</th>"
        );
        for cause in &causes {
            let _ = write!(out, "<th>{}</th>", cause.label());
        }
        let _ = writeln!(out, "</tr>");
        for (executor, counts) in skip_cause_rows(summary, &causes) {
            let _ = write!(out, "<tr><td>{}</td>", escape(executor));
            for n in counts {
                let _ = write!(out, "<td class=\"num\">{n}</td>");
            }
            let _ = writeln!(out, "</tr>");
        }
        let _ = writeln!(out, "</table>");
        let _ = writeln!(
            out,
            "<h2>Skips, by reason</h2>\n<table>\n\
             <tr><th>trials</th><th>cause</th><th>under</th><th>reason</th></tr>"
        );
        for s in &summary.skips {
            let _ = writeln!(
                out,
                "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                s.trials,
                s.cause.label(),
                escape(&s.under.join(", ")),
                escape(&s.reason)
            );
        }
        let _ = writeln!(out, "</table>");
    }
    let (deliberate, real): (Vec<_>, Vec<_>) = summary.notices.iter().partition(|n| n.deliberate);
    let _ = writeln!(out, "<h2>Fallback notices</h2>");
    notice_table(out, &real, "<p>No fallback notice was raised.</p>");
    if !deliberate.is_empty() {
        let _ = writeln!(
            out,
            "<h2>Deliberate notices (fallback/ self-test trials)</h2>\n<p>{}</p>",
            escape(DELIBERATE_NOTE)
        );
        notice_table(out, &deliberate, "");
    }
}

/// A table of fallback notices, or `empty` when there is none.
fn notice_table(out: &mut String, notices: &[&super::NoticeEntry], empty: &str) {
    if notices.is_empty() {
        let _ = writeln!(out, "{empty}");
    } else {
        let _ = writeln!(
            out,
            "<table>\n<tr><th>trials</th><th>raised under</th><th>notice</th><th>first trial</th></tr>"
        );
        for n in notices {
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
        Status::Unsupported => UNSUPPORTED_COLOUR.to_string(),
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
        Status::Unsupported => format!("{} unsupported", c.unsupported),
    }
}

fn tooltip(row: &str, column: &Column, cell: &Cell) -> String {
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
            "; over the passing trials: worst element at {} ({}), max abs error {}, max rel error {}",
            cell.worst_ratio.map_or_else(|| "-".to_string(), allowance_text),
            sci(cell.worst_ratio),
            sci(cell.max_abs_error),
            sci(cell.max_rel_error)
        );
    }
    if let Some(reason) = &cell.skip_reason {
        let _ = write!(text, "; skipped: {reason}");
    }
    text
}

/// `s` in lines of at most `width` characters, broken between words (a longer word is a
/// line of its own, cut), at most `max_lines` of them, the last ending "…" when anything
/// was left out.
fn wrap(s: &str, width: usize, max_lines: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in s.split_whitespace() {
        let len = current.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(word);
    }
    if !current.is_empty() {
        lines.push(current);
    }
    let cut = lines.len() > max_lines;
    lines.truncate(max_lines);
    let count = lines.len();
    for (i, line) in lines.iter_mut().enumerate() {
        let last_of_cut = cut && i + 1 == count;
        if line.chars().count() > width || last_of_cut {
            let keep = if last_of_cut {
                width.min(line.chars().count() + 1)
            } else {
                width
            };
            let mut shortened: String = line.chars().take(keep.saturating_sub(1)).collect();
            shortened.push('…');
            *line = shortened;
        }
    }
    lines
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
