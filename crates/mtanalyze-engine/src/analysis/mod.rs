//! The analysis: from a loaded trace to a
//! [`Report`](mtanalyze_model::report::Report). The planner
//! (`plan.rs`) decodes the trace once and picks the engine; its module doc
//! has the table of which trace goes where.
//!
//! ```text
//! plan      decode once, choose the engine, where the rows go         plan.rs
//! decode    chunks -> each thread's ordered chunk sequence, names    decode/
//!           (and marks, on the report's time scale)                marks.rs
//! cut       each thread's events -> segments (threads in parallel)   cut.rs, segment.rs
//! prepare   the above, the complete function table, file warnings    prepare.rs
//! group     segments by stack, in time order; select stacks;         stacks.rs,
//!           which `end` events count, each stack's end                ends.rs
//! replay    each stack (stacks in parallel): frames, recursion,      replay.rs, frames.rs,
//!           time by the clock model                                  clock.rs
//! assemble  the summed statistics -> Report (edges still numbered:   assemble.rs
//!           a CompactReport, made rows unless a merge sums them)
//!
//! A time window (`window.rs`) confines what the replay counts.
//!
//! batch     the stages above, stacks replayed in parallel; or one   pipeline.rs
//!           after the other into one tally (many small traces)
//! stream    cut and replay in steps of time, stacks finished at their   stream/
//!           `end` (the `stack` and `wall` clocks without call paths or
//!           stack selection, on whole traces of many stacks): the same
//!           report, without holding every segment
//! ```
//!
//! A thread's own stack runs on that thread only, so [`analyze`] lets the
//! segment pass replay it while reading the thread (one read of those
//! events instead of two; with the `stack` and `wall` clocks, no call
//! paths, and when a tally per thread fits the budget in `prepare.rs`);
//! only its frames still open at the end wait for the end of the trace.
//! Logical stacks, which move between threads, are replayed once all
//! segments are known. The timeline exports (`timeline.rs`) replay every
//! stack in the second pass, one at a time, keeping every frame; `check`
//! (`check.rs`) stops after the segment pass. Several traces go through
//! `many.rs`, a batch at a time in parallel, one report at a time out.
//!
//! Every parallel stage produces values that are merged by summing or by
//! sorting on stable keys, so the report is identical on every run and with
//! any number of rayon threads. This module knows nothing about tables or
//! command-line flags; `schemas/semantics.md` is its contract.

mod assemble;
mod check;
pub(crate) mod clock;
mod cut;
pub(crate) mod decode;
mod ends;
mod frames;
mod many;
mod marks;
mod options;
pub(crate) mod paths;
mod pipeline;
mod plan;
mod prepare;
mod replay;
pub(crate) mod segment;
mod stacks;
mod stream;
pub(crate) mod timeline;
mod window;

pub use check::check;
pub use many::{analyze_many, ManyTraces, TraceError};
pub use marks::marks;
pub use options::{AnalyzeError, AnalyzeOptions, PathMode, TimeBound};
pub use paths::RecursionCollapse;
#[cfg(feature = "testing")]
pub use plan::testing;
pub use plan::{analyze, analyze_compact, analyze_with_sink, plan, Engine, Plan};
