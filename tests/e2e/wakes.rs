//! Why a task waited (issue 19): its paused time split at the first wake
//! into waiting (not yet woken) and scheduled (woken, waiting for a
//! thread). The numbers are the worked example's in `semantics.md`.

use serde_json::Value;

use crate::util::{json_report, mtanalyze, TempDir};

/// task-A: runs `handle` 0..10, is woken by thread 2 at 30, runs again
/// 50..60. task-B: woken by itself at 105 while running `f` 100..110,
/// runs again 130..140. task-C: no wake, `g` runs 200..210 and 240..250.
/// A wake of task-A after it finished (300) and several wakes of task-B
/// before one poll change nothing.
const WAKES: &str = r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "task-A"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "handle"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": null}
{"ts": 30, "tid": 2, "ev": "wake", "stack": "task-A"}
{"ts": 40, "tid": 2, "ev": "wake", "stack": "task-A"}
{"ts": 50, "tid": 1, "ev": "switch", "stack": "task-A"}
{"ts": 60, "tid": 1, "ev": "exit", "fn": "handle"}
{"ts": 60, "tid": 1, "ev": "switch", "stack": null}
{"ts": 100, "tid": 1, "ev": "switch", "stack": "task-B"}
{"ts": 100, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 105, "tid": 1, "ev": "wake", "stack": "task-B"}
{"ts": 110, "tid": 1, "ev": "switch", "stack": null}
{"ts": 120, "tid": 2, "ev": "wake", "stack": "task-B"}
{"ts": 130, "tid": 1, "ev": "switch", "stack": "task-B"}
{"ts": 140, "tid": 1, "ev": "exit", "fn": "f"}
{"ts": 140, "tid": 1, "ev": "switch", "stack": null}
{"ts": 200, "tid": 1, "ev": "switch", "stack": "task-C"}
{"ts": 200, "tid": 1, "ev": "enter", "fn": "g"}
{"ts": 210, "tid": 1, "ev": "switch", "stack": null}
{"ts": 240, "tid": 1, "ev": "switch", "stack": "task-C"}
{"ts": 250, "tid": 1, "ev": "exit", "fn": "g"}
{"ts": 250, "tid": 1, "ev": "switch", "stack": null}
{"ts": 300, "tid": 2, "ev": "wake", "stack": "task-A"}
"#;

fn report(dir: &TempDir, clock: &str) -> Value {
    json_report(&dir.write("wakes.jsonl", WAKES), clock)
}

/// (paused, scheduled, waiting) of a function or stack row.
fn split(rows: &Value, key: &str, name: &str) -> [u64; 3] {
    let row = rows
        .as_array()
        .and_then(|r| r.iter().find(|x| x[key] == name))
        .unwrap_or_else(|| panic!("no row {name}"));
    let n = |k: &str| row[k].as_u64().unwrap_or(u64::MAX);
    [n("paused_ns"), n("scheduled_ns"), n("waiting_ns")]
}

#[test]
fn paused_time_splits_at_the_first_wake() {
    let dir = TempDir::new("wakes");
    let r = report(&dir, "stack");
    let f = &r["functions"];
    // Switched out 10..50, woken at 30: waiting 20, scheduled 20.
    assert_eq!(split(f, "function", "handle"), [40, 20, 20]);
    // Woken while running (105), so ready at the switch away: all scheduled.
    assert_eq!(split(f, "function", "f"), [20, 20, 0]);
    // Never woken: all waiting.
    assert_eq!(split(f, "function", "g"), [30, 0, 30]);
    let s = &r["stacks"];
    assert_eq!(split(s, "name", "task-A"), [40, 20, 20]);
    assert_eq!(split(s, "name", "task-B"), [20, 20, 0]);
    assert_eq!(split(s, "name", "task-C"), [30, 0, 30]);
}

#[test]
fn nothing_pauses_under_wall_and_gil_still_adds_up() {
    let dir = TempDir::new("wakes-clocks");
    let r = report(&dir, "wall");
    for row in r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(r["stacks"].as_array().unwrap())
    {
        assert_eq!(
            (row["scheduled_ns"].as_u64(), row["waiting_ns"].as_u64()),
            (Some(0), Some(0))
        );
    }
    let r = report(&dir, "gil");
    // Thread 2's wakes fall inside the tasks' pauses, and nothing else runs
    // while a task does: under gil the tasks run and pause as under stack.
    let f = &r["functions"];
    assert_eq!(split(f, "function", "handle"), [40, 20, 20]);
    assert_eq!(split(f, "function", "f"), [20, 20, 0]);
    assert_eq!(split(f, "function", "g"), [30, 0, 30]);
    for row in r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(r["stacks"].as_array().unwrap())
    {
        let n = |k: &str| row[k].as_u64().unwrap();
        assert_eq!(n("scheduled_ns") + n("waiting_ns"), n("paused_ns"), "{row}");
    }
}

#[test]
fn the_stacks_table_shows_the_split() {
    let dir = TempDir::new("wakes-table");
    let path = dir.write("wakes.jsonl", WAKES);
    let r = mtanalyze([
        path.as_os_str(),
        "--stacks".as_ref(),
        "--width".as_ref(),
        "0".as_ref(),
    ])
    .success();
    let header = r
        .stdout
        .lines()
        .find(|l| l.starts_with("id"))
        .expect("the stacks table");
    assert!(
        header.contains("scheduled") && header.contains("waiting"),
        "{header}"
    );
    let group = mtanalyze([
        path.as_os_str(),
        "--stacks".as_ref(),
        "--group".as_ref(),
        "--width".as_ref(),
        "0".as_ref(),
    ])
    .success();
    assert!(group.stdout.contains("scheduled"), "{}", group.stdout);
    let functions = mtanalyze([path.as_os_str(), "--scheduled".as_ref()]).success();
    let header = functions
        .stdout
        .lines()
        .find(|l| l.contains("ncalls"))
        .unwrap();
    assert!(
        header.contains("scheduled") && header.contains("waiting"),
        "{header}"
    );
}
