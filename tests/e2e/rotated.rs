//! A rotated series written by hand (`TraceWriter`): the later file's
//! threads start from `continued` chunks and its carried-on task from a
//! continued-stack record. The series, read as one, counts one recording's
//! calls and times ("Rotating series" in `schemas/semantics.md`), and each
//! file analyzes alone without warnings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::series::{counts, report};
use crate::util::{mtanalyze, TempDir};

/// A server's run written as one file and as a rotated series of two:
/// `main > serve` open across the switch on thread 1, a task suspended
/// across it with `job` open (a continued-stack record in the second
/// file), thread 2 on a task with `job > work` open at the switch.
fn rotated_run(dir: &TempDir) -> (PathBuf, PathBuf) {
    use mtrace_format::{
        ClockInfo, EventKind, FunctionId, StackId, ThreadId, TraceWriter, WriterOptions,
    };
    use EventKind::{Enter, Exit, Switch};
    const CUT: u64 = 100;
    let writer = |start: u64| {
        let clock = ClockInfo {
            start_tick: start,
            start_unix_ns: 1_700_000_000_000_000_000 + start,
            ..ClockInfo::nanoseconds()
        };
        let opts = WriterOptions {
            clock,
            ..Default::default()
        };
        let mut w = TraceWriter::new(std::io::Cursor::new(Vec::new()), opts).unwrap();
        let f: Vec<FunctionId> = ["main", "serve", "handle", "work", "job"]
            .iter()
            .zip(1..)
            .map(|(name, line)| w.function(name, "run.rs", line, "run"))
            .collect();
        let stacks = (w.stack("job-task"), w.stack("bg"));
        (w, f, stacks)
    };
    let run = |f: &[FunctionId], (task, bg): (StackId, StackId)| {
        let (main, serve, handle, work, job) = (f[0], f[1], f[2], f[3], f[4]);
        vec![
            (1, 0, Enter(main)),
            (2, 5, Enter(main)),
            (1, 10, Enter(serve)),
            (1, 20, Enter(handle)),
            (2, 50, Switch(bg)),
            (2, 50, Enter(job)),
            (1, 50, Exit(handle)),
            (1, 60, Switch(task)),
            (1, 60, Enter(job)),
            (1, 70, Enter(work)),
            (1, 80, Exit(work)),
            (1, 80, Switch(StackId::OWN)),
            (2, 95, Enter(work)),
            (1, 100, Enter(handle)),
            (2, 105, Exit(work)),
            (2, 115, Exit(job)),
            (2, 115, Switch(StackId::OWN)),
            (1, 120, Exit(handle)),
            (2, 125, Exit(main)),
            (1, 130, Switch(task)),
            (1, 140, Exit(job)),
            (1, 140, Switch(StackId::OWN)),
            (1, 160, Exit(serve)),
            (1, 170, Exit(main)),
        ]
    };
    let (mut w, f, stacks) = writer(0);
    for (t, tick, kind) in run(&f, stacks) {
        w.event(ThreadId(t), tick, kind).unwrap();
    }
    let single = dir.join("single.bin");
    std::fs::write(&single, w.finish(Some(180)).unwrap().into_inner()).unwrap();

    let series = dir.join("series");
    std::fs::create_dir(&series).unwrap();
    let (mut w, f, stacks) = writer(0);
    for (t, tick, kind) in run(&f, stacks).into_iter().filter(|l| l.1 < CUT) {
        w.event(ThreadId(t), tick, kind).unwrap();
    }
    let first = w.finish(Some(CUT)).unwrap().into_inner();
    std::fs::write(series.join("trace.bin"), first).unwrap();
    let (mut w, f, stacks) = writer(CUT);
    let (main, serve, work, job) = (f[0], f[1], f[3], f[4]);
    w.continue_thread(ThreadId(1), CUT, &[main, serve], StackId::OWN, &[])
        .unwrap();
    w.continue_thread(ThreadId(2), CUT, &[main], stacks.1, &[job, work])
        .unwrap();
    w.continued_stack(stacks.0, 130, &[job]);
    for (t, tick, kind) in run(&f, stacks).into_iter().filter(|l| l.1 >= CUT) {
        w.event(ThreadId(t), tick, kind).unwrap();
    }
    let second = w.finish(Some(180)).unwrap().into_inner();
    std::fs::write(series.join("trace.1.bin"), second).unwrap();
    (single, series)
}

#[test]
fn a_rotated_series_counts_the_calls_of_one_recording_without_warnings() {
    let dir = TempDir::new("rotated");
    let (single, series) = rotated_run(&dir);
    let cumtime = |r: &Value| -> BTreeMap<String, u64> {
        let rows = r["functions"].as_array().unwrap();
        rows.iter()
            .map(|f| {
                let name = f["function"].as_str().unwrap().to_owned();
                (name, f["cumtime_ns"].as_u64().unwrap())
            })
            .collect()
    };
    for clock in ["stack", "wall", "gil"] {
        let one = report(std::slice::from_ref(&single), &["--clock", clock]);
        let both = report(std::slice::from_ref(&series), &["--clock", clock]);
        assert_eq!(both["trace"]["traces"], 2, "{}", both["trace"]);
        for r in [&one, &both] {
            assert_eq!(r["warnings"], serde_json::json!([]), "{clock}");
        }
        assert_eq!(counts(&both), counts(&one), "{clock}");
        assert_eq!(cumtime(&both), cumtime(&one), "{clock}");
        // Each file alone: no warning, the later one counting no call
        // of what the first entered.
        let later = report(&[series.join("trace.1.bin")], &["--clock", clock]);
        assert_eq!(later["warnings"], serde_json::json!([]), "{clock}");
        assert_eq!(counts(&later)["main"].0, 0, "{clock}");
        assert_eq!(counts(&later)["job"].0, 0, "{clock}");
    }
    let checked = mtanalyze([
        "check".into(),
        series.join("trace.1.bin").into_os_string(),
        "--format".into(),
        "json".into(),
    ])
    .success()
    .json();
    assert_eq!(checked["warnings"], serde_json::json!([]), "{checked}");
}
