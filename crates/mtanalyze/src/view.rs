//! What the user asked to see: sorting, filtering and limiting a report's
//! (or a diff's) rows before a renderer prints them.
//!
//! Everything here is a pure function of a [`Report`] and a [`ViewOptions`]
//! (of a [`DiffReport`] and a [`DiffViewOptions`]): no printing, no
//! recomputation of statistics. The table and JSON renderers both go through
//! it, so `--sort`, `--filter`, `--limit` and `--min-change` mean the same
//! thing in every output format.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use regex::Regex;

use crate::diff::{DiffReport, EdgeDiff, FunctionDiff};
use crate::report::{CallPath, EdgeStats, FunctionKey, FunctionStats, Report, StackStats};

/// The column the function rows are ordered by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Self time, largest first.
    #[default]
    Tottime,
    /// Cumulative time, largest first.
    Cumtime,
    /// Number of calls, most first.
    Ncalls,
    /// Paused time, largest first.
    Paused,
    /// Function name, A to Z.
    Name,
}

/// How to select and order rows.
#[derive(Clone, Debug, Default)]
pub struct ViewOptions {
    /// Order of the function rows (ties: name, file, line ascending).
    pub sort: SortKey,
    /// Keep only the first this many function rows (after filtering).
    pub limit: Option<usize>,
    /// Keep only functions whose name, or `file:line name`, matches.
    pub filter: Option<Regex>,
}

/// `file:line name` when the definition site is known, else the name:
/// what `--filter`, `--callers` and `--callees` match against (besides the
/// bare name) and what the table prints in its last column.
pub fn site_label(key: &FunctionKey) -> String {
    if key.file.is_empty() {
        key.function.clone()
    } else {
        format!("{}:{} {}", key.file, key.line, key.function)
    }
}

/// Whether `re` selects the function: it matches the bare name or the
/// `file:line name` label.
pub fn matches(re: &Regex, key: &FunctionKey) -> bool {
    re.is_match(&key.function) || (!key.file.is_empty() && re.is_match(&site_label(key)))
}

fn by_key(sort: SortKey, a: &FunctionStats, b: &FunctionStats) -> Ordering {
    let primary = match sort {
        SortKey::Tottime => b.tottime_ns.cmp(&a.tottime_ns),
        SortKey::Cumtime => b.cumtime_ns.cmp(&a.cumtime_ns),
        SortKey::Ncalls => b.ncalls.cmp(&a.ncalls),
        SortKey::Paused => b.paused_ns.cmp(&a.paused_ns),
        SortKey::Name => Ordering::Equal,
    };
    primary.then_with(|| (&a.function, &a.file, a.line).cmp(&(&b.function, &b.file, b.line)))
}

/// The function rows to show: filtered, sorted, then limited.
pub fn function_rows<'r>(report: &'r Report, opts: &ViewOptions) -> Vec<&'r FunctionStats> {
    function_indices(report, opts)
        .into_iter()
        .map(|i| &report.functions[i])
        .collect()
}

/// [`function_rows`] as indices into `report.functions`.
pub fn function_indices(report: &Report, opts: &ViewOptions) -> Vec<usize> {
    let fs = &report.functions;
    let mut rows: Vec<usize> = (0..fs.len())
        .filter(|&i| {
            opts.filter
                .as_ref()
                .is_none_or(|re| matches(re, &fs[i].key()))
        })
        .collect();
    rows.sort_by(|&a, &b| by_key(opts.sort, &fs[a], &fs[b]));
    if let Some(n) = opts.limit {
        rows.truncate(n);
    }
    rows
}

/// The per-stack rows to show (`--stacks`): in the report's order (threads'
/// own stacks, then logical stacks, by id) unless `sort` is given, which
/// orders by the stack's column of the same meaning, largest first:
/// `tottime` and `cumtime` by running time, `paused` by paused time,
/// `ncalls` by events, `name` by name (ties keep the report's order).
/// Then at most `limit` rows.
pub fn stack_rows(
    report: &Report,
    sort: Option<SortKey>,
    limit: Option<usize>,
) -> Vec<&StackStats> {
    let mut rows: Vec<&StackStats> = report.stacks.iter().collect();
    if let Some(sort) = sort {
        rows.sort_by(|a, b| match sort {
            SortKey::Tottime | SortKey::Cumtime => b.running_ns.cmp(&a.running_ns),
            SortKey::Paused => b.paused_ns.cmp(&a.paused_ns),
            SortKey::Ncalls => b.events.cmp(&a.events),
            SortKey::Name => a.name.cmp(&b.name),
        });
    }
    if let Some(n) = limit {
        rows.truncate(n);
    }
    rows
}

/// Stacks whose names differ only in their numbers, summed: one row of
/// `--stacks --group`. A service that names each task after its request
/// (`request-17`, `request-18`) has one group (`request-#`) however many
/// tasks it ran.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackGroup {
    /// The stacks' name with every run of digits written `#`; for unnamed
    /// stacks, their id so written (`stack:#`, `thread:#`).
    pub name: String,
    /// Stacks in the group.
    pub stacks: u64,
    /// Threads any of them ran on, ascending.
    pub threads: Vec<u64>,
    /// Their running time, summed.
    pub running_ns: u64,
    /// Their paused time, summed.
    pub paused_ns: u64,
    /// Times they were switched in, summed.
    pub switches_in: u64,
    /// The deepest any of them went.
    pub max_depth: u32,
    /// Their enter and exit events, summed.
    pub events: u64,
}

/// The group a stack belongs to (see [`StackGroup::name`]).
pub fn group_name(s: &StackStats) -> String {
    let name = if s.name.is_empty() { &s.id } else { &s.name };
    let mut out = String::with_capacity(name.len());
    let mut in_number = false;
    for c in name.chars() {
        let digit = c.is_ascii_digit();
        if !digit {
            out.push(c);
        } else if !in_number {
            out.push('#');
        }
        in_number = digit;
    }
    out
}

/// The `--stacks --group` rows: groups in the order of their first stack
/// in the report unless `sort` is given, which orders them largest first
/// by running time (`tottime`, `cumtime`), paused time (`paused`), number
/// of stacks (`ncalls`), or by name.
pub fn stack_groups(report: &Report, sort: Option<SortKey>) -> Vec<StackGroup> {
    let mut groups: Vec<StackGroup> = Vec::new();
    let mut threads: Vec<BTreeSet<u64>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for s in &report.stacks {
        let i = *index.entry(group_name(s)).or_insert_with_key(|name| {
            groups.push(StackGroup {
                name: name.clone(),
                ..StackGroup::default()
            });
            threads.push(BTreeSet::new());
            groups.len() - 1
        });
        let g = &mut groups[i];
        g.stacks += 1;
        g.running_ns = g.running_ns.saturating_add(s.running_ns);
        g.paused_ns = g.paused_ns.saturating_add(s.paused_ns);
        g.switches_in = g.switches_in.saturating_add(s.switches_in);
        g.max_depth = g.max_depth.max(s.max_depth);
        g.events = g.events.saturating_add(s.events);
        threads[i].extend(&s.threads);
    }
    for (g, t) in groups.iter_mut().zip(threads) {
        g.threads = t.into_iter().collect();
    }
    if let Some(sort) = sort {
        groups.sort_by(|a, b| match sort {
            SortKey::Tottime | SortKey::Cumtime => b.running_ns.cmp(&a.running_ns),
            SortKey::Paused => b.paused_ns.cmp(&a.paused_ns),
            SortKey::Ncalls => b.stacks.cmp(&a.stacks),
            SortKey::Name => a.name.cmp(&b.name),
        });
    }
    groups
}

/// Which side of an edge a [`EdgeGroup`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The functions that called the selected one (`--callers`).
    Callers,
    /// The functions the selected one called (`--callees`).
    Callees,
}

/// One selected function with the edges into it (callers) or out of it
/// (callees), like a block of pstats' `print_callers` / `print_callees`.
#[derive(Clone, Debug)]
pub struct EdgeGroup<'r> {
    /// The selected function.
    pub function: &'r FunctionStats,
    /// Its edges, ordered by the other end's name, file and line.
    pub edges: Vec<&'r EdgeStats>,
}

/// For every function matching `re` (and `--filter`), in `--sort` order and
/// at most `--limit` of them, its caller or callee edges.
pub fn edge_groups<'r>(
    report: &'r Report,
    opts: &ViewOptions,
    re: &Regex,
    dir: Direction,
) -> Vec<EdgeGroup<'r>> {
    type Site<'a> = (&'a str, &'a str, u32);
    let mut by_function: BTreeMap<Site<'r>, Vec<&'r EdgeStats>> = BTreeMap::new();
    for e in &report.edges {
        let this: Site<'r> = match dir {
            Direction::Callers => (&e.callee, &e.callee_file, e.callee_line),
            Direction::Callees => (&e.caller, &e.caller_file, e.caller_line),
        };
        by_function.entry(this).or_default().push(e);
    }
    let other_end = |e: &EdgeStats| -> FunctionKey {
        match dir {
            Direction::Callers => e.caller_key(),
            Direction::Callees => e.callee_key(),
        }
    };
    let unlimited = ViewOptions {
        limit: None,
        ..opts.clone()
    };
    let selected = function_rows(report, &unlimited)
        .into_iter()
        .filter(|f| matches(re, &f.key()))
        .take(opts.limit.unwrap_or(usize::MAX));
    selected
        .map(|f| {
            let mut edges = by_function
                .get(&(f.function.as_str(), f.file.as_str(), f.line))
                .cloned()
                .unwrap_or_default();
            edges.sort_by_cached_key(|e| other_end(e));
            EdgeGroup { function: f, edges }
        })
        .collect()
}

/// Edge selection for the JSON form.
#[derive(Clone, Debug, Default)]
pub struct EdgeSelection {
    /// Only edges whose callee matches (`--callers`).
    pub callers_of: Option<Regex>,
    /// Only edges whose caller matches (`--callees`).
    pub callees_of: Option<Regex>,
}

/// The report as the user asked to see it, for the JSON renderer:
///
/// * `functions`: [`function_rows`] (filtered, sorted, limited);
/// * `edges`: those with the caller or the callee among the kept functions
///   (all edges when nothing was filtered or limited away), further
///   restricted by `--callers` (callee matches) and `--callees` (caller
///   matches); in the report's order (caller, then callee);
/// * `paths` (call paths, if the report has them): those whose functions
///   were all kept, with their indices renumbered to the new `functions`;
/// * everything else unchanged.
pub fn filtered_report(report: &Report, opts: &ViewOptions, edges: &EdgeSelection) -> Report {
    let rows = function_indices(report, opts);
    // Old index -> new index, for call paths.
    let mut renumber: Vec<Option<u32>> = vec![None; report.functions.len()];
    for (new, &old) in rows.iter().enumerate() {
        renumber[old] = Some(new as u32);
    }
    let functions: Vec<FunctionStats> = rows.iter().map(|&i| report.functions[i].clone()).collect();
    let everything = functions.len() == report.functions.len();
    let kept: std::collections::BTreeSet<FunctionKey> =
        functions.iter().map(FunctionStats::key).collect();
    let edges = report
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
        .cloned()
        .collect();
    let paths = report
        .paths
        .iter()
        .filter_map(|p| {
            let frames = p
                .frames
                .iter()
                .map(|&i| renumber.get(i as usize).copied().flatten())
                .collect::<Option<Vec<u32>>>()?;
            Some(CallPath {
                frames,
                ..p.clone()
            })
        })
        .collect();
    Report {
        functions,
        edges,
        paths,
        ..report.clone()
    }
}

/// The column the rows of a diff are ordered by: the size of the change,
/// whichever its sign, so the biggest movers either way come first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
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

/// One selected function of a diff with its edge rows, like [`EdgeGroup`].
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::report::TraceSummary;

    fn f(
        name: &str,
        file: &str,
        ncalls: u64,
        tottime: u64,
        cumtime: u64,
        paused: u64,
    ) -> FunctionStats {
        FunctionStats {
            function: name.into(),
            file: file.into(),
            line: if file.is_empty() { 0 } else { 7 },
            module: String::new(),
            ncalls,
            primitive_calls: ncalls,
            tottime_ns: tottime,
            cumtime_ns: cumtime,
            paused_ns: paused,
            open_at_end: 0,
        }
    }

    /// `beta` is the one function with a known site.
    fn site(name: &str) -> (String, u32) {
        if name == "beta" {
            ("src/b.rs".into(), 7)
        } else {
            (String::new(), 0)
        }
    }

    fn edge(caller: &str, callee: &str) -> EdgeStats {
        let ((caller_file, caller_line), (callee_file, callee_line)) = (site(caller), site(callee));
        EdgeStats {
            caller: caller.into(),
            caller_file,
            caller_line,
            callee: callee.into(),
            callee_file,
            callee_line,
            ncalls: 1,
            primitive_calls: 1,
            tottime_ns: 1,
            cumtime_ns: 1,
        }
    }

    fn report() -> Report {
        Report {
            trace: TraceSummary::default(),
            clock: Clock::Stack,
            functions: vec![
                f("alpha", "", 1, 30, 90, 0),
                f("beta", "src/b.rs", 5, 10, 10, 50),
                f("gamma", "", 3, 30, 40, 5),
            ],
            edges: vec![
                edge("alpha", "beta"),
                edge("alpha", "gamma"),
                edge("gamma", "beta"),
            ],
            stacks: vec![],
            warnings: vec![],
            paths: vec![
                CallPath {
                    stack: String::new(),
                    frames: vec![0, 2],
                    ncalls: 3,
                    self_ns: 30,
                },
                CallPath {
                    stack: String::new(),
                    frames: vec![0, 1],
                    ncalls: 5,
                    self_ns: 10,
                },
            ],
        }
    }

    fn names(rows: &[&FunctionStats]) -> Vec<String> {
        rows.iter().map(|f| f.function.clone()).collect()
    }

    #[test]
    fn sorts_numbers_descending_with_name_ties_and_names_ascending() {
        let r = report();
        let order = |sort| {
            names(&function_rows(
                &r,
                &ViewOptions {
                    sort,
                    ..Default::default()
                },
            ))
        };
        assert_eq!(order(SortKey::Tottime), ["alpha", "gamma", "beta"]);
        assert_eq!(order(SortKey::Cumtime), ["alpha", "gamma", "beta"]);
        assert_eq!(order(SortKey::Ncalls), ["beta", "gamma", "alpha"]);
        assert_eq!(order(SortKey::Paused), ["beta", "gamma", "alpha"]);
        assert_eq!(order(SortKey::Name), ["alpha", "beta", "gamma"]);
    }

    #[test]
    fn filter_matches_the_name_or_the_site_and_limit_applies_after_it() {
        let r = report();
        let opts = |re: &str, limit| ViewOptions {
            sort: SortKey::Name,
            limit,
            filter: Some(Regex::new(re).unwrap()),
        };
        assert_eq!(
            names(&function_rows(&r, &opts("^(alpha|beta)$", None))),
            ["alpha", "beta"]
        );
        assert_eq!(
            names(&function_rows(&r, &opts(r"b\.rs:7 ", None))),
            ["beta"]
        );
        assert_eq!(
            names(&function_rows(&r, &opts("a", Some(2)))),
            ["alpha", "beta"]
        );
    }

    #[test]
    fn edge_groups_list_callers_and_callees() {
        let r = report();
        let re = Regex::new("^beta$").unwrap();
        let g = edge_groups(&r, &ViewOptions::default(), &re, Direction::Callers);
        assert_eq!(g.len(), 1);
        let callers: Vec<_> = g[0].edges.iter().map(|e| e.caller.as_str()).collect();
        assert_eq!(callers, ["alpha", "gamma"]);
        let re = Regex::new("^alpha$").unwrap();
        let g = edge_groups(&r, &ViewOptions::default(), &re, Direction::Callees);
        let callees: Vec<_> = g[0].edges.iter().map(|e| e.callee.as_str()).collect();
        assert_eq!(callees, ["beta", "gamma"]);
        // --limit counts the functions the regex selected, not all rows.
        let one = ViewOptions {
            limit: Some(1),
            ..Default::default()
        };
        let re = Regex::new("^(beta|gamma)$").unwrap();
        let g = edge_groups(&r, &one, &re, Direction::Callers);
        let selected: Vec<_> = g.iter().map(|g| g.function.function.as_str()).collect();
        assert_eq!(selected, ["gamma"]);
    }

    #[test]
    fn filtered_report_keeps_edges_touching_kept_functions() {
        let r = report();
        let all = filtered_report(&r, &ViewOptions::default(), &EdgeSelection::default());
        assert_eq!(all.edges, r.edges);
        let opts = ViewOptions {
            filter: Some(Regex::new("^gamma$").unwrap()),
            ..Default::default()
        };
        let only = filtered_report(&r, &opts, &EdgeSelection::default());
        assert_eq!(names(&only.functions.iter().collect::<Vec<_>>()), ["gamma"]);
        assert_eq!(
            only.edges,
            vec![edge("alpha", "gamma"), edge("gamma", "beta")]
        );
        let callers = EdgeSelection {
            callers_of: Some(Regex::new("^beta$").unwrap()),
            ..Default::default()
        };
        let into_beta = filtered_report(&r, &ViewOptions::default(), &callers);
        assert_eq!(
            into_beta.edges,
            vec![edge("alpha", "beta"), edge("gamma", "beta")]
        );
    }

    #[test]
    fn group_names_write_each_number_as_one_hash() {
        let stack = |id: &str, name: &str| StackStats {
            id: id.to_owned(),
            name: name.to_owned(),
            threads: vec![],
            running_ns: 0,
            paused_ns: 0,
            switches_in: 0,
            max_depth: 0,
            events: 0,
        };
        assert_eq!(group_name(&stack("stack:7", "request-1234")), "request-#");
        assert_eq!(
            group_name(&stack("stack:7", "conn 12 req 3")),
            "conn # req #"
        );
        assert_eq!(group_name(&stack("stack:7", "h2c")), "h#c");
        assert_eq!(group_name(&stack("stack:17", "")), "stack:#");
        assert_eq!(group_name(&stack("thread:3", "main")), "main");
    }
}
