//! `--format json`: one object, the documented fields, integer nanoseconds.

use serde_json::Value;

use crate::util::{mtanalyze, TempDir, HANDOFF, REPAIRS};

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    k.sort_unstable();
    k
}

#[test]
fn report_json_has_the_documented_fields_with_integer_ns() {
    let dir = TempDir::new("json");
    let trace = dir.write("handoff.jsonl", HANDOFF);
    let run = mtanalyze([
        trace.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--sort".as_ref(),
        "name".as_ref(),
    ])
    .success();
    assert!(run.stdout.trim_start().starts_with('{') && run.stdout.trim_end().ends_with('}'));
    let v = run.json();
    assert_eq!(
        keys(&v),
        [
            "clock",
            "edges",
            "functions",
            "marks",
            "stacks",
            "trace",
            "warnings"
        ]
    );
    assert_eq!(v["clock"], "stack");

    let t = &v["trace"];
    assert_eq!(t["source"], trace.display().to_string());
    assert_eq!(t["input_format"], "jsonl");
    assert_eq!(t["format_version"], 3);
    assert_eq!(t["end_ns"], 90);
    assert_eq!(t["duration_ns"], 90);
    assert_eq!(t["events"], 10);
    assert_eq!(t["finished"], true);
    assert_eq!(t["threads"][0]["name"], "main-thread");
    assert_eq!(t["threads"][1]["name"], "worker-1");

    // Worked example 1, in name order.
    let want = [
        ("handler", "src/h.rs", 5, 1, 1, 15, 40, 30),
        ("main", "src/main.rs", 1, 1, 1, 20, 20, 20),
        ("query", "src/db.rs", 42, 1, 1, 25, 25, 30),
    ];
    let functions = v["functions"].as_array().cloned().unwrap_or_default();
    assert_eq!(functions.len(), want.len());
    for (f, (name, file, line, ncalls, primitive, tottime, cumtime, paused)) in
        functions.iter().zip(want)
    {
        assert_eq!(
            keys(f),
            [
                "cumtime_ns",
                "cut_short",
                "file",
                "function",
                "line",
                "module",
                "ncalls",
                "open_at_end",
                "paused_ns",
                "primitive_calls",
                "scheduled_ns",
                "tottime_hist",
                "tottime_ns",
                "tottime_sq",
                "waiting_ns"
            ]
        );
        for field in [
            "ncalls",
            "primitive_calls",
            "tottime_ns",
            "cumtime_ns",
            "paused_ns",
            "line",
        ] {
            assert!(
                f[field].is_u64(),
                "{field} of {f} is not an unsigned integer"
            );
        }
        assert_eq!(f["function"], name);
        assert_eq!(f["file"], file);
        assert_eq!(f["line"], line);
        assert_eq!(f["ncalls"], ncalls);
        assert_eq!(f["primitive_calls"], primitive);
        assert_eq!(f["tottime_ns"], tottime, "{name}");
        assert_eq!(f["cumtime_ns"], cumtime, "{name}");
        assert_eq!(f["paused_ns"], paused, "{name}");
    }

    let edges = v["edges"].as_array().cloned().unwrap_or_default();
    assert_eq!(edges.len(), 1);
    let e = &edges[0];
    assert_eq!(
        (e["caller"].as_str(), e["callee"].as_str()),
        (Some("handler"), Some("query"))
    );
    assert_eq!(
        (&e["ncalls"], &e["tottime_ns"], &e["cumtime_ns"]),
        (&Value::from(1), &Value::from(25), &Value::from(25))
    );

    let stacks = v["stacks"].as_array().cloned().unwrap_or_default();
    let task = stacks
        .iter()
        .find(|s| s["name"] == "task-1")
        .cloned()
        .unwrap_or_default();
    assert_eq!(task["threads"], serde_json::json!([1, 2]));
    assert_eq!(task["running_ns"], 50);
    assert!(task["paused_ns"].is_u64());
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn warnings_appear_in_the_json_too() {
    let dir = TempDir::new("json-warnings");
    let trace = dir.write("repairs.jsonl", REPAIRS);
    let run = mtanalyze([trace.as_os_str(), "--format".as_ref(), "json".as_ref()]).success();
    let v = run.json();
    let total: u64 = v["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w["count"].as_u64()).sum())
        .unwrap_or_default();
    assert_eq!(total, 4);
    let mismatch = v["warnings"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["kind"] == "exit_mismatch"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(mismatch["first"], "thread 1 at 130 ns");
    assert!(mismatch["repair"].as_str().is_some_and(|r| !r.is_empty()));
    // The summary still goes to stderr, never into the JSON.
    assert!(run.stderr.starts_with("4 warnings: "), "{}", run.stderr);
}

/// A trace of 20,000 tasks: their rows (some 3 MB) are more than the
/// CLI holds, so `--format json` sorts them on disk, in `$TMPDIR`. Its
/// output is the library's report of the same trace, byte for byte; and
/// where no run can be written, the rows are held and said so.
#[test]
fn json_of_many_stacks_sorted_on_disk_is_the_report_byte_for_byte() {
    let dir = TempDir::new("json-many");
    let trace = dir.join("tasks.bin");
    let opts = mtanalyze_testkit::synth::TaskOptions {
        tasks: 20_000,
        ..Default::default()
    };
    mtanalyze_testkit::synth::generate_tasks(&opts, &trace, "test".into()).expect("writes");
    let loaded = mtanalyze::load(&trace).expect("loads");
    for clock in [
        mtanalyze::report::Clock::Stack,
        mtanalyze::report::Clock::Gil,
    ] {
        let options = mtanalyze::AnalyzeOptions {
            clock: Some(clock),
            ..Default::default()
        };
        let report = mtanalyze::analyze(&loaded, &options).expect("analyzes");
        assert_eq!(report.stacks.len(), 20_004);
        let mut want = Vec::new();
        // In the CLI's order (its default view).
        let view = mtanalyze::view::filtered_report(
            &report,
            &mtanalyze::view::ViewOptions::default(),
            &mtanalyze::view::EdgeSelection::default(),
        );
        mtanalyze::render::json::report(&mut want, &view).expect("writes");
        let runs = dir.join("runs");
        std::fs::create_dir_all(&runs).expect("mkdir");
        for (tmp, held) in [(runs.clone(), false), (dir.join("missing"), true)] {
            let out = dir.join("out.json");
            let _ = std::fs::remove_file(&out);
            let run = crate::util::command()
                .env("TMPDIR", &tmp)
                .args([trace.as_os_str(), "--format".as_ref(), "json".as_ref()])
                .args(["--clock", &clock.to_string(), "-o"])
                .arg(&out)
                .output()
                .expect("runs");
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert!(run.status.success(), "{stderr}");
            assert_eq!(
                stderr.contains("stack rows held in memory, not sorted on disk"),
                held,
                "TMPDIR {}: {stderr}",
                tmp.display()
            );
            let got = std::fs::read_to_string(&out).expect("output");
            if got.as_bytes() != want {
                let want = String::from_utf8_lossy(&want);
                let (n, (w, g)) = (want.lines().zip(got.lines()).enumerate())
                    .find(|(_, (w, g))| w != g)
                    .unwrap_or((0, ("(one is longer)", "")));
                panic!("clock {clock}, line {}: expected {w:?}, got {g:?}", n + 1);
            }
        }
        // The runs are anonymous: nothing is left behind.
        assert_eq!(std::fs::read_dir(&runs).expect("ls").count(), 0);
    }
}
