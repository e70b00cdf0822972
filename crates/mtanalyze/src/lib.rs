//! mtanalyze: turns an mtrace trace into cProfile-style statistics that stay
//! correct when work is spread over many threads, fibers and async tasks.
//!
//! This crate re-exports the analyzer's layers, one crate each, under one
//! set of paths. Data flows one way, one folder a stage:
//!
//! ```text
//! mtanalyze-engine  input/     load: binary map | JSON lines | Chrome JSON -> binary layout
//!                   analysis/  decode -> cut into segments -> group by stack -> replay
//!                              (stacks in parallel: frames, recursion, clock-model time)
//! mtanalyze-model              Report (one value), CheckReport, DiffReport, warnings
//! mtanalyze-render  view/      sort, filter, limit, group the rows a user asked for
//!                   render/    table, JSON, folded, flame graphs, pstats, chrome, ...
//! ```
//!
//! The face is a few calls: [`analyze`] gives a trace's [`Report`]
//! ([`analyze_with_sink`] hands each stack's row to a [`StackSink`] instead
//! of keeping it); [`analyze_many`] analyzes traces in parallel and sums
//! them into a [`Merged`] report; [`check()`] stops after the segment pass
//! and describes the file; [`marks()`] reads the named instants a program
//! recorded, without analyzing; [`diff()`] compares two reports and
//! [`gate()`] judges the change. [`view`] and [`render`] turn reports into
//! what a user reads; [`threads`] runs the parallel parts on rayon's pool
//! or, for a program that embeds the analyzer, all on the calling thread.
//! The root holds what a user needs first (these calls, their options, the
//! reports and their main rows, the errors); the rest of the model is
//! reached through [`report`], [`diff`](mod@diff), [`significance`] and
//! [`timeline`]. The analysis knows nothing about tables or command-line flags (the
//! `mtanalyze-cli` crate maps its flags to [`AnalyzeOptions`]);
//! `schemas/semantics.md` is its contract.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let trace = mtanalyze::load(std::path::Path::new("app.mtrace"))?;
//! let report = mtanalyze::analyze(&trace, &mtanalyze::AnalyzeOptions::default())?;
//! for f in &report.functions {
//!     println!("{} {} {}ns", f.function, f.ncalls, f.tottime_ns);
//! }
//! // The header lines, fitted to 80 columns (`None`: full width).
//! mtanalyze::render::table::header(&mut std::io::stdout(), &report, Some(80))?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub use mtanalyze_engine::threads;
pub use mtanalyze_render::{render, view};

/// The README's Rust examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(feature = "testing")]
pub use mtanalyze_engine::testing;
pub use mtanalyze_engine::{
    analyze, analyze_many, analyze_with_sink, check, from_bytes, jsonl_to_binary, load, marks,
    AnalyzeError, AnalyzeOptions, ImportError, InputFormat, JsonlError, LoadError, LoadedTrace,
    ManyTraces, PathMode, RecursionCollapse, TimeBound, TraceError,
};
pub use mtanalyze_model::check::CheckReport;
pub use mtanalyze_model::diff::{diff, DiffReport};
pub use mtanalyze_model::gate::{gate, GateError};
pub use mtanalyze_model::marks::Mark;
pub use mtanalyze_model::merge::Merged;
pub use mtanalyze_model::report::{
    EdgeStats, FunctionStats, Report, StackStats, TraceSummary, Warning,
};
pub use mtanalyze_model::sink::StackSink;
pub use mtanalyze_model::warnings::WarningKind;

/// The parts of a [`Report`] and of a [`CheckReport`] past their main rows:
/// keys, names, windows, labels, runs, [`merge`](report::merge) (what
/// [`analyze_many`] sums traces with), and a report whose edges are left
/// numbered ([`analyze_compact`](report::analyze_compact)).
pub mod report {
    pub use mtanalyze_engine::analyze_compact;
    pub use mtanalyze_model::check::ChunkIssue;
    pub use mtanalyze_model::compact::CompactReport;
    pub use mtanalyze_model::functions::{EntryKey, FunctionEntry};
    pub use mtanalyze_model::histogram::{bucket_bounds, bucket_of, SelfTimeHistogram};
    pub use mtanalyze_model::labels::{LabelSite, Labels};
    pub use mtanalyze_model::merge::merge;
    pub use mtanalyze_model::report::{
        CallPath, Clock, FunctionKey, StackKey, StackName, StackRows, ThreadList, ThreadSummary,
        TimeWindow, WarningDetail,
    };
    pub use mtanalyze_model::runs::{attach_runs, runs, Runs};
    pub use mtanalyze_model::sums::{EdgeSums, FunctionSums};
}

/// What [`diff()`](crate::diff()) compares and gives ([`DiffReport`]'s
/// rows), and the rules [`gate()`] judges a change by.
pub mod diff {
    pub use mtanalyze_model::diff::{
        ComparedTimes, DiffOptions, EdgeDelta, EdgeDiff, EdgeSide, FunctionDelta, FunctionDiff,
        FunctionSide, Match, PathDiff,
    };
    pub use mtanalyze_model::gate::{GateBreach, GateChange, GateField, GateOp, GateRule};

    #[cfg(doc)]
    use crate::{gate, DiffReport};
}

/// Whether a change between runs is more than noise: the estimate, its
/// test and the verdict a diff's rows carry.
pub mod significance {
    pub use mtanalyze_model::significance::{
        format_p, mann_whitney, Estimate, MedianChange, Method, RankTest, Samples, Significance,
        SignificanceOptions, Tested, Verdict, MIN_FRAMES_FOR_RANKS,
    };
}

/// How a trace would be analyzed, and why: the engine the planner picks
/// for it and what the choice looked at (`mtanalyze --debug-plan`).
pub mod plan {
    pub use mtanalyze_engine::{plan as of, Engine, Plan};
}

/// A trace replayed as time slices per stack, for the views that draw time
/// (Chrome's trace, the HTML page's timeline) rather than sum it.
pub mod timeline {
    pub use mtanalyze_engine::Timelines;
    pub use mtanalyze_model::timeline::{
        ClosedFrame, Pause, Slice, SliceKind, StackActivity, StackTimeline, TimelineSource,
        TimelineStack,
    };
}
