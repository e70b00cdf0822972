//! Marks (named instants: `mtrace::mark`, a JSON-lines `mark` line) from
//! the input to every place that lists them: the JSON report with exact
//! times, `check` (text and JSON), the table's header, a converted binary
//! trace, a report of several traces, and `mtanalyze::marks` on a trace
//! the recorder wrote.

use serde_json::{json, Value};

use crate::util::{json_report, mtanalyze, TempDir};

/// Thread 1 warms up from 100 to 150 and marks it; thread 2, which records
/// no event, marks 120; a last mark at 500 ends the trace after `main`'s
/// exit at 400. Two lines share ts 100 and two ts 150, so ticks are
/// `2 * ts + rank`: the times must still come out exact.
pub(crate) const MARKED: &str = r#"{"ev": "thread", "tid": 1, "name": "main"}
{"ts": 100, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 100, "tid": 1, "ev": "enter", "fn": "warm_up"}
{"ts": 150, "tid": 1, "ev": "exit", "fn": "warm_up"}
{"ts": 150, "tid": 1, "ev": "mark", "name": "warm-up done"}
{"ts": 120, "tid": 2, "ev": "mark", "name": "from thread 2"}
{"ts": 400, "tid": 1, "ev": "exit", "fn": "main"}
{"ts": 500, "tid": 1, "ev": "mark", "name": ""}
"#;

fn expected_marks() -> Value {
    json!([
        {"name": "from thread 2", "time_ns": 120, "thread": 2},
        {"name": "warm-up done", "time_ns": 150, "thread": 1},
        {"name": "", "time_ns": 500, "thread": 1},
    ])
}

#[test]
fn the_report_lists_marks_with_exact_times_in_time_order() {
    let dir = TempDir::new("marks-report");
    let trace = dir.write("marked.jsonl", MARKED);
    let report = json_report(&trace, "stack");
    assert_eq!(report["marks"], expected_marks());
    // The last mark ends the trace; the marks change no number.
    assert_eq!(report["trace"]["end_ns"], 500);
    let main = report["functions"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["function"] == "main"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&main["tottime_ns"], &main["cumtime_ns"]),
        (&json!(250), &json!(300))
    );
    // Marks belong to the trace, not to the stacks a run selects.
    let one_thread = mtanalyze([
        trace.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--thread".as_ref(),
        "2".as_ref(),
        "--filter".as_ref(),
        "nothing matches this".as_ref(),
    ])
    .success()
    .json();
    assert_eq!(one_thread["marks"], expected_marks());
    // A trace without marks has an empty list, and its table header says nothing.
    let plain = dir.write(
        "plain.jsonl",
        "{\"ts\": 1, \"tid\": 1, \"ev\": \"enter\", \"fn\": \"f\"}\n",
    );
    assert_eq!(json_report(&plain, "stack")["marks"], json!([]));
    mtanalyze([plain.as_os_str()])
        .success()
        .stdout_lacks("marks:");
    mtanalyze([trace.as_os_str()])
        .success()
        .stdout_has("marks: 3");
}

#[test]
fn check_lists_marks_and_convert_keeps_them() {
    let dir = TempDir::new("marks-check");
    let jsonl = dir.write("marked.jsonl", MARKED);
    let bin = dir.join("marked.bin");
    mtanalyze(["convert".as_ref(), jsonl.as_os_str(), bin.as_os_str()]).success();
    for trace in [&jsonl, &bin] {
        let run = mtanalyze(["check".as_ref(), trace.as_os_str()]).success();
        let lines: Vec<&str> = run
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("marks:"))
            .take(4)
            .collect();
        assert_eq!(
            lines,
            [
                "marks:              3",
                "  120ns  thread 2  \"from thread 2\"",
                "  150ns  thread 1  \"warm-up done\"",
                "  500ns  thread 1  \"\"",
            ],
            "{}",
            run.stdout
        );
        let json = mtanalyze([
            "check".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            trace.as_os_str(),
        ])
        .success()
        .json();
        assert_eq!(json["marks"], expected_marks());
        crate::schema::assert_valid("check.schema.json", &json);
        assert_eq!(json_report(trace, "gil")["marks"], expected_marks());
    }
}

#[test]
fn a_report_of_several_traces_keeps_each_traces_marks() {
    let dir = TempDir::new("marks-merge");
    let a = dir.write("a.jsonl", MARKED);
    let b = dir.write(
        "b.jsonl",
        "{\"ts\": 5, \"tid\": 1, \"ev\": \"enter\", \"fn\": \"main\"}\n\
         {\"ts\": 7, \"tid\": 1, \"ev\": \"mark\", \"name\": \"b's mark\"}\n\
         {\"ts\": 9, \"tid\": 1, \"ev\": \"exit\", \"fn\": \"main\"}\n",
    );
    let merged = mtanalyze([
        a.as_os_str(),
        b.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ])
    .success()
    .json();
    let mut want = expected_marks();
    for m in want.as_array_mut().into_iter().flatten() {
        m["trace"] = json!(0);
    }
    if let Some(list) = want.as_array_mut() {
        list.push(json!({"name": "b's mark", "time_ns": 7, "thread": 1, "trace": 1}));
    }
    assert_eq!(merged["marks"], want);
    crate::schema::assert_valid("report.schema.json", &merged);
}

#[test]
fn marks_recorded_by_the_recorder_come_back_through_the_library() {
    let dir = TempDir::new("marks-recorded");
    let path = dir.join("recorded.mtrace");
    {
        let _one_at_a_time = crate::async_tasks::RECORDER
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let recording = mtrace::start(mtrace::Config::new(&path)).expect("start");
        {
            let _s = mtrace::scope!("warm up");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        mtrace::mark("warm-up done");
        {
            let _s = mtrace::scope!("work");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        mtrace::mark("work done");
        recording.finish().expect("finish");
    }
    let trace = mtanalyze::load(&path).expect("load");
    let marks = mtanalyze::marks(&trace).expect("marks");
    let names: Vec<&str> = marks.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["warm-up done", "work done"]);
    let report =
        mtanalyze::analyze(&trace, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    // The same list, on the report's scale: between the first event and
    // the end, 2 ms apart at least (the sleep in `work`).
    assert_eq!(report.marks, marks);
    let tid = report.trace.threads.first().map(|t| t.tid);
    assert!(
        marks
            .iter()
            .all(|m| Some(m.thread) == tid && m.trace.is_none()),
        "{marks:?}"
    );
    let (first, end) = (report.trace.first_event_ns, report.trace.end_ns);
    assert!(first < marks[0].time_ns, "{first} {marks:?}");
    assert!(
        marks[0].time_ns + 2_000_000 <= marks[1].time_ns,
        "{marks:?}"
    );
    assert!(marks[1].time_ns <= end, "{end} {marks:?}");
    let check = mtanalyze::check(&trace).expect("check");
    assert_eq!(check.marks, marks);
}
