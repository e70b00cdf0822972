//! Crash survival: a recording process killed with SIGKILL leaves every
//! event it committed readable.
//!
//! The test re-executes its own binary to run `crash_child`, which records a
//! deterministic sequence in a loop and prints how far it got. The parent
//! kills it mid-flight and checks that the file holds a prefix of that
//! sequence at least as long as the last progress line: full chunks decode,
//! and the chunk being written yields its committed part.

mod common;

use common::{decode, kill_child_at, steps, Step, TempTrace};
use mtrace::Config;

const CHILD_ENV: &str = "MTRACE_TEST_CRASH_CHILD";
const NAMES: [&str; 3] = ["outer", "middle", "inner"];

/// The sequence the child records: iteration `i` opens `i % 3 + 1` nested frames and closes them.
fn iteration(i: u64, out: &mut Vec<Step>) {
    let depth = (i % 3 + 1) as usize;
    for name in &NAMES[..depth] {
        out.push(Step::Enter(name.to_string()));
    }
    for name in NAMES[..depth].iter().rev() {
        out.push(Step::Exit(name.to_string()));
    }
}

/// Not a test on its own: the body of the child process.
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let recording =
        mtrace::start(Config::new(path).capacity(256 << 20).chunk_size(4096)).expect("start");
    // Never finished: the process is killed.
    std::mem::forget(recording);
    let ids: Vec<_> = NAMES
        .iter()
        .map(|n| mtrace::register_function(n, file!(), 1, module_path!()))
        .collect();
    let mut i = 0u64;
    loop {
        let depth = (i % 3 + 1) as usize;
        for &id in &ids[..depth] {
            mtrace::enter(id);
        }
        for &id in ids[..depth].iter().rev() {
            mtrace::exit(id);
        }
        i += 1;
        if i.is_multiple_of(4096) {
            // Every event of iterations < i is committed before this line.
            println!("progress {i}");
        }
    }
}

#[test]
fn sigkill_leaves_every_committed_event_readable() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let trace = TempTrace::new("crash");
    let reached = kill_child_at("crash_child", CHILD_ENV, trace.path(), "progress ", 100_000);

    let d = decode(trace.path());
    assert!(!d.header.finished(), "a killed recording is not finished");
    assert_eq!(d.header.end_tick, None);
    let tid = d.tid("crash_child");
    let chunks = &d.chunks[&tid];
    assert!(chunks.len() > 10);
    // Every chunk but the one being written was released. (The kill may
    // also land between releasing one chunk and claiming the next.)
    for c in &chunks[..chunks.len() - 1] {
        assert!(!c.writing, "chunk {} still marked writing", c.chunk_no);
    }

    let events = d.events(tid);
    let got = steps(&d, &events);
    let mut expected = vec![Step::Start];
    let mut i = 0;
    while expected.len() < got.len() {
        iteration(i, &mut expected);
        i += 1;
    }
    assert_eq!(
        got,
        expected[..got.len()],
        "the file holds a prefix of the sequence"
    );
    let mut at_progress = vec![Step::Start];
    for i in 0..reached {
        iteration(i, &mut at_progress);
    }
    assert!(
        got.len() >= at_progress.len(),
        "{} events recorded, but {} were committed before the last progress line",
        got.len(),
        at_progress.len()
    );
}
