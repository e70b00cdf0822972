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

use std::path::{Path, PathBuf};

use mtanalyze::{AnalyzeOptions, Clock, CompactReport, LoadedTrace, Report, Sums, TraceError};

use output::{message, say, Failure};
use progress::Progress;

/// Loads a trace; a failure is one line.
pub(crate) fn load(path: &Path) -> Result<LoadedTrace, Failure> {
    mtanalyze::load(path).map_err(message)
}

/// Loads and analyzes one trace with a spinner for long runs.
pub(crate) fn analyze(path: &Path, options: &AnalyzeOptions) -> Result<Report, Failure> {
    analyzing(path, |trace| mtanalyze::analyze(trace, options))
}

/// [`analyze`], each stack's row handed to `sink` (see
/// [`mtanalyze::analyze_each_stack`]).
pub(crate) fn analyze_stacks(
    path: &Path,
    options: &AnalyzeOptions,
    sink: &mut dyn mtanalyze::StackSink,
) -> Result<Report, Failure> {
    analyzing(path, |trace| {
        mtanalyze::analyze_each_stack(trace, options, sink)
    })
}

/// Loads the trace at `path` and runs `job` on it, with a spinner.
fn analyzing(
    path: &Path,
    job: impl FnOnce(&LoadedTrace) -> Result<Report, mtanalyze::AnalyzeError>,
) -> Result<Report, Failure> {
    let progress = Progress::spinner(format!("analyzing {}", path.display()));
    let report = job(&load(path)?).map_err(message);
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

/// The traces the arguments name: files as given, directories as the
/// trace files directly inside them (`.bin`, `.mtrace`, `.jsonl`, `.json`),
/// sorted by name.
pub(crate) fn expand_traces(args: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for a in args {
        if !a.is_dir() {
            out.push(a.clone());
            continue;
        }
        let entries = std::fs::read_dir(a).map_err(|e| message(format!("{}: {e}", a.display())))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension()
                        .and_then(|x| x.to_str())
                        .is_some_and(|x| ["bin", "mtrace", "jsonl", "json"].contains(&x))
            })
            .collect();
        if files.is_empty() {
            return Err(message(format!(
                "{}: no trace files in this directory",
                a.display()
            )));
        }
        files.sort();
        out.extend(files);
    }
    Ok(out)
}

/// Analyzes `traces` in parallel (`mtanalyze::analyze_each_compact`),
/// handing each report to `each` in order, its edges still numbered
/// (`into_report` makes them rows; `Merged::add_compact` sums them as
/// they are). A trace that fails to load or analyze is
/// named on stderr and left out; the run fails if all do, or if the traces
/// prefer different clocks (a sum over different clocks means nothing).
pub(crate) fn each_report(
    traces: &[PathBuf],
    options: &AnalyzeOptions,
    each: impl FnMut(&Path, CompactReport) -> Result<(), Failure>,
) -> Result<(), Failure> {
    each_report_with(traces, options, each, |t, o, f| {
        mtanalyze::analyze_each_compact(t, o, f)
    })
}

/// [`each_report`] for a caller that sums the reports into a `Merged`:
/// the workers sum the functions, edges and call paths
/// (`mtanalyze::analyze_each_summed`), so each report brings only what
/// is listed trace after trace; returns the sums for `Merged::absorb`.
pub(crate) fn each_report_summed(
    traces: &[PathBuf],
    options: &AnalyzeOptions,
    each: impl FnMut(&Path, CompactReport) -> Result<(), Failure>,
) -> Result<Sums, Failure> {
    each_report_with(traces, options, each, |t, o, f| {
        mtanalyze::analyze_each_summed(t, o, f)
    })
}

/// What a report handed over by the analysis of several traces comes as.
type Handed = Result<CompactReport, TraceError>;

/// [`each_report`] with `analyze_each` running the analysis.
fn each_report_with<S>(
    traces: &[PathBuf],
    options: &AnalyzeOptions,
    mut each: impl FnMut(&Path, CompactReport) -> Result<(), Failure>,
    analyze_each: impl FnOnce(
        &[PathBuf],
        &AnalyzeOptions,
        &mut dyn FnMut(usize, &Path, Handed) -> Result<(), Failure>,
    ) -> Result<S, Failure>,
) -> Result<S, Failure> {
    let mut errors = Vec::new();
    let mut clock: Option<Clock> = None;
    let out = analyze_each(traces, options, &mut |_, path, r| match r {
        Ok(compact) => {
            let report = compact.report();
            match clock {
                None => clock = Some(report.clock),
                Some(c) if c != report.clock => {
                    return Err(message(format!(
                        "the traces prefer different clocks ({c} and {} for {}); choose one with --clock",
                        report.clock,
                        path.display()
                    )))
                }
                Some(_) => {}
            }
            each(path, compact)
        }
        Err(e) => {
            errors.push(e.to_string());
            Ok(())
        }
    })?;
    if clock.is_none() {
        // Every trace failed: the first failure is the run's one line.
        return Err(Failure::Message(
            errors.into_iter().next().unwrap_or_default(),
        ));
    }
    for e in errors {
        say(&format!("mtanalyze: {e} (left out)"));
    }
    Ok(out)
}
