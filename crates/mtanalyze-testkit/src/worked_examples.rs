//! The worked examples of `schemas/semantics.md`, with the numbers written
//! there, as data that tests can run against the reference and the real
//! analyzer. Each entry is (name, JSON lines, clock, expected report); the
//! expected reports are written out by hand from the document's tables.
//!
//! Keep this file and `schemas/semantics.md` in step: the same events, the
//! same numbers.

use crate::reference::{Clock, EdgeStats, FnStats, RefReport};

/// Per-function row: ncalls, primitive_calls, tottime_ns, cumtime_ns, paused_ns.
fn function(name: &str, row: [u64; 5]) -> (String, FnStats) {
    let [ncalls, primitive_calls, tottime_ns, cumtime_ns, paused_ns] = row;
    let stats = FnStats {
        ncalls,
        primitive_calls,
        tottime_ns,
        cumtime_ns,
        paused_ns,
    };
    (name.to_string(), stats)
}

/// Per-edge row: ncalls, primitive_calls, tottime_ns, cumtime_ns.
fn edge(caller: &str, callee: &str, row: [u64; 4]) -> ((String, String), EdgeStats) {
    let [ncalls, primitive_calls, tottime_ns, cumtime_ns] = row;
    let stats = EdgeStats {
        ncalls,
        primitive_calls,
        tottime_ns,
        cumtime_ns,
    };
    ((caller.to_string(), callee.to_string()), stats)
}

fn report(
    functions: Vec<(String, FnStats)>,
    edges: Vec<((String, String), EdgeStats)>,
    warnings: u64,
) -> RefReport {
    RefReport {
        functions: functions.into_iter().collect(),
        edges: edges.into_iter().collect(),
        warnings,
        ended: Default::default(),
    }
}

/// Example 1 (stack clock) and example 2 (wall clock) share these events: a
/// task started on thread 1 and finished on thread 2.
pub const FIBER_HANDOFF: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": "task-1"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "handler"}
{"ts": 20, "tid": 1, "ev": "enter", "fn": "query"}
{"ts": 30, "tid": 1, "ev": "switch", "stack": null}
{"ts": 40, "tid": 1, "ev": "exit", "fn": "main"}
{"ts": 60, "tid": 2, "ev": "switch", "stack": "task-1"}
{"ts": 75, "tid": 2, "ev": "exit", "fn": "query"}
{"ts": 80, "tid": 2, "ev": "exit", "fn": "handler"}
{"ts": 90, "tid": 2, "ev": "switch", "stack": null}
"#;

/// Example 3 (gil clock): two threads taking turns.
pub const GIL_TURNS: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "work"}
{"ts": 10, "tid": 2, "ev": "enter", "fn": "work"}
{"ts": 25, "tid": 1, "ev": "enter", "fn": "io"}
{"ts": 30, "tid": 1, "ev": "exit", "fn": "io"}
{"ts": 40, "tid": 2, "ev": "exit", "fn": "work"}
{"ts": 50, "tid": 1, "ev": "exit", "fn": "work"}
"#;

/// Example 4 (stack clock): direct, mutual and edge recursion.
pub const RECURSION: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "g"}
{"ts": 20, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 30, "tid": 1, "ev": "enter", "fn": "g"}
{"ts": 40, "tid": 1, "ev": "exit", "fn": "g"}
{"ts": 50, "tid": 1, "ev": "exit", "fn": "f"}
{"ts": 60, "tid": 1, "ev": "exit", "fn": "g"}
{"ts": 70, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 80, "tid": 1, "ev": "exit", "fn": "f"}
{"ts": 90, "tid": 1, "ev": "exit", "fn": "f"}
"#;

/// The worked example of "Ends of logical stacks" (`--clock stack`):
/// task-1 is left inside `handle` > `query` at 20, woken at 45 and dropped
/// at 60; task-2 runs `step` 20..30 and is dropped at 40; task-9 never ran,
/// so its end is ignored; thread 2 runs `serve` 0..100. Its numbers are
/// checked in `crates/mtanalyze/tests/semantics.rs` and `tests/e2e/ends.rs`
/// (the document's table has columns this module's reports do not).
pub const ENDS: &str = r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "task-1"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "handle"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "query"}
{"ts": 20, "tid": 1, "ev": "switch", "stack": "task-2"}
{"ts": 20, "tid": 1, "ev": "enter", "fn": "step"}
{"ts": 30, "tid": 1, "ev": "exit", "fn": "step"}
{"ts": 30, "tid": 1, "ev": "switch", "stack": null}
{"ts": 0, "tid": 2, "ev": "enter", "fn": "serve"}
{"ts": 40, "tid": 2, "ev": "end", "stack": "task-2"}
{"ts": 45, "tid": 2, "ev": "wake", "stack": "task-1"}
{"ts": 60, "tid": 2, "ev": "end", "stack": "task-1"}
{"ts": 70, "tid": 2, "ev": "end", "stack": "task-9"}
{"ts": 100, "tid": 2, "ev": "exit", "fn": "serve"}
"#;

/// The same lines without their `end` events: what a trace of a recorder
/// that writes none (format version 2) would hold.
pub fn without_ends(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains("\"ev\": \"end\""))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Example 5 (stack clock): every repair, plus frames open at the end.
pub const REPAIRS: &str = r#"{"ts": 100, "tid": 1, "ev": "enter", "fn": "a"}
{"ts": 105, "tid": 2, "ev": "enter", "fn": "a"}
{"ts": 110, "tid": 1, "ev": "enter", "fn": "b"}
{"ts": 120, "tid": 1, "ev": "enter", "fn": "c"}
{"ts": 125, "tid": 2, "ev": "enter", "fn": "b"}
{"ts": 130, "tid": 1, "ev": "exit", "fn": "a"}
{"ts": 140, "tid": 1, "ev": "exit", "fn": "a"}
{"ts": 135, "tid": 1, "ev": "enter", "fn": "d"}
{"ts": 150, "tid": 1, "ev": "exit", "fn": "b"}
"#;

pub fn worked_examples() -> Vec<(&'static str, &'static str, Clock, RefReport)> {
    vec![
        (
            "fiber-handoff",
            FIBER_HANDOFF,
            Clock::Stack,
            report(
                vec![
                    function("handler", [1, 1, 15, 40, 30]),
                    function("main", [1, 1, 20, 20, 20]),
                    function("query", [1, 1, 25, 25, 30]),
                ],
                vec![edge("handler", "query", [1, 1, 25, 25])],
                0,
            ),
        ),
        (
            "fiber-handoff-wall",
            FIBER_HANDOFF,
            Clock::Wall,
            report(
                vec![
                    function("handler", [1, 1, 15, 70, 0]),
                    function("main", [1, 1, 40, 40, 0]),
                    function("query", [1, 1, 55, 55, 0]),
                ],
                vec![edge("handler", "query", [1, 1, 55, 55])],
                0,
            ),
        ),
        (
            "gil-turns",
            GIL_TURNS,
            Clock::Gil,
            report(
                vec![
                    function("io", [1, 1, 5, 5, 0]),
                    function("work", [2, 2, 35, 40, 40]),
                ],
                vec![edge("work", "io", [1, 1, 5, 5])],
                0,
            ),
        ),
        (
            "recursion",
            RECURSION,
            Clock::Stack,
            report(
                vec![
                    function("f", [3, 1, 60, 90, 0]),
                    function("g", [2, 1, 30, 50, 0]),
                ],
                vec![
                    edge("f", "f", [1, 1, 10, 10]),
                    edge("f", "g", [2, 1, 30, 50]),
                    edge("g", "f", [1, 1, 20, 30]),
                ],
                0,
            ),
        ),
        (
            "repairs",
            REPAIRS,
            Clock::Stack,
            report(
                vec![
                    function("a", [2, 2, 30, 75, 0]),
                    function("b", [2, 2, 35, 45, 0]),
                    function("c", [1, 1, 10, 10, 0]),
                    function("d", [1, 1, 10, 10, 0]),
                ],
                vec![
                    edge("a", "b", [2, 2, 35, 45]),
                    edge("b", "c", [1, 1, 10, 10]),
                ],
                4,
            ),
        ),
    ]
}
