//! Importing Chrome Trace Event JSON: files in the shapes VizTracer and the
//! `tracing-chrome` crate write, the format's corner cases, and mtanalyze's
//! own Chrome export read back.

use serde_json::Value;

use crate::util::{mtanalyze, TempDir, HANDOFF};

/// VizTracer's shape: the object form, `X` events written when each call
/// returns (callees before callers), names `qualname (file:line)`,
/// microseconds with three decimals, instants, counters and metadata.
const VIZTRACER: &str = r#"{"traceEvents":[{"ph":"M","pid":4242,"tid":4242,"name":"process_name","args":{"name":"MainProcess"}},{"ph":"M","pid":4242,"tid":100,"name":"thread_name","args":{"name":"MainThread"}},{"ph":"M","pid":4242,"tid":101,"name":"thread_name","args":{"name":"worker"}},{"pid":4242,"tid":100,"ts":1001.250,"ph":"X","cat":"fee","dur":3.125,"name":"work (/app/m.py:5)","caller_lineno":2},{"pid":4242,"tid":100,"ts":1005.000,"ph":"X","cat":"fee","dur":2.000,"name":"work (/app/m.py:5)","caller_lineno":3,"args":{"n":3}},{"pid":4242,"tid":101,"ts":1002.000,"ph":"X","cat":"fee","dur":4.001,"name":"work (/app/m.py:5)"},{"pid":4242,"tid":100,"ts":1008.000,"ph":"X","cat":"fee","dur":0.500,"name":"builtins.print"},{"pid":4242,"tid":100,"ts":1009.000,"ph":"i","cat":"instant","name":"checkpoint","s":"p"},{"pid":4242,"tid":100,"ts":1009.500,"ph":"C","name":"memory","args":{"rss":1234}},{"pid":4242,"tid":100,"ts":1000.000,"ph":"X","cat":"fee","dur":10.500,"name":"main (/app/m.py:1)"}], "viztracer_metadata": {"overflow":false}}"#;

/// `tracing-chrome`'s shape: the array form, one event per line, `B`/`E`
/// per span entry and exit with `.file`/`.line`, thread ids from 0,
/// instants, and async `b`/`e` events (ignored).
const TRACING_CHROME: &str = r#"[
{"ph":"M","pid":1,"name":"thread_name","tid":0,"args":{"name":"main"}},
{"ph":"B","pid":1,"ts":12.5,"name":"handle","cat":"server","tid":0,".file":"src/server.rs",".line":40,"args":{"id":"7"}},
{"ph":"B","pid":1,"ts":13.25,"name":"query","cat":"server::db","tid":0,".file":"src/db.rs",".line":9},
{"ph":"i","pid":1,"ts":14.0,"name":"event src/db.rs:12","cat":"server::db","tid":0,"s":"t"},
{"ph":"M","pid":1,"name":"thread_name","tid":1,"args":{"name":"tokio-runtime-worker"}},
{"ph":"B","pid":1,"ts":14.0,"name":"query","cat":"server::db","tid":1,".file":"src/db.rs",".line":9},
{"ph":"E","pid":1,"ts":15.75,"name":"query","cat":"server::db","tid":0,".file":"src/db.rs",".line":9},
{"ph":"b","pid":1,"ts":16.0,"name":"request","cat":"server","tid":0,"id":5},
{"ph":"E","pid":1,"ts":17.0,"name":"handle","cat":"server","tid":0,".file":"src/server.rs",".line":40},
{"ph":"e","pid":1,"ts":18.0,"name":"request","cat":"server","tid":0,"id":5},
{"ph":"E","pid":1,"ts":20.0,"name":"query","cat":"server::db","tid":1,".file":"src/db.rs",".line":9}
]"#;

/// Older `tracing-chrome` releases: locations in `args`, a comma after
/// every event and no closing bracket.
const TRACING_CHROME_OLD: &str = r#"[{"ph":"M","pid":1,"name":"thread_name","tid":0,"args":{"name":"0"}},{"ph":"B","pid":1,"ts":1.0,"name":"parse","cat":"app","tid":0,"args":{"[file]":"src/p.rs","[line]":3}},{"ph":"E","pid":1,"ts":4.5,"name":"parse","cat":"app","tid":0,"args":{"[file]":"src/p.rs","[line]":3}},"#;

fn report_of(path: &std::path::Path) -> Value {
    mtanalyze([
        path.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--sort".as_ref(),
        "name".as_ref(),
    ])
    .success()
    .json()
}

/// (function, file, line, ncalls, tottime_ns, cumtime_ns) per function.
fn functions(report: &Value) -> Vec<(String, String, u64, u64, u64, u64)> {
    report["functions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["function"].as_str().unwrap_or_default().to_owned(),
                f["file"].as_str().unwrap_or_default().to_owned(),
                f["line"].as_u64().unwrap_or_default(),
                f["ncalls"].as_u64().unwrap_or_default(),
                f["tottime_ns"].as_u64().unwrap_or_default(),
                f["cumtime_ns"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

fn f(
    name: &str,
    file: &str,
    line: u64,
    ncalls: u64,
    tottime: u64,
    cumtime: u64,
) -> (String, String, u64, u64, u64, u64) {
    (name.into(), file.into(), line, ncalls, tottime, cumtime)
}

fn thread_names(report: &Value) -> Vec<(String, u64)> {
    report["trace"]["threads"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default().to_owned(),
                t["os_tid"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn a_viztracer_trace_is_analyzed_with_its_sites_threads_and_nanoseconds() {
    let dir = TempDir::new("import-viztracer");
    let trace = dir.write("result.json", VIZTRACER);
    let r = report_of(&trace);
    assert_eq!(r["trace"]["input_format"], "chrome");
    assert_eq!(r["trace"]["pid"], 4242);
    assert_eq!(r["trace"]["first_event_ns"], 1_000_000);
    // The counter at 1009.5 µs is ignored but the trace lasts until main returns.
    assert_eq!(r["trace"]["end_ns"], 1_010_500);
    assert_eq!(
        thread_names(&r),
        [("MainThread".to_owned(), 100), ("worker".to_owned(), 101)]
    );
    assert_eq!(
        functions(&r),
        [
            f("builtins.print", "", 0, 1, 500, 500),
            f(
                "main",
                "/app/m.py",
                1,
                1,
                10_500 - 3_125 - 2_000 - 500,
                10_500
            ),
            f("work", "/app/m.py", 5, 3, 3_125 + 2_000 + 4_001, 9_126),
        ]
    );
    let edges: Vec<_> = r["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["caller"].clone(),
                e["callee"].clone(),
                e["ncalls"].clone(),
            )
        })
        .collect();
    assert_eq!(
        edges,
        [
            ("main".into(), "builtins.print".into(), 1.into()),
            ("main".into(), "work".into(), 2.into())
        ]
    );
}

#[test]
fn a_tracing_chrome_trace_pairs_begins_and_ends_per_thread() {
    let dir = TempDir::new("import-tracing-chrome");
    let trace = dir.write("trace-1700000000.json", TRACING_CHROME);
    let r = report_of(&trace);
    assert_eq!(r["trace"]["input_format"], "chrome");
    assert_eq!(
        thread_names(&r),
        [
            ("main".to_owned(), 0),
            ("tokio-runtime-worker".to_owned(), 1)
        ]
    );
    assert_eq!(
        functions(&r),
        [
            f("handle", "src/server.rs", 40, 1, 4_500 - 2_500, 4_500),
            f("query", "src/db.rs", 9, 2, 2_500 + 6_000, 8_500),
        ]
    );
    let folded = mtanalyze([
        trace.as_os_str(),
        "--format".as_ref(),
        "folded".as_ref(),
        "--per-thread".as_ref(),
    ])
    .success();
    assert_eq!(
        folded.stdout,
        "main;handle 2000\nmain;handle;query 2500\ntokio-runtime-worker;query 6000\n"
    );
}

#[test]
fn an_array_cut_off_before_its_closing_bracket_still_reads() {
    let dir = TempDir::new("import-unclosed");
    let trace = dir.write("old.json", TRACING_CHROME_OLD);
    let r = report_of(&trace);
    assert_eq!(functions(&r), [f("parse", "src/p.rs", 3, 1, 3_500, 3_500)]);
}

#[test]
fn nesting_comes_from_the_times_not_the_order_of_the_file() {
    let dir = TempDir::new("import-nesting");
    // Same start: the longer one is the parent. At 4, b exits before d and
    // c enter, and d, the longer, encloses c (zero-length). d outlives its
    // parent a and is cut at a's end.
    let text = r#"[
{"ph":"X","name":"d","ts":4,"dur":8,"pid":1,"tid":7},
{"ph":"X","name":"c","ts":4,"dur":0,"pid":1,"tid":7},
{"ph":"X","name":"b","ts":0,"dur":4,"pid":1,"tid":7},
{"ph":"X","name":"a","ts":0,"dur":10,"pid":1,"tid":7}
]"#;
    let trace = dir.write("nesting.json", text);
    let run = mtanalyze([trace.as_os_str(), "--format".as_ref(), "folded".as_ref()]).success();
    assert_eq!(run.stdout, "a 0\na;b 4000\na;d 6000\na;d;c 0\n");
}

#[test]
fn unmatched_begins_close_at_the_end_and_unmatched_ends_are_warnings() {
    let dir = TempDir::new("import-unmatched");
    let text = r#"{"displayTimeUnit": "ns", "traceEvents": [
{"ph":"E","ts":0.5,"pid":1,"tid":1},
{"ph":"B","name":"open","ts":1,"pid":1,"tid":1},
{"ph":"X","name":"inner","ts":2,"dur":1,"pid":1,"tid":1},
{"ph":"i","name":"last","ts":11,"pid":1,"tid":1,"s":"g"}
]}"#;
    let trace = dir.write("unmatched.json", text);
    let run = mtanalyze([
        trace.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--sort".as_ref(),
        "name".as_ref(),
    ])
    .success();
    assert!(run.stderr.contains("exit_on_empty_stack"), "{}", run.stderr);
    let r = run.json();
    let open: Vec<_> = functions(&r)
        .into_iter()
        .filter(|f| f.0 != "(unnamed)")
        .collect();
    assert_eq!(
        open,
        [
            f("inner", "", 0, 1, 1_000, 1_000),
            f("open", "", 0, 1, 9_000, 10_000)
        ]
    );
}

#[test]
fn chrome_export_reads_back_with_the_same_numbers() {
    let dir = TempDir::new("import-round-trip");
    let original = dir.write("handoff.jsonl", HANDOFF);
    let exported = dir.join("handoff.json");
    mtanalyze([
        "export".as_ref(),
        original.as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
        "-o".as_ref(),
        exported.as_os_str(),
    ])
    .success();
    let (a, b) = (report_of(&original), report_of(&exported));
    assert_eq!(b["trace"]["input_format"], "chrome");
    // Each stack became a thread whose paused stretches are switches away,
    // so under the stack clock every function and edge is the same.
    assert_eq!(a["functions"], b["functions"]);
    assert_eq!(a["edges"], b["edges"]);
}

#[test]
fn convert_writes_an_imported_trace_as_binary() {
    let dir = TempDir::new("import-convert");
    let trace = dir.write("viz.json", VIZTRACER);
    let bin = dir.join("viz.bin");
    mtanalyze(["convert".as_ref(), trace.as_os_str(), bin.as_os_str()]).success();
    let (direct, converted) = (report_of(&trace), report_of(&bin));
    assert_eq!(converted["trace"]["input_format"], "binary");
    assert_eq!(direct["functions"], converted["functions"]);
    assert_eq!(direct["edges"], converted["edges"]);
}

#[test]
fn broken_chrome_files_fail_with_one_line() {
    let dir = TempDir::new("import-errors");
    let cases = [
        (
            r#"[{"ph":"X","name":"f","ts":"soon","pid":1,"tid":1}]"#,
            "Chrome trace JSON: invalid type",
        ),
        (r#"{"traceEvents": 7}"#, "Chrome trace JSON: invalid type"),
        (
            r#"[{"ph":"X","name":"f","ts":1,"dur":1,"pid":1,"tid":1},{"ph":"X","na"#,
            "Chrome trace JSON: EOF",
        ),
        (
            r#"[{"ph":"i","name":"f","ts":1,"pid":1,"tid":1}]"#,
            "nothing to analyze",
        ),
        (
            r#"[{"ph":"X","name":"f","dur":1,"pid":1,"tid":1}]"#,
            "event 1 (\"ph\": \"X\"): no \"ts\"",
        ),
        ("[1, 2, 3]", "Chrome trace JSON: invalid type"),
    ];
    for (i, (text, want)) in cases.into_iter().enumerate() {
        let trace = dir.write(&format!("bad-{i}.json"), text);
        let line = mtanalyze([trace.as_os_str()]).fails_with_one_line();
        assert!(line.contains(&format!("bad-{i}.json: ")), "{line}");
        assert!(line.contains(want), "{text}\n{line}");
    }
}
