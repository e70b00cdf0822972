//! The pstats-like text tables of the default command.
//!
//! ```text
//! trace: app.mtrace (binary, format 1)
//! duration: 1.20s  threads: 4  stacks: 17  events: 120391  clock: stack  warnings: 0
//!
//!  ncalls  tottime  percall  cumtime  percall   paused  function (file:line)
//!     3/1    812ns    271ns   4.56ms   4.56ms   1.20ms  parse (src/p.rs:10)
//! ```
//!
//! Numbers are right-aligned, times use `super::duration`. The rows come
//! from [`crate::view`]; this file only lays them out.

use std::io::{self, Write};

use prettytable::format::{FormatBuilder, LinePosition, LineSeparator};
use prettytable::{Cell, Row, Table};

use super::escape::escape;
use super::fit::{elide_middle, fit, plan, width_of, wrap_items, wrap_with, Column, Give, Text};
use super::{calls, duration};
use crate::view::{Direction, EdgeGroup, EdgeRow, StackGroup};
use mtanalyze_model::report::{
    FunctionKey, FunctionStats, Report, StackKey, StackRows, StackStats, TimeWindow, TraceSummary,
};

/// `{label}{source} ({format}, format N)`, the source's middle cut to fit `width`.
pub(super) fn trace_line(
    label: &str,
    t: &mtanalyze_model::report::TraceSummary,
    width: Option<usize>,
) -> String {
    let what = format!(" ({}, format {})", t.input_format, t.format_version);
    // A sum of several traces says how many.
    let counted;
    let label = if t.traces > 1 {
        counted = format!("{} traces: ", t.traces);
        counted.as_str()
    } else {
        label
    };
    let room = width.map_or(usize::MAX, |w| {
        w.saturating_sub(label.chars().count() + what.chars().count())
    });
    format!(
        "{label}{}{what}",
        elide_middle(&escape(&t.source), room.max(12))
    )
}

/// `100ms..300ms (200ms)`: a time window for the headers.
pub(crate) fn window_label(w: &TimeWindow) -> String {
    format!(
        "{}..{} ({})",
        duration(w.from_ns as f64),
        duration(w.to_ns as f64),
        duration(w.to_ns.saturating_sub(w.from_ns) as f64)
    )
}

/// The lines above every table: what the trace is and how it was analyzed.
pub fn header(out: &mut dyn Write, report: &Report, width: Option<usize>) -> io::Result<()> {
    let t = &report.trace;
    let warnings = super::problems(&report.warnings);
    writeln!(out, "{}", trace_line("trace: ", t, width))?;
    // With --thread/--stack or a time window, say how many of the stacks
    // are shown.
    let shown = match report.stack_rows {
        StackRows::Kept => report.stacks.len() as u64,
        _ => report.stacks_shown,
    };
    let stacks = if shown == t.stacks {
        t.stacks.to_string()
    } else {
        format!("{shown} of {}", t.stacks)
    };
    let mut items = vec![
        format!("duration: {}", duration(t.duration_ns as f64)),
        format!("threads: {}", t.threads.len()),
        format!("stacks: {stacks}"),
        format!("events: {}", t.events),
        format!("clock: {}", report.clock),
        format!("warnings: {warnings}"),
    ];
    if let Some(w) = &t.window {
        // The counts above are the whole trace's; the tables, the window's.
        items.insert(1, format!("window: {}", window_label(w)));
    }
    // Only a trace with marks says so (listed by `check` and in JSON).
    if !report.marks.is_empty() {
        items.push(format!("marks: {}", report.marks.len()));
    }
    for line in wrap_items(&items, width) {
        writeln!(out, "{line}")?;
    }
    let mut damage = Vec::new();
    if !t.finished {
        damage.push("unfinished (the recorder did not close the file)".to_owned());
    }
    let open_at_end = report
        .functions
        .iter()
        .fold(0u64, |n, f| n.saturating_add(f.open_at_end));
    if open_at_end > 0 && !t.finished {
        damage.push(format!(
            "frames open at the end: {open_at_end} (closed at the last event; open_at_end in --format json)"
        ));
    }
    let cut_short = report
        .functions
        .iter()
        .fold(0u64, |n, f| n.saturating_add(f.cut_short));
    if cut_short > 0 {
        damage.push(format!(
            "frames cut short by lost events or chunks, or by their stack's end: {cut_short} (cut_short in --format json)"
        ));
    }
    if t.chunks_lost > 0 {
        damage.push(format!("lost chunks: {}", t.chunks_lost));
    }
    if t.chunks_damaged > 0 {
        damage.push(format!("damaged chunks: {}", t.chunks_damaged));
    }
    if t.dropped_events > 0 {
        damage.push(format!("dropped events: {}", t.dropped_events));
    }
    if !damage.is_empty() {
        for line in wrap_items(&damage, width) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// Whether the trace measured wakes ([`TraceSummary::wakes`]): without
/// them, the split of paused time into scheduled and waiting is not a
/// measurement, and the tables say so instead of printing `0ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wakes(pub u64);

impl Wakes {
    /// The trace's wakes.
    pub fn of(trace: &TraceSummary) -> Wakes {
        Wakes(trace.wakes)
    }

    /// Whether the scheduled and waiting columns hold measurements.
    pub fn measured(self) -> bool {
        self.0 > 0
    }

    /// The line above a table with the split, when it was not measured.
    fn note(self, out: &mut dyn Write, width: Option<usize>) -> io::Result<()> {
        if self.measured() {
            return Ok(());
        }
        let words: Vec<String> = NOTE.split(' ').map(str::to_owned).collect();
        for line in wrap_with(&words, width, " ") {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }
}

/// A scheduled or waiting cell: the time, or `-` when not measured.
fn split(measured: bool, ns: u64) -> String {
    match measured {
        true => duration(ns as f64),
        false => NOT_MEASURED.to_owned(),
    }
}

/// What a table with the split says when the trace has no wakes.
const NOTE: &str = "scheduled, waiting: not measured (the trace has no wakes: record them \
    with mtrace_tokio::wakes() or .on_logical_stack(); \"Wakes\" in schemas/semantics.md)";

/// A cell whose value the trace did not measure.
const NOT_MEASURED: &str = "-";

/// The function table. `total` is how many functions the report holds, so
/// the reader learns when `--filter` or `--limit` hid some. `width`: the
/// columns to fit in (see `render/fit.rs`). `scheduled`: also the split of
/// `paused` into scheduled and waiting (`--scheduled`), as [`Wakes`] says.
pub fn functions(
    out: &mut dyn Write,
    rows: &[&FunctionStats],
    total: usize,
    width: Option<usize>,
    scheduled: Option<Wakes>,
) -> io::Result<()> {
    if rows.len() < total {
        writeln!(out, "showing {} of {} functions", rows.len(), total)?;
    }
    if let Some(wakes) = scheduled {
        wakes.note(out, width)?;
    }
    let measured = scheduled.is_some_and(Wakes::measured);
    let mut columns = number_columns().to_vec();
    columns.extend([
        column("scheduled", Give::Hide(5)),
        column("waiting", Give::Hide(4)),
        text_column("function (file:line)", LABEL_MIN),
    ]);
    let body: Vec<Vec<Text>> = rows
        .iter()
        .map(|f| {
            let mut row = number_cells(f);
            row.extend([
                Text::Number(split(measured, f.scheduled_ns)),
                Text::Number(split(measured, f.waiting_ns)),
                Text::Label(f.key(), String::new()),
            ]);
            row
        })
        .collect();
    // Without --scheduled, the split's columns are not there at all.
    let keep = |i: &usize| scheduled.is_some() || !(6..=7).contains(i);
    let columns: Vec<Column> = columns
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(i))
        .map(|(_, c)| c)
        .collect();
    let body: Vec<Vec<Text>> = body
        .into_iter()
        .map(|r| {
            r.into_iter()
                .enumerate()
                .filter(|(i, _)| keep(i))
                .map(|(_, t)| t)
                .collect()
        })
        .collect();
    print_fitted(out, &columns, &body, width)
}

/// How a trace is named in a `--by-trace` table: its file name, and its
/// host and pid where the recorder knew them.
pub fn trace_label(t: &mtanalyze_model::report::TraceSummary) -> String {
    let file = t.source.rsplit('/').next().unwrap_or(&t.source);
    match (t.host.as_str(), t.pid) {
        ("", 0) => file.to_owned(),
        ("", pid) => format!("{file} (pid {pid})"),
        (host, 0) => format!("{file} ({host})"),
        (host, pid) => format!("{file} ({host}, pid {pid})"),
    }
}

/// The function table of several traces (`--by-trace`): one row per
/// function and trace, the trace a column.
pub fn functions_by_trace(
    out: &mut dyn Write,
    rows: &[(String, &FunctionStats)],
    total: usize,
    width: Option<usize>,
) -> io::Result<()> {
    if rows.len() < total {
        writeln!(out, "showing {} of {} rows", rows.len(), total)?;
    }
    let mut columns = number_columns().to_vec();
    columns.extend([
        text_column("trace", 12),
        text_column("function (file:line)", LABEL_MIN),
    ]);
    let body: Vec<Vec<Text>> = rows
        .iter()
        .map(|(trace, f)| {
            let mut row = number_cells(f);
            row.extend([
                Text::Plain(trace.clone()),
                Text::Label(f.key(), String::new()),
            ]);
            row
        })
        .collect();
    print_fitted(out, &columns, &body, width)
}

/// The line over the per-stack tables that says how many logical stacks
/// ended (an `end` event counted) and how many did not: only for a trace
/// of format version 3 or more, which can say so, with logical stacks.
pub fn ends_line(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let (logical, ended) = report
        .stacks
        .iter()
        .filter(|s| matches!(s.id, StackKey::Logical(_)))
        .fold((0u64, 0u64), |(n, e), s| (n + 1, e + u64::from(s.ended)));
    ends_counts_line(out, report, logical, ended)
}

/// [`ends_line`] of `logical` logical stacks, `ended` of them ended
/// (counted as the rows were handed: see [`crate::view::StackView`]).
pub fn ends_counts_line(
    out: &mut dyn Write,
    report: &Report,
    logical: u64,
    ended: u64,
) -> io::Result<()> {
    if report.trace.format_version < 3 || logical == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "logical stacks: {ended} ended, {} still open at the end of the trace",
        logical - ended
    )
}

/// The per-stack table (`--stacks`). `total` is how many stacks the report
/// holds, so the reader learns when `--limit` hid some.
///
/// Written row by row: half a million tasks are half a million rows, which
/// as a table of strings took more memory than the analysis. One pass
/// measures the columns (each row formatted, then dropped), a second
/// writes the rows, cut as `fit::plan` decides: the same layout
/// as `print_fitted` (a test holds them equal).
pub fn stacks(
    out: &mut dyn Write,
    stacks: &[&StackStats],
    total: usize,
    width: Option<usize>,
    wakes: Wakes,
) -> io::Result<()> {
    if stacks.len() < total {
        writeln!(out, "showing {} of {} stacks", stacks.len(), total)?;
    }
    wakes.note(out, width)?;
    let measured = wakes.measured();
    let columns = stack_columns();
    let mut cells = vec![String::new(); columns.len()];
    let mut widest = vec![0usize; columns.len()];
    for s in stacks {
        stack_cells(s, measured, &mut cells);
        for (w, c) in widest.iter_mut().zip(&cells) {
            *w = (*w).max(width_of(c));
        }
    }
    let plan = plan(&columns, &widest, &[], width);
    hidden_note(out, &plan.hidden, width)?;
    let widths: Vec<usize> = plan
        .shown
        .iter()
        .zip(&plan.titles)
        .map(|(&i, t)| plan.targets[i].min(widest[i].max(width_of(t))))
        .collect();
    let mut line = String::new();
    let mut write_line = |out: &mut dyn Write, text: &[(usize, String)]| {
        line.clear();
        for ((i, t), &w) in text.iter().zip(&widths) {
            let fill = w.saturating_sub(width_of(t));
            if columns[*i].right {
                line.extend(std::iter::repeat_n(' ', fill));
                line.push_str(t);
            } else {
                line.push_str(t);
                line.extend(std::iter::repeat_n(' ', fill));
            }
            line.push_str("  ");
        }
        writeln!(out, "{}", line.trim_end())
    };
    let titles: Vec<(usize, String)> = plan
        .shown
        .iter()
        .copied()
        .zip(plan.titles.clone())
        .collect();
    write_line(out, &titles)?;
    let rule = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    writeln!(out, "{}", "-".repeat(rule))?;
    let mut row: Vec<(usize, String)> = Vec::with_capacity(plan.shown.len());
    for s in stacks {
        stack_cells(s, measured, &mut cells);
        row.clear();
        row.extend(plan.shown.iter().map(|&i| {
            let text = if plan.cuts(i) {
                elide_middle(&cells[i], plan.targets[i])
            } else {
                std::mem::take(&mut cells[i])
            };
            (i, text)
        }));
        write_line(out, &row)?;
    }
    Ok(())
}

fn stack_columns() -> [Column; 10] {
    [
        text_column("id", 12),
        text_column("name", 12),
        text_column("threads", 7),
        column("running", Give::Nothing),
        column("paused", Give::Nothing),
        column("scheduled", Give::Hide(5)),
        column("waiting", Give::Hide(4)),
        column("switches in", Give::Hide(3)),
        column("max depth", Give::Hide(1)),
        column("events", Give::Hide(2)),
    ]
}

/// A stack's row of the per-stack table, into `cells` (one per column);
/// `measured`: whether the trace measured wakes ([`Wakes::measured`]).
fn stack_cells(s: &StackStats, measured: bool, cells: &mut [String]) {
    use std::fmt::Write as _;
    for c in cells.iter_mut() {
        c.clear();
    }
    let _ = write!(cells[0], "{}", s.id);
    cells[1].push_str(&escape(&s.name));
    for (i, t) in s.threads.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(cells[2], "{sep}{t}");
    }
    cells[3].push_str(&duration(s.running_ns as f64));
    cells[4].push_str(&duration(s.paused_ns as f64));
    cells[5].push_str(&split(measured, s.scheduled_ns));
    cells[6].push_str(&split(measured, s.waiting_ns));
    let _ = write!(cells[7], "{}", s.switches_in);
    let _ = write!(cells[8], "{}", s.max_depth);
    let _ = write!(cells[9], "{}", s.events);
}

/// The grouped per-stack table (`--stacks --group`). `total` is how many
/// groups there are, so the reader learns when `--limit` hid some.
pub fn stack_groups(
    out: &mut dyn Write,
    groups: &[StackGroup],
    total: usize,
    width: Option<usize>,
    wakes: Wakes,
) -> io::Result<()> {
    if groups.len() < total {
        writeln!(out, "showing {} of {} groups", groups.len(), total)?;
    }
    wakes.note(out, width)?;
    let measured = wakes.measured();
    let columns = [
        column("stacks", Give::Nothing),
        column("threads", Give::Hide(2)),
        column("running", Give::Nothing),
        column("per stack", Give::Hide(5)).named("running per stack"),
        column("paused", Give::Nothing),
        column("per stack", Give::Hide(4)).named("paused per stack"),
        column("scheduled", Give::Hide(6)),
        column("switches in", Give::Hide(3)),
        column("max depth", Give::Hide(1)),
        column("events", Give::Hide(2)),
        text_column("name (numbers as #)", 12),
    ];
    let body: Vec<Vec<Text>> = groups
        .iter()
        .map(|g| {
            vec![
                Text::Number(g.stacks.to_string()),
                Text::Number(g.threads.len().to_string()),
                Text::Number(duration(g.running_ns as f64)),
                Text::Number(per(g.running_ns, g.stacks)),
                Text::Number(duration(g.paused_ns as f64)),
                Text::Number(per(g.paused_ns, g.stacks)),
                Text::Number(split(measured, g.scheduled_ns)),
                Text::Number(g.switches_in.to_string()),
                Text::Number(g.max_depth.to_string()),
                Text::Number(g.events.to_string()),
                Text::Plain(g.name.clone()),
            ]
        })
        .collect();
    print_fitted(out, &columns, &body, width)
}

/// The caller or callee tables (`--callers`, `--callees`), like pstats'
/// `print_callers` / `print_callees`: each selected function once, followed
/// by one row per edge with the edge's ncalls, tottime and cumtime.
pub fn edges(
    out: &mut dyn Write,
    groups: &[EdgeGroup<'_>],
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
        column("ncalls", Give::Nothing),
        column("tottime", Give::Nothing),
        column("cumtime", Give::Nothing),
    ];
    let body = edge_table_body(
        groups,
        dir,
        columns.len(),
        |f| Text::Label(f.key(), String::new()),
        |e, other| {
            vec![
                Text::Label(other, String::new()),
                Text::Number(calls(e.ncalls, e.primitive_calls)),
                Text::Number(duration(e.tottime_ns as f64)),
                Text::Number(duration(e.cumtime_ns as f64)),
            ]
        },
        || Text::Plain(String::new()),
        || Text::Plain("-".into()),
    );
    print_fitted(out, &columns, &body, width)
}

/// The body of a caller or callee table, a report's or a diff's: each
/// group's function once, in the first column of its first row, then a row
/// per edge with what `edge` makes of it and its other end (that end's
/// label first); a function with no edges is one row of `dash`. `blank`
/// fills the empty cells of the rows, `columns` cells wide.
pub(crate) fn edge_table_body<F, E: EdgeRow, C>(
    groups: &[EdgeGroup<'_, F, E>],
    dir: Direction,
    columns: usize,
    function: impl Fn(&F) -> C,
    edge: impl Fn(&E, FunctionKey) -> Vec<C>,
    blank: impl Fn() -> C,
    dash: impl Fn() -> C,
) -> Vec<Vec<C>> {
    let mut body = Vec::new();
    for g in groups {
        let mut first = Some(function(g.function));
        if g.edges.is_empty() {
            let mut row = vec![first.take().unwrap_or_else(&blank), dash()];
            row.resize_with(columns, &blank);
            body.push(row);
        }
        for e in &g.edges {
            let other = match dir {
                Direction::Callers => e.caller(),
                Direction::Callees => e.callee(),
            };
            let mut row = vec![first.take().unwrap_or_else(&blank)];
            row.extend(edge(e, other.key()));
            body.push(row);
        }
    }
    body
}

/// The function tables' number columns, as pstats prints them.
fn number_columns() -> [Column; 6] {
    [
        column("ncalls", Give::Nothing),
        column("tottime", Give::Nothing),
        column("percall", Give::Hide(2)).named("tottime percall"),
        column("cumtime", Give::Nothing),
        column("percall", Give::Hide(1)).named("cumtime percall"),
        column("paused", Give::Hide(3)),
    ]
}

/// A function's cells under [`number_columns`].
fn number_cells(f: &FunctionStats) -> Vec<Text> {
    vec![
        Text::Number(calls(f.ncalls, f.primitive_calls)),
        Text::Number(duration(f.tottime_ns as f64)),
        Text::Number(per(f.tottime_ns, f.ncalls)),
        Text::Number(duration(f.cumtime_ns as f64)),
        Text::Number(per(f.cumtime_ns, f.primitive_calls)),
        Text::Number(duration(f.paused_ns as f64)),
    ]
}

/// The narrowest a function label shrinks to (then columns are hidden).
pub(super) const LABEL_MIN: usize = 24;

/// A right-aligned number column.
pub(super) fn column(title: &str, give: Give) -> Column {
    Column {
        title: title.to_owned(),
        name: title.to_owned(),
        short: None,
        right: true,
        give,
    }
}

/// A left-aligned text column that shrinks down to `min` columns.
pub(super) fn text_column(title: &str, min: usize) -> Column {
    Column {
        title: title.to_owned(),
        name: title.to_owned(),
        short: None,
        right: false,
        give: Give::Shrink(min),
    }
}

/// The line naming the columns hidden to fit `width`, if any.
fn hidden_note(out: &mut dyn Write, hidden: &[String], width: Option<usize>) -> io::Result<()> {
    if hidden.is_empty() {
        return Ok(());
    }
    let mut items = vec![format!("hidden to fit {} columns:", width.unwrap_or(0))];
    for (i, name) in hidden.iter().enumerate() {
        items.push(if i + 1 < hidden.len() {
            format!("{name},")
        } else {
            name.clone()
        });
    }
    items.push("(--width 0 shows all)".to_owned());
    for line in wrap_with(&items, width, " ") {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Fits the rows into `width` (see `render/fit.rs`) and prints them, saying
/// which columns were hidden to fit.
pub(super) fn print_fitted(
    out: &mut dyn Write,
    columns: &[Column],
    rows: &[Vec<Text>],
    width: Option<usize>,
) -> io::Result<()> {
    let fitted = fit(columns, rows, width);
    hidden_note(out, &fitted.hidden, width)?;
    let titles: Vec<(&str, bool)> = fitted
        .columns
        .iter()
        .zip(&fitted.titles)
        .map(|(&i, t)| (t.as_str(), columns[i].right))
        .collect();
    let mut table = new_table(&titles);
    for (row, cells) in rows.iter().zip(fitted.rows) {
        let cells = fitted
            .columns
            .iter()
            .zip(cells)
            .map(|(&i, text)| {
                if row.get(i).is_some_and(Text::is_number) {
                    num(text)
                } else {
                    Cell::new(&text)
                }
            })
            .collect();
        table.add_row(Row::new(cells));
    }
    print(out, &table)
}

/// `total / n` as a duration, `-` when `n` is 0.
fn per(total: u64, n: u64) -> String {
    if n == 0 {
        "-".to_owned()
    } else {
        duration(total as f64 / n as f64)
    }
}

pub(super) fn num(text: String) -> Cell {
    Cell::new(&text).style_spec("r")
}

pub(super) fn new_table(columns: &[(&str, bool)]) -> Table {
    let mut table = Table::new();
    table.set_format(
        FormatBuilder::new()
            .padding(0, 2)
            .separator(LinePosition::Title, LineSeparator::new('-', ' ', ' ', ' '))
            .build(),
    );
    table.set_titles(Row::new(
        columns
            .iter()
            .map(|&(title, right)| {
                if right {
                    num(title.to_owned())
                } else {
                    Cell::new(title)
                }
            })
            .collect(),
    ));
    table
}

/// Prints the table without the trailing blanks of its last column, with
/// the rule under the titles as wide as the widest line.
pub(super) fn print(out: &mut dyn Write, table: &Table) -> io::Result<()> {
    let mut buf = Vec::new();
    table.print(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let is_rule = |l: &str| !l.is_empty() && l.chars().all(|c| c == '-');
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let width = lines
        .iter()
        .filter(|l| !is_rule(l))
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    for line in lines {
        if is_rule(line) {
            writeln!(out, "{}", "-".repeat(width))?;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtanalyze_model::report::{StackName, ThreadList};
    use proptest::prelude::*;

    fn row() -> impl Strategy<Value = StackStats> {
        (
            (any::<bool>(), 0u64..100_000),
            "[ -~µ]{0,30}",
            proptest::collection::vec(0u64..2000, 0..4),
            (0u64..u64::MAX / 2, 0u64..5_000_000_000, any::<u64>()),
            (any::<u32>(), any::<u64>()),
        )
            .prop_map(
                |(
                    (own, n),
                    name,
                    tids,
                    (running_ns, paused_ns, switches_in),
                    (max_depth, events),
                )| {
                    StackStats {
                        kind: Default::default(),
                        id: if own {
                            StackKey::Own(n)
                        } else {
                            StackKey::Logical(n)
                        },
                        name: StackName::from(name),
                        threads: tids.into_iter().collect::<ThreadList>(),
                        running_ns,
                        paused_ns,
                        scheduled_ns: paused_ns / 3,
                        waiting_ns: paused_ns - paused_ns / 3,
                        switches_in,
                        max_depth,
                        events,
                        ended: own,
                    }
                },
            )
    }

    fn text(write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A trace without wakes: the split is `-`, under a line saying it
    /// was not measured, never `0ns` as if it were a measurement.
    #[test]
    fn scheduled_without_wakes_is_not_measured() {
        let stack = StackStats {
            kind: Default::default(),
            id: StackKey::Logical(3),
            name: StackName::from("task-3".to_owned()),
            threads: [1u64].into_iter().collect::<ThreadList>(),
            running_ns: 1_000,
            paused_ns: 5_000,
            scheduled_ns: 0,
            waiting_ns: 5_000,
            switches_in: 2,
            max_depth: 1,
            events: 2,
            ended: true,
        };
        let unmeasured = text(|out| stacks(out, &[&stack], 1, None, Wakes(0)));
        assert!(
            unmeasured.starts_with("scheduled, waiting: not measured (the trace has no wakes"),
            "{unmeasured}"
        );
        let row: Vec<&str> = unmeasured
            .lines()
            .last()
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(row[4..7], ["5.00µs", "-", "-"], "{unmeasured}");
        let measured = text(|out| stacks(out, &[&stack], 1, None, Wakes(4)));
        assert!(!measured.contains("not measured"), "{measured}");
        assert!(
            measured.lines().last().unwrap().contains("0ns"),
            "{measured}"
        );
    }

    proptest! {
        /// The streamed per-stack table is the fitted table's layout, byte
        /// for byte, at any width (names with spaces at either end, `µ`,
        /// no rows, columns hidden and names cut).
        #[test]
        fn streamed_stacks_table_is_the_fitted_tables_layout(
            rows in proptest::collection::vec(row(), 0..12),
            width in prop_oneof![Just(None), (30usize..140).prop_map(Some)],
        ) {
            let refs: Vec<&StackStats> = rows.iter().collect();
            let streamed = text(|out| stacks(out, &refs, refs.len(), width, Wakes(1)));
            let body: Vec<Vec<Text>> = refs
                .iter()
                .map(|s| {
                    let mut cells = vec![String::new(); 10];
                    stack_cells(s, true, &mut cells);
                    cells
                        .into_iter()
                        .enumerate()
                        .map(|(i, c)| if i < 3 { Text::Plain(c) } else { Text::Number(c) })
                        .collect()
                })
                .collect();
            let table = text(|out| print_fitted(out, &stack_columns(), &body, width));
            prop_assert_eq!(streamed, table);
        }
    }
}
