//! Timelines as values: each stack's slices (frames and paused
//! stretches), the frames as they close, and each stack's activity over
//! time. The analysis makes them (`Timelines` replays a trace stack by
//! stack and implements [`TimelineSource`]); the timeline exports (Chrome
//! trace, speedscope, Parquet, the HTML page) read them, and nothing else.

use crate::functions::FunctionEntry;
use crate::report::Clock;

/// The `cat` of the slices `mtanalyze export --format chrome` writes for a
/// stack's paused stretches: imported as a switch away from the thread's
/// stack and back, so an exported trace reads back with the same numbers.
#[doc(hidden)]
pub const PAUSED_CATEGORY: &str = "mtrace.paused";

/// What a timeline export reads: the trace's identity, its functions and
/// stacks, and each stack's slices or closed frames, made on request one
/// stack at a time (so memory grows with the largest stack, not the trace).
pub trait TimelineSource {
    /// Where the trace came from (a path).
    fn source(&self) -> &str;
    /// The recorded process id (0 if unknown).
    fn pid(&self) -> u32;
    /// The clock that decides when stacks are paused.
    fn clock(&self) -> Clock;
    /// Every function, by the index [`SliceKind::Frame`] and
    /// [`ClosedFrame::func`] hold.
    fn functions(&self) -> &[FunctionEntry<'_>];
    /// The selected stacks, in the order of [`crate::report::Report::stacks`].
    fn stacks(&self) -> &[TimelineStack];
    /// The slices of stack `index` of [`TimelineSource::stacks`] (empty for
    /// an index out of range).
    fn stack(&self, index: usize) -> StackTimeline;
    /// Hands `each` every frame of stack `index` as it closes (innermost
    /// first), with the numbers the report sums; nothing for an index out
    /// of range.
    fn frames(&self, index: usize, each: &mut dyn FnMut(&ClosedFrame));
}

/// A frame as it closes, with the numbers the statistics add up: summed
/// by function, `self_ns` is `tottime`, and `active_ns` and `paused_ns` of
/// the frames that are not `recursive` are `cumtime` and `paused`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClosedFrame {
    /// The function (dense index).
    pub func: u32,
    /// The function of the frame it was called from (`None` at the root).
    pub parent: Option<u32>,
    /// Frames open below it.
    pub depth: u32,
    /// When it was entered, ns from time zero (clamped to the time window).
    pub enter_ns: u64,
    /// When it was left (never before `enter_ns`; clamped likewise).
    pub exit_ns: u64,
    /// Time its stack ran while it was open, under the clock.
    pub active_ns: u64,
    /// `active_ns` minus its direct children's.
    pub self_ns: u64,
    /// Time it was open while its stack did not run.
    pub paused_ns: u64,
    /// A frame of the same function was open below it.
    pub recursive: bool,
    /// It was entered inside the time window, so its call counts (always,
    /// without a window); else it shows only its time inside the window.
    pub counted: bool,
}

/// What a slice stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceKind {
    /// A frame of the function with this index in [`TimelineSource::functions`].
    Frame(u32),
    /// A stretch during which the stack did not run.
    Paused,
}

/// One interval on a stack's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// A frame or a paused stretch.
    pub kind: SliceKind,
    /// Slices open around it (0: a root).
    pub depth: u32,
    /// Start, ns from time zero.
    pub start_ns: u64,
    /// End, ns from time zero (never before the start).
    pub end_ns: u64,
}

/// One stack's slices, in pre-order: by start time, an enclosing slice
/// before the slices inside it. Slices nest properly: each lies within the
/// nearest earlier slice of smaller depth.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackTimeline {
    /// The slices.
    pub slices: Vec<Slice>,
    /// When the stack first ran.
    pub start_ns: u64,
    /// Its last switch away, or the end of the trace if frames were open there.
    pub end_ns: u64,
}

/// A stack the timelines cover.
#[derive(Clone, Debug)]
pub struct TimelineStack {
    /// `thread:<tid>` or `stack:<id>`.
    pub id: String,
    /// Its recorded name ("" if none).
    pub name: String,
    /// About how many events its replay reads (for progress).
    pub events: u64,
}

impl TimelineStack {
    /// The name if there is one, else the id (what reports call a stack).
    #[doc(hidden)]
    pub fn label(&self) -> &str {
        if self.name.is_empty() {
            &self.id
        } else {
            &self.name
        }
    }
}

/// What one stack did over time, without its frames: when it ran, when it
/// was paused (and woken), and on which threads. The HTML page's timeline
/// draws these; `Timelines::activities` makes them. All times are ns
/// from time zero, clipped to the time window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackActivity {
    /// `thread:<tid>` or `stack:<id>`.
    pub id: String,
    /// Its recorded name ("" if none).
    pub name: String,
    /// When it first ran.
    pub start_ns: u64,
    /// Its last switch away, or the end of the trace if frames were open there.
    pub end_ns: u64,
    /// The stretches threads spent on it (thread id, start, end): wall
    /// time on the thread, in time order.
    pub on_threads: Vec<(u64, u64, u64)>,
    /// The stretches it ran under the clock, in time order.
    pub running: Vec<(u64, u64)>,
    /// The stretches it did not run, between `start_ns` and `end_ns`.
    pub paused: Vec<Pause>,
    /// Stretches were merged: a pause shorter than this is counted in the
    /// running stretch around it, and a thread's stretches closer than
    /// this are one (0: nothing merged). Set when a stack has more
    /// stretches than asked for.
    pub merged_below_ns: u64,
}

/// A stretch during which a stack did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// Its start (the switch away).
    pub start_ns: u64,
    /// Its end (the stack ran again, or its life ended).
    pub end_ns: u64,
    /// The first wake of the stack's task in it: from there to the end it
    /// was scheduled (ready, waiting for a thread), before it waiting.
    /// `None`: no wake (or a trace without wakes): all of it waiting.
    pub woken_ns: Option<u64>,
}
