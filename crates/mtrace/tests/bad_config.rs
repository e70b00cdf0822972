//! A recording that cannot start is an error value, and the program goes on:
//! instrumentation stays a no-op and a later, good start still works.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use common::{decode, serial, TempTrace};
use mtrace::{Config, ConfigError, LogicalStack, LogicalStackExt, StartError};

fn exercise_everything(recording: bool) -> u32 {
    let f = mtrace::register_function("after-error", file!(), 1, module_path!());
    mtrace::enter(f);
    mtrace::exit(f);
    let _scope = mtrace::scope!("after-error-scope");
    let mut stack = LogicalStack::new("after-error-stack");
    {
        let _on = stack.enter();
        mtrace::enter(f);
    }
    // The frame left open travels with the stack, when something records.
    assert_eq!(stack.open_frames().len(), usize::from(recording));
    let mut future = pin!(async { 7 }.on_logical_stack("after-error-task"));
    match future
        .as_mut()
        .poll(&mut Context::from_waker(&noop_waker()))
    {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!(),
    }
}

fn noop_waker() -> Waker {
    fn clone(_: *const ()) -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable functions ignore the data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

#[test]
fn unwritable_paths_are_errors_and_the_program_goes_on() {
    let _serial = serial();
    let err = mtrace::start(Config::new("/proc/nonexistent/x.mtrace")).unwrap_err();
    assert!(matches!(err, StartError::Create { .. }), "{err}");
    assert!(err
        .to_string()
        .starts_with("cannot create trace file /proc/nonexistent/x.mtrace: "));

    let file = TempTrace::new("a-plain-file");
    std::fs::write(file.path(), b"not a directory").unwrap();
    let err = mtrace::start(Config::new(file.path().join("x.mtrace"))).unwrap_err();
    assert!(matches!(err, StartError::Create { .. }), "{err}");

    assert!(!mtrace::is_recording());
    assert_eq!(exercise_everything(false), 7);
    assert!(!mtrace::is_recording());

    // The recorder is still usable afterwards.
    let trace = TempTrace::new("after-error");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    assert_eq!(
        std::thread::spawn(|| exercise_everything(true))
            .join()
            .unwrap(),
        7
    );
    let summary = recording.finish().unwrap();
    assert!(summary.events > 0);
    let d = decode(trace.path());
    assert!(d.stacks.values().any(|n| n == "after-error-task"));
}

#[test]
fn a_ring_larger_than_the_disk_is_refused_at_start() {
    let _serial = serial();
    let trace = TempTrace::new("huge");
    // A ring has its whole size from the start: 16 TiB is no disk here.
    let err = mtrace::start(
        Config::new(trace.path())
            .capacity(1 << 44)
            .mode(mtrace::Mode::Ring),
    )
    .unwrap_err();
    assert!(
        matches!(err, StartError::NoSpace { .. } | StartError::Create { .. }),
        "{err}"
    );
    assert!(!trace.path().exists(), "no half-made file is left behind");
    assert!(!mtrace::is_recording());
}

#[test]
fn a_maximum_beyond_the_address_space_is_refused_at_start() {
    let _serial = serial();
    let trace = TempTrace::new("beyond");
    // A stop-when-full file only grows to its maximum, but the address range
    // for it is reserved at start: 1 PiB is more than a process can map.
    let err = mtrace::start(Config::new(trace.path()).capacity(1 << 50)).unwrap_err();
    assert!(matches!(err, StartError::Reserve { .. }), "{err}");
    assert!(!trace.path().exists(), "no half-made file is left behind");
    assert!(!mtrace::is_recording());
}

#[test]
fn bad_sizes_are_config_errors() {
    let _serial = serial();
    let err = mtrace::start(Config::new("/tmp/never-created.mtrace").capacity(100)).unwrap_err();
    assert!(
        matches!(
            err,
            StartError::Config(ConfigError::CapacityTooSmall { .. })
        ),
        "{err}"
    );
    let err = mtrace::start(Config::new("/tmp/never-created.mtrace").chunk_size(1000)).unwrap_err();
    assert!(
        matches!(err, StartError::Config(ConfigError::BadChunkSize(1000))),
        "{err}"
    );
    assert!(!std::path::Path::new("/tmp/never-created.mtrace").exists());
}

#[test]
fn only_one_recording_runs_at_a_time() {
    let _serial = serial();
    let first = TempTrace::new("first");
    let second = TempTrace::new("second");
    let recording = mtrace::start(Config::new(first.path()).capacity(1 << 20)).unwrap();
    let err = mtrace::start(Config::new(second.path()).capacity(1 << 20)).unwrap_err();
    assert!(
        matches!(err, StartError::AlreadyRecording { ref running } if running == first.path()),
        "{err}"
    );
    assert!(!second.path().exists());
    assert!(mtrace::is_recording());
    recording.finish().unwrap();
    assert!(!mtrace::is_recording());
    // Dropping a recording finishes it too.
    let again = mtrace::start(Config::new(second.path()).capacity(1 << 20)).unwrap();
    drop(again);
    assert!(!mtrace::is_recording());
    assert!(decode(second.path()).header.finished());
}
