//! The command line's shape: clap types only (`plan.rs` turns them into
//! what a command runs from). Argument groups that several commands share
//! are declared once and flattened in.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use regex::Regex;

use mtanalyze::view::SortKey;
use mtanalyze::{report::Clock, RecursionCollapse, TimeBound};

/// Offline analyzer for mtrace traces: cProfile-style statistics that stay
/// correct when work moves between threads, fibers and async tasks.
#[derive(Parser, Debug)]
#[command(
    name = "mtanalyze",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    disable_help_subcommand = true,
    after_help = "The first argument is a subcommand when it names one (check, convert, diff, \
                  export, flamegraph, top); \
                  a trace file with such a name is reached with `mtanalyze -- check` or `./check`."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    #[command(flatten)]
    pub(crate) report: ReportArgs,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Describe a trace file chunk by chunk, without replaying it.
    Check(CheckArgs),
    /// Write any trace (binary or JSON lines) as a binary trace.
    Convert(ConvertArgs),
    /// Compare two traces: what got faster or slower, per function and per call edge.
    Diff(Box<DiffArgs>),
    /// Draw a flame graph (SVG) of self time per call path.
    Flamegraph(FlamegraphArgs),
    /// Watch a recording while it runs: the function table refreshed every second (q quits, s sorts).
    Top(TopArgs),
    /// Write a trace for other tools: Perfetto / chrome://tracing, speedscope, KCachegrind, pprof, SQL engines (Parquet).
    Export(ExportArgs),
}

/// `mtanalyze top`: the live view of a recording.
#[derive(Args, Debug)]
pub(crate) struct TopArgs {
    /// The trace: the path the recording was started with (a rotating series is followed to its newest file).
    pub(crate) trace: PathBuf,
    /// Show the stacks instead of the functions.
    #[arg(long)]
    pub(crate) stacks: bool,
    /// The first sort (s cycles through tottime, cumtime, ncalls, paused, name).
    #[arg(long, value_enum)]
    pub(crate) sort: Option<TopSortArg>,
    /// Show at most this many rows [default: as many as the terminal holds; --once: all].
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// Which time counts as running [default: the trace's preferred clock, else stack].
    #[arg(long, value_enum)]
    pub(crate) clock: Option<ClockArg>,
    /// Print one refresh and exit.
    #[arg(long)]
    pub(crate) once: bool,
    /// With --once: the output's format.
    #[arg(long, value_enum, default_value = "table")]
    pub(crate) format: TopFormat,
    /// With --once: fit the table in this many columns (0: no limit).
    #[arg(long, value_name = "COLUMNS")]
    pub(crate) width: Option<usize>,
}

/// The sort keys of `top` (those that order stacks too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum TopSortArg {
    /// Self time (with --stacks: running time), largest first.
    Tottime,
    /// Cumulative time, largest first.
    Cumtime,
    /// Number of calls (with --stacks: events), most first.
    Ncalls,
    /// Paused time, largest first.
    Paused,
    /// Name, A to Z.
    Name,
}

impl From<TopSortArg> for SortKey {
    fn from(s: TopSortArg) -> SortKey {
        match s {
            TopSortArg::Tottime => SortKey::Tottime,
            TopSortArg::Cumtime => SortKey::Cumtime,
            TopSortArg::Ncalls => SortKey::Ncalls,
            TopSortArg::Paused => SortKey::Paused,
            TopSortArg::Name => SortKey::Name,
        }
    }
}

/// `top --once`'s output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum TopFormat {
    /// The view's text.
    Table,
    /// `{"top": {...}, "report": REPORT}`.
    Json,
}

/// Which time counts as running (`schemas/semantics.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ClockArg {
    /// Stacks on different threads run in parallel; a switched-out stack is paused.
    Stack,
    /// One thread runs at a time (an interpreter lock).
    Gil,
    /// Everything always runs; nothing is subtracted.
    Wall,
}

impl From<ClockArg> for Clock {
    fn from(c: ClockArg) -> Clock {
        match c {
            ClockArg::Stack => Clock::Stack,
            ClockArg::Gil => Clock::Gil,
            ClockArg::Wall => Clock::Wall,
        }
    }
}

/// Which recursive frames fold into their outer frame on call paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum CollapseArg {
    /// A frame whose caller is the same function: `a;a;a;b` becomes `a;b`.
    Direct,
    /// A frame whose function is anywhere on the path above it, with every
    /// frame in between: `a;b;a;c` becomes `a;c` (`a;b` stays).
    All,
}

impl From<CollapseArg> for RecursionCollapse {
    fn from(c: CollapseArg) -> RecursionCollapse {
        match c {
            CollapseArg::Direct => RecursionCollapse::Direct,
            CollapseArg::All => RecursionCollapse::All,
        }
    }
}

/// The column rows are ordered by: pstats' sort keys, each under every
/// name `pstats.Stats.sort_stats` (and so `python -m cProfile -s`) takes,
/// and paused time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum SortArg {
    /// Self time (with --stacks: running time), largest first; also `time`.
    #[value(alias = "time")]
    Tottime,
    /// Cumulative time, largest first; also `cumulative`.
    #[value(alias = "cumulative")]
    Cumtime,
    /// Number of calls (with --stacks: events), most first; also `calls`.
    #[value(alias = "calls")]
    Ncalls,
    /// Paused time, largest first.
    Paused,
    /// Function (or stack) name, A to Z.
    Name,
    /// Primitive (not recursive) calls, most first.
    Pcalls,
    /// File name, A to Z (no file counts as pstats' `~`); also `filename`, `module`.
    #[value(aliases = ["filename", "module"])]
    File,
    /// Line number, ascending.
    Line,
    /// The text `file:line(name)`, A to Z (as pstats: line 10 before line 9).
    Stdname,
    /// Name, then file, then line.
    Nfl,
}

impl From<SortArg> for SortKey {
    fn from(s: SortArg) -> SortKey {
        match s {
            SortArg::Tottime => SortKey::Tottime,
            SortArg::Cumtime => SortKey::Cumtime,
            SortArg::Ncalls => SortKey::Ncalls,
            SortArg::Paused => SortKey::Paused,
            SortArg::Name => SortKey::Name,
            SortArg::Pcalls => SortKey::Pcalls,
            SortArg::File => SortKey::File,
            SortArg::Line => SortKey::Line,
            SortArg::Stdname => SortKey::Stdname,
            SortArg::Nfl => SortKey::Nfl,
        }
    }
}

/// `--clock` and the time window: which time counts, for every command
/// that analyzes; and `--warnings`, how much the analysis tells of the
/// problems it found (here because every such command flattens these).
#[derive(Args, Debug)]
pub(crate) struct ClockArgs {
    /// Which time counts as running [default: the trace's preferred clock (for diff: both traces'), else stack].
    #[arg(long, value_enum)]
    pub(crate) clock: Option<ClockArg>,
    /// Count only from this time on: a duration from the start of the recording (2s, 5.5s, 150ms, 20us, 500ns) or a mark (mark:NAME, its first instance). Frames that straddle it count their time after it.
    #[arg(long, value_name = "TIME", allow_hyphen_values = false)]
    pub(crate) from: Option<TimeBound>,
    /// Count only before this time (same forms as --from).
    #[arg(long, value_name = "TIME")]
    pub(crate) to: Option<TimeBound>,
    /// How warnings are told on stderr (and in JSON): one summary line, or that line followed by every place each warning happened (which stacks ended with frames open, and those frames).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = WarningsArg::Summary)]
    pub(crate) warnings: WarningsArg,
}

/// `--warnings`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum WarningsArg {
    /// One line: each kind of warning, how many, where first.
    #[default]
    Summary,
    /// The summary, then one line per place each warning happened.
    All,
}

/// Which stacks to replay: shared by every command that analyzes one trace.
#[derive(Args, Debug)]
pub(crate) struct SelectArgs {
    /// Only stacks that ran on this thread (repeatable).
    #[arg(long = "thread", value_name = "TID")]
    pub(crate) threads: Vec<u64>,
    /// Only this stack, by id (`thread:3`, `stack:7`) or name (repeatable).
    #[arg(long = "stack", value_name = "ID")]
    pub(crate) stack_ids: Vec<String>,
}

/// `--collapse-recursion`, for the outputs made of call paths.
#[derive(Args, Debug)]
pub(crate) struct CollapseArgs {
    /// With call paths (--format folded, flame graphs): count recursive frames on the path of the outer frame of their function, so deep recursion stays one short path.
    #[arg(long = "collapse-recursion", value_enum, value_name = "WHICH")]
    pub(crate) recursion: Option<CollapseArg>,
}

/// Output format of the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned text tables.
    #[default]
    Table,
    /// One JSON object (integer nanoseconds).
    Json,
    /// One `root;...;leaf SELF_NS` line per call path (flame graph input).
    Folded,
    /// A file Python's `pstats.Stats` loads (snakeviz, gprof2dot); needs `-o FILE`.
    Pstats,
    /// A GitHub-flavoured Markdown table of the functions, to paste into a pull request.
    Markdown,
    /// One self-contained HTML page (works offline): sortable tables, callers and callees, a flame graph, a timeline of the stacks.
    Html,
}

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// The trace: an mtrace binary trace, JSON lines or Chrome trace JSON (detected from the content). Several traces (or directories of them) give one report whose totals are the sums of theirs.
    #[arg(required = true, value_name = "TRACE")]
    pub(crate) traces: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) clock: ClockArgs,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    /// Order of the function rows (numbers largest first, names A to Z, lines ascending, ties by name, file, line) [default: tottime]; cProfile's names work too (calls, cumulative, filename, module, time). With --stacks, of the stack rows, by tottime or cumtime (running time), paused, ncalls (events) or name only [default: by id].
    #[arg(long, value_enum)]
    pub(crate) sort: Option<SortArg>,
    /// Show at most N functions (with --stacks: N stacks).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// Only functions whose name, or `file:line name`, matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub(crate) filter: Option<Regex>,
    /// For each function matching REGEX, the functions that called it (instead of the function table).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub(crate) callers: Option<Regex>,
    /// For each function matching REGEX, the functions it called (instead of the function table).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub(crate) callees: Option<Regex>,
    /// Show the per-stack table (instead of the function table).
    #[arg(long)]
    pub(crate) stacks: bool,
    /// With several traces: the function table (and JSON) per trace as well, the trace a column.
    #[arg(long)]
    pub(crate) by_trace: bool,

    /// Only the traces given: not the traces of their child processes
    /// (`NAME.pid<PID>.EXT` beside `NAME.EXT`, which the Python recorder
    /// writes for every child process), which are otherwise in the report.
    #[arg(long)]
    pub(crate) no_children: bool,
    /// In the function table, split `paused` into `scheduled` (woken, waiting for a thread) and `waiting` (not yet woken), from the wake events the future adapter records.
    #[arg(long)]
    pub(crate) scheduled: bool,
    /// With --stacks: one row per stack name, its numbers counted as one (`request-17` and `request-18` are `request-#`) but a line after a file name (`src/server.rs:42 task-#`: a spawn site), with totals and per-stack means.
    #[arg(long, requires = "stacks")]
    pub(crate) group: bool,
    /// Where to write the output [default: stdout; --format pstats, a binary
    /// file, needs -o: a file, or - for stdout, as to a pipe].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub(crate) format: Format,
    /// With --format folded: each stack's paths apart, under the thread's or stack's name as the root frame.
    #[arg(long)]
    pub(crate) per_thread: bool,
    /// Fit tables in N columns, shortening paths and names and hiding spare columns (0: never) [default: the terminal's width when stdout is one (COLUMNS if set), else full names].
    #[arg(long, value_name = "N")]
    pub(crate) width: Option<usize>,
    #[command(flatten)]
    pub(crate) collapse: CollapseArgs,
    /// Before the report, print on stderr how each trace is analyzed and why: the engine the planner picks (stream or batch) and what the choice looked at.
    #[arg(long)]
    pub(crate) debug_plan: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// The trace file.
    #[arg(value_name = "TRACE")]
    pub(crate) trace: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Table)]
    pub(crate) format: CheckFormat,
    /// Where to write it [default: stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

/// Output format of `check`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum CheckFormat {
    /// Aligned text.
    #[default]
    Table,
    /// One JSON object.
    Json,
}

#[derive(Args, Debug)]
pub(crate) struct ConvertArgs {
    /// The input trace (any kind, detected from the content).
    #[arg(value_name = "IN")]
    pub(crate) input: PathBuf,
    /// Where to write the binary trace.
    #[arg(value_name = "OUT.bin")]
    pub(crate) output: PathBuf,
    /// Write compact events (format version 4: about a quarter of the bytes), which recorders do not write yet; without it, 16-byte events (version 3, or the input's own version when it is a binary trace of 16-byte events).
    #[arg(long)]
    pub(crate) compact: bool,
}

#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// The trace before the change (binary or JSON lines, or a report saved with `--format json`; detected from the content), or a directory of runs.
    #[arg(value_name = "BASE", required_unless_present = "base_runs")]
    pub(crate) base: Option<PathBuf>,
    /// The trace after the change, or a directory of runs.
    #[arg(value_name = "NEW", required_unless_present = "new_runs")]
    pub(crate) new: Option<PathBuf>,
    /// Several runs of BASE (`--base before/*.bin`): each function's median over them, with the range of its self time.
    #[arg(long = "base", value_name = "TRACE", num_args = 1.., conflicts_with = "base")]
    pub(crate) base_runs: Vec<PathBuf>,
    /// Several runs of NEW (`--new after/*.bin`), likewise.
    #[arg(long = "new", value_name = "TRACE", num_args = 1.., conflicts_with = "new")]
    pub(crate) new_runs: Vec<PathBuf>,
    /// A function's self time changed only when the change is significant at this level (Mann-Whitney on its calls' self times, Welch's t-test on the sums for reports without them, or on the runs' self times with two runs or more a side); 0 turns the test off.
    #[arg(long, value_name = "LEVEL", default_value_t = 0.999, value_parser = parse_confidence)]
    pub(crate) confidence: f64,
    /// ... and at least PCT percent of its base self time (frames of one run share the machine's noise).
    #[arg(long, value_name = "PCT", default_value_t = 10.0, value_parser = parse_percent)]
    pub(crate) min_effect: f64,
    /// ... and at least PCT percent of the larger total self time (a change no one would fail a build for is noise).
    #[arg(long, value_name = "PCT", default_value_t = 0.5, value_parser = parse_percent)]
    pub(crate) min_share: f64,
    #[command(flatten)]
    pub(crate) clock: ClockArgs,
    /// Order of the rows: by the size of the column's change, either way, largest first (the text keys name, file, line, stdname and nfl as for a report).
    #[arg(long, value_enum, default_value_t = SortArg::Tottime)]
    pub(crate) sort: SortArg,
    /// Show at most N functions.
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// Only functions whose name, or `file:line name`, matches REGEX (folded: paths through one).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub(crate) filter: Option<Regex>,
    /// Scale BASE's times so its total self time equals NEW's before subtracting (runs of different length).
    #[arg(long)]
    pub(crate) normalize: bool,
    /// Hide rows whose change (of the --sort time column; self time for ncalls and name) is below PCT percent of the larger of the two total self times.
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub(crate) min_change: Option<f64>,
    /// For each function matching REGEX, the change of each edge into it (instead of the function table).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub(crate) callers: Option<Regex>,
    /// For each function matching REGEX, the change of each edge out of it (instead of the function table).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub(crate) callees: Option<Regex>,
    /// Output format (folded: `path BASE_NS NEW_NS` per call path, for differential flame graphs).
    #[arg(long, value_enum, default_value_t = DiffFormat::Table)]
    pub(crate) format: DiffFormat,
    /// Where to write the output [default: stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// Also draw a differential flame graph (SVG) into FILE: widths are NEW's self time, red got slower, blue faster.
    #[arg(long, value_name = "FILE")]
    pub(crate) flamegraph: Option<PathBuf>,
    /// Fit tables in N columns, shortening paths and names and hiding spare columns (0: never) [default: the terminal's width when stdout is one (COLUMNS if set), else full names].
    #[arg(long, value_name = "N")]
    pub(crate) width: Option<usize>,
    /// Exit with status 1, naming the rows, when RULE holds for a function or the total (repeatable; a time rule only for a significant change, see --confidence): `[REGEX:] tottime|cumtime|paused|ncalls|total >|>=|<|<= CHANGE`, CHANGE like +10%, +5ms, +0. E.g. 'tottime > +10%', 'parse.*: cumtime > +5ms', 'ncalls > +0', 'total > +2%'.
    #[arg(long = "fail-if", value_name = "RULE")]
    pub(crate) fail_if: Vec<String>,
    /// With --fail-if: time changes smaller than this (either way) break no rule, so tiny functions do not fail a build (e.g. 1ms, 250us).
    #[arg(long, value_name = "TIME", requires = "fail_if")]
    pub(crate) fail_min_change: Option<String>,
    #[command(flatten)]
    pub(crate) collapse: CollapseArgs,
}

/// Output format of `diff`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum DiffFormat {
    /// Aligned text tables.
    #[default]
    Table,
    /// One JSON object (integer nanoseconds).
    Json,
    /// Two-column folded stacks: `root;child;leaf BASE_NS NEW_NS`.
    Folded,
    /// A GitHub-flavoured Markdown table, biggest changes first, to paste into a pull request.
    Markdown,
    /// One self-contained HTML page (works offline): the diff table, a differential flame graph, the --fail-if verdict.
    Html,
}

#[derive(Args, Debug)]
pub(crate) struct FlamegraphArgs {
    /// The trace (binary, JSON lines or Chrome trace JSON, detected from the content).
    #[arg(value_name = "TRACE")]
    pub(crate) trace: PathBuf,
    /// Where to write the SVG [default: stdout].
    #[arg(short, long, value_name = "OUT.svg")]
    pub(crate) output: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) clock: ClockArgs,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    /// One tower per thread or stack, under its name.
    #[arg(long)]
    pub(crate) per_thread: bool,
    /// Only paths through a function whose name, or `file:line name`, matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub(crate) filter: Option<Regex>,
    #[command(flatten)]
    pub(crate) collapse: CollapseArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    /// The trace (binary, JSON lines or Chrome trace JSON, detected from the content). --format parquet takes several (or directories of them), each trace's rows under its own identity.
    #[arg(required = true, value_name = "TRACE")]
    pub(crate) traces: Vec<PathBuf>,
    /// What to write.
    #[arg(long, value_enum)]
    pub(crate) format: ExportFormat,
    /// Where to write it [default: stdout]; for --format parquet, the directory of the tables (created if missing).
    #[arg(short, long, value_name = "OUT")]
    pub(crate) output: Option<PathBuf>,
    /// With --format parquet: also frames.parquet, one row per frame (enter, exit, active, self and paused time, depth).
    #[arg(long)]
    pub(crate) frames: bool,
    #[command(flatten)]
    pub(crate) clock: ClockArgs,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
}

/// Output format of `export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// Chrome Trace Event JSON (Perfetto UI, chrome://tracing, speedscope): one track per stack.
    Chrome,
    /// speedscope's own format: one evented profile per stack.
    Speedscope,
    /// The callgrind format (KCachegrind, QCachegrind): self and call-edge inclusive time in ns.
    Callgrind,
    /// A gzipped pprof profile.proto (go tool pprof, Pyroscope, Parca, Grafana): a sample per call path, values self time (ns) and calls.
    Pprof,
    /// Parquet tables in the directory -o DIR (DuckDB, DataFusion, Spark, Trino, ClickHouse): functions, edges, stacks, warnings, traces (and frames with --frames). Needs a build with `--features parquet`.
    Parquet,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err("expected a percentage, a number >= 0 (like 1 or 0.5)".into()),
    }
}

fn parse_confidence(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if (0.0..1.0).contains(&c) => Ok(c),
        _ => Err("expected a level from 0 up to 1, like 0.999 (0: no test)".into()),
    }
}

fn parse_regex(s: &str) -> Result<Regex, regex::Error> {
    Regex::new(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sort_key_is_named_as_the_command_line_takes_it() {
        for arg in SortArg::value_variants() {
            let shown = arg.to_possible_value().map(|v| v.get_name().to_owned());
            assert_eq!(shown.as_deref(), Some(SortKey::from(*arg).name()));
        }
    }
}
