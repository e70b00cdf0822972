//! A forked child shares the parent's trace mapping: it must not record into
//! it, nor finish it. The parent's trace stays intact, and the child ends
//! only the logical stacks that ran in its own recording.

mod common;

use common::{decode, serial, steps, Step, TempTrace};
use mtrace::{Config, FinishError, LogicalStack};

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

#[test]
fn a_child_recording_of_its_own_never_writes_into_the_parents_chunk() {
    let _serial = serial();
    let trace = TempTrace::new("fork-parent");
    let child_trace = TempTrace::new("fork-child");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    let f = mtrace::register_function("parent-work", file!(), 1, module_path!());
    mtrace::enter(f);
    let mut go = [0 as libc::c_int; 2];
    // SAFETY: a pipe into a valid two-int array.
    assert_eq!(unsafe { libc::pipe(go.as_mut_ptr()) }, 0);
    // SAFETY: the child waits on the pipe, records into a file of its own
    // (the recorder is safe to start after fork: the parent's handler ran)
    // and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let mut byte = 0u8;
        // SAFETY: reading one byte from our end of the pipe.
        unsafe { libc::read(go[0], (&mut byte as *mut u8).cast(), 1) };
        // The forking thread still holds a chunk of the parent's file: a
        // recording of its own must drop that hold without writing to it,
        // though the parent has finished its file meanwhile.
        let code = match mtrace::start(Config::new(child_trace.path()).capacity(1 << 20)) {
            Ok(child) => {
                for _ in 0..100 {
                    mtrace::enter(f);
                    mtrace::exit(f);
                }
                i32::from(child.finish().is_err())
            }
            Err(_) => 4,
        };
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    // The parent goes on in its chunk and finishes before the child starts.
    for _ in 0..50 {
        mtrace::enter(f);
        mtrace::exit(f);
    }
    mtrace::exit(f);
    recording.finish().unwrap();
    // SAFETY: one byte into our end of the pipe.
    assert_eq!(unsafe { libc::write(go[1], [1u8].as_ptr().cast(), 1) }, 1);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "the child recorded into its own file"
    );

    let d = decode(trace.path());
    assert!(d.header.finished());
    let tid = d.tid("a_child_recording_of_its_own_never_writes_into_the_parents_chunk");
    let events = steps(&d, &d.events(tid));
    // Start, the outer enter, 50 enter/exit pairs, the outer exit: all of
    // them, whatever the child did after the parent finished.
    assert_eq!(events.len(), 1 + 1 + 100 + 1, "{events:?}");
    let child = decode(child_trace.path());
    assert!(child.header.finished());
}

/// A stack that ran in the parent's recording is dropped in a forked
/// child that records into a file of its own: no end of it there (the
/// child's recording is another generation), while a stack the child ran
/// itself ends.
#[test]
fn a_forked_child_ends_only_the_stacks_it_ran_in_its_own_recording() {
    let _serial = serial();
    let trace = TempTrace::new("fork-ends-parent");
    let child_trace = TempTrace::new("fork-ends-child");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    let mut inherited = LogicalStack::new("inherited");
    drop(inherited.enter());
    let mut own = LogicalStack::new("child's own");
    let own_id = own.id().0;
    // SAFETY: the child records into a file of its own and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let code = match mtrace::start(Config::new(child_trace.path()).capacity(1 << 20)) {
            Ok(child) => {
                drop(inherited);
                drop(own.enter());
                drop(own);
                i32::from(child.finish().is_err())
            }
            Err(_) => 4,
        };
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child recorded");
    recording.finish().unwrap();

    let ends = |path| {
        let d = decode(path);
        d.threads
            .keys()
            .flat_map(|&tid| steps(&d, &d.events(tid)))
            .filter(|s| matches!(s, Step::StackEnd(_)))
            .collect::<Vec<Step>>()
    };
    assert_eq!(ends(child_trace.path()), [Step::StackEnd(own_id)]);
    // The parent ended nothing: both stacks are still alive in it.
    assert_eq!(ends(trace.path()), []);
}
