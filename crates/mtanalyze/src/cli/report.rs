//! The default command: the report of one trace as a table, JSON, folded
//! call paths or a pstats file.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::cli::args::{analyze_options, Format, ReportArgs};
use crate::cli::output::{message, say};
use crate::cli::output::{Failure, Output};
use crate::cli::{analyze, expand_traces, load, say_warnings};
use mtanalyze::render;
use mtanalyze::view::{self, Direction, EdgeSelection, ViewOptions};
use mtanalyze::{PathMode, Report};

pub(crate) fn report(args: &ReportArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let traces = expand_traces(&args.traces)?;
    let Some(path) = traces.first().map(PathBuf::as_path) else {
        return Err(Failure::Message("no trace given (see --help)".into()));
    };
    let folded = args.format == Format::Folded;
    let row_options = [
        args.limit.is_some(),
        args.callers.is_some(),
        args.callees.is_some(),
        args.stacks,
    ];
    if folded && row_options.contains(&true) {
        return Err(Failure::Message(
            "--format folded writes every call path: --limit, --callers, --callees and \
             --stacks do not apply (--filter does)"
                .into(),
        ));
    }
    if args.per_thread && !folded {
        return Err(Failure::Message(
            "--per-thread applies to --format folded".into(),
        ));
    }
    if args.collapse.recursion.is_some() && !folded {
        return Err(Failure::Message(
            "--collapse-recursion applies to --format folded (and to flamegraph)".into(),
        ));
    }
    let inputs: Vec<&Path> = traces.iter().map(PathBuf::as_path).collect();
    let target = Output::new(args.output.as_deref(), &inputs)?;
    let width = target.table_width(args.width);
    if args.format == Format::Pstats && matches!(target, Output::Stdout) {
        return Err(Failure::Message(
            "--format pstats writes a binary file: give it with -o FILE".into(),
        ));
    }
    let paths = match (folded, args.per_thread) {
        (false, _) => PathMode::Off,
        (true, false) => PathMode::Merged,
        (true, true) => PathMode::PerStack,
    };
    let options = analyze_options(
        &args.clock,
        Some(&args.select),
        paths,
        args.collapse.recursion,
    );
    let report = if traces.len() == 1 {
        analyze(path, &options)?
    } else {
        analyze_many(&traces, &options)?
    };
    target.write(out, |w| match args.format {
        Format::Pstats => render::pstats::pstats(w, &report),
        Format::Folded => render::folded::folded(w, &report, args.filter.as_ref()),
        Format::Json => {
            let view = view_options(args);
            let edges = EdgeSelection {
                callers_of: args.callers.clone(),
                callees_of: args.callees.clone(),
            };
            render::json::report(w, &view::filtered_report(&report, &view, &edges))
        }
        Format::Table => table(args, &report, width, w),
        Format::Markdown => {
            let rows = view::function_rows(&report, &view_options(args));
            render::markdown::report(w, &report, &rows)
        }
    })?;
    // The summary follows the output: flush it first so the two do not interleave.
    out.flush()?;
    say_warnings(&report, None);
    Ok(())
}

fn view_options(args: &ReportArgs) -> ViewOptions {
    ViewOptions {
        sort: args.sort.map(Into::into).unwrap_or_default(),
        limit: args.limit,
        filter: args.filter.clone(),
    }
}

/// The header, then the sections asked for (stacks, their groups, callers,
/// callees), or else the function table.
fn table(
    args: &ReportArgs,
    report: &Report,
    width: Option<usize>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let view = view_options(args);
    let sort = args.sort.map(Into::into);
    render::table::header(out, report, width)?;
    let mut sections = 0;
    let mut section = |out: &mut dyn Write| {
        sections += 1;
        writeln!(out)
    };
    if args.stacks && args.group {
        section(out)?;
        let mut groups = view::stack_groups(report, sort);
        let total = groups.len();
        groups.truncate(args.limit.unwrap_or(total));
        render::table::stack_groups(out, &groups, total, width)?;
    } else if args.stacks {
        section(out)?;
        let rows = view::stack_rows(report, sort, args.limit);
        render::table::stacks(out, &rows, report.stacks.len(), width)?;
    }
    for (re, dir) in [
        (&args.callers, Direction::Callers),
        (&args.callees, Direction::Callees),
    ] {
        if let Some(re) = re {
            section(out)?;
            let groups = view::edge_groups(report, &view, re, dir);
            render::table::edges(out, &groups, dir, width)?;
        }
    }
    if sections == 0 {
        writeln!(out)?;
        let rows = view::function_rows(report, &view);
        render::table::functions(out, &rows, report.functions.len(), width, args.scheduled)?;
    }
    Ok(())
}

/// Analyzes `traces` in parallel and sums their reports. A trace that fails
/// to load or analyze is named on stderr and left out, unless all fail.
fn analyze_many(
    traces: &[PathBuf],
    options: &mtanalyze::AnalyzeOptions,
) -> Result<Report, Failure> {
    let results: Vec<Result<Report, String>> = traces
        .par_iter()
        .map(|p| {
            let trace = load(p).map_err(|f| match f {
                Failure::Message(m) => m,
                _ => format!("{}: cannot read", p.display()),
            })?;
            mtanalyze::analyze(&trace, options).map_err(|e| format!("{}: {e}", p.display()))
        })
        .collect();
    let mut merged = mtanalyze::Merged::new();
    let mut errors = Vec::new();
    let mut clock = None;
    for (path, r) in traces.iter().zip(results) {
        match r {
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
                merged.add(report);
            }
            Err(e) => errors.push(e),
        }
    }
    let Some(report) = merged.finish() else {
        // Every trace failed: the first failure is the run's one line.
        return Err(Failure::Message(
            errors.into_iter().next().unwrap_or_default(),
        ));
    };
    for e in errors {
        say(&format!("mtanalyze: {e} (left out)"));
    }
    Ok(report)
}
