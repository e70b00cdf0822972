//! Lost events (format version 2's `lost` mark; "Lost events" in
//! `schemas/semantics.md`): a thread's stacks end at its mark, a paused task
//! ends where the trace stopped being complete, a mark followed by more
//! events is a stretch that runs nothing, and the report names the threads
//! and what each lost. The numbers are the worked example's, by hand.

use serde_json::Value;

use crate::util::{function_numbers, json_report, mtanalyze, TempDir};

/// Thread 1 loses its events at 40 inside `main` > `work`; thread 2 left
/// task-1 paused inside `handle` at 30 and runs `serve` to the end (100).
const ENDS_AT_MARK: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "work"}
{"ts": 40, "tid": 1, "ev": "lost"}
{"ts": 0, "tid": 2, "ev": "enter", "fn": "serve"}
{"ts": 20, "tid": 2, "ev": "switch", "stack": "task-1"}
{"ts": 20, "tid": 2, "ev": "enter", "fn": "handle"}
{"ts": 30, "tid": 2, "ev": "switch", "stack": null}
{"ts": 100, "tid": 2, "ev": "exit", "fn": "serve"}
"#;

/// Thread 1 is on task-A when it loses its events: its own stack, paused
/// below, ends at the mark too.
const ON_A_TASK: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": "task-A"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "step"}
{"ts": 30, "tid": 1, "ev": "lost"}
{"ts": 0, "tid": 2, "ev": "enter", "fn": "idle"}
{"ts": 50, "tid": 2, "ev": "exit", "fn": "idle"}
"#;

/// The mark is followed by more events (a ring that got a chunk again):
/// nothing runs from 40 to 60, and the frames go on.
const RESUMES: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "work"}
{"ts": 40, "tid": 1, "ev": "lost"}
{"ts": 60, "tid": 1, "ev": "exit", "fn": "work"}
{"ts": 70, "tid": 1, "ev": "exit", "fn": "main"}
"#;

fn report(dir: &TempDir, name: &str, events: &str, clock: &str) -> Value {
    json_report(&dir.write(name, events), clock)
}

/// (ncalls, tottime, cumtime, paused, open_at_end, cut_short) of a function.
type Row = [u64; 6];

fn row(report: &Value, function: &str) -> Row {
    function_numbers(
        report,
        function,
        [
            "ncalls",
            "tottime_ns",
            "cumtime_ns",
            "paused_ns",
            "open_at_end",
            "cut_short",
        ],
    )
}

fn thread(report: &Value, tid: u64) -> (Option<u64>, u64) {
    let t = report["trace"]["threads"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["tid"] == tid))
        .unwrap_or_else(|| panic!("no thread {tid}"));
    (
        t["lost_from_ns"].as_u64(),
        t["lost_ns"].as_u64().unwrap_or(u64::MAX),
    )
}

fn warning_count(report: &Value, kind: &str) -> u64 {
    report["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["kind"] == kind)
        .map(|w| w["count"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn a_threads_stacks_end_at_its_mark_and_a_paused_task_where_the_trace_stopped_being_complete() {
    let dir = TempDir::new("lost-ends");
    // (clock, main, work, serve, handle)
    let cases: [(&str, Row, Row, Row, Row); 3] = [
        (
            "stack",
            [1, 10, 40, 0, 0, 1],
            [1, 30, 30, 0, 0, 1],
            [1, 90, 90, 10, 0, 0],
            // Paused from 30 until the first mark (40), not until 100.
            [1, 10, 10, 10, 0, 1],
        ),
        (
            "wall",
            [1, 10, 40, 0, 0, 1],
            [1, 30, 30, 0, 0, 1],
            [1, 100, 100, 0, 0, 0],
            [1, 20, 20, 0, 0, 1],
        ),
        (
            "gil",
            [1, 0, 10, 30, 0, 1],
            [1, 10, 10, 20, 0, 1],
            // Thread 1's mark at 40 is its last event: from 40 to 100 no
            // stack runs, and serve is paused.
            [1, 20, 20, 80, 0, 0],
            [1, 10, 10, 10, 0, 1],
        ),
    ];
    for (clock, main, work, serve, handle) in cases {
        let r = report(&dir, "ends.jsonl", ENDS_AT_MARK, clock);
        assert_eq!(row(&r, "main"), main, "main, --clock {clock}");
        assert_eq!(row(&r, "work"), work, "work, --clock {clock}");
        assert_eq!(row(&r, "serve"), serve, "serve, --clock {clock}");
        assert_eq!(row(&r, "handle"), handle, "handle, --clock {clock}");
        assert_eq!(thread(&r, 1), (Some(40), 60), "--clock {clock}");
        assert_eq!(thread(&r, 2), (None, 0), "--clock {clock}");
        assert_eq!(warning_count(&r, "events_lost"), 1);
        assert_eq!(r["trace"]["end_ns"], 100);
    }
}

#[test]
fn the_own_stack_below_a_task_ends_at_the_mark_too() {
    let dir = TempDir::new("lost-task");
    for clock in ["stack", "wall"] {
        let r = report(&dir, "task.jsonl", ON_A_TASK, clock);
        let main_paused = if clock == "stack" { 20 } else { 0 };
        let main_active = 30 - main_paused;
        assert_eq!(
            row(&r, "main"),
            // `step` runs on task-A, not under `main`: all of main's time is its own.
            [1, main_active, main_active, main_paused, 0, 1],
            "--clock {clock}"
        );
        assert_eq!(row(&r, "step"), [1, 20, 20, 0, 0, 1], "--clock {clock}");
        assert_eq!(row(&r, "idle"), [1, 50, 50, 0, 0, 0], "--clock {clock}");
        assert_eq!(thread(&r, 1), (Some(30), 20));
    }
}

#[test]
fn a_mark_followed_by_more_events_is_a_stretch_that_runs_nothing() {
    let dir = TempDir::new("lost-resumes");
    for (clock, main, work) in [
        ("stack", [1, 20, 50, 20, 0, 0], [1, 30, 30, 20, 0, 0]),
        ("gil", [1, 20, 50, 20, 0, 0], [1, 30, 30, 20, 0, 0]),
        ("wall", [1, 20, 70, 0, 0, 0], [1, 50, 50, 0, 0, 0]),
    ] {
        let r = report(&dir, "resumes.jsonl", RESUMES, clock);
        assert_eq!(row(&r, "main"), main, "--clock {clock}");
        assert_eq!(row(&r, "work"), work, "--clock {clock}");
        // The thread's events go on: it is not marked as having lost its end.
        assert_eq!(thread(&r, 1), (None, 0));
        assert_eq!(warning_count(&r, "events_lost"), 1);
    }
}

#[test]
fn the_table_names_the_threads_that_lost_events_on_stderr() {
    let dir = TempDir::new("lost-table");
    let path = dir.write("ends.jsonl", ENDS_AT_MARK);
    let run = mtanalyze([path.as_os_str()]).success();
    assert!(
        run.stderr.contains(
            "events lost (the recorder's file was full): thread 1 from 40ns (60ns not counted)"
        ),
        "{}",
        run.stderr
    );
}
