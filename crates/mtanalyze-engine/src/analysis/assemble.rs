//! The last step of [`crate::analyze`]: the statistics summed over every
//! stack become the report: function rows with their keys, call paths
//! with their frames as report positions, stacks in id order with their
//! names, every warning, and the marks. Edges stay numbered (a
//! [`CompactReport`]): a merge of many traces sums them by number, and
//! [`CompactReport::into_report`] makes them rows for everyone else.

use crate::analysis::decode::{Decoded, FunctionTable};
use crate::analysis::frames::{Acc, FnAcc, Tally};
use crate::analysis::marks::to_marks;
use crate::analysis::options::{AnalyzeOptions, PathMode};
use crate::analysis::paths::{ROOT, STACK_LABEL};
use crate::analysis::prepare::Prepared;
use crate::analysis::replay::{stack_kind, stack_name};
use crate::analysis::segment::StackKey;
use crate::analysis::stacks::Analysis;
use crate::input::LoadedTrace;
use mtanalyze_model::compact::{CompactReport, NumberedEdge};
use mtanalyze_model::functions::FunctionEntry;
use mtanalyze_model::labels::{LabelSite, Labels};
use mtanalyze_model::merge::{PerFrame, Sums};
use mtanalyze_model::report::{
    CallPath, Clock, FunctionStats, Report, StackName, StackRows, StackStats, TimeWindow, Warning,
};
use mtanalyze_model::sums::{EdgeSums, FunctionSums};
use mtanalyze_model::warnings::{makes_subinterpreter, PlaceNames, Warnings};

/// Where the function rows and edges of a report go.
pub(super) enum Rows {
    /// Into the report.
    Made,
    /// Added to a worker's sums already ([`fold_numbered`]); the report
    /// has none. Not with call paths.
    Summed,
}

/// What a report is made from besides the statistics: the prepared trace,
/// the clock, how many stacks the trace has, and the labels of per-stack
/// call paths (by selected stack).
pub(super) struct Source<'a> {
    pub(super) prep: Prepared<'a>,
    pub(super) clock: Clock,
    pub(super) all_stacks: u64,
    pub(super) labels: Vec<String>,
    /// Rows the report shows that are not in its `stacks` (a stream that
    /// counted or handed them: see [`Report::stacks_shown`]).
    pub(super) rows_elsewhere: u64,
}

impl<'a> Source<'a> {
    /// The source of a batch analysis's report (its segments are freed).
    pub(super) fn of(mut analysis: Analysis<'a>, opts: &AnalyzeOptions) -> Self {
        analysis.drop_segments();
        let labels = match opts.paths {
            PathMode::PerStack => path_labels(&analysis),
            _ => Vec::new(),
        };
        Source {
            clock: analysis.clock,
            all_stacks: analysis.all_stacks,
            prep: analysis.prep,
            labels,
            rows_elsewhere: 0,
        }
    }
}

/// Builds the report from the statistics `acc` of all stacks, each stack's
/// own (`stacks`, best in id order) and the problems the replays found.
pub(super) fn assemble(
    trace: &LoadedTrace,
    source: Source<'_>,
    opts: &AnalyzeOptions,
    acc: Acc,
    mut stacks: Vec<StackStats>,
    replay_warnings: Warnings,
    rows: Rows,
) -> CompactReport {
    let Source {
        mut prep,
        clock,
        all_stacks,
        labels,
        rows_elsewhere,
    } = source;
    let summed = matches!(rows, Rows::Summed);
    let (functions, row_keys, position) = match rows {
        Rows::Made => function_rows(&acc, prep.functions.entries()),
        Rows::Summed => Default::default(),
    };
    if !prep.window.is_all() {
        stacks.retain(lived_in_window);
    }
    let stacks_shown = rows_elsewhere + stacks.len() as u64;
    if opts.stack_rows != StackRows::Kept {
        stacks = Vec::new();
    }
    let labels = match acc.paths {
        Some(_) => labels,
        None => Vec::new(),
    };
    let paths = call_paths(&acc, opts, &labels, &position);
    let edges = match summed {
        true => Vec::new(),
        false => numbered_edges(&acc),
    };
    let mut warnings = prep.warnings.clone();
    warnings.merge(replay_warnings);
    for left in &acc.left_open.0 {
        warnings.add_left_open(prep.decoded.stack_kinds.get(left.stack), left);
    }
    if !summed {
        warnings.add_subinterpreters(subinterpreters_made(&acc, prep.functions.entries()));
    }
    let mut summary = prep.summary(trace, all_stacks);
    if !prep.window.is_all() {
        let (from_ns, to_ns) = prep.window.bounds();
        summary.window = Some(TimeWindow {
            from_ns,
            to_ns: to_ns.unwrap_or(summary.end_ns.max(from_ns)),
        });
    }
    // Own stacks before logical ones, each by number; keys are unique, so
    // the order is deterministic. In place: a trace can hold a million
    // tasks, and a sorted copy of their statistics would add to the peak heap.
    // (The streamed analysis's rows come in the order their stacks
    // finished. rayon's parallel sort ran twice the instructions of this
    // one on them, 25M against 12M for 50,000 rows: no faster on two cores.)
    if !stacks.is_sorted_by_key(|s| s.id) && !place_by_dense_id(&mut stacks) {
        stacks.sort_unstable_by_key(|s| s.id);
    }
    // Before the stacks take their names from the decoded trace.
    let warnings = warnings_report(&warnings, &prep, summed);
    name_stacks(&mut stacks, &mut prep.decoded);
    let decoded = &mut prep.decoded;
    let marks = to_marks(std::mem::take(&mut decoded.marks), decoded.scale);
    let report = Report {
        trace: summary,
        clock,
        functions,
        edges: Vec::new(),
        functions_total: None,
        edges_total: None,
        stacks,
        warnings,
        marks,
        paths,
        stack_rows: opts.stack_rows,
        stacks_shown,
    };
    let keys = match summed {
        true => Vec::new(),
        false => std::mem::take(&mut prep.functions).into_keys(),
    };
    CompactReport {
        report,
        keys,
        row_keys,
        edges,
    }
}

/// The report's warnings, with their details named if they were kept:
/// stacks by their names and kinds in the trace, frames by their labels
/// ([`Labels`]; by number when the functions are a worker's numbers,
/// `summed`, which an analysis that keeps details does not use).
fn warnings_report(warnings: &Warnings, prep: &Prepared<'_>, summed: bool) -> Vec<Warning> {
    if !warnings.keeps_details() {
        return warnings.to_report();
    }
    let labels = match summed {
        true => None,
        false => Some(Labels::new(
            prep.functions.entries().iter().map(LabelSite::from),
        )),
    };
    let decoded = &prep.decoded;
    let stack_name = |id: u64| {
        let name = stack_name(decoded, StackKey::Logical(id));
        (!name.is_empty()).then(|| name.into_owned())
    };
    let kind = |id: u64| decoded.stack_kinds.get(id);
    let function = |f: u32| match &labels {
        Some(l) if (f as usize) < l.as_slice().len() => l.get(f as usize).to_owned(),
        _ => format!("fn#{f}"),
    };
    warnings.to_report_with(Some(&PlaceNames {
        stack_name: &stack_name,
        stack_kind: &kind,
        function: &function,
    }))
}

/// The functions that were called, sorted by key, with each one's dense
/// index, and for each dense index its position among them (`u32::MAX`:
/// never called).
/// Calls that made a subinterpreter ([`makes_subinterpreter`]).
fn subinterpreters_made(acc: &Acc, entries: &[FunctionEntry<'_>]) -> u64 {
    acc.functions
        .iter()
        .zip(entries)
        .filter(|(_, e)| makes_subinterpreter(&e.key.function, &e.key.file))
        .fold(0u64, |n, (a, _)| n.saturating_add(a.ncalls))
}

fn function_rows(
    acc: &Acc,
    entries: &[FunctionEntry<'_>],
) -> (Vec<FunctionStats>, Vec<u32>, Vec<u32>) {
    let mut on_paths = vec![false; acc.functions.len()];
    if let Some(t) = &acc.paths {
        t.mark_functions(&mut on_paths);
    }
    let mut functions: Vec<(usize, FunctionStats)> = acc
        .functions
        .iter()
        .enumerate()
        .filter(|&(i, a)| has_row(a) || on_paths[i])
        .map(|(i, a)| {
            let e = &entries[i];
            let mut stats = FunctionStats::new(&e.key.function, &e.key.file, e.key.line, &e.module);
            stats.set_sums(function_sums(a));
            stats.tottime_sq = a.tottime_sq;
            stats.tottime_hist = a.tottime_hist.clone();
            (i, stats)
        })
        .collect();
    functions.sort_unstable_by(|(_, a), (_, b)| {
        (&a.function, &a.file, a.line).cmp(&(&b.function, &b.file, b.line))
    });
    let mut position = vec![u32::MAX; entries.len()];
    for (pos, (dense, _)) in functions.iter().enumerate() {
        position[*dense] = pos as u32;
    }
    let dense = functions.iter().map(|&(i, _)| i as u32).collect();
    (
        functions.into_iter().map(|(_, f)| f).collect(),
        dense,
        position,
    )
}

/// Root labels of per-stack call paths, by selected stack (a million tasks
/// make a million names: only made when paths are kept per stack).
fn path_labels(analysis: &Analysis<'_>) -> Vec<String> {
    analysis
        .stacks
        .iter()
        .map(|(key, _)| path_label(&analysis.prep.decoded, *key))
        .collect()
}

/// The root label of `key`'s call paths: its name, else its key.
pub(super) fn path_label(decoded: &Decoded<'_>, key: StackKey) -> String {
    let name = stack_name(decoded, key);
    if name.is_empty() {
        key.to_string()
    } else {
        name.into_owned()
    }
}

/// The call paths of `acc`'s tree (recursion collapsed if asked), with
/// frames as report positions, sorted by stack, frames and counts.
fn call_paths(
    acc: &Acc,
    opts: &AnalyzeOptions,
    labels: &[String],
    position: &[u32],
) -> Vec<CallPath> {
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
            let counts = ncalls | self_ns != 0;
            (!frames.is_empty() && counts).then_some(CallPath {
                stack,
                frames,
                ncalls,
                self_ns,
            })
        })
        .collect();
    // Two stacks of one name keep a path each; ordered by their counts too,
    // the rows come out the same however the replay's work was split (the
    // tree's order of the two follows the order its parts were merged in).
    paths.sort_by(|a, b| {
        (&a.stack, &a.frames, a.ncalls, a.self_ns).cmp(&(&b.stack, &b.frames, b.ncalls, b.self_ns))
    });
    paths
}

/// Whether a function gets a row (call paths aside): called, or (in a
/// time window) with a frame entered before it that ran, paused or had
/// callees in it.
fn has_row(a: &FnAcc) -> bool {
    a.ncalls | a.tottime_ns | a.cumtime_ns | a.paused_ns | a.through_callees != 0
}

/// A function's row numbers.
fn function_sums(a: &FnAcc) -> FunctionSums {
    let scheduled_ns = a.scheduled_ns.min(a.paused_ns);
    FunctionSums {
        ncalls: a.ncalls,
        primitive_calls: a.primitive_calls,
        tottime_ns: a.tottime_ns,
        cumtime_ns: a.cumtime_ns,
        paused_ns: a.paused_ns,
        open_at_end: a.open_at_end,
        cut_short: a.cut_short,
        scheduled_ns,
        waiting_ns: a.paused_ns - scheduled_ns,
    }
}

/// An edge's numbers, if it gets a row: not if its frames were all
/// outside the time window.
fn edge_sums(a: &EdgeSums) -> Option<EdgeSums> {
    (a.ncalls | a.tottime_ns | a.cumtime_ns != 0).then_some(*a)
}

/// Every caller -> callee edge with a call or time in the window, by
/// dense function index (see [`CompactReport`]).
fn numbered_edges(acc: &Acc) -> Vec<NumberedEdge> {
    acc.edges
        .iter()
        .filter_map(|(&(caller, callee), a)| {
            Some(NumberedEdge {
                caller,
                callee,
                sums: edge_sums(a)?,
            })
        })
        .collect()
}

/// Adds the function rows of `tally` (numbered as `sums` number them: see
/// [`crate::analysis::decode::Numbering`]) to `sums` as trace number
/// `trace`, and its edges to `edges`, as [`Sums::add_compact`] would add
/// them from the report: what a worker summing its traces does, without
/// making rows it would only read once, nor looking each one up. Leaves
/// the tally's edge totals zero; returns how many edges the trace had.
pub(super) fn fold_numbered(
    tally: &mut Tally,
    functions: &FunctionTable<'_>,
    sums: &mut Sums,
    trace: u32,
    edges: &mut EdgeTotals,
) -> usize {
    for (n, module) in functions.numbered_modules() {
        if let Some(a) = tally.function(n).filter(|a| has_row(a)) {
            sums.add_function_sums(
                n,
                function_sums(a),
                PerFrame {
                    tottime_sq: a.tottime_sq,
                    tottime_hist: &a.tottime_hist,
                },
                trace,
                module,
                trace,
            );
        }
    }
    // Every edge the tally numbers, in one pass: an edge this trace did
    // not call adds zeros (its frames outside a time window add nothing
    // either: it gets no row from this trace).
    edges.grow(tally.edge_count());
    let mut had = 0;
    for ((key, a), e) in tally.take_edge_totals().zip(&mut edges.0) {
        let counts = a.ncalls | a.tottime_ns | a.cumtime_ns != 0;
        let keep = (counts as u64).wrapping_neg();
        e.sums.add(&EdgeSums {
            callee_cumtime_ns: a.callee_cumtime_ns & keep,
            ..a
        });
        if counts && e.first == u32::MAX {
            (e.key, e.first) = (key, trace);
        }
        had += counts as usize;
    }
    had
}

/// One edge of [`EdgeTotals`].
#[derive(Clone, Copy, Debug)]
pub(super) struct EdgeTotal {
    /// Caller and callee, the sums' numbers.
    key: (u32, u32),
    /// Its numbers, summed over the traces so far.
    sums: EdgeSums,
    /// The first trace that had it (`u32::MAX`: none yet).
    first: u32,
}

/// The edges of the traces one worker summed ([`fold_numbered`]), by
/// their numbers in the worker's tally, summed so far. Added to the sums
/// once, at the end ([`EdgeTotals::flush`]), not trace by trace.
#[derive(Debug, Default)]
pub(super) struct EdgeTotals(Vec<EdgeTotal>);

impl EdgeTotals {
    /// Makes room for `n` edges.
    fn grow(&mut self, n: usize) {
        if self.0.len() < n {
            let none = EdgeTotal {
                key: (0, 0),
                sums: EdgeSums::default(),
                first: u32::MAX,
            };
            self.0.resize(n, none);
        }
    }

    /// Adds every edge to `sums` and forgets them (their numbers with them).
    pub(super) fn flush(&mut self, sums: &mut Sums) {
        for e in self.0.drain(..) {
            if e.first != u32::MAX {
                sums.add_edge(e.key, e.sums, e.first);
            }
        }
    }
}

/// Sorts rows by id in linear time where the logical stacks' ids are dense
/// (the recorder numbers stacks in order, so a task-per-request trace's
/// are): each row goes straight to its place, own stacks first. Returns
/// false, leaving `rows` as they were, where they are not (ids repeated
/// or with gaps), for a sort to do.
fn place_by_dense_id(rows: &mut [StackStats]) -> bool {
    let mut own: Vec<u64> = Vec::new();
    let (mut lo, mut hi, mut logical) = (u64::MAX, 0u64, 0u64);
    for r in rows.iter() {
        match r.id {
            StackKey::Own(tid) => own.push(tid),
            StackKey::Logical(id) => {
                (lo, hi, logical) = (lo.min(id), hi.max(id), logical + 1);
            }
        }
    }
    own.sort_unstable();
    own.dedup();
    let dense = logical == 0 || hi - lo == logical - 1;
    if !dense || own.len() + logical as usize != rows.len() {
        return false;
    }
    // Ids unique and without gaps: where each row goes is a permutation.
    let place = |key: StackKey| match key {
        StackKey::Own(tid) => own.binary_search(&tid).unwrap_or(0),
        StackKey::Logical(id) => own.len() + (id - lo) as usize,
    };
    // Each swap puts one row where it belongs, for good: more swaps than
    // rows means two rows wanted one place (a repeated id, which the
    // analysis never makes), and the sort takes over.
    let mut swaps = 0;
    for i in 0..rows.len() {
        loop {
            let to = place(rows[i].id);
            if to == i {
                break;
            }
            rows.swap(i, to);
            swaps += 1;
            if swaps > rows.len() {
                return false;
            }
        }
    }
    true
}

/// Whether a stack's row is in a report with a time window: the stack
/// lived or did something in it.
pub(super) fn lived_in_window(s: &StackStats) -> bool {
    s.running_ns | s.paused_ns | s.events | s.switches_in != 0
}

/// Names the report's stacks (thread names moved out of the metadata).
/// `stacks` are sorted by id, logical ones ascending by number like the names,
/// so one forward walk over the names finds every logical stack's.
fn name_stacks(stacks: &mut [StackStats], decoded: &mut Decoded<'_>) {
    let stack_names = std::mem::take(&mut decoded.stack_names);
    let mut stack_names = stack_names.iter().peekable();
    let mut thread_names = std::mem::take(&mut decoded.thread_names);
    for s in stacks {
        s.kind = stack_kind(decoded, s.id);
        s.name = match s.id {
            StackKey::Own(tid) => thread_names.remove(&tid).map(|(name, _)| name.into()),
            StackKey::Logical(id) => {
                while stack_names.next_if(|(k, _)| *k < id).is_some() {}
                stack_names
                    .next_if(|(k, _)| *k == id)
                    .map(|(_, name)| StackName::new(&name))
            }
        }
        .unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_with_dense_ids_are_placed_as_a_sort_would_order_them() {
        let row = stack;
        let own = |t| StackKey::Own(t);
        let logical = |i| StackKey::Logical(i);
        for n in [0u64, 1, 2, 7, 100, 1000] {
            for own_tids in [vec![], vec![9], vec![3, 1, 2]] {
                let mut keys: Vec<StackKey> = (40..40 + n).map(logical).collect();
                keys.extend(own_tids.iter().copied().map(own));
                // A scrambled order (every rotation and stride).
                let len = keys.len().max(1);
                let mut rows: Vec<StackStats> = (0..keys.len())
                    .map(|i| row(keys[(i * 7 + n as usize) % len]))
                    .collect();
                let mut want: Vec<StackKey> = rows.iter().map(|r| r.id).collect();
                want.sort_unstable();
                want.dedup();
                if want.len() != rows.len() {
                    continue; // the stride repeated a key
                }
                assert!(place_by_dense_id(&mut rows), "{n} {own_tids:?}");
                let got: Vec<StackKey> = rows.iter().map(|r| r.id).collect();
                assert_eq!(got, want, "{n} {own_tids:?}");
            }
        }
        // A gap, or a repeated id: left to the sort, every row still there.
        for keys in [
            vec![logical(1), logical(3)],
            vec![logical(2), logical(1), logical(1)],
            vec![logical(1), logical(1), logical(3)],
            vec![own(1), own(1), logical(1)],
        ] {
            let mut rows: Vec<StackStats> = keys.iter().copied().map(row).collect();
            assert!(!place_by_dense_id(&mut rows), "{keys:?}");
            let mut got: Vec<StackKey> = rows.iter().map(|r| r.id).collect();
            let mut want = keys.clone();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want);
        }
    }
    use proptest::strategy::Strategy;

    fn stack(id: StackKey) -> StackStats {
        StackStats {
            kind: Default::default(),
            id,
            name: Default::default(),
            threads: Default::default(),
            running_ns: 0,
            paused_ns: 0,
            scheduled_ns: 0,
            waiting_ns: 0,
            switches_in: 0,
            max_depth: 0,
            events: 0,
            ended: false,
        }
    }

    /// What the report promises of its stack order, by the written id alone.
    fn id_order(id: &str) -> (u8, u64) {
        let (kind, n) = id.split_once(':').unwrap_or((id, ""));
        let class = if kind == "thread" { 0 } else { 1 };
        (class, n.parse().unwrap_or(u64::MAX))
    }

    proptest::proptest! {
        /// Sorting by id orders the stacks as their written ids promise:
        /// own stacks first, then logical ones, each by number, not as text.
        #[test]
        fn stacks_sort_by_id_as_their_ids_read(
            keys in proptest::sample::subsequence(
                vec![StackKey::Own(1), StackKey::Own(2), StackKey::Own(10),
                     StackKey::Logical(1), StackKey::Logical(2), StackKey::Logical(10),
                     StackKey::Logical(99999), StackKey::Own(u64::MAX)],
                0..=8,
            ).prop_shuffle(),
        ) {
            let mut got: Vec<StackStats> = keys.into_iter().map(stack).collect();
            let mut want: Vec<String> = got.iter().map(|s| s.id.to_string()).collect();
            want.sort_by_key(|id| id_order(id));
            got.sort_unstable_by_key(|s| s.id);
            let got: Vec<String> = got.into_iter().map(|s| s.id.to_string()).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn numbers_order_numerically_and_threads_come_first() {
        let mut s: Vec<_> = [
            StackKey::Logical(10),
            StackKey::Own(10),
            StackKey::Logical(2),
            StackKey::Own(2),
        ]
        .into_iter()
        .map(stack)
        .collect();
        s.sort_unstable_by_key(|s| s.id);
        let ids: Vec<String> = s.iter().map(|s| s.id.to_string()).collect();
        assert_eq!(ids, ["thread:2", "thread:10", "stack:2", "stack:10"]);
    }

    #[test]
    fn ids_read_back_and_nothing_else_does() {
        for key in [StackKey::Own(3), StackKey::Logical(u64::MAX)] {
            assert_eq!(key.to_string().parse::<StackKey>(), Ok(key));
            let json = serde_json::to_string(&key).unwrap();
            assert_eq!(serde_json::from_str::<StackKey>(&json).unwrap(), key);
        }
        assert_eq!(
            serde_json::to_string(&StackKey::Own(3)).unwrap(),
            "\"thread:3\""
        );
        for bad in ["thread:", "stack:x", "odd", "task:1", ""] {
            assert!(bad.parse::<StackKey>().is_err(), "{bad}");
        }
    }
}
