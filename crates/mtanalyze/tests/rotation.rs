//! Rotating series ("Rotating series" in `schemas/semantics.md`): a later
//! file starts its threads from `continued` chunks and its carried-on
//! logical stacks from continued-stack records. Their frames were opened in
//! an earlier file: their time counts here, their calls do not, nothing is
//! repaired, and the files' reports add up to one recording's.

use std::collections::BTreeMap;
use std::io::Cursor;

use mtanalyze::testing::{analyze_batched, analyze_streamed_with};
use mtanalyze::{
    analyze, check, from_bytes,
    report::{merge, Clock},
    AnalyzeOptions, PathMode, Report, TimeBound,
};
use mtrace_format::{
    ClockInfo, EventKind, FunctionId, StackId, ThreadId, TraceWriter, WriterOptions,
};

fn report(bytes: &[u8], opts: &AnalyzeOptions) -> Report {
    let trace = from_bytes("test", bytes.to_vec()).expect("loads");
    analyze(&trace, opts).expect("analyzes")
}

fn under(clock: Clock) -> AnalyzeOptions {
    AnalyzeOptions {
        clock: Some(clock),
        ..Default::default()
    }
}

/// A writer whose file starts at tick `start` (a later file of a series
/// starts where the one before it ended).
fn writer(start: u64) -> TraceWriter<Cursor<Vec<u8>>> {
    let clock = ClockInfo {
        start_tick: start,
        start_unix_ns: 1_700_000_000_000_000_000 + start,
        ..ClockInfo::nanoseconds()
    };
    let opts = WriterOptions {
        chunk_size: 1024,
        clock,
        ..Default::default()
    };
    TraceWriter::new(Cursor::new(Vec::new()), opts).expect("writer")
}

fn function(r: &Report, name: &str) -> (u64, u64, u64, u64, u64) {
    let f = r
        .functions
        .iter()
        .find(|f| f.function == name)
        .unwrap_or_else(|| panic!("no row for {name}: {:?}", r.functions));
    (
        f.ncalls,
        f.primitive_calls,
        f.tottime_ns,
        f.cumtime_ns,
        f.paused_ns,
    )
}

fn no_warnings(r: &Report, what: &str) {
    assert!(r.warnings.is_empty(), "{what}: {:?}", r.warnings);
}

// ---- (a) a thread carried on with `main > serve` open ----

fn continued_server() -> Vec<u8> {
    let mut w = writer(1000);
    let main = w.function("main", "srv.rs", 1, "srv");
    let serve = w.function("serve", "srv.rs", 2, "srv");
    let handle = w.function("handle", "srv.rs", 3, "srv");
    let t = ThreadId(1);
    w.continue_thread(t, 1000, &[main, serve], StackId::OWN, &[])
        .unwrap();
    for (tick, kind) in [
        (1010, EventKind::Enter(handle)),
        (1030, EventKind::Exit(handle)),
        (1050, EventKind::Exit(serve)),
        (1060, EventKind::Exit(main)),
    ] {
        w.event(t, tick, kind).unwrap();
    }
    w.finish(Some(1080)).unwrap().into_inner()
}

#[test]
fn frames_of_a_continued_thread_count_their_time_but_not_their_calls() {
    let bytes = continued_server();
    for clock in [Clock::Stack, Clock::Wall, Clock::Gil] {
        let r = report(&bytes, &under(clock));
        no_warnings(&r, &format!("{clock}"));
        // (ncalls, primitive, tottime, cumtime, paused): the file starts
        // at tick 1000, the thread's only stack runs throughout; under
        // `gil` a stack runs after an event, so the file's first 10 ns,
        // before any event, are nobody's.
        let main = match clock {
            Clock::Gil => (0, 0, 10, 50, 10),
            _ => (0, 0, 10, 60, 0),
        };
        assert_eq!(function(&r, "main"), main, "{clock}");
        let serve = match clock {
            Clock::Gil => (0, 0, 20, 40, 10),
            _ => (0, 0, 30, 50, 0),
        };
        assert_eq!(function(&r, "serve"), serve, "{clock}");
        assert_eq!(function(&r, "handle"), (1, 1, 20, 20, 0), "{clock}");
        let f = r.functions.iter().find(|f| f.function == "serve").unwrap();
        assert_eq!((f.cut_short, f.open_at_end), (0, 0), "{clock}");
        let edge = r
            .edges
            .iter()
            .find(|e| e.caller == "main" && e.callee == "serve")
            .expect("main -> serve");
        assert_eq!(edge.ncalls, 0, "{clock}");
        let edge = r
            .edges
            .iter()
            .find(|e| e.caller == "serve" && e.callee == "handle")
            .expect("serve -> handle");
        assert_eq!(edge.ncalls, 1, "{clock}");
    }
    let trace = from_bytes("test", bytes).unwrap();
    let checked = check(&trace).unwrap();
    assert!(checked.warnings.is_empty(), "{:?}", checked.warnings);
    assert_eq!(checked.chunks_lost, 0);
}

#[test]
fn a_continued_thread_in_a_window_and_in_the_call_paths() {
    let bytes = continued_server();
    // The window starts after the file: the frames were entered before
    // both, which changes nothing.
    let opts = AnalyzeOptions {
        from: Some(TimeBound::At(5)),
        ..under(Clock::Stack)
    };
    let r = report(&bytes, &opts);
    no_warnings(&r, "window");
    assert_eq!(function(&r, "main"), (0, 0, 10, 55, 0));
    assert_eq!(function(&r, "serve").0, 0);
    assert_eq!(function(&r, "handle").0, 1);
    // The call paths go through the carried-on frames.
    let opts = AnalyzeOptions {
        paths: PathMode::Merged,
        ..under(Clock::Stack)
    };
    let r = report(&bytes, &opts);
    no_warnings(&r, "paths");
    let paths: Vec<(Vec<&str>, u64, u64)> = r
        .paths
        .iter()
        .map(|p| {
            let names = p
                .frames
                .iter()
                .map(|&i| r.functions[i as usize].function.as_str())
                .collect();
            (names, p.ncalls, p.self_ns)
        })
        .collect();
    assert!(
        paths.contains(&(vec!["main", "serve", "handle"], 1, 20)),
        "{paths:?}"
    );
    assert!(paths.contains(&(vec!["main", "serve"], 0, 30)), "{paths:?}");
}

// ---- (b) one run, as one file and as two ----

/// One recorded event: (thread, tick, kind).
type Line = (u64, u64, EventKind);

/// Two threads. Thread 1 serves requests in `main > serve` and polls task
/// `job-task` twice, suspending it with `job` open across the cut; thread
/// 2 is on task `bg` with `job > work` open across the cut. An event lies
/// exactly at the cut (as the recorder's first event after a switch), so
/// even the `gil` clock loses nothing to it.
fn one_run(f: &Functions, job_task: StackId, bg: StackId) -> Vec<Line> {
    use EventKind::{Enter, Exit, Switch};
    let own = StackId::OWN;
    vec![
        (1, 0, Enter(f.main)),
        (2, 5, Enter(f.main)),
        (1, 10, Enter(f.serve)),
        (1, 20, Enter(f.handle)),
        (1, 30, Enter(f.work)),
        (1, 40, Exit(f.work)),
        (2, 50, Switch(bg)),
        (2, 50, Enter(f.job)),
        (1, 50, Exit(f.handle)),
        (1, 60, Switch(job_task)),
        (1, 60, Enter(f.job)),
        (1, 70, Enter(f.work)),
        (1, 80, Exit(f.work)),
        (1, 80, Switch(own)),
        (2, 95, Enter(f.work)),
        // The cut: 100.
        (1, 100, Enter(f.handle)),
        (2, 105, Exit(f.work)),
        (2, 115, Exit(f.job)),
        (2, 115, Switch(own)),
        (1, 120, Exit(f.handle)),
        (2, 125, Exit(f.main)),
        (1, 130, Switch(job_task)),
        (1, 130, Enter(f.work)),
        (1, 140, Exit(f.work)),
        (1, 150, Exit(f.job)),
        (1, 150, Switch(own)),
        (1, 160, Exit(f.serve)),
        (1, 170, Exit(f.main)),
    ]
}

struct Functions {
    main: FunctionId,
    serve: FunctionId,
    handle: FunctionId,
    work: FunctionId,
    job: FunctionId,
}

fn names(w: &mut TraceWriter<Cursor<Vec<u8>>>) -> (Functions, StackId, StackId) {
    let f = Functions {
        main: w.function("main", "run.rs", 1, "run"),
        serve: w.function("serve", "run.rs", 2, "run"),
        handle: w.function("handle", "run.rs", 3, "run"),
        work: w.function("work", "run.rs", 4, "run"),
        job: w.function("job", "run.rs", 5, "run"),
    };
    (f, w.stack("job-task"), w.stack("bg"))
}

const CUT: u64 = 100;
const END: u64 = 180;

fn single_file() -> Vec<u8> {
    let mut w = writer(0);
    let (f, job_task, bg) = names(&mut w);
    for (t, tick, kind) in one_run(&f, job_task, bg) {
        w.event(ThreadId(t), tick, kind).unwrap();
    }
    w.finish(Some(END)).unwrap().into_inner()
}

/// The same events cut at [`CUT`]: the second file starts the threads from
/// `continued` chunks with what was open then, and the suspended task
/// from a continued-stack record at its first switch in the file.
fn two_files() -> (Vec<u8>, Vec<u8>) {
    let mut w = writer(0);
    let (f, job_task, bg) = names(&mut w);
    let run = one_run(&f, job_task, bg);
    for &(t, tick, kind) in run.iter().filter(|l| l.1 < CUT) {
        w.event(ThreadId(t), tick, kind).unwrap();
    }
    let first = w.finish(Some(CUT)).unwrap().into_inner();

    let mut w = writer(CUT);
    let (f, job_task, bg) = names(&mut w);
    w.continue_thread(ThreadId(1), CUT, &[f.main, f.serve], StackId::OWN, &[])
        .unwrap();
    w.continue_thread(ThreadId(2), CUT, &[f.main], bg, &[f.job, f.work])
        .unwrap();
    for &(t, tick, kind) in run.iter().filter(|l| l.1 >= CUT) {
        if kind == EventKind::Switch(job_task) && tick == 130 {
            w.continued_stack(job_task, tick, &[f.job]);
        }
        w.event(ThreadId(t), tick, kind).unwrap();
    }
    let second = w.finish(Some(END)).unwrap().into_inner();
    (first, second)
}

/// Per function: (calls, primitive calls, self, cumulative, paused); per
/// edge: calls and primitive calls.
type Totals = (
    BTreeMap<String, (u64, u64, u64, u64, u64)>,
    BTreeMap<(String, String), (u64, u64)>,
);

fn totals(r: &Report) -> Totals {
    let functions = r
        .functions
        .iter()
        .map(|f| (f.function.clone(), function(r, &f.function)))
        .collect();
    let edges = r
        .edges
        .iter()
        .map(|e| {
            let key = (e.caller.clone(), e.callee.clone());
            (key, (e.ncalls, e.primitive_calls))
        })
        .collect();
    (functions, edges)
}

#[test]
fn a_run_cut_in_two_files_sums_to_the_single_file() {
    let single = single_file();
    let (first, second) = two_files();
    for clock in [Clock::Stack, Clock::Wall, Clock::Gil] {
        let opts = under(clock);
        let whole = report(&single, &opts);
        no_warnings(&whole, "single file");
        let (a, b) = (report(&first, &opts), report(&second, &opts));
        no_warnings(&a, "first file");
        no_warnings(&b, "second file");
        // The second file counts no call of what the first entered.
        assert_eq!(function(&b, "main").0, 0, "{clock}");
        assert_eq!(function(&b, "job").0, 0, "{clock}");
        let summed = merge([a.clone(), b.clone()]).expect("two reports");
        assert_eq!(totals(&summed), totals(&whole), "{clock}");
        // The tasks' rows add up too.
        for name in ["job-task", "bg"] {
            let row = |reports: &[&Report]| {
                let rows = reports.iter().flat_map(|r| &r.stacks);
                rows.filter(|s| s.name == name)
                    .fold((0, 0, 0), |(r, p, n), s| {
                        (r + s.running_ns, p + s.paused_ns, n + s.switches_in)
                    })
            };
            assert_eq!(row(&[&a, &b]), row(&[&whole]), "{clock} {name}");
        }
    }
}

#[test]
fn the_stream_reads_a_continued_file_as_the_batch_does() {
    let (_, second) = two_files();
    let trace = from_bytes("test", second).unwrap();
    for clock in [Clock::Stack, Clock::Wall, Clock::Gil] {
        let opts = under(clock);
        let streamed = analyze_streamed_with(&trace, &opts, 2)
            .unwrap()
            .expect("a continued file streams");
        let batched = analyze_batched(&trace, &opts).unwrap();
        no_warnings(&streamed, "streamed");
        assert_eq!(totals(&streamed), totals(&batched), "{clock}");
    }
}

// ---- (c) a damaged continued-stack record ----

#[test]
fn a_continued_stack_record_claiming_too_many_frames_is_metadata_damage() {
    let (_, mut second) = two_files();
    let (start, len) = {
        let file = mtrace_format::TraceFile::parse(&second).unwrap();
        let h = file.header();
        (h.meta_offset as usize, h.meta_len as usize)
    };
    // Find the record (kind 6) and make its count claim more frames than
    // its payload holds.
    let mut at = start;
    let mut found = None;
    while at + 8 <= start + len {
        let payload = u32::from_le_bytes(second[at..at + 4].try_into().unwrap()) as usize;
        let kind = u16::from_le_bytes(second[at + 4..at + 6].try_into().unwrap());
        if kind == 6 {
            found = Some(at);
            break;
        }
        at += (8 + payload).div_ceil(8) * 8;
    }
    let record = found.expect("a continued-stack record");
    let count_at = record + 8 + 16;
    second[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let trace = from_bytes("test", second.clone()).unwrap();
    let checked = check(&trace).expect("checks");
    let problem = checked.metadata_problem.expect("damage reported");
    assert!(
        problem.starts_with(&format!("byte {record}:")),
        "{problem} (record at {record})"
    );
    for clock in [Clock::Stack, Clock::Gil] {
        let r = report(&second, &under(clock));
        assert!(
            r.warnings.iter().any(|w| w.kind == "damaged_metadata"),
            "{clock}: {:?}",
            r.warnings
        );
    }
}

// ---- the timeline exports ----

#[test]
fn the_timelines_show_carried_on_frames_from_the_file_start() {
    use mtanalyze::timeline::{SliceKind, TimelineSource, Timelines};
    let (_, second) = two_files();
    let trace = from_bytes("test", second).unwrap();
    let t = Timelines::new(&trace, &under(Clock::Stack)).unwrap();
    let frames = |name: &str| -> Vec<(String, u32, u64, u64)> {
        let i = t
            .stacks()
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no stack {name}"));
        t.stack(i)
            .slices
            .iter()
            .filter_map(|s| match s.kind {
                SliceKind::Frame(f) => Some((
                    t.functions()[f as usize].key.function.to_string(),
                    s.depth,
                    s.start_ns,
                    s.end_ns,
                )),
                SliceKind::Paused => None,
            })
            .collect()
    };
    let f = |n: &str, d, s, e| (n.to_owned(), d, s, e);
    // The task suspended across the cut: `job` open from the file's start
    // (ns 0 = tick 100) to its exit at tick 150.
    let job_task = frames("job-task");
    assert!(job_task.contains(&f("job", 0, 0, 50)), "{job_task:?}");
    assert!(job_task.contains(&f("work", 1, 30, 40)), "{job_task:?}");
    // Thread 2's task, on it at the cut: `job > work` from the start.
    let bg = frames("bg");
    assert!(bg.contains(&f("job", 0, 0, 15)), "{bg:?}");
    assert!(bg.contains(&f("work", 1, 0, 5)), "{bg:?}");
}
