//! Views of a diff: its function rows and edge groups ordered by the size
//! of the change, and the diff filtered as the JSON output writes it.

use std::cmp::Ordering;

use regex::Regex;

use super::edges::{group_edges, DiffEdgeGroup, Direction};
use super::matches;
use super::report::EdgeSelection;
use super::sort::SortKey;
use mtanalyze_model::diff::{DiffReport, EdgeDiff, FunctionDiff};
use mtanalyze_model::report::FunctionKey;

/// How to select and order the rows of a diff.
#[derive(Clone, Debug, Default)]
pub struct DiffViewOptions {
    /// Order of the rows, by the size of the change (ties: name, file, line
    /// ascending).
    pub sort: SortKey,
    /// Keep only the first this many function rows (after filtering).
    pub limit: Option<usize>,
    /// Keep only functions whose name, or `file:line name`, matches.
    pub filter: Option<Regex>,
    /// Hide rows whose change (see [`SortKey::function_change`]) is
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

fn diff_order(sort: SortKey, a: &FunctionDiff, b: &FunctionDiff) -> Ordering {
    sort.order_change(a, b)
        .then_with(|| (&a.function, &a.file, a.line).cmp(&(&b.function, &b.file, b.line)))
}

fn diff_edge_order(sort: SortKey, a: &EdgeDiff, b: &EdgeDiff) -> Ordering {
    sort.order_edge_change(a, b)
        .then_with(|| (a.caller_key(), a.callee_key()).cmp(&(b.caller_key(), b.callee_key())))
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
    let min = opts.min_change_ns(diff);
    let mut selected: Vec<&FunctionDiff> = diff
        .functions
        .iter()
        .filter(|f| opts.filter.as_ref().is_none_or(|r| matches(r, &f.key())))
        .filter(|f| matches(re, &f.key()))
        .collect();
    selected.sort_by(|a, b| diff_order(opts.sort, a, b));
    selected.truncate(opts.limit.unwrap_or(usize::MAX));
    group_edges(selected, &diff.edges, dir, |e| {
        opts.sort.edge_change(e) as f64 >= min
    })
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
        .filter(|e| edges.keeps(&e.caller_key(), &e.callee_key()))
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
