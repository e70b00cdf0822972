//! Where an analysis hands each stack's row as it is made, for reports
//! with more stacks than are worth keeping in memory at once.

use crate::report::StackStats;

/// Where `mtanalyze::analyze_with_sink` hands the stacks' rows.
pub trait StackSink {
    /// One stack's row, named as the report names it. A streamed analysis
    /// hands them as their stacks finish (in no particular order), the
    /// batch analysis in the report's order.
    fn row(&mut self, row: StackStats);
    /// Forget every row handed so far: the analysis starts over (a
    /// streamed analysis met something only the batch analysis handles).
    fn restart(&mut self);
}

/// A [`StackSink`] that drops every row.
#[doc(hidden)]
pub struct NoSink;

impl StackSink for NoSink {
    fn row(&mut self, _: StackStats) {}
    fn restart(&mut self) {}
}
