//! The default command: the report of one trace as a table, JSON, folded
//! call paths or a pstats file.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::args::Format;
use crate::children::{self, Children};
use crate::output::{say, Failure, Output};
use crate::plan::{Gather, ReportPlan};
use crate::series::{self, Member};
use crate::{analyze, analyze_stacks, each_report, expand_traces, say_warnings};
use mtanalyze::render;
use mtanalyze::view::{self, Direction, SortedRows, StackView, ViewOptions};
use mtanalyze::{Report, StackSink};

pub(crate) fn report(plan: &ReportPlan, out: &mut dyn Write) -> Result<(), Failure> {
    // A rotating series is read as one trace, in its files' order.
    let (mut traces, series) = series::gather(&expand_traces(&plan.traces)?);
    let children = if plan.children {
        children::find(&traces)
    } else {
        Children::default()
    };
    traces.extend(children.traces.iter().cloned());
    // A child's own series (`STEM.pid<PID>.1.EXT`, ...) joins its first file.
    let (traces, series) = if children.traces.is_empty() {
        (traces, series)
    } else {
        series::gather(&traces)
    };
    let Some(path) = traces.first().map(PathBuf::as_path) else {
        return Err(Failure::Message("no trace given (see --help)".into()));
    };
    let options = plan.options_for(traces.len(), series::rotated(&series));
    if plan.debug_plan {
        say_plans(&traces, &options)?;
    }
    if plan.format == Format::Html {
        return crate::html::report(plan, &options, &traces, &series, out);
    }
    let inputs: Vec<&Path> = traces.iter().map(PathBuf::as_path).collect();
    let target = Output::new(plan.output.as_deref(), &inputs)?;
    let width = target.table_width(plan.width);
    let gather = plan.gather(traces.len());
    let mut stack_view = (gather == Gather::StackView)
        .then(|| StackView::new(plan.stack_sort, plan.view.limit, plan.group));
    let mut sorted_rows =
        (gather == Gather::SortedRows).then(|| SortedRows::new(view::DEFAULT_BUDGET));
    let sink: Option<&mut dyn StackSink> = match (&mut stack_view, &mut sorted_rows) {
        (Some(view), _) => Some(view),
        (_, Some(rows)) => Some(rows),
        _ => None,
    };
    let (mut report, each) = if let Some(sink) = sink {
        (analyze_stacks(path, &options, sink)?, Vec::new())
    } else if traces.len() == 1 {
        let report = analyze(path, &options)?;
        let each = if plan.by_trace {
            vec![report.clone()]
        } else {
            Vec::new()
        };
        (report, each)
    } else {
        let (report, each) = analyze_many(&traces, &series, &options, plan.by_trace)?;
        (report, each)
    };
    children::warn(&mut report, &children.failures);
    let (view, edges) = (&plan.view, &plan.edges);
    target.write(out, |w| match plan.format {
        Format::Pstats => render::pstats::pstats(w, &report),
        Format::Folded => render::folded::folded(w, &report, view.filter.as_ref()),
        Format::Json => {
            if plan.by_trace {
                // {"merged": REPORT, "by_trace": [REPORT, ...]}
                w.write_all(b"{\"merged\": ")?;
                render::json::report(w, &view::filtered_report(&report, view, edges))?;
                w.write_all(b", \"by_trace\": [")?;
                for (i, r) in each.iter().enumerate() {
                    if i > 0 {
                        w.write_all(b", ")?;
                    }
                    render::json::report(w, &view::filtered_report(r, view, edges))?;
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
                let report = view::filtered_report(&report, view, edges);
                render::json::report_with_rows(w, &report, rows)
            } else {
                render::json::report(w, &view::filtered_report(&report, view, edges))
            }
        }
        Format::Table if plan.by_trace => {
            render::table::header(w, &report, width)?;
            writeln!(w)?;
            let rows = by_trace_rows(&each, view);
            let total = each.iter().map(|r| r.functions.len()).sum();
            render::table::functions_by_trace(w, &rows, total, width)
        }
        Format::Table => {
            let stacks = stack_view.take().map(StackView::finish);
            table(plan, &report, stacks, width, w)
        }
        Format::Markdown => {
            let rows = view::function_rows(&report, view);
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

/// The header, then the sections asked for (stacks, their groups, callers,
/// callees), or else the function table.
/// The table output; the `--stacks` rows or groups from `stacks` if
/// gathered as the analysis ran, else from the report.
fn table(
    plan: &ReportPlan,
    report: &Report,
    stacks: Option<StackView>,
    width: Option<usize>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let view = &plan.view;
    let sort = plan.stack_sort;
    render::table::header(out, report, width)?;
    let mut sections = 0;
    let mut section = |out: &mut dyn Write| {
        sections += 1;
        writeln!(out)
    };
    if plan.stacks {
        section(out)?;
        match &stacks {
            Some(v) => {
                let (logical, ended) = v.logical_and_ended();
                render::table::ends_counts_line(out, report, logical, ended)?;
            }
            None => render::table::ends_line(out, report)?,
        }
    }
    // Whether the scheduled and waiting columns are measurements.
    let wakes = render::table::Wakes::of(&report.trace);
    if plan.stacks && plan.group {
        let mut groups = match stacks {
            Some(v) => v.groups(),
            None => view::stack_groups(report, sort),
        };
        let total = groups.len();
        groups.truncate(view.limit.unwrap_or(total));
        render::table::stack_groups(out, &groups, total, width, wakes)?;
    } else if plan.stacks {
        match &stacks {
            Some(v) => render::table::stacks(out, &v.rows(), v.total(), width, wakes)?,
            None => {
                let rows = view::stack_rows(report, sort, view.limit);
                render::table::stacks(out, &rows, report.stacks.len(), width, wakes)?;
            }
        }
    }
    for (re, dir) in [
        (&plan.edges.callers_of, Direction::Callers),
        (&plan.edges.callees_of, Direction::Callees),
    ] {
        if let Some(re) = re {
            section(out)?;
            let groups = view::edge_groups(report, view, re, dir);
            render::table::edges(out, &groups, dir, width)?;
        }
    }
    if sections == 0 {
        writeln!(out)?;
        let rows = view::function_rows(report, view);
        let scheduled = plan.scheduled.then_some(wakes);
        render::table::functions(out, &rows, report.functions.len(), width, scheduled)?;
    }
    Ok(())
}

/// Analyzes `traces` in parallel and sums their reports. A trace that fails
/// to load or analyze is named on stderr and left out, unless all fail.
/// The files of each of `series` are read in the series' time: a window
/// (`--from/--to`) is moved into each file's own time, and a file wholly
/// after it is not read; the header names the series' files.
pub(crate) fn analyze_many(
    traces: &[PathBuf],
    series: &[Vec<Member>],
    options: &mtanalyze::AnalyzeOptions,
    keep: bool,
) -> Result<(Report, Vec<Report>), Failure> {
    let mut each = Vec::new();
    let what = match keep {
        true => mtanalyze::ManyTraces::MergeAndReport,
        false => mtanalyze::ManyTraces::Merge,
    };
    let windowed = options.from.is_some() || options.to.is_some();
    let mut read: Vec<PathBuf> = traces.to_vec();
    let mut report = if series.is_empty() || !windowed {
        let merged = each_report(traces, options, what, |_, report| {
            if keep {
                each.push(report.clone());
            }
            Ok(())
        })?;
        merged
            .finish()
            .ok_or_else(|| Failure::Message("no trace given (see --help)".into()))?
    } else {
        windowed_series(traces, series, options, keep, &mut each, &mut read)?
    };
    if !series.is_empty() {
        shift_marks(&mut report, &read, series);
        // The files read: each series' (in its order), then the others.
        let mut named: Vec<String> = series
            .iter()
            .map(|s| {
                let members: Vec<Member> = s
                    .iter()
                    .filter(|m| read.contains(&m.path))
                    .cloned()
                    .collect();
                series::describe(&members)
            })
            .filter(|d| !d.is_empty())
            .collect();
        named.extend(
            read.iter()
                .filter(|t| !series.iter().flatten().any(|m| &m.path == *t))
                .map(|t| t.display().to_string()),
        );
        report.trace.source = named.join("; ");
    }
    Ok((report, each))
}

/// Moves the marks of a series' files into the series' time (each by its
/// file's offset; see `series.rs`). `read`: the files summed, in order,
/// whose positions the marks name; when one could not be read (left out,
/// so the positions shift), the marks keep their files' own times.
fn shift_marks(report: &mut Report, read: &[PathBuf], series: &[Vec<Member>]) {
    if report.trace.traces != read.len() as u64 {
        return;
    }
    let mut offset_of = vec![0u64; read.len()];
    for members in series {
        for (m, offset) in members.iter().zip(series::offsets(members)) {
            if let Some(i) = read.iter().position(|p| *p == m.path) {
                offset_of[i] = offset;
            }
        }
    }
    for mark in &mut report.marks {
        let i = mark.trace.map_or(0, |t| t as usize);
        if let Some(&offset) = offset_of.get(i) {
            mark.time_ns = mark.time_ns.saturating_add(offset);
        }
    }
    report.marks.sort_by_key(|m| m.time_ns);
}

/// [`analyze_many`] with a window over series: each file with its own
/// window (see `series.rs`), one after the other, summed.
fn windowed_series(
    traces: &[PathBuf],
    series: &[Vec<Member>],
    options: &mtanalyze::AnalyzeOptions,
    keep: bool,
    each: &mut Vec<Report>,
    read: &mut Vec<PathBuf>,
) -> Result<Report, Failure> {
    // Each file's window in its own time; `None`: not read.
    let mut per_file: Vec<(PathBuf, Option<mtanalyze::AnalyzeOptions>)> = traces
        .iter()
        .map(|t| (t.clone(), Some(options.clone())))
        .collect();
    // The series' window and end, for the header.
    let mut shown: Option<(u64, Option<u64>, u64)> = None;
    for members in series {
        let offsets = series::offsets(members);
        let (from, to) = series::resolve(options, members, &offsets).map_err(Failure::Message)?;
        shown.get_or_insert((from.unwrap_or(0), to, 0));
        for (m, &offset) in members.iter().zip(&offsets) {
            let Some(slot) = per_file.iter_mut().find(|(p, _)| *p == m.path) else {
                continue;
            };
            slot.1 = series::window_in_file(from, to, offset).map(|(from, to)| {
                mtanalyze::AnalyzeOptions {
                    from: from.map(mtanalyze::TimeBound::At),
                    to: to.map(mtanalyze::TimeBound::At),
                    ..options.clone()
                }
            });
            if let Some(s) = &mut shown {
                s.2 = s.2.max(offset);
            }
        }
    }
    let what = match keep {
        true => mtanalyze::ManyTraces::MergeAndReport,
        false => mtanalyze::ManyTraces::Merge,
    };
    let mut total = mtanalyze::Merged::new();
    read.clear();
    for (path, file_options) in &per_file {
        let Some(file_options) = file_options else {
            continue;
        };
        read.push(path.clone());
        let merged = each_report(std::slice::from_ref(path), file_options, what, |_, r| {
            if keep {
                each.push(r.clone());
            }
            Ok(())
        })?;
        if let Some(r) = merged.finish() {
            total.add(r);
        }
    }
    let mut report = total.finish().ok_or_else(|| {
        Failure::Message(format!(
            "no file of the series is in the window ({} read)",
            read.len()
        ))
    })?;
    if let Some((from_ns, to, _)) = shown {
        report.trace.window = Some(mtanalyze::report::TimeWindow {
            from_ns,
            to_ns: to.unwrap_or(report.trace.end_ns.max(from_ns)),
        });
    }
    Ok(report)
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

/// `--debug-plan`: how each trace is analyzed, on stderr.
fn say_plans(traces: &[PathBuf], options: &mtanalyze::AnalyzeOptions) -> Result<(), Failure> {
    let mut text = String::new();
    if traces.len() > 1 {
        text.push_str(&format!(
            "{} traces: analyzed in parallel and summed; with enough of them, each small \
             one on one worker, one stage after the other, the others as planned below\n",
            traces.len()
        ));
    }
    for path in traces {
        let trace = crate::load(path)?;
        let p = mtanalyze::plan::of(&trace, options).map_err(crate::output::message)?;
        text.push_str(&plan_text(&path.display().to_string(), &p));
    }
    eprint!("{text}");
    Ok(())
}

/// A plan as `--debug-plan` prints it: the engine, then each fact the
/// choice looked at.
fn plan_text(name: &str, p: &mtanalyze::plan::Plan) -> String {
    use mtanalyze::plan::Engine;
    let yes = |b: bool| if b { "yes" } else { "no" };
    let engine = match p.engine {
        Engine::Stream => format!(
            "stream: cut and replay in steps of about {} events, or {} for each open frame \
             the step before set aside if that is more; if it meets what it cannot judge (a \
             stack run after its end), the batch starts over from the decoded trace",
            p.step_events, p.step_events_per_frame
        ),
        Engine::Batch => {
            "batch: every thread cut into segments, then the stacks replayed in parallel".into()
        }
    };
    format!(
        "plan for {name}\n  engine: {engine}\n  \
         events: {} | named stacks: {} (short steps from {}) | threads: {}\n  \
         own stacks replayed by their threads' passes where the clock allows (a running sum a thread fits): {}\n",
        p.events,
        p.named_stacks,
        p.short_steps_from_stacks,
        p.threads,
        yes(p.tallies_fit),
    )
}
