//! `--warnings summary|all` (issue 47, item 5): the one summary line on
//! stderr stays as it is by default, and `all` follows it with every
//! place each warning happened: which stacks ended with frames open, of
//! which kind, and which frames, in the text (escaped) and in JSON.

use std::path::{Path, PathBuf};

use mtanalyze::{report::Clock, AnalyzeOptions};
use mtrace::{LogicalStack, StackKind};
use serde_json::Value;

use crate::async_tasks::RECORDER;
use crate::schema::assert_valid;
use crate::util::{mtanalyze, TempDir, REPAIRS};

/// Records, with the recorder, frames left open at the end of an asyncio
/// task (`serve` > a function whose name holds an escape sequence) and
/// of a greenlet whose name holds a bell (`serve`), and a greenlet that
/// ends with nothing open.
fn left_open_on_two_kinds(dir: &TempDir) -> PathBuf {
    let _one_at_a_time = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    let path = dir.join("left-open.mtrace");
    let recording = mtrace::start(mtrace::Config::new(&path)).expect("start");
    let serve = mtrace::register_function("serve", "app.py", 1, "");
    let query = mtrace::register_function("query\x1b[2J", "app.py", 5, "");
    let mut task = LogicalStack::of_kind(StackKind::AsyncioTask, "request-1");
    {
        let _on = task.enter();
        mtrace::enter(serve);
        mtrace::enter(query);
    }
    drop(task);
    let mut greenlet = LogicalStack::of_kind(StackKind::Greenlet, "worker\x07");
    {
        let _on = greenlet.enter();
        mtrace::enter(serve);
    }
    drop(greenlet);
    let mut clean = LogicalStack::of_kind(StackKind::Greenlet, "clean");
    {
        let _on = clean.enter();
        mtrace::enter(serve);
        mtrace::exit(serve);
    }
    drop(clean);
    recording.finish().expect("finish");
    path
}

fn run(trace: &Path, extra: &[&str]) -> crate::util::Run {
    let mut args: Vec<&std::ffi::OsStr> = vec![trace.as_os_str()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    mtanalyze(args).success()
}

#[test]
fn warnings_all_names_each_stack_left_with_frames_open() {
    let dir = TempDir::new("warnings-all");
    let trace = left_open_on_two_kinds(&dir);
    let summary = "3 warnings: frames_open_at_stack_end x3 (2 on asyncio tasks, 1 on greenlets)";
    let default = run(&trace, &[]);
    assert_eq!(default.stderr, format!("{summary}\n"));
    let all = run(&trace, &["--warnings", "all"]);
    assert_eq!(all.stdout, default.stdout, "the report itself is the same");
    let lines: Vec<&str> = all.stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{}", all.stderr);
    assert_eq!(lines[0], summary);
    // One line per stack, in time order, with its kind and its open
    // frames outermost first; the traced program's names escaped.
    let task = lines[1];
    assert!(
        task.starts_with("  frames_open_at_stack_end: stack:")
            && task.contains(" \"request-1\" (asyncio_task), thread ")
            && task.ends_with(", 2 frames open: serve > query\\x1b[2J"),
        "{task}"
    );
    let greenlet = lines[2];
    assert!(
        greenlet.contains(" \"worker\\x07\" (greenlet), thread ")
            && greenlet.ends_with(", 1 frame open: serve"),
        "{greenlet}"
    );
    assert!(!all.stderr.contains('\x1b') && !all.stderr.contains('\x07'));

    // JSON: the same places, with the names as recorded.
    let json = run(&trace, &["--format", "json", "--warnings", "all"]).json();
    assert_valid("report.schema.json", &json);
    let details = json["warnings"][0]["details"]
        .as_array()
        .expect("details with --warnings all");
    let seen: Vec<(&str, &str, u64, Vec<&str>)> = details
        .iter()
        .map(|d| {
            (
                d["stack_name"].as_str().unwrap_or(""),
                d["stack_kind"].as_str().unwrap_or(""),
                d["count"].as_u64().unwrap_or(0),
                d["open_frames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "request-1",
                "asyncio_task",
                2,
                vec!["serve", "query\x1b[2J"]
            ),
            ("worker\x07", "greenlet", 1, vec!["serve"]),
        ]
    );
    for d in details {
        assert!(d["stack"].as_str().is_some_and(|s| s.starts_with("stack:")));
        assert!(d["thread"].is_u64() && d["ns"].is_u64(), "{d}");
    }
    // Without `all`, no details in JSON either.
    let plain = run(&trace, &["--format", "json"]).json();
    assert!(plain["warnings"][0].get("details").is_none());
    assert_valid("report.schema.json", &plain);
}

#[test]
fn the_default_is_byte_identical_to_warnings_summary() {
    let dir = TempDir::new("warnings-summary");
    let repairs = dir.write("repairs.jsonl", REPAIRS);
    for extra in [&[][..], &["--format", "json"], &["--stacks"]] {
        let default = run(&repairs, extra);
        let mut with: Vec<&str> = extra.to_vec();
        with.extend(["--warnings", "summary"]);
        let summary = run(&repairs, &with);
        assert_eq!(default.stdout, summary.stdout, "{extra:?}");
        assert_eq!(default.stderr, summary.stderr, "{extra:?}");
        assert_eq!(default.stderr.lines().count(), 1, "{}", default.stderr);
    }
}

/// The warnings that are not tied to a stack: one line per place (a time
/// on a thread), under the same summary line.
#[test]
fn warnings_all_lists_every_repair_by_place() {
    let dir = TempDir::new("warnings-repairs");
    let repairs = dir.write("repairs.jsonl", REPAIRS);
    let default = run(&repairs, &[]);
    let all = run(&repairs, &["--warnings", "all"]);
    let summary = default.stderr.trim_end();
    let lines: Vec<&str> = all.stderr.lines().collect();
    assert_eq!(lines[0], summary);
    let json = run(&repairs, &["--format", "json", "--warnings", "all"]).json();
    assert_valid("report.schema.json", &json);
    let mut listed = 0;
    for w in json["warnings"].as_array().expect("warnings") {
        let details = w["details"].as_array().expect("details of every warning");
        let counted: u64 = details.iter().filter_map(|d| d["count"].as_u64()).sum();
        assert_eq!(Some(counted), w["count"].as_u64(), "{w}");
        // The first place listed is the one the summary names.
        let first = &details[0];
        if let (Some(t), Some(ns)) = (first["thread"].as_u64(), first["ns"].as_u64()) {
            assert_eq!(w["first"], format!("thread {t} at {ns} ns"), "{w}");
        }
        for _ in details {
            let line = &lines[1 + listed];
            assert!(
                line.starts_with(&format!("  {}: ", w["kind"].as_str().unwrap_or(""))),
                "{line}"
            );
            listed += 1;
        }
    }
    assert_eq!(lines.len(), 1 + listed, "{}", all.stderr);
}

/// The batch and the streamed analysis find the same places, and a report
/// of two traces lists each one's in turn.
#[test]
fn every_engine_and_a_merge_keep_the_same_places() {
    let dir = TempDir::new("warnings-engines");
    let trace = left_open_on_two_kinds(&dir);
    let loaded = mtanalyze::load(&trace).expect("load");
    for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
        let options = AnalyzeOptions {
            clock: Some(clock),
            warning_details: true,
            ..AnalyzeOptions::default()
        };
        let batch = mtanalyze::testing::analyze_batched(&loaded, &options).expect("batch");
        assert_eq!(batch.warnings[0].details.len(), 2, "{clock}");
        let streamed = mtanalyze::testing::analyze_streamed_with(&loaded, &options, 1)
            .expect("streamed")
            .expect("the trace streams");
        assert_eq!(streamed.warnings, batch.warnings, "{clock}");
    }
    let one = run(&trace, &["--format", "json", "--warnings", "all"]).json();
    // The same recording again, as a second trace.
    let again = dir.join("again.mtrace");
    std::fs::copy(&trace, &again).expect("copied");
    let again = again.to_str().expect("a UTF-8 path");
    let two = run(&trace, &[again, "--format", "json", "--warnings", "all"]).json();
    assert_valid("report.schema.json", &two);
    let places = |r: &Value| {
        r["warnings"][0]["details"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let twice: Vec<Value> = places(&one).into_iter().chain(places(&one)).collect();
    assert_eq!(places(&two), twice);
    assert_eq!(two["warnings"][0]["count"], 6);
}
