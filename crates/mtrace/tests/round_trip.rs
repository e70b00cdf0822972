//! Round trip through the real recorder and the real reader, on 1 and 8
//! threads: every event comes back in order, on the right thread, with the
//! right function and the right stack switches.

mod common;

use common::{decode, serial, steps, Step, TempTrace};
use mtrace::{ClockSource, Config, FunctionId, LogicalStack, StackId};
use mtrace_format::layout::FLAG_FINISHED;
use mtrace_format::ClockKind;

const NAMES: [&str; 4] = ["alpha", "beta", "gamma", "delta"];

/// Runs a deterministic mix of scopes, nested calls, and stack switches with
/// a frame left open on the logical stack between switches; returns the
/// steps it should have recorded.
fn script(t: usize, iterations: usize) -> Vec<Step> {
    let ids: Vec<FunctionId> = NAMES
        .iter()
        .map(|n| mtrace::register_function(n, file!(), 1, module_path!()))
        .collect();
    let mut stack = LogicalStack::new(format!("stack-{t}"));
    let stack_id = stack.id();
    let mut open_on_stack = false;
    let mut expected = vec![Step::Start];
    let enter = |expected: &mut Vec<Step>, d: usize| {
        mtrace::enter(ids[d]);
        expected.push(Step::Enter(NAMES[d].into()));
    };
    let exit = |expected: &mut Vec<Step>, d: usize| {
        mtrace::exit(ids[d]);
        expected.push(Step::Exit(NAMES[d].into()));
    };
    for i in 0..iterations {
        {
            let _outer = mtrace::scope!("outer");
            expected.push(Step::Enter("outer".into()));
            let depth = (i + t) % 4;
            for d in 0..depth {
                enter(&mut expected, d);
            }
            if i % 5 == 0 {
                let _on_stack = stack.enter();
                expected.push(Step::Switch(stack_id.0));
                if open_on_stack {
                    exit(&mut expected, 2);
                } else {
                    enter(&mut expected, 2);
                }
                open_on_stack = !open_on_stack;
                enter(&mut expected, 3);
                exit(&mut expected, 3);
            }
            if i % 5 == 0 {
                expected.push(Step::Switch(StackId::OWN.0));
            }
            for d in (0..depth).rev() {
                exit(&mut expected, d);
            }
        }
        expected.push(Step::Exit("outer".into()));
    }
    // The stack ran (at i = 0): dropping it ends it, its frame 2 perhaps
    // still open.
    drop(stack);
    if iterations > 0 {
        expected.push(Step::StackEnd(stack_id.0));
    }
    expected.push(Step::End);
    expected
}

fn round_trip(threads: usize, iterations: usize, clock: ClockSource) {
    let _serial = serial();
    let trace = TempTrace::new(&format!("round-trip-{threads}-{clock:?}"));
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(32 << 20)
            .chunk_size(4096)
            .clock(clock),
    )
    .expect("start");
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("rt-{t}"))
                .spawn(move || script(t, iterations))
                .unwrap()
        })
        .collect();
    let expected: Vec<Vec<Step>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let summary = recording.finish().expect("finish");
    assert_eq!(summary.dropped_events, 0);
    assert_eq!(summary.threads, threads as u64);

    let d = decode(trace.path());
    assert!(d.header.flags & FLAG_FINISHED != 0);
    assert_eq!(d.header.dropped_events, 0);
    let expected_kind = if clock == ClockSource::Auto && mtrace::bench::has_invariant_tsc() {
        ClockKind::Tsc
    } else {
        ClockKind::Nanoseconds
    };
    assert_eq!(d.header.clock.kind, expected_kind);
    let end = d.header.end_tick.expect("end tick");
    let mut total = 0;
    for (t, expected) in expected.iter().enumerate() {
        let tid = d.tid(&format!("rt-{t}"));
        let events = d.events(tid);
        assert!(d.chunks[&tid].len() > 1, "the test should span chunks");
        assert!(events
            .iter()
            .all(|e| e.tick <= end && e.tick >= d.header.clock.start_tick));
        let got = steps(&d, &events);
        assert_eq!(got.len(), expected.len(), "thread rt-{t}");
        for (i, (g, e)) in got.iter().zip(expected).enumerate() {
            assert_eq!(g, e, "thread rt-{t}, event {i}");
        }
        total += events.len() as u64;
        let stack_name = d
            .stacks
            .values()
            .filter(|n| **n == format!("stack-{t}"))
            .count();
        assert_eq!(stack_name, 1, "stack-{t} named once");
    }
    assert_eq!(total, summary.events);
    assert_eq!(total, d.event_count());
}

#[test]
fn one_thread_round_trips() {
    round_trip(1, 3000, ClockSource::Auto);
}

#[test]
fn eight_threads_round_trip() {
    round_trip(8, 2000, ClockSource::Auto);
}

#[test]
fn monotonic_clock_round_trips() {
    round_trip(2, 500, ClockSource::Monotonic);
}

#[test]
fn recordings_follow_each_other_and_threads_rebind() {
    let _serial = serial();
    let f = mtrace::register_function("again", file!(), 1, module_path!());
    // One long-lived thread records into two recordings in turn.
    let (go, wait) = std::sync::mpsc::channel::<bool>();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::Builder::new()
        .name("rebinding".into())
        .spawn(move || {
            while let Ok(open_a_frame) = wait.recv() {
                mtrace::enter(f);
                if !open_a_frame {
                    mtrace::exit(f);
                }
                done.send(()).unwrap();
            }
        })
        .unwrap();
    let mut files = Vec::new();
    for round in 0..2 {
        let trace = TempTrace::new(&format!("rebind-{round}"));
        let recording =
            mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
        // Round 0 leaves a frame open; round 1 must not see it.
        go.send(round == 0).unwrap();
        finished.recv().unwrap();
        recording.finish().unwrap();
        files.push(trace);
    }
    drop(go);
    worker.join().unwrap();
    let first = decode(files[0].path());
    let second = decode(files[1].path());
    let tid = first.tid("rebinding");
    assert_eq!(
        steps(&first, &first.events(tid)),
        [Step::Start, Step::Enter("again".into())]
    );
    let tid = second.tid("rebinding");
    assert_eq!(tid, 1, "thread ids restart in each recording");
    assert_eq!(
        steps(&second, &second.events(tid)),
        [
            Step::Start,
            Step::Enter("again".into()),
            Step::Exit("again".into())
        ]
    );
    // The second recording's first chunk starts with no stale frame.
    assert!(second.chunks[&tid][0].snapshot.own.is_empty());
    // Function ids are stable across recordings, and named in both.
    assert_eq!(first.name(f), "again");
    assert_eq!(second.name(f), "again");
}

/// Issue 18: a recording says which host it ran on (a metadata record),
/// and the analyzer's summary carries it.
#[test]
fn a_recording_names_its_host() {
    let _serial = common::serial();
    let trace = common::TempTrace::new("host");
    let recording = mtrace::start(mtrace::Config::new(trace.path()).capacity(1 << 20)).unwrap();
    {
        let _s = mtrace::scope!("work");
    }
    recording.finish().unwrap();
    let d = common::decode(trace.path());
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    assert_eq!(
        unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) },
        0
    );
    let end = buf.iter().position(|&b| b == 0).unwrap();
    let host = String::from_utf8_lossy(&buf[..end]).into_owned();
    assert_eq!(d.hosts, std::slice::from_ref(&host));
    let loaded = mtanalyze::load(trace.path()).unwrap();
    let report = mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).unwrap();
    assert_eq!(report.trace.host, host);
}
