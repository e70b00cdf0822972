//! The planner: the one place that decides how a trace is analyzed. The
//! trace is decoded once (as the options ask); [`plan_for`] looks at the
//! decoded trace and sets the stream's steps and where it replays the
//! own stacks. Either engine does whatever the options ask (call paths, a
//! selection of stacks, windows, clocks); the engines (`stream/`,
//! `pipeline.rs`) run what they are given and decide nothing of it.
//!
//! | the trace and the options | engine | why |
//! |---|---|---|
//! | one trace | stream (`stream/`): cut and replay in steps of time; steps of [`STEP_EVENTS`] if the trace names at least [`SHORT_STEPS_FROM_STACKS`] stacks, else of [`STEP_EVENTS_FEW_STACKS`]; each thread's own stack replayed by its segment pass into a tally of its own if one a thread fits the memory the trace allows, else in the lanes as logical stacks are | holds only the stacks alive at a time (a task-per-request trace names thousands) and a step's segments; a few long-lived stacks hold little a step, and long steps wait less at the step's end for a core another program took |
//! | one of many traces (`many.rs`): at most [`SEQUENTIAL_BYTES`], and at least two traces per rayon thread | sequential ([`pipeline::sequential`]): one stage and one stack after the other on the worker's thread, into the worker's one tally; [`pipeline::numbered`] when the worker sums its traces and there are no call paths | the traces, not their stacks, run in parallel; a small trace costs no tables of its own |
//! | one of many, bigger, or few traces | as one trace | one big trace among small ones does not end the run on one core |
//!
//! Only the sequential choice is made before the trace is decoded (a
//! numbered decode numbers the functions as the worker's sums do); every
//! other from the decoded trace.
//!
//! Where the stack rows go: kept in the report (`StackRows::Kept`),
//! counted only (`Counted`), or handed to a sink ([`analyze_with_sink`]):
//! the stream hands each as its stack finishes, the batch after the replay.
//!
//! Functions the metadata does not name (lost with a damaged or cut
//! metadata region or chunk header, or named by a damaged event) are
//! numbered by either engine: the batch after its passes, the stream as
//! its steps meet them (`FreshFunctions`).
//!
//! When an engine cannot go on: a stream that meets mid-way what it cannot
//! judge and the headers did not say (a stack run again after its end,
//! from a writer that breaks the format's rules) gives the decoded trace
//! back and the batch ([`pipeline::batch`]: every segment cut, grouped by
//! stack, stacks replayed in parallel) goes on from it;
//! rows already handed to a sink stay handed, and the sink is told to start
//! again. No other engine gives up.

use crate::analysis::options::{AnalyzeError, AnalyzeOptions, PathMode};
use crate::analysis::pipeline::{self, Scratch};
use crate::analysis::prepare::{decode_for, tallies_fit, Decoding};
use crate::analysis::stream::{
    analyze_streamed, StepSize, StreamPlan, Streamed, STEP_EVENTS, STEP_EVENTS_PER_FRAME,
};
use crate::input::LoadedTrace;
use mtanalyze_model::compact::CompactReport;
use mtanalyze_model::merge::Sums;
use mtanalyze_model::report::{Report, StackRows};
use mtanalyze_model::sink::{NoSink, StackSink};

/// How many logical stacks a trace's metadata names from which its
/// stream reads [`STEP_EVENTS`] a step, not [`STEP_EVENTS_FEW_STACKS`].
/// Tasks are named (the recorder names every task it sees), so a
/// task-per-request trace names thousands, and a long step holds every
/// stack that starts in it until the step ends.
pub(crate) const SHORT_STEPS_FROM_STACKS: usize = 1024;

/// How many events a stream step reads, at least, on a trace that names
/// fewer than [`SHORT_STEPS_FROM_STACKS`] stacks. Every step ends at a join
/// of the workers, and a worker that another program's process took the
/// core from holds up the step until it runs again: on a 100 M-event trace
/// of 16 fibers, with two busy processes beside it on 2 cores, steps of
/// [`STEP_EVENTS`] took twice the wall time of replaying every stack at
/// once, steps of this many 1.04 times, for 9 MB of memory against 28 MB
/// (`docs/BENCHMARKS.md`, "Long steps for a few stacks").
pub(crate) const STEP_EVENTS_FEW_STACKS: u64 = 1 << 22;

/// Traces of many up to this size are analyzed sequentially by their
/// worker; bigger ones as one trace (see the table). 32 MiB is some two
/// million events: a fraction of a second on one core.
pub(crate) const SEQUENTIAL_BYTES: usize = 32 << 20;

/// The engines for one trace (see the module's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// `stream/`: cut and replay in steps of time.
    Stream,
    /// `pipeline.rs`: every segment cut, then the stacks replayed (where
    /// a stream gave up, and for the tests that compare the engines).
    Batch,
}

/// How one trace is analyzed, decided once from its decoded chunks and
/// the options: the planner's table (`analysis/plan.rs`) as a value, with
/// what it looked at. `mtanalyze --debug-plan` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The engine chosen.
    pub engine: Engine,
    /// Events a stream step reads, all threads together, at least: by the
    /// stacks the trace names.
    pub step_events: u64,
    /// Events a stream step reads for each open frame the step before set
    /// aside (with the stacks it takes up again), if that is more.
    pub step_events_per_frame: u64,
    /// Events in the trace's chunks.
    pub events: u64,
    /// Logical stacks the trace's metadata names.
    pub named_stacks: usize,
    /// Named stacks from which the steps are short.
    pub short_steps_from_stacks: usize,
    /// Threads that recorded events.
    pub threads: usize,
    /// A running sum per thread fits the memory the trace allows: the
    /// segment pass replays each thread's own stack into its own (else
    /// the lanes do, as logical stacks).
    pub tallies_fit: bool,
}

/// What the tests that compare the engines change in the plan: the
/// stream's steps, or the batch engine only. [`Knobs::PLAN`] is the
/// planner's own choice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Knobs {
    /// Events a stream step reads, at least, whatever the stacks the trace
    /// names (`None`: the planner's, by them).
    pub(crate) step_events: Option<u64>,
    /// And for each open frame the step before set aside (0:
    /// `step_events` exactly).
    pub(crate) step_events_per_frame: u64,
    /// Never stream.
    pub(crate) batch_only: bool,
}

impl Knobs {
    /// The planner's own choice.
    pub(crate) const PLAN: Knobs = Knobs {
        step_events: None,
        step_events_per_frame: STEP_EVENTS_PER_FRAME,
        batch_only: false,
    };

    /// Steps of exactly `events` events (the tests that compare steps).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) const fn exact_steps(events: u64) -> Knobs {
        Knobs {
            step_events: Some(events),
            step_events_per_frame: 0,
            batch_only: false,
        }
    }
}

/// The plan for the decoded trace (see the module's table): the options
/// shaped the decode, and either engine does whatever they ask.
fn plan_for(decoding: &Decoding<'_>, file_len: usize, knobs: &Knobs) -> Plan {
    let decoded = &decoding.decoded;
    // Whatever the trace lost (names with a damaged metadata region or
    // chunk header, chunks, events) either engine judges alike.
    let events = decoded.events();
    let named_stacks = decoded.stack_names.len();
    let tallies_fit = tallies_fit(decoded, file_len);
    let engine = if knobs.batch_only {
        Engine::Batch
    } else {
        Engine::Stream
    };
    let step_events = knobs
        .step_events
        .unwrap_or(if named_stacks >= SHORT_STEPS_FROM_STACKS {
            STEP_EVENTS
        } else {
            STEP_EVENTS_FEW_STACKS
        });
    Plan {
        engine,
        step_events,
        step_events_per_frame: knobs.step_events_per_frame,
        events,
        named_stacks,
        short_steps_from_stacks: SHORT_STEPS_FROM_STACKS,
        threads: decoded.threads.len(),
        tallies_fit,
    }
}

impl Plan {
    /// What the stream is to do.
    pub(crate) fn stream(&self) -> StreamPlan {
        StreamPlan {
            step: StepSize {
                events: self.step_events,
                per_frame: self.step_events_per_frame,
            },
            own_in_passes: self.tallies_fit,
        }
    }
}

/// How [`analyze`] would run `trace` with `opts`: decodes its chunks and
/// plans, analyzing nothing.
pub fn plan(trace: &LoadedTrace, opts: &AnalyzeOptions) -> Result<Plan, AnalyzeError> {
    let opts = rows_for(opts, false);
    let decoding = decode_for(trace, Some(&opts), None)?;
    Ok(plan_for(&decoding, trace.bytes().len(), &Knobs::PLAN))
}

/// Analyzes one trace: decodes it, chooses the engine and runs it (see the
/// module doc). With `sink`, each stack's row is handed to it (the
/// report's `stack_rows` is then `Handed`); without, rows are kept or
/// counted as `opts` say (`Handed` is taken as `Counted`: no one is there
/// to take them). `stage_done` is called with each stage's name as it
/// ends (`decode`, then `cut`, `group`, `replay` for the batch, `replay`
/// for a stream, which is every step).
pub(crate) fn analyze_one(
    trace: &LoadedTrace,
    opts: &AnalyzeOptions,
    sink: Option<&mut dyn StackSink>,
    knobs: Knobs,
    stage_done: &mut dyn FnMut(&'static str),
) -> Result<CompactReport, AnalyzeError> {
    let handed = sink.is_some();
    let opts = rows_for(opts, handed);
    let mut no_sink = NoSink;
    let sink: &mut dyn StackSink = match sink {
        Some(s) => s,
        None => &mut no_sink,
    };
    let decoding = decode_for(trace, Some(&opts), None)?;
    stage_done("decode");
    let plan = plan_for(&decoding, trace.bytes().len(), &knobs);
    let decoding = match plan.engine {
        Engine::Stream => {
            match analyze_streamed(trace, decoding, &opts, plan.stream(), stage_done, sink) {
                Streamed::Done(report) => return Ok(report),
                Streamed::GaveUp(decoding) => {
                    // The stream may have handed some rows before it stopped.
                    sink.restart();
                    decoding
                }
            }
        }
        Engine::Batch => decoding,
    };
    if !handed {
        return pipeline::batch(trace, decoding, &opts, stage_done);
    }
    // The batch replays every stack before any row is made: they are kept,
    // then handed.
    let kept = AnalyzeOptions {
        stack_rows: StackRows::Kept,
        ..opts
    };
    let mut compact = pipeline::batch(trace, decoding, &kept, stage_done)?;
    for row in std::mem::take(&mut compact.report.stacks) {
        sink.row(row);
    }
    compact.report.stack_rows = StackRows::Handed;
    Ok(compact)
}

/// `opts` with the stack rows going where they can: handed if there is a
/// sink, else kept or counted (`Handed` without a sink is `Counted`).
fn rows_for(opts: &AnalyzeOptions, handed: bool) -> AnalyzeOptions {
    let rows = match (handed, opts.stack_rows) {
        (true, _) => StackRows::Handed,
        (false, StackRows::Handed) => StackRows::Counted,
        (false, rows) => rows,
    };
    AnalyzeOptions {
        stack_rows: rows,
        ..opts.clone()
    }
}

/// One trace of many, analyzed by a worker (see the module's table):
/// sequentially in `scratch` if `sequential` (enough traces for every
/// thread) and the trace is small, else as one trace. With `into` (the
/// worker's sums and the trace's number among the traces summed) and no
/// call paths, the sequential way adds the function rows and edges to the
/// sums itself, and the report has none; some of them may wait in
/// `scratch` until [`Scratch::flush`].
pub(crate) fn analyze_in_worker(
    trace: &LoadedTrace,
    opts: &AnalyzeOptions,
    sequential: bool,
    scratch: &mut Scratch,
    into: Option<(&mut Sums, u32)>,
) -> Result<CompactReport, AnalyzeError> {
    let one_trace = || analyze_one(trace, opts, None, Knobs::PLAN, &mut |_| {});
    if !sequential || trace.bytes().len() > SEQUENTIAL_BYTES {
        return one_trace();
    }
    // Summed under a worker's numbers, the trace's functions have no
    // labels of its own to name the frames of its warnings' details.
    let numbered = opts.paths == PathMode::Off && !opts.warning_details;
    match into.filter(|_| numbered) {
        Some((sums, number)) => {
            let (tally, mut numbering) = scratch.summed.next_trace(sums);
            let decoding = decode_for(trace, Some(opts), Some(&mut numbering))?;
            let built = pipeline::build_numbered(trace, decoding, opts, (tally, numbering))?;
            Ok(pipeline::numbered(
                trace,
                built,
                opts,
                &mut scratch.summed,
                sums,
                number,
            ))
        }
        None => {
            let decoding = decode_for(trace, Some(opts), None)?;
            pipeline::sequential(trace, decoding, opts, scratch)
        }
    }
}

/// Analyzes a loaded trace.
pub fn analyze(trace: &LoadedTrace, opts: &AnalyzeOptions) -> Result<Report, AnalyzeError> {
    analyze_compact(trace, opts).map(CompactReport::into_report)
}

/// [`analyze`], handing each stack's row to `sink` instead of keeping it
/// (the report's `stacks` is empty, its `stack_rows` is
/// [`StackRows::Handed`]): what a view that shows some of the rows, or
/// sums of them, needs, without holding a row per stack. A trace of many
/// stacks hands the rows as their stacks finish.
pub fn analyze_with_sink(
    trace: &LoadedTrace,
    opts: &AnalyzeOptions,
    sink: &mut dyn StackSink,
) -> Result<Report, AnalyzeError> {
    let report = analyze_one(trace, opts, Some(sink), Knobs::PLAN, &mut |_| {})?;
    Ok(report.into_report())
}

/// [`analyze`], the edges left numbered (see [`CompactReport`]): for a
/// caller that reads each edge once and needs no rows of them (the pstats
/// statistics of a profile per request: no names copied per edge, no sort).
pub fn analyze_compact(
    trace: &LoadedTrace,
    opts: &AnalyzeOptions,
) -> Result<CompactReport, AnalyzeError> {
    analyze_one(trace, opts, None, Knobs::PLAN, &mut |_| {})
}

#[cfg(any(test, feature = "testing"))]
pub mod testing {
    //! The hooks the tests and the bench use to run one engine or to time
    //! the stages (the `testing` feature): not part of the library's face.

    use super::*;

    /// [`analyze`], calling `stage_done` with each stage's name as it ends:
    /// `decode`, `cut`, `group`, `replay`, `assemble` (see the `analysis`
    /// module); a streamed analysis has `decode`, `replay` (every step)
    /// and `assemble`. The analyzer bench's `--stages` prints time and
    /// heap per stage.
    pub fn analyze_in_stages(
        trace: &LoadedTrace,
        opts: &AnalyzeOptions,
        stage_done: &mut dyn FnMut(&'static str),
    ) -> Result<Report, AnalyzeError> {
        let report = analyze_one(trace, opts, None, Knobs::PLAN, stage_done)?.into_report();
        stage_done("assemble");
        Ok(report)
    }

    /// The stream alone, reading about `step_events` events a step
    /// (however many frames it sets aside), whatever the number of
    /// stacks, or `None` if it gave up (a stack run after its end).
    pub fn analyze_streamed_with(
        trace: &LoadedTrace,
        opts: &AnalyzeOptions,
        step_events: u64,
    ) -> Result<Option<Report>, AnalyzeError> {
        let opts = rows_for(opts, false);
        let decoding = decode_for(trace, Some(&opts), None)?;
        let plan = plan_for(
            &decoding,
            trace.bytes().len(),
            &Knobs::exact_steps(step_events),
        );
        let streamed = analyze_streamed(
            trace,
            decoding,
            &opts,
            plan.stream(),
            &mut |_| {},
            &mut NoSink,
        );
        Ok(match streamed {
            Streamed::Done(report) => Some(report.into_report()),
            Streamed::GaveUp(_) => None,
        })
    }

    /// The batch analysis, never streamed.
    pub fn analyze_batched(
        trace: &LoadedTrace,
        opts: &AnalyzeOptions,
    ) -> Result<Report, AnalyzeError> {
        let knobs = Knobs {
            batch_only: true,
            ..Knobs::PLAN
        };
        Ok(analyze_one(trace, opts, None, knobs, &mut |_| {})?.into_report())
    }

    /// [`analyze_with_sink`], streamed in steps of about `step_events`
    /// events (however many frames it sets aside) whatever the number of
    /// stacks (where the trace can be).
    pub fn analyze_with_sink_streamed(
        trace: &LoadedTrace,
        opts: &AnalyzeOptions,
        step_events: u64,
        sink: &mut dyn StackSink,
    ) -> Result<Report, AnalyzeError> {
        let knobs = Knobs::exact_steps(step_events);
        Ok(analyze_one(trace, opts, Some(sink), knobs, &mut |_| {})?.into_report())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::prepare::tests::rounds;
    use crate::input::from_bytes;
    use mtanalyze_model::report::Clock;
    use mtrace_format::{EventKind, StackId, ThreadId, TraceWriter, WriterOptions};

    fn plan(trace: &LoadedTrace, opts: &AnalyzeOptions) -> Plan {
        let decoding = decode_for(trace, Some(opts), None).expect("decodes");
        plan_for(&decoding, trace.bytes().len(), &Knobs::PLAN)
    }

    #[test]
    fn every_trace_is_streamed_in_steps_by_the_stacks_it_names() {
        // A trace of a few stacks is streamed in long steps, whatever the
        // options ask: call paths, a selection of stacks by stack or by
        // thread.
        let trace = rounds(&[1], 100);
        let long = (Engine::Stream, STEP_EVENTS_FEW_STACKS);
        let opts = AnalyzeOptions::default();
        let engine_and_step = |opts: &AnalyzeOptions| {
            let p = plan(&trace, opts);
            (p.engine, p.step_events)
        };
        assert_eq!(engine_and_step(&opts), long);
        let paths = AnalyzeOptions {
            paths: PathMode::Merged,
            ..AnalyzeOptions::default()
        };
        assert_eq!(engine_and_step(&paths), long);
        let selected = AnalyzeOptions {
            threads: vec![1],
            ..AnalyzeOptions::default()
        };
        assert_eq!(engine_and_step(&selected), long);
        let by_stack = AnalyzeOptions {
            stacks: vec!["thread:1".into()],
            ..AnalyzeOptions::default()
        };
        assert_eq!(engine_and_step(&by_stack), long);
        // A trace that names many stacks, in short steps.
        let many = tasks(SHORT_STEPS_FROM_STACKS as u64, false);
        let p = plan(&many, &opts);
        assert_eq!((p.engine, p.step_events), (Engine::Stream, STEP_EVENTS));
        let fewer = tasks(SHORT_STEPS_FROM_STACKS as u64 - 1, false);
        assert_eq!(plan(&fewer, &opts).step_events, STEP_EVENTS_FEW_STACKS);
        // The stream gives the batch's report.
        let streamed = testing::analyze_streamed_with(&trace, &opts, 64)
            .expect("analyzes")
            .expect("streams");
        assert_eq!(
            serde_json::to_string(&streamed).expect("json"),
            serde_json::to_string(&testing::analyze_batched(&trace, &opts).expect("analyzes"))
                .expect("json")
        );
    }

    /// Threads that each call functions of their own, interleaved, some
    /// calls on a logical stack they share: as many functions as make a
    /// running sum a thread too big for the memory the trace allows.
    fn many_functions(threads: u64) -> LoadedTrace {
        let mut w = TraceWriter::new(std::io::Cursor::new(Vec::new()), WriterOptions::default())
            .expect("writer");
        let per_thread = 400;
        let functions: Vec<Vec<_>> = (0..threads)
            .map(|t| {
                (0..per_thread)
                    .map(|i| w.function(&format!("f{t}_{i}"), "f.py", i, ""))
                    .collect()
            })
            .collect();
        let task = w.stack("task");
        let mut t = 0;
        for i in 0..per_thread as usize {
            for (tid, fs) in functions.iter().enumerate() {
                let on_task = i % 3 == 0;
                let mut kinds = vec![EventKind::Enter(fs[i])];
                if on_task {
                    kinds.push(EventKind::Switch(task));
                }
                kinds.extend([EventKind::Enter(fs[0]), EventKind::Exit(fs[0])]);
                if on_task {
                    kinds.push(EventKind::Switch(StackId::OWN));
                }
                kinds.push(EventKind::Exit(fs[i]));
                for kind in kinds {
                    t += 10;
                    w.event(ThreadId(tid as u64 + 1), t, kind).expect("event");
                }
            }
        }
        let bytes = w.finish(Some(t + 10)).expect("finish").into_inner();
        from_bytes("many functions", bytes).expect("loads")
    }

    #[test]
    fn own_stacks_are_replayed_with_the_logical_ones_where_a_tally_a_thread_would_not_fit() {
        let trace = many_functions(48);
        let p = plan(&trace, &AnalyzeOptions::default());
        assert_eq!((p.engine, p.tallies_fit), (Engine::Stream, false), "{p:?}");
        assert!(!p.stream().own_in_passes);
        for (clock, paths) in [
            (Clock::Stack, PathMode::Off),
            (Clock::Wall, PathMode::Merged),
            (Clock::Gil, PathMode::PerStack),
        ] {
            let opts = AnalyzeOptions {
                clock: Some(clock),
                paths,
                ..AnalyzeOptions::default()
            };
            let batched = testing::analyze_batched(&trace, &opts).expect("analyzes");
            assert_eq!(batched.functions.len(), 48 * 400);
            assert_eq!(analyze(&trace, &opts).expect("analyzes"), batched);
            for step in [1, 64] {
                let streamed = testing::analyze_streamed_with(&trace, &opts, step)
                    .expect("analyzes")
                    .expect("streams to the end");
                assert_eq!(streamed, batched, "{clock:?}, step {step}");
            }
        }
    }

    /// `tasks` tasks on one thread, each switched to, run and ended; with
    /// `paused`, the thread's second chunk flagged as a restart from its
    /// snapshot, as the recorder flags the first chunk after a pause (no
    /// chunk is missing).
    fn tasks(tasks: u64, paused: bool) -> LoadedTrace {
        let mut w = TraceWriter::new(std::io::Cursor::new(Vec::new()), WriterOptions::default())
            .expect("writer");
        let f = w.function("f", "f.py", 1, "");
        let mut t = 0;
        for i in 0..tasks {
            let task = w.stack(&format!("task-{i}"));
            for kind in [
                EventKind::Switch(task),
                EventKind::Enter(f),
                EventKind::Exit(f),
                EventKind::Switch(StackId::OWN),
                EventKind::End(task),
            ] {
                t += 10;
                w.event(ThreadId(1), t, kind).expect("event");
            }
        }
        let mut bytes = w.finish(Some(t + 10)).expect("finish").into_inner();
        if paused {
            let file = mtrace_format::TraceFile::parse(&bytes).expect("parses");
            let second = (0..file.chunk_slots())
                .filter_map(|i| file.chunk(i).ok().flatten())
                .find(|c| c.thread_chunk_no == 1)
                .expect("a second chunk");
            let at = second.offset as usize + mtrace_format::layout::C_FLAGS;
            bytes[at] |= mtrace_format::layout::CHUNK_FLAG_RESTART as u8;
        }
        from_bytes("test", bytes).expect("loads")
    }

    #[test]
    fn a_thread_that_restarts_after_a_pause_is_streamed() {
        // A restart with no chunk missing (a paused recording resumed)
        // loses nothing: the stream cuts it as the batch does, to the
        // batch's report, where it used to give the trace back.
        let opts = AnalyzeOptions::default();
        let paused = tasks(2000, true);
        let decoding = decode_for(&paused, Some(&opts), None).expect("decodes");
        assert_eq!(decoding.decoded.lost, 0);
        let restarts = |d: &Decoding<'_>| {
            d.decoded.threads[0]
                .chunks
                .iter()
                .enumerate()
                .filter(|(i, c)| c.restarts(*i))
                .count()
        };
        assert_eq!(restarts(&decoding), 1);
        let p = plan_for(&decoding, paused.bytes().len(), &Knobs::PLAN);
        assert!(p.named_stacks >= SHORT_STEPS_FROM_STACKS, "{p:?}");
        assert_eq!(p.engine, Engine::Stream);
        let batched = testing::analyze_batched(&paused, &opts).expect("analyzes");
        for step in [1, 64, STEP_EVENTS] {
            let streamed = testing::analyze_streamed_with(&paused, &opts, step)
                .expect("analyzes")
                .expect("streams to the end");
            assert_eq!(streamed, batched, "step {step}");
        }
    }

    /// `tasks(2000, false)` with its thread's second chunk missing, as a
    /// ring that wrapped leaves it (every later chunk is renumbered one up).
    fn tasks_with_a_chunk_missing() -> LoadedTrace {
        let mut bytes = tasks(2000, false).bytes().to_vec();
        let file = mtrace_format::TraceFile::parse(&bytes).expect("parses");
        let later: Vec<usize> = (0..file.chunk_slots())
            .filter_map(|i| file.chunk(i).ok().flatten())
            .filter(|c| c.thread_chunk_no >= 1)
            .map(|c| c.offset as usize)
            .collect();
        assert!(!later.is_empty());
        for at in later {
            let no = at + mtrace_format::layout::C_THREAD_CHUNK_NO;
            let n = u64::from_le_bytes(bytes[no..no + 8].try_into().expect("8 bytes")) + 1;
            bytes[no..no + 8].copy_from_slice(&n.to_le_bytes());
        }
        from_bytes("gap", bytes).expect("loads")
    }

    #[test]
    fn lost_chunks_and_dropped_events_are_streamed_to_the_batch_report() {
        // The stream restarts a thread after missing chunks and judges
        // `lost` marks as the batch does: neither sends a trace there.
        let opts = AnalyzeOptions::default();
        let gap = tasks_with_a_chunk_missing();
        let mut dropped = tasks(2000, false).bytes().to_vec();
        dropped[mtrace_format::layout::H_DROPPED_EVENTS] = 1;
        dropped[mtrace_format::layout::H_DROPPED_CHUNKS] = 1;
        let dropped = from_bytes("dropped", dropped).expect("loads");
        for (trace, lost) in [(&gap, 1), (&dropped, 0)] {
            let decoding = decode_for(trace, Some(&opts), None).expect("decodes");
            assert_eq!(decoding.decoded.lost, lost);
            let p = plan_for(&decoding, trace.bytes().len(), &Knobs::PLAN);
            assert_eq!(p.engine, Engine::Stream, "{p:?}");
            let batched = testing::analyze_batched(trace, &opts).expect("analyzes");
            assert!(
                batched
                    .warnings
                    .iter()
                    .any(|w| w.kind == "lost_chunks" || w.kind == "dropped_events"),
                "{:?}",
                batched.warnings
            );
            let streamed = testing::analyze_streamed_with(trace, &opts, 64)
                .expect("analyzes")
                .expect("streams to the end");
            assert_eq!(streamed, batched);
        }
    }

    #[test]
    fn a_trace_that_lost_its_names_is_streamed_to_the_batch_report() {
        // Its metadata is cut with it (the function names the writer wrote
        // last): the stream numbers the functions it meets unnamed, in
        // steps of any size, as the batch does after its passes.
        let whole = tasks(2000, false).bytes().to_vec();
        let cut = from_bytes("cut", whole[..whole.len() * 2 / 3].to_vec()).expect("loads");
        let opts = AnalyzeOptions::default();
        let decoding = decode_for(&cut, Some(&opts), None).expect("decodes");
        assert!(decoding.decoded.meta_problem.is_some());
        // The stacks' names went with the functions': the planner sees
        // no named stack, and plans long steps.
        let p = plan_for(&decoding, cut.bytes().len(), &Knobs::PLAN);
        assert_eq!(
            (p.named_stacks, p.tallies_fit, p.step_events),
            (0, true, STEP_EVENTS_FEW_STACKS),
            "{p:?}"
        );
        let batched = testing::analyze_batched(&cut, &opts).expect("analyzes");
        let unknown = batched
            .warnings
            .iter()
            .find(|w| w.kind == "unknown_function");
        assert!(
            unknown.is_some_and(|w| w.count > 0),
            "{:?}",
            batched.warnings
        );
        for step in [1, 64, STEP_EVENTS] {
            let streamed = testing::analyze_streamed_with(&cut, &opts, step)
                .expect("analyzes")
                .expect("streams to the end");
            assert_eq!(streamed, batched, "step {step}");
        }
    }
}
