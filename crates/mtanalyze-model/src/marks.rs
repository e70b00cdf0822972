//! Marks: the named instants a program recorded (`mtrace::mark("warm-up
//! done")`, `mtrace.mark(...)` in Python, a `mark` line of JSON lines),
//! with their times on the report's scale. Computed by
//! `mtanalyze-engine`'s `analysis::marks`; listed by the report, `check` and
//! `mtanalyze::marks`.

use serde::{Deserialize, Serialize};

/// One mark of a trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Its name, as recorded (may be empty; several marks may share one).
    pub name: String,
    /// When, in ns from the trace's time zero: the scale of every time of
    /// the report (`first_event_ns`, `end_ns`, ...). A mark recorded
    /// before time zero reads 0; an absurd tick saturates.
    pub time_ns: u64,
    /// The trace thread id of the thread that recorded it (0: unknown, or
    /// the thread had recorded no event yet).
    pub thread: u64,
    /// In a report of several traces (`mtanalyze A B`), which one recorded
    /// it: its position among the traces summed, in the order the summary's
    /// `source` lists them (0: the first; a trace that could not be read
    /// is left out and takes no position). `None` (absent in JSON) in a
    /// report of one trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<u64>,
}
