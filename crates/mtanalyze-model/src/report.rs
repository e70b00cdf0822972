//! The report: everything the replay engine computed, in one value that every
//! renderer (table, JSON, and later folded, chrome, diff) consumes.
//!
//! All times are integer nanoseconds. Lists are sorted deterministically
//! (functions by name, file, line; edges by caller then callee; stacks by id)
//! so two runs over the same trace give byte-identical output.
//! `schemas/report.schema.json` documents the JSON shape of this type.

use std::collections::BTreeMap;

use mtrace_format::StackKind;
use serde::{Deserialize, Serialize};

use crate::histogram::SelfTimeHistogram;
pub use crate::inline::{StackName, ThreadList};
use crate::marks::Mark;
use crate::sums::{EdgeSums, FunctionSums};

/// A whole analysis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// What the trace holds.
    pub trace: TraceSummary,
    /// The clock the times were computed with.
    pub clock: Clock,
    /// Per-function statistics.
    pub functions: Vec<FunctionStats>,
    /// How many functions the analysis found, when `functions` lists fewer
    /// (a report written with `--filter` or `--limit`); `None` when it
    /// lists them all. A diff of saved reports refuses a cut one, whose
    /// missing functions would read as gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub functions_total: Option<u64>,
    /// Per caller -> callee edge statistics.
    pub edges: Vec<EdgeStats>,
    /// How many edges the analysis found, when `edges` lists fewer (those
    /// of the listed functions, or `--callers`/`--callees`); `None` when
    /// it lists them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges_total: Option<u64>,
    /// Per logical stack statistics (empty if only counted: see
    /// `stack_rows`).
    pub stacks: Vec<StackStats>,
    /// Problems found in the input and how they were repaired.
    pub warnings: Vec<Warning>,
    /// The marks the program recorded (named instants), in time order;
    /// whatever stacks were selected.
    #[serde(default)]
    pub marks: Vec<Mark>,
    /// Call paths with their self time, when asked for (`AnalyzeOptions::paths`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<CallPath>,
    /// Whether `stacks` holds the rows or the stacks were only counted
    /// (`AnalyzeOptions::stack_rows`). Not written: a report is written
    /// with its rows.
    #[serde(skip)]
    pub stack_rows: StackRows,
    /// How many stacks the report shows: the rows of the stacks the
    /// options select that lived in the time window, whether kept in
    /// `stacks`, handed or counted. Not written (`stacks` is).
    #[serde(skip)]
    pub stacks_shown: u64,
}

/// Whether a report keeps a row per stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StackRows {
    /// Every selected stack's row, in [`Report::stacks`].
    #[default]
    Kept,
    /// Handed to the caller one by one as their stacks finish, none kept
    /// (`mtanalyze::analyze_with_sink` sets it; every other analysis takes
    /// it as `Counted`): [`Report::stacks`] is empty.
    Handed,
    /// Counted in [`TraceSummary::stacks`] only; [`Report::stacks`] is
    /// empty. For outputs that show no stack (the function table, folded
    /// call paths, pstats, callgrind, pprof, diffs): a task-per-request
    /// trace's report then holds nothing per task (a row is 120 bytes, half
    /// the file of a short task), and a streamed analysis holds only the
    /// stacks alive at a time.
    Counted,
}

/// Which stretches of time count as running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// Stacks on different threads run in parallel; a switched-out stack is paused.
    Stack,
    /// One thread runs at a time (an interpreter lock).
    Gil,
    /// Everything always runs; nothing is subtracted.
    Wall,
}

impl Clock {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Clock::Stack => "stack",
            Clock::Gil => "gil",
            Clock::Wall => "wall",
        }
    }
}

impl std::str::FromStr for Clock {
    type Err = String;

    /// A clock by its name (`stack`, `gil`, `wall`), any case.
    fn from_str(s: &str) -> Result<Clock, String> {
        [Clock::Stack, Clock::Gil, Clock::Wall]
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown clock {s:?} (expected stack, gil or wall)"))
    }
}

impl std::fmt::Display for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A stack: a thread's own, or a logical one. Written `thread:<tid>` or
/// `stack:<id>` (its `Display`, `FromStr` and JSON form); ordered own
/// stacks first, then logical ones, each by number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StackKey {
    /// The own stack of the thread with this id.
    Own(u64),
    /// The logical stack with this id.
    Logical(u64),
}

impl std::fmt::Display for StackKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StackKey::Own(t) => write!(f, "thread:{t}"),
            StackKey::Logical(s) => write!(f, "stack:{s}"),
        }
    }
}

impl std::str::FromStr for StackKey {
    type Err = String;

    /// `thread:<tid>` or `stack:<id>`.
    fn from_str(s: &str) -> Result<StackKey, String> {
        let bad = || format!("not a stack id: {s:?} (expected thread:N or stack:N)");
        let (kind, n) = s.split_once(':').ok_or_else(bad)?;
        let n: u64 = n.parse().map_err(|_| bad())?;
        match kind {
            "thread" => Ok(StackKey::Own(n)),
            "stack" => Ok(StackKey::Logical(n)),
            _ => Err(bad()),
        }
    }
}

impl PartialEq<str> for StackKey {
    fn eq(&self, other: &str) -> bool {
        other.parse::<StackKey>().is_ok_and(|k| k == *self)
    }
}

impl PartialEq<&str> for StackKey {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl Serialize for StackKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StackKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<StackKey, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Calls and self time of one distinct root-to-leaf path of functions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallPath {
    /// The stack the path ran on (`thread:3`, a stack name), when paths are kept per stack; else "".
    pub stack: String,
    /// Indices into [`Report::functions`], outermost first.
    pub frames: Vec<u32>,
    /// Frames that ended on this path.
    pub ncalls: u64,
    /// Their self time.
    pub self_ns: u64,
}

/// Identifies a function the way users do: by name and definition site.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct FunctionKey {
    /// Function or scope name.
    pub function: String,
    /// Source file ("" if unknown).
    pub file: String,
    /// Source line (0 if unknown).
    pub line: u32,
}

impl FunctionKey {
    /// A key from its parts.
    pub fn new(function: &str, file: &str, line: u32) -> FunctionKey {
        FunctionKey {
            function: function.to_owned(),
            file: file.to_owned(),
            line,
        }
    }
}

/// Statistics of one function over all stacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionStats {
    /// Function or scope name.
    pub function: String,
    /// Source file ("" if unknown).
    pub file: String,
    /// Source line (0 if unknown).
    pub line: u32,
    /// Module path ("" if unknown).
    pub module: String,
    /// Frames.
    pub ncalls: u64,
    /// Frames with no frame of the same function open below them on their stack.
    pub primitive_calls: u64,
    /// Sum of self time (active time minus the active time of direct children).
    pub tottime_ns: u64,
    /// Sum over frames of the square of each frame's self time (ns²): with
    /// `ncalls`, the per-call variance a diff's significance test reads
    /// ("Significance of a diff" in `semantics.md`). 0 in reports written
    /// before it was kept.
    #[serde(default)]
    pub tottime_sq: u128,
    /// Its frames by self time, in log-scale buckets: the per-call
    /// samples whose medians and ranks a diff compares. Empty in reports
    /// written before it was kept (a diff then tests the sums), and
    /// without frames (not written then).
    #[serde(default, skip_serializing_if = "SelfTimeHistogram::is_empty")]
    pub tottime_hist: SelfTimeHistogram,
    /// Sum of active time over non-recursive frames.
    pub cumtime_ns: u64,
    /// Sum of paused time (the frame's stack was not running) over non-recursive frames.
    pub paused_ns: u64,
    /// Frames still open at the end of the trace, closed there (their time
    /// runs to the end: a killed recording, or code still running when it stopped).
    #[serde(default)]
    pub open_at_end: u64,
    /// Frames the trace does not see whole: closed where their thread's
    /// events were lost (a `lost` mark, or the point after which a paused
    /// stack's fate is unknown), opened from a snapshot after lost chunks,
    /// or left open on a logical stack that then ended (its `end` event).
    #[serde(default)]
    pub cut_short: u64,
    /// The part of `paused_ns` during which the frame's task had been woken
    /// and waited for a thread (see `StackStats::scheduled_ns`).
    #[serde(default)]
    pub scheduled_ns: u64,
    /// `paused_ns - scheduled_ns`.
    #[serde(default)]
    pub waiting_ns: u64,
}

impl FunctionStats {
    /// The row of function `function` (`file`, `line`) in module
    /// `module`, every number zero.
    #[doc(hidden)]
    pub fn new(function: &str, file: &str, line: u32, module: &str) -> FunctionStats {
        FunctionStats {
            function: function.to_owned(),
            file: file.to_owned(),
            line,
            module: module.to_owned(),
            ncalls: 0,
            primitive_calls: 0,
            tottime_ns: 0,
            tottime_sq: 0,
            tottime_hist: SelfTimeHistogram::default(),
            cumtime_ns: 0,
            paused_ns: 0,
            open_at_end: 0,
            cut_short: 0,
            scheduled_ns: 0,
            waiting_ns: 0,
        }
    }

    /// Its sums: the numbers that add up over traces merged and over
    /// time windows that split a trace.
    pub fn sums(&self) -> FunctionSums {
        FunctionSums {
            ncalls: self.ncalls,
            primitive_calls: self.primitive_calls,
            tottime_ns: self.tottime_ns,
            cumtime_ns: self.cumtime_ns,
            paused_ns: self.paused_ns,
            open_at_end: self.open_at_end,
            cut_short: self.cut_short,
            scheduled_ns: self.scheduled_ns,
            waiting_ns: self.waiting_ns,
        }
    }

    /// Sets the fields [`FunctionStats::sums`] reads.
    pub fn set_sums(&mut self, v: FunctionSums) {
        FunctionSums {
            ncalls: self.ncalls,
            primitive_calls: self.primitive_calls,
            tottime_ns: self.tottime_ns,
            cumtime_ns: self.cumtime_ns,
            paused_ns: self.paused_ns,
            open_at_end: self.open_at_end,
            cut_short: self.cut_short,
            scheduled_ns: self.scheduled_ns,
            waiting_ns: self.waiting_ns,
        } = v;
    }

    /// The function's identity.
    pub fn key(&self) -> FunctionKey {
        FunctionKey::new(&self.function, &self.file, self.line)
    }

    /// The file as pstats keys the function: `~`, the file of pstats'
    /// built-ins, when unknown (as `--format pstats` writes it).
    pub fn pstats_file(&self) -> &str {
        self.site().pstats_file()
    }

    /// pstats' standard name of the function (`pstats.func_std_string`,
    /// what `--sort stdname` compares): `file:line(name)` with
    /// [`FunctionStats::pstats_file`]; a built-in (file `~`, line 0) is its
    /// name alone, written `{x}` when the name is `<x>`. The name is the
    /// report's (for a Python trace the qualified name, as the table shows it).
    pub fn std_name(&self) -> String {
        self.site()
            .std_name_parts(&mut itoa::Buffer::new())
            .concat()
    }

    /// The function's identity, borrowed.
    #[doc(hidden)]
    pub fn site(&self) -> Site<'_> {
        Site {
            function: &self.function,
            file: &self.file,
            line: self.line,
        }
    }
}

/// A function's identity, borrowed from a report's or a diff's row: what
/// the text sort keys (`file`, `line`, `stdname`, `nfl`) compare. Ordered
/// as [`FunctionKey`]: name, file, line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[doc(hidden)]
pub struct Site<'a> {
    pub function: &'a str,
    pub file: &'a str,
    pub line: u32,
}

impl<'a> Site<'a> {
    /// The owned identity.
    #[doc(hidden)]
    pub fn key(self) -> FunctionKey {
        FunctionKey::new(self.function, self.file, self.line)
    }

    /// [`FunctionStats::pstats_file`].
    #[doc(hidden)]
    pub fn pstats_file(self) -> &'a str {
        match self.file {
            "" => BUILTIN_FILE,
            file => file,
        }
    }

    /// [`FunctionStats::std_name`] in pieces, the line written with
    /// `digits`: two names compare piece by piece with no allocation.
    #[doc(hidden)]
    pub fn std_name_parts(self, digits: &'a mut itoa::Buffer) -> [&'a str; 6] {
        let (file, name) = (self.pstats_file(), self.function);
        if file == BUILTIN_FILE && self.line == 0 {
            // Python's `name[1:-1]` of a name that starts with `<` and ends
            // with `>` (so is two bytes long at least).
            return match name.starts_with('<') && name.ends_with('>') {
                true => ["{", &name[1..name.len() - 1], "}", "", "", ""],
                false => [name, "", "", "", "", ""],
            };
        }
        [file, ":", digits.format(self.line), "(", name, ")"]
    }
}

#[doc(hidden)]
pub const BUILTIN_FILE: &str = "~";

/// Statistics of the frames of `callee` whose parent frame is `caller`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeStats {
    /// Caller name.
    pub caller: String,
    /// Caller's source file.
    pub caller_file: String,
    /// Caller's source line.
    pub caller_line: u32,
    /// Callee name.
    pub callee: String,
    /// Callee's source file.
    pub callee_file: String,
    /// Callee's source line.
    pub callee_line: u32,
    /// Frames.
    pub ncalls: u64,
    /// Frames whose edge is not recursive (no frame of the callee with the same caller open below).
    pub primitive_calls: u64,
    /// Sum of the frames' self time.
    pub tottime_ns: u64,
    /// Sum of active time over non-recursive edge frames.
    pub cumtime_ns: u64,
    /// Sum of active time over the frames that are not recursive calls of
    /// the callee (no callee frame open below them): the callee's
    /// `cumtime_ns` split by caller, its root frames making up the rest.
    /// What a call costs in a callgrind file.
    #[serde(default)]
    pub callee_cumtime_ns: u64,
}

impl EdgeStats {
    /// Its sums: the numbers that add up over traces merged.
    pub fn sums(&self) -> EdgeSums {
        EdgeSums {
            ncalls: self.ncalls,
            primitive_calls: self.primitive_calls,
            tottime_ns: self.tottime_ns,
            cumtime_ns: self.cumtime_ns,
            callee_cumtime_ns: self.callee_cumtime_ns,
        }
    }

    /// Sets the fields [`EdgeStats::sums`] reads.
    pub fn set_sums(&mut self, v: EdgeSums) {
        EdgeSums {
            ncalls: self.ncalls,
            primitive_calls: self.primitive_calls,
            tottime_ns: self.tottime_ns,
            cumtime_ns: self.cumtime_ns,
            callee_cumtime_ns: self.callee_cumtime_ns,
        } = v;
    }

    /// The caller's identity.
    pub fn caller_key(&self) -> FunctionKey {
        FunctionKey::new(&self.caller, &self.caller_file, self.caller_line)
    }

    /// The callee's identity.
    pub fn callee_key(&self) -> FunctionKey {
        FunctionKey::new(&self.callee, &self.callee_file, self.callee_line)
    }
}

/// Statistics of one stack (a thread's own stack or a logical stack).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackStats {
    /// The stack (`thread:<tid>` for a thread's own stack, `stack:<id>`
    /// for a logical one, in JSON and text).
    pub id: StackKey,
    /// The thread's or logical stack's name ("" if none was recorded);
    /// reads as a `&str`, kept in the row when short.
    pub name: StackName,
    /// What a logical stack stands for (an asyncio task, a greenlet, a
    /// tokio task...), as its name record says; left out of JSON when
    /// unspecified (a thread's own stack, or a trace that does not say).
    #[serde(
        default,
        skip_serializing_if = "is_unspecified",
        with = "stack_kind_by_name"
    )]
    pub kind: StackKind,
    /// Threads it ran on, ascending; reads as a `&[u64]`, kept in the row
    /// for up to two threads.
    pub threads: ThreadList,
    /// Time it ran under the report's clock.
    pub running_ns: u64,
    /// Time it did not run between its first stretch and its last switch
    /// away (or the end of the trace, if frames were still open there).
    pub paused_ns: u64,
    /// The part of `paused_ns` from a wake of the stack's task (recorded by
    /// the future adapter's waker) to the next time it ran: ready, waiting
    /// for a thread. 0 without wake events.
    #[serde(default)]
    pub scheduled_ns: u64,
    /// `paused_ns - scheduled_ns`: switched out and not yet woken (waiting
    /// for its I/O or timer), or in a trace without wakes, all of it.
    #[serde(default)]
    pub waiting_ns: u64,
    /// Times a thread switched onto it (a thread's first event counts for its own stack).
    pub switches_in: u64,
    /// Deepest number of frames open at once.
    pub max_depth: u32,
    /// Enter and exit events replayed on it.
    pub events: u64,
    /// Its life ended at an `end` event (a logical stack whose owner
    /// dropped it; format version 3): frames still open there were closed
    /// there, as cut short. A fact of the whole trace, whatever the time
    /// window. Left out of JSON when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ended: bool,
}

// The flag sits in the padding after `max_depth`: half a million rows.
const _: () = assert!(std::mem::size_of::<StackStats>() == 120);

/// For `skip_serializing_if`.
fn is_false(b: &bool) -> bool {
    !*b
}

/// For `skip_serializing_if`.
fn is_unspecified(kind: &StackKind) -> bool {
    *kind == StackKind::Unspecified
}

/// A stack kind in JSON: its name ([`StackKind::name`]); a name this
/// build does not know reads as unspecified.
mod stack_kind_by_name {
    use mtrace_format::StackKind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(kind: &StackKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(kind.name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<StackKind, D::Error> {
        let name = String::deserialize(d)?;
        Ok(StackKind::from_name(&name).unwrap_or_default())
    }
}

/// What the trace holds, independent of the clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TraceSummary {
    /// The file the trace was read from.
    pub source: String,
    /// `binary`, `jsonl` or `chrome`.
    pub input_format: String,
    /// Binary format version (JSONL input is converted to the current version).
    pub format_version: u32,
    /// Where ticks came from: `tsc` or `ns`.
    pub clock_source: String,
    /// Clock ticks per second from the calibration.
    pub ticks_per_second: u64,
    /// Recorded process id (0 if unknown).
    pub pid: u32,
    /// The host the trace was recorded on ("" if the recorder did not say).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// Recorded command line.
    pub cmdline: Vec<String>,
    /// Date of time zero, ns since the Unix epoch (0 if unknown).
    pub start_unix_ns: u64,
    /// Time of the first event, ns from time zero.
    pub first_event_ns: u64,
    /// End of the trace (the recorder's end marker, or the last event), ns from time zero.
    pub end_ns: u64,
    /// `end_ns - first_event_ns`.
    pub duration_ns: u64,
    /// The recorder finished the file (it was not killed mid-run).
    pub finished: bool,
    /// The recorder ran as a ring and overwrote old chunks.
    pub ring: bool,
    /// Which recorder wrote the trace, when that changes what names mean:
    /// `python` (names are `co_qualname`s) or `unspecified`.
    #[serde(default = "unspecified")]
    pub producer: String,
    /// Threads, ascending by id.
    pub threads: Vec<ThreadSummary>,
    /// Number of stacks seen.
    pub stacks: u64,
    /// Events decoded.
    pub events: u64,
    /// `wake` events among them: when a task was made ready to run. 0: the
    /// trace did not measure wakes (no waker recorded them), so the split
    /// of paused time into scheduled and waiting was not measured either
    /// (every `scheduled_ns` is 0 and `waiting_ns` is all of `paused_ns`
    /// by default, not by measurement: the tables say "not measured").
    #[serde(default)]
    pub wakes: u64,
    /// Chunks decoded.
    pub chunks: u64,
    /// Chunks missing from the middle or start of a thread's sequence (overwritten or lost).
    pub chunks_lost: u64,
    /// Chunks skipped because they were damaged.
    pub chunks_damaged: u64,
    /// Events the recorder dropped because the file was full.
    pub dropped_events: u64,
    /// How many traces this report sums (`mtanalyze A B C`): then `source`
    /// lists them, the counts are sums, and `duration_ns` is the time at
    /// least one of them was recording (a process tree: the tree's wall
    /// time; runs apart in time: the sum; the sum when a trace's date is
    /// unknown). Absent for one trace.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub traces: u64,
    /// The time window the report's statistics count (`--from`/`--to`);
    /// absent for the whole trace. The fields above describe the whole trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<TimeWindow>,
}

/// The part of a trace a report counts: `[from_ns, to_ns)`, ns from time
/// zero ("Time windows" in `schemas/semantics.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeWindow {
    /// Where counting starts.
    pub from_ns: u64,
    /// Where it stops (the end of the trace if the window is open there).
    pub to_ns: u64,
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

/// One thread of the trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSummary {
    /// The trace's thread id.
    pub tid: u64,
    /// Its name ("" if none).
    pub name: String,
    /// The operating system's id (0 if unknown).
    pub os_tid: u64,
    /// Events recorded on it.
    pub events: u64,
    /// When its events stop being complete: its `lost` mark (the tick of
    /// the first event the recorder could not store), ns from time zero.
    /// `None`: it lost nothing it recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_from_ns: Option<u64>,
    /// Time from `lost_from_ns` to the end of the trace, which the report
    /// does not count for this thread (0 if nothing was lost).
    #[serde(default)]
    pub lost_ns: u64,
}

/// A kind of problem found in the input, how often, and where first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Machine-readable kind, e.g. `exit_mismatch`.
    pub kind: String,
    /// How many times it happened.
    pub count: u64,
    /// Where it happened first, e.g. `thread 3 at 1200 ns`.
    pub first: String,
    /// What the analyzer did about it.
    pub repair: String,
    /// How `count` splits by the kind of logical stack it happened on
    /// (`frames_open_at_stack_end`: `asyncio_task` -> frames), by the
    /// kinds' names ([`mtrace_format::StackKind::name`]). Empty, and left
    /// out of JSON, for other warnings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_stack_kind: BTreeMap<String, u64>,
    /// Every place it happened, when the analysis was asked for them
    /// (`AnalyzeOptions::warning_details`, `--warnings all`); empty, and
    /// left out of JSON, otherwise. Sorted by place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<WarningDetail>,
}

/// One place a [`Warning`] happened. A field is `None` (left out of JSON)
/// when the place does not have it: a damaged chunk has a byte offset and
/// no thread, a dropped-events count belongs to the whole trace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarningDetail {
    /// How many the warning counts here: problems, or for a warning that
    /// counts lost items ([`Warning::items`]), those items.
    pub count: u64,
    /// The thread it happened on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<u64>,
    /// The logical stack it happened on, by id (`stack:7`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// That stack's name, as the traced program gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_name: Option<String>,
    /// That stack's kind ([`mtrace_format::StackKind::name`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_kind: Option<String>,
    /// When, ns from time zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns: Option<u64>,
    /// Where in the file, as a byte offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte: Option<u64>,
    /// `frames_open_at_stack_end`: the frames left open, outermost first,
    /// by function label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_frames: Vec<String>,
}

/// `TraceSummary::producer` of a report written before the field existed.
fn unspecified() -> String {
    PRODUCER_UNSPECIFIED.to_owned()
}

/// `TraceSummary::producer`: the header did not say.
#[doc(hidden)]
pub const PRODUCER_UNSPECIFIED: &str = "unspecified";
/// `TraceSummary::producer`: the Python binding wrote the trace.
#[doc(hidden)]
pub const PRODUCER_PYTHON: &str = "python";
