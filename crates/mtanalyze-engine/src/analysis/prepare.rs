//! The stages every command shares, before any stack is replayed: decode
//! the chunks, cut every thread into segments (threads in parallel, or one
//! after the other into one tally for a sequential analysis, see [`Fuse`];
//! the `gil` clock's runs are merged alongside), complete the function table
//! with the ids no metadata names, and gather the trace-level warnings.
//!
//! `check` stops here; `analyze` and the timeline exports go on to group
//! the segments by stack ([`super::stacks`]).

use crate::analysis::clock::GilRuns;
use crate::analysis::cut::{cut_thread, ThreadPass};
use crate::analysis::decode::{decode, Decoded, FreshFunctions, FunctionTable, Numbering};
use crate::analysis::frames::{FnAcc, Tally};
use crate::analysis::options::{own_stack_wanted, AnalyzeError, AnalyzeOptions, PathMode};
use crate::analysis::window::Window;
use crate::input::LoadedTrace;
use mtanalyze_model::report::{
    Clock, ThreadSummary, TraceSummary, PRODUCER_PYTHON, PRODUCER_UNSPECIFIED,
};
use mtanalyze_model::warnings::{Location, WarningKind, Warnings};
use mtrace_format::ChunkProblemKind;

/// The stages every command shares: decoded chunks, the per-thread passes,
/// the complete function table and the end of the trace.
pub(crate) struct Prepared<'a> {
    pub(crate) decoded: Decoded<'a>,
    pub(crate) passes: Vec<ThreadPass>,
    /// The metadata's functions, and the ids the passes met that it does
    /// not name (moved out of `decoded`, whose table is then empty).
    pub(crate) functions: FunctionTable<'a>,
    pub(crate) end_tick: u64,
    /// Problems of the file and of its threads' passes.
    pub(crate) warnings: Warnings,
    /// The clock the analysis asked for, resolved: the report's.
    pub(crate) clock: Clock,
    /// The clock the stacks are replayed under: `clock`, or `stack` where
    /// it gives the same report faster ([`replay_clock`]).
    pub(crate) replay_clock: Clock,
    /// Merged if the replay clock is `gil`.
    pub(crate) gil_runs: Option<GilRuns>,
    /// What part of the trace counts.
    pub(crate) window: Window,
    /// With [`Fuse::Shared`]: its tally, reset for this trace, holding
    /// what the segment pass replayed.
    pub(crate) tally: Option<Tally>,
}

/// Whether the segment pass replays the threads' own stacks on the way.
pub(crate) enum Fuse<'s> {
    /// No (`check`, the timeline exports).
    No,
    /// Yes, threads in parallel, each into a tally of its own, when the
    /// tallies fit [`fusion_budget`].
    PerThread,
    /// Yes, threads one after the other, all into this tally (reset here
    /// for the trace, then left in [`Prepared::tally`] for the replay of
    /// the other stacks): a sequential analysis, one tally per trace.
    Shared(Box<Tally>),
    /// [`Fuse::Shared`] for a worker that sums its traces (no call
    /// paths): the functions are numbered by the worker's numbering, and
    /// the tally, counting by those numbers, was cleared by the worker
    /// ([`Tally::clear_numbered`]), which keeps its edges numbered.
    Numbered(Box<Tally>, Numbering<'s>),
}

/// The clock `opts` asks for, else the one the trace prefers, else `stack`.
fn resolve_clock(opts: &AnalyzeOptions, decoded: &Decoded<'_>) -> Clock {
    opts.clock
        .unwrap_or(match decoded.file.header().preferred_clock {
            mtrace_format::PreferredClock::Gil => Clock::Gil,
            mtrace_format::PreferredClock::Wall => Clock::Wall,
            _ => Clock::Stack,
        })
}

/// The clock of a report's times, and the one its stacks replay under.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clocks {
    pub(crate) report: Clock,
    pub(crate) replay: Clock,
}

/// The clock to replay a report's stacks under when the report asks for
/// `clock`: `clock`, except that a `gil` trace of one thread whose events
/// are whole from its start replays under `stack`. With one thread there
/// is no other thread's event to pause a stack, so `gil`'s running
/// intervals (from each event to the thread's next, the last one to the
/// end of the trace) are `stack`'s (from the thread's first event or a
/// switch to its next switch or the end): the same report, without
/// merging the runs and with the thread's own stack replayed by the
/// segment pass. A profile per request is such a trace. Left to `gil`:
/// a chunk restarted from its snapshot (after a gap, a pause, or in a
/// later file of a series), where the two clocks start the stretch before
/// the chunk's first event differently (`semantics.md`, rotation).
/// A restart after a damaged event is not a reason: the decode sees a
/// damaged compact event but not a damaged 16-byte one (the segment pass
/// finds it), and a trace must give one report in either encoding and
/// either engine. The proptests of `tests/semantics.rs` hold it to the
/// literal `gil` reference on one-thread traces.
pub(crate) fn replay_clock(clock: Clock, decoded: &Decoded<'_>) -> Clock {
    let whole_single_thread = decoded.threads.len() == 1
        && decoded.lost == 0
        && decoded.continued_stacks.is_empty()
        && decoded.threads[0]
            .chunks
            .iter()
            .all(|c| !c.gap_before && !c.continued);
    if clock == Clock::Gil && whole_single_thread {
        Clock::Stack
    } else {
        clock
    }
}

/// Heap the segment pass may spend on replaying own stacks (a tally per
/// thread): a sixty-fourth of the file, or 4 MiB for small files.
fn fusion_budget(file_len: usize) -> usize {
    (file_len / 64).max(4 << 20)
}

/// Cuts the decoded `trace` (`decoding`, from [`decode_for`]), for an
/// analysis with `opts` (none: `check`). The `gil` clock's runs are merged
/// alongside the segment pass. With `fuse` (see [`Fuse`]), the segment
/// pass also replays the own stacks `opts` select, when the clock allows
/// (`gil` needs every thread's events first) and, per thread, the tallies
/// fit [`fusion_budget`]. `stage_done` is called with `cut` as that stage
/// ends (see `testing::analyze_in_stages` in `plan.rs`). A [`Fuse::Numbered`] must be
/// the numbering `decoding` was decoded with.
pub(crate) fn prepare<'a>(
    trace: &'a LoadedTrace,
    decoding: Decoding<'a>,
    opts: Option<&AnalyzeOptions>,
    fuse: Fuse<'_>,
    stage_done: &mut dyn FnMut(&'static str),
) -> Result<Prepared<'a>, AnalyzeError> {
    let (fuse, mut numbering) = match fuse {
        Fuse::Numbered(t, numbering) => (Fuse::Shared(t), Some(numbering)),
        fuse => (fuse, None),
    };
    let Decoding {
        mut decoded,
        window,
        clock,
    } = decoding;
    let per_thread = matches!(fuse, Fuse::PerThread);
    let mut shared = match fuse {
        Fuse::Shared(mut t) => {
            let paths = opts.is_some_and(|o| o.paths != PathMode::Off);
            let n = decoded.functions.dense_len();
            if numbering.is_some() {
                debug_assert!(!paths, "a numbered tally keeps no call paths");
                t.grow(n);
                t.set_window(window);
            } else {
                t.reset(n, paths, window);
            }
            Some(*t)
        }
        _ => None,
    };
    // The timeline exports (no fusing) observe each running interval as
    // its clock draws it: they replay under the clock asked for.
    let replay_clock = match (clock, per_thread || shared.is_some()) {
        (Some(c), true) => Some(replay_clock(c, &decoded)),
        _ => clock,
    };
    let fuse = opts
        .filter(|_| per_thread || shared.is_some())
        .and_then(|opts| {
            let clock = replay_clock?;
            // One tally for every thread always fits.
            let fits = shared.is_some() || tallies_fit(&decoded, trace.bytes().len());
            let can = clock != Clock::Gil && opts.paths == PathMode::Off && fits;
            can.then_some((clock, window, opts))
        });
    // The functions the metadata does not name, numbered as the passes
    // meet them: an own stack replayed on the way counts them at once.
    let mut fresh = FreshFunctions::new(&decoded.functions, numbering.as_mut());
    let mut cut = || match shared.as_mut() {
        Some(t) => cut_threads_into(&decoded, fuse, t, &fresh),
        None => cut_threads(&decoded, fuse, &fresh),
    };
    let (passes, gil_runs) = if replay_clock == Some(Clock::Gil) {
        let (passes, runs) = crate::threads::join(cut, || GilRuns::build(&decoded));
        (passes, Some(runs))
    } else {
        (cut(), None)
    };
    fresh.fold_into(&mut decoded.functions);
    let clocks = clock
        .zip(replay_clock)
        .map(|(report, replay)| Clocks { report, replay });
    let prepared = Prepared::new(decoded, passes, clocks, gil_runs, window, shared);
    stage_done("cut");
    Ok(prepared)
}

/// A trace decoded for an analysis: its chunks in order, its functions
/// and names, the time window the options ask for and the clock. Decoded
/// once ([`decode_for`]); the planner (`plan.rs`) looks at it to choose the
/// engine, and every engine starts from it.
pub(crate) struct Decoding<'a> {
    pub(crate) decoded: Decoded<'a>,
    pub(crate) window: Window,
    /// The clock the options ask for, resolved (none without options: `check`).
    pub(crate) clock: Option<Clock>,
}

/// Decodes `trace` for an analysis with `opts` (none: `check`), its
/// functions numbered by `numbering` if given (see [`Numbering`]).
pub(crate) fn decode_for<'a>(
    trace: &'a LoadedTrace,
    opts: Option<&AnalyzeOptions>,
    numbering: Option<&mut Numbering<'_>>,
) -> Result<Decoding<'a>, AnalyzeError> {
    let keep_names = opts.is_none_or(AnalyzeOptions::shows_stack_names);
    let mut decoded =
        decode(trace.bytes(), numbering, keep_names).map_err(|error| AnalyzeError::Format {
            source_name: trace.source.clone(),
            error,
        })?;
    decoded.warning_details = opts.is_some_and(|o| o.warning_details);
    let window = match opts {
        Some(o) => {
            // A mark's time: its first instance (the earliest tick).
            let mark_ns = |name: &str| {
                let tick = decoded
                    .marks
                    .iter()
                    .filter(|m| m.name == name)
                    .map(|m| m.tick)
                    .min()?;
                Some(decoded.scale.ns(tick))
            };
            o.window(mark_ns, &trace.source)?
        }
        None => Window::ALL,
    };
    let clock = opts.map(|o| resolve_clock(o, &decoded));
    Ok(Decoding {
        decoded,
        window,
        clock,
    })
}

impl<'a> Prepared<'a> {
    /// The prepared trace once every thread's pass is done (its function
    /// table holds every id the passes met, numbered as they met them):
    /// the end of the trace, and the file's and the passes' warnings.
    pub(super) fn new(
        mut decoded: Decoded<'a>,
        passes: Vec<ThreadPass>,
        clocks: Option<Clocks>,
        gil_runs: Option<GilRuns>,
        window: Window,
        tally: Option<Tally>,
    ) -> Self {
        // Taken: the segment pass was the decoded table's last reader.
        let functions = std::mem::take(&mut decoded.functions);
        // Counted from the table, not the passes: a table a stream gave
        // back has the ids it numbered, which the passes that follow no
        // longer meet as unknown.
        let unknown = functions.unknown_ids().len() as u64;
        let end_tick = end_tick(&decoded, &passes);
        let warnings = trace_warnings(&decoded, &passes, unknown);
        Prepared {
            decoded,
            passes,
            functions,
            end_tick,
            warnings,
            clock: clocks.map_or(Clock::Stack, |c| c.report),
            replay_clock: clocks.map_or(Clock::Stack, |c| c.replay),
            gil_runs,
            window,
            tally,
        }
    }
}

impl<'a> Prepared<'a> {
    /// The decoded trace back from a prepared one, its function table put
    /// back: for an engine that gives up after its passes (the stream's
    /// last step), so that the next engine starts from the same decode.
    /// (A stream numbered the functions the metadata does not name as it
    /// met them: the table keeps them, which the batch takes as its own.)
    pub(crate) fn into_decoding(mut self, clock: Option<Clock>) -> Decoding<'a> {
        self.decoded.functions = self.functions;
        Decoding {
            decoded: self.decoded,
            window: self.window,
            clock,
        }
    }
}

/// Whether a replay tally per thread fits [`fusion_budget`].
pub(crate) fn tallies_fit(decoded: &Decoded<'_>, file_len: usize) -> bool {
    let tally_bytes = decoded.functions.dense_len() * std::mem::size_of::<(FnAcc, u32)>();
    decoded.threads.len().saturating_mul(tally_bytes) <= fusion_budget(file_len)
}

/// The segment pass over every thread, in parallel. With `fuse` (a clock
/// and the options), each selected own stack is replayed on the way.
fn cut_threads(
    decoded: &Decoded<'_>,
    fuse: Option<(Clock, Window, &AnalyzeOptions)>,
    fresh: &FreshFunctions<'_>,
) -> Vec<ThreadPass> {
    crate::threads::map_collect(0..decoded.threads.len() as u32, |i| {
        let tid = decoded.threads[i as usize].tid.0;
        let fuse = fuse.and_then(|(c, w, opts)| own_stack_wanted(tid, opts).then_some((c, w)));
        cut_thread(decoded, i, fuse, None, fresh)
    })
}

/// [`cut_threads`] one thread after the other, replaying the own stacks
/// into `tally`.
fn cut_threads_into(
    decoded: &Decoded<'_>,
    fuse: Option<(Clock, Window, &AnalyzeOptions)>,
    tally: &mut Tally,
    fresh: &FreshFunctions<'_>,
) -> Vec<ThreadPass> {
    (0..decoded.threads.len() as u32)
        .map(|i| {
            let tid = decoded.threads[i as usize].tid.0;
            let fuse = fuse.and_then(|(c, w, opts)| own_stack_wanted(tid, opts).then_some((c, w)));
            cut_thread(decoded, i, fuse, Some(&mut *tally), fresh)
        })
        .collect()
}

/// The end of the trace: the end marker or the last event, whichever is later.
fn end_tick(decoded: &Decoded<'_>, passes: &[ThreadPass]) -> u64 {
    let h = decoded.file.header();
    let last = passes.iter().filter_map(|p| p.last_tick).max();
    match (h.end_tick, last) {
        (Some(e), Some(l)) => e.max(l),
        (Some(e), None) => e,
        (None, l) => l.unwrap_or(h.clock.start_tick),
    }
}

/// The file's problems (damage, losses, an unfinished or full recording)
/// and those the threads' passes found.
fn trace_warnings(decoded: &Decoded<'_>, passes: &[ThreadPass], unknown: u64) -> Warnings {
    let mut warnings = decoded.warnings();
    warnings.add_n(WarningKind::UnknownFunction, unknown, Location::Trace);
    for p in passes {
        warnings.merge(p.warnings.clone());
    }
    for d in &decoded.damaged {
        warnings.add(WarningKind::DamagedChunk, Location::Byte(d.offset));
    }
    for c in &decoded.cut {
        // A compact chunk's damaged event is found by the decode that
        // counts its events, a 16-byte one's by the segment pass: the
        // same warning either way.
        let kind = match c.kind {
            ChunkProblemKind::BadCompactEvent(_) => WarningKind::DamagedEvent,
            _ => WarningKind::TruncatedChunk,
        };
        warnings.add(kind, Location::Byte(c.offset));
    }
    warnings.add_n(WarningKind::LostChunks, decoded.lost, Location::Trace);
    if let Some(m) = &decoded.meta_problem {
        warnings.add(WarningKind::DamagedMetadata, Location::Byte(m.offset));
    }
    let h = decoded.file.header();
    if !h.finished() {
        warnings.add(WarningKind::Unfinished, Location::Trace);
    }
    warnings.add_n(
        WarningKind::DroppedEvents,
        h.dropped_events,
        Location::Trace,
    );
    warnings.add_n(
        WarningKind::DroppedMetadata,
        h.meta_dropped,
        Location::Trace,
    );
    warnings
}

impl Prepared<'_> {
    pub(crate) fn ns(&self, tick: u64) -> u64 {
        self.decoded.scale.ns(tick)
    }

    /// The earliest `lost` mark that ends a thread's events, in ns: the
    /// trace is complete up to there (see "Lost events" in `semantics.md`).
    pub(crate) fn first_mark_ns(&self) -> Option<u64> {
        let first = self.passes.iter().filter_map(|p| p.lost_at).min();
        first.map(|t| self.ns(t))
    }

    fn thread_summaries(&self) -> Vec<ThreadSummary> {
        self.decoded
            .threads
            .iter()
            .zip(&self.passes)
            .map(|(t, p)| {
                let (name, os_tid) = self
                    .decoded
                    .thread_names
                    .get(&t.tid.0)
                    .cloned()
                    .unwrap_or_default();
                let lost_from_ns = p.lost_at.map(|t| self.ns(t));
                ThreadSummary {
                    tid: t.tid.0,
                    name,
                    os_tid,
                    events: p.events,
                    lost_from_ns,
                    lost_ns: lost_from_ns.map_or(0, |l| self.ns(self.end_tick).saturating_sub(l)),
                }
            })
            .collect()
    }

    pub(crate) fn summary(&self, trace: &LoadedTrace, stacks: u64) -> TraceSummary {
        let h = self.decoded.file.header();
        let first = self.passes.iter().filter_map(|p| p.first_tick).min();
        let first_ns = first.map_or(0, |t| self.ns(t));
        let end_ns = self.ns(self.end_tick);
        TraceSummary {
            source: trace.source.clone(),
            input_format: trace.format.name().to_owned(),
            format_version: h.version,
            clock_source: match h.clock.kind {
                mtrace_format::ClockKind::Nanoseconds => "ns".into(),
                mtrace_format::ClockKind::Tsc => "tsc".into(),
            },
            ticks_per_second: h.clock.ticks_per_second().round() as u64,
            pid: h.pid,
            host: self.decoded.host.clone(),
            cmdline: h.args().into_iter().map(str::to_owned).collect(),
            start_unix_ns: h.clock.start_unix_ns,
            first_event_ns: first_ns,
            end_ns,
            duration_ns: end_ns.saturating_sub(first_ns),
            finished: h.finished(),
            ring: h.ring(),
            producer: match h.producer {
                mtrace_format::Producer::Python => PRODUCER_PYTHON,
                mtrace_format::Producer::Unspecified => PRODUCER_UNSPECIFIED,
            }
            .to_owned(),
            threads: self.thread_summaries(),
            stacks,
            events: self.passes.iter().map(|p| p.events).sum(),
            wakes: self.passes.iter().map(|p| p.wakes_seen).sum(),
            chunks: self
                .decoded
                .threads
                .iter()
                .map(|t| t.chunks.len() as u64)
                .sum(),
            chunks_lost: self.decoded.lost,
            chunks_damaged: self.decoded.damaged.len() as u64,
            dropped_events: h.dropped_events,
            traces: 1,
            window: None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::input::from_bytes;
    use mtrace_format::{EventKind, StackId, ThreadId, TraceWriter, WriterOptions};

    /// A trace whose threads `tids` each call `f` twice, with a switch to
    /// a logical stack and back on the first.
    fn trace(tids: &[u64]) -> LoadedTrace {
        rounds(tids, 1)
    }

    /// [`trace`] `n` times over on each thread: two stacks, `6 n` events
    /// a thread.
    pub(crate) fn rounds(tids: &[u64], n: u64) -> LoadedTrace {
        let mut w = TraceWriter::new(std::io::Cursor::new(Vec::new()), WriterOptions::default())
            .expect("writer");
        let f = w.function("f", "f.py", 1, "");
        let task = w.stack("task");
        let mut t = 0;
        for &tid in tids {
            for _ in 0..n {
                for kind in [
                    EventKind::Enter(f),
                    EventKind::Switch(task),
                    EventKind::Enter(f),
                    EventKind::Exit(f),
                    EventKind::Switch(StackId::OWN),
                    EventKind::Exit(f),
                ] {
                    t += 10;
                    w.event(ThreadId(tid), t, kind).expect("event");
                }
            }
        }
        let bytes = w.finish(Some(t + 10)).expect("finish").into_inner();
        from_bytes("test", bytes).expect("loads")
    }

    fn prepared_clocks(trace: &LoadedTrace, fuse: Fuse<'_>) -> (Clock, Clock, bool) {
        let opts = AnalyzeOptions {
            clock: Some(Clock::Gil),
            ..AnalyzeOptions::default()
        };
        let decoding = decode_for(trace, Some(&opts), None).expect("decodes");
        let p = prepare(trace, decoding, Some(&opts), fuse, &mut |_| {}).expect("prepares");
        (p.clock, p.replay_clock, p.gil_runs.is_some())
    }

    #[test]
    fn a_one_thread_gil_report_replays_under_stack() {
        let one = trace(&[1]);
        assert_eq!(
            prepared_clocks(&one, Fuse::PerThread),
            (Clock::Gil, Clock::Stack, false)
        );
        // The timeline exports draw each interval as `gil` does.
        assert_eq!(
            prepared_clocks(&one, Fuse::No),
            (Clock::Gil, Clock::Gil, true)
        );
        let two = trace(&[1, 2]);
        assert_eq!(
            prepared_clocks(&two, Fuse::PerThread),
            (Clock::Gil, Clock::Gil, true)
        );
    }
}
