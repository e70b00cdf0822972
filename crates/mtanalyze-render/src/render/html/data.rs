//! The page's data: the one JSON object `page.js` reads (as `D`), one
//! type per object it reads, each field saying what the page does with it.
//! `schemas/html-page.schema.json` writes the same shape down (and a test
//! of the `e2e` target validates pages against it); it is the contract
//! between this writer and `page.js`, not a public format.
//!
//! The fields of every struct are in the order of their JSON names' bytes
//! (`by_trace` before `clock`), which is the order the page has always
//! had its keys in; the model values the page embeds ([`FunctionStats`],
//! [`StackStats`], [`Mark`], [`FunctionDiff`]) are written with their keys
//! so sorted too ([`sorted_keys`]). `page.js` reads every key by name: the
//! order only keeps the bytes of a page the same from one build to the
//! next, which the output comparison (`tests/compare-outputs.sh`) checks.

use serde::{Serialize, Serializer};

use mtanalyze_model::diff::FunctionDiff;
use mtanalyze_model::marks::Mark;
use mtanalyze_model::report::{FunctionStats, StackStats};

/// Which page `page.js` builds.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum PageKind {
    /// The page of one report ([`ReportData`]).
    Report,
    /// The page of a diff ([`DiffData`]).
    Diff,
}

/// The data of a report's page (`mtanalyze TRACE --format html`).
#[derive(Debug, Serialize)]
pub(super) struct ReportData<'a> {
    /// The per-trace breakdown of a merged report (`--by-trace`): the
    /// "Per trace" section, a table of every trace's rows and a list of the
    /// traces; empty (no section) for one trace.
    pub by_trace: Vec<TraceRows<'a>>,
    /// The clock's name (`stack`, `gil`, `wall`), in the flame graph's note.
    pub clock: &'a str,
    /// The `--collapse-recursion` mode the call paths were made with
    /// (`direct`, `all`), said in a note and under the flame graph; `null`:
    /// none.
    pub collapse: Option<&'a str>,
    /// The command that analyzes the same input the same way; the timeline
    /// appends `--from ...ns --to ...ns` to it for a window picked there.
    pub command: &'a str,
    /// The call graph's edges: a function's callers and callees, shown
    /// when its row is clicked.
    pub edges: Vec<Edge>,
    /// Every function of the report (its JSON objects, see
    /// `schemas/report.schema.json`): the function table's rows, and what
    /// the flame graph's and the edges' function indices point at.
    #[serde(serialize_with = "sorted_keys")]
    pub functions: &'a [FunctionStats],
    /// The stack groups (stacks named alike, `request-#`), every stack
    /// counted: the table behind the stacks section's "grouped" tab.
    pub groups: Vec<StackGroupRow<'a>>,
    /// The table header's lines (trace, clock, totals), shown as they are
    /// at the top of the page.
    pub header: Vec<String>,
    /// `report`: this is a report's page.
    pub kind: PageKind,
    /// The flame graph's frame names, one per function of `functions`
    /// (short, qualified only where two functions share a name).
    pub labels: &'a [String],
    /// The trace's marks (report JSON objects): named in a note and drawn
    /// on the timeline.
    #[serde(serialize_with = "sorted_keys")]
    pub marks: &'a [Mark],
    /// Lines about the warnings and lost time (the CLI's summaries), shown
    /// in the warnings box.
    pub notes: Vec<String>,
    /// The function table's first order: indices into `functions`, the
    /// CLI's default sort.
    pub order: Vec<usize>,
    /// The busiest stacks' rows (report JSON objects), the stacks table;
    /// the groups count every stack.
    #[serde(serialize_with = "sorted_keys")]
    pub stacks: Vec<&'a StackStats>,
    /// How many stacks the report has: the stacks table says how many of
    /// them it leaves out.
    pub stacks_total: usize,
    /// The stacks the timeline draws; `null`: no timeline section (a
    /// report of several traces).
    pub timeline: Option<TimelineData<'a>>,
    /// The trace: the timeline's time range and threads.
    pub trace: TraceData<'a>,
    /// The flame graphs, merged and per stack group.
    pub trees: FlameTrees<'a>,
    /// The report's warnings, one line each in the warnings box.
    pub warnings: Vec<WarningRow<'a>>,
}

/// One call-graph edge: `[caller, callee, ncalls, primitive_calls,
/// tottime_ns, cumtime_ns]`, the callers' and callees' tables of a clicked
/// function (`caller` and `callee` index `functions`).
#[derive(Debug, Serialize)]
pub(super) struct Edge(pub usize, pub usize, pub u64, pub u64, pub u64, pub u64);

/// One row of the stack groups' table; `page.js` also shows the means
/// (running and paused over `stacks`) and the waiting time (`paused_ns`
/// minus `scheduled_ns`).
#[derive(Debug, Serialize)]
pub(super) struct StackGroupRow<'a> {
    /// The "events" column: enter and exit events, summed.
    pub events: u64,
    /// The "depth" column: the deepest any of the stacks went.
    pub max_depth: u32,
    /// The "group" column and the row's key: the stacks' name with every
    /// run of digits written `#`.
    pub name: &'a str,
    /// The "paused" column.
    pub paused_ns: u64,
    /// The "running" column, the table's first sort.
    pub running_ns: u64,
    /// The "scheduled" column (paused, woken, waiting for a thread).
    pub scheduled_ns: u64,
    /// The "stacks" column, and the divisor of the means.
    pub stacks: u64,
    /// The "switches" column.
    pub switches_in: u64,
    /// The "threads" column: the threads any of them ran on, ascending.
    pub threads: &'a [u64],
}

/// One trace of a merged report: an item of the per-trace list and its
/// rows in the per-trace table.
#[derive(Debug, Serialize)]
pub(super) struct TraceRows<'a> {
    /// The trace's duration, in the list.
    pub duration_ns: u64,
    /// Its functions with the most self time (report JSON objects), at
    /// most [`super::MAX_ROWS_PER_TRACE`]: its rows in the table.
    #[serde(serialize_with = "sorted_keys")]
    pub functions: Vec<&'a FunctionStats>,
    /// How many functions it has: the list says when `functions` holds
    /// fewer.
    pub functions_total: usize,
    /// Its short name, in the list and the table's "trace" column.
    pub label: String,
    /// Its source, the "trace" column's tooltip.
    pub source: &'a str,
}

/// The stacks the timeline draws, and how many it leaves out (said in a
/// note under it).
#[derive(Debug, Serialize)]
pub(super) struct TimelineData<'a> {
    /// How many stacks are not drawn (not among the busiest).
    pub left_out: usize,
    /// One row per stack drawn, in the order of the rows.
    pub stacks: Vec<TimelineStack<'a>>,
}

/// One stack's row on the timeline, and its stretches on the thread
/// tracks; each list is flat, a few numbers per item.
#[derive(Debug, Serialize)]
pub(super) struct TimelineStack<'a> {
    /// Where the stack's row ends, ns from time zero.
    pub end: u64,
    /// Its id: its colour, its key when selected from the stacks table.
    pub id: &'a str,
    /// The longest pause merged into the stretches around it (0: none),
    /// said in a note.
    pub merged_below: u64,
    /// Its name, the row's label (its id when empty).
    pub name: &'a str,
    /// Its pauses as `[start, end, woken, ...]`, `woken` -1 when it was
    /// not woken: drawn and described on hover.
    pub paused: Vec<i64>,
    /// Its running stretches as `[start, end, ...]`: drawn on its row and
    /// summed into its running time.
    pub running: Vec<u64>,
    /// Where the row starts.
    pub start: u64,
    /// Its stretches on threads as `[tid, start, end, ...]`: drawn on the
    /// thread tracks (a thread not in `trace.threads` gets a track too).
    pub threads: Vec<u64>,
}

/// The trace: what the timeline needs of it, and a summary `page.js`
/// does not read (for a reader of the file; the header says it in words).
#[derive(Debug, Serialize)]
pub(super) struct TraceData<'a> {
    /// The trace's duration (not read by the page).
    pub duration_ns: u64,
    /// The end of the timeline's range (without a window).
    pub end_ns: u64,
    /// Whether the recording finished cleanly (not read by the page).
    pub finished: bool,
    /// The start of the timeline's range (without a window).
    pub first_event_ns: u64,
    /// The trace's source, the input's path or the paths joined (not read
    /// by the page; the title holds it).
    pub source: &'a str,
    /// How many stacks the trace has (not read by the page).
    pub stacks: u64,
    /// The thread tracks, in order, with their names.
    pub threads: Vec<ThreadData<'a>>,
    /// How many traces the report sums, 1 for one (not read by the page).
    pub traces: u64,
    /// `[from_ns, to_ns]` of `--from`/`--to`: the timeline's range;
    /// `null`: the whole trace.
    pub window: Option<[u64; 2]>,
}

/// A thread track of the timeline.
#[derive(Debug, Serialize)]
pub(super) struct ThreadData<'a> {
    /// From when its events were lost, if they were (`null`: none lost);
    /// not read by the page (the notes say it).
    pub lost_from_ns: Option<u64>,
    /// Its name, the track's label.
    pub name: &'a str,
    /// Its id, the track's key in the timeline stacks' `threads`.
    pub tid: u64,
}

/// One warning, a line in the warnings box: `kind ×count (first at
/// first): repair`.
#[derive(Debug, Serialize)]
pub(super) struct WarningRow<'a> {
    /// How many times it happened.
    pub count: u64,
    /// Where it happened first.
    pub first: &'a str,
    /// Its machine-readable kind, in bold.
    pub kind: &'a str,
    /// What the analyzer did about it.
    pub repair: &'a str,
}

/// The report page's flame graphs: the merged one, then one per stack
/// group, a tab each.
#[derive(Debug, Serialize)]
pub(super) struct FlameTrees<'a> {
    /// How many stack groups have no graph of their own (past
    /// [`super::MAX_GROUP_TREES`]), said under the graph.
    pub groups_left_out: usize,
    /// The merged tree (`all stacks`), then the largest groups' trees.
    pub trees: Vec<TreeColumns<'a>>,
}

/// A call-path tree as columns, one item per node: node 0 is the root and
/// comes first, a node's parent before it. The flame graph draws node `i`
/// `total[i]` wide under `parent[i]`, and names it by `func[i]`.
#[derive(Debug, Serialize)]
pub(super) struct TreeColumns<'a> {
    /// Calls that ended on the node, on hover.
    pub calls: Vec<u64>,
    /// The node's function: an index into the report's `functions` (and
    /// `labels`), or the diff's `names`; -1 for the root.
    pub func: Vec<i64>,
    /// How many nodes were left out (the smallest subtrees past
    /// [`super::MAX_TREE_NODES`]; their time stays in their parents'
    /// widths), said under the graph.
    pub left_out: usize,
    /// The tree's tab (`all stacks`, a group's name; `new` in a diff).
    pub name: &'a str,
    /// The node's parent (-1 for the root).
    pub parent: Vec<i64>,
    /// The node's self time, on hover.
    #[serde(rename = "self")]
    pub self_ns: Vec<u64>,
    /// How many stacks the tree's paths ran on (0 in a diff), on its tab.
    pub stacks: u64,
    /// The self time of the node's subtree: its width.
    pub total: Vec<u64>,
}

/// The data of a diff's page (`mtanalyze diff BASE NEW --format html`).
#[derive(Debug, Serialize)]
pub(super) struct DiffData<'a> {
    /// The base trace's total self time (not read by the page; the header
    /// says it).
    pub base_total_ns: u64,
    /// The clock's name both traces were analyzed with (not read by the
    /// page; the header says it).
    pub clock: &'a str,
    /// The `--collapse-recursion` mode of the call paths, said under the
    /// flame graph; `null`: none.
    pub collapse: Option<&'a str>,
    /// The diff's function rows (diff JSON objects, see
    /// `schemas/diff.schema.json`), in the CLI's order: the diff table.
    #[serde(serialize_with = "sorted_keys")]
    pub functions: Vec<&'a FunctionDiff>,
    /// How many functions the diff has: the table says how many it does
    /// not show.
    pub functions_total: usize,
    /// The `--fail-if` gate, shown as passed or failed with the rows that
    /// broke it; `null`: no gate.
    pub gate: Option<GateData<'a>>,
    /// The diff header's lines, shown as they are at the top.
    pub header: Vec<String>,
    /// `diff`: this is a diff's page.
    pub kind: PageKind,
    /// The differential flame graph's frame names, indexed by the tree's
    /// `func`.
    pub names: Vec<&'a str>,
    /// The new trace's total self time (not read by the page).
    pub new_total_ns: u64,
    /// Lines about each side's warnings, shown in the warnings box.
    pub notes: &'a [String],
    /// The differential flame graph.
    pub tree: DiffTree<'a>,
}

/// The differential flame graph: the new trace's tree, widths from its
/// times and colours from the change of self time since the base, with
/// the base's columns for the same nodes (one node numbering for both
/// sides, a path of either side in both).
#[derive(Debug, Serialize)]
pub(super) struct DiffTree<'a> {
    /// The base's self time per node: the colour (new minus base) and the
    /// hover text.
    pub base_self: Vec<u64>,
    /// The base's subtree total per node, on hover.
    pub base_total: Vec<u64>,
    /// The new trace's columns (named `new`, 0 stacks).
    #[serde(flatten)]
    pub new: TreeColumns<'a>,
}

/// The `--fail-if` gate of a diff.
#[derive(Debug, Serialize)]
pub(super) struct GateData<'a> {
    /// The rows that broke a rule, one line each, as the CLI prints them
    /// after `fail-if`; empty: the gate passed.
    pub breaches: Vec<String>,
    /// The rules as written.
    pub rules: &'a [String],
}

/// Writes `value` with the keys of every object in it sorted, as
/// `serde_json::Value` holds them (without serde_json's `preserve_order`
/// feature, which nothing in the workspace turns on): the order model
/// values have always had in the page (see the module doc).
fn sorted_keys<T: Serialize, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
}
