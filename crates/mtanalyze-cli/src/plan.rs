//! The command line resolved: clap's values (`args.rs`) turned, once, into
//! one typed plan per command ([`Plan`]), which the command then runs
//! from. Every decision the arguments make is taken here (the analysis
//! options, the output's format and destination, the view, the gates) and
//! every refusal of a combination of options is said here, in the order
//! the checks are listed; the commands never read the arguments again.
//!
//! Resolving is pure: it opens no file and looks at no path. So a test
//! builds a plan from argv strings without any trace, a usage error is
//! said before any work starts, and a file is judged when it is opened
//! (a check made earlier could be out of date by then). What depends on
//! the files is decided when the command runs, by the functions of this
//! module given what was found ([`ReportPlan::options_for`],
//! [`ReportPlan::gather`]): the traces a directory holds, the traces of
//! child processes, whether the input is a rotating series; and the
//! command refuses an output path that is one of the inputs, or a Parquet
//! directory that is a file. The one fact of the environment a plan
//! needs, whether `top` can draw its live view, is an argument of
//! [`resolve`].

use std::path::PathBuf;

use regex::Regex;

use mtanalyze::view::{DiffViewOptions, EdgeSelection, SortKey, ViewOptions};
use mtanalyze::{
    diff::{DiffOptions, GateChange, GateRule},
    report::{Clock, StackRows},
    significance::SignificanceOptions,
    AnalyzeOptions, PathMode, RecursionCollapse,
};

use crate::args::{
    CheckArgs, CheckFormat, Cli, ClockArgs, CollapseArg, Command, ConvertArgs, DiffArgs,
    DiffFormat, ExportArgs, ExportFormat, FlamegraphArgs, Format, ReportArgs, SelectArgs, TopArgs,
    TopFormat, WarningsArg,
};

/// What one command line runs: one plan per command.
#[derive(Debug)]
pub(crate) enum Plan {
    Report(Box<ReportPlan>),
    Check(CheckPlan),
    Convert(ConvertPlan),
    Diff(Box<DiffPlan>),
    Flamegraph(FlamegraphPlan),
    Export(ExportPlan),
    Top(TopPlan),
}

/// Resolves the parsed command line into its plan, or says in one line
/// why the options do not go together. `interactive`: stdin and stdout
/// are both terminals (`top`'s live view needs them).
pub(crate) fn resolve(cli: Cli, interactive: bool) -> Result<Plan, String> {
    Ok(match cli.command {
        Some(Command::Check(args)) => Plan::Check(check(args)),
        Some(Command::Convert(args)) => Plan::Convert(convert(args)),
        Some(Command::Diff(args)) => Plan::Diff(Box::new(diff(*args)?)),
        Some(Command::Flamegraph(args)) => Plan::Flamegraph(flamegraph(args)),
        Some(Command::Export(args)) => Plan::Export(export(args)?),
        Some(Command::Top(args)) => Plan::Top(top(args, interactive)?),
        None => Plan::Report(Box::new(report(cli.report)?)),
    })
}

/// The library's options from the command line's: the one place they are
/// built. `select`: none for `diff`, which compares whole traces. The
/// stack rows are kept; see [`rows_if`].
fn analyze_options(
    clock: &ClockArgs,
    select: Option<&SelectArgs>,
    paths: PathMode,
    collapse: Option<CollapseArg>,
) -> AnalyzeOptions {
    AnalyzeOptions {
        clock: clock.clock.map(Clock::from),
        threads: select.map(|s| s.threads.clone()).unwrap_or_default(),
        stacks: select.map(|s| s.stack_ids.clone()).unwrap_or_default(),
        paths,
        collapse_recursion: collapse.map(RecursionCollapse::from),
        from: clock.from.clone(),
        to: clock.to.clone(),
        stack_rows: StackRows::Kept,
        warning_details: clock.warnings == WarningsArg::All,
    }
}

/// `options` for an output that shows no stack row unless `shown`: the
/// stacks are then only counted (see [`StackRows::Counted`]), unless some
/// are selected (the table's header says how many of them).
fn rows_if(shown: bool, options: AnalyzeOptions) -> AnalyzeOptions {
    let stack_rows = match shown || options.selects_stacks() {
        true => StackRows::Kept,
        false => StackRows::Counted,
    };
    AnalyzeOptions {
        stack_rows,
        ..options
    }
}

/// `--collapse-recursion`'s value as the HTML pages name it.
fn collapse_label(c: Option<CollapseArg>) -> Option<&'static str> {
    c.map(|c| match c {
        CollapseArg::Direct => "direct",
        CollapseArg::All => "all",
    })
}

/// The default command: the report of one trace or the sum of several.
#[derive(Debug)]
pub(crate) struct ReportPlan {
    /// The traces as given: files or directories of them (read when run).
    pub(crate) traces: Vec<PathBuf>,
    /// Whether the traces of the given traces' child processes join them
    /// (not `--no-children`).
    pub(crate) children: bool,
    /// The output's format.
    pub(crate) format: Format,
    /// `-o`: none (or `-`) for the writer `run` is given.
    pub(crate) output: Option<PathBuf>,
    /// `--width`, which the output's kind completes when run.
    pub(crate) width: Option<usize>,
    /// The analysis of one trace that is not a rotating series (see
    /// [`ReportPlan::options_for`] for the others).
    pub(crate) options: AnalyzeOptions,
    /// Which function rows, in what order (`--sort`, default tottime;
    /// `--limit`, `--filter`).
    pub(crate) view: ViewOptions,
    /// `--sort` as given, for the stack rows (none: by id).
    pub(crate) stack_sort: Option<SortKey>,
    /// `--callers` and `--callees`.
    pub(crate) edges: EdgeSelection,
    /// `--stacks`: the stack rows instead of the function table.
    pub(crate) stacks: bool,
    /// `--group`: the stack rows grouped by name.
    pub(crate) group: bool,
    /// `--scheduled`: the function table's paused time split.
    pub(crate) scheduled: bool,
    /// `--by-trace`: each trace's rows as well as the sum's.
    pub(crate) by_trace: bool,
    /// The HTML page's label of `--collapse-recursion`.
    pub(crate) collapse: Option<&'static str>,
    /// `--debug-plan`: each trace's analysis plan on stderr first.
    pub(crate) debug_plan: bool,
}

/// How a report gathers the stack rows of the traces it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gather {
    /// In the report, as the analysis returns it.
    Report,
    /// The rows (or groups) one trace's `--stacks` table shows, as the
    /// analysis hands them over.
    StackView,
    /// One trace's JSON: every row, sorted by id as they are handed over
    /// (on disk past a budget).
    SortedRows,
}

impl ReportPlan {
    /// The analysis options, given what was found when run: `traces` files
    /// to read, `rotated` if they hold a rotating series. A page of several
    /// traces draws merged call paths (one trace's page, each stack's); a
    /// series' count of stacks needs their rows.
    pub(crate) fn options_for(&self, traces: usize, rotated: bool) -> AnalyzeOptions {
        let options = self.options.clone();
        match self.format {
            Format::Html if traces > 1 => AnalyzeOptions {
                paths: PathMode::Merged,
                ..options
            },
            Format::Html => options,
            _ if rotated => AnalyzeOptions {
                stack_rows: StackRows::Kept,
                ..options
            },
            _ => options,
        }
    }

    /// How the stack rows of `traces` files are gathered. Only one trace's
    /// rows stream (a sum needs them all); with `--thread` or `--stack`
    /// the header says how many rows were selected, so they are kept.
    pub(crate) fn gather(&self, traces: usize) -> Gather {
        let every_stack_of_one = traces == 1 && !self.by_trace && !self.options.selects_stacks();
        match self.format {
            Format::Table if every_stack_of_one && self.stacks => Gather::StackView,
            Format::Json if every_stack_of_one => Gather::SortedRows,
            _ => Gather::Report,
        }
    }
}

fn report(args: ReportArgs) -> Result<ReportPlan, String> {
    let html = args.format == Format::Html;
    let folded = args.format == Format::Folded;
    if html {
        let ignored = [
            (args.limit.is_some(), "--limit"),
            (args.filter.is_some(), "--filter"),
            (args.callers.is_some(), "--callers"),
            (args.callees.is_some(), "--callees"),
            (args.stacks, "--stacks"),
            (args.group, "--group"),
            (args.per_thread, "--per-thread"),
            (args.sort.is_some(), "--sort"),
        ];
        if let Some((_, flag)) = ignored.iter().find(|(given, _)| *given) {
            return Err(format!(
                "{flag} does not apply to --format html: the page holds every row, and sorts, \
                 filters and groups them itself"
            ));
        }
    } else {
        let row_options = [
            args.limit.is_some(),
            args.callers.is_some(),
            args.callees.is_some(),
            args.stacks,
        ];
        if folded && row_options.contains(&true) {
            return Err(
                "--format folded writes every call path: --limit, --callers, --callees \
                        and --stacks do not apply (--filter does)"
                    .into(),
            );
        }
        if let Some(sort) = args
            .sort
            .map(SortKey::from)
            .filter(|s| args.stacks && !s.orders_stacks())
        {
            return Err(format!(
                "--sort {} does not apply to --stacks: stack rows sort by tottime, cumtime, \
                 ncalls, paused or name",
                sort.name()
            ));
        }
        if args.per_thread && !folded {
            return Err("--per-thread applies to --format folded".into());
        }
        if args.collapse.recursion.is_some() && !folded {
            return Err(
                "--collapse-recursion applies to --format folded (and to flamegraph)".into(),
            );
        }
        // Binary to stdout only when asked for by name (`-o -`), never by default.
        if args.format == Format::Pstats && args.output.is_none() {
            return Err(
                "--format pstats writes a binary file: give it with -o FILE (or -o - \
                        for stdout)"
                    .into(),
            );
        }
        if args.by_trace && !matches!(args.format, Format::Table | Format::Json) {
            return Err("--by-trace applies to the table and --format json".into());
        }
    }
    let options = if html {
        // Call paths per stack, so the page can draw each group's own;
        // every stack row.
        analyze_options(
            &args.clock,
            Some(&args.select),
            PathMode::PerStack,
            args.collapse.recursion,
        )
    } else {
        let paths = match (folded, args.per_thread) {
            (false, _) => PathMode::Off,
            (true, false) => PathMode::Merged,
            (true, true) => PathMode::PerStack,
        };
        // Stack rows are shown by JSON and the table's --stacks.
        rows_if(
            args.format == Format::Json || args.stacks,
            analyze_options(
                &args.clock,
                Some(&args.select),
                paths,
                args.collapse.recursion,
            ),
        )
    };
    let stack_sort = args.sort.map(SortKey::from);
    Ok(ReportPlan {
        traces: args.traces,
        children: !args.no_children,
        format: args.format,
        output: args.output,
        width: args.width,
        options,
        view: ViewOptions {
            sort: stack_sort.unwrap_or_default(),
            limit: args.limit,
            filter: args.filter,
        },
        stack_sort,
        edges: EdgeSelection {
            callers_of: args.callers,
            callees_of: args.callees,
        },
        stacks: args.stacks,
        group: args.group,
        scheduled: args.scheduled,
        by_trace: args.by_trace,
        collapse: collapse_label(args.collapse.recursion),
        debug_plan: args.debug_plan,
    })
}

/// `check TRACE`.
#[derive(Debug)]
pub(crate) struct CheckPlan {
    pub(crate) trace: PathBuf,
    pub(crate) format: CheckFormat,
    pub(crate) output: Option<PathBuf>,
}

fn check(args: CheckArgs) -> CheckPlan {
    CheckPlan {
        trace: args.trace,
        format: args.format,
        output: args.output,
    }
}

/// `convert IN OUT.bin`.
#[derive(Debug)]
pub(crate) struct ConvertPlan {
    pub(crate) input: PathBuf,
    pub(crate) output: PathBuf,
    /// Compact events (version 4), else 16-byte events.
    pub(crate) compact: bool,
}

fn convert(args: ConvertArgs) -> ConvertPlan {
    ConvertPlan {
        input: args.input,
        output: args.output,
        compact: args.compact,
    }
}

/// `diff BASE NEW`.
#[derive(Debug)]
pub(crate) struct DiffPlan {
    /// BASE: one trace or directory, or the runs of `--base`.
    pub(crate) base: Vec<PathBuf>,
    /// NEW, likewise.
    pub(crate) new: Vec<PathBuf>,
    /// The analysis of each trace (no stack rows: a diff shows none).
    pub(crate) options: AnalyzeOptions,
    /// `--normalize` and the significance test.
    pub(crate) diff: DiffOptions,
    /// Which rows, in what order.
    pub(crate) view: DiffViewOptions,
    /// `--callers` and `--callees`.
    pub(crate) edges: EdgeSelection,
    pub(crate) format: DiffFormat,
    /// `-o`: none (or `-`) for the writer `run` is given.
    pub(crate) output: Option<PathBuf>,
    /// `--flamegraph`: where the differential flame graph goes.
    pub(crate) flamegraph: Option<PathBuf>,
    /// `--width`, which the output's kind completes when run.
    pub(crate) width: Option<usize>,
    /// The `--fail-if` rules as given (the HTML page shows them).
    pub(crate) rule_texts: Vec<String>,
    /// The `--fail-if` rules.
    pub(crate) rules: Vec<GateRule>,
    /// `--fail-min-change` in ns (0: none).
    pub(crate) min_change_ns: u64,
    /// The HTML page's label of `--collapse-recursion`.
    pub(crate) collapse: Option<&'static str>,
}

/// The `--fail-if` rules and `--fail-min-change`, read after clap so a bad
/// one is one line.
fn gate_rules(args: &DiffArgs) -> Result<(Vec<GateRule>, u64), String> {
    let rules = args
        .fail_if
        .iter()
        .map(|r| r.parse().map_err(|e: mtanalyze::GateError| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let min = match &args.fail_min_change {
        None => 0,
        Some(s) => match format!("tottime > {s}").parse::<GateRule>() {
            Ok(GateRule {
                change: GateChange::Nanoseconds(ns),
                ..
            }) if ns >= 0 => ns as u64,
            _ => {
                return Err(format!(
                    "--fail-min-change {s:?}: not a time like 1ms, 250us or 2s"
                ))
            }
        },
    };
    Ok((rules, min))
}

fn diff(args: DiffArgs) -> Result<DiffPlan, String> {
    let (rules, min_change_ns) = gate_rules(&args)?;
    let folded = args.format == DiffFormat::Folded;
    let html = args.format == DiffFormat::Html;
    let row_options = [
        args.limit.is_some(),
        args.min_change.is_some(),
        args.callers.is_some(),
        args.callees.is_some(),
    ];
    if folded && row_options.contains(&true) {
        return Err(
            "--format folded writes every call path: --limit, --min-change, --callers \
                    and --callees do not apply (--filter does)"
                .into(),
        );
    }
    if args.output.is_some() && args.output == args.flamegraph {
        return Err("-o and --flamegraph name the same file".into());
    }
    if html && row_options.contains(&true) {
        return Err(
            "--format html holds every row: --limit, --min-change, --callers and \
                    --callees do not apply (the page filters and sorts itself)"
                .into(),
        );
    }
    let paths = folded || html || args.flamegraph.is_some();
    if args.collapse.recursion.is_some() && !paths {
        return Err(
            "--collapse-recursion applies to --format folded and html, and --flamegraph".into(),
        );
    }
    let paths = match paths {
        true => PathMode::Merged,
        false => PathMode::Off,
    };
    let side = |one: Option<PathBuf>, runs: Vec<PathBuf>| match one {
        Some(p) => vec![p],
        None => runs,
    };
    Ok(DiffPlan {
        base: side(args.base, args.base_runs),
        new: side(args.new, args.new_runs),
        options: rows_if(
            false,
            analyze_options(&args.clock, None, paths, args.collapse.recursion),
        ),
        diff: DiffOptions {
            normalize: args.normalize,
            significance: SignificanceOptions {
                confidence: args.confidence,
                min_effect_pct: args.min_effect,
                min_share_pct: args.min_share,
            },
        },
        view: DiffViewOptions {
            sort: args.sort.into(),
            limit: args.limit,
            filter: args.filter,
            min_change_pct: args.min_change,
        },
        edges: EdgeSelection {
            callers_of: args.callers,
            callees_of: args.callees,
        },
        format: args.format,
        output: args.output,
        flamegraph: args.flamegraph,
        width: args.width,
        rule_texts: args.fail_if,
        rules,
        min_change_ns,
        collapse: collapse_label(args.collapse.recursion),
    })
}

/// `flamegraph TRACE`.
#[derive(Debug)]
pub(crate) struct FlamegraphPlan {
    pub(crate) trace: PathBuf,
    /// `-o`: none (or `-`) for the writer `run` is given.
    pub(crate) output: Option<PathBuf>,
    pub(crate) options: AnalyzeOptions,
    /// `--filter`: only paths through a matching function.
    pub(crate) filter: Option<Regex>,
}

fn flamegraph(args: FlamegraphArgs) -> FlamegraphPlan {
    let paths = match args.per_thread {
        true => PathMode::PerStack,
        false => PathMode::Merged,
    };
    let options = analyze_options(
        &args.clock,
        Some(&args.select),
        paths,
        args.collapse.recursion,
    );
    FlamegraphPlan {
        trace: args.trace,
        output: args.output,
        options: rows_if(false, options),
        filter: args.filter,
    }
}

/// `export --format F TRACE...`.
#[derive(Debug)]
pub(crate) enum ExportPlan {
    /// One trace in a format for one tool.
    One {
        trace: PathBuf,
        /// Not Parquet.
        format: ExportFormat,
        /// `-o`: none (or `-`) for the writer `run` is given.
        output: Option<PathBuf>,
        options: AnalyzeOptions,
    },
    /// `--format parquet`: the tables of every trace in a directory.
    #[cfg(feature = "parquet")]
    Parquet {
        /// The traces as given: files or directories of them.
        traces: Vec<PathBuf>,
        /// `-o DIR`, created if missing.
        dir: PathBuf,
        /// `--frames`: frames.parquet too.
        frames: bool,
        options: AnalyzeOptions,
    },
}

fn export(args: ExportArgs) -> Result<ExportPlan, String> {
    if args.format == ExportFormat::Parquet {
        return parquet(args);
    }
    if args.frames {
        return Err("--frames applies to --format parquet".into());
    }
    let trace = match <[PathBuf; 1]>::try_from(args.traces) {
        Ok([trace]) => trace,
        Err(_) => {
            return Err(
                "this format holds one trace: give one (several traces go to --format \
                        parquet, or into one report with `mtanalyze A B`)"
                    .into(),
            )
        }
    };
    let options = |paths| analyze_options(&args.clock, Some(&args.select), paths, None);
    let options = match args.format {
        ExportFormat::Callgrind => rows_if(false, options(PathMode::Off)),
        ExportFormat::Pprof => rows_if(false, options(PathMode::Merged)),
        // The timelines of every stack.
        _ => options(PathMode::Off),
    };
    Ok(ExportPlan::One {
        trace,
        format: args.format,
        output: args.output,
        options,
    })
}

#[cfg(not(feature = "parquet"))]
fn parquet(_: ExportArgs) -> Result<ExportPlan, String> {
    Err(
        "this mtanalyze was built without Parquet support: build it with \
         `cargo build --release -p mtanalyze-cli --features parquet`"
            .into(),
    )
}

#[cfg(feature = "parquet")]
fn parquet(args: ExportArgs) -> Result<ExportPlan, String> {
    let Some(dir) = args.output.filter(|d| *d != std::path::Path::new("-")) else {
        return Err("--format parquet writes a directory of tables: give it with -o DIR".into());
    };
    Ok(ExportPlan::Parquet {
        options: analyze_options(&args.clock, Some(&args.select), PathMode::Off, None),
        traces: args.traces,
        dir,
        frames: args.frames,
    })
}

/// `top TRACE`.
#[derive(Clone, Debug)]
pub(crate) struct TopPlan {
    /// The path the recording was started with.
    pub(crate) trace: PathBuf,
    pub(crate) options: AnalyzeOptions,
    /// The first sort.
    pub(crate) sort: SortKey,
    /// `--limit` (none: as many as the terminal holds; `--once`: all).
    pub(crate) limit: Option<usize>,
    /// `--stacks`: the stack rows instead of the functions.
    pub(crate) stacks: bool,
    pub(crate) mode: TopMode,
}

/// How `top` shows the recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TopMode {
    /// `--once`: one refresh, in this format, fit in `width` columns.
    Once {
        format: TopFormat,
        width: Option<usize>,
    },
    /// The view refreshed until a key ends it.
    Live,
}

fn top(args: TopArgs, interactive: bool) -> Result<TopPlan, String> {
    let mode = match (args.once, interactive) {
        (true, _) => TopMode::Once {
            format: args.format,
            width: args.width,
        },
        (false, true) => TopMode::Live,
        (false, false) => {
            return Err("the live view needs a terminal: use --once for one refresh".into())
        }
    };
    let options = rows_if(
        args.stacks,
        AnalyzeOptions {
            clock: args.clock.map(Into::into),
            paths: PathMode::Off,
            ..AnalyzeOptions::default()
        },
    );
    Ok(TopPlan {
        trace: args.trace,
        options,
        sort: args.sort.map(SortKey::from).unwrap_or(SortKey::Tottime),
        limit: args.limit,
        stacks: args.stacks,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// The plan of `mtanalyze ARGV...`; clap must take the arguments.
    fn resolve_argv(argv: &[&str], interactive: bool) -> Result<Plan, String> {
        let words = std::iter::once("mtanalyze").chain(argv.iter().copied());
        let cli = Cli::try_parse_from(words).unwrap_or_else(|e| panic!("clap: {argv:?}: {e}"));
        resolve(cli, interactive)
    }

    fn plan(argv: &[&str]) -> Plan {
        resolve_argv(argv, false).unwrap_or_else(|e| panic!("refused: {argv:?}: {e}"))
    }

    fn refused(argv: &[&str]) -> String {
        match resolve_argv(argv, false) {
            Err(message) => message,
            Ok(plan) => panic!("resolved: {argv:?}: {plan:?}"),
        }
    }

    fn report_plan(argv: &[&str]) -> ReportPlan {
        match plan(argv) {
            Plan::Report(plan) => *plan,
            other => panic!("not a report: {other:?}"),
        }
    }

    fn diff_plan(argv: &[&str]) -> DiffPlan {
        match plan(argv) {
            Plan::Diff(plan) => *plan,
            other => panic!("not a diff: {other:?}"),
        }
    }

    #[test]
    fn the_page_refuses_each_option_it_does_its_own_way() {
        for (args, flag) in [
            (&["--limit", "3"][..], "--limit"),
            (&["--filter", "x"], "--filter"),
            (&["--callers", "x"], "--callers"),
            (&["--callees", "x"], "--callees"),
            (&["--stacks"], "--stacks"),
            (&["--stacks", "--group"], "--stacks"),
            (&["--per-thread"], "--per-thread"),
            (&["--sort", "name"], "--sort"),
        ] {
            let argv: Vec<&str> = ["t.bin", "--format", "html"]
                .iter()
                .chain(args)
                .copied()
                .collect();
            assert_eq!(
                refused(&argv),
                format!(
                    "{flag} does not apply to --format html: the page holds every row, and \
                     sorts, filters and groups them itself"
                )
            );
        }
        // Options that do not change the page are taken.
        let page = report_plan(&["t.bin", "--format", "html", "--by-trace", "--scheduled"]);
        assert_eq!(page.format, Format::Html);
    }

    #[test]
    fn the_report_refuses_options_its_format_does_not_use() {
        for rows in [
            &["--limit", "3"][..],
            &["--callers", "x"],
            &["--callees", "x"],
            &["--stacks"],
        ] {
            let argv: Vec<&str> = ["t.bin", "--format", "folded"]
                .iter()
                .chain(rows)
                .copied()
                .collect();
            assert_eq!(
                refused(&argv),
                "--format folded writes every call path: --limit, --callers, --callees and \
                 --stacks do not apply (--filter does)"
            );
        }
        assert_eq!(
            refused(&["t.bin", "--stacks", "--sort", "file"]),
            "--sort file does not apply to --stacks: stack rows sort by tottime, cumtime, \
             ncalls, paused or name"
        );
        assert_eq!(
            refused(&["t.bin", "--per-thread"]),
            "--per-thread applies to --format folded"
        );
        assert_eq!(
            refused(&["t.bin", "--format", "json", "--collapse-recursion", "all"]),
            "--collapse-recursion applies to --format folded (and to flamegraph)"
        );
        assert_eq!(
            refused(&["t.bin", "--format", "pstats"]),
            "--format pstats writes a binary file: give it with -o FILE (or -o - for stdout)"
        );
        assert_eq!(
            refused(&["a.bin", "b.bin", "--by-trace", "--format", "markdown"]),
            "--by-trace applies to the table and --format json"
        );
        // The checks are said in their order: the first that fails.
        assert_eq!(
            refused(&[
                "t.bin",
                "--format",
                "markdown",
                "--per-thread",
                "--by-trace"
            ]),
            "--per-thread applies to --format folded"
        );
    }

    #[test]
    fn the_default_report_counts_the_stacks_it_does_not_show() {
        let plan = report_plan(&["t.bin"]);
        assert_eq!(plan.traces, [PathBuf::from("t.bin")]);
        assert!(plan.children);
        assert_eq!(plan.format, Format::Table);
        assert_eq!(plan.output, None);
        assert_eq!(plan.options.paths, PathMode::Off);
        assert_eq!(plan.options.stack_rows, StackRows::Counted);
        assert_eq!(plan.options.clock, None);
        assert_eq!(plan.view.sort, SortKey::Tottime);
        assert_eq!(plan.stack_sort, None);
        assert_eq!(plan.gather(1), Gather::Report);
        // A rotating series' header counts its stacks from their rows.
        assert_eq!(plan.options_for(1, false).stack_rows, StackRows::Counted);
        assert_eq!(plan.options_for(3, true).stack_rows, StackRows::Kept);
    }

    #[test]
    fn folded_paths_per_stack_with_a_selection_and_a_window() {
        let plan = report_plan(&[
            "t.bin",
            "--format",
            "folded",
            "--per-thread",
            "--collapse-recursion",
            "all",
            "--clock",
            "gil",
            "--thread",
            "3",
            "--from",
            "2s",
            "--warnings",
            "all",
            "--no-children",
            "-o",
            "out.txt",
        ]);
        assert!(!plan.children);
        assert_eq!(plan.output, Some(PathBuf::from("out.txt")));
        let o = &plan.options;
        assert_eq!(o.paths, PathMode::PerStack);
        assert_eq!(o.collapse_recursion, Some(RecursionCollapse::All));
        assert_eq!(o.clock, Some(Clock::Gil));
        assert_eq!(o.threads, [3]);
        assert_eq!(o.from, Some(mtanalyze::TimeBound::At(2_000_000_000)));
        assert!(o.warning_details);
        // Selected stacks are kept: the header says how many.
        assert_eq!(o.stack_rows, StackRows::Kept);
    }

    #[test]
    fn one_traces_stack_table_and_json_stream_their_rows() {
        let plan = report_plan(&[
            "t.bin", "--stacks", "--group", "--sort", "cumtime", "--limit", "5",
        ]);
        assert_eq!(plan.stack_sort, Some(SortKey::Cumtime));
        assert_eq!(plan.view.limit, Some(5));
        assert!(plan.stacks && plan.group);
        assert_eq!(plan.options.stack_rows, StackRows::Kept);
        assert_eq!(plan.gather(1), Gather::StackView);
        assert_eq!(plan.gather(2), Gather::Report);
        let json = report_plan(&["t.bin", "--format", "json", "--callers", "^parse$"]);
        assert_eq!(json.gather(1), Gather::SortedRows);
        assert_eq!(json.options.stack_rows, StackRows::Kept);
        assert!(json.edges.callers_of.is_some_and(|re| re.is_match("parse")));
        let selected = report_plan(&["t.bin", "--format", "json", "--stack", "thread:1"]);
        assert_eq!(selected.gather(1), Gather::Report);
        let by_trace = report_plan(&["t.bin", "--format", "json", "--by-trace"]);
        assert_eq!(by_trace.gather(1), Gather::Report);
    }

    #[test]
    fn a_page_of_one_trace_draws_each_stacks_paths_of_several_merged_ones() {
        let plan = report_plan(&[
            "a.bin",
            "--format",
            "html",
            "--collapse-recursion",
            "direct",
        ]);
        assert_eq!(plan.collapse, Some("direct"));
        assert_eq!(plan.options_for(1, false).paths, PathMode::PerStack);
        assert_eq!(plan.options_for(1, false).stack_rows, StackRows::Kept);
        assert_eq!(plan.options_for(2, false).paths, PathMode::Merged);
        assert_eq!(
            plan.options_for(2, false).collapse_recursion,
            Some(RecursionCollapse::Direct)
        );
    }

    #[test]
    fn the_diff_refuses_bad_gates_and_options_its_format_does_not_use() {
        let diff = |more: &[&str]| {
            let argv: Vec<&str> = ["diff", "a.bin", "b.bin"]
                .iter()
                .chain(more)
                .copied()
                .collect();
            refused(&argv)
        };
        assert_eq!(
            diff(&["--fail-if", "tottime >> 1"]),
            "bad --fail-if rule \"tottime >> 1\": \"> 1\" is not a change like +10%, +5ms or \
             +0 (e.g. 'tottime > +10%', 'parse.*: cumtime > +5ms', 'ncalls > +0', 'total > \
             +2%')"
        );
        for time in ["soon", "+10%", "-1ms"] {
            let min = format!("--fail-min-change={time}");
            assert_eq!(
                diff(&["--fail-if", "tottime > +10%", &min]),
                format!("--fail-min-change {time:?}: not a time like 1ms, 250us or 2s")
            );
        }
        for rows in [
            &["--limit", "3"][..],
            &["--min-change", "1"],
            &["--callers", "x"],
            &["--callees", "x"],
        ] {
            let folded: Vec<&str> = ["--format", "folded"].iter().chain(rows).copied().collect();
            assert_eq!(
                diff(&folded),
                "--format folded writes every call path: --limit, --min-change, --callers and \
                 --callees do not apply (--filter does)"
            );
            let html: Vec<&str> = ["--format", "html"].iter().chain(rows).copied().collect();
            assert_eq!(
                diff(&html),
                "--format html holds every row: --limit, --min-change, --callers and \
                 --callees do not apply (the page filters and sorts itself)"
            );
        }
        assert_eq!(
            diff(&["-o", "d.svg", "--flamegraph", "d.svg"]),
            "-o and --flamegraph name the same file"
        );
        assert_eq!(
            diff(&["--collapse-recursion", "all"]),
            "--collapse-recursion applies to --format folded and html, and --flamegraph"
        );
    }

    #[test]
    fn a_diff_of_runs_with_gates() {
        let plan = diff_plan(&[
            "diff",
            "--base",
            "a1.bin",
            "a2.bin",
            "--new",
            "b1.bin",
            "--fail-if",
            "tottime > +10%",
            "--fail-if",
            "parse.*: ncalls > +0",
            "--fail-min-change",
            "1ms",
            "--normalize",
            "--confidence",
            "0.99",
            "--format",
            "html",
            "--collapse-recursion",
            "all",
        ]);
        assert_eq!(
            plan.base,
            [PathBuf::from("a1.bin"), PathBuf::from("a2.bin")]
        );
        assert_eq!(plan.new, [PathBuf::from("b1.bin")]);
        assert_eq!(plan.rules.len(), 2);
        assert_eq!(plan.rule_texts, ["tottime > +10%", "parse.*: ncalls > +0"]);
        assert_eq!(plan.min_change_ns, 1_000_000);
        assert!(plan.diff.normalize);
        assert_eq!(plan.diff.significance.confidence, 0.99);
        assert_eq!(plan.format, DiffFormat::Html);
        assert_eq!(plan.collapse, Some("all"));
        assert_eq!(plan.options.paths, PathMode::Merged);
        assert_eq!(plan.options.stack_rows, StackRows::Counted);
        // A table compares whole traces without call paths.
        let table = diff_plan(&["diff", "a.bin", "b.bin", "--sort", "cumtime"]);
        assert_eq!(table.base, [PathBuf::from("a.bin")]);
        assert_eq!(table.options.paths, PathMode::Off);
        assert_eq!(table.view.sort, SortKey::Cumtime);
        assert_eq!(table.min_change_ns, 0);
        assert!(table.rules.is_empty());
        let svg = diff_plan(&["diff", "a.bin", "b.bin", "--flamegraph", "d.svg"]);
        assert_eq!(svg.options.paths, PathMode::Merged);
    }

    #[test]
    fn export_refusals() {
        assert_eq!(
            refused(&["export", "--format", "chrome", "--frames", "t.bin"]),
            "--frames applies to --format parquet"
        );
        assert_eq!(
            refused(&["export", "--format", "callgrind", "a.bin", "b.bin"]),
            "this format holds one trace: give one (several traces go to --format parquet, or \
             into one report with `mtanalyze A B`)"
        );
    }

    #[cfg(not(feature = "parquet"))]
    #[test]
    fn parquet_needs_a_build_with_it() {
        assert_eq!(
            refused(&["export", "--format", "parquet", "t.bin", "-o", "dir"]),
            "this mtanalyze was built without Parquet support: build it with `cargo build \
             --release -p mtanalyze-cli --features parquet`"
        );
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn parquet_needs_a_directory() {
        for output in [&[][..], &["-o", "-"]] {
            let argv: Vec<&str> = ["export", "--format", "parquet", "t.bin"]
                .iter()
                .chain(output)
                .copied()
                .collect();
            assert_eq!(
                refused(&argv),
                "--format parquet writes a directory of tables: give it with -o DIR"
            );
        }
        let Plan::Export(ExportPlan::Parquet {
            traces,
            dir,
            frames,
            ..
        }) = plan(&[
            "export", "--format", "parquet", "a", "b", "-o", "tables", "--frames",
        ])
        else {
            panic!("not a Parquet export");
        };
        assert_eq!(traces.len(), 2);
        assert_eq!(dir, PathBuf::from("tables"));
        assert!(frames);
    }

    #[test]
    fn each_export_format_analyzes_as_it_needs() {
        let options = |format: &str| match plan(&["export", "--format", format, "t.bin"]) {
            Plan::Export(ExportPlan::One { options, .. }) => options,
            other => panic!("not one trace's export: {other:?}"),
        };
        let pprof = options("pprof");
        assert_eq!(
            (pprof.paths, pprof.stack_rows),
            (PathMode::Merged, StackRows::Counted)
        );
        let callgrind = options("callgrind");
        assert_eq!(
            (callgrind.paths, callgrind.stack_rows),
            (PathMode::Off, StackRows::Counted)
        );
        // The timelines of every stack.
        let chrome = options("chrome");
        assert_eq!(
            (chrome.paths, chrome.stack_rows),
            (PathMode::Off, StackRows::Kept)
        );
        let Plan::Flamegraph(svg) = plan(&["flamegraph", "t.bin", "--per-thread"]) else {
            panic!("not a flame graph");
        };
        assert_eq!(svg.options.paths, PathMode::PerStack);
        assert_eq!(svg.options.stack_rows, StackRows::Counted);
    }

    #[test]
    fn top_draws_live_only_on_a_terminal() {
        let argv = ["top", "t.bin"];
        assert_eq!(
            refused(&argv),
            "the live view needs a terminal: use --once for one refresh"
        );
        let Ok(Plan::Top(live)) = resolve_argv(&argv, true) else {
            panic!("no live view on a terminal");
        };
        assert_eq!(live.mode, TopMode::Live);
        assert_eq!(live.sort, SortKey::Tottime);
        assert_eq!(live.options.stack_rows, StackRows::Counted);
        let Plan::Top(once) = plan(&[
            "top", "t.bin", "--once", "--format", "json", "--width", "50", "--stacks", "--sort",
            "paused",
        ]) else {
            panic!("not top");
        };
        assert_eq!(
            once.mode,
            TopMode::Once {
                format: TopFormat::Json,
                width: Some(50)
            }
        );
        assert_eq!(once.sort, SortKey::Paused);
        assert_eq!(once.options.stack_rows, StackRows::Kept);
    }

    #[test]
    fn check_and_convert_take_their_arguments_as_given() {
        let Plan::Check(check) = plan(&["check", "t.bin", "--format", "json"]) else {
            panic!("not check");
        };
        assert_eq!(
            (check.trace, check.format),
            (PathBuf::from("t.bin"), CheckFormat::Json)
        );
        let Plan::Convert(convert) = plan(&["convert", "in.jsonl", "out.bin", "--compact"]) else {
            panic!("not convert");
        };
        assert_eq!(convert.output, PathBuf::from("out.bin"));
        assert!(convert.compact);
    }

    #[test]
    fn stack_rows_are_only_counted_when_none_is_shown_and_none_selected() {
        let all = AnalyzeOptions::default;
        assert_eq!(rows_if(false, all()).stack_rows, StackRows::Counted);
        assert_eq!(rows_if(true, all()).stack_rows, StackRows::Kept);
        // The table's header says how many of the stacks were selected.
        let some_threads = AnalyzeOptions {
            threads: vec![1],
            ..all()
        };
        assert_eq!(rows_if(false, some_threads).stack_rows, StackRows::Kept);
        let some_stacks = AnalyzeOptions {
            stacks: vec!["stack:1".into()],
            ..all()
        };
        assert_eq!(rows_if(false, some_stacks).stack_rows, StackRows::Kept);
    }
}
