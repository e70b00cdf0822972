//! The outputs of `mtanalyze diff`: the change table, JSON, and two-column
//! folded stacks for differential flame graphs.
//!
//! ```text
//! base: old.bin (binary, format 1)  duration: 1.20s  events: 120391  stacks: 17
//! new:  new.bin (binary, format 1)  duration: 1.10s  events: 110230  stacks: 17
//! clock: stack  total self time: 1.20s -> 1.10s  change: -100ms (-8.3%)
//! functions: 40 in both (1 matched by name only), 1 new, 1 gone
//!
//! significance: p < 0.001 (Mann-Whitney on the calls, medians)  min effect: 10% (0.5% of the total)  total: faster (p<0.001)
//!
//! tottime (base -> new)   change        %       p  verdict  cumtime (base -> new)  ...  function (file:line)
//! --------------------------------------------------------------------------------...----------------------
//!     1.00ms ->  2.00ms  +1.00ms  +100.0%  <0.001   slower         1.20ms ->  2.20ms  ...  parse (src/p.rs:10)
//!      250µs ->       -   -250µs  -100.0%   0.210    noise          250µs ->       -  ...  old_lexer (src/l.rs:3)  [gone]
//! ```
//!
//! `p` is the significance test's p-value (`-`: none could be made) and
//! `verdict` its conclusion (`slower`, `faster`, or `noise`): slower or
//! faster when `p` is below the level and the change at least the minimum
//! effect (`mtanalyze_model::significance`).
//!
//! A `base -> new` cell shows `-` for a side without the function; its
//! arrows line up down the column. Percentages are of the base value (`new`
//! when there is none, `-` when the base value is 0). The rows come from
//! [`crate::view`]; this file only lays them out.

use std::io::{self, Write};

use regex::Regex;

use super::fit::{wrap_items, Column, Give, Text};
use super::table::{column, print_fitted, text_column, trace_line, window_label, LABEL_MIN};
use super::{calls, duration};
use crate::view::{
    diff_edge_groups, diff_function_rows, DiffEdgeGroup, DiffViewOptions, Direction,
};
use mtanalyze_model::diff::{DiffReport, EdgeSide, FunctionDiff, FunctionSide, Match};
use mtanalyze_model::report::{FunctionKey, TraceSummary};
use mtanalyze_model::significance::{format_p, Method};

/// What the table shows besides the function rows.
#[derive(Clone, Debug, Default)]
pub struct TableSections {
    /// `--callers REGEX`: the caller edges of the matching functions.
    pub callers: Option<Regex>,
    /// `--callees REGEX`: the callee edges of the matching functions.
    pub callees: Option<Regex>,
    /// The columns to fit the tables in (`None`: any width).
    pub width: Option<usize>,
}

/// The whole table output: the header, then the edge tables when asked
/// for, else the function table.
pub fn table(
    out: &mut dyn Write,
    diff: &DiffReport,
    view: &DiffViewOptions,
    sections: &TableSections,
) -> io::Result<()> {
    let width = sections.width;
    header(out, diff, width)?;
    let mut shown = false;
    for (re, dir) in [
        (&sections.callers, Direction::Callers),
        (&sections.callees, Direction::Callees),
    ] {
        if let Some(re) = re {
            writeln!(out)?;
            edges(out, &diff_edge_groups(diff, view, re, dir), dir, width)?;
            shown = true;
        }
    }
    if !shown {
        writeln!(out)?;
        let rows = diff_function_rows(diff, view);
        functions(out, &rows, diff.functions.len(), width)?;
    }
    Ok(())
}

/// The lines above the tables: both traces, the clock, the total change,
/// how the functions matched, and whether the base was normalized.
pub(crate) fn header(
    out: &mut dyn Write,
    diff: &DiffReport,
    width: Option<usize>,
) -> io::Result<()> {
    side(out, "base: ", &diff.base, width)?;
    side(out, "new:  ", &diff.new, width)?;
    let change = delta(diff.new_total_ns, diff.base_total_ns);
    let mut items = vec![format!("clock: {}", diff.clock)];
    // Both sides count the same window; an open end is each trace's end.
    match (&diff.base.window, &diff.new.window) {
        (Some(b), Some(n)) if b == n => items.push(format!("window: {}", window_label(b))),
        (Some(b), Some(n)) => items.push(format!(
            "window: {} (base), {} (new)",
            window_label(b),
            window_label(n)
        )),
        _ => {}
    }
    items.extend([
        format!(
            "total self time: {} -> {}",
            duration(diff.base_total_ns as f64),
            duration(diff.new_total_ns as f64)
        ),
        format!(
            "change: {} ({})",
            signed(change),
            percent(change, diff.base_total_ns)
        ),
    ]);
    for line in wrap_items(&items, width) {
        writeln!(out, "{line}")?;
    }
    let count = |m: Match| diff.functions.iter().filter(|f| f.matched == m).count();
    let items = [
        format!(
            "functions: {} in both ({} matched by name only),",
            count(Match::Site) + count(Match::Name),
            diff.matched_by_name
        ),
        format!("{} new, {} gone", count(Match::New), count(Match::Gone)),
    ];
    let lines = wrap_items(&items, width);
    // One line as before when it fits: `..., N new, M gone`.
    writeln!(out, "{}", lines.join("\n").replace(",  ", ", "))?;
    for line in wrap_items(&significance_items(diff), width) {
        writeln!(out, "{line}")?;
    }
    if diff.normalized {
        writeln!(
            out,
            "normalized: base times multiplied by {:.4} so its total self time equals the new trace's",
            diff.base_scale
        )?;
    }
    Ok(())
}

/// How the verdicts were decided, as header items: `significance: p <
/// 0.01 (Mann-Whitney on the calls, medians)`, `min effect: 10% (0.5% of the
/// total)`, the drift when there was one, and the total's verdict.
pub(crate) fn significance_items(diff: &DiffReport) -> Vec<String> {
    let s = &diff.significance;
    let test = match s.method {
        Method::Calls => "Welch's t-test on the calls",
        Method::CallMedians => "Mann-Whitney on the calls, medians",
        Method::Runs => "Welch's t-test on the runs, medians",
    };
    let mut items = vec![if s.options.confidence > 0.0 {
        format!(
            "significance: p < {} ({test})",
            trim_float(1.0 - s.options.confidence)
        )
    } else {
        "significance: no test".to_owned()
    }];
    items.push(format!(
        "min effect: {}% ({}% of the total)",
        trim_float(s.options.min_effect_pct),
        trim_float(s.options.min_share_pct)
    ));
    if s.drift != 1.0 {
        items.push(format!("drift: base x {:.3}", s.drift));
    }
    items.push(format!(
        "total: {} ({})",
        diff.total_verdict.as_str(),
        p_equals(diff.total_p_value)
    ));
    items
}

/// `p=0.012`, `p<0.001`, `no test`.
fn p_equals(p: Option<f64>) -> String {
    match format_p(p) {
        _ if p.is_none() => "no test".to_owned(),
        less if less.starts_with('<') => format!("p{less}"),
        v => format!("p={v}"),
    }
}

/// A float with no trailing zeros (`0.01`, `10`), rounded to 6 decimals.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn side(
    out: &mut dyn Write,
    label: &str,
    t: &TraceSummary,
    width: Option<usize>,
) -> io::Result<()> {
    let mut items = vec![
        trace_line(label, t, width),
        format!("duration: {}", duration(t.duration_ns as f64)),
        format!("events: {}", t.events),
        format!("stacks: {}", t.stacks),
    ];
    if !t.finished {
        items.push("unfinished".to_owned());
    }
    for (what, n) in [
        ("lost chunks", t.chunks_lost),
        ("damaged chunks", t.chunks_damaged),
        ("dropped events", t.dropped_events),
    ] {
        if n > 0 {
            items.push(format!("{what}: {n}"));
        }
    }
    for line in wrap_items(&items, width) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The function table. `total` is how many functions the diff holds, so
/// the reader learns when `--filter`, `--min-change` or `--limit` hid some.
pub(crate) fn functions(
    out: &mut dyn Write,
    rows: &[&FunctionDiff],
    total: usize,
    width: Option<usize>,
) -> io::Result<()> {
    if rows.len() < total {
        writeln!(out, "showing {} of {} functions", rows.len(), total)?;
    }
    let columns = [
        pair_column("tottime", Give::Hide(6)),
        column("change", Give::Nothing)
            .named("tottime change")
            .short("tot change"),
        column("%", Give::Nothing).named("tottime %"),
        column("p", Give::Hide(8)),
        column("verdict", Give::Nothing),
        pair_column("cumtime", Give::Hide(2)),
        column("change", Give::Hide(5))
            .named("cumtime change")
            .short("cum change"),
        column("%", Give::Hide(3)).named("cumtime %"),
        pair_column("ncalls", Give::Hide(4)),
        column("paused change", Give::Hide(1)),
        text_column("function (file:line)", LABEL_MIN),
    ];
    let body: Vec<Vec<Col>> = rows
        .iter()
        .map(|f| {
            let time = |get: fn(&FunctionSide) -> u64| {
                let b = f.base.as_ref().map(get);
                let n = f.new.as_ref().map(get);
                pair_of(b.map(|v| duration(v as f64)), n.map(|v| duration(v as f64)))
            };
            let pct = |change: i64, get: fn(&FunctionSide) -> u64| match f.base {
                None => "new".to_owned(),
                Some(b) => percent(change, get(&b)),
            };
            let ncalls = pair_of(
                f.base.map(|s| calls(s.ncalls, s.primitive_calls)),
                f.new.map(|s| calls(s.ncalls, s.primitive_calls)),
            );
            vec![
                time(|s| s.tottime_ns),
                Col::Right(signed(f.delta.tottime_ns)),
                Col::Right(pct(f.delta.tottime_ns, |s| s.tottime_ns)),
                Col::Right(format_p(f.p_value)),
                Col::Right(f.verdict.as_str().to_owned()),
                time(|s| s.cumtime_ns),
                Col::Right(signed(f.delta.cumtime_ns)),
                Col::Right(pct(f.delta.cumtime_ns, |s| s.cumtime_ns)),
                ncalls,
                Col::Right(signed(f.delta.paused_ns)),
                Col::Label(f.key(), marker(f.matched)),
                Col::Right(format!("{} | {}", range(f.base_range), range(f.new_range))),
            ]
        })
        .collect();
    // With several runs a side, the range of self time over its runs,
    // before the function's name.
    let ranges = rows
        .iter()
        .any(|f| f.base_range.is_some() || f.new_range.is_some());
    let (columns, body) = if ranges {
        let mut columns = columns.to_vec();
        let label = columns.len() - 1;
        columns.insert(
            label,
            column("tottime range (base | new)", Give::Hide(7)).short("range b | n"),
        );
        let body = body
            .into_iter()
            .map(|mut r: Vec<Col>| {
                let range = r.pop();
                r.insert(label, range.unwrap_or(Col::Left(String::new())));
                r
            })
            .collect();
        (columns, body)
    } else {
        let body = body
            .into_iter()
            .map(|mut r: Vec<Col>| {
                r.pop();
                r
            })
            .collect();
        (columns.to_vec(), body)
    };
    layout(out, &columns, body, width)
}

/// The caller or callee tables of a diff (`--callers`, `--callees`): each
/// selected function once, followed by one row per edge with both sides'
/// calls, self and cumulative time, and the changes.
pub(crate) fn edges(
    out: &mut dyn Write,
    groups: &[DiffEdgeGroup<'_>],
    dir: Direction,
    width: Option<usize>,
) -> io::Result<()> {
    let other = match dir {
        Direction::Callers => "was called by",
        Direction::Callees => "called",
    };
    let columns = [
        text_column("function (file:line)", LABEL_MIN),
        text_column(other, LABEL_MIN),
        pair_column("ncalls", Give::Hide(2)),
        pair_column("tottime", Give::Hide(3)),
        column("change", Give::Nothing)
            .named("tottime change")
            .short("tot change"),
        pair_column("cumtime", Give::Hide(1)),
        column("change", Give::Nothing)
            .named("cumtime change")
            .short("cum change"),
    ];
    let body = super::table::edge_table_body(
        groups,
        dir,
        columns.len(),
        |f| Col::Label(f.key(), marker(f.matched)),
        |e, other| {
            let m = match (&e.base, &e.new) {
                (None, _) => Match::New,
                (_, None) => Match::Gone,
                _ => Match::Site,
            };
            let time = |get: fn(&EdgeSide) -> u64| {
                pair_of(
                    e.base.as_ref().map(|s| duration(get(s) as f64)),
                    e.new.as_ref().map(|s| duration(get(s) as f64)),
                )
            };
            vec![
                Col::Label(other, marker(m)),
                pair_of(
                    e.base.map(|s| calls(s.ncalls, s.primitive_calls)),
                    e.new.map(|s| calls(s.ncalls, s.primitive_calls)),
                ),
                time(|s| s.tottime_ns),
                Col::Right(signed(e.delta.tottime_ns)),
                time(|s| s.cumtime_ns),
                Col::Right(signed(e.delta.cumtime_ns)),
            ]
        },
        || Col::Left(String::new()),
        || Col::Left("-".into()),
    );
    layout(out, &columns, body, width)
}

/// The line naming a row that broke a `--fail-if` rule:
/// `'tottime > +10%': parse_term (src/p.rs:126): tottime 1.06ms -> 24.1ms (+2168.2%)`.
pub fn breach(b: &mtanalyze_model::gate::GateBreach) -> String {
    use mtanalyze_model::gate::GateField;
    let show = |v: Option<u64>| match (v, b.field) {
        (None, _) => "-".to_owned(),
        (Some(n), GateField::Ncalls) => n.to_string(),
        (Some(ns), _) => duration(ns as f64),
    };
    let column = match b.field {
        GateField::Tottime => "tottime",
        GateField::Cumtime => "cumtime",
        GateField::Paused => "paused",
        GateField::Ncalls => "ncalls",
        GateField::Total => "total",
    };
    let (base, new) = (b.base.unwrap_or(0), b.new.unwrap_or(0));
    let change = delta(new, base);
    let pct = match b.base {
        None => "new".to_owned(),
        Some(_) if b.new.is_none() => "gone".to_owned(),
        Some(_) => percent(change, base),
    };
    format!(
        "'{}': {}: {column} {} -> {} ({pct})",
        b.rule,
        b.what,
        show(b.base),
        show(b.new)
    )
}

/// `--format json`: the (filtered) diff as one pretty-printed JSON object
/// and a newline; `schemas/diff.schema.json` documents it.
pub fn json(out: &mut dyn Write, diff: &DiffReport) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, diff).map_err(io::Error::from)?;
    writeln!(out)
}

/// `--format folded`: one line per call path, `root;child;leaf BASE NEW`,
/// with each side's self time in ns on that path (the base's scaled when
/// normalizing), as `inferno-diff-folded` writes and differential flame
/// graph tools read; frames are the diff's labels ([`mtanalyze_model::labels::Labels`]),
/// their control characters escaped. With `filter`, only paths through a
/// function whose label matches.
pub fn folded(out: &mut dyn Write, diff: &DiffReport, filter: Option<&Regex>) -> io::Result<()> {
    for p in &diff.paths {
        if filter.is_none_or(|re| p.path.split(';').any(|f| re.is_match(f))) {
            let frames: Vec<_> = p.path.split(';').map(super::folded::frame).collect();
            writeln!(out, "{} {} {}", frames.join(";"), p.base_ns, p.new_ns)?;
        }
    }
    Ok(())
}

/// What the function column adds after the name for unusual matches.
fn marker(m: Match) -> &'static str {
    match m {
        Match::Site => "",
        Match::Name => "  [matched by name]",
        Match::New => "  [new]",
        Match::Gone => "  [gone]",
    }
}

/// New minus base, saturating.
pub(super) fn delta(new: u64, base: u64) -> i64 {
    (new as i128 - base as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// A change as a duration with its sign (`+1.00ms`, `-250ns`, `0ns`).
pub(super) fn signed(ns: i64) -> String {
    let sign = match ns.signum() {
        1 => "+",
        -1 => "-",
        _ => "",
    };
    format!("{sign}{}", duration(ns.unsigned_abs() as f64))
}

/// A change as a percentage of the base value, one decimal (`+12.5%`,
/// `0.0%`); `-` when the base value is 0 and the change is not.
pub(super) fn percent(change: i64, base: u64) -> String {
    if change == 0 {
        "0.0%".to_owned()
    } else if base == 0 {
        "-".to_owned()
    } else {
        format!("{:+.1}%", change as f64 / base as f64 * 100.0)
    }
}

/// `min–max` of a side's self time over its runs, `-` for one run.
fn range(r: Option<[u64; 2]>) -> String {
    match r {
        Some([lo, hi]) => format!("{}–{}", duration(lo as f64), duration(hi as f64)),
        None => "-".to_owned(),
    }
}

/// A `base -> new` column of `what`, titled `what b -> n` when narrow.
fn pair_column(what: &str, give: Give) -> Column {
    column(&format!("{what} (base -> new)"), give).short(&format!("{what} b -> n"))
}

/// A table cell before layout.
enum Col {
    Left(String),
    Right(String),
    /// `base -> new`, each side right-aligned to its widest in the column.
    Pair(String, String),
    /// A function's label and its match marker.
    Label(FunctionKey, &'static str),
}

fn pair_of(base: Option<String>, new: Option<String>) -> Col {
    let dash = || "-".to_owned();
    Col::Pair(base.unwrap_or_else(dash), new.unwrap_or_else(dash))
}

/// Aligns the pairs of each column, then fits and prints the rows.
fn layout(
    out: &mut dyn Write,
    columns: &[Column],
    rows: Vec<Vec<Col>>,
    width: Option<usize>,
) -> io::Result<()> {
    let w = |s: &str| s.chars().count();
    let mut widths = vec![(0, 0); columns.len()];
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            if let Col::Pair(b, n) = c {
                widths[i] = (widths[i].0.max(w(b)), widths[i].1.max(w(n)));
            }
        }
    }
    let body: Vec<Vec<Text>> = rows
        .into_iter()
        .map(|row| {
            row.into_iter()
                .enumerate()
                .map(|(i, c)| match c {
                    Col::Left(s) => Text::Plain(s),
                    Col::Right(s) => Text::Number(s),
                    Col::Pair(b, n) => {
                        let (wb, wn) = widths[i];
                        Text::Number(format!("{b:>wb$} -> {n:>wn$}"))
                    }
                    Col::Label(k, m) => Text::Label(k, m.to_owned()),
                })
                .collect()
        })
        .collect();
    print_fitted(out, columns, &body, width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_carry_their_sign_and_percentages_their_base() {
        assert_eq!(signed(1_000), "+1.00µs");
        assert_eq!(signed(-250), "-250ns");
        assert_eq!(signed(0), "0ns");
        assert_eq!(percent(1000, 1000), "+100.0%");
        assert_eq!(percent(-1, 8), "-12.5%");
        assert_eq!(percent(0, 0), "0.0%");
        assert_eq!(percent(5, 0), "-");
    }
}
