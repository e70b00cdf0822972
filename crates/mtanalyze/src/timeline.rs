//! Timelines: when each frame of each stack was open, and when each stack
//! was paused. This is what the timeline exports (Chrome trace, speedscope)
//! draw; the statistics in [`crate::Report`] are sums over exactly these
//! intervals.
//!
//! ```text
//! time        0    10   20   30   40   50   60   70   80   90
//! task-1 runs      [=========)               [=============)      switched out at 30, in at 60
//! slices           handler ........................... ]
//!                       query ......................]
//!                            paused ........)
//! ```
//!
//! Paused stretches become slices of their own, nested under the frame that
//! was innermost when the stack stopped running. A viewer that computes a
//! frame's self time as its duration minus its direct children's durations
//! then shows this report's self time (`schemas/semantics.md`): the paused
//! time is a child, not the frame's own.
//!
//! This is a second replay, separate from the engine's: it walks the same
//! segments with the same repairs, but keeps every frame instead of summing.
//! It runs only for the exports, one stack at a time, so memory grows with
//! the largest stack, not the trace.

use std::ops::Range;

use rayon::prelude::*;

use crate::clock::{Clock, GilTimeline};
use crate::decode::{decode, Batches, Decoded, FunctionEntry, FunctionTable};
use crate::engine::{AnalyzeError, AnalyzeOptions};
use crate::input::LoadedTrace;
use crate::replay::stack_name;
use crate::segment::{cut_thread, Seed, Segment, StackKey};
use mtrace_format::{Event, EventKind};

/// What a slice stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceKind {
    /// A frame of the function with this index in [`Timelines::functions`].
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
    /// Threads it ran on, ascending.
    pub threads: Vec<u64>,
    /// About how many events its replay reads (for progress).
    pub events: u64,
    key: StackKey,
    range: Range<usize>,
}

impl TimelineStack {
    /// The name if there is one, else the id (what reports call a stack).
    pub fn label(&self) -> &str {
        if self.name.is_empty() {
            &self.id
        } else {
            &self.name
        }
    }
}

/// A decoded, segmented trace ready to replay stack by stack.
pub struct Timelines<'a> {
    source: String,
    decoded: Decoded<'a>,
    functions: FunctionTable,
    segments: Vec<Segment>,
    stacks: Vec<TimelineStack>,
    end_tick: u64,
    clock: Clock,
    gil: Option<GilTimeline>,
}

impl<'a> Timelines<'a> {
    /// Decodes and segments `trace`, keeping the stacks `opts` selects
    /// (`threads`, `stacks`) under `opts.clock` (default: the trace's
    /// preferred clock, else `stack`), as [`crate::analyze`] does.
    pub fn new(trace: &'a LoadedTrace, opts: &AnalyzeOptions) -> Result<Self, AnalyzeError> {
        let decoded = decode(trace.bytes()).map_err(|error| AnalyzeError::Format {
            source_name: trace.source.clone(),
            error,
        })?;
        let passes: Vec<_> = (0..decoded.threads.len() as u32)
            .into_par_iter()
            .map(|i| cut_thread(&decoded, i))
            .collect();
        let mut functions = decoded.functions.clone();
        let mut unknown: Vec<u32> = passes
            .iter()
            .flat_map(|p| p.unknown_functions.iter().copied())
            .collect();
        unknown.sort_unstable();
        unknown.dedup();
        for id in unknown {
            functions.insert_unknown(id);
        }
        let h = decoded.file.header();
        let last = passes.iter().filter_map(|p| p.last_tick).max();
        let end_tick = match (h.end_tick, last) {
            (Some(e), Some(l)) => e.max(l),
            (Some(e), None) => e,
            (None, l) => l.unwrap_or(h.clock.start_tick),
        };
        let clock = opts.clock.unwrap_or(match h.preferred_clock {
            mtrace_format::PreferredClock::Gil => Clock::Gil,
            mtrace_format::PreferredClock::Wall => Clock::Wall,
            _ => Clock::Stack,
        });
        let mut segments: Vec<Segment> = passes.into_iter().flat_map(|p| p.segments).collect();
        segments.sort_by_key(|s| (s.stack, s.start_tick, s.tid, s.start));
        let mut stacks = Vec::new();
        let mut i = 0;
        while i < segments.len() {
            let key = segments[i].stack;
            let start = i;
            while i < segments.len() && segments[i].stack == key {
                i += 1;
            }
            let segs = &segments[start..i];
            if !wanted(&decoded, key, segs, opts) {
                continue;
            }
            let mut threads: Vec<u64> = segs.iter().map(|s| s.tid).collect();
            threads.sort_unstable();
            threads.dedup();
            stacks.push(TimelineStack {
                id: key.id_string(),
                name: stack_name(&decoded, key),
                threads,
                events: segs.iter().map(|s| segment_events(&decoded, s)).sum(),
                key,
                range: start..i,
            });
        }
        stacks.sort_by_key(|s| stack_order(s.key));
        let gil = (clock == Clock::Gil).then(|| GilTimeline::build(&decoded, end_tick));
        Ok(Timelines {
            source: trace.source.clone(),
            decoded,
            functions,
            segments,
            stacks,
            end_tick,
            clock,
            gil,
        })
    }

    /// Where the trace came from (a path).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The recorded process id (0 if unknown).
    pub fn pid(&self) -> u32 {
        self.decoded.file.header().pid
    }

    /// The clock that decides when stacks are paused.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Every function, by the index [`SliceKind::Frame`] holds.
    pub fn functions(&self) -> &[FunctionEntry] {
        self.functions.entries()
    }

    /// The selected stacks: threads' own stacks by thread id, then logical
    /// stacks by id (the order of [`crate::Report::stacks`]).
    pub fn stacks(&self) -> &[TimelineStack] {
        &self.stacks
    }

    /// The end of the trace, ns from time zero.
    pub fn end_ns(&self) -> u64 {
        self.ns(self.end_tick)
    }

    fn ns(&self, tick: u64) -> u64 {
        self.decoded.scale.ns(tick)
    }

    /// Replays stack `index` of [`Timelines::stacks`] (an empty timeline
    /// for an index out of range).
    pub fn stack(&self, index: usize) -> StackTimeline {
        let Some(stack) = self.stacks.get(index) else {
            return StackTimeline::default();
        };
        let segs = &self.segments[stack.range.clone()];
        let end_ns = self.end_ns();
        let mut open: Vec<(u32, u64)> = Vec::new(); // (function, enter ns)
        let mut frames: Vec<Slice> = Vec::new();
        let mut running: Vec<(u64, u64)> = Vec::new();
        // Times never go backwards on one stack, even when its stretches
        // overlap (a stack on two threads at once), so frames always nest.
        let mut now = 0u64;
        let mut prev_end_ns = 0u64;
        let first_start = segs.first().map_or(end_ns, |s| self.ns(s.start_tick));
        let close = |open: &mut Vec<(u32, u64)>, frames: &mut Vec<Slice>, at: u64| {
            if let Some((func, start)) = open.pop() {
                frames.push(Slice {
                    kind: SliceKind::Frame(func),
                    depth: open.len() as u32,
                    start_ns: start,
                    end_ns: at.max(start),
                });
            }
        };
        for seg in segs {
            let start_ns = self.ns(seg.start_tick);
            let seg_end_ns = seg.switched_away().map_or(end_ns, |t| self.ns(t));
            prev_end_ns = prev_end_ns.max(seg_end_ns);
            now = now.max(start_ns);
            if seg.seed != Seed::None {
                let truth = self.snapshot_frames(seg);
                let common = open
                    .iter()
                    .zip(&truth)
                    .take_while(|((f, _), t)| f == *t)
                    .count();
                while open.len() > common {
                    close(&mut open, &mut frames, now);
                }
                open.extend(truth[common..].iter().map(|&f| (f, now)));
            }
            if self.clock == Clock::Stack {
                running.push((start_ns, seg_end_ns));
            }
            let thread = &self.decoded.threads[seg.thread as usize];
            let mut batches = Batches::new(
                &self.decoded.file,
                &thread.chunks,
                seg.start,
                seg.end,
                seg.start_tick,
            );
            let mut gil = self.gil.as_ref().map(|g| g.cursor(seg.tid));
            let mut last: Option<(u64, u64)> = None;
            while let Some(batch) = batches.next_batch() {
                for raw in batch.events() {
                    // Damage was counted by the segment pass; stop where it did.
                    let Ok(event) = Event::decode(raw) else { break };
                    let (tick, _) = batches.clamp(event.tick);
                    let ns = self.ns(tick);
                    if let Some(g) = &mut gil {
                        if let Some((lt, lns)) = last {
                            let run = g.run_after(lt, lns, ns);
                            running.push((lns, lns + run));
                        }
                        last = Some((tick, ns));
                    }
                    now = now.max(ns);
                    match event.kind {
                        EventKind::Enter(f) => {
                            if let Some(d) = self.functions.get(f.0) {
                                open.push((d, now));
                            }
                        }
                        EventKind::Exit(f) => {
                            let Some(d) = self.functions.get(f.0) else {
                                continue;
                            };
                            // The engine's repairs: close down to the newest
                            // open frame of the function; ignore the exit if
                            // there is none.
                            if let Some(pos) = open.iter().rposition(|(g, _)| *g == d) {
                                while open.len() > pos {
                                    close(&mut open, &mut frames, now);
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            if let (Some(g), Some((lt, lns))) = (&mut gil, last) {
                let run = g.run_after(lt, lns, seg_end_ns);
                running.push((lns, lns + run));
            }
        }
        let open_at_end = !open.is_empty();
        let end = end_ns.max(now);
        while !open.is_empty() {
            close(&mut open, &mut frames, end);
        }
        let last_ns = if open_at_end { end } else { prev_end_ns };
        let life = (first_start, last_ns.max(first_start));
        if self.clock == Clock::Wall {
            running = vec![life];
        }
        let paused = gaps(running, life);
        StackTimeline {
            slices: nest(frames, paused),
            start_ns: life.0,
            end_ns: life.1,
        }
    }

    /// The frames a segment starts with after lost chunks (its chunk's
    /// snapshot), outermost first.
    fn snapshot_frames(&self, seg: &Segment) -> Vec<u32> {
        let thread = &self.decoded.threads[seg.thread as usize];
        let Some(chunk) = thread
            .chunks
            .get(seg.start.chunk as usize)
            .and_then(|c| self.decoded.file.chunk(c.slot).ok().flatten())
        else {
            return Vec::new();
        };
        let ids: Vec<_> = if seg.seed == Seed::Own {
            chunk.snapshot.own_frames().collect()
        } else {
            chunk.snapshot.stack_frames().collect()
        };
        ids.iter()
            .filter_map(|id| self.functions.get(id.0))
            .collect()
    }
}

/// The engine's `--thread` / `--stack` selection.
fn wanted(decoded: &Decoded<'_>, key: StackKey, segs: &[Segment], opts: &AnalyzeOptions) -> bool {
    let thread_ok = opts.threads.is_empty() || segs.iter().any(|s| opts.threads.contains(&s.tid));
    let stack_ok = opts.stacks.is_empty()
        || opts.stacks.iter().any(|want| {
            *want == key.id_string()
                || matches!(key, StackKey::Logical(id)
                    if decoded.stack_names.get(&id).is_some_and(|n| n == want))
        });
    thread_ok && stack_ok
}

/// Own stacks by thread id, then logical stacks by id.
fn stack_order(key: StackKey) -> (u8, u64) {
    match key {
        StackKey::Own(t) => (0, t),
        StackKey::Logical(s) => (1, s),
    }
}

/// About how many events a segment covers (chunk event counts between its
/// start and end positions).
fn segment_events(decoded: &Decoded<'_>, seg: &Segment) -> u64 {
    let chunks = &decoded.threads[seg.thread as usize].chunks;
    let (s, e) = (seg.start, seg.end);
    let count = |c: u32| chunks.get(c as usize).map_or(0, |r| r.events as u64);
    if s.chunk == e.chunk {
        return (e.event as u64).saturating_sub(s.event as u64);
    }
    let mut n = count(s.chunk).saturating_sub(s.event as u64);
    for c in s.chunk + 1..e.chunk {
        n += count(c);
    }
    n + (e.event as u64).min(count(e.chunk))
}

/// The parts of `life` not covered by any of `running`.
fn gaps(mut running: Vec<(u64, u64)>, life: (u64, u64)) -> Vec<(u64, u64)> {
    running.sort_unstable();
    let mut out = Vec::new();
    let mut at = life.0;
    for (s, e) in running {
        let (s, e) = (s.max(life.0), e.min(life.1));
        if s > at {
            out.push((at, s));
        }
        at = at.max(e);
    }
    if at < life.1 {
        out.push((at, life.1));
    }
    out
}

/// Orders frames and paused stretches into one properly nested pre-order
/// list with depths. Frames nest by construction; a paused stretch goes
/// under the innermost frame open when it starts. Anything that would
/// cross its parent's end (only possible on broken input) is cut there.
fn nest(frames: Vec<Slice>, paused: Vec<(u64, u64)>) -> Vec<Slice> {
    // Frames were collected as they closed, innermost first; their depth
    // orders equal starts so parents come first. Paused stretches go last
    // among equal intervals: they are always innermost.
    let mut all: Vec<(Slice, u32)> = frames.into_iter().map(|f| (f, f.depth)).collect();
    all.extend(paused.into_iter().map(|(s, e)| {
        let slice = Slice {
            kind: SliceKind::Paused,
            depth: 0,
            start_ns: s,
            end_ns: e,
        };
        (slice, u32::MAX)
    }));
    all.sort_by_key(|(s, order)| (s.start_ns, std::cmp::Reverse(s.end_ns), *order));
    let mut out = Vec::with_capacity(all.len());
    let mut ends: Vec<u64> = Vec::new();
    for (mut s, _) in all {
        while ends.last().is_some_and(|&e| e <= s.start_ns) {
            ends.pop();
        }
        if let Some(&parent_end) = ends.last() {
            s.end_ns = s.end_ns.min(parent_end);
        }
        s.depth = ends.len() as u32;
        ends.push(s.end_ns);
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::from_bytes;

    const HANDOFF: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": "task-1"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "handler"}
{"ts": 20, "tid": 1, "ev": "enter", "fn": "query"}
{"ts": 30, "tid": 1, "ev": "switch", "stack": null}
{"ts": 40, "tid": 1, "ev": "exit", "fn": "main"}
{"ts": 60, "tid": 2, "ev": "switch", "stack": "task-1"}
{"ts": 75, "tid": 2, "ev": "exit", "fn": "query"}
{"ts": 80, "tid": 2, "ev": "exit", "fn": "handler"}
{"ts": 90, "tid": 2, "ev": "switch", "stack": null}
"#;

    const GIL_TURNS: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "work"}
{"ts": 10, "tid": 2, "ev": "enter", "fn": "work"}
{"ts": 25, "tid": 1, "ev": "enter", "fn": "io"}
{"ts": 30, "tid": 1, "ev": "exit", "fn": "io"}
{"ts": 40, "tid": 2, "ev": "exit", "fn": "work"}
{"ts": 50, "tid": 1, "ev": "exit", "fn": "work"}
"#;

    /// (label, [(name or "paused", depth, start, end)]) per stack.
    type Shape = Vec<(String, Vec<(String, u32, u64, u64)>)>;

    fn shape(jsonl: &str, clock: Clock) -> Shape {
        let bytes = crate::jsonl::to_binary(jsonl).unwrap();
        let trace = from_bytes("t", bytes).unwrap();
        let opts = AnalyzeOptions {
            clock: Some(clock),
            ..AnalyzeOptions::default()
        };
        let t = Timelines::new(&trace, &opts).unwrap();
        (0..t.stacks().len())
            .map(|i| {
                let slices = t
                    .stack(i)
                    .slices
                    .iter()
                    .map(|s| {
                        let name = match s.kind {
                            SliceKind::Frame(f) => t.functions()[f as usize].key.function.clone(),
                            SliceKind::Paused => "paused".into(),
                        };
                        (name, s.depth, s.start_ns, s.end_ns)
                    })
                    .collect();
                (t.stacks()[i].label().to_owned(), slices)
            })
            .collect()
    }

    fn s(name: &str, depth: u32, start: u64, end: u64) -> (String, u32, u64, u64) {
        (name.to_owned(), depth, start, end)
    }

    #[test]
    fn worked_example_1_under_the_stack_clock() {
        assert_eq!(
            shape(HANDOFF, Clock::Stack),
            vec![
                (
                    "thread:1".into(),
                    vec![s("main", 0, 0, 40), s("paused", 1, 10, 30)]
                ),
                ("thread:2".into(), vec![s("paused", 0, 60, 90)]),
                (
                    "task-1".into(),
                    vec![
                        s("handler", 0, 10, 80),
                        s("query", 1, 20, 75),
                        s("paused", 2, 30, 60)
                    ]
                ),
            ]
        );
    }

    #[test]
    fn worked_example_1_under_the_wall_clock_pauses_nothing() {
        let all = shape(HANDOFF, Clock::Wall);
        assert!(all.iter().flat_map(|(_, s)| s).all(|s| s.0 != "paused"));
        assert_eq!(
            all[2].1,
            vec![s("handler", 0, 10, 80), s("query", 1, 20, 75)]
        );
    }

    #[test]
    fn worked_example_3_under_the_gil_clock() {
        assert_eq!(
            shape(GIL_TURNS, Clock::Gil),
            vec![
                (
                    "thread:1".into(),
                    vec![
                        s("work", 0, 0, 50),
                        s("paused", 1, 10, 25),
                        s("io", 1, 25, 30),
                        s("paused", 1, 40, 50)
                    ]
                ),
                (
                    "thread:2".into(),
                    vec![s("work", 0, 10, 40), s("paused", 1, 25, 40)]
                ),
            ]
        );
    }

    #[test]
    fn gaps_are_the_uncovered_parts_of_a_lifetime() {
        assert_eq!(
            gaps(vec![(30, 50), (0, 10), (5, 12)], (0, 60)),
            vec![(12, 30), (50, 60)]
        );
        assert_eq!(gaps(vec![], (3, 3)), vec![]);
    }

    #[test]
    fn nesting_cuts_a_slice_at_its_parents_end() {
        let f = |depth, start_ns, end_ns| Slice {
            kind: SliceKind::Frame(0),
            depth,
            start_ns,
            end_ns,
        };
        let out = nest(vec![f(1, 5, 15), f(0, 0, 10)], vec![(8, 20)]);
        let spans: Vec<_> = out
            .iter()
            .map(|s| (s.depth, s.start_ns, s.end_ns))
            .collect();
        assert_eq!(spans, vec![(0, 0, 10), (1, 5, 10), (2, 8, 10)]);
    }
}
