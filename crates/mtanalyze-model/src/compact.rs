//! A trace's report with its edges still numbered: what summing many
//! traces needs, without a row of four strings per edge.
//!
//! A trace of 100,000 events over 300 functions has some 20,000 call
//! edges; as [`EdgeStats`] rows they are 80,000 strings made, sorted by,
//! hashed and freed again by the merge, which reads them once. Most of a
//! small trace's analysis went there. A [`CompactReport`] keeps each edge
//! as two function numbers and its sums, and the function keys once per
//! trace: [`crate::merge::Merged::add_compact`] looks a trace's functions up
//! once each, its edges by number, and makes rows only for edges it has
//! not met before. [`CompactReport::into_report`] makes the rows, exactly
//! as `mtanalyze::analyze` does.

use crate::report::{EdgeStats, FunctionKey, Report};
use crate::sums::EdgeSums;

/// One caller -> callee edge, its functions by number in
/// [`CompactReport`]'s key list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub struct NumberedEdge {
    #[doc(hidden)]
    pub caller: u32,
    #[doc(hidden)]
    pub callee: u32,
    /// Its row's numbers ([`EdgeStats::sums`]).
    #[doc(hidden)]
    pub sums: EdgeSums,
}

impl NumberedEdge {
    /// `(ncalls, primitive_calls, tottime_ns, cumtime_ns)`, as its row
    /// ([`EdgeStats::set_sums`]) has them.
    pub fn calls_and_times(&self) -> (u64, u64, u64, u64) {
        let s = &self.sums;
        (s.ncalls, s.primitive_calls, s.tottime_ns, s.cumtime_ns)
    }
}

/// A trace's [`Report`] whose edges are not rows yet (see the module doc):
/// `mtanalyze::analyze_many`'s workers hand these over.
#[derive(Clone, Debug)]
#[doc(hidden)]
pub struct CompactReport {
    /// Everything but the edges (`edges` is empty).
    #[doc(hidden)]
    pub report: Report,
    /// Every function an edge may name, by number.
    #[doc(hidden)]
    pub keys: Vec<FunctionKey>,
    /// Each function row's number in `keys` (a merge finds rows by it).
    #[doc(hidden)]
    pub row_keys: Vec<u32>,
    /// Edges with a call or time, in no particular order.
    #[doc(hidden)]
    pub edges: Vec<NumberedEdge>,
}

impl CompactReport {
    /// The report without its edges (whose `edges` is empty).
    #[doc(hidden)]
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The full report, its edges made rows and sorted by caller then
    /// callee: what `mtanalyze::analyze` returns for the trace.
    #[doc(hidden)]
    pub fn into_report(self) -> Report {
        let CompactReport {
            mut report,
            keys,
            edges,
            ..
        } = self;
        report.edges = edge_rows(&keys, edges.iter());
        report
    }
}

/// Rows of `edges`, whose functions are numbered in `keys`, sorted by
/// caller then callee (the keys' order).
pub(crate) fn edge_rows<'e>(
    keys: &[FunctionKey],
    edges: impl Iterator<Item = &'e NumberedEdge>,
) -> Vec<EdgeStats> {
    let mut rows: Vec<EdgeStats> = edges.map(|e| edge_row(keys, e)).collect();
    // Borrowed keys, in `FunctionKey`'s order (name, file, line): owned
    // ones would be four strings copied per comparison.
    fn key(e: &EdgeStats) -> ((&str, &str, u32), (&str, &str, u32)) {
        let caller = (e.caller.as_str(), e.caller_file.as_str(), e.caller_line);
        (caller, (e.callee.as_str(), &e.callee_file, e.callee_line))
    }
    rows.sort_unstable_by(|a, b| key(a).cmp(&key(b)));
    rows
}

/// Edge `e`'s row.
pub(crate) fn edge_row(keys: &[FunctionKey], e: &NumberedEdge) -> EdgeStats {
    let (c, d) = (&keys[e.caller as usize], &keys[e.callee as usize]);
    let mut row = EdgeStats {
        caller: c.function.clone(),
        caller_file: c.file.clone(),
        caller_line: c.line,
        callee: d.function.clone(),
        callee_file: d.file.clone(),
        callee_line: d.line,
        ncalls: 0,
        primitive_calls: 0,
        tottime_ns: 0,
        cumtime_ns: 0,
        callee_cumtime_ns: 0,
    };
    row.set_sums(e.sums);
    row
}
