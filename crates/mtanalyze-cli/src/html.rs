//! `--format html`: the report of one trace or a merge of several (and
//! `diff --format html`, see `diff.rs`) as one self-contained page. The
//! plan asks for call paths per stack and every stack row; this module
//! picks the busiest stacks' timelines and hands the values to
//! `mtanalyze::render::html`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::output::{message, Failure, Output};
use crate::plan::ReportPlan;
use crate::progress::Progress;
use crate::{load, say_warnings};
use mtanalyze::render::html::{self, ReportPage};
use mtanalyze::{timeline::Timelines, AnalyzeOptions, PathMode, Report};

/// At most this many stacks get a timeline (the busiest by running time).
pub(crate) const TIMELINE_STACKS: usize = 1_000;
/// About this many stretches in the timeline, over all its stacks.
const TIMELINE_STRETCHES: usize = 400_000;

/// `mtanalyze TRACE... --format html`: `options` are the plan's for the
/// `traces` found.
pub(crate) fn report(
    plan: &ReportPlan,
    options: &AnalyzeOptions,
    traces: &[PathBuf],
    series: &[Vec<crate::series::Member>],
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let inputs: Vec<&Path> = traces.iter().map(PathBuf::as_path).collect();
    let target = Output::new(plan.output.as_deref(), &inputs)?;
    let (report, each, activity) = if let [path] = traces {
        let progress = Progress::spinner(format!("analyzing {}", path.display()));
        let trace = load(path)?;
        let report = mtanalyze::analyze(&trace, options).map_err(message)?;
        progress.finish();
        let progress = Progress::spinner(format!("timelines of {}", path.display()));
        let activity = timelines(&trace, options, &report)?;
        progress.finish();
        (report, Vec::new(), Some(activity))
    } else {
        let (report, each) = crate::report::analyze_many(traces, series, options, true)?;
        (report, each, None)
    };
    let page = ReportPage {
        by_trace: &each,
        timeline: activity.as_deref(),
        command: command(traces, options, &report),
        collapse: plan.collapse.map(str::to_owned),
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
) -> Result<Vec<mtanalyze::timeline::StackActivity>, Failure> {
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
fn command(traces: &[PathBuf], options: &AnalyzeOptions, report: &Report) -> String {
    let mut words = vec!["mtanalyze".to_owned()];
    words.extend(traces.iter().map(|p| quote(&p.display().to_string())));
    words.push(format!("--clock {}", report.clock));
    for t in &options.threads {
        words.push(format!("--thread {t}"));
    }
    for s in &options.stacks {
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
