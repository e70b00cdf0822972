//! `--format html`: one self-contained page (`mtanalyze TRACE --format html
//! -o report.html`, `mtanalyze diff BASE NEW --format html -o diff.html`)
//! that works offline from `file://`: no request of any kind.
//!
//! ```text
//! page.html   the skeleton; page.css and page.js are inlined into it
//! page.js     reads the data, builds every table, flame graph and timeline
//! data.rs     the data's types: one JSON object in <script type="application/json">
//! mod.rs      builds the data from the report or the diff, writes the page
//! ```
//!
//! The data's shape is `schemas/html-page.schema.json`: the contract
//! between this writer and `page.js`, which ship together (not a format
//! for other readers).
//!
//! The three page files are ordinary source files in this folder, inlined
//! with `include_str!`, so `cargo build` alone makes a working page. The
//! page holds aggregated values only (function and edge rows, a call-path
//! tree, per-stack stretches merged when tiny), never an event. The data
//! is JSON with every `<`, `>` and `&` written as `\u003c`, `\u003e`,
//! `\u0026`, so no name (`</script>`, quotes, anything) can end the script
//! element or be read as markup; the page builds its DOM with
//! `textContent` only.

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::view::{self, DiffViewOptions, ViewOptions};
use data::{
    DiffData, DiffTree, Edge, FlameTrees, GateData, PageKind, ReportData, StackGroupRow,
    ThreadData, TimelineData, TimelineStack, TraceData, TraceRows, TreeColumns, WarningRow,
};
use mtanalyze_model::diff::DiffReport;
use mtanalyze_model::gate::GateBreach;
use mtanalyze_model::labels::Labels;
use mtanalyze_model::report::{CallPath, Report, StackStats};
use mtanalyze_model::timeline::StackActivity;

mod data;

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_CSS: &str = include_str!("page.css");
const PAGE_JS: &str = include_str!("page.js");

/// At most this many call-path tree nodes per tree; the smallest subtrees
/// beyond it are left out (their time stays in their parents' widths).
pub const MAX_TREE_NODES: usize = 150_000;
/// At most this many per-group trees besides the merged one.
pub const MAX_GROUP_TREES: usize = 24;
/// At most this many stack rows (the busiest); the groups cover them all.
pub const MAX_STACK_ROWS: usize = 2_000;
/// At most this many function rows per trace of a merged report's breakdown.
pub const MAX_ROWS_PER_TRACE: usize = 500;

/// What the report page shows besides the report.
#[derive(Debug, Default)]
pub struct ReportPage<'a> {
    /// The reports of the traces a merged report sums (`--by-trace` data),
    /// empty for one trace.
    pub by_trace: &'a [Report],
    /// The stacks the timeline draws, the busiest (see
    /// [`mtanalyze_engine::Timelines::activities`]); `None`: no timeline (several traces).
    pub timeline: Option<&'a [StackActivity]>,
    /// The command that analyzes the same input the same way, to which the
    /// page appends `--from ...ns --to ...ns` for a window picked on the
    /// timeline.
    pub command: String,
    /// The `--collapse-recursion` the call paths were made with, as the
    /// flag reads (`direct`, `all`), if any.
    pub collapse: Option<String>,
}

/// What the diff page shows besides the diff.
#[derive(Debug, Default)]
pub struct DiffPage<'a> {
    /// The `--fail-if` rules as written (empty: no gate).
    pub rules: &'a [String],
    /// The rows that broke them.
    pub breaches: &'a [GateBreach],
    /// Lines about each side's warnings (the CLI's summaries, prefixed by the trace).
    pub notes: Vec<String>,
    /// The `--collapse-recursion` the call paths were made with.
    pub collapse: Option<String>,
}

/// Writes the page of `report` (with call paths per stack or merged; stack
/// rows kept).
pub fn report(out: &mut dyn Write, report: &Report, page: &ReportPage<'_>) -> io::Result<()> {
    // What the data borrows from besides the report and the page.
    let labels = Labels::of_functions(&report.functions);
    let groups = view::stack_groups(report, None);
    let trees = path_trees(&report.paths);
    let data = report_data(report, page, &labels, &groups, &trees)?;
    let title = format!("mtanalyze: {}", report.trace.source);
    write_page(out, &title, &data)
}

/// Writes the page of a diff (with call paths).
pub fn diff(out: &mut dyn Write, diff: &DiffReport, page: &DiffPage<'_>) -> io::Result<()> {
    let data = diff_data(diff, page)?;
    let title = format!(
        "mtanalyze diff: {} -> {}",
        diff.base.source, diff.new.source
    );
    write_page(out, &title, &data)
}

/// The skeleton with the CSS, the code and the data in place.
fn write_page(out: &mut dyn Write, title: &str, data: &impl Serialize) -> io::Result<()> {
    let json = script_safe_json(data)?;
    let mut rest = PAGE_HTML;
    for (marker, text) in [
        ("{{TITLE}}", escape_html(title)),
        ("{{CSS}}", PAGE_CSS.to_owned()),
        ("{{DATA}}", json),
        ("{{JS}}", PAGE_JS.to_owned()),
    ] {
        let Some(at) = rest.find(marker) else {
            return Err(io::Error::other(format!("page.html lacks {marker}")));
        };
        out.write_all(&rest.as_bytes()[..at])?;
        out.write_all(text.as_bytes())?;
        rest = &rest[at + marker.len()..];
    }
    out.write_all(rest.as_bytes())
}

/// `value` as JSON that can sit inside `<script type="application/json">`:
/// `<`, `>` and `&` (which only strings can hold) as `\u` escapes, so the
/// text holds no `</script` and no `<!--`.
pub(crate) fn script_safe_json(value: &impl Serialize) -> io::Result<String> {
    let text = serde_json::to_string(value).map_err(io::Error::from)?;
    let mut out = String::with_capacity(text.len() + text.len() / 64);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            // Valid in JSON, and in script text since ES2019; escaped for older readers.
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Text for an HTML element's content.
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The lines a renderer writes into `out`, as strings.
fn lines(write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> io::Result<Vec<String>> {
    let mut buf = Vec::new();
    write(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// The warnings with the sentence saying what each means and what the
/// analyzer did, and the CLI's summary lines.
fn warnings_data(report: &Report) -> (Vec<WarningRow<'_>>, Vec<String>) {
    let rows = report
        .warnings
        .iter()
        .map(|w| WarningRow {
            count: w.count,
            first: &w.first,
            kind: &w.kind,
            repair: &w.repair,
        })
        .collect();
    let notes = [
        super::warnings_summary(&report.warnings),
        super::lost_summary(&report.trace),
    ]
    .into_iter()
    .flatten()
    .collect();
    (rows, notes)
}

fn report_data<'a>(
    report: &'a Report,
    page: &'a ReportPage<'_>,
    labels: &'a Labels,
    groups: &'a [view::StackGroup],
    trees: &'a [(String, Tree, u64)],
) -> io::Result<ReportData<'a>> {
    let header = lines(|w| super::table::header(w, report, None))?;
    let (warnings, notes) = warnings_data(report);
    let order = view::function_indices(report, &ViewOptions::default());
    let index: HashMap<mtanalyze_model::report::FunctionKey, usize> = report
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.key(), i))
        .collect();
    let edges = report
        .edges
        .iter()
        .filter_map(|e| {
            let (a, b) = (index.get(&e.caller_key())?, index.get(&e.callee_key())?);
            Some(Edge(
                *a,
                *b,
                e.ncalls,
                e.primitive_calls,
                e.tottime_ns,
                e.cumtime_ns,
            ))
        })
        .collect();
    // The busiest stacks' rows; the groups sum every row.
    let mut busiest: Vec<&StackStats> = report.stacks.iter().collect();
    busiest.sort_by(|a, b| b.running_ns.cmp(&a.running_ns).then(a.id.cmp(&b.id)));
    busiest.truncate(MAX_STACK_ROWS);
    let groups = groups
        .iter()
        .map(|g| StackGroupRow {
            events: g.events,
            max_depth: g.max_depth,
            name: &g.name,
            paused_ns: g.paused_ns,
            running_ns: g.running_ns,
            scheduled_ns: g.scheduled_ns,
            stacks: g.stacks,
            switches_in: g.switches_in,
            threads: &g.threads,
        })
        .collect();
    let by_trace = page
        .by_trace
        .iter()
        .map(|r| TraceRows {
            duration_ns: r.trace.duration_ns,
            functions: view::function_rows(
                r,
                &ViewOptions {
                    limit: Some(MAX_ROWS_PER_TRACE),
                    ..ViewOptions::default()
                },
            ),
            functions_total: r.functions.len(),
            label: super::table::trace_label(&r.trace),
            source: &r.trace.source,
        })
        .collect();
    let t = &report.trace;
    Ok(ReportData {
        by_trace,
        clock: report.clock.name(),
        collapse: page.collapse.as_deref(),
        command: &page.command,
        edges,
        functions: &report.functions,
        groups,
        header,
        kind: PageKind::Report,
        labels: labels.as_slice(),
        marks: &report.marks,
        notes,
        order,
        stacks: busiest,
        stacks_total: report.stacks.len(),
        timeline: page.timeline.map(|stacks| timeline_data(report, stacks)),
        trace: TraceData {
            duration_ns: t.duration_ns,
            end_ns: t.end_ns,
            finished: t.finished,
            first_event_ns: t.first_event_ns,
            source: &t.source,
            stacks: t.stacks,
            threads: t
                .threads
                .iter()
                .map(|th| ThreadData {
                    lost_from_ns: th.lost_from_ns,
                    name: &th.name,
                    tid: th.tid,
                })
                .collect(),
            traces: t.traces,
            window: t.window.map(|w| [w.from_ns, w.to_ns]),
        },
        trees: flame_trees(trees),
        warnings,
    })
}

/// Per stack: `[start, end, merged_below, on_threads, running, paused]`,
/// each list flat (`[tid, s, e, tid, s, e, ...]`, `[s, e, ...]`,
/// `[s, e, woken or -1, ...]`), and how many stacks were left out.
fn timeline_data<'a>(report: &Report, stacks: &'a [StackActivity]) -> TimelineData<'a> {
    let rows = stacks
        .iter()
        .map(|a| TimelineStack {
            end: a.end_ns,
            id: &a.id,
            merged_below: a.merged_below_ns,
            name: &a.name,
            paused: a
                .paused
                .iter()
                .flat_map(|p| {
                    [
                        p.start_ns as i64,
                        p.end_ns as i64,
                        p.woken_ns.map_or(-1, |w| w as i64),
                    ]
                })
                .collect(),
            running: a.running.iter().flat_map(|&(s, e)| [s, e]).collect(),
            start: a.start_ns,
            threads: a
                .on_threads
                .iter()
                .flat_map(|&(t, s, e)| [t, s, e])
                .collect(),
        })
        .collect();
    let total = report.stacks.len().max(report.stacks_shown as usize);
    TimelineData {
        left_out: total.saturating_sub(stacks.len()),
        stacks: rows,
    }
}

/// A call-path tree in columns: node 0 is the root (function -1); each
/// node's parent, function, self time, total (self time of its subtree),
/// and calls that ended on it.
#[derive(Debug, Default)]
struct Tree {
    parent: Vec<u32>,
    func: Vec<i64>,
    self_ns: Vec<u64>,
    total_ns: Vec<u64>,
    calls: Vec<u64>,
    children: HashMap<(u32, i64), u32>,
}

impl Tree {
    fn new() -> Tree {
        let mut t = Tree::default();
        t.push(0, -1);
        t
    }

    fn push(&mut self, parent: u32, func: i64) -> u32 {
        let id = self.parent.len() as u32;
        self.parent.push(parent);
        self.func.push(func);
        self.self_ns.push(0);
        self.total_ns.push(0);
        self.calls.push(0);
        id
    }

    fn add(&mut self, frames: impl Iterator<Item = i64>, self_ns: u64, calls: u64) {
        let mut at = 0u32;
        self.total_ns[0] = self.total_ns[0].saturating_add(self_ns);
        for f in frames {
            at = match self.children.get(&(at, f)) {
                Some(&c) => c,
                None => {
                    let c = self.push(at, f);
                    self.children.insert((at, f), c);
                    c
                }
            };
            let t = &mut self.total_ns[at as usize];
            *t = t.saturating_add(self_ns);
        }
        let i = at as usize;
        self.self_ns[i] = self.self_ns[i].saturating_add(self_ns);
        self.calls[i] = self.calls[i].saturating_add(calls);
    }

    /// The tree as the page's columns, at most [`MAX_TREE_NODES`] nodes.
    fn columns<'a>(&self, name: &'a str, stacks: u64) -> TreeColumns<'a> {
        self.columns_keeping(name, stacks, &self.largest())
    }

    /// Which nodes to keep: all, or past [`MAX_TREE_NODES`] the largest
    /// subtrees (a parent's total is at least its child's, so what is
    /// kept is a tree).
    fn largest(&self) -> Vec<bool> {
        let n = self.parent.len();
        let mut keep = vec![true; n];
        if n > MAX_TREE_NODES {
            let mut totals: Vec<u64> = self.total_ns.clone();
            totals.sort_unstable_by(|a, b| b.cmp(a));
            let floor = totals[MAX_TREE_NODES - 1];
            for i in 1..n {
                keep[i] = self.total_ns[i] > floor && keep[self.parent[i] as usize];
            }
        }
        keep
    }

    /// The nodes `keep` says, as the page's columns (`keep[i]` implies
    /// `keep[parent[i]]`).
    fn columns_keeping<'a>(&self, name: &'a str, stacks: u64, keep: &[bool]) -> TreeColumns<'a> {
        let n = self.parent.len();
        let mut renumber = vec![0u32; n];
        let mut out = TreeColumns {
            calls: vec![],
            func: vec![],
            left_out: keep.iter().filter(|k| !**k).count(),
            name,
            parent: vec![],
            self_ns: vec![],
            stacks,
            total: vec![],
        };
        for i in 0..n {
            if !keep[i] {
                continue;
            }
            renumber[i] = out.parent.len() as u32;
            out.parent.push(if i == 0 {
                -1
            } else {
                renumber[self.parent[i] as usize] as i64
            });
            out.func.push(self.func[i]);
            out.self_ns.push(self.self_ns[i]);
            out.total.push(self.total_ns[i]);
            out.calls.push(self.calls[i]);
        }
        out
    }
}

/// The merged tree of `paths`, then (for paths kept per stack) one tree
/// per stack group (`request-#`), the largest first: with its name and
/// how many stacks its paths ran on.
fn path_trees(paths: &[CallPath]) -> Vec<(String, Tree, u64)> {
    let mut merged = Tree::new();
    let mut groups: HashMap<String, (Tree, std::collections::HashSet<&str>)> = HashMap::new();
    for p in paths {
        let frames = || p.frames.iter().map(|&f| f as i64);
        merged.add(frames(), p.self_ns, p.ncalls);
        if !p.stack.is_empty() {
            let (tree, stacks) = groups
                .entry(view::group_label(&p.stack))
                .or_insert_with(|| (Tree::new(), Default::default()));
            tree.add(frames(), p.self_ns, p.ncalls);
            stacks.insert(p.stack.as_str());
        }
    }
    let all_stacks: u64 = groups.values().map(|(_, s)| s.len() as u64).sum();
    let mut groups: Vec<(String, Tree, u64)> = groups
        .into_iter()
        .map(|(name, (tree, stacks))| (name, tree, stacks.len() as u64))
        .collect();
    groups.sort_by(|a, b| b.1.total_ns[0].cmp(&a.1.total_ns[0]).then(a.0.cmp(&b.0)));
    let mut out = vec![("all stacks".to_owned(), merged, all_stacks)];
    out.extend(groups);
    out
}

/// The flame graphs of [`path_trees`]: the merged one and the largest
/// [`MAX_GROUP_TREES`] groups.
fn flame_trees(trees: &[(String, Tree, u64)]) -> FlameTrees<'_> {
    let groups = trees.len().saturating_sub(1);
    FlameTrees {
        groups_left_out: groups.saturating_sub(MAX_GROUP_TREES),
        trees: trees
            .iter()
            .take(1 + MAX_GROUP_TREES)
            .map(|(name, tree, stacks)| tree.columns(name, *stacks))
            .collect(),
    }
}

fn diff_data<'d>(diff: &'d DiffReport, page: &'d DiffPage<'_>) -> io::Result<DiffData<'d>> {
    let header = lines(|w| super::diff::header(w, diff, None))?;
    let rows = view::diff_function_rows(diff, &DiffViewOptions::default());
    // The differential tree: names from the paths' text, both sides' self time.
    let mut names: Vec<&'d str> = Vec::new();
    let mut name_ids: HashMap<&'d str, i64> = HashMap::new();
    let mut base = Tree::new();
    let mut new = Tree::new();
    let mut ids_of = |path: &'d str| -> Vec<i64> {
        path.split(';')
            .map(|n| {
                *name_ids.entry(n).or_insert_with(|| {
                    names.push(n);
                    names.len() as i64 - 1
                })
            })
            .collect()
    };
    // One node numbering for both sides: every path enters both trees.
    let mut paths: Vec<(Vec<i64>, u64, u64)> = Vec::new();
    for p in &diff.paths {
        paths.push((ids_of(&p.path), p.base_ns, p.new_ns));
    }
    // The three trees have one shape (the same paths in the same order):
    // the nodes kept are those of the largest totals of both sides.
    let mut both = Tree::new();
    for (ids, b, n) in &paths {
        base.add(ids.iter().copied(), *b, 0);
        new.add(ids.iter().copied(), *n, 0);
        both.add(ids.iter().copied(), b.saturating_add(*n), 0);
    }
    let keep = both.largest();
    let base = base.columns_keeping("base", 0, &keep);
    let tree = DiffTree {
        base_self: base.self_ns,
        base_total: base.total,
        new: new.columns_keeping("new", 0, &keep),
    };
    let gate = match page.rules.is_empty() {
        true => None,
        false => Some(GateData {
            breaches: page.breaches.iter().map(super::diff::breach).collect(),
            rules: page.rules,
        }),
    };
    Ok(DiffData {
        base_total_ns: diff.base_total_ns,
        clock: diff.clock.name(),
        collapse: page.collapse.as_deref(),
        functions: rows,
        functions_total: diff.functions.len(),
        gate,
        header,
        kind: PageKind::Diff,
        names,
        new_total_ns: diff.new_total_ns,
        notes: &page.notes,
        tree,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn no_name_can_end_the_script() {
        let v = json!({"f": "</script><script>alert(1)</script>", "g": "<!-- & \u{2028}"});
        let text = script_safe_json(&v).unwrap();
        assert!(!text.to_ascii_lowercase().contains("</script"));
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn the_page_files_cannot_end_their_elements() {
        for (what, text) in [("css", PAGE_CSS), ("js", PAGE_JS)] {
            let lower = text.to_ascii_lowercase();
            assert!(!lower.contains("</script"), "{what}");
            assert!(!lower.contains("</style"), "{what}");
        }
        assert!(
            !PAGE_JS.contains("innerHTML"),
            "the page builds its DOM with textContent"
        );
    }

    #[test]
    fn trees_keep_totals_and_the_largest_subtrees() {
        let mut t = Tree::new();
        t.add([0, 1].into_iter(), 5, 1);
        t.add([0, 2].into_iter(), 3, 2);
        t.add([0].into_iter(), 1, 1);
        assert_eq!(t.total_ns, vec![9, 9, 5, 3]);
        assert_eq!(t.self_ns, vec![0, 1, 5, 3]);
        let j = t.columns("x", 1);
        assert_eq!(j.parent, vec![-1, 0, 1, 1]);
    }
}
