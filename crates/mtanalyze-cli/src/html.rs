//! `--format html`: the report of one trace or a merge of several (and
//! `diff --format html`, see `diff.rs`) as one self-contained page. This
//! module decides what the page holds (call paths per stack, every stack
//! row, the busiest stacks' timelines) and hands the values to
//! `mtanalyze::render::html`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::args::{analyze_options, Format, ReportArgs};
use crate::output::{message, Failure, Output};
use crate::progress::Progress;
use crate::{load, say_warnings};
use mtanalyze::render::html::{self, ReportPage};
use mtanalyze::{AnalyzeOptions, PathMode, Report, StackRows, Timelines};

/// At most this many stacks get a timeline (the busiest by running time).
pub(crate) const TIMELINE_STACKS: usize = 1_000;
/// About this many stretches in the timeline, over all its stacks.
const TIMELINE_STRETCHES: usize = 400_000;

/// `mtanalyze TRACE... --format html`.
pub(crate) fn report(
    args: &ReportArgs,
    traces: &[PathBuf],
    series: &[Vec<crate::series::Member>],
    out: &mut dyn Write,
) -> Result<(), Failure> {
    debug_assert_eq!(args.format, Format::Html);
    let ignored = [
        (args.limit.is_some(), "--limit"),
        (args.filter.is_some(), "--filter"),
        (args.callers.is_some(), "--callers"),
        (args.callees.is_some(), "--callees"),
        (args.stacks, "--stacks"),
        (args.group, "--group"),
        (args.per_thread, "--per-thread"),
        (args.sort.is_some(), "--sort"),
    ];
    if let Some((_, flag)) = ignored.iter().find(|(given, _)| *given) {
        return Err(message(format!(
            "{flag} does not apply to --format html: the page holds every row, and sorts, \
             filters and groups them itself"
        )));
    }
    let inputs: Vec<&Path> = traces.iter().map(PathBuf::as_path).collect();
    let target = Output::new(args.output.as_deref(), &inputs)?;
    let collapse = args.collapse.recursion;
    let collapse_name = collapse.map(|c| match c {
        crate::args::CollapseArg::Direct => "direct".to_owned(),
        crate::args::CollapseArg::All => "all".to_owned(),
    });
    let (report, each, activity) = if let [path] = traces {
        // Call paths per stack, so the page can draw each group's own.
        let options = AnalyzeOptions {
            stack_rows: StackRows::Kept,
            ..analyze_options(
                &args.clock,
                Some(&args.select),
                PathMode::PerStack,
                collapse,
            )
        };
        let progress = Progress::spinner(format!("analyzing {}", path.display()));
        let trace = load(path)?;
        let report = mtanalyze::analyze(&trace, &options).map_err(message)?;
        progress.finish();
        let progress = Progress::spinner(format!("timelines of {}", path.display()));
        let activity = timelines(&trace, &options, &report)?;
        progress.finish();
        (report, Vec::new(), Some(activity))
    } else {
        let options = AnalyzeOptions {
            stack_rows: StackRows::Kept,
            ..analyze_options(&args.clock, Some(&args.select), PathMode::Merged, collapse)
        };
        let (report, each) = crate::report::analyze_many(traces, series, &options, true)?;
        (report, each, None)
    };
    let page = ReportPage {
        by_trace: &each,
        timeline: activity.as_deref(),
        command: command(traces, args, &report),
        collapse: collapse_name,
    };
    target.write(out, |w| html::report(w, &report, &page))?;
    out.flush()?;
    say_warnings(&report, None);
    Ok(())
}

/// The busiest stacks' activity (at most [`TIMELINE_STACKS`]).
fn timelines(
    trace: &mtanalyze::LoadedTrace,
    options: &AnalyzeOptions,
    report: &Report,
) -> Result<Vec<mtanalyze::StackActivity>, Failure> {
    let mut busiest: Vec<&mtanalyze::StackStats> = report.stacks.iter().collect();
    busiest.sort_by(|a, b| b.running_ns.cmp(&a.running_ns).then(a.id.cmp(&b.id)));
    busiest.truncate(TIMELINE_STACKS);
    if busiest.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = busiest.iter().map(|s| s.id.to_string()).collect();
    let per_stack = (TIMELINE_STRETCHES / ids.len()).clamp(200, 20_000);
    let options = AnalyzeOptions {
        paths: PathMode::Off,
        ..options.clone()
    };
    let timelines = Timelines::new(trace, &options).map_err(message)?;
    Ok(timelines.activities(&ids, per_stack))
}

/// The command line that analyzes the same input the same way, for the
/// page to add `--from`/`--to` to: the traces, the clock in use and the
/// stacks selected.
fn command(traces: &[PathBuf], args: &ReportArgs, report: &Report) -> String {
    let mut words = vec!["mtanalyze".to_owned()];
    words.extend(traces.iter().map(|p| quote(&p.display().to_string())));
    words.push(format!("--clock {}", report.clock));
    for t in &args.select.threads {
        words.push(format!("--thread {t}"));
    }
    for s in &args.select.stack_ids {
        words.push(format!("--stack {}", quote(s)));
    }
    words.join(" ")
}

/// `s` as one word for a POSIX shell.
pub(crate) fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c));
    match plain {
        true => s.to_owned(),
        false => format!("'{}'", s.replace('\'', "'\\''")),
    }
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(quote("sample-traces/a.bin"), "sample-traces/a.bin");
        assert_eq!(quote("my trace.bin"), "'my trace.bin'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote(""), "''");
    }
}
