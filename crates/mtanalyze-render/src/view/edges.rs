//! Caller and callee groups (`--callers`, `--callees`), of a report and of
//! a diff alike: each selected function, in the view's order, with the
//! edges into it or out of it, like a block of pstats' `print_callers` /
//! `print_callees`.

use std::collections::BTreeMap;

use mtanalyze_model::diff::{EdgeDiff, FunctionDiff};
use mtanalyze_model::report::{EdgeStats, FunctionStats, Site};

/// Which side of an edge an [`EdgeGroup`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The functions that called the selected one (`--callers`).
    Callers,
    /// The functions the selected one called (`--callees`).
    Callees,
}

/// One selected function with the edges into it (callers) or out of it
/// (callees): of a report by default, of a diff as [`DiffEdgeGroup`].
#[derive(Clone, Debug)]
pub struct EdgeGroup<'a, F = FunctionStats, E = EdgeStats> {
    /// The selected function.
    pub function: &'a F,
    /// Its edges, ordered by the other end's name, file and line.
    pub edges: Vec<&'a E>,
}

/// One selected function of a diff with its edge rows.
pub type DiffEdgeGroup<'d> = EdgeGroup<'d, FunctionDiff, EdgeDiff>;

/// A row that names a function: a report's or a diff's.
pub(crate) trait FunctionRow {
    /// Its identity.
    fn site(&self) -> Site<'_>;
}

/// A call edge: a report's or a diff's.
pub(crate) trait EdgeRow {
    /// The calling function.
    fn caller(&self) -> Site<'_>;
    /// The called function.
    fn callee(&self) -> Site<'_>;
}

impl FunctionRow for FunctionStats {
    fn site(&self) -> Site<'_> {
        FunctionStats::site(self)
    }
}

impl FunctionRow for FunctionDiff {
    fn site(&self) -> Site<'_> {
        Site {
            function: &self.function,
            file: &self.file,
            line: self.line,
        }
    }
}

/// Report and diff edges name their ends with the same fields.
macro_rules! edge_row {
    ($edge:ty) => {
        impl EdgeRow for $edge {
            fn caller(&self) -> Site<'_> {
                Site {
                    function: &self.caller,
                    file: &self.caller_file,
                    line: self.caller_line,
                }
            }
            fn callee(&self) -> Site<'_> {
                Site {
                    function: &self.callee,
                    file: &self.callee_file,
                    line: self.callee_line,
                }
            }
        }
    };
}

edge_row!(EdgeStats);
edge_row!(EdgeDiff);

/// The end of `e` that a group of `dir` is about (the callee for callers)
/// and the end its rows name.
fn ends<E: EdgeRow>(e: &E, dir: Direction) -> (Site<'_>, Site<'_>) {
    match dir {
        Direction::Callers => (e.callee(), e.caller()),
        Direction::Callees => (e.caller(), e.callee()),
    }
}

/// The groups of the `selected` functions, in their order, each with its
/// edges of `dir` that `keep` keeps, ordered by the other end. A function
/// whose every edge `keep` drops is left out; one with no edges at all is
/// kept (its table shows `-`).
pub(super) fn group_edges<'a, F: FunctionRow, E: EdgeRow>(
    selected: impl IntoIterator<Item = &'a F>,
    edges: &'a [E],
    dir: Direction,
    keep: impl Fn(&E) -> bool,
) -> Vec<EdgeGroup<'a, F, E>> {
    let mut by_function: BTreeMap<Site<'a>, Vec<&'a E>> = BTreeMap::new();
    for e in edges {
        by_function.entry(ends(e, dir).0).or_default().push(e);
    }
    selected
        .into_iter()
        .filter_map(|f| {
            let all = by_function.get(&f.site()).map_or(&[][..], Vec::as_slice);
            let mut kept: Vec<&'a E> = all.iter().copied().filter(|e| keep(e)).collect();
            kept.sort_by_key(|e| ends(*e, dir).1);
            (all.is_empty() || !kept.is_empty()).then_some(EdgeGroup {
                function: f,
                edges: kept,
            })
        })
        .collect()
}
