//! Many traces, one report: the reports of several traces (the processes of
//! one service, repeat runs) summed into one, whose every total is exactly
//! the sum of the per-trace reports'.
//!
//! Functions and edges add up by identity (name, file, line); stacks and
//! threads are listed trace after trace (their ids are each trace's own),
//! but those of one process met again (the same host and pid: the files
//! of a rotating series) are listed once (`Processes`): a thread by
//! operating-system thread id and name (each file numbers its threads
//! anew), a stack by its id (a thread's own stack by its thread), their
//! counts and times summed; marks are listed trace after trace too, each
//! saying which trace it came from (its time is that trace's own);
//! call paths add up by stack and function path; warnings add up by kind.
//! The trace summary says how many traces were merged and sums what adds
//! up (events, durations, chunks, drops); where the traces disagree (their
//! clock source, their pid) it says so with an empty or zero value.
//! Memory is the reports', so it grows with functions times traces, not
//! with events: [`merge`] folds reports in as they come.
//!
//! What adds up by identity (functions, edges, call paths) is kept in
//! [`Sums`], apart from what is listed trace after trace. Sums can be made
//! apart and combined: `mtanalyze::analyze_many`'s workers each sum
//! the traces they analyzed, and the caller only lists the rest. Each row
//! remembers the first trace that met it, so the merged report lists its
//! rows as one sum in the traces' order would, however the work was split:
//! by the first trace that met them, and within it functions by name, file
//! and line and edges by caller then callee (as a trace's report lists
//! them), call paths in the trace's order.
//!
//! Edges are found by their functions' numbers (every function an edge
//! named gets one, in the order met), not by four strings: a small trace
//! has thousands of edges, and a [`CompactReport`] hands them over
//! numbered, so its edges cost a lookup of two integers each.

use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHashSet, FxHasher};

use crate::compact::{edge_row, CompactReport, NumberedEdge};
use crate::histogram::SelfTimeHistogram;
use crate::report::{
    CallPath, EdgeStats, FunctionKey, FunctionStats, Report, StackKey, StackRows, StackStats,
    ThreadSummary, TraceSummary, Warning,
};
use crate::sums::{EdgeSums, FunctionSums};

/// Where a call path was first met: the trace's number among the merged
/// traces, then the path's position in that trace's list.
type First = (u32, u32);

/// A function's row summed over traces.
#[derive(Debug)]
struct FunctionSum {
    row: FunctionStats,
    /// The first trace that met it.
    first: u32,
    /// The trace `row.module` came from (`u32::MAX`: none yet): the module
    /// is the first trace's that names one.
    module_from: u32,
}

/// What a function's row keeps of each frame beyond the sums: the sum of
/// squares and the histogram of self time, added up like the sums.
#[derive(Clone, Copy, Debug)]
#[doc(hidden)]
pub struct PerFrame<'a> {
    /// [`FunctionStats::tottime_sq`].
    pub tottime_sq: u128,
    /// [`FunctionStats::tottime_hist`].
    pub tottime_hist: &'a SelfTimeHistogram,
}

impl PerFrame<'_> {
    /// A row's.
    pub fn of(f: &FunctionStats) -> PerFrame<'_> {
        PerFrame {
            tottime_sq: f.tottime_sq,
            tottime_hist: &f.tottime_hist,
        }
    }
}

/// An edge's sums and the first trace that
/// met it.
#[derive(Debug)]
struct EdgeSum {
    sums: EdgeSums,
    first: u32,
}

/// A call path's counts, its frames by function number.
#[derive(Debug)]
struct PathSum {
    ncalls: u64,
    self_ns: u64,
    first: First,
}

/// What adds up by identity over traces: functions, edges and call paths
/// (see the module doc), whichever order the traces are added in.
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct Sums {
    /// Every function a row or an edge named, numbered in the order met.
    keys: Vec<FunctionKey>,
    /// Function numbers by the hash of their key ([`key_hash`]), so a key
    /// is found from borrowed strings and held once. A key whose hash
    /// another key has is in `collided` instead, found by a walk.
    numbers: FxHashMap<u64, u32>,
    collided: Vec<u32>,
    /// By function number: its row, if a trace had one.
    functions: Vec<Option<FunctionSum>>,
    /// By (caller, callee) number.
    edges: FxHashMap<(u32, u32), EdgeSum>,
    /// By stack and frames (function numbers, outermost first).
    paths: FxHashMap<(String, Vec<u32>), PathSum>,
}

impl Sums {
    /// The number of function `function` (`file`, `line`), given one if
    /// new.
    pub(crate) fn number(&mut self, function: &str, file: &str, line: u32) -> u32 {
        let hash = key_hash(function.as_bytes(), file.as_bytes(), line);
        let taken = self.numbers.get(&hash).copied();
        if let Some(n) = self.find(taken, function.as_bytes(), file.as_bytes(), line) {
            return n;
        }
        let n = self.keys.len() as u32;
        self.keys.push(FunctionKey::new(function, file, line));
        self.functions.push(None);
        match taken {
            Some(_) => self.collided.push(n),
            None => {
                self.numbers.insert(hash, n);
            }
        }
        n
    }

    /// [`Sums::number`] of a function as a trace's metadata writes it:
    /// its name and file as bytes, read as `String::from_utf8_lossy`
    /// reads them. Bytes met before (most, when the traces are of one
    /// program) are not read again.
    #[doc(hidden)]
    pub fn number_bytes(&mut self, function: &[u8], file: &[u8], line: u32) -> u32 {
        let taken = self.numbers.get(&key_hash(function, file, line)).copied();
        match self.find(taken, function, file, line) {
            Some(n) => n,
            None => {
                let lossy = String::from_utf8_lossy;
                self.number(&lossy(function), &lossy(file), line)
            }
        }
    }

    /// The number of the key with these bytes, if it has one: `taken`
    /// (the number its hash finds) or one whose hash another key has.
    fn find(&self, taken: Option<u32>, function: &[u8], file: &[u8], line: u32) -> Option<u32> {
        let is = |n: u32| {
            let k = &self.keys[n as usize];
            k.function.as_bytes() == function && k.file.as_bytes() == file && k.line == line
        };
        taken
            .filter(|&n| is(n))
            .or_else(|| self.collided.iter().copied().find(|&n| is(n)))
    }

    /// [`Sums::number`] of `key`.
    fn number_of(&mut self, key: &FunctionKey) -> u32 {
        self.number(&key.function, &key.file, key.line)
    }

    /// Adds the numbers `sums` and the
    /// per-frame spread `per_frame` of
    /// function `n` to its row, as met in trace `trace`, and its module
    /// (maybe empty; its bytes, read as `String::from_utf8_lossy` reads
    /// them, only if the row takes it) as named in trace `module_from`
    /// (one trace's row: the same trace; sums made apart: their own first
    /// trace to name one).
    #[doc(hidden)]
    pub fn add_function_sums(
        &mut self,
        n: u32,
        sums: FunctionSums,
        per_frame: PerFrame<'_>,
        trace: u32,
        module: &[u8],
        module_from: u32,
    ) {
        let slot = &mut self.functions[n as usize];
        let sum = slot.get_or_insert_with(|| FunctionSum {
            row: {
                let k = &self.keys[n as usize];
                FunctionStats::new(&k.function, &k.file, k.line, "")
            },
            first: trace,
            module_from: u32::MAX,
        });
        let mut total = sum.row.sums();
        total.add(&sums);
        sum.row.set_sums(total);
        sum.row.tottime_sq = sum.row.tottime_sq.saturating_add(per_frame.tottime_sq);
        sum.row.tottime_hist.merge(per_frame.tottime_hist);
        sum.first = sum.first.min(trace);
        // The module is the first trace's that names one.
        if !module.is_empty() && module_from < sum.module_from {
            sum.row.module = String::from_utf8_lossy(module).into_owned();
            sum.module_from = module_from;
        }
    }

    /// Adds the numbers `sums` of the edge
    /// `key` (caller and callee numbers), as met in trace `first`.
    #[doc(hidden)]
    pub fn add_edge(&mut self, key: (u32, u32), sums: EdgeSums, first: u32) {
        self.edges
            .entry(key)
            .and_modify(|e| {
                e.sums.add(&sums);
                e.first = e.first.min(first);
            })
            .or_insert(EdgeSum { sums, first });
    }

    /// Adds a call path's counts, as met at `first`.
    fn add_path(&mut self, key: (String, Vec<u32>), ncalls: u64, self_ns: u64, first: First) {
        self.paths
            .entry(key)
            .and_modify(|p| {
                p.ncalls = p.ncalls.saturating_add(ncalls);
                p.self_ns = p.self_ns.saturating_add(self_ns);
                p.first = p.first.min(first);
            })
            .or_insert(PathSum {
                ncalls,
                self_ns,
                first,
            });
    }

    /// Adds the functions, edges and call paths of `r`, trace number
    /// `trace`, leaving them empty.
    fn add_report(&mut self, trace: u32, r: &mut Report) {
        let index = self.add_rows(trace, r, None);
        for e in std::mem::take(&mut r.edges) {
            let caller = self.number(&e.caller, &e.caller_file, e.caller_line);
            let key = (
                caller,
                self.number(&e.callee, &e.callee_file, e.callee_line),
            );
            self.add_edge(key, e.sums(), trace);
        }
        self.add_paths(trace, r, &index);
    }

    /// Adds the functions, edges and call paths of `c`, trace number
    /// `trace`, leaving them empty.
    #[doc(hidden)]
    pub fn add_compact(&mut self, trace: u32, c: &mut CompactReport) {
        // The trace's function numbers to ours, each looked up once.
        let ours: Vec<u32> = c.keys.iter().map(|k| self.number_of(k)).collect();
        let index = self.add_rows(trace, &mut c.report, Some((&c.row_keys, &ours)));
        for e in std::mem::take(&mut c.edges) {
            let NumberedEdge {
                caller,
                callee,
                sums,
            } = e;
            let key = (ours[caller as usize], ours[callee as usize]);
            self.add_edge(key, sums, trace);
        }
        self.add_paths(trace, &mut c.report, &index);
        // Freed here, on the thread that made them (a worker's), not by
        // whoever takes the rest of the report.
        c.keys = Vec::new();
        c.row_keys = Vec::new();
    }

    /// Adds `r`'s function rows, whose numbers are `numbered` (each row's
    /// key number, and those numbers to ours) or found by key; returns each
    /// row's number.
    fn add_rows(
        &mut self,
        trace: u32,
        r: &mut Report,
        numbered: Option<(&[u32], &[u32])>,
    ) -> Vec<u32> {
        let rows = std::mem::take(&mut r.functions);
        let mut index = Vec::with_capacity(rows.len());
        for (pos, f) in rows.into_iter().enumerate() {
            let n = match numbered {
                Some((row_keys, ours)) => ours[row_keys[pos] as usize],
                None => self.number(&f.function, &f.file, f.line),
            };
            self.add_function_sums(
                n,
                f.sums(),
                PerFrame::of(&f),
                trace,
                f.module.as_bytes(),
                trace,
            );
            index.push(n);
        }
        index
    }

    /// Adds `r`'s call paths, whose frames index the rows numbered `index`.
    fn add_paths(&mut self, trace: u32, r: &mut Report, index: &[u32]) {
        for (pos, p) in std::mem::take(&mut r.paths).into_iter().enumerate() {
            // A frame out of the rows (no report makes one) stays itself.
            let frames = p
                .frames
                .iter()
                .map(|&f| index.get(f as usize).copied().unwrap_or(f))
                .collect();
            self.add_path((p.stack, frames), p.ncalls, p.self_ns, (trace, pos as u32));
        }
    }

    /// Adds everything `other` summed.
    #[doc(hidden)]
    pub fn absorb(&mut self, other: Sums) {
        if self.keys.is_empty() {
            // Nothing summed yet (every row and edge names a key).
            *self = other;
            return;
        }
        let Sums {
            keys,
            numbers: _,
            collided: _,
            functions,
            edges,
            paths,
        } = other;
        let ours: Vec<u32> = keys.iter().map(|k| self.number_of(k)).collect();
        for (n, f) in functions.into_iter().enumerate() {
            let Some(f) = f else { continue };
            let FunctionSum {
                row,
                first,
                module_from,
            } = f;
            // The module goes with the trace it came from, not `first`'s.
            let module = row.module.as_bytes();
            self.add_function_sums(
                ours[n],
                row.sums(),
                PerFrame::of(&row),
                first,
                module,
                module_from,
            );
        }
        for ((caller, callee), e) in edges {
            self.add_edge(
                (ours[caller as usize], ours[callee as usize]),
                e.sums,
                e.first,
            );
        }
        for ((stack, frames), p) in paths {
            let frames = frames
                .iter()
                .map(|&f| ours.get(f as usize).copied().unwrap_or(f))
                .collect();
            self.add_path((stack, frames), p.ncalls, p.self_ns, p.first);
        }
    }

    /// The rows, each kind by the first trace that met it, then functions
    /// by key, edges by caller then callee, call paths in their trace's
    /// order (see the module doc).
    fn into_rows(self) -> (Vec<FunctionStats>, Vec<EdgeStats>, Vec<CallPath>) {
        let Sums {
            keys,
            functions,
            edges,
            paths,
            ..
        } = self;
        let mut rows: Vec<(u32, FunctionSum)> = functions
            .into_iter()
            .enumerate()
            .filter_map(|(n, f)| Some((n as u32, f?)))
            .collect();
        rows.sort_unstable_by(|(a, x), (b, y)| {
            (x.first, &keys[*a as usize]).cmp(&(y.first, &keys[*b as usize]))
        });
        // Function numbers to row positions (paths name functions by row).
        let mut position = vec![u32::MAX; keys.len()];
        for (pos, (n, _)) in rows.iter().enumerate() {
            position[*n as usize] = pos as u32;
        }
        let functions = rows.into_iter().map(|(_, f)| f.row).collect();
        let mut edges: Vec<((u32, u32), EdgeSum)> = edges.into_iter().collect();
        edges.sort_unstable_by(|(a, x), (b, y)| {
            let key = |n: u32| &keys[n as usize];
            (x.first, key(a.0), key(a.1)).cmp(&(y.first, key(b.0), key(b.1)))
        });
        let edges = edges
            .into_iter()
            .map(|((caller, callee), e)| {
                let e = NumberedEdge {
                    caller,
                    callee,
                    sums: e.sums,
                };
                edge_row(&keys, &e)
            })
            .collect();
        let mut paths: Vec<((String, Vec<u32>), PathSum)> = paths.into_iter().collect();
        paths.sort_unstable_by_key(|(_, p)| p.first);
        let paths = paths
            .into_iter()
            .map(|((stack, frames), p)| CallPath {
                stack,
                frames: frames
                    .into_iter()
                    .map(|n| position.get(n as usize).copied().unwrap_or(n))
                    .collect(),
                ncalls: p.ncalls,
                self_ns: p.self_ns,
            })
            .collect();
        (functions, edges, paths)
    }
}

/// A report being built from several.
#[derive(Debug, Default)]
pub struct Merged {
    /// Everything but the functions, edges and call paths (in `sums`).
    report: Option<Report>,
    sums: Sums,
    traces: usize,
    /// Where the threads and stacks of each process are listed (filled
    /// from the second trace on: one trace is not a merge).
    processes: Processes,
    /// Each trace's first event and end, in ns since the Unix epoch; `None`
    /// once a trace of unknown date was added (see [`Merged::finish`]).
    spans: Option<Vec<(u64, u64)>>,
}

impl Merged {
    /// Nothing merged yet.
    pub fn new() -> Merged {
        Merged::default()
    }

    /// How many reports were added.
    pub fn traces(&self) -> usize {
        self.traces
    }

    /// Adds one trace's report. Reports must share a clock (the caller
    /// checks: a sum over different clocks means nothing).
    pub fn add(&mut self, mut r: Report) {
        self.sums.add_report(self.traces as u32, &mut r);
        self.add_listed(r);
    }

    /// [`Merged::add`] for a report whose edges are numbered: the same
    /// sum, in the same order, without a row per edge (see
    /// [`CompactReport`]). A report from `mtanalyze::analyze_many`
    /// brings only what is listed (its sums are the workers').
    #[doc(hidden)]
    pub fn add_compact(&mut self, mut c: CompactReport) {
        self.sums.add_compact(self.traces as u32, &mut c);
        self.add_listed(c.report);
    }

    /// Adds sums made apart (see [`Sums`]), whose traces were numbered as
    /// this merge numbers them: by their place among the traces added.
    #[doc(hidden)]
    pub fn absorb(&mut self, sums: Sums) {
        self.sums.absorb(sums);
    }

    /// Adds what `r` lists trace after trace (its functions, edges and
    /// paths are in the sums already).
    fn add_listed(&mut self, mut r: Report) {
        let t = &r.trace;
        let dated = t.start_unix_ns != 0 && (self.traces == 0 || self.spans.is_some());
        self.spans = dated.then(|| {
            let mut spans = self.spans.take().unwrap_or_default();
            spans.push((
                t.start_unix_ns.saturating_add(t.first_event_ns),
                t.start_unix_ns.saturating_add(t.end_ns),
            ));
            spans
        });
        // Marks say which trace they came from: the report's position.
        for m in &mut r.marks {
            m.trace = Some(self.traces as u64);
        }
        self.traces += 1;
        let Some(into) = &mut self.report else {
            self.report = Some(r);
            return;
        };
        if self.traces == 2 {
            self.processes.list_first(into);
        }
        let process = self.processes.number(&r.trace);
        let threads = std::mem::take(&mut r.trace.threads);
        let tids = self
            .processes
            .add_threads(&mut into.trace.threads, threads, process);
        let mut met_again = 0;
        for mut s in std::mem::take(&mut r.stacks) {
            tids.rename_stack(&mut s);
            if self.processes.add_stack(&mut into.stacks, s, process) {
                met_again += 1;
            }
        }
        for m in &mut r.marks {
            m.thread = tids.rename(m.thread);
        }
        // A stack listed once more counts once more; one met again, not.
        into.stacks_shown = (into.stacks_shown + r.stacks_shown).saturating_sub(met_again);
        r.trace.stacks = r.trace.stacks.saturating_sub(met_again);
        if r.stack_rows != StackRows::Kept {
            into.stack_rows = r.stack_rows;
        }
        into.marks.extend(r.marks);
        add_warnings(&mut into.warnings, r.warnings);
        add_summary(&mut into.trace, r.trace, self.traces);
    }

    /// The merged report (`None` if nothing was added). Functions and
    /// edges are in the order they were first met (see the module doc);
    /// sort them as usual for display (the views do).
    pub fn finish(self) -> Option<Report> {
        let mut r = self.report?;
        (r.functions, r.edges, r.paths) = self.sums.into_rows();
        r.trace.traces = self.traces as u64;
        if let Some(spans) = self.spans.filter(|_| self.traces > 1) {
            r.trace.duration_ns = covered_ns(spans);
        }
        if self.traces == 1 {
            // One trace is not a merge: its marks name no trace.
            for m in &mut r.marks {
                m.trace = None;
            }
        }
        Some(r)
    }
}

/// How long at least one of `spans` (start, end) lasted: a process tree's
/// traces overlap, and the tree ran for the parent's time, not the sum of
/// its processes'; the files of a rotating series follow one another, and
/// runs on different days add up.
fn covered_ns(mut spans: Vec<(u64, u64)>) -> u64 {
    spans.sort_unstable();
    let mut covered = 0u64;
    let mut open: Option<(u64, u64)> = None;
    for (start, end) in spans {
        let end = end.max(start);
        open = match open {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                covered = covered.saturating_add(e - s);
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    open.map_or(covered, |(s, e)| covered.saturating_add(e - s))
}

/// Merges `reports` (see [`Merged`]); `None` when there are none.
pub fn merge(reports: impl IntoIterator<Item = Report>) -> Option<Report> {
    let mut m = Merged::new();
    for r in reports {
        m.add(r);
    }
    m.finish()
}

/// The hash [`Sums`] finds a function's number by (of the bytes, so a
/// trace's metadata is looked up as written: [`Sums::number_bytes`]).
fn key_hash(function: &[u8], file: &[u8], line: u32) -> u64 {
    let mut h = FxHasher::default();
    // As `str` hashes: the bytes, then a byte no UTF-8 string has.
    h.write(function);
    h.write_u8(0xff);
    h.write(file);
    h.write_u8(0xff);
    h.write_u32(line);
    h.finish()
}

fn add_warnings(into: &mut Vec<Warning>, from: Vec<Warning>) {
    for w in from {
        match into.iter_mut().find(|x| x.kind == w.kind) {
            Some(x) => {
                x.count = x.count.saturating_add(w.count);
                // In the order of the traces, each one's sorted by place.
                x.details.extend(w.details);
                for (kind, n) in w.by_stack_kind {
                    let e = x.by_stack_kind.entry(kind).or_default();
                    *e = e.saturating_add(n);
                }
            }
            None => into.push(w),
        }
    }
    into.sort_by(|a, b| a.kind.cmp(&b.kind));
}

/// Folds trace `n`'s summary (`b`) into the merged one.
fn add_summary(a: &mut TraceSummary, b: TraceSummary, n: usize) {
    let differ = |x: &str, y: &str| x != y;
    // The first eight sources by name; the rest as "...".
    match n {
        2..=8 => {
            a.source.push_str(", ");
            a.source.push_str(&b.source);
        }
        9 => a.source.push_str(", ..."),
        _ => {}
    }
    // Different clock sources keep the first's name (the schema's kinds
    // are one trace's); the tick rate says they differ.
    if differ(&a.clock_source, &b.clock_source) || a.ticks_per_second != b.ticks_per_second {
        a.ticks_per_second = 0;
    }
    if a.pid != b.pid {
        a.pid = 0;
    }
    if a.host != b.host {
        a.host.clear();
    }
    if a.cmdline != b.cmdline {
        a.cmdline.clear();
    }
    if differ(&a.producer, &b.producer) {
        a.producer = "unspecified".into();
    }
    a.format_version = a.format_version.max(b.format_version);
    a.start_unix_ns = match (a.start_unix_ns, b.start_unix_ns) {
        (0, s) | (s, 0) => s,
        (x, y) => x.min(y),
    };
    a.first_event_ns = 0;
    a.end_ns = a.end_ns.max(b.end_ns);
    a.duration_ns = a.duration_ns.saturating_add(b.duration_ns);
    a.finished &= b.finished;
    a.ring |= b.ring;
    a.stacks = a.stacks.saturating_add(b.stacks);
    a.events = a.events.saturating_add(b.events);
    a.wakes = a.wakes.saturating_add(b.wakes);
    a.chunks = a.chunks.saturating_add(b.chunks);
    a.chunks_lost = a.chunks_lost.saturating_add(b.chunks_lost);
    a.chunks_damaged = a.chunks_damaged.saturating_add(b.chunks_damaged);
    a.dropped_events = a.dropped_events.saturating_add(b.dropped_events);
    if differ(&a.input_format, &b.input_format) {
        // The schema's kinds are one trace's; a mix reads as binary.
        a.input_format = "binary".into();
    }
}

/// The threads and stacks of the processes merged so far, so that a
/// process met again (a later file of a rotating series, which numbers
/// its threads anew) adds to its rows instead of listing them twice.
/// A trace of unknown pid (0) is a process of its own.
#[derive(Debug, Default)]
struct Processes {
    /// (host, pid) -> the process's number.
    numbers: FxHashMap<(String, u32), u32>,
    /// (process, operating-system thread id, name) -> position in the
    /// merged summary's threads (threads of unknown id are never matched).
    threads: FxHashMap<(u32, u64, String), usize>,
    /// The trace thread ids each process's listed threads have.
    tids: FxHashSet<(u32, u64)>,
    /// (process, stack, as renamed) -> position in the merged stacks.
    stacks: FxHashMap<(u32, StackKey), usize>,
}

/// How a trace's thread ids read in the merged report (only the ids that
/// change are kept).
#[derive(Debug, Default)]
struct TidMap(FxHashMap<u64, u64>);

impl TidMap {
    fn rename(&self, tid: u64) -> u64 {
        self.0.get(&tid).copied().unwrap_or(tid)
    }

    /// Renames the thread of a thread's own stack and the threads it ran on.
    fn rename_stack(&self, s: &mut StackStats) {
        if self.0.is_empty() {
            return;
        }
        if let StackKey::Own(tid) = s.id {
            s.id = StackKey::Own(self.rename(tid));
        }
        s.threads = s.threads.iter().map(|&t| self.rename(t)).collect();
    }
}

impl Processes {
    /// The process `trace` was recorded by (`None`: its pid is unknown).
    fn number(&mut self, trace: &TraceSummary) -> Option<u32> {
        if trace.pid == 0 {
            return None;
        }
        let next = self.numbers.len() as u32;
        Some(
            *self
                .numbers
                .entry((trace.host.clone(), trace.pid))
                .or_insert(next),
        )
    }

    /// Indexes the first trace's threads and stacks, as the second comes
    /// (before it is added: the summary still names the first's process).
    fn list_first(&mut self, first: &Report) {
        let Some(process) = self.number(&first.trace) else {
            return;
        };
        for (i, t) in first.trace.threads.iter().enumerate() {
            self.tids.insert((process, t.tid));
            if t.os_tid != 0 {
                self.threads.insert((process, t.os_tid, t.name.clone()), i);
            }
        }
        for (i, s) in first.stacks.iter().enumerate() {
            self.stacks.insert((process, s.id), i);
        }
    }

    /// Lists `threads` (of `process`) after `listed`, but for the threads
    /// of the same process listed already: their events add up and their
    /// loss is the first's. A new thread whose id another thread of the
    /// process has gets the next free id. Returns the ids that changed.
    fn add_threads(
        &mut self,
        listed: &mut Vec<ThreadSummary>,
        threads: Vec<ThreadSummary>,
        process: Option<u32>,
    ) -> TidMap {
        let mut renamed = TidMap::default();
        let Some(process) = process else {
            listed.extend(threads);
            return renamed;
        };
        // Ids taken by this trace's threads, which keep theirs if they can.
        let own: FxHashSet<u64> = threads.iter().map(|t| t.tid).collect();
        let mut next_free = listed
            .iter()
            .chain(&threads)
            .map(|t| t.tid)
            .max()
            .unwrap_or(0)
            + 1;
        for mut t in threads {
            let key = (process, t.os_tid, t.name.clone());
            if let Some(&i) = self.threads.get(&key).filter(|_| t.os_tid != 0) {
                let seen = &mut listed[i];
                seen.events = seen.events.saturating_add(t.events);
                seen.lost_ns = seen.lost_ns.saturating_add(t.lost_ns);
                seen.lost_from_ns = seen.lost_from_ns.or(t.lost_from_ns);
                if seen.tid != t.tid {
                    renamed.0.insert(t.tid, seen.tid);
                }
                continue;
            }
            if self.tids.contains(&(process, t.tid)) {
                while own.contains(&next_free) || self.tids.contains(&(process, next_free)) {
                    next_free += 1;
                }
                renamed.0.insert(t.tid, next_free);
                t.tid = next_free;
                next_free += 1;
            }
            self.tids.insert((process, t.tid));
            if t.os_tid != 0 {
                self.threads.insert(key, listed.len());
            }
            listed.push(t);
        }
        renamed
    }

    /// Lists stack `s` (of `process`, its threads renamed) after `listed`,
    /// or adds it to its row if the process's stack is listed already:
    /// then true. Its times, switches and events add up; its deepest
    /// depth is the deeper; it ran on the threads of both; it ended if it
    /// ended in either.
    fn add_stack(
        &mut self,
        listed: &mut Vec<StackStats>,
        s: StackStats,
        process: Option<u32>,
    ) -> bool {
        let Some(process) = process else {
            listed.push(s);
            return false;
        };
        let Some(&i) = self.stacks.get(&(process, s.id)) else {
            self.stacks.insert((process, s.id), listed.len());
            listed.push(s);
            return false;
        };
        let row = &mut listed[i];
        row.running_ns = row.running_ns.saturating_add(s.running_ns);
        row.paused_ns = row.paused_ns.saturating_add(s.paused_ns);
        row.scheduled_ns = row.scheduled_ns.saturating_add(s.scheduled_ns);
        row.waiting_ns = row.waiting_ns.saturating_add(s.waiting_ns);
        row.switches_in = row.switches_in.saturating_add(s.switches_in);
        row.events = row.events.saturating_add(s.events);
        row.max_depth = row.max_depth.max(s.max_depth);
        row.ended |= s.ended;
        if row.name.is_empty() {
            row.name = s.name;
        }
        for &t in s.threads.iter() {
            row.threads.insert(t);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Clock;

    fn thread(tid: u64, os_tid: u64, name: &str, events: u64) -> ThreadSummary {
        ThreadSummary {
            tid,
            name: name.into(),
            os_tid,
            events,
            lost_from_ns: None,
            lost_ns: 0,
        }
    }

    fn summary(pid: u32, threads: Vec<ThreadSummary>) -> TraceSummary {
        TraceSummary {
            pid,
            host: "h".into(),
            threads,
            ..TraceSummary::default()
        }
    }

    fn stack(id: StackKey, threads: &[u64], running_ns: u64, max_depth: u32) -> StackStats {
        StackStats {
            kind: Default::default(),
            id,
            name: "".into(),
            threads: threads.iter().copied().collect(),
            running_ns,
            paused_ns: 2 * running_ns,
            scheduled_ns: 0,
            waiting_ns: 2 * running_ns,
            switches_in: 1,
            max_depth,
            events: 10,
            ended: false,
        }
    }

    fn report(pid: u32, threads: Vec<ThreadSummary>, stacks: Vec<StackStats>) -> Report {
        Report {
            trace: TraceSummary {
                stacks: stacks.len() as u64,
                ..summary(pid, threads)
            },
            clock: Clock::Stack,
            functions: Vec::new(),
            functions_total: None,
            edges: Vec::new(),
            edges_total: None,
            stacks_shown: stacks.len() as u64,
            stacks,
            warnings: Vec::new(),
            marks: Vec::new(),
            paths: Vec::new(),
            stack_rows: StackRows::Kept,
        }
    }

    #[test]
    fn merged_duration_is_the_time_some_trace_was_recording() {
        let dated = |start: u64, first: u64, end: u64| {
            let mut r = report(1, vec![], vec![]);
            r.trace.start_unix_ns = start;
            r.trace.first_event_ns = first;
            r.trace.end_ns = end;
            r.trace.duration_ns = end - first;
            r
        };
        // A parent (1000..2000) and two children inside it, one reaching
        // past its end: the tree ran 1000..2100.
        let tree = merge([
            dated(1000, 0, 1000),
            dated(1200, 0, 500),
            dated(1500, 100, 600),
        ])
        .unwrap();
        assert_eq!(tree.trace.duration_ns, 1100);
        // Runs apart in time add up (as a sum did).
        let apart = merge([dated(1000, 10, 110), dated(5000, 0, 50)]).unwrap();
        assert_eq!(apart.trace.duration_ns, 150);
        // A trace of unknown date: the sum, as before.
        let undated = merge([dated(1000, 0, 100), dated(0, 0, 40)]).unwrap();
        assert_eq!(undated.trace.duration_ns, 140);
        // One trace is its own.
        assert_eq!(
            merge([dated(1000, 10, 110)]).unwrap().trace.duration_ns,
            100
        );
    }

    #[test]
    fn a_thread_of_one_process_met_in_several_traces_is_listed_once() {
        // Two files of a rotating series: the same two threads, new ids.
        let a = report(
            7,
            vec![thread(1, 100, "main", 10), thread(2, 101, "w", 5)],
            vec![],
        );
        let b = report(
            7,
            vec![thread(1, 101, "w", 3), thread(2, 100, "main", 4)],
            vec![],
        );
        // Another process (a child): listed apart.
        let c = report(8, vec![thread(1, 100, "main", 1)], vec![]);
        let m = merge([a, b, c]).unwrap();
        let rows: Vec<_> = m
            .trace
            .threads
            .iter()
            .map(|t| (t.tid, t.os_tid, t.events))
            .collect();
        assert_eq!(rows, [(1, 100, 14), (2, 101, 8), (1, 100, 1)]);
        // Unknown operating-system ids are never taken for one thread.
        let d = report(9, vec![thread(1, 0, "x", 1)], vec![]);
        let e = report(9, vec![thread(2, 0, "x", 1)], vec![]);
        assert_eq!(merge([d, e]).unwrap().trace.threads.len(), 2);
    }

    #[test]
    fn a_stack_of_one_process_met_in_several_traces_is_one_row() {
        use StackKey::{Logical, Own};
        // File 1: main (tid 1), w (tid 2); task 5 ran on w.
        let a = report(
            7,
            vec![thread(1, 100, "main", 10), thread(2, 101, "w", 5)],
            vec![
                stack(Own(1), &[1], 10, 3),
                stack(Own(2), &[2], 5, 1),
                stack(Logical(5), &[2], 4, 6),
            ],
        );
        // File 2 numbers them the other way (w 1, main 2) and a new thread
        // n 3; task 5 ran on w and n. File 3: n is 1, and a newer thread m
        // has 2, an id main has in the merge: m gets the next free one.
        let b = report(
            7,
            vec![
                thread(1, 101, "w", 3),
                thread(2, 100, "main", 4),
                thread(3, 102, "n", 1),
            ],
            vec![stack(Own(2), &[2], 20, 4), stack(Logical(5), &[1, 3], 6, 2)],
        );
        let c = report(
            7,
            vec![thread(1, 102, "n", 1), thread(2, 103, "m", 1)],
            vec![stack(Own(2), &[2], 1, 1), stack(Logical(9), &[1], 1, 1)],
        );
        // Another process's stack 5 is its own.
        let d = report(
            8,
            vec![thread(1, 100, "main", 1)],
            vec![stack(Logical(5), &[1], 7, 1)],
        );
        let m = merge([a, b, c, d]).unwrap();
        let tids: Vec<_> = m
            .trace
            .threads
            .iter()
            .map(|t| (t.tid, t.name.as_str()))
            .collect();
        assert_eq!(
            tids,
            [(1, "main"), (2, "w"), (3, "n"), (4, "m"), (1, "main")]
        );
        let rows: Vec<_> = m
            .stacks
            .iter()
            .map(|s| {
                (
                    s.id,
                    s.threads.to_vec(),
                    s.running_ns,
                    s.paused_ns,
                    s.max_depth,
                    s.switches_in,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (Own(1), vec![1], 30, 60, 4, 2),
                (Own(2), vec![2], 5, 10, 1, 1),
                (Logical(5), vec![2, 3], 10, 20, 6, 2),
                (Own(4), vec![4], 1, 2, 1, 1),
                (Logical(9), vec![3], 1, 2, 1, 1),
                (Logical(5), vec![1], 7, 14, 1, 1),
            ]
        );
        // Each stack counts once.
        assert_eq!((m.trace.stacks, m.stacks_shown), (6, 6));
    }

    #[test]
    fn a_key_whose_hash_another_key_has_gets_its_own_number() {
        let mut sums = Sums::default();
        assert_eq!(sums.number("a", "a.py", 1), 0);
        // As if "b" hashed like "a": its hash already names number 0.
        sums.numbers.insert(key_hash(b"b", b"b.py", 2), 0);
        assert_eq!(sums.number("b", "b.py", 2), 1);
        assert_eq!(sums.collided, [1]);
        assert_eq!(sums.number("b", "b.py", 2), 1);
        assert_eq!(sums.number("a", "a.py", 1), 0);
        assert_eq!(sums.number("a", "a.py", 2), 2);
        assert_eq!(sums.keys[1], FunctionKey::new("b", "b.py", 2));
        assert_eq!(sums.functions.len(), 3);
    }

    #[test]
    fn sums_made_apart_keep_the_module_of_the_first_trace_that_names_one() {
        let mut hist = SelfTimeHistogram::default();
        hist.add(7);
        let one = PerFrame {
            tottime_sq: 49,
            tottime_hist: &hist,
        };
        let ones = FunctionSums {
            ncalls: 1,
            tottime_ns: 1,
            ..FunctionSums::default()
        };
        let mut a = Sums::default();
        let n = a.number("f", "f.py", 1);
        a.add_function_sums(n, ones, one, 5, b"x", 5);
        let mut b = Sums::default();
        let n = b.number("f", "f.py", 1);
        b.add_function_sums(n, ones, one, 1, b"", 1);
        b.add_function_sums(n, ones, one, 3, b"y", 3);
        a.absorb(b);
        let (rows, _, _) = a.into_rows();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].module.as_str(), rows[0].ncalls), ("y", 3));
        // The frames' squares and histograms add up as the sums do.
        assert_eq!(rows[0].tottime_sq, 3 * 49);
        assert_eq!(rows[0].tottime_hist.iter().collect::<Vec<_>>(), [(7, 3)]);
    }
}
