//! The default command: the report of one trace as a table, JSON, folded
//! call paths or a pstats file.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::args::{analyze_options, rows_if, Format, ReportArgs};
use crate::children::{self, Children};
use crate::output::{say, Failure, Output};
use crate::{analyze, analyze_stacks, each_report, expand_traces, say_warnings};
use mtanalyze::render;
use mtanalyze::view::{
    self, Direction, EdgeSelection, SortKey, SortedRows, StackView, ViewOptions,
};
use mtanalyze::{PathMode, Report, StackSink};

pub(crate) fn report(args: &ReportArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let mut traces = expand_traces(&args.traces)?;
    let children = if args.no_children {
        Children::default()
    } else {
        children::find(&traces)
    };
    traces.extend(children.traces.iter().cloned());
    let Some(path) = traces.first().map(PathBuf::as_path) else {
        return Err(Failure::Message("no trace given (see --help)".into()));
    };
    if args.format == Format::Html {
        return crate::html::report(args, &traces, out);
    }
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
    if let Some(sort) = args
        .sort
        .filter(|&s| args.stacks && !SortKey::from(s).orders_stacks())
    {
        return Err(Failure::Message(format!(
            "--sort {} does not apply to --stacks: stack rows sort by tottime, cumtime, \
             ncalls, paused or name",
            sort.name()
        )));
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
    // Stack rows are shown by JSON and the table's --stacks.
    let options = rows_if(
        args.format == Format::Json || args.stacks,
        analyze_options(
            &args.clock,
            Some(&args.select),
            paths,
            args.collapse.recursion,
        ),
    );
    if args.by_trace && !matches!(args.format, Format::Table | Format::Json) {
        return Err(Failure::Message(
            "--by-trace applies to the table and --format json".into(),
        ));
    }
    // One trace's --stacks table: only the rows (or groups) it shows are
    // held, gathered as the analysis hands them over. (With --thread or
    // --stack, the header says how many of the rows were selected: they
    // are kept.)
    let every_stack_of_one = traces.len() == 1 && !args.by_trace && !options.selects_stacks();
    let mut stack_view =
        (every_stack_of_one && args.format == Format::Table && args.stacks).then(|| {
            let sort = args.sort.map(Into::into);
            StackView::new(sort, args.limit, args.group)
        });
    // One trace's JSON: the rows are sorted by id as they are handed over,
    // on disk past a budget, and written from there.
    let mut sorted_rows = (every_stack_of_one && args.format == Format::Json)
        .then(|| SortedRows::new(view::DEFAULT_BUDGET));
    let sink: Option<&mut dyn StackSink> = match (&mut stack_view, &mut sorted_rows) {
        (Some(view), _) => Some(view),
        (_, Some(rows)) => Some(rows),
        _ => None,
    };
    let (mut report, each) = if let Some(sink) = sink {
        (analyze_stacks(path, &options, sink)?, Vec::new())
    } else if traces.len() == 1 {
        let report = analyze(path, &options)?;
        let each = if args.by_trace {
            vec![report.clone()]
        } else {
            Vec::new()
        };
        (report, each)
    } else {
        analyze_many(&traces, &options, args.by_trace)?
    };
    children::warn(&mut report, &children.failures);
    target.write(out, |w| match args.format {
        Format::Pstats => render::pstats::pstats(w, &report),
        Format::Folded => render::folded::folded(w, &report, args.filter.as_ref()),
        Format::Json => {
            let view = view_options(args);
            let edges = EdgeSelection {
                callers_of: args.callers.clone(),
                callees_of: args.callees.clone(),
            };
            if args.by_trace {
                // {"merged": REPORT, "by_trace": [REPORT, ...]}
                w.write_all(b"{\"merged\": ")?;
                render::json::report(w, &view::filtered_report(&report, &view, &edges))?;
                w.write_all(b", \"by_trace\": [")?;
                for (i, r) in each.iter().enumerate() {
                    if i > 0 {
                        w.write_all(b", ")?;
                    }
                    render::json::report(w, &view::filtered_report(r, &view, &edges))?;
                }
                w.write_all(b"]}\n")
            } else if let Some(rows) = sorted_rows {
                if let Some(e) = rows.spill_error() {
                    let dir = std::env::temp_dir();
                    say(&format!(
                        "mtanalyze: stack rows held in memory, not sorted on disk in {}: {e}",
                        dir.display()
                    ));
                }
                let rows = rows.into_sorted()?;
                let report = view::filtered_report(&report, &view, &edges);
                render::json::report_with_rows(w, &report, rows)
            } else {
                render::json::report(w, &view::filtered_report(&report, &view, &edges))
            }
        }
        Format::Table if args.by_trace => {
            render::table::header(w, &report, width)?;
            writeln!(w)?;
            let view = view_options(args);
            let rows = by_trace_rows(&each, &view);
            let total = each.iter().map(|r| r.functions.len()).sum();
            render::table::functions_by_trace(w, &rows, total, width)
        }
        Format::Table => {
            let stacks = stack_view.take().map(StackView::finish);
            table(args, &report, stacks, width, w)
        }
        Format::Markdown => {
            let rows = view::function_rows(&report, &view_options(args));
            render::markdown::report(w, &report, &rows)
        }
        // Written by `html.rs`, which the run went to above.
        Format::Html => Err(io::Error::other("the HTML page is written by html.rs")),
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
/// The table output; the `--stacks` rows or groups from `stacks` if
/// gathered as the analysis ran, else from the report.
fn table(
    args: &ReportArgs,
    report: &Report,
    stacks: Option<StackView>,
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
    if args.stacks {
        section(out)?;
        match &stacks {
            Some(v) => {
                let (logical, ended) = v.logical_and_ended();
                render::table::ends_counts_line(out, report, logical, ended)?;
            }
            None => render::table::ends_line(out, report)?,
        }
    }
    if args.stacks && args.group {
        let mut groups = match stacks {
            Some(v) => v.groups(),
            None => view::stack_groups(report, sort),
        };
        let total = groups.len();
        groups.truncate(args.limit.unwrap_or(total));
        render::table::stack_groups(out, &groups, total, width)?;
    } else if args.stacks {
        match &stacks {
            Some(v) => render::table::stacks(out, &v.rows(), v.total(), width)?,
            None => {
                let rows = view::stack_rows(report, sort, args.limit);
                render::table::stacks(out, &rows, report.stacks.len(), width)?;
            }
        }
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
pub(crate) fn analyze_many(
    traces: &[PathBuf],
    options: &mtanalyze::AnalyzeOptions,
    keep: bool,
) -> Result<(Report, Vec<Report>), Failure> {
    let mut each = Vec::new();
    let what = match keep {
        true => mtanalyze::ManyTraces::MergeAndReport,
        false => mtanalyze::ManyTraces::Merge,
    };
    let merged = each_report(traces, options, what, |_, report| {
        if keep {
            each.push(report.clone());
        }
        Ok(())
    })?;
    let report = merged
        .finish()
        .ok_or_else(|| Failure::Message("no trace given (see --help)".into()))?;
    Ok((report, each))
}

/// Every (trace, function) row of `each`, filtered and ordered by `view`
/// as one table, at most `view.limit` of them.
fn by_trace_rows<'r>(
    each: &'r [Report],
    view: &ViewOptions,
) -> Vec<(String, &'r mtanalyze::FunctionStats)> {
    let all = ViewOptions {
        limit: None,
        ..view.clone()
    };
    let mut rows: Vec<(String, &mtanalyze::FunctionStats)> = each
        .iter()
        .flat_map(|r| {
            let label = render::table::trace_label(&r.trace);
            view::function_rows(r, &all)
                .into_iter()
                .map(move |f| (label.clone(), f))
        })
        .collect();
    // Stable: rows tied on the key and the trace keep each trace's order.
    rows.sort_by(|a, b| view.sort.order(a.1, b.1).then(a.0.cmp(&b.0)));
    rows.truncate(view.limit.unwrap_or(usize::MAX));
    rows
}
