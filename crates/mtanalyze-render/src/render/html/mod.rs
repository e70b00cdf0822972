//! `--format html`: one self-contained page (`mtanalyze TRACE --format html
//! -o report.html`, `mtanalyze diff BASE NEW --format html -o diff.html`)
//! that works offline from `file://`: no request of any kind.
//!
//! ```text
//! page.html   the skeleton; page.css and page.js are inlined into it
//! page.js     reads the data, builds every table, flame graph and timeline
//! mod.rs      the data: one JSON object in <script type="application/json">
//! ```
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
use serde_json::{json, Value};

use crate::view::{self, DiffViewOptions, ViewOptions};
use mtanalyze_model::diff::DiffReport;
use mtanalyze_model::gate::GateBreach;
use mtanalyze_model::report::{CallPath, Report};
use mtanalyze_model::timeline::StackActivity;

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
    let data = report_data(report, page)?;
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
fn write_page(out: &mut dyn Write, title: &str, data: &Value) -> io::Result<()> {
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
pub(crate) fn script_safe_json(value: &Value) -> io::Result<String> {
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

fn to_value<T: Serialize>(v: T) -> io::Result<Value> {
    serde_json::to_value(v).map_err(io::Error::from)
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
fn warnings_data(report: &Report) -> io::Result<(Value, Vec<String>)> {
    let rows: Vec<Value> = report
        .warnings
        .iter()
        .map(|w| {
            json!({
                "kind": w.kind,
                "count": w.count,
                "first": w.first,
                "repair": w.repair,
            })
        })
        .collect();
    let notes = [
        super::warnings_summary(&report.warnings),
        super::lost_summary(&report.trace),
    ]
    .into_iter()
    .flatten()
    .collect();
    Ok((Value::Array(rows), notes))
}

fn report_data(report: &Report, page: &ReportPage<'_>) -> io::Result<Value> {
    let header = lines(|w| super::table::header(w, report, None))?;
    let (warnings, notes) = warnings_data(report)?;
    let order = view::function_indices(report, &ViewOptions::default());
    let index: HashMap<mtanalyze_model::report::FunctionKey, usize> = report
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.key(), i))
        .collect();
    // Edges as [caller, callee, ncalls, primitive, tottime, cumtime].
    let edges: Vec<Value> = report
        .edges
        .iter()
        .filter_map(|e| {
            let (a, b) = (index.get(&e.caller_key())?, index.get(&e.callee_key())?);
            Some(json!([
                a,
                b,
                e.ncalls,
                e.primitive_calls,
                e.tottime_ns,
                e.cumtime_ns
            ]))
        })
        .collect();
    let trees = flame_trees(&report.paths)?;
    // The busiest stacks' rows; the groups sum every row.
    let mut busiest: Vec<&mtanalyze_model::report::StackStats> = report.stacks.iter().collect();
    busiest.sort_by(|a, b| b.running_ns.cmp(&a.running_ns).then(a.id.cmp(&b.id)));
    busiest.truncate(MAX_STACK_ROWS);
    let groups: Vec<Value> = view::stack_groups(report, None)
        .into_iter()
        .map(|g| {
            json!({
                "name": g.name,
                "stacks": g.stacks,
                "threads": g.threads,
                "running_ns": g.running_ns,
                "paused_ns": g.paused_ns,
                "scheduled_ns": g.scheduled_ns,
                "switches_in": g.switches_in,
                "max_depth": g.max_depth,
                "events": g.events,
            })
        })
        .collect();
    let by_trace: Vec<Value> = page
        .by_trace
        .iter()
        .map(|r| {
            let rows = view::function_rows(
                r,
                &ViewOptions {
                    limit: Some(MAX_ROWS_PER_TRACE),
                    ..ViewOptions::default()
                },
            );
            Ok(json!({
                "label": super::table::trace_label(&r.trace),
                "source": r.trace.source,
                "duration_ns": r.trace.duration_ns,
                "functions_total": r.functions.len(),
                "functions": to_value(rows)?,
            }))
        })
        .collect::<io::Result<_>>()?;
    let timeline = match page.timeline {
        None => Value::Null,
        Some(stacks) => timeline_data(report, stacks),
    };
    Ok(json!({
        "kind": "report",
        "header": header,
        "notes": notes,
        "clock": report.clock.name(),
        "command": page.command,
        "collapse": page.collapse,
        "trace": {
            "source": report.trace.source,
            "traces": report.trace.traces,
            "first_event_ns": report.trace.first_event_ns,
            "end_ns": report.trace.end_ns,
            "duration_ns": report.trace.duration_ns,
            "stacks": report.trace.stacks,
            "finished": report.trace.finished,
            "window": report.trace.window.map(|w| json!([w.from_ns, w.to_ns])),
            "threads": report.trace.threads.iter().map(|t| json!({
                "tid": t.tid, "name": t.name, "lost_from_ns": t.lost_from_ns,
            })).collect::<Vec<_>>(),
        },
        "warnings": warnings,
        "marks": to_value(&report.marks)?,
        "functions": to_value(&report.functions)?,
        // The flame graph's frame names, one per function (see `Labels`).
        "labels": mtanalyze_model::labels::Labels::of_functions(&report.functions).as_slice(),
        "order": order,
        "edges": edges,
        "trees": trees,
        "stacks": to_value(&busiest)?,
        "stacks_total": report.stacks.len(),
        "groups": groups,
        "by_trace": by_trace,
        "timeline": timeline,
    }))
}

/// Per stack: `[start, end, merged_below, on_threads, running, paused]`,
/// each list flat (`[tid, s, e, tid, s, e, ...]`, `[s, e, ...]`,
/// `[s, e, woken or -1, ...]`), and how many stacks were left out.
fn timeline_data(report: &Report, stacks: &[StackActivity]) -> Value {
    let rows: Vec<Value> = stacks
        .iter()
        .map(|a| {
            let threads: Vec<u64> = a
                .on_threads
                .iter()
                .flat_map(|&(t, s, e)| [t, s, e])
                .collect();
            let running: Vec<u64> = a.running.iter().flat_map(|&(s, e)| [s, e]).collect();
            let paused: Vec<i64> = a
                .paused
                .iter()
                .flat_map(|p| {
                    [
                        p.start_ns as i64,
                        p.end_ns as i64,
                        p.woken_ns.map_or(-1, |w| w as i64),
                    ]
                })
                .collect();
            json!({
                "id": a.id,
                "name": a.name,
                "start": a.start_ns,
                "end": a.end_ns,
                "merged_below": a.merged_below_ns,
                "threads": threads,
                "running": running,
                "paused": paused,
            })
        })
        .collect();
    let total = report.stacks.len().max(report.stacks_shown as usize);
    json!({
        "stacks": rows,
        "left_out": total.saturating_sub(stacks.len()),
    })
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

    /// The tree as JSON columns, at most [`MAX_TREE_NODES`] nodes.
    fn to_json(&self, name: &str, stacks: u64) -> Value {
        self.to_json_keeping(name, stacks, &self.largest())
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

    /// The nodes `keep` says, as JSON columns (`keep[i]` implies
    /// `keep[parent[i]]`).
    fn to_json_keeping(&self, name: &str, stacks: u64, keep: &[bool]) -> Value {
        let n = self.parent.len();
        let left_out = keep.iter().filter(|k| !**k).count();
        let mut renumber = vec![0u32; n];
        let (mut p, mut f, mut s, mut t, mut c) = (vec![], vec![], vec![], vec![], vec![]);
        for i in 0..n {
            if !keep[i] {
                continue;
            }
            renumber[i] = p.len() as u32;
            p.push(if i == 0 {
                -1
            } else {
                renumber[self.parent[i] as usize] as i64
            });
            f.push(self.func[i]);
            s.push(self.self_ns[i]);
            t.push(self.total_ns[i]);
            c.push(self.calls[i]);
        }
        json!({
            "name": name,
            "stacks": stacks,
            "parent": p,
            "func": f,
            "self": s,
            "total": t,
            "calls": c,
            "left_out": left_out,
        })
    }
}

/// The merged tree of `paths`, then (for paths kept per stack) one tree
/// per stack group (`request-#`), the largest [`MAX_GROUP_TREES`].
fn flame_trees(paths: &[CallPath]) -> io::Result<Value> {
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
    let mut out = vec![merged.to_json("all stacks", all_stacks)];
    let mut groups: Vec<(String, Tree, u64)> = groups
        .into_iter()
        .map(|(name, (tree, stacks))| (name, tree, stacks.len() as u64))
        .collect();
    groups.sort_by(|a, b| b.1.total_ns[0].cmp(&a.1.total_ns[0]).then(a.0.cmp(&b.0)));
    let left_out = groups.len().saturating_sub(MAX_GROUP_TREES);
    if !groups.is_empty() {
        for (name, tree, stacks) in groups.iter().take(MAX_GROUP_TREES) {
            out.push(tree.to_json(name, *stacks));
        }
    }
    Ok(json!({ "trees": out, "groups_left_out": left_out }))
}

fn diff_data<'d>(diff: &'d DiffReport, page: &DiffPage<'_>) -> io::Result<Value> {
    let header = lines(|w| super::diff::header(w, diff, None))?;
    let rows = view::diff_function_rows(diff, &DiffViewOptions::default());
    // The differential tree: names from the paths' text, both sides' self time.
    let mut names: Vec<String> = Vec::new();
    let mut name_ids: HashMap<&'d str, i64> = HashMap::new();
    let mut base = Tree::new();
    let mut new = Tree::new();
    let mut ids_of = |path: &'d str| -> Vec<i64> {
        path.split(';')
            .map(|n| {
                *name_ids.entry(n).or_insert_with(|| {
                    names.push(n.to_owned());
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
    let mut tree = new.to_json_keeping("new", 0, &keep);
    let base_json = base.to_json_keeping("base", 0, &keep);
    tree["base_total"] = base_json["total"].clone();
    tree["base_self"] = base_json["self"].clone();
    let gate = match page.rules.is_empty() {
        true => Value::Null,
        false => json!({
            "rules": page.rules,
            "breaches": page.breaches.iter().map(super::diff::breach).collect::<Vec<_>>(),
        }),
    };
    Ok(json!({
        "kind": "diff",
        "header": header,
        "notes": page.notes,
        "clock": diff.clock.name(),
        "collapse": page.collapse,
        "base_total_ns": diff.base_total_ns,
        "new_total_ns": diff.new_total_ns,
        "functions": to_value(rows)?,
        "functions_total": diff.functions.len(),
        "names": names,
        "tree": tree,
        "gate": gate,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let j = t.to_json("x", 1);
        assert_eq!(j["parent"], json!([-1, 0, 1, 1]));
    }
}
