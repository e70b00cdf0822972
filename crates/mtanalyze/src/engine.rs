//! The pipeline: decode, segment (threads in parallel), group segments by
//! stack, replay (stacks in parallel), merge into a [`Report`].
//!
//! A thread's own stack runs on that thread only, so [`analyze`] lets the
//! segment pass replay it while reading the thread (one read of those
//! events instead of two; with the `stack` and `wall` clocks, no call
//! paths, and when a tally per thread fits `fusion_budget`); only its
//! frames still open at the end wait for the end of the trace. Logical
//! stacks, which move between threads, are replayed once all segments are
//! known. The timeline exports replay every stack in the second pass.
//!
//! Every parallel stage produces values that are merged by summing or by
//! sorting on stable keys, so the report is identical on every run and with
//! any number of rayon threads.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use mtrace_format::FormatError;

use crate::check::{CheckReport, ChunkIssue};
use crate::clock::{Clock, GilRuns, GilTimeline};
use crate::decode::{decode, Decoded, FunctionTable, StackNames};
use crate::input::LoadedTrace;
use crate::paths::{RecursionCollapse, ROOT, STACK_LABEL};
use crate::replay::{
    replay_stack, stack_name, FnAcc, NoObserver, Observer, ReplayContext, StackReplay, Tally,
};
use crate::report::{
    CallPath, EdgeStats, FunctionStats, Report, StackStats, ThreadSummary, TraceSummary,
};
use crate::segment::{cut_thread, OwnReplay, Segment, StackKey, ThreadPass};
use crate::warnings::{Location, WarningKind, Warnings};

/// What to analyze and how.
#[derive(Clone, Debug, Default)]
pub struct AnalyzeOptions {
    /// The clock; `None`: the one the trace prefers, else `stack`.
    pub clock: Option<Clock>,
    /// Only stacks that ran on one of these threads (empty: all).
    pub threads: Vec<u64>,
    /// Only these stacks, by id (`thread:3`, `stack:7`) or name (empty: all).
    pub stacks: Vec<String>,
    /// Whether to collect call paths (for folded stacks and flame graphs).
    pub paths: PathMode,
    /// Fold recursive frames of the call paths into their outer frame
    /// (`None`: every frame on its own path). Function and edge statistics
    /// are not affected.
    pub collapse_recursion: Option<RecursionCollapse>,
}

/// Whether and how the report keeps call paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathMode {
    /// No call paths (the cheapest).
    #[default]
    Off,
    /// Paths of all stacks merged.
    Merged,
    /// Paths kept apart per stack, under the stack's name.
    PerStack,
}

/// Why a trace could not be analyzed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// The header is unreadable.
    #[error("{source_name}: {error}")]
    Format {
        /// The trace's source.
        source_name: String,
        /// The cause.
        error: FormatError,
    },
}

/// (thread pass, index in its segments).
type SegmentHandle = (u32, u32);
/// A stack and the range of its segments' handles.
type StackRange = (StackKey, std::ops::Range<usize>);

/// The stages every command shares: decoded chunks, the per-thread passes,
/// the complete function table and the end of the trace.
struct Prepared<'a> {
    decoded: Decoded<'a>,
    passes: Vec<ThreadPass>,
    functions: FunctionTable,
    end_tick: u64,
    warnings: Warnings,
    /// The clock the analysis asked for, resolved.
    clock: Clock,
    /// Merged if the clock is `gil`.
    gil_runs: Option<GilRuns>,
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

/// Heap the segment pass may spend on replaying own stacks (a tally per
/// thread): a sixty-fourth of the file, or 4 MiB for small files.
fn fusion_budget(file_len: usize) -> usize {
    (file_len / 64).max(4 << 20)
}

/// Decodes and cuts `trace`, for an analysis with `opts` (none: `check`).
/// The `gil` clock's runs are merged alongside the segment pass. With
/// `fuse`, the segment pass also replays the own stacks `opts` select, when
/// the clock allows (`gil` needs every thread's events first) and the
/// tallies fit [`fusion_budget`].
fn prepare<'a>(
    trace: &'a LoadedTrace,
    opts: Option<&AnalyzeOptions>,
    fuse: bool,
) -> Result<Prepared<'a>, AnalyzeError> {
    let decoded = decode(trace.bytes()).map_err(|error| AnalyzeError::Format {
        source_name: trace.source.clone(),
        error,
    })?;
    let threads = decoded.threads.len();
    let clock = opts.map(|o| resolve_clock(o, &decoded));
    let tally_bytes = decoded.functions.entries().len() * std::mem::size_of::<(FnAcc, u32)>();
    let fuse = opts.filter(|_| fuse).and_then(|opts| {
        let clock = clock?;
        let fits = threads.saturating_mul(tally_bytes) <= fusion_budget(trace.bytes().len());
        let can = clock != Clock::Gil && opts.paths == PathMode::Off && fits;
        can.then_some((clock, opts))
    });
    let cut = || -> Vec<ThreadPass> {
        (0..threads as u32)
            .into_par_iter()
            .map(|i| {
                let tid = decoded.threads[i as usize].tid.0;
                let clock = fuse.and_then(|(c, opts)| own_stack_wanted(tid, opts).then_some(c));
                cut_thread(&decoded, i, clock)
            })
            .collect()
    };
    let (passes, gil_runs) = if clock == Some(Clock::Gil) {
        let (passes, runs) = rayon::join(cut, || GilRuns::build(&decoded));
        (passes, Some(runs))
    } else {
        (cut(), None)
    };
    let mut warnings = Warnings::default();
    let mut functions = decoded.functions.clone();
    let mut unknown: Vec<u32> = passes
        .iter()
        .flat_map(|p| p.unknown_functions.iter().copied())
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    for &id in &unknown {
        functions.insert_unknown(id);
    }
    warnings.add_n(
        WarningKind::UnknownFunction,
        unknown.len() as u64,
        Location::Trace,
    );
    for p in &passes {
        warnings.merge(p.warnings.clone());
    }
    let h = decoded.file.header();
    let last = passes.iter().filter_map(|p| p.last_tick).max();
    let end_tick = match (h.end_tick, last) {
        (Some(e), Some(l)) => e.max(l),
        (Some(e), None) => e,
        (None, l) => l.unwrap_or(h.clock.start_tick),
    };
    for d in &decoded.damaged {
        warnings.add(WarningKind::DamagedChunk, Location::Byte(d.offset));
    }
    for c in &decoded.cut {
        warnings.add(WarningKind::TruncatedChunk, Location::Byte(c.offset));
    }
    warnings.add_n(WarningKind::LostChunks, decoded.lost, Location::Trace);
    if let Some(m) = &decoded.meta_problem {
        warnings.add(WarningKind::DamagedMetadata, Location::Byte(m.offset));
    }
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
    Ok(Prepared {
        decoded,
        passes,
        functions,
        end_tick,
        warnings,
        clock: clock.unwrap_or(Clock::Stack),
        gil_runs,
    })
}

impl Prepared<'_> {
    fn ns(&self, tick: u64) -> u64 {
        self.decoded.scale.ns(tick)
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
                ThreadSummary {
                    tid: t.tid.0,
                    name,
                    os_tid,
                    events: p.events,
                }
            })
            .collect()
    }

    /// Orders every segment by stack, then time, without moving them: an
    /// 8-byte (thread, index) handle per segment, grouped into one range per
    /// stack. Segments are most of the analyzer's heap, so they are not copied.
    ///
    /// Each thread's segments are already in time order, so a counting sort
    /// by stack (stable, thread after thread) leaves every stack's range as
    /// one sorted run per thread, which a stable sort merges cheaply.
    fn stack_order(&self) -> (Vec<SegmentHandle>, Vec<StackRange>) {
        // Per thread, in parallel: its stacks, and each segment's stack
        // numbered locally.
        let local: Vec<(Vec<StackKey>, Vec<u32>)> = self
            .passes
            .par_iter()
            .map(|p| {
                let mut keys: Vec<StackKey> = Vec::new();
                let mut index: FxHashMap<StackKey, u32> = FxHashMap::default();
                let mut last: Option<(StackKey, u32)> = None;
                let numbers = p
                    .segments
                    .iter()
                    .map(|s| match last {
                        Some((k, n)) if k == s.stack => n,
                        _ => {
                            let n = *index.entry(s.stack).or_insert_with(|| {
                                keys.push(s.stack);
                                keys.len() as u32 - 1
                            });
                            last = Some((s.stack, n));
                            n
                        }
                    })
                    .collect();
                (keys, numbers)
            })
            .collect();
        // Stacks numbered in key order.
        let mut stacks: Vec<StackKey> = local.iter().flat_map(|(k, _)| k.iter().copied()).collect();
        stacks.sort_unstable();
        stacks.dedup();
        let global = |k: &StackKey| stacks.binary_search(k).unwrap_or(0) as u32;
        let to_global: Vec<Vec<u32>> = local
            .iter()
            .map(|(keys, _)| keys.iter().map(global).collect())
            .collect();
        // Counting sort by stack.
        let mut starts = vec![0usize; stacks.len() + 1];
        for ((_, numbers), map) in local.iter().zip(&to_global) {
            for &n in numbers {
                starts[map[n as usize] as usize + 1] += 1;
            }
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut order: Vec<SegmentHandle> = vec![(0, 0); starts[stacks.len()]];
        let mut next = starts.clone();
        for (t, ((_, numbers), map)) in local.iter().zip(&to_global).enumerate() {
            for (i, &n) in numbers.iter().enumerate() {
                let g = map[n as usize] as usize;
                order[next[g]] = (t as u32, i as u32);
                next[g] += 1;
            }
        }
        drop(local);
        // Merge each stack's per-thread runs by time.
        let seg = |&(t, i): &SegmentHandle| &self.passes[t as usize].segments[i as usize];
        let mut groups: Vec<&mut [SegmentHandle]> = Vec::with_capacity(stacks.len());
        let mut rest: &mut [SegmentHandle] = &mut order;
        for w in starts.windows(2) {
            let (group, tail) = rest.split_at_mut(w[1] - w[0]);
            groups.push(group);
            rest = tail;
        }
        groups.into_par_iter().for_each(|g| {
            g.sort_by_key(|h| {
                let s = seg(h);
                (s.start_tick, s.tid, s.start)
            })
        });
        let ranges = stacks
            .into_iter()
            .zip(starts.windows(2))
            .map(|(k, w)| (k, w[0]..w[1]))
            .collect();
        (order, ranges)
    }

    /// The segments behind a range of handles from [`Prepared::stack_order`].
    fn segments<'s>(&'s self, handles: &[SegmentHandle]) -> Vec<&'s Segment> {
        handles
            .iter()
            .map(|&(t, i)| &self.passes[t as usize].segments[i as usize])
            .collect()
    }

    fn summary(&self, trace: &LoadedTrace, stacks: u64) -> TraceSummary {
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
            cmdline: h.args().into_iter().map(str::to_owned).collect(),
            start_unix_ns: h.clock.start_unix_ns,
            first_event_ns: first_ns,
            end_ns,
            duration_ns: end_ns.saturating_sub(first_ns),
            finished: h.finished(),
            ring: h.ring(),
            producer: match h.producer {
                mtrace_format::Producer::Python => crate::report::PRODUCER_PYTHON,
                mtrace_format::Producer::Unspecified => crate::report::PRODUCER_UNSPECIFIED,
            }
            .to_owned(),
            threads: self.thread_summaries(),
            stacks,
            events: self.passes.iter().map(|p| p.events).sum(),
            chunks: self
                .decoded
                .threads
                .iter()
                .map(|t| t.chunks.len() as u64)
                .sum(),
            chunks_lost: self.decoded.lost,
            chunks_damaged: self.decoded.damaged.len() as u64,
            dropped_events: h.dropped_events,
        }
    }
}

fn wanted<'s>(
    key: &StackKey,
    segs: impl FnOnce() -> Vec<&'s Segment>,
    names: &StackNames,
    opts: &AnalyzeOptions,
) -> bool {
    if let StackKey::Own(tid) = key {
        return own_stack_wanted(*tid, opts);
    }
    let thread_ok = opts.threads.is_empty() || segs().iter().any(|s| opts.threads.contains(&s.tid));
    let stack_ok = opts.stacks.is_empty()
        || opts.stacks.iter().any(|want| {
            *want == key.id_string()
                || matches!(key, StackKey::Logical(id) if names.get(*id).is_some_and(|n| n == want))
        });
    thread_ok && stack_ok
}

/// Whether `opts` select the own stack of thread `tid` (it runs on that
/// thread only, so this is known before its segments are).
fn own_stack_wanted(tid: u64, opts: &AnalyzeOptions) -> bool {
    let thread_ok = opts.threads.is_empty() || opts.threads.contains(&tid);
    let id = StackKey::Own(tid).id_string();
    thread_ok && (opts.stacks.is_empty() || opts.stacks.contains(&id))
}

/// A trace decoded and segmented, with the stacks the options select,
/// ready to replay stack by stack: [`analyze`] replays them all in
/// parallel and sums; the timeline exports replay one at a time with an
/// [`Observer`] that keeps every frame.
pub struct Analysis<'a> {
    prep: Prepared<'a>,
    clock: Clock,
    gil: Option<GilTimeline>,
    order: Vec<SegmentHandle>,
    /// Selected stacks, own stacks by thread id, then logical ones by id.
    stacks: Vec<StackRange>,
    /// All stacks in the trace, selected or not.
    all_stacks: u64,
}

impl<'a> Analysis<'a> {
    /// Decodes and segments `trace` and selects the stacks `opts` asks for.
    pub fn new(trace: &'a LoadedTrace, opts: &AnalyzeOptions) -> Result<Self, AnalyzeError> {
        Self::build(trace, opts, false)
    }

    /// With `fuse`, the segment pass replays the own stacks it can (see
    /// [`prepare`]); [`analyze`] finishes them instead of replaying them.
    fn build(
        trace: &'a LoadedTrace,
        opts: &AnalyzeOptions,
        fuse: bool,
    ) -> Result<Self, AnalyzeError> {
        let mut prep = prepare(trace, Some(opts), fuse)?;
        let clock = prep.clock;
        let (order, all) = prep.stack_order();
        // Own stacks the segment pass replayed left no segments behind.
        let fused = prep
            .passes
            .iter()
            .filter(|p| p.own_replay.is_some())
            .count();
        let all_stacks = (all.len() + fused) as u64;
        let stacks: Vec<_> = all
            .into_iter()
            .filter(|(k, range)| {
                let segs = || prep.segments(&order[range.clone()]);
                wanted(k, segs, &prep.decoded.stack_names, opts)
            })
            .collect();
        let end_ns = prep.ns(prep.end_tick);
        let gil = prep
            .gil_runs
            .take()
            .map(|runs| GilTimeline::new(runs, end_ns, prep.decoded.scale));
        Ok(Analysis {
            prep,
            clock,
            gil,
            order,
            stacks,
            all_stacks,
        })
    }

    /// The clock in use.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The decoded trace.
    pub fn decoded(&self) -> &Decoded<'a> {
        &self.prep.decoded
    }

    /// Every function, by dense index.
    pub fn functions(&self) -> &FunctionTable {
        &self.prep.functions
    }

    /// The end of the trace, ns from time zero.
    pub fn end_ns(&self) -> u64 {
        self.prep.ns(self.prep.end_tick)
    }

    /// Number of selected stacks.
    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// Selected stack `i`.
    pub fn stack_key(&self, i: usize) -> Option<StackKey> {
        self.stacks.get(i).map(|(k, _)| *k)
    }

    /// The segments of selected stack `i`, in time order.
    pub fn stack_segments(&self, i: usize) -> Vec<&Segment> {
        self.stacks
            .get(i)
            .map(|(_, range)| self.prep.segments(&self.order[range.clone()]))
            .unwrap_or_default()
    }

    /// Replays selected stack `i` into `tally` (made by [`Analysis::new_tally`]),
    /// showing `observer` every frame and running stretch.
    pub fn replay<O: Observer>(
        &self,
        i: usize,
        tally: &mut Tally,
        warnings: &mut Warnings,
        paths_root: u32,
        observer: &mut O,
    ) -> Option<StackStats> {
        let mut stats = self.replay_unnamed(i, tally, warnings, paths_root, observer)?;
        stats.name = stack_name(&self.prep.decoded, self.stack_key(i)?);
        Some(stats)
    }

    /// [`Analysis::replay`] without the stack's name.
    fn replay_unnamed<O: Observer>(
        &self,
        i: usize,
        tally: &mut Tally,
        warnings: &mut Warnings,
        paths_root: u32,
        observer: &mut O,
    ) -> Option<StackStats> {
        let key = self.stack_key(i)?;
        let ctx = ReplayContext {
            decoded: &self.prep.decoded,
            functions: &self.prep.functions,
            clock: self.clock,
            gil: self.gil.as_ref(),
            end_tick: self.prep.end_tick,
        };
        let segs = self.stack_segments(i);
        Some(replay_stack(
            &ctx, key, &segs, tally, warnings, paths_root, observer,
        ))
    }

    /// About how many events selected stack `i` holds (from its segments'
    /// positions; events cut by damage are counted), to schedule big
    /// stacks first.
    pub fn stack_weight(&self, i: usize) -> u64 {
        let Some((_, range)) = self.stacks.get(i) else {
            return 0;
        };
        self.order[range.clone()]
            .iter()
            .map(|&(t, j)| &self.prep.passes[t as usize].segments[j as usize])
            .map(|s| {
                let chunks = &self.prep.decoded.threads[s.thread as usize].chunks;
                let spanned = chunks
                    .get(s.start.chunk as usize..(s.end.chunk as usize).min(chunks.len()))
                    .unwrap_or(&[]);
                let whole: u64 = spanned.iter().map(|c| c.events as u64).sum();
                (whole + s.end.event as u64).saturating_sub(s.start.event as u64)
            })
            .sum()
    }

    /// An empty tally for this trace's functions.
    pub fn new_tally(&self, paths: bool) -> Tally {
        Tally::new(self.prep.functions.entries().len(), paths)
    }
}

/// Analyzes a loaded trace.
pub fn analyze(trace: &LoadedTrace, opts: &AnalyzeOptions) -> Result<Report, AnalyzeError> {
    let mut analysis = Analysis::build(trace, opts, true)?;
    // Own stacks the segment pass replayed wait only for the end of the trace.
    let fused: Vec<(u64, OwnReplay)> = {
        let prep = &mut analysis.prep;
        prep.passes
            .iter_mut()
            .zip(&prep.decoded.threads)
            .filter_map(|(p, t)| Some((t.tid.0, p.own_replay.take()?)))
            .collect()
    };
    let with_paths = opts.paths != PathMode::Off;
    let stacks = analysis.stack_count();
    // Biggest stacks first: the last stacks replayed are then short ones,
    // and all workers finish at about the same time. (The fused own stacks
    // have no segments, so they are not among these.)
    let mut order: Vec<(u64, usize)> = (0..stacks)
        .into_par_iter()
        .map(|i| (analysis.stack_weight(i), i))
        .collect();
    order.sort_unstable_by(|a, b| b.cmp(a));
    // Each fold job starts a tally (O(functions)): with thousands of short
    // stacks, every job takes a run of them rather than one each. Jobs are
    // no longer than that either, so an idle worker always finds one to
    // steal (rayon stops splitting a range once it runs).
    let per_job = (order.len() / (rayon::current_num_threads() * 16)).max(1);
    let (mut acc, mut stack_stats, mut replay_warnings) = order
        .into_par_iter()
        .map(|(_, i)| i)
        .with_min_len(per_job)
        .with_max_len(per_job)
        .fold(
            || {
                (
                    analysis.new_tally(with_paths),
                    Vec::new(),
                    Warnings::default(),
                )
            },
            |(mut tally, mut stats, mut warnings), i| {
                let root = match opts.paths {
                    PathMode::PerStack => STACK_LABEL | i as u32,
                    _ => ROOT,
                };
                stats.extend(analysis.replay_unnamed(
                    i,
                    &mut tally,
                    &mut warnings,
                    root,
                    &mut NoObserver,
                ));
                (tally, stats, warnings)
            },
        )
        .map(|(tally, stats, warnings)| (tally.into_acc(), stats, warnings))
        .reduce_with(|(mut a, mut sa, mut wa), (b, sb, wb)| {
            a.merge(b);
            sa.extend(sb);
            wa.merge(wb);
            (a, sa, wa)
        })
        .unwrap_or_else(|| {
            let empty = analysis.new_tally(with_paths).into_acc();
            (empty, Vec::new(), Warnings::default())
        });
    let end_ns = analysis.end_ns();
    let finished: Vec<_> = fused
        .into_par_iter()
        .map(|(tid, mut own)| {
            let stats = StackReplay::resume(
                own.state,
                &mut own.tally,
                &mut NoObserver,
                analysis.clock,
                StackKey::Own(tid),
                end_ns,
            );
            (own.tally.into_acc(), stats, own.warnings)
        })
        .collect();
    for (a, stats, warnings) in finished {
        acc.merge(a);
        stack_stats.push(stats);
        replay_warnings.merge(warnings);
    }
    let prep = &analysis.prep;
    let clock = analysis.clock;
    let n = prep.functions.entries().len();
    let stack_count = analysis.all_stacks;
    let stacks = &analysis.stacks;
    let mut warnings = prep.warnings.clone();
    warnings.merge(replay_warnings);
    sort_stacks(&mut stack_stats);
    let entries = prep.functions.entries();
    let mut functions: Vec<(usize, FunctionStats)> = acc
        .functions
        .iter()
        .enumerate()
        .filter(|(_, a)| a.ncalls > 0)
        .map(|(i, a)| {
            let e = &entries[i];
            let stats = FunctionStats {
                function: e.key.function.clone(),
                file: e.key.file.clone(),
                line: e.key.line,
                module: e.module.clone(),
                ncalls: a.ncalls,
                primitive_calls: a.primitive_calls,
                tottime_ns: a.tottime_ns,
                cumtime_ns: a.cumtime_ns,
                paused_ns: a.paused_ns,
                open_at_end: a.open_at_end,
            };
            (i, stats)
        })
        .collect();
    functions.sort_by_key(|(_, f)| f.key());
    // Dense index -> position in the report, for call paths.
    let mut position = vec![u32::MAX; n];
    for (pos, (dense, _)) in functions.iter().enumerate() {
        position[*dense] = pos as u32;
    }
    let functions: Vec<FunctionStats> = functions.into_iter().map(|(_, f)| f).collect();
    // Root labels of per-stack call paths (a million tasks make a million
    // names: only made when paths are kept per stack).
    let per_stack = opts.paths == PathMode::PerStack && acc.paths.is_some();
    let labels: Vec<String> = stacks
        .iter()
        .filter(|_| per_stack)
        .map(|(key, _)| {
            let name = stack_name(&prep.decoded, *key);
            if name.is_empty() {
                key.id_string()
            } else {
                name
            }
        })
        .collect();
    let mut paths: Vec<CallPath> = acc
        .paths
        .as_ref()
        .map(|t| match opts.collapse_recursion {
            Some(mode) => t.collapse_recursion(mode).paths(),
            None => t.paths(),
        })
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, ncalls, self_ns)| {
            let (stack, funcs) = match path.split_first() {
                Some((&first, rest)) if first & STACK_LABEL != 0 && first != ROOT => (
                    labels
                        .get((first & !STACK_LABEL) as usize)
                        .cloned()
                        .unwrap_or_default(),
                    rest,
                ),
                _ => (String::new(), &path[..]),
            };
            let frames: Vec<u32> = funcs.iter().map(|&d| position[d as usize]).collect();
            (!frames.is_empty()).then_some(CallPath {
                stack,
                frames,
                ncalls,
                self_ns,
            })
        })
        .collect();
    paths.sort_by(|a, b| (&a.stack, &a.frames).cmp(&(&b.stack, &b.frames)));
    let mut edges: Vec<EdgeStats> = acc
        .edges
        .iter()
        .map(|(&(caller, callee), a)| {
            let (c, d) = (&entries[caller as usize].key, &entries[callee as usize].key);
            EdgeStats {
                caller: c.function.clone(),
                caller_file: c.file.clone(),
                caller_line: c.line,
                callee: d.function.clone(),
                callee_file: d.file.clone(),
                callee_line: d.line,
                ncalls: a.ncalls,
                primitive_calls: a.primitive_calls,
                tottime_ns: a.tottime_ns,
                cumtime_ns: a.cumtime_ns,
            }
        })
        .collect();
    edges.sort_by_key(|e| (e.caller_key(), e.callee_key()));
    let summary = prep.summary(trace, stack_count);
    name_stacks(&mut stack_stats, &mut analysis.prep.decoded);
    Ok(Report {
        trace: summary,
        clock,
        functions,
        edges,
        stacks: stack_stats,
        warnings: warnings.to_report(),
        paths,
    })
}

/// Names the report's stacks, moving the names out of the metadata: a
/// trace of a million tasks has a million names, not worth copying.
/// `stacks` are in report order, logical ones ascending by id like the
/// names, so one forward walk over the names finds every logical stack's.
fn name_stacks(stacks: &mut [StackStats], decoded: &mut Decoded<'_>) {
    let mut stack_names = std::mem::take(&mut decoded.stack_names)
        .into_sorted()
        .into_iter()
        .peekable();
    let mut thread_names = std::mem::take(&mut decoded.thread_names);
    for s in stacks {
        s.name = match stack_order(&s.id) {
            (0, tid) => thread_names.remove(&tid).map(|(name, _)| name),
            (1, id) => {
                while stack_names.next_if(|(k, _)| *k < id).is_some() {}
                stack_names.next_if(|(k, _)| *k == id).map(|(_, name)| name)
            }
            _ => None,
        }
        .unwrap_or_default();
    }
}

/// Sorts the report's stacks by [`stack_order`] (ids are unique, so the
/// order is deterministic). Each id is parsed once, not once per
/// comparison, and the stacks are moved in place: a trace can hold a
/// million tasks, and a sorted copy of their statistics would add to the
/// peak heap.
fn sort_stacks(stacks: &mut [StackStats]) {
    let mut keys: Vec<(u8, u64, u32)> = stacks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (class, n) = stack_order(&s.id);
            (class, n, i as u32)
        })
        .collect();
    keys.sort_unstable_by(|a, b| {
        (a.0, a.1)
            .cmp(&(b.0, b.1))
            .then_with(|| stacks[a.2 as usize].id.cmp(&stacks[b.2 as usize].id))
    });
    // Position i takes the stack now at from[i]: follow each cycle of the
    // permutation once, swapping along it.
    let mut from: Vec<u32> = keys.into_iter().map(|k| k.2).collect();
    for i in 0..from.len() {
        let mut at = i;
        loop {
            let next = from[at] as usize;
            from[at] = at as u32;
            if next == i {
                break;
            }
            stacks.swap(at, next);
            at = next;
        }
    }
}

/// Orders `thread:2` before `thread:10`, and own stacks before logical ones.
fn stack_order(id: &str) -> (u8, u64) {
    let (kind, rest) = id.split_once(':').unwrap_or((id, ""));
    let class = match kind {
        "thread" => 0,
        "stack" => 1,
        _ => 2,
    };
    (class, rest.parse().unwrap_or(u64::MAX))
}

/// See [`crate::check::check`].
pub(crate) fn check_impl(trace: &LoadedTrace) -> Result<CheckReport, AnalyzeError> {
    let prep = prepare(trace, None, false)?;
    let stacks = prep.stack_order().1.len() as u64;
    let h = prep.decoded.file.header();
    let summary = prep.summary(trace, stacks);
    let issue = |p: &mtrace_format::ChunkProblem| ChunkIssue {
        index: p.index,
        offset: p.offset,
        problem: p.kind.to_string(),
    };
    let chunks = &prep.decoded.threads;
    Ok(CheckReport {
        source: trace.source.clone(),
        input_format: trace.format.name().to_owned(),
        format_version: h.version,
        finished: h.finished(),
        ring: h.ring(),
        pid: h.pid,
        cmdline: summary.cmdline.clone(),
        clock_source: summary.clock_source.clone(),
        calib_ticks: h.clock.calib_ticks,
        calib_ns: h.clock.calib_ns,
        ticks_per_second: summary.ticks_per_second,
        start_unix_ns: h.clock.start_unix_ns,
        duration_ns: summary.duration_ns,
        chunk_size: h.chunk_size,
        chunk_slots: h.chunk_count,
        chunk_slots_in_file: prep.decoded.file.chunk_slots(),
        chunks_used: summary.chunks,
        chunks_empty: prep.decoded.empty_slots,
        chunks_lost: prep.decoded.lost,
        chunks_damaged: prep.decoded.damaged.iter().map(issue).collect(),
        chunks_cut: prep.decoded.cut.iter().map(issue).collect(),
        chunks_unreleased: chunks
            .iter()
            .flat_map(|t| &t.chunks)
            .filter(|c| c.writing)
            .count() as u64,
        events: summary.events,
        dropped_events: h.dropped_events,
        dropped_chunks: h.dropped_chunks,
        metadata_records: prep.decoded.meta_records,
        metadata_dropped: h.meta_dropped,
        metadata_problem: prep
            .decoded
            .meta_problem
            .as_ref()
            .map(|m| format!("byte {}: {}", m.offset, m.why)),
        threads: summary.threads,
        stacks,
        warnings: prep.warnings.to_report(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn stack(id: &str) -> StackStats {
        StackStats {
            id: id.to_owned(),
            name: String::new(),
            threads: Vec::new(),
            running_ns: 0,
            paused_ns: 0,
            switches_in: 0,
            max_depth: 0,
            events: 0,
        }
    }

    proptest::proptest! {
        /// The in-place sort gives what sorting by the parsed key and the id does.
        #[test]
        fn stacks_sort_in_place_as_by_key(
            ids in proptest::sample::subsequence(
                vec!["thread:1", "thread:2", "thread:10", "stack:1", "stack:2",
                     "stack:10", "stack:99999", "stack:x", "thread:", "odd", "zzz"],
                0..=11,
            ).prop_shuffle(),
        ) {
            let mut got: Vec<StackStats> = ids.iter().map(|id| stack(id)).collect();
            let mut want = got.clone();
            want.sort_by(|a, b| {
                (stack_order(&a.id), &a.id).cmp(&(stack_order(&b.id), &b.id))
            });
            sort_stacks(&mut got);
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn numbers_order_numerically_and_threads_come_first() {
        let mut s: Vec<StackStats> = ["stack:10", "odd", "thread:10", "stack:2", "thread:2"]
            .iter()
            .map(|id| stack(id))
            .collect();
        sort_stacks(&mut s);
        let ids: Vec<&str> = s.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["thread:2", "thread:10", "stack:2", "stack:10", "odd"]);
    }
}
