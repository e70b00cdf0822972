//! The one sort key of every view: which column orders the rows. A report
//! orders its rows by the column's value; a diff by the size of the
//! column's change, whichever its sign, so the biggest movers either way
//! come first. The text columns (name, file, line, pstats' standard name)
//! order both alike, by the function's identity.

use std::cmp::Ordering;

use mtanalyze_model::diff::{EdgeDiff, FunctionDiff};
use mtanalyze_model::report::{FunctionStats, Site};

/// The column rows are ordered by: pstats' sort keys
/// (`pstats.Stats.sort_stats`, whose names the command line also takes), and
/// paused time. A report compares the values ([`SortKey::order`]), a diff
/// the absolute changes ([`SortKey::order_change`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    /// Self time, largest first (pstats `tottime`, `time`).
    #[default]
    Tottime,
    /// Cumulative time, largest first (pstats `cumtime`, `cumulative`).
    Cumtime,
    /// Number of calls, most first (pstats `ncalls`, `calls`).
    Ncalls,
    /// Paused time, largest first.
    Paused,
    /// Function name, A to Z.
    Name,
    /// Primitive calls (those with no frame of the same function open
    /// below them), most first (pstats `pcalls`).
    Pcalls,
    /// File name, A to Z, a function with no file counting as pstats'
    /// built-ins' file `~` ([`FunctionStats::pstats_file`]) (pstats
    /// `filename`, `module`).
    File,
    /// Line number, ascending (pstats `line`).
    Line,
    /// pstats' standard name `file:line(name)` ([`FunctionStats::std_name`])
    /// compared as a string, A to Z: line 10 of a file comes before its
    /// line 9, as in pstats (pstats `stdname`).
    Stdname,
    /// Name, then file (as for [`SortKey::File`]), then line, ascending
    /// (pstats `nfl`).
    Nfl,
}

impl SortKey {
    /// The key's pstats name (`--sort` takes it, and its aliases).
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Tottime => "tottime",
            SortKey::Cumtime => "cumtime",
            SortKey::Ncalls => "ncalls",
            SortKey::Paused => "paused",
            SortKey::Name => "name",
            SortKey::Pcalls => "pcalls",
            SortKey::File => "file",
            SortKey::Line => "line",
            SortKey::Stdname => "stdname",
            SortKey::Nfl => "nfl",
        }
    }

    /// The order of two function rows of a report by this key alone
    /// (`Equal`: tied; the views break ties by name, file and line
    /// ascending).
    pub fn order(self, a: &FunctionStats, b: &FunctionStats) -> Ordering {
        match self {
            SortKey::Tottime => b.tottime_ns.cmp(&a.tottime_ns),
            SortKey::Cumtime => b.cumtime_ns.cmp(&a.cumtime_ns),
            SortKey::Ncalls => b.ncalls.cmp(&a.ncalls),
            SortKey::Paused => b.paused_ns.cmp(&a.paused_ns),
            SortKey::Pcalls => b.primitive_calls.cmp(&a.primitive_calls),
            SortKey::Name | SortKey::File | SortKey::Line | SortKey::Stdname | SortKey::Nfl => {
                self.text_order(a.site(), b.site())
            }
        }
    }

    /// The order of two function rows of a diff by this key alone: the
    /// larger change of the column first, or for the text columns as
    /// [`SortKey::order`] orders a report.
    pub fn order_change(self, a: &FunctionDiff, b: &FunctionDiff) -> Ordering {
        let (da, db) = (&a.delta, &b.delta);
        match self {
            SortKey::Tottime => larger_change(da.tottime_ns, db.tottime_ns),
            SortKey::Cumtime => larger_change(da.cumtime_ns, db.cumtime_ns),
            SortKey::Ncalls => larger_change(da.ncalls, db.ncalls),
            SortKey::Paused => larger_change(da.paused_ns, db.paused_ns),
            SortKey::Pcalls => larger_change(da.primitive_calls, db.primitive_calls),
            SortKey::Name | SortKey::File | SortKey::Line | SortKey::Stdname | SortKey::Nfl => {
                self.text_order(diff_site(a), diff_site(b))
            }
        }
    }

    /// The order of two edges of a diff by this key alone. Edges have no
    /// paused time (self time stands in for it) and are not ordered by
    /// text (`Equal`: the caller and callee break the tie).
    pub fn order_edge_change(self, a: &EdgeDiff, b: &EdgeDiff) -> Ordering {
        let (da, db) = (&a.delta, &b.delta);
        match self {
            SortKey::Cumtime => larger_change(da.cumtime_ns, db.cumtime_ns),
            SortKey::Ncalls => larger_change(da.ncalls, db.ncalls),
            SortKey::Pcalls => larger_change(da.primitive_calls, db.primitive_calls),
            SortKey::Tottime | SortKey::Paused => larger_change(da.tottime_ns, db.tottime_ns),
            SortKey::Name | SortKey::File | SortKey::Line | SortKey::Stdname | SortKey::Nfl => {
                Ordering::Equal
            }
        }
    }

    /// The change `--min-change` weighs for a diff's function row: the
    /// sorted time column (self time for the other keys).
    pub fn function_change(self, f: &FunctionDiff) -> u64 {
        match self {
            SortKey::Cumtime => f.delta.cumtime_ns.unsigned_abs(),
            SortKey::Paused => f.delta.paused_ns.unsigned_abs(),
            _ => f.delta.tottime_ns.unsigned_abs(),
        }
    }

    /// The change `--min-change` weighs for a diff's edge row (edges have
    /// no paused time: self time stands in for it).
    pub fn edge_change(self, e: &EdgeDiff) -> u64 {
        match self {
            SortKey::Cumtime => e.delta.cumtime_ns.unsigned_abs(),
            _ => e.delta.tottime_ns.unsigned_abs(),
        }
    }

    /// Whether the key orders stack rows ([`super::stack_rows`],
    /// [`super::stack_groups`], [`super::StackView`]): tottime, cumtime,
    /// ncalls, paused and name do; a stack has no primitive calls, file or
    /// line, and those keys leave the stacks in the report's order.
    pub fn orders_stacks(self) -> bool {
        match self {
            SortKey::Tottime
            | SortKey::Cumtime
            | SortKey::Ncalls
            | SortKey::Paused
            | SortKey::Name => true,
            SortKey::Pcalls | SortKey::File | SortKey::Line | SortKey::Stdname | SortKey::Nfl => {
                false
            }
        }
    }

    /// The text columns' order of two functions (`Equal` for the others).
    fn text_order(self, a: Site<'_>, b: Site<'_>) -> Ordering {
        match self {
            SortKey::Name => a.function.cmp(b.function),
            SortKey::File => a.pstats_file().cmp(b.pstats_file()),
            SortKey::Line => a.line.cmp(&b.line),
            SortKey::Stdname => {
                let (mut da, mut db) = (itoa::Buffer::new(), itoa::Buffer::new());
                let (sa, sb) = (a.std_name_parts(&mut da), b.std_name_parts(&mut db));
                // Byte order of UTF-8 is code point order, Python's str order.
                let sa = sa.into_iter().flat_map(str::bytes);
                sa.cmp(sb.into_iter().flat_map(str::bytes))
            }
            SortKey::Nfl => {
                (a.function, a.pstats_file(), a.line).cmp(&(b.function, b.pstats_file(), b.line))
            }
            SortKey::Tottime
            | SortKey::Cumtime
            | SortKey::Ncalls
            | SortKey::Paused
            | SortKey::Pcalls => Ordering::Equal,
        }
    }
}

/// Orders by the size of a change, larger first, whichever its sign.
fn larger_change(a: i64, b: i64) -> Ordering {
    b.unsigned_abs().cmp(&a.unsigned_abs())
}

/// A diff row's identity, as shown.
fn diff_site(f: &FunctionDiff) -> Site<'_> {
    Site {
        function: &f.function,
        file: &f.file,
        line: f.line,
    }
}
