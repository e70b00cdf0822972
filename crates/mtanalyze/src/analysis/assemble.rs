//! The last step of [`crate::analyze`]: the statistics summed over every
//! stack become the report: function rows with their keys, call paths
//! with their frames as report positions, stacks in id order with their
//! names, every warning, and the marks. Edges stay numbered (a
//! [`CompactReport`]): a merge of many traces sums them by number, and
//! [`CompactReport::into_report`] makes them rows for everyone else.

use crate::analysis::decode::{Decoded, FunctionEntry};
use crate::analysis::frames::{Acc, EdgeAcc, FnAcc};
use crate::analysis::marks::to_marks;
use crate::analysis::options::{AnalyzeOptions, PathMode};
use crate::analysis::paths::{ROOT, STACK_LABEL};
use crate::analysis::prepare::Prepared;
use crate::analysis::replay::stack_name;
use crate::analysis::segment::StackKey;
use crate::analysis::stacks::Analysis;
use crate::input::LoadedTrace;
use crate::model::compact::{CompactReport, NumberedEdge};
use crate::model::merge::Sums;
use crate::model::report::Clock;
use crate::model::report::{CallPath, FunctionStats, Report, StackStats, TimeWindow};
use crate::model::warnings::Warnings;

/// Where the function rows and edges of a report go.
pub(super) enum Rows<'s> {
    /// Into the report.
    Made,
    /// Added to these sums as this trace number, not made (see
    /// [`fold_rows`]); the report has none. Not with call paths.
    Summed(&'s mut Sums, u32),
}

/// What a report is made from besides the statistics: the prepared trace,
/// the clock, how many stacks the trace has, and the labels of per-stack
/// call paths (by selected stack).
pub(super) struct Source<'a> {
    pub(super) prep: Prepared<'a>,
    pub(super) clock: Clock,
    pub(super) all_stacks: u64,
    pub(super) labels: Vec<String>,
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
    rows: Rows<'_>,
) -> CompactReport {
    let Source {
        mut prep,
        clock,
        all_stacks,
        labels,
    } = source;
    let entries = prep.functions.entries();
    let summed = matches!(rows, Rows::Summed(..));
    let (functions, row_keys, position) = match rows {
        Rows::Made => function_rows(&acc, entries),
        Rows::Summed(sums, number) => {
            fold_rows(&acc, entries, sums, number);
            Default::default()
        }
    };
    if !prep.window.is_all() {
        // Stacks that neither lived nor did anything in the window.
        stacks.retain(|s| s.running_ns | s.paused_ns | s.events | s.switches_in != 0);
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
    if !stacks.is_sorted_by_key(|s| s.id) {
        stacks.sort_unstable_by_key(|s| s.id);
    }
    name_stacks(&mut stacks, &mut prep.decoded);
    let decoded = &mut prep.decoded;
    let marks = to_marks(std::mem::take(&mut decoded.marks), decoded.scale);
    let report = Report {
        trace: summary,
        clock,
        functions,
        edges: Vec::new(),
        stacks,
        warnings: warnings.to_report(),
        marks,
        paths,
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

/// The functions that were called, sorted by key, with each one's dense
/// index, and for each dense index its position among them (`u32::MAX`:
/// never called).
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
        .map(|(key, _)| {
            let name = stack_name(&analysis.prep.decoded, *key);
            if name.is_empty() {
                key.to_string()
            } else {
                name
            }
        })
        .collect()
}

/// The call paths of `acc`'s tree (recursion collapsed if asked), with
/// frames as report positions, sorted by stack and frames.
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
    paths.sort_by(|a, b| (&a.stack, &a.frames).cmp(&(&b.stack, &b.frames)));
    paths
}

/// Whether a function gets a row (call paths aside): called, or (in a
/// time window) with a frame entered before it that ran, paused or had
/// callees in it.
fn has_row(a: &FnAcc) -> bool {
    a.ncalls | a.tottime_ns | a.cumtime_ns | a.paused_ns | a.through_callees != 0
}

/// A function's row numbers, in [`FunctionStats::sums`] order.
fn function_sums(a: &FnAcc) -> [u64; 9] {
    let scheduled_ns = a.scheduled_ns.min(a.paused_ns);
    [
        a.ncalls,
        a.primitive_calls,
        a.tottime_ns,
        a.cumtime_ns,
        a.paused_ns,
        a.open_at_end,
        a.cut_short,
        scheduled_ns,
        a.paused_ns - scheduled_ns,
    ]
}

/// An edge's numbers in [`crate::model::report::EdgeStats::sums`] order,
/// if it gets a row: not if its frames were all outside the time window.
fn edge_sums(a: &EdgeAcc) -> Option<[u64; 5]> {
    (a.ncalls | a.tottime_ns | a.cumtime_ns != 0).then_some([
        a.ncalls,
        a.primitive_calls,
        a.tottime_ns,
        a.cumtime_ns,
        a.callee_cumtime_ns,
    ])
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

/// Adds the function rows and edges of `acc` to `sums` as trace number
/// `trace`, as [`Sums::add_compact`] would add them from the report: what
/// a worker summing its traces does, without making rows it would only
/// read once. Not for call paths, whose frames name rows.
fn fold_rows(acc: &Acc, entries: &[FunctionEntry<'_>], sums: &mut Sums, trace: u32) {
    debug_assert!(acc.paths.is_none(), "call paths name rows");
    // Our numbers of the trace's functions, looked up when first needed.
    let mut ours = vec![u32::MAX; entries.len()];
    let mut number = |sums: &mut Sums, d: u32| {
        let slot = &mut ours[d as usize];
        if *slot == u32::MAX {
            let k = &entries[d as usize].key;
            *slot = sums.number(&k.function, &k.file, k.line);
        }
        *slot
    };
    for (d, a) in acc.functions.iter().enumerate() {
        if has_row(a) {
            let n = number(sums, d as u32);
            let e = &entries[d];
            sums.add_function_sums(n, function_sums(a), trace, &e.module, trace);
        }
    }
    for (&(caller, callee), a) in acc.edges.iter() {
        if let Some(s) = edge_sums(a) {
            let key = (number(sums, caller), number(sums, callee));
            sums.add_edge(key, s, trace);
        }
    }
}

/// Names the report's stacks, moving the names out of the metadata: a
/// trace of a million tasks has a million names, not worth copying.
/// `stacks` are sorted by id, logical ones ascending by number like the names,
/// so one forward walk over the names finds every logical stack's.
fn name_stacks(stacks: &mut [StackStats], decoded: &mut Decoded<'_>) {
    let mut stack_names = std::mem::take(&mut decoded.stack_names)
        .into_sorted()
        .into_iter()
        .peekable();
    let mut thread_names = std::mem::take(&mut decoded.thread_names);
    for s in stacks {
        s.name = match s.id {
            StackKey::Own(tid) => thread_names.remove(&tid).map(|(name, _)| name.into()),
            StackKey::Logical(id) => {
                while stack_names.next_if(|(k, _)| *k < id).is_some() {}
                stack_names.next_if(|(k, _)| *k == id).map(|(_, name)| name)
            }
        }
        .unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn stack(id: StackKey) -> StackStats {
        StackStats {
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
