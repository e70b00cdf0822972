//! The human form of `mtanalyze check`: what the file holds, section by
//! section, with every damaged or cut chunk listed by its byte offset.
//!
//! ```text
//! file:              app.mtrace (binary)
//! format:            version 1
//! finished:          yes
//! ...
//! chunks:            12 used, 4 empty, 16 slots (16 in the file), 65536 bytes each
//! damaged chunks:    1
//!   chunk 3 at byte 200768: bad snapshot record: no SNAP marker
//! ...
//! marks:              1
//!   1.50ms (1500000 ns)  thread 1  "warm-up done"
//! ```

use std::io::{self, Write};

use prettytable::format::FormatBuilder;
use prettytable::{Cell, Row, Table};

use super::duration;
use super::escape::escape;
use mtanalyze_model::check::{CheckReport, ChunkIssue};
use mtanalyze_model::marks::Mark;

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Writes the human description of a check result.
pub fn human(out: &mut dyn Write, c: &CheckReport) -> io::Result<()> {
    let mut line =
        |label: &str, value: String| writeln!(out, "{:<20}{}", format!("{label}:"), escape(&value));
    line("file", format!("{} ({})", c.source, c.input_format))?;
    line("format", format!("version {}", c.format_version))?;
    line(
        "finished",
        if c.finished {
            "yes".to_owned()
        } else {
            "no (the recorder was killed or is still running)".to_owned()
        },
    )?;
    line("ring", yes_no(c.ring).to_owned())?;
    if c.pid != 0 {
        line("pid", c.pid.to_string())?;
    }
    if !c.cmdline.is_empty() {
        line("command line", c.cmdline.join(" "))?;
    }
    line(
        "clock",
        format!(
            "{}: {} ticks in {} ns ({} ticks/s)",
            c.clock_source, c.calib_ticks, c.calib_ns, c.ticks_per_second
        ),
    )?;
    if c.start_unix_ns != 0 {
        line(
            "start",
            format!(
                "{} ({} ns since the Unix epoch)",
                utc(c.start_unix_ns),
                c.start_unix_ns
            ),
        )?;
    }
    line("duration", duration(c.duration_ns as f64))?;
    line(
        "chunks",
        format!(
            "{} used, {} empty, {} slots ({} in the file), {} bytes each",
            c.chunks_used, c.chunks_empty, c.chunk_slots, c.chunk_slots_in_file, c.chunk_size
        ),
    )?;
    line(
        "lost chunks",
        format!("{} (overwritten or missing)", c.chunks_lost),
    )?;
    issues(out, "damaged chunks", &c.chunks_damaged)?;
    issues(out, "cut chunks", &c.chunks_cut)?;
    let mut line =
        |label: &str, value: String| writeln!(out, "{:<20}{}", format!("{label}:"), escape(&value));
    line("unreleased chunks", c.chunks_unreleased.to_string())?;
    line("events", c.events.to_string())?;
    line("dropped events", c.dropped_events.to_string())?;
    line("dropped chunks", c.dropped_chunks.to_string())?;
    let meta = match &c.metadata_problem {
        Some(p) => format!(
            "{} records, {} dropped; damaged at {}",
            c.metadata_records, c.metadata_dropped, p
        ),
        None => format!(
            "{} records, {} dropped",
            c.metadata_records, c.metadata_dropped
        ),
    };
    line("metadata", meta)?;
    line("stacks", c.stacks.to_string())?;
    line("threads", c.threads.len().to_string())?;
    if !c.threads.is_empty() {
        let mut table = Table::new();
        table.set_format(FormatBuilder::new().padding(2, 0).build());
        table.set_titles(Row::new(vec![
            Cell::new("tid").style_spec("r"),
            Cell::new("name"),
            Cell::new("os tid").style_spec("r"),
            Cell::new("events").style_spec("r"),
        ]));
        for t in &c.threads {
            table.add_row(Row::new(vec![
                Cell::new(&t.tid.to_string()).style_spec("r"),
                Cell::new(&escape(&t.name)),
                Cell::new(&if t.os_tid == 0 {
                    "-".to_owned()
                } else {
                    t.os_tid.to_string()
                })
                .style_spec("r"),
                Cell::new(&t.events.to_string()).style_spec("r"),
            ]));
        }
        let mut buf = Vec::new();
        table.print(&mut buf)?;
        for l in String::from_utf8_lossy(&buf).lines() {
            writeln!(out, "{}", l.trim_end())?;
        }
    }
    marks(out, &c.marks)?;
    writeln!(out, "{:<20}{}", "warnings:", super::problems(&c.warnings))?;
    for w in &c.warnings {
        writeln!(out, "  {}: {}", escape(&w.brief()), escape(&w.repair))?;
    }
    Ok(())
}

/// `marks: N`, then one line a mark: its time from time zero (readable,
/// and in exact ns when that differs), its thread (`-`: unknown), its name
/// quoted (names may be empty, or hold spaces).
fn marks(out: &mut dyn Write, marks: &[Mark]) -> io::Result<()> {
    writeln!(out, "{:<20}{}", "marks:", marks.len())?;
    for m in marks {
        let readable = duration(m.time_ns as f64);
        let time = if readable == format!("{}ns", m.time_ns) {
            readable
        } else {
            format!("{readable} ({} ns)", m.time_ns)
        };
        let thread = match m.thread {
            0 => "-".to_owned(),
            t => t.to_string(),
        };
        writeln!(out, "  {time}  thread {thread}  {:?}", m.name)?;
    }
    Ok(())
}

fn issues(out: &mut dyn Write, label: &str, list: &[ChunkIssue]) -> io::Result<()> {
    writeln!(out, "{:<20}{}", format!("{label}:"), list.len())?;
    for i in list {
        writeln!(
            out,
            "  chunk {} at byte {}: {}",
            i.index, i.offset, i.problem
        )?;
    }
    Ok(())
}

/// `YYYY-MM-DD hh:mm:ss.fffffffff UTC` for a date in ns since the Unix epoch.
pub(crate) fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:09} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        unix_ns % 1_000_000_000
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day)
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00.000000000 UTC");
        assert_eq!(
            utc(951_782_400_000_000_001),
            "2000-02-29 00:00:00.000000001 UTC"
        );
        assert_eq!(
            utc(1_795_961_797_219_966_141),
            "2026-11-29 14:16:37.219966141 UTC"
        );
    }
}
