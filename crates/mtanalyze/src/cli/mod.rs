//! The `mtanalyze` command line, used only by the binary: argument shapes
//! (`args.rs`), one module per command, where outputs go and how failures
//! read (`output.rs`), and the progress indicator (`progress.rs`). It
//! reaches the library through its public API alone.

pub(crate) mod args;
pub(crate) mod diff;
pub(crate) mod export;
pub(crate) mod file;
pub(crate) mod output;
pub(crate) mod progress;
pub(crate) mod report;

use std::path::Path;

use mtanalyze::{AnalyzeOptions, LoadedTrace, Report};

use output::{message, say, Failure};
use progress::Progress;

/// Loads a trace; a failure is one line.
pub(crate) fn load(path: &Path) -> Result<LoadedTrace, Failure> {
    mtanalyze::load(path).map_err(message)
}

/// Loads and analyzes one trace with a spinner for long runs.
pub(crate) fn analyze(path: &Path, options: &AnalyzeOptions) -> Result<Report, Failure> {
    let progress = Progress::spinner(format!("analyzing {}", path.display()));
    let report = mtanalyze::analyze(&load(path)?, options).map_err(message);
    progress.finish();
    report
}

/// The one-line summary of a report's warnings, on stderr (after the
/// output, which the caller has flushed), prefixed with `prefix` if any.
pub(crate) fn say_warnings(report: &Report, prefix: Option<&str>) {
    let lines = [
        mtanalyze::render::warnings_summary(&report.warnings),
        mtanalyze::render::lost_summary(&report.trace),
    ];
    for line in lines.into_iter().flatten() {
        match prefix {
            Some(p) => say(&format!("{p}: {line}")),
            None => say(&line),
        }
    }
}
