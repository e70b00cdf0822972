//! Saved reports as `diff` inputs: what `mtanalyze TRACE --format json >
//! a.json` writes is the report `diff` would compute from the trace, so
//! `diff a.json b.json` compares the two reports, without the traces.
//!
//! Told apart from a trace by content, not by name (a JSON-lines trace is
//! a `.json` file too): a saved report is one JSON object whose first key
//! is `trace` (`--format json`) or `merged` (`--format json --by-trace`,
//! whose merged report is the one compared); a JSON-lines trace's lines
//! start with an event's keys, a Chrome trace with `traceEvents` or `[`.
//!
//! A saved report holds each function's calls, sums, sum of squares and
//! per-frame histogram, which is all the significance test reads, so its
//! verdicts are those of a diff of the traces analyzed the same way. It
//! holds no call paths and was analyzed once, with its own clock and
//! window: a diff that needs another analysis of it is refused, with the
//! reason ([`fit`]); so is a report saved with some of its functions or
//! edges left out (`functions_total`, `edges_total`).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use mtanalyze::{AnalyzeOptions, PathMode, Report};
use serde::Deserialize;

use crate::output::{message, Failure};

/// How far into a file the first key is looked for: a report starts with
/// `{` and its first key, after at most some whitespace.
const SNIFF: usize = 256;

/// `--format json --by-trace`'s object: the merged report is compared.
#[derive(Deserialize)]
struct ByTrace {
    merged: Report,
}

/// What a JSON object's first key says the file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A saved report (`"trace"` first).
    Report,
    /// `--by-trace`'s saved reports (`"merged"` first).
    ByTrace,
}

/// The kind of saved report `head` (a file's first bytes) starts, if it
/// starts one.
fn kind(head: &[u8]) -> Option<Kind> {
    let rest = head
        .trim_ascii_start()
        .strip_prefix(b"{")?
        .trim_ascii_start();
    let key_is = |key: &[u8]| {
        rest.strip_prefix(key)
            .is_some_and(|after| after.trim_ascii_start().starts_with(b":"))
    };
    if key_is(b"\"trace\"") {
        Some(Kind::Report)
    } else if key_is(b"\"merged\"") {
        Some(Kind::ByTrace)
    } else {
        None
    }
}

/// The report saved in `path`, or `None` if `path` holds no saved report
/// (a trace, for the analyzer to read).
///
/// # Errors
///
/// `path` cannot be read, or starts as a saved report but is not one.
pub(crate) fn read(path: &Path) -> Result<Option<Report>, Failure> {
    let failed = |e: &dyn std::fmt::Display| message(format!("{}: {e}", path.display()));
    // A directory or a missing file: the trace reader says what is wrong.
    let Ok(file) = File::open(path) else {
        return Ok(None);
    };
    let mut head = Vec::with_capacity(SNIFF);
    (&file)
        .take(SNIFF as u64)
        .read_to_end(&mut head)
        .map_err(|e| failed(&e))?;
    let Some(kind) = kind(&head) else {
        return Ok(None);
    };
    // The whole file, from its start.
    let reader = BufReader::new(File::open(path).map_err(|e| failed(&e))?);
    let parsed = match kind {
        Kind::Report => serde_json::from_reader::<_, Report>(reader),
        Kind::ByTrace => serde_json::from_reader::<_, ByTrace>(reader).map(|b| b.merged),
    };
    parsed.map(Some).map_err(|e| {
        failed(&format!(
            "a saved report (JSON) that does not read back: {e}"
        ))
    })
}

/// Whether the saved report in `path` can stand for its trace under
/// `options` (the diff's analysis of a trace): refused, with the reason,
/// when the diff would need what the report does not hold.
///
/// # Errors
///
/// The reason, naming `path` and what to do instead.
pub(crate) fn fit(path: &Path, report: &Report, options: &AnalyzeOptions) -> Result<(), Failure> {
    let refuse = |why: String| Err(message(format!("{}: a saved report {why}", path.display())));
    if options.paths != PathMode::Off && report.paths.is_empty() {
        return refuse(
            "holds no call paths, which --format folded and html and --flamegraph draw: \
             diff the traces for those"
                .into(),
        );
    }
    if let Some(clock) = options.clock {
        if clock != report.clock {
            return refuse(format!(
                "was analyzed with --clock {}, not {clock}: save it again with --clock {clock}",
                report.clock
            ));
        }
    }
    if let Some(total) = report.functions_total {
        return refuse(format!(
            "lists {} of its {total} functions (it was saved with --filter or --limit): \
             a function it leaves out would read as gone; save it again without them",
            report.functions.len()
        ));
    }
    if let Some(total) = report.edges_total {
        return refuse(format!(
            "lists {} of its {total} caller-callee edges (it was saved with --callers or \
             --callees): save it again without them",
            report.edges.len()
        ));
    }
    if options.from.is_some() || options.to.is_some() {
        return refuse(
            "was analyzed over its whole time (or the window it was saved with): \
             --from and --to apply to traces; save it again with them"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_told_by_its_first_key() {
        assert_eq!(kind(b"{\n  \"trace\": {"), Some(Kind::Report));
        assert_eq!(kind(b" {\"trace\" :{"), Some(Kind::Report));
        assert_eq!(kind(b"{\"merged\": {\"trace\""), Some(Kind::ByTrace));
        // JSON-lines events, Chrome traces, a binary trace, nothing.
        assert_eq!(kind(b"{\"ts\": 1, \"tid\": 1, \"ev\": \"enter\""), None);
        assert_eq!(kind(b"{\"traceEvents\": ["), None);
        assert_eq!(kind(b"[{\"ph\": \"B\""), None);
        assert_eq!(kind(b"{\"tracer\": 1}"), None);
        assert_eq!(kind(b"MTRACE\0\x03"), None);
        assert_eq!(kind(b""), None);
    }
}
