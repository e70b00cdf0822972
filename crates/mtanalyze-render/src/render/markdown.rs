//! `--format markdown`: GitHub-flavoured tables to paste into a pull
//! request or an issue (the report's function table; the diff's, biggest
//! changes first, as the diff's rows are sorted).
//!
//! ```text
//! **mtanalyze diff** `base.bin` → `new.bin` (clock: stack): total self time 1.88s → 50.3ms (-97.3%)
//!
//! Significance: p < 0.001 (Mann-Whitney on the calls, medians); min effect: 10% (0.5% of the total); total: faster (p<0.001).
//!
//! | function | tottime (base → new) | change | % | p | verdict | cumtime (base → new) | change | ncalls (base → new) |
//! |:---|---:|---:|---:|---:|:---|---:|---:|---:|
//! | `parse_term` (workload.rs:126) | 1.06ms → 24.1ms | +23.1ms | +2168.2% | <0.001 | **slower** | ... |
//! ```
//!
//! Function names are code spans; a `|` or a backtick in a name or a path
//! is escaped so the row keeps its cells, and control characters are
//! written as escapes (`\x1b`).

use std::io::{self, Write};

use super::diff::{delta, percent, signed};
use super::escape::escape;
use super::{calls, duration};
use mtanalyze_model::diff::{DiffReport, FunctionDiff, FunctionSide, Match};
use mtanalyze_model::report::{FunctionKey, FunctionStats, Report, TraceSummary};
use mtanalyze_model::significance::{format_p, Verdict};

/// Text safe inside a table cell: control characters escaped (a line
/// break would end the row, an escape sequence reach the terminal of who
/// reads the source), then `\\` and `|`.
fn cell(s: &str) -> String {
    escape(s).replace('\\', "\\\\").replace('|', "\\|")
}

/// `` `name` (file.rs:12) ``: the name as code, the site's file name.
fn label(key: &FunctionKey) -> String {
    // A code span cannot hold its own backticks unescaped: use two.
    let name = if key.function.contains('`') {
        format!("`` {} ``", cell(&key.function))
    } else {
        format!("`{}`", cell(&key.function))
    };
    if key.file.is_empty() {
        return name;
    }
    let file = key.file.rsplit('/').next().unwrap_or(&key.file);
    format!("{name} ({}:{})", cell(file), key.line)
}

fn row(out: &mut dyn Write, cells: &[String]) -> io::Result<()> {
    writeln!(out, "| {} |", cells.join(" | "))
}

fn trace(t: &TraceSummary) -> String {
    format!("`{}`", cell(&t.source))
}

/// The report's function table (`rows`, as the view selected them).
pub fn report(out: &mut dyn Write, report: &Report, rows: &[&FunctionStats]) -> io::Result<()> {
    let t = &report.trace;
    writeln!(
        out,
        "**mtanalyze** {} (clock: {}): duration {}, {} threads, {} stacks, {} events",
        trace(t),
        report.clock,
        duration(t.duration_ns as f64),
        t.threads.len(),
        t.stacks,
        t.events
    )?;
    writeln!(out)?;
    row(
        out,
        &[
            "function", "ncalls", "tottime", "percall", "cumtime", "percall", "paused",
        ]
        .map(str::to_owned),
    )?;
    writeln!(out, "|:---|---:|---:|---:|---:|---:|---:|")?;
    let per = |total: u64, n: u64| {
        if n == 0 {
            "-".to_owned()
        } else {
            duration(total as f64 / n as f64)
        }
    };
    for f in rows {
        row(
            out,
            &[
                label(&f.key()),
                calls(f.ncalls, f.primitive_calls),
                duration(f.tottime_ns as f64),
                per(f.tottime_ns, f.ncalls),
                duration(f.cumtime_ns as f64),
                per(f.cumtime_ns, f.primitive_calls),
                duration(f.paused_ns as f64),
            ],
        )?;
    }
    if rows.len() < report.functions.len() {
        writeln!(out)?;
        writeln!(
            out,
            "{} of {} functions shown.",
            rows.len(),
            report.functions.len()
        )?;
    }
    Ok(())
}

/// The diff's function table (`rows`, biggest changes first as the diff's
/// view sorted them).
pub fn diff(out: &mut dyn Write, diff: &DiffReport, rows: &[&FunctionDiff]) -> io::Result<()> {
    let change = delta(diff.new_total_ns, diff.base_total_ns);
    writeln!(
        out,
        "**mtanalyze diff** {} → {} (clock: {}): total self time {} → {} ({}, {})",
        trace(&diff.base),
        trace(&diff.new),
        diff.clock,
        duration(diff.base_total_ns as f64),
        duration(diff.new_total_ns as f64),
        signed(change),
        percent(change, diff.base_total_ns)
    )?;
    if diff.normalized {
        writeln!(out)?;
        writeln!(
            out,
            "Base times multiplied by {:.4} so both totals are equal.",
            diff.base_scale
        )?;
    }
    writeln!(out)?;
    // Slower or faster only beyond the noise: say how that was decided.
    let items = super::diff::significance_items(diff);
    writeln!(out, "{}.", cell(&items.join("; ")).replacen('s', "S", 1))?;
    writeln!(out)?;
    row(
        out,
        &[
            "function",
            "tottime (base → new)",
            "change",
            "%",
            "p",
            "verdict",
            "cumtime (base → new)",
            "change",
            "ncalls (base → new)",
        ]
        .map(str::to_owned),
    )?;
    writeln!(out, "|:---|---:|---:|---:|---:|:---|---:|---:|---:|")?;
    for f in rows {
        let side = |s: Option<&FunctionSide>, get: fn(&FunctionSide) -> String| {
            s.map_or("-".to_owned(), get)
        };
        let pair = |get: fn(&FunctionSide) -> String| {
            format!(
                "{} → {}",
                side(f.base.as_ref(), get),
                side(f.new.as_ref(), get)
            )
        };
        let pct = |change: i64, get: fn(&FunctionSide) -> u64| match (&f.base, f.matched) {
            (None, _) => "new".to_owned(),
            (_, Match::Gone) => "gone".to_owned(),
            (Some(b), _) => percent(change, get(b)),
        };
        row(
            out,
            &[
                label(&f.key()),
                pair(|s| duration(s.tottime_ns as f64)),
                signed(f.delta.tottime_ns),
                pct(f.delta.tottime_ns, |s| s.tottime_ns),
                cell(&format_p(f.p_value)),
                match f.verdict {
                    Verdict::Noise => "noise".to_owned(),
                    v => format!("**{}**", v.as_str()),
                },
                pair(|s| duration(s.cumtime_ns as f64)),
                signed(f.delta.cumtime_ns),
                pair(|s| calls(s.ncalls, s.primitive_calls)),
            ],
        )?;
    }
    if rows.len() < diff.functions.len() {
        writeln!(out)?;
        writeln!(
            out,
            "{} of {} functions shown.",
            rows.len(),
            diff.functions.len()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_keep_their_pipes_escaped() {
        let k = FunctionKey::new("a|b`c", "src/x|y.rs", 3);
        assert_eq!(label(&k), "`` a\\|b`c `` (x\\|y.rs:3)");
        assert_eq!(cell("p\\q"), "p\\\\q");
    }
}
