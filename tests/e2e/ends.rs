//! Ends of logical stacks (issue 15; format version 3's `end` event; "Ends
//! of logical stacks" in `schemas/semantics.md`): a stack's life ends at
//! its end, frames left open there are cut short, the report says which
//! stacks ended, and older traces say nothing about ends. The numbers are
//! the worked example's, by hand.

use std::io::Cursor;

use mtrace_format::{EventKind, StackId, ThreadId, TraceWriter, WriterOptions};
use serde_json::Value;

use crate::schema::assert_valid;
use mtanalyze_testkit::worked_examples::{without_ends, ENDS as EXAMPLE};

use crate::util::{function_numbers, json_report, mtanalyze, TempDir};

/// (ncalls, tottime, cumtime, paused, scheduled, cut_short, open_at_end)
/// of a function.
fn row(report: &Value, function: &str) -> [u64; 7] {
    function_numbers(
        report,
        function,
        [
            "ncalls",
            "tottime_ns",
            "cumtime_ns",
            "paused_ns",
            "scheduled_ns",
            "cut_short",
            "open_at_end",
        ],
    )
}

/// The stack row named `name`.
fn stack<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["stacks"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no stack {name}"))
}

/// (running, paused, scheduled, waiting) of a stack, and whether it ended.
fn life(report: &Value, name: &str) -> ([u64; 4], bool) {
    let s = stack(report, name);
    let n = |k: &str| s[k].as_u64().unwrap_or(u64::MAX);
    (
        [
            n("running_ns"),
            n("paused_ns"),
            n("scheduled_ns"),
            n("waiting_ns"),
        ],
        s["ended"] == Value::Bool(true),
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

/// The `--stacks` table, full width.
fn stacks_table(trace: &std::path::Path) -> String {
    mtanalyze([
        trace.as_os_str(),
        "--stacks".as_ref(),
        "--width".as_ref(),
        "0".as_ref(),
    ])
    .success()
    .stdout
}

#[test]
fn the_worked_example_through_the_cli() {
    let dir = TempDir::new("ends-example");
    let trace = dir.write("ends.jsonl", EXAMPLE);
    let r = json_report(&trace, "stack");
    assert_valid("report.schema.json", &r);
    assert_eq!(row(&r, "handle"), [1, 10, 20, 40, 15, 1, 0]);
    assert_eq!(row(&r, "query"), [1, 10, 10, 40, 15, 1, 0]);
    assert_eq!(row(&r, "step"), [1, 10, 10, 0, 0, 0, 0]);
    assert_eq!(row(&r, "serve"), [1, 100, 100, 0, 0, 0, 0]);
    assert_eq!(life(&r, "task-1"), ([20, 40, 15, 25], true));
    assert_eq!(life(&r, "task-2"), ([10, 0, 0, 0], true));
    // Own stacks never end: no `ended` in their rows.
    for own in r["stacks"].as_array().unwrap() {
        if own["id"].as_str().unwrap().starts_with("thread:") {
            assert!(own.get("ended").is_none(), "{own}");
        }
    }
    // task-9 never ran: no row, and its end is the one warning.
    assert!(r["stacks"].as_array().unwrap().len() == 4);
    assert_eq!(warning_count(&r, "end_ignored"), 1);
    let w = &r["warnings"][0];
    assert_eq!(w["first"], "thread 2 at 70 ns");
    // The same events as a binary file give the same report.
    let bin = dir.join("ends.bin");
    mtanalyze(["convert".as_ref(), trace.as_os_str(), bin.as_os_str()]).success();
    let mut b = json_report(&bin, "stack");
    let mut j = r.clone();
    for v in [&mut b, &mut j] {
        v["trace"]["source"] = Value::Null;
        v["trace"]["input_format"] = Value::Null;
        v["trace"]["ticks_per_second"] = Value::Null;
    }
    assert_eq!(b, j);
    // The table: one line over the stacks, and the frames cut short.
    let table = stacks_table(&trace);
    assert!(
        table.contains("\nlogical stacks: 2 ended, 0 still open at the end of the trace\nid "),
        "{table}"
    );
    assert!(
        table.contains("frames cut short by lost events or chunks, or by their stack's end: 2"),
        "{table}"
    );
    let groups = mtanalyze([
        trace.as_os_str(),
        "--stacks".as_ref(),
        "--group".as_ref(),
        "--width".as_ref(),
        "0".as_ref(),
    ])
    .success()
    .stdout;
    assert!(groups.contains("logical stacks: 2 ended"), "{groups}");
    // Not over the function table.
    let plain = mtanalyze([trace.as_os_str()]).success().stdout;
    assert!(!plain.contains("logical stacks:"), "{plain}");
    // A selection changes neither which stacks ended nor which ends count.
    let one = mtanalyze([
        trace.as_os_str(),
        "--stack".as_ref(),
        "task-1".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ])
    .success()
    .json();
    assert_eq!(one["stacks"].as_array().map(Vec::len), Some(1));
    assert_eq!(life(&one, "task-1"), ([20, 40, 15, 25], true));
    assert_eq!(warning_count(&one, "end_ignored"), 1);
}

/// Without its ends the example's abandoned frames run to the end of the
/// trace, as before ends: that is what the end changes.
#[test]
fn without_the_ends_the_abandoned_frames_run_to_the_end() {
    let dir = TempDir::new("ends-without");
    let text = without_ends(EXAMPLE);
    let r = json_report(&dir.write("no-ends.jsonl", &text), "stack");
    assert_eq!(row(&r, "handle"), [1, 10, 20, 80, 55, 0, 1]);
    assert_eq!(life(&r, "task-1"), ([20, 80, 55, 25], false));
    assert_eq!(warning_count(&r, "end_ignored"), 0);
    let table = stacks_table(&dir.join("no-ends.jsonl"));
    assert!(
        table.contains("logical stacks: 0 ended, 2 still open at the end of the trace"),
        "{table}"
    );
}

/// A binary trace from the format crate's writer, in small chunks (the
/// chunks after the end carry no snapshot of the ended fiber): fiber-1 is
/// abandoned inside `run` > `wait` at 20 and dropped by thread 2 at 50;
/// fiber-2 is abandoned the same way at 30 and never dropped; thread 1
/// then works until 1000.
fn abandoned_fibers() -> Vec<u8> {
    let opts = WriterOptions {
        chunk_size: mtrace_format::layout::MIN_CHUNK_SIZE,
        ..Default::default()
    };
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), opts).expect("a writer");
    let (run, wait, work) = (
        w.function("run", "", 0, ""),
        w.function("wait", "", 0, ""),
        w.function("work", "", 0, ""),
    );
    let (f1, f2) = (w.stack("fiber-1"), w.stack("fiber-2"));
    let (t1, t2) = (ThreadId(1), ThreadId(2));
    let mut ev = |t, ts, kind| w.event(t, ts, kind).expect("written");
    ev(t1, 10, EventKind::Switch(f1));
    ev(t1, 10, EventKind::Enter(run));
    ev(t1, 15, EventKind::Enter(wait));
    ev(t1, 20, EventKind::Switch(f2));
    ev(t1, 20, EventKind::Enter(run));
    ev(t1, 25, EventKind::Enter(wait));
    ev(t1, 30, EventKind::Switch(StackId::OWN));
    ev(t2, 50, EventKind::End(f1));
    // Enough events for many chunks after the end.
    for i in 0..200u64 {
        ev(t1, 100 + 4 * i, EventKind::Enter(work));
        ev(t1, 102 + 4 * i, EventKind::Exit(work));
    }
    ev(t1, 1000, EventKind::Enter(work));
    ev(t1, 1000, EventKind::Exit(work));
    w.finish(None).expect("finished").into_inner()
}

#[test]
fn an_abandoned_stack_ends_at_its_end_under_every_clock() {
    let dir = TempDir::new("ends-abandoned");
    let trace = dir.write("fibers.bin", abandoned_fibers());
    // fiber-1, left at 20 and dropped at 50: run [10,50] and wait [15,50].
    // fiber-2, never dropped: run [20,1000] and wait [25,1000], open at the end.
    for (clock, run_active, wait_active) in [("stack", 10, 5), ("wall", 40, 35), ("gil", 10, 5)] {
        let r = json_report(&trace, clock);
        let f = |n: &str| {
            let row = row(&r, n);
            // (ncalls, cumtime, paused, cut_short, open_at_end)
            [row[0], row[2], row[3], row[5], row[6]]
        };
        let fiber2_run = if clock == "wall" { 980 } else { 10 };
        let fiber2_wait = if clock == "wall" { 975 } else { 5 };
        assert_eq!(
            f("run"),
            [
                2,
                run_active + fiber2_run,
                (40 - run_active) + (980 - fiber2_run),
                1,
                1
            ],
            "run under {clock}"
        );
        assert_eq!(
            f("wait"),
            [
                2,
                wait_active + fiber2_wait,
                (35 - wait_active) + (975 - fiber2_wait),
                1,
                1
            ],
            "wait under {clock}"
        );
        assert!(life(&r, "fiber-1").1, "{clock}");
        assert!(!life(&r, "fiber-2").1, "{clock}");
        assert_eq!(warning_count(&r, "end_ignored"), 0, "{clock}");
        if clock == "stack" {
            assert_eq!(life(&r, "fiber-1").0[..2], [10, 30]);
            assert_eq!(life(&r, "fiber-2").0[..2], [10, 970]);
        }
    }
    let table = stacks_table(&trace);
    assert!(
        table.contains("logical stacks: 1 ended, 1 still open at the end of the trace"),
        "{table}"
    );
    // Windows split at the end add up, and each says the stack ended.
    let window = |from: &str, to: &str| {
        mtanalyze([
            trace.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
            "--from".as_ref(),
            from.as_ref(),
            "--to".as_ref(),
            to.as_ref(),
        ])
        .success()
        .json()
    };
    let (a, b) = (window("0ns", "40ns"), window("40ns", "2000ns"));
    assert_eq!(life(&a, "fiber-1"), ([10, 20, 0, 20], true));
    assert_eq!(life(&b, "fiber-1"), ([0, 10, 0, 10], true));
    // run's cut_short counts where it was entered: in the first window.
    assert_eq!(row(&a, "run")[5], 1);
    assert_eq!(row(&b, "run")[5], 0);
}

#[test]
fn a_version_2_file_says_nothing_about_ends() {
    let dir = TempDir::new("ends-v2");
    // A version-2 recorder writes no ends: the example without them.
    let text = without_ends(EXAMPLE);
    let jsonl = dir.write("v3.jsonl", &text);
    let bin = dir.join("v3.bin");
    mtanalyze(["convert".as_ref(), jsonl.as_os_str(), bin.as_os_str()]).success();
    let mut bytes = std::fs::read(&bin).expect("converted");
    // The version is the u32 at byte offset 8 (as in errors.rs).
    assert_eq!(&bytes[8..12], &3u32.to_le_bytes());
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    let v2 = dir.write("v2.bin", &bytes);
    // Version 3 can say its stacks did not end; version 2 cannot.
    assert!(stacks_table(&bin).contains("logical stacks: 0 ended, 2 still open"));
    let table = stacks_table(&v2);
    assert!(table.contains("(binary, format 2)"), "{table}");
    assert!(!table.contains("ended"), "{table}");
    assert!(!table.contains("logical stacks:"), "{table}");
    let json = mtanalyze([v2.as_os_str(), "--format".as_ref(), "json".as_ref()])
        .success()
        .stdout;
    assert!(!json.contains("ended"), "{json}");
    assert!(!json.contains("end_ignored"), "{json}");
}
