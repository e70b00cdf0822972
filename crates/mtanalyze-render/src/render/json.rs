//! `--format json`: one JSON object per run, the `serde_json` form of a
//! report (a [`ReportView`]: the whole [`mtanalyze_model::report::Report`] or what
//! [`crate::view::filtered_report`] keeps of it) or of a [`CheckReport`].
//! Times are integer nanoseconds. The shapes are documented by
//! `schemas/report.schema.json` and `schemas/check.schema.json`.
//!
//! A report is written byte for byte as `serde_json::to_writer_pretty`
//! writes it, but not in one call: its stack rows (one per task, half a
//! million in a task-per-request trace, where they were most of the
//! analyzer's time) are formatted in parallel, a batch at a time, and
//! written in order. Every other field goes through `serde_json` as is,
//! indented by `Indented`.

use std::borrow::Borrow;
use std::io::{self, Write};

use mtrace_format::StackKind;
use rayon::prelude::*;
use serde::Serialize;

use crate::view::ReportView;
use mtanalyze_model::check::CheckReport;
use mtanalyze_model::report::{StackKey, StackStats};

/// Writes the report as one pretty-printed JSON object and a newline
/// (`ReportView::from(&report)` for a whole report).
pub fn report(out: &mut dyn Write, report: &ReportView<'_>) -> io::Result<()> {
    report_with_rows(out, report, report.stacks.iter().map(Ok))
}

/// [`report`], the stack rows taken from `rows`, in the report's order
/// (by id), instead of from `report.stacks`: the rows of
/// [`mtanalyze_engine::analyze_with_sink`] given back by a
/// [`crate::view::SortedRows`], which a report of half a million stacks
/// need not hold. The output is the same byte for byte.
pub fn report_with_rows<R: Borrow<StackStats> + Send + Sync>(
    out: &mut dyn Write,
    report: &ReportView<'_>,
    rows: impl Iterator<Item = io::Result<R>> + Send,
) -> io::Result<()> {
    let mut buffered = io::BufWriter::with_capacity(1 << 16, out);
    write_report(&mut buffered, report, rows)?;
    writeln!(buffered)?;
    buffered.flush()
}

/// Writes a check result as one pretty-printed JSON object and a newline.
pub fn check(out: &mut dyn Write, check: &CheckReport) -> io::Result<()> {
    let mut buffered = io::BufWriter::with_capacity(1 << 16, out);
    pretty(&mut buffered, check)?;
    writeln!(buffered)?;
    buffered.flush()
}

/// `value` pretty-printed, as a top-level value.
fn pretty<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    // serde_json writes a few bytes at a time: `out` is a buffer of a
    // known type, so each write is a copy, not a call through `dyn Write`.
    serde_json::to_writer_pretty(out, value).map_err(io::Error::from)
}

/// The report's fields in [`ReportView`]'s order (its derived `Serialize`
/// is the reference: a test checks the two agree byte for byte).
fn write_report<R: Borrow<StackStats> + Send + Sync>(
    out: &mut impl Write,
    report: &ReportView<'_>,
    rows: impl Iterator<Item = io::Result<R>> + Send,
) -> io::Result<()> {
    out.write_all(b"{")?;
    field(out, "trace", report.trace, true)?;
    field(out, "clock", &report.clock, false)?;
    field(out, "functions", &report.functions, false)?;
    if let Some(total) = report.functions_total {
        field(out, "functions_total", &total, false)?;
    }
    field(out, "edges", &report.edges, false)?;
    if let Some(total) = report.edges_total {
        field(out, "edges_total", &total, false)?;
    }
    out.write_all(b",\n  \"stacks\": ")?;
    stacks(out, rows, ROWS_PER_JOB, ROWS_PER_BATCH)?;
    field(out, "warnings", report.warnings, false)?;
    field(out, "marks", report.marks, false)?;
    if !report.paths.is_empty() {
        field(out, "paths", &report.paths, false)?;
    }
    out.write_all(b"\n}")
}

/// One field of the top-level object: `"name": value`, the value indented
/// one level.
fn field<T: Serialize + ?Sized>(
    out: &mut impl Write,
    name: &str,
    value: &T,
    first: bool,
) -> io::Result<()> {
    let sep: &[u8] = if first { b"\n  " } else { b",\n  " };
    out.write_all(sep)?;
    serde_json::to_writer(&mut *out, name).map_err(io::Error::from)?;
    out.write_all(b": ")?;
    pretty(&mut Indented::new(out, b"  "), value)
}

/// Stack rows formatted per parallel job: enough that a job outweighs
/// handing it over, few enough that the jobs spread over the workers.
const ROWS_PER_JOB: usize = 2048;
/// Rows formatted before any is written: what the formatted text in
/// memory is bounded by (some 320 bytes a row: 2.6 MB), beside this batch's
/// rows and the next's (1 MB each). Twice as many held 12.6 MB at the
/// peak of a 500,000-task report, 9.5% of its file.
const ROWS_PER_BATCH: usize = 4 * ROWS_PER_JOB;

/// The stacks array, as a field of the top-level object (rows indented
/// two levels), `per_job` rows formatted per parallel job and `per_batch`
/// before any is written. The next batch is taken from `rows` while this
/// one is formatted: rows read back from disk and merged
/// ([`crate::view::SortedRows`]) come one at a time, on one thread.
fn stacks<R: Borrow<StackStats> + Send + Sync>(
    out: &mut impl Write,
    mut rows: impl Iterator<Item = io::Result<R>> + Send,
    per_job: usize,
    per_batch: usize,
) -> io::Result<()> {
    let per_job = per_job.max(1);
    let per_batch = per_batch.max(1);
    let take = |rows: &mut dyn Iterator<Item = io::Result<R>>| {
        rows.take(per_batch).collect::<io::Result<Vec<R>>>()
    };
    // One buffer per job of a batch, reused by the next batch: fresh ones
    // would be fresh pages, faulted in for every few thousand rows.
    let mut texts: Vec<Vec<u8>> = Vec::new();
    let mut batch = take(&mut rows)?;
    if batch.is_empty() {
        return out.write_all(b"[]");
    }
    out.write_all(b"[")?;
    let mut first = true;
    while !batch.is_empty() {
        let jobs = batch.len().div_ceil(per_job);
        if texts.len() < jobs {
            texts.resize_with(jobs, || Vec::with_capacity(per_job * 320));
        }
        let format_job = |(j, (text, job)): (usize, (&mut Vec<u8>, &[R]))| {
            text.clear();
            for (i, row) in job.iter().enumerate() {
                let first = first && j == 0 && i == 0;
                text.extend_from_slice(if first { b"\n    " } else { b",\n    " });
                stack_row(text, row.borrow())?;
            }
            io::Result::Ok(())
        };
        let format = || {
            if mtanalyze_engine::threads::parallel() {
                texts[..jobs]
                    .par_iter_mut()
                    .zip(batch.par_chunks(per_job))
                    .enumerate()
                    .try_for_each(format_job)
            } else {
                texts[..jobs]
                    .iter_mut()
                    .zip(batch.chunks(per_job))
                    .enumerate()
                    .try_for_each(format_job)
            }
        };
        let (formatted, next) = mtanalyze_engine::threads::join(format, || take(&mut rows));
        formatted?;
        for text in &texts[..jobs] {
            out.write_all(text)?;
        }
        batch = next?;
        first = false;
    }
    out.write_all(b"\n  ]")
}

/// One stack row, two levels in, as `serde_json`'s pretty printer writes
/// a [`StackStats`] there (the derived `Serialize` is the reference: the
/// tests compare the two). By hand because it is the one row a report
/// can have half a million of, and serde's pretty printer spent most of
/// the run on them, a few bytes per call.
fn stack_row(text: &mut Vec<u8>, row: &StackStats) -> io::Result<()> {
    // Fixed text is copied in as few pieces as the row allows: the comma
    // ending one field, the indent and the next key are one constant
    // (`field!`). Each copy is a capacity check and a call to memcpy; at
    // three copies a number they were a fifth of a row's instructions.
    macro_rules! field {
        ($key:literal) => {
            concat!(",\n      \"", $key, "\": ").as_bytes()
        };
    }
    let mut numbers = itoa::Buffer::new();
    // A key is `thread:<n>` or `stack:<n>`: nothing in it to escape.
    let (start, n): (&[u8], u64) = match row.id {
        StackKey::Own(t) => (b"{\n      \"id\": \"thread:", t),
        StackKey::Logical(s) => (b"{\n      \"id\": \"stack:", s),
    };
    text.extend_from_slice(start);
    text.extend_from_slice(numbers.format(n).as_bytes());
    text.extend_from_slice(b"\",\n      \"name\": ");
    serde_json::to_writer(&mut *text, row.name.as_str()).map_err(io::Error::from)?;
    if row.kind != StackKind::Unspecified {
        // Only when said (`skip_serializing_if`); names need no escaping.
        text.extend_from_slice(field!("kind"));
        text.push(b'"');
        text.extend_from_slice(row.kind.name().as_bytes());
        text.push(b'"');
    }
    text.extend_from_slice(field!("threads"));
    if row.threads.is_empty() {
        text.extend_from_slice(b"[]");
    } else {
        for (i, tid) in row.threads.iter().enumerate() {
            text.extend_from_slice(if i == 0 {
                b"[\n        "
            } else {
                b",\n        "
            });
            text.extend_from_slice(numbers.format(*tid).as_bytes());
        }
        text.extend_from_slice(b"\n      ]");
    }
    for (key, n) in [
        (field!("running_ns"), row.running_ns),
        (field!("paused_ns"), row.paused_ns),
        (field!("scheduled_ns"), row.scheduled_ns),
        (field!("waiting_ns"), row.waiting_ns),
        (field!("switches_in"), row.switches_in),
        (field!("max_depth"), row.max_depth.into()),
        (field!("events"), row.events),
    ] {
        text.extend_from_slice(key);
        text.extend_from_slice(numbers.format(n).as_bytes());
    }
    if row.ended {
        // Only when true (`skip_serializing_if`).
        text.extend_from_slice(field!("ended"));
        text.extend_from_slice(b"true");
    }
    text.extend_from_slice(b"\n    }");
    Ok(())
}

/// A writer that indents what is written to it by `prefix`: after every
/// newline. serde_json's pretty printer starts at the left margin; in
/// its output every newline is layout (newlines inside strings are
/// escaped), so this nests a value as if it were printed in place.
struct Indented<'w, W: Write> {
    out: &'w mut W,
    prefix: &'static [u8],
}

impl<'w, W: Write> Indented<'w, W> {
    fn new(out: &'w mut W, prefix: &'static [u8]) -> Self {
        Indented { out, prefix }
    }
}

impl<W: Write> Write for Indented<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while let Some(at) = buf.iter().position(|&b| b == b'\n') {
            self.out.write_all(&buf[..=at])?;
            self.out.write_all(self.prefix)?;
            buf = &buf[at + 1..];
        }
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtanalyze_engine::{AnalyzeOptions, PathMode};
    use mtanalyze_model::report::{Report, StackName};

    fn analyzed(paths: PathMode) -> Report {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../sample-traces/workload.bin"
        );
        let trace = mtanalyze_engine::load(std::path::Path::new(path)).expect("sample trace");
        let opts = AnalyzeOptions {
            paths,
            ..AnalyzeOptions::default()
        };
        mtanalyze_engine::analyze(&trace, &opts).expect("analysis")
    }

    /// What `serde_json` writes for the view: the reference.
    fn reference(view: &ReportView<'_>) -> String {
        let mut text = serde_json::to_string_pretty(view).expect("serializes");
        text.push('\n');
        text
    }

    fn written(view: &ReportView<'_>) -> String {
        let mut out = Vec::new();
        report(&mut out, view).expect("writes");
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn reports_are_written_as_serde_json_writes_them() {
        for paths in [PathMode::Off, PathMode::Merged] {
            let report = analyzed(paths);
            assert_eq!(report.paths.is_empty(), paths == PathMode::Off);
            let view = ReportView::from(&report);
            assert_eq!(written(&view), reference(&view));
        }
    }

    #[test]
    fn many_stack_rows_in_batches_keep_their_order_and_layout() {
        let mut report = analyzed(PathMode::Off);
        let template = report.stacks[0].clone();
        // Names that need escaping, non-ASCII, long (boxed) and empty; ids
        // of both kinds; several thread counts.
        let names = ["", "req \"7\"\n\tx", "tâche-ü", &"long name ".repeat(9)];
        report.stacks = (0..1000u64)
            .map(|i| {
                let mut row = template.clone();
                row.id = if i % 3 == 0 {
                    StackKey::Own(i)
                } else {
                    StackKey::Logical(i)
                };
                row.name = StackName::new(names[i as usize % names.len()]);
                row.threads = (1..=i % 4).collect();
                row.running_ns = i * 1_000_003;
                row.events = i;
                // Written only when true.
                row.ended = i % 5 == 1;
                // Written only when said.
                row.kind = StackKind::ALL[i as usize % StackKind::ALL.len()];
                row
            })
            .collect();
        let view = ReportView::from(&report);
        let want = reference(&view);
        assert_eq!(written(&view), want);
        // Batches and jobs that do not divide the rows, and single rows.
        for (per_job, per_batch) in [(1, 1), (3, 7), (7, 3), (64, 1000), (5000, 5000)] {
            let mut out = Vec::new();
            stacks(&mut out, report.stacks.iter().map(Ok), per_job, per_batch).expect("writes");
            let text = String::from_utf8(out).expect("UTF-8");
            assert!(
                want.contains(&format!("\"stacks\": {text},")),
                "{per_job}/{per_batch}"
            );
        }
        // No rows.
        report.stacks.clear();
        let view = ReportView::from(&report);
        assert_eq!(written(&view), reference(&view));
    }
}
