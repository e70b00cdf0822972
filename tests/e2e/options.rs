//! `--sort`, `--limit`, `--filter`, `--callers`, `--callees`, `--stacks`,
//! `--thread` and `--stack`, on worked example 1 (see `util::HANDOFF`),
//! and pstats' other sort keys on a trace made for them (`PSTATS_KEYS`):
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

/// One thread calls, in turn: `zed` twice, `alpha` recursing three deep,
/// `beta`, which calls the file-less `mid` twice, and another `alpha`.
/// Every key but `paused`, `name` and `nfl` orders the rows its own way:
///
/// | function | file:line | ncalls | pcalls | tottime | cumtime | standard name    |
/// |----------|-----------|--------|--------|---------|---------|------------------|
/// | zed      | a.py:10   | 2      | 2      | 20      | 20      | `a.py:10(zed)`   |
/// | alpha    | a.py:9    | 3      | 1      | 5       | 5       | `a.py:9(alpha)`  |
/// | beta     | b.py:100  | 1      | 1      | 3       | 30      | `b.py:100(beta)` |
/// | mid      | (none)    | 2      | 2      | 27      | 27      | `mid`            |
/// | alpha    | b.py:2    | 1      | 1      | 2       | 2       | `b.py:2(alpha)`  |
const PSTATS_KEYS: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "zed", "file": "a.py", "line": 10}
{"ts": 10, "tid": 1, "ev": "exit", "fn": "zed"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "zed", "file": "a.py", "line": 10}
{"ts": 20, "tid": 1, "ev": "exit", "fn": "zed"}
{"ts": 20, "tid": 1, "ev": "enter", "fn": "alpha", "file": "a.py", "line": 9}
{"ts": 21, "tid": 1, "ev": "enter", "fn": "alpha", "file": "a.py", "line": 9}
{"ts": 22, "tid": 1, "ev": "enter", "fn": "alpha", "file": "a.py", "line": 9}
{"ts": 23, "tid": 1, "ev": "exit", "fn": "alpha"}
{"ts": 24, "tid": 1, "ev": "exit", "fn": "alpha"}
{"ts": 25, "tid": 1, "ev": "exit", "fn": "alpha"}
{"ts": 40, "tid": 1, "ev": "enter", "fn": "beta", "file": "b.py", "line": 100}
{"ts": 41, "tid": 1, "ev": "enter", "fn": "mid"}
{"ts": 55, "tid": 1, "ev": "exit", "fn": "mid"}
{"ts": 56, "tid": 1, "ev": "enter", "fn": "mid"}
{"ts": 69, "tid": 1, "ev": "exit", "fn": "mid"}
{"ts": 70, "tid": 1, "ev": "exit", "fn": "beta"}
{"ts": 80, "tid": 1, "ev": "enter", "fn": "alpha", "file": "b.py", "line": 2}
{"ts": 82, "tid": 1, "ev": "exit", "fn": "alpha"}
"#;

fn pstats_fixture() -> Fixture {
    let dir = TempDir::new("pstats-keys");
    let trace = dir.write("keys.jsonl", PSTATS_KEYS);
    Fixture { _dir: dir, trace }
}

/// Rows as `name (file:line)`, or `name` without a file, from the table's
/// last column and from the JSON report.
fn sites(f: &Fixture, args: &[&str]) -> Vec<String> {
    let run = f.run(args);
    let table: Vec<String> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("ncalls"))
        .skip(2)
        .map(|row| row.split_whitespace().skip(6).collect::<Vec<_>>().join(" "))
        .collect();
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let v = f.run(&all).json();
    let json: Vec<String> = v["functions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| match (&f["function"], f["file"].as_str(), &f["line"]) {
            (name, Some(""), _) => name.as_str().unwrap_or_default().to_owned(),
            (name, file, line) => format!(
                "{} ({}:{line})",
                name.as_str().unwrap_or_default(),
                file.unwrap_or_default()
            ),
        })
        .collect();
    assert_eq!(table, json, "table and JSON of {args:?}");
    table
}

/// Every `--sort` key (clap's names) with its rows on `PSTATS_KEYS`.
const PSTATS_ORDERS: [(&str, [&str; 5]); 10] = [
    (
        "tottime",
        [
            "mid",
            "zed (a.py:10)",
            "alpha (a.py:9)",
            "beta (b.py:100)",
            "alpha (b.py:2)",
        ],
    ),
    (
        "cumtime",
        [
            "beta (b.py:100)",
            "mid",
            "zed (a.py:10)",
            "alpha (a.py:9)",
            "alpha (b.py:2)",
        ],
    ),
    // Ties (mid and zed; the single calls) by name, file, line.
    (
        "ncalls",
        [
            "alpha (a.py:9)",
            "mid",
            "zed (a.py:10)",
            "alpha (b.py:2)",
            "beta (b.py:100)",
        ],
    ),
    // No paused time: all tied.
    (
        "paused",
        [
            "alpha (a.py:9)",
            "alpha (b.py:2)",
            "beta (b.py:100)",
            "mid",
            "zed (a.py:10)",
        ],
    ),
    (
        "name",
        [
            "alpha (a.py:9)",
            "alpha (b.py:2)",
            "beta (b.py:100)",
            "mid",
            "zed (a.py:10)",
        ],
    ),
    // Most primitive calls first: alpha's three calls are one.
    (
        "pcalls",
        [
            "mid",
            "zed (a.py:10)",
            "alpha (a.py:9)",
            "alpha (b.py:2)",
            "beta (b.py:100)",
        ],
    ),
    // A to Z, no file counting as pstats' built-ins' `~`, so last.
    (
        "file",
        [
            "alpha (a.py:9)",
            "zed (a.py:10)",
            "alpha (b.py:2)",
            "beta (b.py:100)",
            "mid",
        ],
    ),
    // Numbers ascending: 0, 2, 9, 10, 100.
    (
        "line",
        [
            "mid",
            "alpha (b.py:2)",
            "alpha (a.py:9)",
            "zed (a.py:10)",
            "beta (b.py:100)",
        ],
    ),
    // Text: `a.py:10(zed)` < `a.py:9(alpha)`, `b.py:100(beta)` <
    // `b.py:2(alpha)`, then the built-in's bare `mid`.
    (
        "stdname",
        [
            "zed (a.py:10)",
            "alpha (a.py:9)",
            "beta (b.py:100)",
            "alpha (b.py:2)",
            "mid",
        ],
    ),
    (
        "nfl",
        [
            "alpha (a.py:9)",
            "alpha (b.py:2)",
            "beta (b.py:100)",
            "mid",
            "zed (a.py:10)",
        ],
    ),
];

/// The rows of `key` in [`PSTATS_ORDERS`].
fn pstats_order(key: &str) -> [&'static str; 5] {
    let found = PSTATS_ORDERS.iter().find(|(k, _)| *k == key);
    found.map(|(_, rows)| *rows).unwrap_or_default()
}

#[test]
fn sort_takes_every_pstats_key() {
    let f = pstats_fixture();
    for (key, want) in PSTATS_ORDERS {
        assert_eq!(sites(&f, &["--sort", key]), want, "--sort {key}");
    }
    // --limit after the sort, as for the other keys.
    assert_eq!(
        sites(&f, &["--sort", "stdname", "--limit", "2"]),
        ["zed (a.py:10)", "alpha (a.py:9)"]
    );
}

#[test]
fn sort_takes_cprofile_names_for_the_same_keys() {
    let f = pstats_fixture();
    for (alias, key) in [
        ("calls", "ncalls"),
        ("cumulative", "cumtime"),
        ("time", "tottime"),
        ("filename", "file"),
        ("module", "file"),
    ] {
        // The key's rows are its own: an alias of another key would differ.
        let rows = pstats_order(key);
        let same: Vec<&str> = PSTATS_ORDERS
            .iter()
            .filter(|(_, r)| *r == rows)
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(same, [key]);
        assert_eq!(sites(&f, &["--sort", alias]), rows, "--sort {alias}");
        for format in ["table", "json", "markdown"] {
            let args = |sort| ["--sort", sort, "--format", format];
            assert_eq!(
                f.run(&args(alias)).stdout,
                f.run(&args(key)).stdout,
                "--sort {alias} is --sort {key} ({format})"
            );
        }
    }
    let help = mtanalyze(["--help"]).success();
    for key in ["pcalls", "file", "line", "stdname", "nfl", "cumulative"] {
        help.stdout_has(key);
    }
}

#[test]
fn stacks_take_only_the_keys_a_stack_has() {
    let f = fixture();
    for key in ["pcalls", "file", "filename", "line", "stdname", "nfl"] {
        let mut args: Vec<&OsStr> = vec![f.trace.as_os_str()];
        args.extend(["--stacks", "--sort", key].map(OsStr::new));
        let line = mtanalyze(&args).fails_with_one_line();
        let shown = if key == "filename" { "file" } else { key };
        assert_eq!(
            line,
            format!(
                "mtanalyze: --sort {shown} does not apply to --stacks: stack rows sort by \
                 tottime, cumtime, ncalls, paused or name"
            )
        );
    }
    // cProfile's names of the keys a stack has work.
    assert_eq!(
        stack_order(&f.run(&["--stacks", "--sort", "calls"])),
        stack_order(&f.run(&["--stacks", "--sort", "ncalls"]))
    );
}

#[test]
fn by_trace_rows_take_the_new_keys() {
    let dir = TempDir::new("pstats-keys-by-trace");
    let one = dir.write("one.jsonl", PSTATS_KEYS);
    let two = dir.write("two.jsonl", PSTATS_KEYS);
    let run = mtanalyze([
        one.as_os_str(),
        two.as_os_str(),
        "--by-trace".as_ref(),
        "--sort".as_ref(),
        "stdname".as_ref(),
    ])
    .success();
    // ncalls..percall, then the trace, then the function: each function
    // twice, in standard-name order, one.jsonl first.
    let rows: Vec<(String, String)> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("ncalls"))
        .skip(2)
        .map(|row| {
            let cells: Vec<&str> = row.split_whitespace().collect();
            (cells[6].to_owned(), cells[7..].join(" "))
        })
        .collect();
    let mut want = Vec::new();
    for site in pstats_order("stdname") {
        for trace in ["one.jsonl", "two.jsonl"] {
            want.push((trace.to_owned(), site.to_owned()));
        }
    }
    assert_eq!(rows, want, "{}", run.stdout);
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
    // (no wakes: `-`, not measured), switches in, max depth, events, name. The tasks ran
    // 30 + 30 + 35 ns; the workers' own stacks 10 + 35 ns, paused 60 + 35 ns.
    assert_eq!(
        rows(&[]),
        [
            ["2", "2", "45ns", "22.5ns", "95ns", "47.5ns", "-", "5", "0", "0", "worker-#"],
            ["3", "2", "95ns", "31.7ns", "0ns", "0ns", "-", "3", "1", "6", "task-#"],
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

/// Tasks named by their spawn site and id, as `mtrace-tokio` names them:
/// two spawned at line 42 of one file, one at its line 57.
const SPAWN_SITES: &str = r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "src/server.rs:42 task-1"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": null}
{"ts": 20, "tid": 1, "ev": "switch", "stack": "src/server.rs:42 task-2"}
{"ts": 30, "tid": 1, "ev": "switch", "stack": null}
{"ts": 40, "tid": 1, "ev": "switch", "stack": "src/server.rs:57 task-3"}
{"ts": 50, "tid": 1, "ev": "switch", "stack": null}
"#;

#[test]
fn stacks_group_sums_tasks_of_one_spawn_site_not_of_one_file() {
    let dir = TempDir::new("spawn-sites");
    let trace = dir.write("sites.jsonl", SPAWN_SITES);
    let run = mtanalyze([trace.as_os_str(), "--stacks".as_ref(), "--group".as_ref()]).success();
    // (stacks in the group, its name): the line stays, the task id folds.
    let groups: Vec<(String, String)> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("stacks"))
        .skip(2)
        .filter_map(|l| {
            let (count, _) = l.trim_start().split_once(' ')?;
            let name = l.rsplit_once("  ")?.1.trim();
            Some((count.to_owned(), name.to_owned()))
        })
        .filter(|(_, name)| name.starts_with("src/"))
        .collect();
    assert_eq!(
        groups,
        [
            ("2".to_owned(), "src/server.rs:42 task-#".to_owned()),
            ("1".to_owned(), "src/server.rs:57 task-#".to_owned()),
        ],
        "{}",
        run.stdout
    );
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
