//! Logical stack switches nest, and chunk snapshots taken while nested name
//! the thread's own frames and the current logical stack's frames.

mod common;

use common::{decode, replay, serial, steps, Step, TempTrace};
use mtrace::{Config, LogicalStack, StackId};

#[test]
fn nested_switches_return_to_the_previous_stack() {
    const BUSY: usize = 2000;
    let _serial = serial();
    let trace = TempTrace::new("nested-stacks");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(1024)).unwrap();
    let (a_id, b_id) = std::thread::Builder::new()
        .name("nester".into())
        .spawn(|| {
            let own = mtrace::register_function("own", file!(), 1, module_path!());
            let on_a = mtrace::register_function("on-a", file!(), 2, module_path!());
            let on_b = mtrace::register_function("on-b", file!(), 3, module_path!());
            let busy = mtrace::register_function("busy", file!(), 4, module_path!());
            let mut a = LogicalStack::new("A");
            let mut b = LogicalStack::anonymous();
            let ids = (a.id(), b.id());
            mtrace::enter(own);
            {
                let _on_a = mtrace::switch_to(&mut a);
                mtrace::enter(on_a);
                {
                    let _on_b = b.enter();
                    mtrace::enter(on_b);
                    // Enough events to cross several 1 KiB chunks while
                    // nested (compact events take a few bytes each).
                    for _ in 0..BUSY {
                        mtrace::enter(busy);
                        mtrace::exit(busy);
                    }
                } // back on A, with B's frame left open on B
                mtrace::exit(on_a);
            } // back on the thread's own stack
            mtrace::exit(own);
            assert_eq!(a.open_frames(), &[] as &[u32]);
            assert_eq!(b.open_frames(), &[on_b.0]);
            // Both ran: each ends, B with its frame still open.
            drop(b);
            drop(a);
            ids
        })
        .unwrap()
        .join()
        .unwrap();
    recording.finish().unwrap();

    let d = decode(trace.path());
    assert_eq!(d.stacks.get(&a_id.0).map(String::as_str), Some("A"));
    assert!(
        !d.stacks.contains_key(&b_id.0),
        "anonymous stacks have no name record"
    );
    let tid = d.tid("nester");
    let got = steps(&d, &d.events(tid));
    let e = |n: &str| Step::Enter(n.into());
    let x = |n: &str| Step::Exit(n.into());
    let mut expected = vec![
        Step::Start,
        e("own"),
        Step::Switch(a_id.0),
        e("on-a"),
        Step::Switch(b_id.0),
        e("on-b"),
    ];
    for _ in 0..BUSY {
        expected.extend([e("busy"), x("busy")]);
    }
    expected.extend([
        Step::Switch(a_id.0),
        x("on-a"),
        Step::Switch(StackId::OWN.0),
        x("own"),
        Step::StackEnd(b_id.0),
        Step::StackEnd(a_id.0),
        Step::End,
    ]);
    assert_eq!(got, expected);

    let chunks = &d.chunks[&tid];
    assert!(chunks.len() > 3);
    let own = d.function("own").id.0;
    let on_b = d.function("on-b").id.0;
    let nested: Vec<_> = chunks.iter().filter(|c| c.snapshot.stack == b_id).collect();
    assert!(!nested.is_empty(), "some chunk was claimed while on B");
    for c in nested {
        assert_eq!(
            c.snapshot.own,
            [own],
            "the thread's own frames, kept aside while on a logical stack"
        );
        assert_eq!(c.snapshot.stack_frames[0], on_b);
    }
    for pair in chunks.windows(2) {
        let end = replay(&pair[0].snapshot, &pair[0].events);
        assert!(
            end.agrees_with(&pair[1].snapshot),
            "{end:?} vs {:?}",
            pair[1].snapshot
        );
    }
}

#[test]
fn switches_that_fill_chunks_keep_every_frame_where_it_belongs() {
    let _serial = serial();
    let trace = TempTrace::new("switch-chunk-ends");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(1024)).unwrap();
    // 1 KiB chunks hold a few dozen 16-byte events or a few hundred
    // compact ones: some switches in and some switches out land at a
    // chunk's end and claim the next chunk.
    const ROUNDS: usize = 3000;
    let task_id = std::thread::Builder::new()
        .name("switcher".into())
        .spawn(|| {
            let own = mtrace::register_function("own", file!(), 1, module_path!());
            let step = mtrace::register_function("step", file!(), 2, module_path!());
            let mut task = LogicalStack::new("task");
            mtrace::enter(own);
            for i in 0..ROUNDS {
                let _on_task = task.enter();
                if i % 2 == 0 {
                    mtrace::enter(step);
                } else {
                    mtrace::exit(step);
                }
            }
            mtrace::exit(own);
            assert_eq!(task.open_frames(), &[] as &[u32]);
            task.id()
        })
        .unwrap()
        .join()
        .unwrap();
    recording.finish().unwrap();

    let d = decode(trace.path());
    let tid = d.tid("switcher");
    let got = steps(&d, &d.events(tid));
    let mut expected = vec![Step::Start, Step::Enter("own".into())];
    for i in 0..ROUNDS {
        expected.push(Step::Switch(task_id.0));
        expected.push(if i % 2 == 0 {
            Step::Enter("step".into())
        } else {
            Step::Exit("step".into())
        });
        expected.push(Step::Switch(StackId::OWN.0));
    }
    expected.extend([
        Step::Exit("own".into()),
        // The task's stack is dropped as the thread returns.
        Step::StackEnd(task_id.0),
        Step::End,
    ]);
    assert_eq!(got, expected);

    let chunks = &d.chunks[&tid];
    assert!(chunks.len() > 10, "{} chunks", chunks.len());
    let own = d.function("own").id.0;
    for c in chunks.iter().skip(1) {
        assert_eq!(
            c.snapshot.own,
            [own],
            "the thread's own frame, whichever stack runs"
        );
    }
    for pair in chunks.windows(2) {
        let end = replay(&pair[0].snapshot, &pair[0].events);
        assert!(
            end.agrees_with(&pair[1].snapshot),
            "{end:?} vs {:?}",
            pair[1].snapshot
        );
    }
}
