//! Threads register themselves on their first event, however late they
//! start, and the trace names them.

mod common;

use std::time::Duration;

use common::{decode, serial, steps, Step, TempTrace};
use mtrace::Config;

fn work(rounds: u32) {
    for _ in 0..rounds {
        let _frame = mtrace::scope!("thread-work");
    }
}

#[test]
fn late_threads_appear_with_their_names() {
    let _serial = serial();
    let trace = TempTrace::new("threads");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(4 << 20).chunk_size(4096)).unwrap();
    let spawn = |name: Option<&str>| {
        let builder = match name {
            Some(n) => std::thread::Builder::new().name(n.to_owned()),
            None => std::thread::Builder::new(),
        };
        builder.spawn(|| work(100)).unwrap()
    };
    let early: Vec<_> = ["early-1", "early-2"]
        .iter()
        .map(|n| spawn(Some(n)))
        .collect();
    for h in early {
        h.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(30));
    spawn(Some("late")).join().unwrap();
    spawn(None).join().unwrap();
    let summary = recording.finish().unwrap();
    assert_eq!(summary.threads, 4);

    let d = decode(trace.path());
    let names: Vec<&str> = d.threads.values().map(|(_, n)| n.as_str()).collect();
    assert_eq!(d.threads.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
    // Ids follow registration order: the late threads come last.
    assert_eq!(&names[2..], ["late", ""]);
    assert!(names[..2].contains(&"early-1") && names[..2].contains(&"early-2"));
    let mut os_tids: Vec<u64> = d.threads.values().map(|(os, _)| *os).collect();
    assert!(os_tids.iter().all(|&t| t != 0));
    os_tids.dedup();
    assert_eq!(os_tids.len(), 4);

    let first_tick = |tid| d.events(tid)[0].tick;
    assert!(first_tick(d.tid("late")) > first_tick(d.tid("early-1")));
    for &tid in d.threads.keys() {
        let s = steps(&d, &d.events(tid));
        assert_eq!(s.len(), 202, "thread {tid}");
        assert_eq!(s[0], Step::Start);
        assert_eq!(s[1], Step::Enter("thread-work".into()));
        assert_eq!(s[201], Step::End, "a joined thread records its exit");
    }
}
