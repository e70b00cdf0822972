//! Views of a diff: its function rows and edge groups ordered by the size
//! of the change, and the diff filtered as the JSON output writes it.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use regex::Regex;

use super::matches;
use super::report::{Direction, EdgeSelection};
use crate::model::diff::{DiffReport, EdgeDiff, FunctionDiff};
use crate::model::report::FunctionKey;

/// The column the rows of a diff are ordered by: the size of the change,
/// whichever its sign, so the biggest movers either way come first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiffSortKey {
    /// Absolute change of self time, largest first.
    #[default]
    Tottime,
    /// Absolute change of cumulative time, largest first.
    Cumtime,
    /// Absolute change of the number of calls, largest first.
    Ncalls,
    /// Absolute change of paused time, largest first.
    Paused,
    /// Function name, A to Z.
    Name,
}

impl DiffSortKey {
    /// The change `--min-change` weighs for a function row: the sorted
    /// time column (self time for `ncalls` and `name`).
    pub fn function_change(self, f: &FunctionDiff) -> u64 {
        match self {
            DiffSortKey::Cumtime => f.delta.cumtime_ns.unsigned_abs(),
            DiffSortKey::Paused => f.delta.paused_ns.unsigned_abs(),
            _ => f.delta.tottime_ns.unsigned_abs(),
        }
    }

    /// The change `--min-change` weighs for an edge row (edges have no
    /// paused time: self time stands in for it).
    pub fn edge_change(self, e: &EdgeDiff) -> u64 {
        match self {
            DiffSortKey::Cumtime => e.delta.cumtime_ns.unsigned_abs(),
            _ => e.delta.tottime_ns.unsigned_abs(),
        }
    }
}

/// How to select and order the rows of a diff.
#[derive(Clone, Debug, Default)]
pub struct DiffViewOptions {
    /// Order of the rows (ties: name, file, line ascending).
    pub sort: DiffSortKey,
    /// Keep only the first this many function rows (after filtering).
    pub limit: Option<usize>,
    /// Keep only functions whose name, or `file:line name`, matches.
    pub filter: Option<Regex>,
    /// Hide rows whose change (see [`DiffSortKey::function_change`]) is
    /// below this percentage of the larger of the two traces' total self
    /// time (the base's after normalizing).
    pub min_change_pct: Option<f64>,
}

impl DiffViewOptions {
    /// The smallest change shown, in ns (0 without `--min-change`).
    pub fn min_change_ns(&self, diff: &DiffReport) -> f64 {
        let total = diff.base_total_ns.max(diff.new_total_ns) as f64;
        self.min_change_pct.map_or(0.0, |pct| pct / 100.0 * total)
    }
}

/// Orders by the size of a change, larger first, whichever its sign.
fn larger_change(a: i64, b: i64) -> Ordering {
    b.unsigned_abs().cmp(&a.unsigned_abs())
}

fn diff_order(sort: DiffSortKey, a: &FunctionDiff, b: &FunctionDiff) -> Ordering {
    let primary = match sort {
        DiffSortKey::Tottime => larger_change(a.delta.tottime_ns, b.delta.tottime_ns),
        DiffSortKey::Cumtime => larger_change(a.delta.cumtime_ns, b.delta.cumtime_ns),
        DiffSortKey::Ncalls => larger_change(a.delta.ncalls, b.delta.ncalls),
        DiffSortKey::Paused => larger_change(a.delta.paused_ns, b.delta.paused_ns),
        DiffSortKey::Name => Ordering::Equal,
    };
    primary.then_with(|| (&a.function, &a.file, a.line).cmp(&(&b.function, &b.file, b.line)))
}

fn diff_edge_order(sort: DiffSortKey, a: &EdgeDiff, b: &EdgeDiff) -> Ordering {
    let primary = match sort {
        DiffSortKey::Cumtime => larger_change(a.delta.cumtime_ns, b.delta.cumtime_ns),
        DiffSortKey::Ncalls => larger_change(a.delta.ncalls, b.delta.ncalls),
        DiffSortKey::Tottime | DiffSortKey::Paused => {
            larger_change(a.delta.tottime_ns, b.delta.tottime_ns)
        }
        DiffSortKey::Name => Ordering::Equal,
    };
    primary.then_with(|| (a.caller_key(), a.callee_key()).cmp(&(b.caller_key(), b.callee_key())))
}

/// The function rows of a diff to show: filtered by `--filter` and
/// `--min-change`, sorted, then limited.
pub fn diff_function_rows<'d>(
    diff: &'d DiffReport,
    opts: &DiffViewOptions,
) -> Vec<&'d FunctionDiff> {
    let min = opts.min_change_ns(diff);
    let mut rows: Vec<&FunctionDiff> = diff
        .functions
        .iter()
        .filter(|f| opts.filter.as_ref().is_none_or(|re| matches(re, &f.key())))
        .filter(|f| opts.sort.function_change(f) as f64 >= min)
        .collect();
    rows.sort_by(|a, b| diff_order(opts.sort, a, b));
    if let Some(n) = opts.limit {
        rows.truncate(n);
    }
    rows
}

/// One selected function of a diff with its edge rows, like [`super::EdgeGroup`].
#[derive(Clone, Debug)]
pub struct DiffEdgeGroup<'d> {
    /// The selected function.
    pub function: &'d FunctionDiff,
    /// Its edges (into it for callers, out of it for callees), ordered by
    /// the other end's name, file and line.
    pub edges: Vec<&'d EdgeDiff>,
}

/// For every function of the diff matching `re` (and `--filter`), in
/// `--sort` order and at most `--limit` of them, its caller or callee edges
/// whose change reaches `--min-change`. A function whose every edge is
/// below `--min-change` is left out; one with no edges at all is kept.
pub fn diff_edge_groups<'d>(
    diff: &'d DiffReport,
    opts: &DiffViewOptions,
    re: &Regex,
    dir: Direction,
) -> Vec<DiffEdgeGroup<'d>> {
    let mut by_function: BTreeMap<FunctionKey, Vec<&'d EdgeDiff>> = BTreeMap::new();
    for e in &diff.edges {
        let this = match dir {
            Direction::Callers => e.callee_key(),
            Direction::Callees => e.caller_key(),
        };
        by_function.entry(this).or_default().push(e);
    }
    let other_end = |e: &EdgeDiff| match dir {
        Direction::Callers => e.caller_key(),
        Direction::Callees => e.callee_key(),
    };
    let min = opts.min_change_ns(diff);
    let mut selected: Vec<&FunctionDiff> = diff
        .functions
        .iter()
        .filter(|f| opts.filter.as_ref().is_none_or(|r| matches(r, &f.key())))
        .filter(|f| matches(re, &f.key()))
        .collect();
    selected.sort_by(|a, b| diff_order(opts.sort, a, b));
    selected
        .into_iter()
        .take(opts.limit.unwrap_or(usize::MAX))
        .filter_map(|f| {
            let all = by_function.get(&f.key()).cloned().unwrap_or_default();
            let had_edges = !all.is_empty();
            let mut edges: Vec<&EdgeDiff> = all
                .into_iter()
                .filter(|e| opts.sort.edge_change(e) as f64 >= min)
                .collect();
            edges.sort_by_cached_key(|e| other_end(e));
            (!had_edges || !edges.is_empty()).then_some(DiffEdgeGroup { function: f, edges })
        })
        .collect()
}

/// The diff as the user asked to see it, for the JSON renderer:
///
/// * `functions`: [`diff_function_rows`] (filtered, sorted, limited);
/// * `edges`: those with the caller or the callee among the kept functions
///   (all edges when no function was left out), further restricted by
///   `--callers` (callee matches) and `--callees` (caller matches) and by
///   `--min-change`; in `--sort` order;
/// * everything else (summaries, totals, call paths) unchanged.
pub fn filtered_diff(
    diff: &DiffReport,
    opts: &DiffViewOptions,
    edges: &EdgeSelection,
) -> DiffReport {
    let functions: Vec<FunctionDiff> = diff_function_rows(diff, opts)
        .into_iter()
        .cloned()
        .collect();
    let everything = functions.len() == diff.functions.len();
    let kept: std::collections::BTreeSet<FunctionKey> =
        functions.iter().map(FunctionDiff::key).collect();
    let min = opts.min_change_ns(diff);
    let mut kept_edges: Vec<EdgeDiff> = diff
        .edges
        .iter()
        .filter(|e| everything || kept.contains(&e.caller_key()) || kept.contains(&e.callee_key()))
        .filter(|e| {
            edges
                .callers_of
                .as_ref()
                .is_none_or(|re| matches(re, &e.callee_key()))
        })
        .filter(|e| {
            edges
                .callees_of
                .as_ref()
                .is_none_or(|re| matches(re, &e.caller_key()))
        })
        .filter(|e| opts.sort.edge_change(e) as f64 >= min)
        .cloned()
        .collect();
    kept_edges.sort_by(|a, b| diff_edge_order(opts.sort, a, b));
    DiffReport {
        functions,
        edges: kept_edges,
        ..diff.clone()
    }
}
