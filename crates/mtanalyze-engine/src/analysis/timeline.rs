//! Timelines: when each frame of each stack was open, and when each stack
//! was paused. This is what the timeline exports (Chrome trace, speedscope)
//! draw; the statistics in [`mtanalyze_model::report::Report`] are sums over exactly these
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
//! The frames and stretches come from the engine's own replay, through an
//! [`Observer`]; this module only lays them out. It runs only for the
//! exports, one stack at a time, so memory grows with the largest stack,
//! not the trace.

use crate::analysis::frames::Observer;
use crate::analysis::options::{AnalyzeError, AnalyzeOptions};
use crate::analysis::paths::ROOT;
use crate::analysis::replay::stack_name;
use crate::analysis::stacks::Analysis;
use crate::input::LoadedTrace;
use mtanalyze_model::functions::FunctionEntry;
use mtanalyze_model::report::Clock;
use mtanalyze_model::timeline::{
    ClosedFrame, Pause, Slice, SliceKind, StackActivity, StackTimeline, TimelineSource,
    TimelineStack,
};
use mtanalyze_model::warnings::Warnings;

/// A decoded, segmented trace ready to replay stack by stack.
pub struct Timelines<'a> {
    source: String,
    analysis: Analysis<'a>,
    stacks: Vec<TimelineStack>,
}

impl<'a> Timelines<'a> {
    /// Decodes and segments `trace`, keeping the stacks `opts` selects
    /// (`threads`, `stacks`) under `opts.clock` (default: the trace's
    /// preferred clock, else `stack`), exactly as [`crate::analyze`] does.
    pub fn new(trace: &'a LoadedTrace, opts: &AnalyzeOptions) -> Result<Self, AnalyzeError> {
        let analysis = Analysis::new(trace, opts)?;
        let stacks = (0..analysis.stack_count())
            .filter_map(|i| {
                let key = analysis.stack_key(i)?;
                Some(TimelineStack {
                    id: key.to_string(),
                    name: stack_name(analysis.decoded(), key).into_owned(),
                    events: analysis.stack_weight(i),
                })
            })
            .collect();
        Ok(Timelines {
            source: trace.source.clone(),
            analysis,
            stacks,
        })
    }

    /// Events in the selected stacks (a progress bar's total: the exports
    /// report every stack's events as they write it).
    pub fn events(&self) -> u64 {
        self.stacks.iter().map(|s| s.events).sum()
    }
}

impl TimelineSource for Timelines<'_> {
    fn source(&self) -> &str {
        &self.source
    }

    /// The recorded process id (0 if unknown).
    fn pid(&self) -> u32 {
        self.analysis.decoded().file.header().pid
    }

    /// The clock that decides when stacks are paused.
    fn clock(&self) -> Clock {
        self.analysis.clock()
    }

    /// Every function, by the index [`SliceKind::Frame`] holds.
    fn functions(&self) -> &[FunctionEntry<'_>] {
        self.analysis.functions().entries()
    }

    /// The selected stacks: threads' own stacks by thread id, then logical
    /// stacks by id (the order of [`mtanalyze_model::report::Report::stacks`]).
    fn stacks(&self) -> &[TimelineStack] {
        &self.stacks
    }

    /// Replays stack `index` of [`Timelines::stacks`] through the engine,
    /// handing `each` every frame as it closes (innermost first), with the
    /// numbers the report sums. Nothing for an index out of range.
    fn frames(&self, index: usize, each: &mut dyn FnMut(&ClosedFrame)) {
        let mut seen = EachFrame(each);
        let mut tally = self.analysis.new_tally(false);
        let mut warnings = Warnings::default();
        // An index out of range replays nothing, which is all it can say.
        let _ = self
            .analysis
            .replay(index, &mut tally, &mut warnings, ROOT, &mut seen);
    }

    /// Replays stack `index` of [`Timelines::stacks`] through the engine,
    /// keeping every frame and running stretch (an empty timeline for an
    /// index out of range).
    fn stack(&self, index: usize) -> StackTimeline {
        let mut seen = Collect::default();
        let mut tally = self.analysis.new_tally(false);
        let mut warnings = Warnings::default();
        if self
            .analysis
            .replay(index, &mut tally, &mut warnings, ROOT, &mut seen)
            .is_none()
        {
            return StackTimeline::default();
        }
        let paused = gaps(seen.running, seen.life);
        StackTimeline {
            slices: nest(seen.frames, paused),
            start_ns: seen.life.0,
            end_ns: seen.life.1,
        }
    }
}

impl Timelines<'_> {
    /// The activity of the stacks `ids` names (`thread:3`, `stack:7`),
    /// in the order of [`mtanalyze_model::report::Report::stacks`]; ids not selected are
    /// left out. Each stack is replayed again. A stack with more than
    /// `max_stretches` running stretches (or thread stretches) has the
    /// shortest pauses merged into the stretches around them until it has
    /// no more (see [`StackActivity::merged_below_ns`]).
    pub fn activities(&self, ids: &[String], max_stretches: usize) -> Vec<StackActivity> {
        let wanted: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
        (0..self.stacks.len())
            .filter(|&i| wanted.contains(self.stacks[i].id.as_str()))
            .map(|i| self.activity(i, max_stretches.max(1)))
            .collect()
    }

    fn activity(&self, index: usize, max: usize) -> StackActivity {
        let mut seen = Collect::default();
        let mut tally = self.analysis.new_tally(false);
        let mut warnings = Warnings::default();
        let stack = &self.stacks[index];
        let _ = self
            .analysis
            .replay(index, &mut tally, &mut warnings, ROOT, &mut seen);
        let (start_ns, end_ns) = seen.life;
        let mut running = seen.running;
        running.sort_unstable();
        let mut on_threads = self.analysis.spans(index);
        on_threads.sort_unstable_by_key(|&(tid, s, e)| (s, e, tid));
        // Merge pauses shorter than `below`, doubling it until few enough remain.
        let mut below = 0u64;
        let mut runs = merge_runs(&running, below);
        let mut spans = merge_spans(&on_threads, below);
        let life = end_ns.saturating_sub(start_ns);
        while runs.len().max(spans.len()) > max {
            below = match below {
                0 => (life / max as u64).max(1),
                b => b.saturating_mul(2),
            };
            runs = merge_runs(&running, below);
            spans = merge_spans(&on_threads, below);
        }
        let wakes = self.analysis.wakes_of(index);
        let paused = gaps(runs.clone(), (start_ns, end_ns))
            .into_iter()
            .map(|(s, e)| {
                let first = wakes.partition_point(|&w| w < s);
                let woken_ns = wakes.get(first).copied().filter(|&w| w < e);
                Pause {
                    start_ns: s,
                    end_ns: e,
                    woken_ns,
                }
            })
            .collect();
        StackActivity {
            id: stack.id.clone(),
            name: stack.name.clone(),
            start_ns,
            end_ns,
            on_threads: spans,
            running: runs,
            paused,
            merged_below_ns: below,
        }
    }
}

/// Sorted stretches with those that touch, overlap or lie less than
/// `below` apart made one.
fn merge_runs(sorted: &[(u64, u64)], below: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(s, e) in sorted {
        match out.last_mut() {
            Some(last) if s <= last.1.saturating_add(below) => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// [`merge_runs`] for stretches on threads: only a thread's own stretches
/// merge (the input is in time order).
fn merge_spans(sorted: &[(u64, u64, u64)], below: u64) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    // The last stretch kept of each thread, by index into `out`.
    let mut last: rustc_hash::FxHashMap<u64, usize> = rustc_hash::FxHashMap::default();
    for &(tid, s, e) in sorted {
        if let Some(&i) = last.get(&tid) {
            // Another thread's stretch in between keeps them apart unless
            // merging was asked for.
            let next = below > 0 || i + 1 == out.len();
            let l = &mut out[i];
            if next && s <= l.2.saturating_add(below) {
                l.2 = l.2.max(e);
                continue;
            }
        }
        last.insert(tid, out.len());
        out.push((tid, s, e));
    }
    out
}

/// Hands each frame to a closure as it closes.
struct EachFrame<'f>(&'f mut dyn FnMut(&ClosedFrame));

impl Observer for EachFrame<'_> {
    fn frame(&mut self, f: &ClosedFrame) {
        (self.0)(f);
    }
}

/// Keeps what the replay shows.
#[derive(Default)]
struct Collect {
    frames: Vec<Slice>,
    running: Vec<(u64, u64)>,
    life: (u64, u64),
}

impl Observer for Collect {
    fn frame(&mut self, f: &ClosedFrame) {
        self.frames.push(Slice {
            kind: SliceKind::Frame(f.func),
            depth: f.depth,
            start_ns: f.enter_ns,
            end_ns: f.exit_ns,
        });
    }

    fn running(&mut self, start_ns: u64, end_ns: u64) {
        self.running.push((start_ns, end_ns));
    }

    fn life(&mut self, start_ns: u64, end_ns: u64) {
        self.life = (start_ns, end_ns);
    }
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
    // orders equal starts so parents come first. Paused stretches go after
    // every frame that starts with them: they are always innermost, and a
    // frame that begins (and perhaps ends) at the instant the stack is
    // switched out ran before the switch, outside the pause.
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
    all.sort_by_key(|(s, order)| {
        let paused = *order == u32::MAX;
        (s.start_ns, paused, std::cmp::Reverse(s.end_ns), *order)
    });
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

    use mtanalyze_testkit::worked_examples::{FIBER_HANDOFF as HANDOFF, GIL_TURNS};

    /// (label, [(name or "paused", depth, start, end)]) per stack.
    type Shape = Vec<(String, Vec<(String, u32, u64, u64)>)>;

    fn shape(jsonl: &str, clock: Clock) -> Shape {
        let bytes = crate::input::jsonl::to_binary(jsonl).unwrap();
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
                            SliceKind::Frame(f) => {
                                t.functions()[f as usize].key.function.to_string()
                            }
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

    /// (stack, function, parent, depth, enter, exit, active, self, paused, recursive).
    type Row = (
        String,
        String,
        Option<String>,
        u32,
        u64,
        u64,
        u64,
        u64,
        u64,
        bool,
    );

    fn frames(jsonl: &str, clock: Clock) -> (Vec<Row>, mtanalyze_model::report::Report) {
        let bytes = crate::input::jsonl::to_binary(jsonl).unwrap();
        let trace = from_bytes("t", bytes).unwrap();
        let opts = AnalyzeOptions {
            clock: Some(clock),
            ..AnalyzeOptions::default()
        };
        let t = Timelines::new(&trace, &opts).unwrap();
        let name = |f: u32| t.functions()[f as usize].key.function.to_string();
        let mut rows = Vec::new();
        for i in 0..t.stacks().len() {
            t.frames(i, &mut |f| {
                rows.push((
                    t.stacks()[i].label().to_owned(),
                    name(f.func),
                    f.parent.map(name),
                    f.depth,
                    f.enter_ns,
                    f.exit_ns,
                    f.active_ns,
                    f.self_ns,
                    f.paused_ns,
                    f.recursive,
                ))
            });
        }
        (rows, crate::analyze(&trace, &opts).unwrap())
    }

    #[test]
    fn frames_of_worked_example_1_carry_the_reports_numbers() {
        let (rows, _) = frames(HANDOFF, Clock::Stack);
        let r = |stack: &str, f: &str, parent: Option<&str>, depth, times: [u64; 5]| {
            let [enter, exit, active, self_ns, paused] = times;
            let parent = parent.map(str::to_owned);
            let (stack, f) = (stack.to_owned(), f.to_owned());
            (
                stack, f, parent, depth, enter, exit, active, self_ns, paused, false,
            )
        };
        assert_eq!(
            rows,
            vec![
                r("thread:1", "main", None, 0, [0, 40, 20, 20, 20]),
                r("task-1", "query", Some("handler"), 1, [20, 75, 25, 25, 30]),
                r("task-1", "handler", None, 0, [10, 80, 40, 15, 30]),
            ]
        );
    }

    #[test]
    fn frames_sum_to_the_function_table() {
        use mtanalyze_testkit::worked_examples::RECURSION;
        for (jsonl, clock) in [
            (HANDOFF, Clock::Stack),
            (HANDOFF, Clock::Wall),
            (GIL_TURNS, Clock::Gil),
            (RECURSION, Clock::Stack),
        ] {
            let (rows, report) = frames(jsonl, clock);
            assert!(rows.iter().any(|r| r.9) || jsonl != RECURSION);
            for f in &report.functions {
                let mine = rows.iter().filter(|r| r.1 == f.function);
                let outer = || mine.clone().filter(|r| !r.9);
                assert_eq!(mine.clone().count() as u64, f.ncalls, "{}", f.function);
                assert_eq!(outer().count() as u64, f.primitive_calls);
                assert_eq!(mine.clone().map(|r| r.7).sum::<u64>(), f.tottime_ns);
                assert_eq!(outer().map(|r| r.6).sum::<u64>(), f.cumtime_ns);
                assert_eq!(outer().map(|r| r.8).sum::<u64>(), f.paused_ns);
            }
        }
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
