//! Renderers: each turns a [`mtanalyze_model::report::Report`] (or a check or diff result) into
//! one output format. They never recompute statistics.
//!
//! * [`table`]: the pstats-like text tables of the default command.
//! * [`escape`]: control characters of names escaped for text outputs.
//! * [`json`]: `--format json` of the report and of `check`.
//! * [`check`]: the human form of `mtanalyze check`.
//! * [`diff`]: every output of `mtanalyze diff` (table, JSON, folded).
//! * [`pstats`]: `--format pstats`, the marshal file Python's `pstats` loads.
//! * [`folded`]: `--format folded`, one `root;...;leaf self_ns` line per call path.
//! * [`html`]: `--format html`, one self-contained page (tables, flame graph,
//!   timeline; a diff page) with the data inlined as JSON.
//! * [`flamegraph`]: flame graph SVGs (through `inferno`), plain and differential.
//! * [`chrome`], [`speedscope`]: the timeline exports, from a
//!   [`mtanalyze_model::timeline::TimelineSource`] (the analysis's
//!   [`mtanalyze_engine::Timelines`]) rather than a report.
//! * [`callgrind`]: the callgrind format for KCachegrind.
//! * [`pprof`]: a gzipped `profile.proto` for `go tool pprof`.
//! * `parquet` (the `parquet` feature): a directory of Parquet tables for
//!   SQL engines, written report by report.
//!
//! Renderers write to any [`std::io::Write`] and return its errors, so the
//! command can tell a closed pipe from a real failure.

pub mod callgrind;
pub mod check;
pub mod chrome;
pub mod diff;
pub mod escape;
pub(crate) mod fit;
pub mod flamegraph;
pub mod folded;
pub mod html;
pub mod json;
pub mod markdown;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod pprof;
pub mod pstats;
pub mod speedscope;
pub mod table;

use mtanalyze_model::report::{TraceSummary, Warning};

/// A duration in nanoseconds for humans: three significant digits in the
/// largest unit that keeps the number at least 1 (`812ns`, `12.3µs`,
/// `4.56ms`, `1.20s`). Whole numbers of nanoseconds print without decimals;
/// fractions (averages) print with three significant digits (`3.33ns`).
pub(crate) fn duration(ns: f64) -> String {
    if !ns.is_finite() || ns <= 0.0 {
        return "0ns".to_owned();
    }
    if ns < 999.5 && ns.fract() == 0.0 {
        return format!("{ns:.0}ns");
    }
    const UNITS: [(&str, f64); 4] = [("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)];
    for (i, (unit, scale)) in UNITS.iter().enumerate() {
        let v = ns / scale;
        let last = i == UNITS.len() - 1;
        // The value as it will print, so 999.96µs becomes 1.00ms, not 1000µs.
        let (text, rounded) = three_digits(v);
        if rounded < 1000.0 || last {
            return format!("{text}{unit}");
        }
    }
    unreachable!("the last unit always returns")
}

/// `v` with three significant digits (at least 0 decimals), and the value
/// that text stands for.
fn three_digits(v: f64) -> (String, f64) {
    let decimals = if v < 9.995 {
        2
    } else if v < 99.95 {
        1
    } else {
        0
    };
    let text = format!("{v:.decimals$}");
    let rounded = text.parse().unwrap_or(v);
    (text, rounded)
}

/// `total/primitive` when they differ (like pstats), else `total`.
pub(crate) fn calls(total: u64, primitive: u64) -> String {
    if total == primitive {
        total.to_string()
    } else {
        format!("{total}/{primitive}")
    }
}

/// The one-line summary of warnings printed on stderr after a report:
/// `3 warnings: exit_on_empty_stack x2 (first at thread 1 at 140 ns), ...`;
/// a loss of many items is one warning, `dropped_events (234774 events)`.
/// `None` when there are none.
pub fn warnings_summary(warnings: &[Warning]) -> Option<String> {
    let total = problems(warnings);
    if total == 0 {
        return None;
    }
    let kinds: Vec<String> = warnings.iter().map(Warning::brief).collect();
    let noun = if total == 1 { "warning" } else { "warnings" };
    // A warning's place can quote a name from the trace.
    Some(escape::escape(&format!("{total} {noun}: {}", kinds.join(", "))).into_owned())
}

/// The lines that follow [`warnings_summary`] when the report kept each
/// warning's places (`--warnings all`): one per place, indented, names
/// escaped. Empty when it kept none.
pub fn warnings_details(warnings: &[Warning]) -> Vec<String> {
    warnings
        .iter()
        .flat_map(|w| {
            w.details.iter().map(move |d| {
                let line = format!("  {}: {}", w.kind, w.describe(d));
                // Stack names and frame labels are the traced program's.
                escape::escape(&line).into_owned()
            })
        })
        .collect()
}

/// How many problems the warnings count ([`Warning::problems`]); counts
/// from a file can be anything: saturates.
pub(crate) fn problems(warnings: &[Warning]) -> u64 {
    warnings
        .iter()
        .fold(0u64, |n, w| n.saturating_add(w.problems()))
}

/// The line that names the threads whose events were lost, and how much
/// of the run each lost: `events lost: thread 3 "worker" from 580ms (420ms
/// not counted), ...`. `None` when every thread's events are complete.
pub fn lost_summary(trace: &TraceSummary) -> Option<String> {
    const SHOWN: usize = 8;
    let lost: Vec<_> = trace
        .threads
        .iter()
        .filter_map(|t| Some((t, t.lost_from_ns?)))
        .collect();
    if lost.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = lost
        .iter()
        .take(SHOWN)
        .map(|(t, from)| {
            let name = if t.name.is_empty() {
                String::new()
            } else {
                format!(" {:?}", t.name)
            };
            format!(
                "thread {}{name} from {} ({} not counted)",
                t.tid,
                duration(*from as f64),
                duration(t.lost_ns as f64)
            )
        })
        .collect();
    if lost.len() > SHOWN {
        parts.push(format!("and {} more threads", lost.len() - SHOWN));
    }
    Some(format!(
        "events lost (the recorder's file was full): {}; their stacks end there",
        parts.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warning's places print one a line under its kind, the stack's
    /// name escaped; without places (not asked for), nothing prints. (The
    /// places themselves are the model's test, in `mtanalyze-model`.)
    #[test]
    fn warnings_details_print_each_place_escaped() {
        use mtanalyze_model::warnings::{LeftOpenStack, PlaceNames, Warnings};
        use mtrace_format::StackKind;
        let names = PlaceNames {
            stack_name: &|id| (id == 7).then(|| "req\x1b".to_owned()),
            stack_kind: &|_| StackKind::AsyncioTask,
            function: &|f| ["main", "handle"][f as usize].to_owned(),
        };
        let left = LeftOpenStack {
            stack: 7,
            frames: 2,
            end_ns: 99,
            thread: 4,
            open: vec![0, 1],
        };
        let mut kept = Warnings::new(true);
        kept.add_left_open(StackKind::AsyncioTask, &left);
        let rendered = warnings_details(&kept.to_report_with(Some(&names)));
        assert!(
            rendered.contains(
                &"  frames_open_at_stack_end: stack:7 \"req\\x1b\" (asyncio_task), \
                  thread 4 at 99 ns, 2 frames open: main > handle"
                    .to_owned()
            ),
            "{rendered:?}"
        );
        let mut counted = Warnings::default();
        counted.add_left_open(StackKind::AsyncioTask, &left);
        assert!(warnings_details(&counted.to_report()).is_empty());
    }

    #[test]
    fn durations_have_three_significant_digits() {
        let cases: [(f64, &str); 16] = [
            (0.0, "0ns"),
            (812.0, "812ns"),
            (5.0, "5ns"),
            (10.0 / 3.0, "3.33ns"),
            (123.456, "123ns"),
            (999.0, "999ns"),
            (999.7, "1.00µs"),
            (1_000.0, "1.00µs"),
            (12_345.0, "12.3µs"),
            (999_960.0, "1.00ms"),
            (4_560_000.0, "4.56ms"),
            (45_600_000.0, "45.6ms"),
            (456_000_000.0, "456ms"),
            (1_200_000_000.0, "1.20s"),
            (12_340_000_000.0, "12.3s"),
            (4_321_000_000_000.0, "4321s"),
        ];
        for (ns, want) in cases {
            assert_eq!(duration(ns), want, "{ns}");
        }
    }

    #[test]
    fn calls_show_primitive_only_when_different() {
        assert_eq!(calls(3, 3), "3");
        assert_eq!(calls(3, 1), "3/1");
    }

    #[test]
    fn warnings_summary_is_one_line() {
        assert_eq!(warnings_summary(&[]), None);
        let w = |kind: &str, count| Warning {
            kind: kind.into(),
            count,
            first: "thread 1 at 5 ns".into(),
            repair: "ignored".into(),
            by_stack_kind: Default::default(),
            details: Vec::new(),
        };
        assert_eq!(
            warnings_summary(&[w("exit_on_empty_stack", 2), w("exit_mismatch", 1)]).as_deref(),
            Some(
                "3 warnings: exit_on_empty_stack x2 (first at thread 1 at 5 ns), \
                 exit_mismatch x1 (first at thread 1 at 5 ns)"
            )
        );
    }

    /// A file that filled up dropped many events: one warning that says how
    /// many, not one per event; a problem of the whole trace has no place.
    #[test]
    fn a_loss_of_many_items_is_one_warning_that_counts_them() {
        let w = |kind: &str, count, first: &str| Warning {
            kind: kind.into(),
            count,
            first: first.into(),
            repair: "none".into(),
            by_stack_kind: Default::default(),
            details: Vec::new(),
        };
        let warnings = [
            w("dropped_events", 234_774, "trace"),
            w("events_lost", 1, "thread 1 at 15886389 ns"),
            w("dropped_metadata", 12, "trace"),
            w("unfinished_trace", 1, "trace"),
        ];
        assert_eq!(
            warnings_summary(&warnings).as_deref(),
            Some(
                "4 warnings: dropped_events (234774 events), \
                 events_lost x1 (first at thread 1 at 15886389 ns), \
                 dropped_metadata (12 names), unfinished_trace x1"
            )
        );
    }
}
