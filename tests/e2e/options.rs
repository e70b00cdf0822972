//! `--sort`, `--limit`, `--filter`, `--callers`, `--callees`, `--stacks`,
//! `--thread` and `--stack`, on worked example 1 (see `util::HANDOFF`):
//!
//! | function | tottime | cumtime | paused | stack  |
//! |----------|---------|---------|--------|--------|
//! | handler  | 15      | 40      | 30     | task-1 |
//! | main     | 20      | 20      | 20     | thread:1 |
//! | query    | 25      | 25      | 30     | task-1 |

use std::ffi::OsStr;
use std::path::PathBuf;

use crate::util::{mtanalyze, Run, TempDir, HANDOFF};

struct Fixture {
    _dir: TempDir,
    trace: PathBuf,
}

fn fixture() -> Fixture {
    let dir = TempDir::new("options");
    let trace = dir.write("handoff.jsonl", HANDOFF);
    Fixture { _dir: dir, trace }
}

impl Fixture {
    fn run(&self, args: &[&str]) -> Run {
        let mut all: Vec<&OsStr> = vec![self.trace.as_os_str()];
        all.extend(args.iter().map(OsStr::new));
        mtanalyze(all).success()
    }

    /// Function names in the order of the table's rows.
    fn table_order(&self, args: &[&str]) -> Vec<String> {
        let run = self.run(args);
        let table: Vec<&str> = run
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("ncalls"))
            .skip(2)
            .collect();
        table
            .iter()
            .map(|row| row.split_whitespace().nth(6).unwrap_or_default().to_owned())
            .collect()
    }

    /// Function names in the order of the JSON report.
    fn json_order(&self, args: &[&str]) -> Vec<String> {
        let mut all = args.to_vec();
        all.extend(["--format", "json"]);
        let v = self.run(&all).json();
        v["functions"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .map(|f| f["function"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[test]
fn sort_orders_numbers_descending_and_names_ascending() {
    let f = fixture();
    let cases: [(&str, [&str; 3]); 5] = [
        ("tottime", ["query", "main", "handler"]),
        ("cumtime", ["handler", "query", "main"]),
        // All have one call: ties go by name.
        ("ncalls", ["handler", "main", "query"]),
        ("paused", ["handler", "query", "main"]),
        ("name", ["handler", "main", "query"]),
    ];
    for (key, want) in cases {
        assert_eq!(f.table_order(&["--sort", key]), want, "table --sort {key}");
        assert_eq!(f.json_order(&["--sort", key]), want, "json --sort {key}");
    }
    assert_eq!(
        f.table_order(&[]),
        ["query", "main", "handler"],
        "default is tottime"
    );
}

#[test]
fn limit_keeps_the_first_rows_and_says_so() {
    let f = fixture();
    assert_eq!(f.table_order(&["--limit", "2"]), ["query", "main"]);
    f.run(&["--limit", "2"])
        .stdout_has("showing 2 of 3 functions");
    f.run(&[]).stdout_lacks("showing");
    assert_eq!(
        f.json_order(&["--limit", "1", "--sort", "cumtime"]),
        ["handler"]
    );
    assert_eq!(f.table_order(&["--limit", "0"]), Vec::<String>::new());
}

#[test]
fn filter_matches_the_name_or_the_file_and_line() {
    let f = fixture();
    assert_eq!(
        f.table_order(&["--filter", "^(main|query)$"]),
        ["query", "main"]
    );
    assert_eq!(f.table_order(&["--filter", r"src/h\.rs:5 "]), ["handler"]);
    assert_eq!(f.table_order(&["--filter", "db"]), ["query"]);
    assert_eq!(
        f.table_order(&["--filter", "nothing-matches"]),
        Vec::<String>::new()
    );
    // In JSON, edges touching a kept function stay.
    let v = f.run(&["--filter", "^main$", "--format", "json"]).json();
    assert_eq!(v["functions"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["edges"].as_array().map(Vec::len), Some(0));
    let v = f.run(&["--filter", "^query$", "--format", "json"]).json();
    assert_eq!(v["edges"][0]["caller"], "handler");
}

#[test]
fn callers_and_callees_print_edge_tables() {
    let f = fixture();
    let callers = f.run(&["--callers", "^query$"]);
    callers
        .stdout_has("was called by")
        .stdout_lacks("cumtime  percall");
    let row = callers
        .stdout
        .lines()
        .find(|l| l.starts_with("query"))
        .unwrap_or_default();
    // The edge handler -> query: 1 call, 25 ns self, 25 ns cumulative.
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        [
            "query",
            "(src/db.rs:42)",
            "handler",
            "(src/h.rs:5)",
            "1",
            "25ns",
            "25ns"
        ]
    );
    // --limit counts the selected functions: the first of query and main by tottime.
    let limited = f.run(&["--callers", "^(query|main)$", "--limit", "1"]);
    assert!(
        limited.stdout.lines().any(|l| l.starts_with("query")),
        "{}",
        limited.stdout
    );
    assert!(
        !limited.stdout.lines().any(|l| l.starts_with("main")),
        "{}",
        limited.stdout
    );
    let callees = f.run(&["--callees", "^handler$"]);
    callees.stdout_has("called");
    let row = callees
        .stdout
        .lines()
        .find(|l| l.starts_with("handler"))
        .unwrap_or_default();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        [
            "handler",
            "(src/h.rs:5)",
            "query",
            "(src/db.rs:42)",
            "1",
            "25ns",
            "25ns"
        ]
    );
    // A function nobody called is listed with `-`.
    let roots = f.run(&["--callers", "^main$"]);
    let row = roots
        .stdout
        .lines()
        .find(|l| l.starts_with("main"))
        .unwrap_or_default();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["main", "(src/main.rs:1)", "-"]
    );
    // JSON: only the selected edges.
    let v = f.run(&["--callees", "^main$", "--format", "json"]).json();
    assert_eq!(v["edges"].as_array().map(Vec::len), Some(0));
    let v = f.run(&["--callers", "query", "--format", "json"]).json();
    assert_eq!(v["edges"].as_array().map(Vec::len), Some(1));
}

#[test]
fn stacks_prints_the_per_stack_table() {
    let f = fixture();
    let run = f.run(&["--stacks"]);
    run.stdout_has("id")
        .stdout_has("switches in")
        .stdout_has("max depth");
    run.stdout_lacks("function (file:line)");
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("id"))
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let ids: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(ids, ["thread:1", "thread:2", "stack:1"], "{}", run.stdout);
    // task-1 ran on both threads, two frames deep, for 20 + 30 ns.
    let task = &rows[2];
    assert_eq!(task[1..4], ["task-1", "1,2", "50ns"], "{}", run.stdout);
}

/// Stack ids in the order of the `--stacks` table's rows.
fn stack_order(run: &Run) -> Vec<String> {
    run.stdout
        .lines()
        .skip_while(|l| !l.starts_with("id"))
        .skip(2)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn stacks_obey_sort_and_limit() {
    let f = fixture();
    // Running: main-thread 70, task-1 50, worker-1 0; paused: 20, 30, 30
    // (ties in the report's order); events: 2, 4, 0.
    for (sort, want) in [
        ("tottime", ["thread:1", "stack:1", "thread:2"]),
        ("cumtime", ["thread:1", "stack:1", "thread:2"]),
        ("paused", ["thread:2", "stack:1", "thread:1"]),
        ("ncalls", ["stack:1", "thread:1", "thread:2"]),
        ("name", ["thread:1", "stack:1", "thread:2"]),
    ] {
        let run = f.run(&["--stacks", "--sort", sort]);
        assert_eq!(stack_order(&run), want, "--sort {sort}");
        run.stdout_lacks("showing");
    }
    let run = f.run(&["--stacks", "--limit", "2"]);
    assert_eq!(stack_order(&run), ["thread:1", "thread:2"]);
    run.stdout_has("showing 2 of 3 stacks");
    let run = f.run(&["--stacks", "--limit", "1", "--sort", "paused"]);
    assert_eq!(stack_order(&run), ["thread:2"]);
}

/// Two workers run three tasks; the names differ only in their numbers.
const TASKS: &str = r#"{"ev": "thread", "tid": 1, "name": "worker-1"}
{"ev": "thread", "tid": 2, "name": "worker-2"}
{"ts": 0, "tid": 1, "ev": "switch", "stack": "task-1"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 20, "tid": 1, "ev": "exit", "fn": "f"}
{"ts": 30, "tid": 1, "ev": "switch", "stack": null}
{"ts": 40, "tid": 1, "ev": "switch", "stack": "task-2"}
{"ts": 50, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 60, "tid": 1, "ev": "exit", "fn": "f"}
{"ts": 70, "tid": 1, "ev": "switch", "stack": null}
{"ts": 0, "tid": 2, "ev": "switch", "stack": "task-3"}
{"ts": 5, "tid": 2, "ev": "enter", "fn": "f"}
{"ts": 25, "tid": 2, "ev": "exit", "fn": "f"}
{"ts": 35, "tid": 2, "ev": "switch", "stack": null}
"#;

#[test]
fn stacks_group_sums_stacks_whose_names_differ_in_numbers() {
    let dir = TempDir::new("stack-groups");
    let trace = dir.write("tasks.jsonl", TASKS);
    let rows = |extra: &[&str]| -> Vec<Vec<String>> {
        let mut args = vec![trace.as_os_str(), "--stacks".as_ref(), "--group".as_ref()];
        args.extend(extra.iter().map(OsStr::new));
        mtanalyze(args)
            .success()
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("stacks"))
            .skip(2)
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect()
    };
    // stacks, threads, running, per stack, paused, per stack, scheduled
    // (no wakes: 0), switches in, max depth, events, name. The tasks ran
    // 30 + 30 + 35 ns; the workers' own stacks 10 + 35 ns, paused 60 + 35 ns.
    assert_eq!(
        rows(&[]),
        [
            ["2", "2", "45ns", "22.5ns", "95ns", "47.5ns", "0ns", "5", "0", "0", "worker-#"],
            ["3", "2", "95ns", "31.7ns", "0ns", "0ns", "0ns", "3", "1", "6", "task-#"],
        ]
    );
    let names = |extra: &[&str]| -> Vec<String> {
        rows(extra)
            .into_iter()
            .filter_map(|r| r.last().cloned())
            .collect()
    };
    assert_eq!(names(&["--sort", "tottime"]), ["task-#", "worker-#"]);
    assert_eq!(names(&["--sort", "paused"]), ["worker-#", "task-#"]);
    assert_eq!(names(&["--sort", "ncalls", "--limit", "1"]), ["task-#"]);
    let run = mtanalyze([trace.as_os_str(), "--group".as_ref()]);
    assert_eq!(run.code, Some(2), "--group needs --stacks: {}", run.stderr);
}

#[test]
fn thread_and_stack_select_the_replayed_stacks() {
    let f = fixture();
    // Thread 2 ran its own stack and task-1 (handler, query), never main.
    assert_eq!(
        f.json_order(&["--thread", "2", "--sort", "name"]),
        ["handler", "query"]
    );
    assert_eq!(
        f.json_order(&["--thread", "1", "--sort", "name"]),
        ["handler", "main", "query"]
    );
    assert_eq!(
        f.json_order(&["--stack", "task-1", "--sort", "name"]),
        ["handler", "query"]
    );
    assert_eq!(f.json_order(&["--stack", "thread:1"]), ["main"]);
    assert_eq!(
        f.json_order(&["--stack", "thread:1", "--stack", "stack:1", "--sort", "name"]),
        ["handler", "main", "query"]
    );
    assert_eq!(f.json_order(&["--thread", "3"]), Vec::<String>::new());
    // The table's header says how many stacks were replayed.
    f.run(&["--thread", "2"]).stdout_has("stacks: 2 of 3  ");
    f.run(&[]).stdout_has("stacks: 3  ");
    let v = f.run(&["--stack", "task-1", "--format", "json"]).json();
    let ids: Vec<&str> = v["stacks"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["stack:1"]);
}
