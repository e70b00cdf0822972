//! Marks (`mtrace::mark`) through the real recorder and the real reader:
//! each mark is in the file with its name and the writer's thread id, and
//! its tick lies between the events the thread recorded before and after
//! the call.

mod common;

use common::{decode, serial, TempTrace};
use mtrace::Config;
use mtrace_format::EventKind;

#[test]
fn marks_land_between_the_events_around_them() {
    let _serial = serial();
    let trace = TempTrace::new("marks");
    // Not recording: a mark does nothing (and is not in the next recording).
    mtrace::mark("before any recording");
    let recording = mtrace::start(Config::new(trace.path())).expect("start");
    let main = std::thread::Builder::new()
        .name("marker".into())
        .spawn(|| {
            {
                let _s = mtrace::scope!("before");
            }
            mtrace::mark("warm-up done");
            {
                let _s = mtrace::scope!("between");
            }
            mtrace::mark("warm-up done"); // names may repeat
            mtrace::mark("");
            {
                let _s = mtrace::scope!("after");
            }
        })
        .expect("spawn");
    main.join().expect("join");
    // A thread that recorded no event has no trace id: its mark says 0.
    std::thread::spawn(|| mtrace::mark("from a quiet thread"))
        .join()
        .expect("join");
    recording.finish().expect("finish");
    mtrace::mark("after the recording");

    let d = decode(trace.path());
    let tid = d.tid("marker");
    let names: Vec<&str> = d.marks.iter().map(|m| m.2.as_str()).collect();
    assert_eq!(
        names,
        ["warm-up done", "warm-up done", "", "from a quiet thread"]
    );
    let tids: Vec<u64> = d.marks.iter().map(|m| u64::from(m.1)).collect();
    assert_eq!(tids, [tid, tid, tid, 0]);

    // The ticks of the marker thread's enters and exits, by function name.
    let events = d.events(tid);
    let tick_of = |kind: fn(mtrace::FunctionId) -> EventKind, name: &str| {
        let f = d.function(name).id;
        events
            .iter()
            .find(|e| e.kind == kind(f))
            .unwrap_or_else(|| panic!("no event of {name}"))
            .tick
    };
    let ticks: Vec<u64> = d.marks.iter().map(|m| m.0).collect();
    assert!(tick_of(EventKind::Exit, "before") <= ticks[0], "{ticks:?}");
    assert!(
        ticks[0] <= tick_of(EventKind::Enter, "between"),
        "{ticks:?}"
    );
    assert!(tick_of(EventKind::Exit, "between") <= ticks[1], "{ticks:?}");
    assert!(ticks[1] <= ticks[2], "{ticks:?}");
    assert!(ticks[2] <= tick_of(EventKind::Enter, "after"), "{ticks:?}");
    // The quiet thread's mark came after the marker thread ended, and
    // before the end of the recording.
    assert!(tick_of(EventKind::Exit, "after") <= ticks[3], "{ticks:?}");
    let end = d.header.end_tick.expect("finished");
    assert!(ticks[3] <= end, "{ticks:?} end {end}");
    assert!(d.header.clock.start_tick <= ticks[0]);
}
