//! Problems found in the input: counted by kind, with the first place each
//! happened, and the repair applied. Warnings never abort a report.
//!
//! Accumulators from parallel workers merge by adding counts and keeping the
//! earliest location, so the result does not depend on scheduling.
//!
//! Asked for details (`--warnings all`), an accumulator also keeps every
//! occurrence with its place; the report sorts them by place, so they do
//! not depend on scheduling either. Not asked, it keeps none: a damaged
//! trace can hold a warning per event.

use std::collections::BTreeMap;

use mtrace_format::StackKind;

use crate::report::{Warning, WarningDetail, BUILTIN_FILE};

/// A kind of problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WarningKind {
    /// A thread's timestamp went backwards.
    ClockBackwards,
    /// An exit closed a frame that was not on top.
    ExitMismatch,
    /// An exit named a function not open on its stack.
    ExitNotOpen,
    /// An exit on an empty stack.
    ExitOnEmpty,
    /// A stack ran on two threads at once.
    StackOnTwoThreads,
    /// A chunk could not be decoded.
    DamagedChunk,
    /// An event could not be decoded; the rest of its chunk was dropped.
    DamagedEvent,
    /// The file ends inside a chunk.
    TruncatedChunk,
    /// Chunks of a thread are missing (ring overwrite or loss).
    LostChunks,
    /// Frames open before a thread's surviving chunks, taken from a snapshot.
    FramesFromSnapshot,
    /// A function id with no metadata record.
    UnknownFunction,
    /// The metadata region is damaged.
    DamagedMetadata,
    /// The recorder never finished the file (killed, or still running).
    Unfinished,
    /// The recorder dropped events because the file was full.
    DroppedEvents,
    /// The recorder lost a thread's events from a `lost` mark on.
    EventsLost,
    /// The recorder dropped names (of functions, stacks, threads) because
    /// its metadata region was full.
    DroppedMetadata,
    /// An `end` of a logical stack that does not fit the stack's life (it
    /// ran at or after the end, never ran, or ended again later).
    EndIgnored,
    /// A child process of the recorded program could not record (its
    /// `NAME.pid<PID>.failed` note beside the parent's trace says why).
    ChildNotRecorded,
    /// Frames still open on a logical stack at its `end`: a task dropped
    /// mid-call, or a `tracing` span closed in another task than the one
    /// it opened in.
    FramesOpenAtStackEnd,
    /// The Python program made subinterpreters, whose code is not
    /// recorded (each interpreter has its own monitoring).
    SubinterpreterNotRecorded,
}

impl WarningKind {
    /// Machine-readable name.
    pub fn name(self) -> &'static str {
        match self {
            WarningKind::ClockBackwards => "clock_backwards",
            WarningKind::ExitMismatch => "exit_mismatch",
            WarningKind::ExitNotOpen => "exit_not_open",
            WarningKind::ExitOnEmpty => "exit_on_empty_stack",
            WarningKind::StackOnTwoThreads => "stack_on_two_threads",
            WarningKind::DamagedChunk => "damaged_chunk",
            WarningKind::DamagedEvent => "damaged_event",
            WarningKind::TruncatedChunk => "truncated_chunk",
            WarningKind::LostChunks => "lost_chunks",
            WarningKind::FramesFromSnapshot => "frames_from_snapshot",
            WarningKind::UnknownFunction => "unknown_function",
            WarningKind::DamagedMetadata => "damaged_metadata",
            WarningKind::Unfinished => "unfinished_trace",
            WarningKind::DroppedEvents => "dropped_events",
            WarningKind::EventsLost => "events_lost",
            WarningKind::DroppedMetadata => "dropped_metadata",
            WarningKind::EndIgnored => "end_ignored",
            WarningKind::ChildNotRecorded => "child_not_recorded",
            WarningKind::FramesOpenAtStackEnd => "frames_open_at_stack_end",
            WarningKind::SubinterpreterNotRecorded => "subinterpreter_not_recorded",
        }
    }

    /// What the analyzer does about it.
    pub fn repair(self) -> &'static str {
        match self {
            WarningKind::ClockBackwards => "clamped to the thread's previous timestamp",
            WarningKind::ExitMismatch => "closed the frames above it at the same time, then it",
            WarningKind::ExitNotOpen => "ignored the exit",
            WarningKind::ExitOnEmpty => "ignored the exit",
            WarningKind::StackOnTwoThreads => "replayed the stretches one after the other",
            WarningKind::DamagedChunk => "skipped the chunk",
            WarningKind::DamagedEvent => "kept the events before it, dropped the rest of the chunk",
            WarningKind::TruncatedChunk => "kept the whole events before the cut",
            WarningKind::LostChunks => "restarted the thread from the next chunk's snapshot",
            WarningKind::FramesFromSnapshot => "opened them at the chunk's start",
            WarningKind::UnknownFunction => "named it fn#<id>",
            WarningKind::DamagedMetadata => "kept the records before the damage",
            WarningKind::Unfinished => "closed open frames at the last timestamp",
            WarningKind::DroppedEvents => "none: the events are gone",
            WarningKind::EventsLost => {
                "ended the thread's stacks at the mark (open frames counted as cut_short), or, if the thread's events resume, paused them until then; the lost stretch is not counted"
            }
            WarningKind::DroppedMetadata => {
                "shown by id: stacks as stack:<id>, functions as fn#<id> (names outgrowing the first region go on in chunk slots; these were dropped because the file could not grow, a ring had given a quarter of its slots to names, or a record was larger than a chunk slot: record with a larger capacity, or without a ring)"
            }
            WarningKind::EndIgnored => {
                "ignored the end (only a stack's latest end counts, and only if no thread ran the stack at it or after it)"
            }
            WarningKind::ChildNotRecorded => {
                "none: that process ran unprofiled; the report holds the processes that recorded"
            }
            WarningKind::FramesOpenAtStackEnd => {
                "closed them at the stack's end, counted in cut_short (a task dropped mid-call, or a span closed in another task than it opened in)"
            }
            WarningKind::SubinterpreterNotRecorded => {
                "none: code run in a subinterpreter is not recorded; its time counts in the call that ran it (_interpreters.exec, call, run_string)"
            }
        }
    }
}

/// Whether a function of a Python trace (`name`, `file` as recorded) makes
/// a subinterpreter: the built-ins of `_interpreters` (3.13+),
/// `_xxsubinterpreters` (3.12) and CPython's test helpers that run code in
/// one. A call of one is how a trace shows that code ran where mtrace
/// does not record (with built-ins recorded, as they are by default).
#[doc(hidden)]
pub fn makes_subinterpreter(name: &str, file: &str) -> bool {
    const MAKERS: [&str; 4] = [
        "<built-in method _interpreters.create>",
        "<built-in method _xxsubinterpreters.create>",
        "<built-in method _testcapi.run_in_subinterp>",
        "<built-in method _testinternalcapi.run_in_subinterp_with_config>",
    ];
    file == BUILTIN_FILE && MAKERS.contains(&name)
}

/// [`Warning::first`] of a warning not tied to one place.
const TRACE_PLACE: &str = "trace";

// What a rendered warning says of itself: its one wording in summaries.
impl Warning {
    /// What `count` counts when the warning is one problem that lost many
    /// items (`dropped_events`: events, `dropped_metadata`: names), else
    /// `None`: then each of the `count` is a problem of its own.
    pub fn items(&self) -> Option<&'static str> {
        if self.kind == WarningKind::DroppedEvents.name() {
            Some("events")
        } else if self.kind == WarningKind::DroppedMetadata.name() {
            Some("names")
        } else {
            None
        }
    }

    /// How many problems the warning counts: one for a count of lost
    /// items ([`Warning::items`]), else `count`.
    pub fn problems(&self) -> u64 {
        if self.items().is_some() {
            1
        } else {
            self.count
        }
    }

    /// Where it happened first, or `None` when it is not tied to a place
    /// (the whole trace).
    pub fn place(&self) -> Option<&str> {
        (self.first != TRACE_PLACE).then_some(self.first.as_str())
    }

    /// The warning in a summary line: `exit_mismatch x2 (first at thread 1
    /// at 5 ns)`, `dropped_events (234774 events)`, `unfinished_trace x1`.
    pub fn brief(&self) -> String {
        let mut text = match self.items() {
            Some(items) => format!("{} ({} {items})", self.kind, self.count),
            None => format!("{} x{}", self.kind, self.count),
        };
        if let Some(split) = self.split_by_stack_kind() {
            text.push_str(&format!(" ({split})"));
        }
        if let Some(place) = self.place() {
            text.push_str(&format!(" (first at {place})"));
        }
        text
    }

    /// One of its places (`details`) in words, not escaped: `stack:7
    /// "req-1" (asyncio_task), thread 3 at 1200 ns, 2 frames open: main >
    /// handle`, `byte 4096`, `trace (234774 events)`.
    pub fn describe(&self, d: &WarningDetail) -> String {
        let mut parts = Vec::new();
        if let Some(stack) = &d.stack {
            let mut s = stack.clone();
            if let Some(name) = &d.stack_name {
                s.push_str(&format!(" \"{name}\""));
            }
            if let Some(kind) = &d.stack_kind {
                s.push_str(&format!(" ({kind})"));
            }
            parts.push(s);
        }
        match (d.thread, d.ns) {
            (Some(t), Some(ns)) => parts.push(format!("thread {t} at {ns} ns")),
            (Some(t), None) => parts.push(format!("thread {t}")),
            (None, Some(ns)) => parts.push(format!("at {ns} ns")),
            (None, None) => {}
        }
        if let Some(b) = d.byte {
            parts.push(format!("byte {b}"));
        }
        if parts.is_empty() {
            parts.push(TRACE_PLACE.to_owned());
        }
        let mut text = parts.join(", ");
        match self.items() {
            Some(items) => text.push_str(&format!(" ({} {items})", d.count)),
            None if d.open_frames.is_empty() && d.count != 1 => {
                text.push_str(&format!(" x{}", d.count));
            }
            None => {}
        }
        if !d.open_frames.is_empty() {
            let noun = if d.open_frames.len() == 1 {
                "frame"
            } else {
                "frames"
            };
            text.push_str(&format!(
                ", {} {noun} open: {}",
                d.open_frames.len(),
                d.open_frames.join(" > ")
            ));
        }
        text
    }

    /// `5700 on asyncio tasks, 50 on greenlets`: how the count splits by
    /// kind of stack, largest first; `None` when there is nothing to
    /// tell (no split, or only stacks whose kind the trace does not say).
    fn split_by_stack_kind(&self) -> Option<String> {
        let only_unspecified = self
            .by_stack_kind
            .keys()
            .all(|k| k == StackKind::Unspecified.name());
        if only_unspecified {
            return None;
        }
        let mut parts: Vec<(&String, &u64)> = self.by_stack_kind.iter().collect();
        parts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let words: Vec<String> = parts
            .into_iter()
            .map(|(name, n)| match StackKind::from_name(name) {
                Some(kind) => format!("{n} on {}", kind.plural()),
                None => format!("{n} on {name}"),
            })
            .collect();
        Some(words.join(", "))
    }
}

/// Where a problem happened, ordered so the earliest comes first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[doc(hidden)]
pub enum Location {
    /// A byte offset in the file.
    Byte(u64),
    /// A time on a thread.
    Time {
        /// ns from time zero.
        ns: u64,
        /// Thread id.
        thread: u64,
    },
    /// Not tied to one place.
    Trace,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Byte(b) => write!(f, "byte {b}"),
            Location::Time { ns, thread } => write!(f, "thread {thread} at {ns} ns"),
            Location::Trace => f.write_str(TRACE_PLACE),
        }
    }
}

/// One place a warning happened, kept when details are asked for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Occurrence {
    kind: WarningKind,
    at: Location,
    /// The logical stack, by id.
    stack: Option<u64>,
    /// How many the warning counts here.
    n: u64,
    /// The frames left open, outermost first, by dense function index.
    open: Vec<u32>,
}

/// What turns a kept [`Occurrence`]'s ids into names: a stack's name and
/// kind by id, a function's label by dense index.
#[doc(hidden)]
pub struct PlaceNames<'a> {
    /// A logical stack's name, if the trace gives one.
    pub stack_name: &'a dyn Fn(u64) -> Option<String>,
    /// A logical stack's kind.
    pub stack_kind: &'a dyn Fn(u64) -> StackKind,
    /// A function's label.
    pub function: &'a dyn Fn(u32) -> String,
}

/// Counts of each kind with their first location.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[doc(hidden)]
pub struct Warnings {
    map: BTreeMap<WarningKind, (u64, Location)>,
    /// [`WarningKind::FramesOpenAtStackEnd`]'s count by the kind of stack
    /// the frames were left open on.
    left_open_by_kind: BTreeMap<StackKind, u64>,
    /// Every occurrence, if details are kept (`None`: they are not).
    details: Option<Vec<Occurrence>>,
}

impl Warnings {
    /// An empty accumulator that keeps every occurrence's place if
    /// `details` (`--warnings all`), else only counts.
    #[doc(hidden)]
    pub fn new(details: bool) -> Warnings {
        Warnings {
            details: details.then(Vec::new),
            ..Warnings::default()
        }
    }

    /// Records `n` occurrences of `kind` at `at`.
    #[doc(hidden)]
    pub fn add_n(&mut self, kind: WarningKind, n: u64, at: Location) {
        if n == 0 {
            return;
        }
        if let Some(details) = &mut self.details {
            details.push(Occurrence {
                kind,
                at: at.clone(),
                stack: None,
                n,
                open: Vec::new(),
            });
        }
        self.count_n(kind, n, at);
    }

    /// Counts `n` of `kind` at `at`, keeping no detail.
    fn count_n(&mut self, kind: WarningKind, n: u64, at: Location) {
        let e = self.map.entry(kind).or_insert((0, at.clone()));
        // A count the file claims (dropped events) may be anything: saturate.
        e.0 = e.0.saturating_add(n);
        if at < e.1 {
            e.1 = at;
        }
    }

    /// Warns of `calls` that made subinterpreters, whose code the trace
    /// does not hold.
    #[doc(hidden)]
    pub fn add_subinterpreters(&mut self, calls: u64) {
        self.add_n(
            WarningKind::SubinterpreterNotRecorded,
            calls,
            Location::Trace,
        );
    }

    /// Records one occurrence.
    #[doc(hidden)]
    pub fn add(&mut self, kind: WarningKind, at: Location) {
        self.add_n(kind, 1, at);
    }

    /// Adds another accumulator's counts, and its details if it kept any.
    #[doc(hidden)]
    pub fn merge(&mut self, other: Warnings) {
        for (kind, (n, at)) in other.map {
            self.count_n(kind, n, at);
        }
        if let Some(theirs) = other.details {
            self.details.get_or_insert_with(Vec::new).extend(theirs);
        }
        for (kind, n) in other.left_open_by_kind {
            let e = self.left_open_by_kind.entry(kind).or_default();
            *e = e.saturating_add(n);
        }
    }

    /// How many of `kind`.
    #[doc(hidden)]
    pub fn count(&self, kind: WarningKind) -> u64 {
        self.map.get(&kind).map_or(0, |e| e.0)
    }

    /// Warns of the frames the analyzer closed at the `end` of a logical
    /// stack of `kind` because the program left them open there ("Frames
    /// left open" in `semantics.md`).
    #[doc(hidden)]
    pub fn add_left_open(&mut self, kind: StackKind, left: &LeftOpenStack) {
        if left.frames == 0 {
            return;
        }
        // The summary's place stays the whole trace: the details say which
        // stacks.
        self.count_n(
            WarningKind::FramesOpenAtStackEnd,
            left.frames,
            Location::Trace,
        );
        if let Some(details) = &mut self.details {
            details.push(Occurrence {
                kind: WarningKind::FramesOpenAtStackEnd,
                at: Location::Time {
                    ns: left.end_ns,
                    thread: left.thread,
                },
                stack: Some(left.stack),
                n: left.frames,
                open: left.open.clone(),
            });
        }
        let e = self.left_open_by_kind.entry(kind).or_default();
        *e = e.saturating_add(left.frames);
    }

    /// Whether every occurrence's place is kept.
    #[doc(hidden)]
    pub fn keeps_details(&self) -> bool {
        self.details.is_some()
    }

    /// The report's form, in a fixed order, without details (see
    /// [`Warnings::to_report_with`]).
    #[doc(hidden)]
    pub fn to_report(&self) -> Vec<Warning> {
        self.to_report_with(None)
    }

    /// The report's form, in a fixed order, each warning with its details
    /// if they were kept, named by `names`.
    #[doc(hidden)]
    pub fn to_report_with(&self, names: Option<&PlaceNames<'_>>) -> Vec<Warning> {
        let mut details: BTreeMap<WarningKind, Vec<WarningDetail>> = BTreeMap::new();
        if let (Some(kept), Some(names)) = (&self.details, names) {
            let mut kept: Vec<&Occurrence> = kept.iter().collect();
            kept.sort_unstable();
            for o in kept {
                details.entry(o.kind).or_default().push(o.to_detail(names));
            }
        }
        self.map
            .iter()
            .map(|(kind, (count, at))| Warning {
                kind: kind.name().to_owned(),
                count: *count,
                first: at.to_string(),
                repair: kind.repair().to_owned(),
                by_stack_kind: match kind {
                    WarningKind::FramesOpenAtStackEnd => self
                        .left_open_by_kind
                        .iter()
                        .map(|(k, n)| (k.name().to_owned(), *n))
                        .collect(),
                    _ => BTreeMap::new(),
                },
                details: details.remove(kind).unwrap_or_default(),
            })
            .collect()
    }
}

impl Occurrence {
    fn to_detail(&self, names: &PlaceNames<'_>) -> WarningDetail {
        let mut d = WarningDetail {
            count: self.n,
            ..WarningDetail::default()
        };
        match self.at {
            Location::Byte(b) => d.byte = Some(b),
            Location::Time { ns, thread } => {
                d.ns = Some(ns);
                d.thread = Some(thread);
            }
            Location::Trace => {}
        }
        if let Some(id) = self.stack {
            d.stack = Some(format!("stack:{id}"));
            d.stack_name = (names.stack_name)(id);
            d.stack_kind = Some((names.stack_kind)(id).name().to_owned());
        }
        d.open_frames = self.open.iter().map(|&f| (names.function)(f)).collect();
        d
    }
}

/// The frames left open on one logical stack at its `end` (see
/// `LeftOpen` in the replay's tally).
#[derive(Clone, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub struct LeftOpenStack {
    /// The stack's id.
    pub stack: u64,
    /// How many frames (entered in the time window).
    pub frames: u64,
    /// When the stack ended, ns from time zero.
    pub end_ns: u64,
    /// The thread that recorded its `end`.
    pub thread: u64,
    /// Those frames, outermost first, by dense function index.
    pub open: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_keeps_the_earliest_location_in_any_order() {
        let mut a = Warnings::default();
        a.add(
            WarningKind::ExitOnEmpty,
            Location::Time { ns: 50, thread: 2 },
        );
        let mut b = Warnings::default();
        b.add(
            WarningKind::ExitOnEmpty,
            Location::Time { ns: 10, thread: 3 },
        );
        let mut ab = a.clone();
        ab.merge(b.clone());
        let mut ba = b;
        ba.merge(a);
        assert_eq!(ab, ba);
        assert_eq!(ab.to_report()[0].first, "thread 3 at 10 ns");
        assert_eq!(ab.count(WarningKind::ExitOnEmpty), 2);
    }

    fn names() -> PlaceNames<'static> {
        PlaceNames {
            stack_name: &|id| (id == 7).then(|| "req\x1b".to_owned()),
            stack_kind: &|_| StackKind::AsyncioTask,
            function: &|f| ["main", "handle"][f as usize].to_owned(),
        }
    }

    /// Places are kept only when asked, sorted by place whatever the order
    /// the workers merged in, and named: the stack by name and kind, the
    /// frames by label, outermost first.
    #[test]
    fn details_are_kept_only_when_asked_and_sorted_by_place() {
        let fill = |w: &mut Warnings, late_first: bool| {
            let mut at = [(50, 2), (10, 3)];
            if late_first {
                at.reverse();
            }
            for (ns, thread) in at {
                w.add(WarningKind::ExitOnEmpty, Location::Time { ns, thread });
            }
            w.add_n(WarningKind::DroppedEvents, 1000, Location::Trace);
            let left = LeftOpenStack {
                stack: 7,
                frames: 2,
                end_ns: 99,
                thread: 4,
                open: vec![0, 1],
            };
            w.add_left_open(StackKind::AsyncioTask, &left);
        };
        let mut counted = Warnings::default();
        fill(&mut counted, false);
        assert!(!counted.keeps_details());
        let plain = counted.to_report_with(Some(&names()));
        assert!(plain.iter().all(|w| w.details.is_empty()));

        let (mut a, mut b) = (Warnings::new(true), Warnings::new(true));
        fill(&mut a, false);
        fill(&mut b, true);
        let mut ab = Warnings::default();
        ab.merge(a.clone());
        ab.merge(b.clone());
        let mut ba = Warnings::default();
        ba.merge(b);
        ba.merge(a);
        let report = ab.to_report_with(Some(&names()));
        assert_eq!(report, ba.to_report_with(Some(&names())));
        // The counts are those of a report without details.
        let mut same_counts = report.clone();
        for w in &mut same_counts {
            w.details.clear();
        }
        let mut twice = Warnings::default();
        fill(&mut twice, false);
        fill(&mut twice, true);
        assert_eq!(same_counts, twice.to_report());

        let lines = |kind: &str| -> Vec<String> {
            let w = report.iter().find(|w| w.kind == kind).expect("warned");
            w.details.iter().map(|d| w.describe(d)).collect()
        };
        assert_eq!(
            lines("exit_on_empty_stack"),
            [
                "thread 3 at 10 ns",
                "thread 3 at 10 ns",
                "thread 2 at 50 ns",
                "thread 2 at 50 ns"
            ]
        );
        assert_eq!(lines("dropped_events"), ["trace (1000 events)"; 2]);
        assert_eq!(
            lines("frames_open_at_stack_end"),
            ["stack:7 \"req\x1b\" (asyncio_task), thread 4 at 99 ns, 2 frames open: main > handle";
                2]
        );
    }
}
