//! What the user asked to see: sorting, filtering and limiting a report's
//! (or a diff's) rows before a renderer prints them.
//!
//! Everything here is a pure function of a [`Report`](mtanalyze_model::report::Report) and a
//! [`ViewOptions`] (of a [`DiffReport`](mtanalyze_model::diff::DiffReport) and a
//! [`DiffViewOptions`]): no printing, no recomputation of statistics. The
//! table and JSON renderers both go through it, so `--sort`, `--filter`,
//! `--limit` and `--min-change` mean the same thing in every output format.
//! `sort.rs` holds the one sort key of both, `edges.rs` their caller and
//! callee groups, `report.rs` the report's views, `diff.rs` the diff's;
//! `sorted_rows.rs` gives handed stack rows back in the report's order.

mod diff;
mod edges;
mod report;
mod sort;
mod sorted_rows;

use regex::Regex;

use mtanalyze_model::report::FunctionKey;

pub use diff::{diff_edge_groups, diff_function_rows, filtered_diff, DiffViewOptions};
pub(crate) use edges::EdgeRow;
pub use edges::{DiffEdgeGroup, Direction, EdgeGroup};
pub use report::{
    edge_groups, filtered_report, function_indices, function_rows, group_label, stack_groups,
    stack_rows, EdgeSelection, ReportView, StackGroup, StackView, ViewOptions,
};
pub use sort::SortKey;
pub use sorted_rows::{Sorted, SortedRows, DEFAULT_BUDGET};

/// `file:line name` when the definition site is known, else the name:
/// what `--filter`, `--callers` and `--callees` match against (besides the
/// bare name) and what the table prints in its last column.
pub(crate) fn site_label(key: &FunctionKey) -> String {
    if key.file.is_empty() {
        key.function.clone()
    } else {
        format!("{}:{} {}", key.file, key.line, key.function)
    }
}

/// Whether `re` selects the function: it matches the bare name or the
/// `file:line name` label.
pub(crate) fn matches(re: &Regex, key: &FunctionKey) -> bool {
    re.is_match(&key.function) || (!key.file.is_empty() && re.is_match(&site_label(key)))
}
