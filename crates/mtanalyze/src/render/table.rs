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

use super::{calls, duration};
use crate::model::report::{FunctionKey, FunctionStats, Report, StackStats};
use crate::view::{Direction, EdgeGroup, StackGroup};

/// `name (file:line)`, or the bare name when the site is unknown.
pub(crate) fn function_label(key: &FunctionKey) -> String {
    if key.file.is_empty() {
        key.function.clone()
    } else {
        format!("{} ({}:{})", key.function, key.file, key.line)
    }
}

/// The lines above every table: what the trace is and how it was analyzed.
pub fn header(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let t = &report.trace;
    // Counts the header claims (dropped events) can be anything: saturate.
    let warnings = report
        .warnings
        .iter()
        .fold(0u64, |n, w| n.saturating_add(w.count));
    writeln!(
        out,
        "trace: {} ({}, format {})",
        t.source, t.input_format, t.format_version
    )?;
    // With --thread/--stack, say how many of the stacks were replayed.
    let stacks = if report.stacks.len() as u64 == t.stacks {
        t.stacks.to_string()
    } else {
        format!("{} of {}", report.stacks.len(), t.stacks)
    };
    writeln!(
        out,
        "duration: {}  threads: {}  stacks: {}  events: {}  clock: {}  warnings: {}",
        duration(t.duration_ns as f64),
        t.threads.len(),
        stacks,
        t.events,
        report.clock,
        warnings
    )?;
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
        writeln!(out, "{}", damage.join("  "))?;
    }
    Ok(())
}

/// The function table. `total` is how many functions the report holds, so
/// the reader learns when `--filter` or `--limit` hid some.
pub fn functions(out: &mut dyn Write, rows: &[&FunctionStats], total: usize) -> io::Result<()> {
    if rows.len() < total {
        writeln!(out, "showing {} of {} functions", rows.len(), total)?;
    }
    let mut table = new_table(&[
        ("ncalls", true),
        ("tottime", true),
        ("percall", true),
        ("cumtime", true),
        ("percall", true),
        ("paused", true),
        ("function (file:line)", false),
    ]);
    for f in rows {
        table.add_row(Row::new(vec![
            num(calls(f.ncalls, f.primitive_calls)),
            num(duration(f.tottime_ns as f64)),
            num(per(f.tottime_ns, f.ncalls)),
            num(duration(f.cumtime_ns as f64)),
            num(per(f.cumtime_ns, f.primitive_calls)),
            num(duration(f.paused_ns as f64)),
            Cell::new(&function_label(&f.key())),
        ]));
    }
    print(out, &table)
}

/// The per-stack table (`--stacks`). `total` is how many stacks the report
/// holds, so the reader learns when `--limit` hid some.
///
/// Half a million task rows are written as they are formatted, never held
/// as a table (which took a gigabyte and seconds): one pass finds the
/// column widths, a second writes the lines. Laid out as [`print`] lays
/// out a table, byte for byte; names with characters whose width is not
/// one column (or control characters) take the table's own layout.
pub fn stacks(out: &mut dyn Write, stacks: &[&StackStats], total: usize) -> io::Result<()> {
    if stacks.len() < total {
        writeln!(out, "showing {} of {} stacks", stacks.len(), total)?;
    }
    if stacks.iter().all(|s| one_column_chars(&s.name)) {
        stream_table(out, &STACK_COLUMNS, stacks, |s, cells| {
            stack_cells(s, cells)
        })
    } else {
        print(out, &stack_table(stacks))
    }
}

/// The columns of the per-stack table: title, right-aligned.
const STACK_COLUMNS: [(&str, bool); 8] = [
    ("id", false),
    ("name", false),
    ("threads", false),
    ("running", true),
    ("paused", true),
    ("switches in", true),
    ("max depth", true),
    ("events", true),
];

/// A stack's row of the per-stack table, into `cells` (one per column).
fn stack_cells(s: &StackStats, cells: &mut [String]) {
    use std::fmt::Write as _;
    for c in cells.iter_mut() {
        c.clear();
    }
    let _ = write!(cells[0], "{}", s.id);
    cells[1].push_str(&s.name);
    for (i, t) in s.threads.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(cells[2], "{sep}{t}");
    }
    cells[3].push_str(&duration(s.running_ns as f64));
    cells[4].push_str(&duration(s.paused_ns as f64));
    let _ = write!(cells[5], "{}", s.switches_in);
    let _ = write!(cells[6], "{}", s.max_depth);
    let _ = write!(cells[7], "{}", s.events);
}

/// The per-stack table as a table (the layout [`stream_table`] follows).
fn stack_table(stacks: &[&StackStats]) -> Table {
    let mut table = new_table(&STACK_COLUMNS);
    let mut cells = vec![String::new(); STACK_COLUMNS.len()];
    for s in stacks {
        stack_cells(s, &mut cells);
        table.add_row(Row::new(
            cells
                .iter()
                .zip(STACK_COLUMNS)
                .map(
                    |(c, (_, right))| {
                        if right {
                            num(c.clone())
                        } else {
                            Cell::new(c)
                        }
                    },
                )
                .collect(),
        ));
    }
    table
}

/// Text every character of which takes one column, as the table counts
/// them: printable ASCII and the `µ` of durations.
fn one_column_chars(text: &str) -> bool {
    text.chars()
        .all(|c| c == 'µ' || (c.is_ascii() && !c.is_ascii_control()))
}

/// Writes `rows` as [`print`] writes their table (`columns`: title and
/// right-aligned), formatting each row with `cells` twice (for the widths,
/// then for the line) instead of holding the table. Every cell must be
/// [`one_column_chars`], and the last column right-aligned and never
/// empty (so every line runs to the full width, and so does the rule).
fn stream_table<R>(
    out: &mut dyn Write,
    columns: &[(&str, bool)],
    rows: &[R],
    cells: impl Fn(&R, &mut [String]),
) -> io::Result<()> {
    let chars = |s: &str| s.chars().count();
    let mut text = vec![String::new(); columns.len()];
    let mut widths: Vec<usize> = columns.iter().map(|(t, _)| chars(t)).collect();
    for r in rows {
        cells(r, &mut text);
        for (w, t) in widths.iter_mut().zip(&text) {
            *w = (*w).max(chars(t));
        }
    }
    let rule = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    let mut line = String::new();
    let mut write_line = |out: &mut dyn Write, text: &[String]| {
        line.clear();
        for ((t, &w), &(_, right)) in text.iter().zip(&widths).zip(columns) {
            let fill = w.saturating_sub(chars(t));
            if right {
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
    let titles: Vec<String> = columns.iter().map(|(t, _)| (*t).to_owned()).collect();
    write_line(out, &titles)?;
    writeln!(out, "{}", "-".repeat(rule))?;
    for r in rows {
        cells(r, &mut text);
        write_line(out, &text)?;
    }
    Ok(())
}

/// The grouped per-stack table (`--stacks --group`). `total` is how many
/// groups there are, so the reader learns when `--limit` hid some.
pub fn stack_groups(out: &mut dyn Write, groups: &[StackGroup], total: usize) -> io::Result<()> {
    if groups.len() < total {
        writeln!(out, "showing {} of {} groups", groups.len(), total)?;
    }
    let mut table = new_table(&[
        ("stacks", true),
        ("threads", true),
        ("running", true),
        ("per stack", true),
        ("paused", true),
        ("per stack", true),
        ("switches in", true),
        ("max depth", true),
        ("events", true),
        ("name (numbers as #)", false),
    ]);
    for g in groups {
        table.add_row(Row::new(vec![
            num(g.stacks.to_string()),
            num(g.threads.len().to_string()),
            num(duration(g.running_ns as f64)),
            num(per(g.running_ns, g.stacks)),
            num(duration(g.paused_ns as f64)),
            num(per(g.paused_ns, g.stacks)),
            num(g.switches_in.to_string()),
            num(g.max_depth.to_string()),
            num(g.events.to_string()),
            Cell::new(&g.name),
        ]));
    }
    print(out, &table)
}

/// The caller or callee tables (`--callers`, `--callees`), like pstats'
/// `print_callers` / `print_callees`: each selected function once, followed
/// by one row per edge with the edge's ncalls, tottime and cumtime.
pub fn edges(out: &mut dyn Write, groups: &[EdgeGroup<'_>], dir: Direction) -> io::Result<()> {
    let other = match dir {
        Direction::Callers => "was called by",
        Direction::Callees => "called",
    };
    let mut table = new_table(&[
        ("function (file:line)", false),
        (other, false),
        ("ncalls", true),
        ("tottime", true),
        ("cumtime", true),
    ]);
    for g in groups {
        let mut first = function_label(&g.function.key());
        if g.edges.is_empty() {
            table.add_row(Row::new(vec![
                Cell::new(&first),
                Cell::new("-"),
                Cell::new(""),
                Cell::new(""),
                Cell::new(""),
            ]));
        }
        for e in &g.edges {
            let key = match dir {
                Direction::Callers => e.caller_key(),
                Direction::Callees => e.callee_key(),
            };
            table.add_row(Row::new(vec![
                Cell::new(&std::mem::take(&mut first)),
                Cell::new(&function_label(&key)),
                num(calls(e.ncalls, e.primitive_calls)),
                num(duration(e.tottime_ns as f64)),
                num(duration(e.cumtime_ns as f64)),
            ]));
        }
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
    use crate::model::report::{StackKey, StackName, ThreadList};
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
                        id: if own {
                            StackKey::Own(n)
                        } else {
                            StackKey::Logical(n)
                        },
                        name: StackName::from(name),
                        threads: tids.into_iter().collect::<ThreadList>(),
                        running_ns,
                        paused_ns,
                        switches_in,
                        max_depth,
                        events,
                    }
                },
            )
    }

    fn text(write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    proptest! {
        /// The streamed per-stack table is the table's own layout, byte
        /// for byte (names with spaces at either end, `µ`, no rows).
        #[test]
        fn streamed_stacks_table_is_the_tables_layout(rows in proptest::collection::vec(row(), 0..12)) {
            let refs: Vec<&StackStats> = rows.iter().collect();
            let streamed = text(|out| stream_table(out, &STACK_COLUMNS, &refs, |s, c| stack_cells(s, c)));
            let table = text(|out| print(out, &stack_table(&refs)));
            prop_assert_eq!(streamed, table);
        }
    }

    #[test]
    fn names_wider_than_their_characters_take_the_tables_layout() {
        let wide = StackStats {
            id: StackKey::Logical(1),
            name: StackName::from("任务-1"),
            threads: [1].into_iter().collect(),
            running_ns: 5,
            paused_ns: 0,
            switches_in: 1,
            max_depth: 1,
            events: 2,
        };
        assert!(!one_column_chars(&wide.name));
        let got = text(|out| stacks(out, &[&wide], 1));
        let table = text(|out| print(out, &stack_table(&[&wide])));
        assert_eq!(got, table);
    }
}
