//! The two ways the analyzer can replay a thread's own stack, side by side.

use mtanalyze::LoadedTrace;
use mtanalyze::{analyze, report::Clock, AnalyzeOptions, PathMode, Report};

/// The report of `trace` under `clock` with own stacks replayed by the
/// segment pass (call paths off), and with every stack left to the replay
/// pass (call paths on disable the other), call paths dropped; `None` if
/// either analysis fails.
pub fn fused_and_replayed(trace: &LoadedTrace, clock: Clock) -> Option<(Report, Report)> {
    let options = AnalyzeOptions {
        clock: Some(clock),
        ..Default::default()
    };
    fused_and_replayed_with(trace, &options)
}

/// [`fused_and_replayed`] with any options (their call paths are ignored).
pub fn fused_and_replayed_with(
    trace: &LoadedTrace,
    options: &AnalyzeOptions,
) -> Option<(Report, Report)> {
    let run = |paths| {
        let options = AnalyzeOptions {
            paths,
            ..options.clone()
        };
        let mut r = analyze(trace, &options).ok()?;
        r.paths.clear();
        Some(r)
    };
    Some((run(PathMode::Off)?, run(PathMode::Merged)?))
}
