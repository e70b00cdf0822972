//! The default command's table, the command-line structure, and warnings.

use crate::util::{assert_text_eq, mtanalyze, mtanalyze_in, TempDir, HANDOFF, RECURSION, REPAIRS};

/// Everything after the first line (which names the temporary file).
fn without_source_line(stdout: &str) -> String {
    let (first, rest) = stdout.split_once('\n').unwrap_or((stdout, ""));
    assert!(first.starts_with("trace: "), "first line: {first:?}");
    rest.to_owned()
}

#[test]
fn table_matches_the_recursion_example_with_total_slash_primitive_calls() {
    let dir = TempDir::new("table");
    let trace = dir.write("recursion.jsonl", RECURSION);
    let run = mtanalyze([&trace]).success();
    assert!(run
        .stdout
        .starts_with(&format!("trace: {} (jsonl, format 3)\n", trace.display())));
    // Worked example 4: f 3/1 calls, 60 ns self, 90 ns cumulative; g 2/1, 30, 50.
    assert_text_eq(
        "\
duration: 90ns  threads: 1  stacks: 1  events: 10  clock: stack  warnings: 0

ncalls  tottime  percall  cumtime  percall  paused  function (file:line)
------------------------------------------------------------------------
   3/1     60ns     20ns     90ns     90ns     0ns  f
   2/1     30ns     15ns     50ns     50ns     0ns  g
",
        &without_source_line(&run.stdout),
    );
    assert_eq!(run.stderr, "", "no warnings expected");
}

#[test]
fn table_shows_definition_sites_and_three_digit_times() {
    let dir = TempDir::new("sites");
    let trace = dir.write("handoff.jsonl", HANDOFF);
    let run = mtanalyze([&trace]).success();
    // Worked example 1: handler 15/40 (paused 30), main 20/20 (20), query 25/25 (30).
    assert_text_eq(
        "\
duration: 90ns  threads: 2  stacks: 3  events: 10  clock: stack  warnings: 0

ncalls  tottime  percall  cumtime  percall  paused  function (file:line)
------------------------------------------------------------------------
     1     25ns     25ns     25ns     25ns    30ns  query (src/db.rs:42)
     1     20ns     20ns     20ns     20ns    20ns  main (src/main.rs:1)
     1     15ns     15ns     40ns     40ns    30ns  handler (src/h.rs:5)
",
        &without_source_line(&run.stdout),
    );
}

#[test]
fn large_times_use_larger_units() {
    let dir = TempDir::new("units");
    let trace = dir.write(
        "units.jsonl",
        r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "slow"}
{"ts": 1000, "tid": 1, "ev": "enter", "fn": "inner"}
{"ts": 13345, "tid": 1, "ev": "exit", "fn": "inner"}
{"ts": 1200000000, "tid": 1, "ev": "exit", "fn": "slow"}
{"ts": 1200000000, "tid": 1, "ev": "enter", "fn": "quick"}
{"ts": 1204560000, "tid": 1, "ev": "exit", "fn": "quick"}
"#,
    );
    let run = mtanalyze([trace.as_os_str(), "--sort".as_ref(), "name".as_ref()]).success();
    let rows: Vec<&str> = run.stdout.lines().skip(5).collect();
    assert_eq!(rows.len(), 3, "{}", run.stdout);
    assert!(
        rows[0].contains("12.3µs") && rows[0].ends_with("inner"),
        "{}",
        rows[0]
    );
    assert!(
        rows[1].contains("4.56ms") && rows[1].ends_with("quick"),
        "{}",
        rows[1]
    );
    assert!(
        rows[2].contains("1.20s") && rows[2].ends_with("slow"),
        "{}",
        rows[2]
    );
    run.stdout_has("duration: 1.20s");
}

#[test]
fn clock_defaults_to_stack_and_the_flag_changes_it() {
    let dir = TempDir::new("clock");
    let trace = dir.write("handoff.jsonl", HANDOFF);
    mtanalyze([&trace]).success().stdout_has("clock: stack");
    let wall = mtanalyze([
        trace.as_os_str(),
        "--clock".as_ref(),
        "wall".as_ref(),
        "--sort".as_ref(),
        "name".as_ref(),
    ])
    .success();
    wall.stdout_has("clock: wall");
    // Worked example 2: under wall, handler is 70 ns cumulative and nothing is paused.
    let handler = wall
        .stdout
        .lines()
        .find(|l| l.contains("handler"))
        .unwrap_or_default();
    assert_eq!(
        handler.split_whitespace().collect::<Vec<_>>(),
        [
            "1",
            "15ns",
            "15ns",
            "70ns",
            "70ns",
            "0ns",
            "handler",
            "(src/h.rs:5)"
        ]
    );
    mtanalyze([trace.as_os_str(), "--clock".as_ref(), "gil".as_ref()])
        .success()
        .stdout_has("clock: gil");
}

#[test]
fn warnings_are_summarized_in_one_line_on_stderr_and_exit_zero() {
    let dir = TempDir::new("warnings");
    let trace = dir.write("repairs.jsonl", REPAIRS);
    let run = mtanalyze([&trace]).success();
    run.stdout_has("warnings: 4");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(lines[0].starts_with("4 warnings: "), "{}", lines[0]);
    for kind in [
        "clock_backwards x1",
        "exit_mismatch x1",
        "exit_not_open x1",
        "exit_on_empty_stack x1",
    ] {
        assert!(lines[0].contains(kind), "{kind} missing from {}", lines[0]);
    }
    assert!(
        lines[0].contains("(first at thread 1 at 130 ns)"),
        "{}",
        lines[0]
    );
}

/// A task's stack entered by a second thread before the first left it
/// (a runtime's hooks racing, as tokio's did before `mtrace-tokio` waited
/// for the stack): the stderr line names the warning with its count, and
/// says where the first one happened.
#[test]
fn a_stack_on_two_threads_at_once_is_counted_on_stderr() {
    let dir = TempDir::new("two-threads");
    let trace = dir.write(
        "two-threads.jsonl",
        r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "task-1"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "handle", "file": "src/h.rs", "line": 1}
{"ts": 10, "tid": 2, "ev": "switch", "stack": "task-1"}
{"ts": 15, "tid": 2, "ev": "exit", "fn": "handle"}
{"ts": 20, "tid": 1, "ev": "switch", "stack": null}
{"ts": 25, "tid": 2, "ev": "switch", "stack": null}
{"ts": 30, "tid": 1, "ev": "switch", "stack": "task-1"}
{"ts": 40, "tid": 2, "ev": "switch", "stack": "task-1"}
{"ts": 50, "tid": 1, "ev": "switch", "stack": null}
{"ts": 60, "tid": 2, "ev": "switch", "stack": null}
"#,
    );
    let run = mtanalyze([&trace]).success();
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].contains("stack_on_two_threads x2 (first at thread 2 at 10 ns)"),
        "{}",
        lines[0]
    );
}

#[test]
fn a_trace_named_like_a_subcommand_is_reached_after_double_dash() {
    let dir = TempDir::new("named-check");
    dir.write("check", RECURSION);
    let run = mtanalyze_in(Some(dir.path()), ["--", "check"]).success();
    run.stdout_has("trace: check (jsonl, format 3)");
    mtanalyze_in(Some(dir.path()), ["./check"]).success();
    // Without `--` the word is the subcommand, which then lacks its TRACE.
    let bare = mtanalyze_in(Some(dir.path()), ["check"]);
    assert_eq!(bare.code, Some(2), "{}", bare.stderr);
}

#[test]
fn usage_errors_exit_2() {
    let dir = TempDir::new("usage");
    let trace = dir.write("r.jsonl", RECURSION);
    let t = trace.to_str().unwrap_or_default();
    for args in [
        vec![],
        vec![t, "--sort", "bogus"],
        vec![t, "--clock", "cpu"],
        vec![t, "--limit", "many"],
        vec![t, "--filter", "("],
        vec![t, "--format", "xml"],
        vec![t, "--no-such-flag"],
        vec!["convert", t],
    ] {
        let run = mtanalyze(&args);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
        assert!(!run.stderr.contains("panicked"), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn help_and_version_exit_0() {
    let help = mtanalyze(["--help"]).success();
    for word in [
        "check",
        "convert",
        "--clock",
        "--sort",
        "--callers",
        "--stacks",
        "mtanalyze -- check",
    ] {
        help.stdout_has(word);
    }
    mtanalyze(["--version"]).success().stdout_has("mtanalyze ");
}
