//! The `mtanalyze` command.
//!
//! ```text
//! mtanalyze [OPTIONS] TRACE        report (the default command)
//! mtanalyze check [--format F] TRACE
//! mtanalyze convert IN OUT.bin
//! mtanalyze diff [OPTIONS] BASE NEW [--flamegraph OUT.svg]
//! mtanalyze flamegraph [OPTIONS] TRACE [-o OUT.svg]
//! mtanalyze export --format chrome|speedscope|callgrind [OPTIONS] TRACE [-o OUT]
//! ```
//!
//! Outputs without `-o` (or with `-o -`) go to stdout. A progress indicator
//! appears on stderr when a run takes longer than a second, and only when
//! stderr is a terminal.
//!
//! The first positional argument is a subcommand when it names one, else the
//! trace of the default report. A trace file literally named like a
//! subcommand is reached with `mtanalyze -- check` (or `./check`).
//!
//! Failures print one line, `mtanalyze: <message>`, on stderr and exit with
//! status 2 (the status clap uses for usage errors). A closed stdout
//! (`mtanalyze trace | head`) ends the run quietly with status 0.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use regex::Regex;

use mtanalyze::diff::DiffOptions;
use mtanalyze::paths::RecursionCollapse;
use mtanalyze::render;
use mtanalyze::timeline::Timelines;
use mtanalyze::view::{
    self, DiffSortKey, DiffViewOptions, Direction, EdgeSelection, SortKey, ViewOptions,
};
use mtanalyze::{AnalyzeOptions, Clock, PathMode};

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
                  export, flamegraph); \
                  a trace file with such a name is reached with `mtanalyze -- check` or `./check`."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Describe a trace file chunk by chunk, without replaying it.
    Check(CheckArgs),
    /// Write any trace (binary or JSON lines) as a binary trace.
    Convert(ConvertArgs),
    /// Compare two traces: what got faster or slower, per function and per call edge.
    Diff(DiffArgs),
    /// Draw a flame graph (SVG) of self time per call path.
    Flamegraph(FlamegraphArgs),
    /// Write a trace for other tools: Perfetto / chrome://tracing, speedscope, KCachegrind.
    Export(ExportArgs),
}

/// Output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Aligned text tables.
    #[default]
    Table,
    /// One JSON object (integer nanoseconds).
    Json,
    /// One `root;...;leaf SELF_NS` line per call path (flame graph input).
    Folded,
    /// A file Python's `pstats.Stats` loads (snakeviz, gprof2dot); needs `-o FILE`.
    Pstats,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// The trace: an mtrace binary trace, JSON lines or Chrome trace JSON (detected from the content).
    #[arg(required = true, value_name = "TRACE")]
    trace: Option<PathBuf>,
    /// Which time counts as running [default: the trace's preferred clock, else stack].
    #[arg(long, value_enum)]
    clock: Option<Clock>,
    /// Order of the function rows (numbers largest first, names A to Z) [default: tottime]; with --stacks, of the stack rows (by running time, paused time, events or name) [default: by id].
    #[arg(long, value_enum)]
    sort: Option<SortKey>,
    /// Show at most N functions (with --stacks: N stacks).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only functions whose name, or `file:line name`, matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    filter: Option<Regex>,
    /// For each function matching REGEX, the functions that called it (instead of the function table).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    callers: Option<Regex>,
    /// For each function matching REGEX, the functions it called (instead of the function table).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    callees: Option<Regex>,
    /// Show the per-stack table (instead of the function table).
    #[arg(long)]
    stacks: bool,
    /// With --stacks: one row per stack name, its numbers counted as one (`request-17` and `request-18` are `request-#`), with totals and per-stack means.
    #[arg(long, requires = "stacks")]
    group: bool,
    /// Only stacks that ran on this thread (repeatable).
    #[arg(long = "thread", value_name = "TID")]
    threads: Vec<u64>,
    /// Only this stack, by id (`thread:3`, `stack:7`) or name (repeatable).
    #[arg(long = "stack", value_name = "ID")]
    stack_ids: Vec<String>,
    /// Where --format pstats writes its file.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// With --format folded: each stack's paths apart, under the thread's or stack's name as the root frame.
    #[arg(long)]
    per_thread: bool,
    /// With --format folded: count recursive frames on the path of the outer frame of their function, so deep recursion stays one short path.
    #[arg(long, value_enum, value_name = "WHICH")]
    collapse_recursion: Option<RecursionCollapse>,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// The trace file.
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Table)]
    format: CheckFormat,
}

/// Output format of `check`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
enum CheckFormat {
    /// Aligned text.
    #[default]
    Table,
    /// One JSON object.
    Json,
}

#[derive(Args, Debug)]
struct ConvertArgs {
    /// The input trace (any kind, detected from the content).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// Where to write the binary trace.
    #[arg(value_name = "OUT.bin")]
    output: PathBuf,
}

#[derive(Args, Debug)]
struct DiffArgs {
    /// The trace before the change (binary or JSON lines, detected from the content).
    #[arg(value_name = "BASE")]
    base: PathBuf,
    /// The trace after the change.
    #[arg(value_name = "NEW")]
    new: PathBuf,
    /// Which time counts as running, for both traces [default: the traces' preferred clock, else stack].
    #[arg(long, value_enum)]
    clock: Option<Clock>,
    /// Order of the rows: by the size of a column's change, either way, largest first (names A to Z).
    #[arg(long, value_enum, default_value_t = DiffSortKey::Tottime)]
    sort: DiffSortKey,
    /// Show at most N functions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only functions whose name, or `file:line name`, matches REGEX (folded: paths through one).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    filter: Option<Regex>,
    /// Scale BASE's times so its total self time equals NEW's before subtracting (runs of different length).
    #[arg(long)]
    normalize: bool,
    /// Hide rows whose change (of the --sort time column; self time for ncalls and name) is below PCT percent of the larger of the two total self times.
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    min_change: Option<f64>,
    /// For each function matching REGEX, the change of each edge into it (instead of the function table).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    callers: Option<Regex>,
    /// For each function matching REGEX, the change of each edge out of it (instead of the function table).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    callees: Option<Regex>,
    /// Output format (folded: `path BASE_NS NEW_NS` per call path, for differential flame graphs).
    #[arg(long, value_enum, default_value_t = DiffFormat::Table)]
    format: DiffFormat,
    /// Also draw a differential flame graph (SVG) into FILE: widths are NEW's self time, red got slower, blue faster.
    #[arg(long, value_name = "FILE")]
    flamegraph: Option<PathBuf>,
    /// With --format folded or --flamegraph: count recursive frames on the path of the outer frame of their function.
    #[arg(long, value_enum, value_name = "WHICH")]
    collapse_recursion: Option<RecursionCollapse>,
}

#[derive(Args, Debug)]
struct FlamegraphArgs {
    /// The trace (binary, JSON lines or Chrome trace JSON, detected from the content).
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Where to write the SVG [default: stdout].
    #[arg(short, long, value_name = "OUT.svg")]
    output: Option<PathBuf>,
    /// Which time counts as running [default: the trace's preferred clock, else stack].
    #[arg(long, value_enum)]
    clock: Option<Clock>,
    /// One tower per thread or stack, under its name.
    #[arg(long)]
    per_thread: bool,
    /// Only paths through a function whose name, or `file:line name`, matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    filter: Option<Regex>,
    /// Only stacks that ran on this thread (repeatable).
    #[arg(long = "thread", value_name = "TID")]
    threads: Vec<u64>,
    /// Only this stack, by id (`thread:3`, `stack:7`) or name (repeatable).
    #[arg(long = "stack", value_name = "ID")]
    stack_ids: Vec<String>,
    /// Count recursive frames on the path of the outer frame of their function, so deep recursion is one tower, not a spire.
    #[arg(long, value_enum, value_name = "WHICH")]
    collapse_recursion: Option<RecursionCollapse>,
}

#[derive(Args, Debug)]
struct ExportArgs {
    /// The trace (binary, JSON lines or Chrome trace JSON, detected from the content).
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// What to write.
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Where to write it [default: stdout].
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Which time counts as running, which decides the paused stretches [default: the trace's preferred clock, else stack].
    #[arg(long, value_enum)]
    clock: Option<Clock>,
    /// Only stacks that ran on this thread (repeatable).
    #[arg(long = "thread", value_name = "TID")]
    threads: Vec<u64>,
    /// Only this stack, by id (`thread:3`, `stack:7`) or name (repeatable).
    #[arg(long = "stack", value_name = "ID")]
    stack_ids: Vec<String>,
}

/// Output format of `export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ExportFormat {
    /// Chrome Trace Event JSON (Perfetto UI, chrome://tracing, speedscope): one track per stack.
    Chrome,
    /// speedscope's own format: one evented profile per stack.
    Speedscope,
    /// The callgrind format (KCachegrind, QCachegrind): self and call-edge inclusive time in ns.
    Callgrind,
}

/// Output format of `diff`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
enum DiffFormat {
    /// Aligned text tables.
    #[default]
    Table,
    /// One JSON object (integer nanoseconds).
    Json,
    /// Two-column folded stacks: `root;child;leaf BASE_NS NEW_NS`.
    Folded,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err("expected a percentage, a number >= 0 (like 1 or 0.5)".into()),
    }
}

fn parse_regex(s: &str) -> Result<Regex, regex::Error> {
    Regex::new(s)
}

/// Why a run failed.
enum Failure {
    /// Writing the output failed (a closed pipe is not reported).
    Output(io::Error),
    /// Anything else: one line for the user.
    Message(String),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Output(e)
    }
}

fn message(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = run(cli, &mut out).and_then(|()| out.flush().map_err(Failure::Output));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            say(&format!("mtanalyze: cannot write the output: {e}"));
            ExitCode::from(2)
        }
        Err(Failure::Message(m)) => {
            say(&format!("mtanalyze: {m}"));
            ExitCode::from(2)
        }
    }
}

/// One line on stderr. A closed stderr is ignored (`eprintln!` would panic).
fn say(line: &str) {
    let _ = writeln!(io::stderr(), "{line}");
}

fn run(cli: Cli, out: &mut dyn Write) -> Result<(), Failure> {
    match cli.command {
        Some(Command::Check(args)) => check(&args, out),
        Some(Command::Convert(args)) => convert(&args),
        Some(Command::Diff(args)) => diff(&args, out),
        Some(Command::Flamegraph(args)) => flamegraph(&args, out),
        Some(Command::Export(args)) => export(&args, out),
        None => report(&cli.report, out),
    }
}

fn load(path: &Path) -> Result<mtanalyze::LoadedTrace, Failure> {
    mtanalyze::load(path).map_err(message)
}

/// Loads and analyzes one trace with a spinner for long runs.
fn analyze(path: &Path, options: &AnalyzeOptions) -> Result<mtanalyze::Report, Failure> {
    let progress = Progress::spinner(format!("analyzing {}", path.display()));
    let report = mtanalyze::analyze(&load(path)?, options).map_err(message);
    progress.finish();
    report
}

fn report(args: &ReportArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let path = args
        .trace
        .as_deref()
        .ok_or_else(|| Failure::Message("no trace given (see --help)".into()))?;
    let folded = args.format == Format::Folded;
    let row_options = [
        args.limit.is_some(),
        args.callers.is_some(),
        args.callees.is_some(),
        args.stacks,
    ];
    if folded && row_options.contains(&true) {
        return Err(Failure::Message(
            "--format folded writes every call path: --limit, --callers, --callees and \
             --stacks do not apply (--filter does)"
                .into(),
        ));
    }
    if args.per_thread && !folded {
        return Err(Failure::Message(
            "--per-thread applies to --format folded".into(),
        ));
    }
    if args.collapse_recursion.is_some() && !folded {
        return Err(Failure::Message(
            "--collapse-recursion applies to --format folded (and to flamegraph)".into(),
        ));
    }
    let options = AnalyzeOptions {
        clock: args.clock,
        threads: args.threads.clone(),
        stacks: args.stack_ids.clone(),
        paths: path_mode(folded, args.per_thread),
        collapse_recursion: args.collapse_recursion,
    };
    let report = analyze(path, &options)?;
    let view = ViewOptions {
        sort: args.sort.unwrap_or_default(),
        limit: args.limit,
        filter: args.filter.clone(),
    };
    if args.output.is_some() != (args.format == Format::Pstats) {
        return Err(Failure::Message(
            "--format pstats writes a file: give it with -o FILE (-o is for pstats only)".into(),
        ));
    }
    match args.format {
        Format::Pstats => write_pstats(args, &report)?,
        Format::Folded => render::folded::folded(out, &report, args.filter.as_ref())?,
        Format::Json => {
            let edges = EdgeSelection {
                callers_of: args.callers.clone(),
                callees_of: args.callees.clone(),
            };
            render::json::report(out, &view::filtered_report(&report, &view, &edges))?;
        }
        Format::Table => {
            render::table::header(out, &report)?;
            let mut sections = 0;
            let mut section = |out: &mut dyn Write| {
                sections += 1;
                writeln!(out)
            };
            if args.stacks && args.group {
                section(out)?;
                let mut groups = view::stack_groups(&report, args.sort);
                let total = groups.len();
                groups.truncate(args.limit.unwrap_or(total));
                render::table::stack_groups(out, &groups, total)?;
            } else if args.stacks {
                section(out)?;
                let rows = view::stack_rows(&report, args.sort, args.limit);
                render::table::stacks(out, &rows, report.stacks.len())?;
            }
            for (re, dir) in [
                (&args.callers, Direction::Callers),
                (&args.callees, Direction::Callees),
            ] {
                if let Some(re) = re {
                    section(out)?;
                    let groups = view::edge_groups(&report, &view, re, dir);
                    render::table::edges(out, &groups, dir)?;
                }
            }
            if sections == 0 {
                writeln!(out)?;
                let rows = view::function_rows(&report, &view);
                render::table::functions(out, &rows, report.functions.len())?;
            }
        }
    }
    // The summary follows the table: flush it first so the two do not interleave.
    out.flush()?;
    if let Some(summary) = render::warnings_summary(&report.warnings) {
        say(&summary);
    }
    Ok(())
}

fn diff(args: &DiffArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let folded = args.format == DiffFormat::Folded;
    let row_options = [
        args.limit.is_some(),
        args.min_change.is_some(),
        args.callers.is_some(),
        args.callees.is_some(),
    ];
    if folded && row_options.contains(&true) {
        return Err(Failure::Message(
            "--format folded writes every call path: --limit, --min-change, --callers and \
             --callees do not apply (--filter does)"
                .into(),
        ));
    }
    if let Some(svg) = &args.flamegraph {
        refuse_to_overwrite(svg, &[&args.base, &args.new])?;
    }
    let paths = folded || args.flamegraph.is_some();
    if args.collapse_recursion.is_some() && !paths {
        return Err(Failure::Message(
            "--collapse-recursion applies to --format folded and --flamegraph".into(),
        ));
    }
    let options = AnalyzeOptions {
        clock: args.clock,
        paths: path_mode(paths, false),
        collapse_recursion: args.collapse_recursion,
        ..AnalyzeOptions::default()
    };
    let analyze = |path: &Path| -> Result<mtanalyze::Report, Failure> {
        mtanalyze::analyze(&load(path)?, &options).map_err(message)
    };
    let progress = Progress::spinner(format!(
        "analyzing {} and {}",
        args.base.display(),
        args.new.display()
    ));
    let (base, new) = rayon::join(|| analyze(&args.base), || analyze(&args.new));
    progress.finish();
    let (base, new) = (base?, new?);
    if base.clock != new.clock {
        return Err(Failure::Message(format!(
            "the traces prefer different clocks ({}: {}, {}: {}); choose one with --clock",
            args.base.display(),
            base.clock,
            args.new.display(),
            new.clock
        )));
    }
    let diff = mtanalyze::diff::diff(
        &base,
        &new,
        DiffOptions {
            normalize: args.normalize,
        },
    );
    // The picture first: a failure leaves no half-written output behind.
    let svg = match &args.flamegraph {
        Some(path) => {
            let mut svg = Vec::new();
            render::flamegraph::differential(&mut svg, &diff, args.filter.as_ref())
                .map_err(|e| message(format!("{}: {e}", path.display())))?;
            Some((path, svg))
        }
        None => None,
    };
    let view = DiffViewOptions {
        sort: args.sort,
        limit: args.limit,
        filter: args.filter.clone(),
        min_change_pct: args.min_change,
    };
    match args.format {
        DiffFormat::Table => {
            let sections = render::diff::TableSections {
                callers: args.callers.clone(),
                callees: args.callees.clone(),
            };
            render::diff::table(out, &diff, &view, &sections)?;
        }
        DiffFormat::Json => {
            let edges = EdgeSelection {
                callers_of: args.callers.clone(),
                callees_of: args.callees.clone(),
            };
            render::diff::json(out, &view::filtered_diff(&diff, &view, &edges))?;
        }
        DiffFormat::Folded => render::diff::folded(out, &diff, args.filter.as_ref())?,
    }
    out.flush()?;
    if let Some((path, svg)) = svg {
        std::fs::write(path, svg).map_err(|e| message(format!("{}: {e}", path.display())))?;
    }
    for report in [&base, &new] {
        if let Some(summary) = render::warnings_summary(&report.warnings) {
            say(&format!("{}: {summary}", report.trace.source));
        }
    }
    Ok(())
}

/// `--format pstats -o FILE`: the marshal file Python's `pstats` loads.
fn write_pstats(args: &ReportArgs, report: &mtanalyze::Report) -> Result<(), Failure> {
    let Some(output) = args.output.as_deref() else {
        return Ok(());
    };
    if args.trace.as_deref().is_some_and(|t| same_file(t, output)) {
        return Err(Failure::Message(format!(
            "{}: input and output are the same file",
            output.display()
        )));
    }
    let mut bytes = Vec::new();
    render::pstats::pstats(&mut bytes, report)?;
    std::fs::write(output, bytes).map_err(|e| message(format!("{}: {e}", output.display())))
}

fn check(args: &CheckArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let trace = load(&args.trace)?;
    let check = mtanalyze::check(&trace).map_err(message)?;
    match args.format {
        CheckFormat::Json => render::json::check(out, &check)?,
        CheckFormat::Table => render::check::human(out, &check)?,
    }
    Ok(())
}

fn convert(args: &ConvertArgs) -> Result<(), Failure> {
    if same_file(&args.input, &args.output) {
        return Err(Failure::Message(format!(
            "{}: input and output are the same file",
            args.output.display()
        )));
    }
    let trace = load(&args.input)?;
    std::fs::write(&args.output, trace.bytes())
        .map_err(|e| message(format!("{}: {e}", args.output.display())))
}

/// Whether both paths name one existing file (writing would destroy the input).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Call paths for the folded and flame graph outputs.
fn path_mode(paths: bool, per_thread: bool) -> PathMode {
    match (paths, per_thread) {
        (false, _) => PathMode::Off,
        (true, false) => PathMode::Merged,
        (true, true) => PathMode::PerStack,
    }
}

fn flamegraph(args: &FlamegraphArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(args.output.as_deref(), &[&args.trace])?;
    let options = AnalyzeOptions {
        clock: args.clock,
        threads: args.threads.clone(),
        stacks: args.stack_ids.clone(),
        paths: path_mode(true, args.per_thread),
        collapse_recursion: args.collapse_recursion,
    };
    let report = analyze(&args.trace, &options)?;
    let mut svg = Vec::new();
    render::flamegraph::flamegraph(&mut svg, &report, args.filter.as_ref())
        .map_err(|e| message(format!("{}: {e}", args.trace.display())))?;
    target.write(out, |w| w.write_all(&svg))?;
    out.flush()?;
    if let Some(summary) = render::warnings_summary(&report.warnings) {
        say(&summary);
    }
    Ok(())
}

fn export(args: &ExportArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(args.output.as_deref(), &[&args.trace])?;
    let options = AnalyzeOptions {
        clock: args.clock,
        threads: args.threads.clone(),
        stacks: args.stack_ids.clone(),
        ..AnalyzeOptions::default()
    };
    if args.format == ExportFormat::Callgrind {
        let report = analyze(&args.trace, &options)?;
        target.write(out, |w| render::callgrind::callgrind(w, &report))?;
        out.flush()?;
        if let Some(summary) = render::warnings_summary(&report.warnings) {
            say(&summary);
        }
        return Ok(());
    }
    let progress = Progress::spinner(format!("reading {}", args.trace.display()));
    let trace = load(&args.trace)?;
    let timelines = Timelines::new(&trace, &options).map_err(message)?;
    progress.finish();
    let events = timelines.stacks().iter().map(|s| s.events).sum();
    let progress = Progress::bar(events, format!("exporting {}", args.trace.display()));
    let mut step = |n| progress.inc(n);
    target.write(out, |w| match args.format {
        ExportFormat::Speedscope => render::speedscope::speedscope(w, &timelines, &mut step),
        _ => render::chrome::chrome(w, &timelines, &mut step),
    })?;
    progress.finish();
    out.flush()?;
    Ok(())
}

/// Where a command's output goes: stdout, or a file it must not share
/// with an input.
enum Output<'a> {
    Stdout,
    File(&'a Path),
}

impl<'a> Output<'a> {
    fn new(path: Option<&'a Path>, inputs: &[&Path]) -> Result<Output<'a>, Failure> {
        match path {
            None => Ok(Output::Stdout),
            Some(p) if p == Path::new("-") => Ok(Output::Stdout),
            Some(p) => {
                refuse_to_overwrite(p, inputs)?;
                Ok(Output::File(p))
            }
        }
    }

    /// Runs `write` on stdout or on the file; a failed file is removed.
    fn write(
        &self,
        stdout: &mut dyn Write,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), Failure> {
        match self {
            Output::Stdout => Ok(write(stdout)?),
            Output::File(path) => {
                let failed = |e: io::Error| message(format!("{}: {e}", path.display()));
                let file = std::fs::File::create(path).map_err(failed)?;
                let mut w = BufWriter::new(file);
                let result = write(&mut w).and_then(|()| w.flush());
                if let Err(e) = result {
                    drop(w);
                    let _ = std::fs::remove_file(path);
                    return Err(failed(e));
                }
                Ok(())
            }
        }
    }
}

/// Refuses an output file that is one of the inputs (it would destroy it).
fn refuse_to_overwrite(output: &Path, inputs: &[&Path]) -> Result<(), Failure> {
    match inputs.iter().find(|i| same_file(i, output)) {
        Some(_) => Err(Failure::Message(format!(
            "{}: input and output are the same file",
            output.display()
        ))),
        None => Ok(()),
    }
}

/// A progress indicator on stderr for runs that last: it appears only if
/// the work is still going after a second, and only when stderr is a
/// terminal. Finishing it clears it.
struct Progress {
    bar: ProgressBar,
    state: Arc<Mutex<Shown>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shown {
    Waiting,
    Drawn,
    Finished,
}

impl Progress {
    /// An indicator without a known amount of work.
    fn spinner(what: String) -> Progress {
        let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        Progress::start(None, style, what)
    }

    /// A bar over `total` units of work.
    fn bar(total: u64, what: String) -> Progress {
        let style = ProgressStyle::with_template("{msg} [{bar:30}] {percent}% ({eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        Progress::start(Some(total), style, what)
    }

    fn start(total: Option<u64>, style: ProgressStyle, what: String) -> Progress {
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden())
            .with_style(style)
            .with_message(what);
        let state = Arc::new(Mutex::new(Shown::Waiting));
        if io::stderr().is_terminal() {
            let (bar, state) = (bar.clone(), Arc::clone(&state));
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(1));
                if let Ok(mut s) = state.lock() {
                    if *s == Shown::Waiting {
                        bar.set_draw_target(ProgressDrawTarget::stderr());
                        bar.enable_steady_tick(Duration::from_millis(120));
                        *s = Shown::Drawn;
                    }
                }
            });
        }
        Progress { bar, state }
    }

    fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    fn finish(&self) {
        if let Ok(mut s) = self.state.lock() {
            if *s == Shown::Drawn {
                self.bar.finish_and_clear();
            }
            *s = Shown::Finished;
        }
    }
}
