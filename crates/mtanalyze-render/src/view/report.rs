//! Views of one report: function rows, stack rows and groups, caller and
//! callee edges, and the report filtered as the JSON output writes it.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use regex::Regex;
use serde::Serialize;

use super::edges::{group_edges, Direction, EdgeGroup};
use super::matches;
use super::sort::SortKey;
use mtanalyze_model::marks::Mark;
use mtanalyze_model::report::{
    CallPath, Clock, EdgeStats, FunctionKey, FunctionStats, Report, StackStats, TraceSummary,
    Warning,
};

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

fn by_key(sort: SortKey, a: &FunctionStats, b: &FunctionStats) -> Ordering {
    sort.order(a, b)
        .then_with(|| (&a.function, &a.file, a.line).cmp(&(&b.function, &b.file, b.line)))
}

/// The function rows to show: filtered, sorted, then limited.
pub fn function_rows<'r>(report: &'r Report, opts: &ViewOptions) -> Vec<&'r FunctionStats> {
    function_indices(report, opts)
        .into_iter()
        .map(|i| &report.functions[i])
        .collect()
}

/// [`function_rows`] as indices into [`Report::functions`].
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
/// `ncalls` by events, `name` by name (ties keep the report's order; the
/// keys that do not order stacks, see [`SortKey::orders_stacks`], keep it
/// too). Then at most `limit` rows.
pub fn stack_rows(
    report: &Report,
    sort: Option<SortKey>,
    limit: Option<usize>,
) -> Vec<&StackStats> {
    let mut rows: Vec<&StackStats> = report.stacks.iter().collect();
    if let Some(sort) = sort {
        rows.sort_by(|a, b| by_column(a, b, sort));
    }
    if let Some(n) = limit {
        rows.truncate(n);
    }
    rows
}

/// [`stack_rows`]' order of two stacks by `sort`'s column (equal: tied).
fn by_column(a: &StackStats, b: &StackStats, sort: SortKey) -> Ordering {
    match sort {
        SortKey::Tottime | SortKey::Cumtime => b.running_ns.cmp(&a.running_ns),
        SortKey::Paused => b.paused_ns.cmp(&a.paused_ns),
        SortKey::Ncalls => b.events.cmp(&a.events),
        SortKey::Name => a.name.cmp(&b.name),
        SortKey::Pcalls | SortKey::File | SortKey::Line | SortKey::Stdname | SortKey::Nfl => {
            Ordering::Equal
        }
    }
}

/// What `--stacks` shows, gathered from rows handed one at a time in any
/// order ([`mtanalyze_engine::analyze_with_sink`]'s sink): the rows of
/// [`stack_rows`] (or the groups of [`stack_groups`]) of the report that
/// would have held them all, holding only those shown. Half a million tasks
/// with `--limit 20` are 20 rows (40 at most, between two trims).
#[derive(Debug)]
pub struct StackView {
    sort: Option<SortKey>,
    limit: Option<usize>,
    /// Rows kept (`None` when grouping).
    rows: Option<Vec<StackStats>>,
    groups: Option<GroupSums>,
    /// Rows handed, and of them logical stacks and those ended.
    total: usize,
    logical: u64,
    ended: u64,
}

impl StackView {
    /// The rows `stack_rows(.., sort, limit)` would give, or with `group`
    /// the groups `stack_groups(.., sort)` would.
    pub fn new(sort: Option<SortKey>, limit: Option<usize>, group: bool) -> StackView {
        StackView {
            sort,
            limit,
            rows: (!group).then(Vec::new),
            groups: group.then(GroupSums::default),
            total: 0,
            logical: 0,
            ended: 0,
        }
    }

    /// The order of [`stack_rows`] over a report in id order.
    fn order(&self, a: &StackStats, b: &StackStats) -> Ordering {
        let column = match self.sort {
            Some(sort) => by_column(a, b, sort),
            None => Ordering::Equal,
        };
        column.then(a.id.cmp(&b.id))
    }

    /// The rows shown, in order.
    pub fn rows(&self) -> Vec<&StackStats> {
        self.rows.iter().flatten().collect()
    }

    /// The groups (empty unless grouping), in order.
    pub fn groups(self) -> Vec<StackGroup> {
        let sort = self.sort;
        self.groups.map(|g| g.finish(sort)).unwrap_or_default()
    }

    /// How many rows were handed.
    pub fn total(&self) -> usize {
        self.total
    }

    /// How many of them are logical stacks, and how many of those ended.
    pub fn logical_and_ended(&self) -> (u64, u64) {
        (self.logical, self.ended)
    }

    /// Keeps the `limit` first rows in order (all without one).
    fn trim(&mut self) {
        let Some(mut rows) = self.rows.take() else {
            return;
        };
        rows.sort_by(|a, b| self.order(a, b));
        if let Some(n) = self.limit {
            rows.truncate(n);
        }
        self.rows = Some(rows);
    }

    /// Done: the rows in order.
    pub fn finish(mut self) -> StackView {
        self.trim();
        self
    }
}

impl mtanalyze_model::sink::StackSink for StackView {
    fn row(&mut self, row: StackStats) {
        self.total += 1;
        if matches!(row.id, mtanalyze_model::report::StackKey::Logical(_)) {
            self.logical += 1;
            self.ended += u64::from(row.ended);
        }
        if let Some(g) = &mut self.groups {
            g.add(&row);
        }
        let Some(rows) = &mut self.rows else {
            return;
        };
        rows.push(row);
        // Twice the rows shown, then back to those: each trim sorts what
        // it keeps, so the work stays in proportion to the rows handed.
        if self.limit.is_some_and(|n| rows.len() >= 2 * n.max(16)) {
            self.trim();
        }
    }

    fn restart(&mut self) {
        *self = StackView::new(self.sort, self.limit, self.groups.is_some());
    }
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
    /// The scheduled part of it (woken, waiting for a thread), summed.
    pub scheduled_ns: u64,
    /// Times they were switched in, summed.
    pub switches_in: u64,
    /// The deepest any of them went.
    pub max_depth: u32,
    /// Their enter and exit events, summed.
    pub events: u64,
}

/// The group a stack belongs to (see [`StackGroup::name`]).
fn group_name(s: &StackStats) -> String {
    if s.name.is_empty() {
        group_label(&s.id.to_string())
    } else {
        group_label(s.name.as_str())
    }
}

/// The group of the stack named (or, unnamed, with the id) `name`: every
/// run of digits written `#` (`request-17` is `request-#`), as
/// `--stacks --group` groups stacks, but for a source line: digits right
/// after `FILE.EXT:` are kept, so tasks named by their spawn site
/// (`src/server.rs:42 task-17`, as `mtrace-tokio` names them) group by
/// site (`src/server.rs:42 task-#`), and two sites of one file apart.
pub fn group_label(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    // In a run of digits: whether it is kept (a line) or one `#`.
    let mut run = None;
    for c in name.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
            run = None;
            continue;
        }
        match run {
            None => {
                let keep = out.strip_suffix(':').is_some_and(ends_with_file_name);
                out.push(if keep { c } else { '#' });
                run = Some(keep);
            }
            Some(true) => out.push(c),
            Some(false) => {}
        }
    }
    out
}

/// Whether `text` ends with a file name with an extension of letters
/// (`src/server.rs`, `app.py`): what a `:LINE` after it belongs to. Not
/// an address (`10.0.0.1:8080`), nor a name with no extension
/// (`conn:12`).
fn ends_with_file_name(text: &str) -> bool {
    let last = text.rsplit([' ', '\t']).next().unwrap_or(text);
    match last.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty() && !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

/// The `--stacks --group` rows: groups in the order of their first stack
/// in the report unless `sort` is given, which orders them largest first
/// by running time (`tottime`, `cumtime`), paused time (`paused`), number
/// of stacks (`ncalls`), or by name (the keys that do not order stacks
/// keep the first stacks' order).
pub fn stack_groups(report: &Report, sort: Option<SortKey>) -> Vec<StackGroup> {
    let mut sums = GroupSums::default();
    for s in &report.stacks {
        sums.add(s);
    }
    sums.finish(sort)
}

/// Stack groups being summed, rows in any order.
#[derive(Debug, Default)]
struct GroupSums {
    /// Each group, the threads of its stacks and its first stack.
    groups: HashMap<String, (StackGroup, BTreeSet<u64>, mtanalyze_model::report::StackKey)>,
}

impl GroupSums {
    fn add(&mut self, s: &StackStats) {
        let (g, threads, first) = self.groups.entry(group_name(s)).or_insert_with_key(|name| {
            let g = StackGroup {
                name: name.clone(),
                ..StackGroup::default()
            };
            (g, BTreeSet::new(), s.id)
        });
        *first = (*first).min(s.id);
        g.stacks += 1;
        g.running_ns = g.running_ns.saturating_add(s.running_ns);
        g.paused_ns = g.paused_ns.saturating_add(s.paused_ns);
        g.scheduled_ns = g.scheduled_ns.saturating_add(s.scheduled_ns);
        g.switches_in = g.switches_in.saturating_add(s.switches_in);
        g.max_depth = g.max_depth.max(s.max_depth);
        g.events = g.events.saturating_add(s.events);
        threads.extend(&s.threads);
    }

    /// The groups in the order of their first stack (the report's order is
    /// by id), then by `sort`'s column if given (ties keep that order).
    fn finish(self, sort: Option<SortKey>) -> Vec<StackGroup> {
        let mut groups: Vec<_> = self.groups.into_values().collect();
        // Two groups can share a first stack's id in a report of several
        // traces (each has its `thread:1`): the name decides, not the
        // hash map's order.
        groups.sort_unstable_by(|(a, _, a_first), (b, _, b_first)| {
            a_first.cmp(b_first).then_with(|| a.name.cmp(&b.name))
        });
        let mut groups: Vec<StackGroup> = groups
            .into_iter()
            .map(|(mut g, threads, _)| {
                g.threads = threads.into_iter().collect();
                g
            })
            .collect();
        if let Some(sort) = sort {
            groups.sort_by(|a, b| match sort {
                SortKey::Tottime | SortKey::Cumtime => b.running_ns.cmp(&a.running_ns),
                SortKey::Paused => b.paused_ns.cmp(&a.paused_ns),
                SortKey::Ncalls => b.stacks.cmp(&a.stacks),
                SortKey::Name => a.name.cmp(&b.name),
                SortKey::Pcalls
                | SortKey::File
                | SortKey::Line
                | SortKey::Stdname
                | SortKey::Nfl => Ordering::Equal,
            });
        }
        groups
    }
}

/// For every function matching `re` (and `--filter`), in `--sort` order and
/// at most `--limit` of them, its caller or callee edges.
pub fn edge_groups<'r>(
    report: &'r Report,
    opts: &ViewOptions,
    re: &Regex,
    dir: Direction,
) -> Vec<EdgeGroup<'r>> {
    let unlimited = ViewOptions {
        limit: None,
        ..opts.clone()
    };
    let selected = function_rows(report, &unlimited)
        .into_iter()
        .filter(|f| matches(re, &f.key()))
        .take(opts.limit.unwrap_or(usize::MAX));
    group_edges(selected, &report.edges, dir, |_| true)
}

/// Edge selection for the JSON form.
#[derive(Clone, Debug, Default)]
pub struct EdgeSelection {
    /// Only edges whose callee matches (`--callers`).
    pub callers_of: Option<Regex>,
    /// Only edges whose caller matches (`--callees`).
    pub callees_of: Option<Regex>,
}

impl EdgeSelection {
    /// Whether the edge from `caller` to `callee` is selected: its callee
    /// matches `--callers` and its caller `--callees` (each if given).
    pub(crate) fn keeps(&self, caller: &FunctionKey, callee: &FunctionKey) -> bool {
        self.callers_of
            .as_ref()
            .is_none_or(|re| matches(re, callee))
            && self
                .callees_of
                .as_ref()
                .is_none_or(|re| matches(re, caller))
    }
}

/// A report as the JSON output writes it, borrowing from the report: the
/// rows a view keeps, and the rest as is. Serializes exactly as a
/// [`Report`] with those rows would (same fields, same order): a report of
/// 500,000 stacks is written without being copied.
#[derive(Clone, Debug, Serialize)]
pub struct ReportView<'r> {
    /// What the trace holds.
    pub trace: &'r TraceSummary,
    /// The clock the times were computed with.
    pub clock: Clock,
    /// The function rows kept, in view order.
    pub functions: Vec<&'r FunctionStats>,
    /// How many functions the report has, when fewer are kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions_total: Option<u64>,
    /// The edges kept.
    pub edges: Vec<&'r EdgeStats>,
    /// How many edges the report has, when fewer are kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edges_total: Option<u64>,
    /// Every stack.
    pub stacks: &'r [StackStats],
    /// Every warning.
    pub warnings: &'r [Warning],
    /// Every mark.
    pub marks: &'r [Mark],
    /// Call paths through kept functions only, renumbered to the kept rows.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<CallPath>,
}

impl<'r> From<&'r Report> for ReportView<'r> {
    /// The whole report.
    fn from(report: &'r Report) -> ReportView<'r> {
        ReportView {
            trace: &report.trace,
            clock: report.clock,
            functions: report.functions.iter().collect(),
            functions_total: report.functions_total,
            edges: report.edges.iter().collect(),
            edges_total: report.edges_total,
            stacks: &report.stacks,
            warnings: &report.warnings,
            marks: &report.marks,
            paths: report.paths.clone(),
        }
    }
}

/// The report restricted to the function rows `opts` keep (in their
/// order), the edges that touch one of them and match `edges`, and the
/// call paths through kept functions only.
pub fn filtered_report<'r>(
    report: &'r Report,
    opts: &ViewOptions,
    edges: &EdgeSelection,
) -> ReportView<'r> {
    let rows = function_indices(report, opts);
    // Old index -> new index, for call paths.
    let mut renumber: Vec<Option<u32>> = vec![None; report.functions.len()];
    for (new, &old) in rows.iter().enumerate() {
        renumber[old] = Some(new as u32);
    }
    let functions: Vec<&FunctionStats> = rows.iter().map(|&i| &report.functions[i]).collect();
    let everything = functions.len() == report.functions.len();
    let kept: BTreeSet<FunctionKey> = functions.iter().map(|f| f.key()).collect();
    let edges: Vec<&EdgeStats> = report
        .edges
        .iter()
        .filter(|e| everything || kept.contains(&e.caller_key()) || kept.contains(&e.callee_key()))
        .filter(|e| edges.keeps(&e.caller_key(), &e.callee_key()))
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
    // A report that was itself cut (read back from a saved one) keeps
    // the count it was cut from.
    let total_if_cut = |kept: usize, had: usize, total: Option<u64>| {
        total.or_else(|| (kept < had).then_some(had as u64))
    };
    ReportView {
        trace: &report.trace,
        clock: report.clock,
        functions_total: total_if_cut(
            functions.len(),
            report.functions.len(),
            report.functions_total,
        ),
        functions,
        edges_total: total_if_cut(edges.len(), report.edges.len(), report.edges_total),
        edges,
        stacks: &report.stacks,
        warnings: &report.warnings,
        marks: &report.marks,
        paths,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtanalyze_model::report::Clock;
    use mtanalyze_model::report::TraceSummary;

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
            tottime_sq: 0,
            tottime_hist: Default::default(),
            cumtime_ns: cumtime,
            paused_ns: paused,
            open_at_end: 0,
            cut_short: 0,
            scheduled_ns: 0,
            waiting_ns: paused,
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
            callee_cumtime_ns: 1,
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
            functions_total: None,
            edges_total: None,
            stacks: vec![],
            stack_rows: Default::default(),
            stacks_shown: 0,
            warnings: vec![],
            marks: vec![],
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

    /// Rows for pstats' other keys, each labelled by its `module` (f1..f7):
    ///
    /// | row | name        | file   | line | ncalls | pcalls | standard name     |
    /// |-----|-------------|--------|------|--------|--------|-------------------|
    /// | f1  | zed         | a.py   | 10   | 5      | 1      | `a.py:10(zed)`    |
    /// | f2  | alpha       | a.py   | 9    | 3      | 3      | `a.py:9(alpha)`   |
    /// | f3  | mid         | (none) | 0    | 2      | 2      | `mid`             |
    /// | f4  | `<genexpr>` | ~      | 0    | 9      | 0      | `{genexpr}`       |
    /// | f5  | alpha       | b.py   | 100  | 4      | 4      | `b.py:100(alpha)` |
    /// | f6  | alpha       | (none) | 50   | 1      | 1      | `~:50(alpha)`     |
    /// | f7  | alpha       | a.py   | 100  | 7      | 5      | `a.py:100(alpha)` |
    fn pstats_rows() -> Report {
        let row = |label: &str, name: &str, file: &str, line, ncalls, pcalls| FunctionStats {
            line,
            module: label.into(),
            primitive_calls: pcalls,
            ..f(name, file, ncalls, 0, 0, 0)
        };
        Report {
            functions: vec![
                row("f1", "zed", "a.py", 10, 5, 1),
                row("f2", "alpha", "a.py", 9, 3, 3),
                row("f3", "mid", "", 0, 2, 2),
                row("f4", "<genexpr>", "~", 0, 9, 0),
                row("f5", "alpha", "b.py", 100, 4, 4),
                row("f6", "alpha", "", 50, 1, 1),
                row("f7", "alpha", "a.py", 100, 7, 5),
            ],
            edges: vec![],
            paths: vec![],
            ..report()
        }
    }

    #[test]
    fn standard_names_are_pstats_func_std_string() {
        let r = pstats_rows();
        let std: Vec<String> = r.functions.iter().map(FunctionStats::std_name).collect();
        assert_eq!(
            std,
            [
                "a.py:10(zed)",
                "a.py:9(alpha)",
                "mid",
                "{genexpr}",
                "b.py:100(alpha)",
                "~:50(alpha)",
                "a.py:100(alpha)"
            ]
        );
        // Python's `name[1:-1]`, empty for `<>`; `<x` is not bracketed.
        let std = |name| f(name, "", 1, 0, 0, 0).std_name();
        assert_eq!([std("<>"), std("<x"), std("x>")], ["{}", "<x", "x>"]);
    }

    #[test]
    fn pstats_keys_order_as_pstats_with_ties_by_name_file_line() {
        let r = pstats_rows();
        let order = |sort| -> Vec<String> {
            let opts = ViewOptions {
                sort,
                ..Default::default()
            };
            function_rows(&r, &opts)
                .iter()
                .map(|f| f.module.clone())
                .collect()
        };
        // Most first; f1 and f6 tie on one primitive call (alpha before zed).
        assert_eq!(
            order(SortKey::Pcalls),
            ["f7", "f5", "f2", "f3", "f6", "f1", "f4"]
        );
        assert_eq!(
            order(SortKey::Ncalls),
            ["f4", "f7", "f1", "f5", "f2", "f3", "f6"]
        );
        // No file is pstats' `~`: after b.py, with the built-in f4.
        assert_eq!(
            order(SortKey::File),
            ["f2", "f7", "f1", "f5", "f4", "f6", "f3"]
        );
        // Numbers: 9 before 10 before 100.
        assert_eq!(
            order(SortKey::Line),
            ["f4", "f3", "f2", "f1", "f6", "f7", "f5"]
        );
        // Text: `a.py:10(` before `a.py:100(` before `a.py:9(`, then
        // b.py, the built-ins' bare names and `{...}`, and `~:`.
        assert_eq!(
            order(SortKey::Stdname),
            ["f1", "f7", "f2", "f5", "f3", "f4", "f6"]
        );
        // Name, file (no file as `~`, so f6 is the last alpha), line.
        assert_eq!(
            order(SortKey::Nfl),
            ["f4", "f2", "f7", "f5", "f6", "f3", "f1"]
        );
        // Name alone breaks its ties by the file as recorded: f6's "" first.
        assert_eq!(
            order(SortKey::Name),
            ["f4", "f6", "f2", "f7", "f5", "f3", "f1"]
        );
    }

    #[test]
    fn only_the_keys_with_a_stack_column_order_stacks() {
        let ordering = [
            SortKey::Tottime,
            SortKey::Cumtime,
            SortKey::Ncalls,
            SortKey::Paused,
            SortKey::Name,
        ];
        let not = [
            SortKey::Pcalls,
            SortKey::File,
            SortKey::Line,
            SortKey::Stdname,
            SortKey::Nfl,
        ];
        assert!(ordering.iter().all(|k| k.orders_stacks()));
        assert!(!not.iter().any(|k| k.orders_stacks()));
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
        assert_eq!(all.edges, r.edges.iter().collect::<Vec<_>>());
        let opts = ViewOptions {
            filter: Some(Regex::new("^gamma$").unwrap()),
            ..Default::default()
        };
        let only = filtered_report(&r, &opts, &EdgeSelection::default());
        assert_eq!(names(&only.functions), ["gamma"]);
        assert_eq!(
            only.edges,
            vec![&edge("alpha", "gamma"), &edge("gamma", "beta")]
        );
        let callers = EdgeSelection {
            callers_of: Some(Regex::new("^beta$").unwrap()),
            ..Default::default()
        };
        let into_beta = filtered_report(&r, &ViewOptions::default(), &callers);
        assert_eq!(
            into_beta.edges,
            vec![&edge("alpha", "beta"), &edge("gamma", "beta")]
        );
    }

    #[test]
    fn group_names_write_each_number_as_one_hash() {
        let stack = |id: &str, name: &str| StackStats {
            kind: Default::default(),
            id: id.parse().unwrap(),
            name: name.into(),
            threads: Default::default(),
            running_ns: 0,
            paused_ns: 0,
            scheduled_ns: 0,
            waiting_ns: 0,
            switches_in: 0,
            max_depth: 0,
            events: 0,
            ended: false,
        };
        assert_eq!(group_name(&stack("stack:7", "request-1234")), "request-#");
        assert_eq!(
            group_name(&stack("stack:7", "conn 12 req 3")),
            "conn # req #"
        );
        assert_eq!(group_name(&stack("stack:7", "h2c")), "h#c");
        assert_eq!(group_name(&stack("stack:17", "")), "stack:#");
        assert_eq!(group_name(&stack("thread:3", "main")), "main");
        // A spawn site's line is kept: two sites of one file are two groups.
        assert_eq!(
            group_name(&stack("stack:9", "src/server.rs:42 task-17")),
            "src/server.rs:42 task-#"
        );
        assert_eq!(
            group_name(&stack("stack:9", "src/server.rs:57 task-18")),
            "src/server.rs:57 task-#"
        );
        assert_eq!(
            group_name(&stack("stack:9", "crates/h2/src/proto.rs:101 task-3")),
            "crates/h#/src/proto.rs:101 task-#"
        );
        // Not a source line: an address's port, a name with no extension.
        assert_eq!(group_name(&stack("stack:9", "10.0.0.1:8080")), "#.#.#.#:#");
        assert_eq!(group_name(&stack("stack:9", "conn:12")), "conn:#");
    }

    #[test]
    fn groups_whose_first_stacks_share_an_id_come_in_name_order() {
        // A report of several traces: each trace's `thread:1`, named apart.
        let names = ["h", "c", "a", "g", "e", "b", "f", "d"];
        let stacks = names
            .iter()
            .map(|name| StackStats {
                kind: Default::default(),
                id: mtanalyze_model::report::StackKey::Own(1),
                name: (*name).into(),
                threads: vec![1].into(),
                running_ns: 1,
                paused_ns: 0,
                scheduled_ns: 0,
                waiting_ns: 0,
                switches_in: 0,
                max_depth: 1,
                events: 2,
                ended: false,
            })
            .collect();
        let report = Report { stacks, ..report() };
        let got: Vec<String> = stack_groups(&report, None)
            .into_iter()
            .map(|g| g.name)
            .collect();
        assert_eq!(got, ["a", "b", "c", "d", "e", "f", "g", "h"]);
    }

    #[test]
    fn a_stack_view_fed_in_any_order_shows_what_the_whole_report_does() {
        use mtanalyze_model::sink::StackSink;
        // Rows in id order (the report's), with ties in every column, a few
        // names and unnamed stacks, own stacks first.
        let mut stacks: Vec<StackStats> = (0..300u64)
            .map(|i| StackStats {
                kind: Default::default(),
                id: if i < 4 {
                    mtanalyze_model::report::StackKey::Own(i + 1)
                } else {
                    mtanalyze_model::report::StackKey::Logical(i)
                },
                name: match i % 5 {
                    0 => "".into(),
                    1 => format!("request-{}", i % 7).into(),
                    2 => "worker".into(),
                    _ => format!("conn {} req {}", i % 3, i).into(),
                },
                threads: vec![i % 4 + 1, i % 3 + 10].into(),
                running_ns: (i * 7919) % 13,
                paused_ns: (i * 104_729) % 11,
                scheduled_ns: i % 3,
                waiting_ns: 0,
                switches_in: i % 4,
                max_depth: (i % 9) as u32,
                events: (i * 31) % 17,
                ended: i % 3 == 0,
            })
            .collect();
        stacks.sort_by_key(|s| s.id);
        let report = Report {
            stacks: stacks.clone(),
            ..report()
        };
        // Handed in a shuffled order.
        let mut shuffled = stacks.clone();
        for i in 0..shuffled.len() {
            let j = (i * 7_477 + 13) % shuffled.len();
            shuffled.swap(i, j);
        }
        let sorts = [
            None,
            Some(SortKey::Tottime),
            Some(SortKey::Cumtime),
            Some(SortKey::Paused),
            Some(SortKey::Ncalls),
            Some(SortKey::Name),
            // Keeps the report's order.
            Some(SortKey::Stdname),
        ];
        for sort in sorts {
            for limit in [
                None,
                Some(0),
                Some(1),
                Some(5),
                Some(40),
                Some(299),
                Some(1000),
            ] {
                let mut view = StackView::new(sort, limit, false);
                view.row(stacks[0].clone());
                view.restart(); // forgotten
                for s in &shuffled {
                    view.row(s.clone());
                }
                let view = view.finish();
                let want = stack_rows(&report, sort, limit);
                assert_eq!(view.rows(), want, "sort {sort:?} limit {limit:?}");
                assert_eq!(view.total(), 300);
            }
            let mut view = StackView::new(sort, None, true);
            for s in &shuffled {
                view.row(s.clone());
            }
            let (logical, ended) = view.logical_and_ended();
            assert_eq!((logical, ended), (296, 98));
            assert_eq!(
                view.finish().groups(),
                stack_groups(&report, sort),
                "{sort:?}"
            );
        }
    }
}
