//! A forked child shares the parent's trace mapping: it must not record into
//! it, nor finish it. The parent's trace stays intact.

mod common;

use common::{decode, serial, steps, Step, TempTrace};
use mtrace::{Config, FinishError};

#[test]
fn a_forked_child_leaves_the_parents_trace_alone() {
    let _serial = serial();
    let trace = TempTrace::new("fork");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    let f = mtrace::register_function("around-fork", file!(), 1, module_path!());
    mtrace::enter(f);
    // SAFETY: the child only calls async-signal-safe code (atomic loads and
    // stores; `finish` returns before taking any lock) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // Child: nothing records, and finishing does not touch the file.
        let mut code = 0;
        if mtrace::is_recording() {
            code |= 1;
        }
        for _ in 0..10_000 {
            mtrace::enter(f);
            mtrace::exit(f);
        }
        if !matches!(recording.finish(), Err(FinishError::OtherProcess)) {
            code |= 2;
        }
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "1: child recorded, 2: child finished the file"
    );
    mtrace::exit(f);
    recording.finish().unwrap();

    let d = decode(trace.path());
    assert!(d.header.finished());
    let tid = d.tid("a_forked_child_leaves_the_parents_trace_alone");
    assert_eq!(
        steps(&d, &d.events(tid)),
        [
            Step::Start,
            Step::Enter("around-fork".into()),
            Step::Exit("around-fork".into())
        ]
    );
}
