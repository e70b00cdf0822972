//! Many traces, one report: the reports of several traces (the processes of
//! one service, repeat runs) summed into one, whose every total is exactly
//! the sum of the per-trace reports'.
//!
//! Functions and edges add up by identity (name, file, line); stacks and
//! threads are listed trace after trace (their ids are each trace's own),
//! and so are marks, each saying which trace it came from (its time is
//! that trace's own);
//! call paths add up by stack and function path; warnings add up by kind.
//! The trace summary says how many traces were merged and sums what adds
//! up (events, durations, chunks, drops); where the traces disagree (their
//! clock source, their pid) it says so with an empty or zero value.
//! Memory is the reports', so it grows with functions times traces, not
//! with events: [`merge`] folds reports in as they come.
//!
//! Edges are found by their functions' numbers (every function an edge
//! named gets one, in the order met), not by four strings: a small trace
//! has thousands of edges, and a [`CompactReport`] hands them over
//! numbered, so its edges cost a lookup of two integers each and a row
//! only when new.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::model::compact::{edge_row, CompactReport, NumberedEdge};
use crate::model::report::{CallPath, FunctionKey, FunctionStats, Report, TraceSummary, Warning};

/// A report being built from several.
#[derive(Debug, Default)]
pub struct Merged {
    report: Option<Report>,
    functions: FxHashMap<FunctionKey, usize>,
    /// Every function an edge named, numbered in the order met.
    numbers: FxHashMap<FunctionKey, u32>,
    /// By (caller, callee) number: the position in the report's edges.
    edges: FxHashMap<(u32, u32), usize>,
    /// The sums of the report's edges, by position (in [`crate::model::report::EdgeStats::sums`]
    /// order): what every trace adds to, packed, where the rows are a few
    /// strings each; written into the rows by [`Merged::finish`].
    edge_sums: Vec<[u64; 5]>,
    paths: FxHashMap<(String, Vec<u32>), usize>,
    traces: usize,
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
        let edges = std::mem::take(&mut r.edges);
        self.add_all_but_edges(r);
        let Some(into) = &mut self.report else {
            return;
        };
        for e in edges {
            let caller = number(&mut self.numbers, &e.caller_key());
            let callee = number(&mut self.numbers, &e.callee_key());
            match self.edges.entry((caller, callee)) {
                Entry::Occupied(i) => add_sums(&mut self.edge_sums[*i.get()], e.sums()),
                Entry::Vacant(v) => {
                    v.insert(into.edges.len());
                    self.edge_sums.push(e.sums());
                    into.edges.push(e);
                }
            }
        }
    }

    /// [`Merged::add`] for a report whose edges are numbered: the same
    /// sum, in the same order, without a row per edge (see [`CompactReport`]).
    pub fn add_compact(&mut self, c: CompactReport) {
        let CompactReport {
            report,
            keys,
            edges,
        } = c;
        self.add_all_but_edges(report);
        let Some(into) = &mut self.report else {
            return;
        };
        // The trace's function numbers to ours, each looked up once.
        let mut ours = vec![u32::MAX; keys.len()];
        let mut our_number = |n: u32| {
            let slot = &mut ours[n as usize];
            if *slot == u32::MAX {
                *slot = number(&mut self.numbers, &keys[n as usize]);
            }
            *slot
        };
        let mut new: Vec<(u32, u32, &NumberedEdge)> = Vec::new();
        for e in &edges {
            let key = (our_number(e.caller), our_number(e.callee));
            match self.edges.get(&key) {
                Some(&i) => add_sums(&mut self.edge_sums[i], e.sums),
                None => new.push((key.0, key.1, e)),
            }
        }
        // New edges go last in the order the trace's report lists them
        // (by caller, then callee), as `add` would add them.
        let order = |e: &NumberedEdge| (&keys[e.caller as usize], &keys[e.callee as usize]);
        new.sort_unstable_by(|a, b| order(a.2).cmp(&order(b.2)));
        for (caller, callee, e) in new {
            self.edges.insert((caller, callee), into.edges.len());
            self.edge_sums.push(e.sums);
            into.edges.push(edge_row(&keys, e));
        }
    }

    /// Adds everything of `r` but its edges (which the callers add).
    fn add_all_but_edges(&mut self, mut r: Report) {
        debug_assert!(r.edges.is_empty(), "the edges are added by number");
        // Marks say which trace they came from: the report's position.
        for m in &mut r.marks {
            m.trace = Some(self.traces as u64);
        }
        self.traces += 1;
        let Some(into) = &mut self.report else {
            for (i, f) in r.functions.iter().enumerate() {
                self.functions.insert(f.key(), i);
            }
            for (i, p) in r.paths.iter().enumerate() {
                self.paths.insert((p.stack.clone(), p.frames.clone()), i);
            }
            self.report = Some(r);
            return;
        };
        // The other report's function indices in the merged list (paths
        // name functions by index).
        let mut index = Vec::with_capacity(r.functions.len());
        for f in r.functions {
            let i = *self.functions.entry(f.key()).or_insert_with(|| {
                into.functions.push(FunctionStats {
                    ncalls: 0,
                    primitive_calls: 0,
                    tottime_ns: 0,
                    cumtime_ns: 0,
                    paused_ns: 0,
                    open_at_end: 0,
                    cut_short: 0,
                    scheduled_ns: 0,
                    waiting_ns: 0,
                    ..f.clone()
                });
                into.functions.len() - 1
            });
            add_function(&mut into.functions[i], &f);
            index.push(i as u32);
        }
        for p in r.paths {
            let frames: Vec<u32> = p
                .frames
                .iter()
                .map(|&f| index.get(f as usize).copied().unwrap_or(f))
                .collect();
            match self.paths.get(&(p.stack.clone(), frames.clone())) {
                Some(&i) => {
                    let q = &mut into.paths[i];
                    q.ncalls = q.ncalls.saturating_add(p.ncalls);
                    q.self_ns = q.self_ns.saturating_add(p.self_ns);
                }
                None => {
                    self.paths
                        .insert((p.stack.clone(), frames.clone()), into.paths.len());
                    into.paths.push(CallPath { frames, ..p });
                }
            }
        }
        into.stacks.extend(r.stacks);
        into.marks.extend(r.marks);
        add_warnings(&mut into.warnings, r.warnings);
        add_summary(&mut into.trace, r.trace, self.traces);
    }

    /// The merged report (`None` if nothing was added). Functions and
    /// edges are in the order they were first met; sort them as usual for
    /// display (the views do).
    pub fn finish(self) -> Option<Report> {
        let mut r = self.report?;
        for (row, sums) in r.edges.iter_mut().zip(self.edge_sums) {
            row.set_sums(sums);
        }
        r.trace.traces = self.traces as u64;
        if self.traces == 1 {
            // One trace is not a merge: its marks name no trace.
            for m in &mut r.marks {
                m.trace = None;
            }
        }
        Some(r)
    }
}

/// Merges `reports` (see [`Merged`]); `None` when there are none.
pub fn merge(reports: impl IntoIterator<Item = Report>) -> Option<Report> {
    let mut m = Merged::new();
    for r in reports {
        m.add(r);
    }
    m.finish()
}

fn add_function(a: &mut FunctionStats, b: &FunctionStats) {
    a.ncalls = a.ncalls.saturating_add(b.ncalls);
    a.primitive_calls = a.primitive_calls.saturating_add(b.primitive_calls);
    a.tottime_ns = a.tottime_ns.saturating_add(b.tottime_ns);
    a.cumtime_ns = a.cumtime_ns.saturating_add(b.cumtime_ns);
    a.paused_ns = a.paused_ns.saturating_add(b.paused_ns);
    a.open_at_end = a.open_at_end.saturating_add(b.open_at_end);
    a.cut_short = a.cut_short.saturating_add(b.cut_short);
    a.scheduled_ns = a.scheduled_ns.saturating_add(b.scheduled_ns);
    a.waiting_ns = a.waiting_ns.saturating_add(b.waiting_ns);
    if a.module.is_empty() {
        a.module.clone_from(&b.module);
    }
}

/// Adds an edge's sums to `a` (both in [`crate::model::report::EdgeStats::sums`] order).
fn add_sums(a: &mut [u64; 5], b: [u64; 5]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(y);
    }
}

/// The number of function `key` among `numbers`, given one if new.
fn number(numbers: &mut FxHashMap<FunctionKey, u32>, key: &FunctionKey) -> u32 {
    if let Some(&n) = numbers.get(key) {
        return n;
    }
    let n = numbers.len() as u32;
    numbers.insert(key.clone(), n);
    n
}

fn add_warnings(into: &mut Vec<Warning>, from: Vec<Warning>) {
    for w in from {
        match into.iter_mut().find(|x| x.kind == w.kind) {
            Some(x) => x.count = x.count.saturating_add(w.count),
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
    a.threads.extend(b.threads);
    a.stacks = a.stacks.saturating_add(b.stacks);
    a.events = a.events.saturating_add(b.events);
    a.chunks = a.chunks.saturating_add(b.chunks);
    a.chunks_lost = a.chunks_lost.saturating_add(b.chunks_lost);
    a.chunks_damaged = a.chunks_damaged.saturating_add(b.chunks_damaged);
    a.dropped_events = a.dropped_events.saturating_add(b.dropped_events);
    if differ(&a.input_format, &b.input_format) {
        // The schema's kinds are one trace's; a mix reads as binary.
        a.input_format = "binary".into();
    }
}
