//! `mtanalyze-cli`: the `mtanalyze` command line as a library, so that the
//! `mtanalyze` binary and the Python extension (`mtrace._mtrace`, whose
//! `mtanalyze` console script is the same program) run one implementation.
//!
//! ```text
//! mtanalyze [OPTIONS] TRACE        report (the default command)
//! mtanalyze check [--format F] TRACE
//! mtanalyze convert IN OUT.bin
//! mtanalyze diff [OPTIONS] BASE NEW [--flamegraph OUT.svg]
//! mtanalyze flamegraph [OPTIONS] TRACE [-o OUT.svg]
//! mtanalyze export --format chrome|speedscope|callgrind|pprof|parquet [OPTIONS] TRACE [-o OUT]
//! mtanalyze top [--stacks] [--sort KEY] [--once [--format json]] TRACE
//! ```
//!
//! [`run`] takes the arguments and returns the exit status; it never exits
//! the process, so an embedding interpreter keeps running. Argument shapes
//! live in `args.rs`; `plan.rs` resolves them, once and without opening a
//! file, into the typed plan of one command (every decision, and every
//! refusal of options that do not go together, is taken there); one
//! module per command runs its plan; where outputs go and how failures
//! read in `output.rs`, the progress indicator in `progress.rs`; `diff`
//! reads saved reports back (`--format json`'s) in `saved.rs`.
//! It reaches the analysis through `mtanalyze`'s public API alone.
//!
//! Outputs without `-o` (or with `-o -`) go to the writer [`run`] is given.
//! A progress indicator appears on stderr when a run takes longer than a
//! second, and only when stderr is a terminal.
//!
//! The first positional argument is a subcommand when it names one, else the
//! trace of the default report. A trace file literally named like a
//! subcommand is reached with `mtanalyze -- check` (or `./check`).
//!
//! Failures print one line, `mtanalyze: <message>`, on stderr and exit with
//! status 2 (the status clap uses for usage errors). `diff --fail-if` exits
//! with status 1 when a rule holds, after naming the rows that break it. A
//! closed output (`mtanalyze trace | head`) ends the run quietly with status 0.
#![deny(missing_docs)]

mod args;
mod children;
mod diff;
mod export;
mod file;
mod html;
mod output;
mod plan;
mod progress;
mod report;
mod saved;
mod series;
mod top;

use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Parser;

use mtanalyze::{report::Clock, AnalyzeOptions, LoadedTrace, ManyTraces, Merged, Report};

use args::Cli;
use output::{message, say, Failure};
use plan::Plan;
use progress::Progress;

/// Runs the command line `args` (the program's name first, as
/// `std::env::args_os` gives it), writing the outputs that go to stdout to
/// `out` (flushed before it returns), and returns the exit status: 0 done,
/// 1 a `diff --fail-if` rule holds, 2 a usage error or a failure (said in
/// one line on stderr). `--help` and `--version` print through clap to the process's
/// stdout.
pub fn run<I, T>(args: I, out: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0; usage errors to
            // stderr with clap's status (2). A closed stream is not a panic.
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    let result = dispatch(cli, out).and_then(|()| out.flush().map_err(Failure::Output));
    match result {
        Ok(()) => 0,
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(Failure::Output(e)) => {
            say(&format!("mtanalyze: cannot write the output: {e}"));
            2
        }
        Err(Failure::Message(m)) => {
            say(&format!("mtanalyze: {m}"));
            2
        }
        Err(Failure::Gate(n)) => {
            let rows = if n == 1 { "row breaks" } else { "rows break" };
            say(&format!("mtanalyze: {n} {rows} a --fail-if rule"));
            1
        }
    }
}

/// Resolves the command line into its plan (every option checked there),
/// then runs the plan.
fn dispatch(cli: Cli, out: &mut dyn Write) -> Result<(), Failure> {
    let interactive = io::stdin().is_terminal() && io::stdout().is_terminal();
    match plan::resolve(cli, interactive).map_err(Failure::Message)? {
        Plan::Check(plan) => file::check(&plan, out),
        Plan::Convert(plan) => file::convert(&plan, out),
        Plan::Diff(plan) => diff::diff(&plan, out),
        Plan::Flamegraph(plan) => export::flamegraph(&plan, out),
        Plan::Export(plan) => export::export(&plan, out),
        Plan::Top(plan) => top::top(&plan, out),
        Plan::Report(plan) => report::report(&plan, out),
    }
}

/// Loads a trace; a failure is one line.
pub(crate) fn load(path: &Path) -> Result<LoadedTrace, Failure> {
    mtanalyze::load(path).map_err(message)
}

/// Loads and analyzes one trace with a spinner for long runs.
pub(crate) fn analyze(path: &Path, options: &AnalyzeOptions) -> Result<Report, Failure> {
    analyzing(path, |trace| mtanalyze::analyze(trace, options))
}

/// [`analyze`], each stack's row handed to `sink` (see
/// [`mtanalyze::analyze_with_sink`]).
pub(crate) fn analyze_stacks(
    path: &Path,
    options: &AnalyzeOptions,
    sink: &mut dyn mtanalyze::StackSink,
) -> Result<Report, Failure> {
    analyzing(path, |trace| {
        mtanalyze::analyze_with_sink(trace, options, sink)
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
/// output, which the caller has flushed), then each place they happened
/// if the report kept them (`--warnings all`), each line prefixed with
/// `prefix` if any.
pub(crate) fn say_warnings(report: &Report, prefix: Option<&str>) {
    // The details are in the report only if `--warnings all` asked.
    let summary = mtanalyze::render::warnings_summary(&report.warnings);
    let details = mtanalyze::render::warnings_details(&report.warnings);
    let lost = mtanalyze::render::lost_summary(&report.trace);
    let lines = summary.into_iter().chain(details).chain(lost);
    for line in lines {
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

/// Analyzes `traces` in parallel (`mtanalyze::analyze_many`), handing
/// each report to `each` in order (what it holds: see `ManyTraces`), and
/// returns their sum. A trace that fails to load or analyze is named on
/// stderr and left out; the run fails if all do, or if the traces prefer
/// different clocks (a sum over different clocks means nothing).
pub(crate) fn each_report(
    traces: &[PathBuf],
    options: &AnalyzeOptions,
    what: ManyTraces,
    mut each: impl FnMut(&Path, &Report) -> Result<(), Failure>,
) -> Result<Merged, Failure> {
    let mut errors = Vec::new();
    let mut clock: Option<Clock> = None;
    let merged = mtanalyze::analyze_many(traces, options, what, |_, path, r| match r {
        Ok(report) => {
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
            each(path, report)
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
    Ok(merged)
}
