//! `--format json`: one JSON object per run, the `serde_json` form of a
//! report (a [`ReportView`]: the whole [`crate::Report`] or what
//! [`crate::view::filtered_report`] keeps of it) or of a [`CheckReport`]. Times are integer nanoseconds. The shapes are documented
//! by `schemas/report.schema.json` and `schemas/check.schema.json`.

use std::io::{self, Write};

use serde::Serialize;

use crate::model::check::CheckReport;
use crate::view::ReportView;

/// Writes the report as one pretty-printed JSON object and a newline
/// (`ReportView::from(&report)` for a whole report).
pub fn report(out: &mut dyn Write, report: &ReportView<'_>) -> io::Result<()> {
    write(out, report)
}

/// Writes a check result as one pretty-printed JSON object and a newline.
pub fn check(out: &mut dyn Write, check: &CheckReport) -> io::Result<()> {
    write(out, check)
}

fn write<T: Serialize>(out: &mut dyn Write, value: &T) -> io::Result<()> {
    // serde_json writes a few bytes at a time: into a buffer of a known
    // type each write is a copy, not a call through `dyn Write` (a report
    // of 500,000 stacks makes tens of millions of them).
    let mut buffered = io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut buffered, value).map_err(io::Error::from)?;
    writeln!(buffered)?;
    buffered.flush()
}
