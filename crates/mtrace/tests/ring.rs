//! Ring mode: a small ring that wrapped many times still decodes, each
//! remaining chunk on its own, and each chunk's snapshot names exactly the
//! frames that were open when it was claimed.
//!
//! The workload is deterministic, so the test can replay the recorder's
//! chunking on the expected event sequence and say, for every surviving
//! chunk, which events and which snapshot it must hold.

mod common;

use std::collections::HashMap;

use common::{decode, replay, serial, Snapshot, TempTrace};
use mtrace::{Config, Format, FunctionId, LogicalStack, Mode, StackId};
use mtrace_format::layout::{snapshot_size, CHUNK_HEADER_SIZE, EVENT_SIZE, LOST_RESERVE};
use mtrace_format::EventKind;

const CHUNK: usize = 1024;
const SLOTS: u64 = 16;

/// Runs the workload and returns the events it records, in order.
fn workload(iterations: u64) -> Vec<EventKind> {
    let f: Vec<FunctionId> = (0..8)
        .map(|i| mtrace::register_function(&format!("ring-f{i}"), file!(), i, module_path!()))
        .collect();
    let mut stack = LogicalStack::new("ring-stack");
    let s = stack.id();
    let mut open_on_stack = false;
    let mut out = vec![EventKind::ThreadStart];
    let enter = |out: &mut Vec<EventKind>, id: FunctionId| {
        mtrace::enter(id);
        out.push(EventKind::Enter(id));
    };
    let exit = |out: &mut Vec<EventKind>, id: FunctionId| {
        mtrace::exit(id);
        out.push(EventKind::Exit(id));
    };
    for i in 0..iterations {
        let depth = (i % 7) as usize;
        for &id in &f[..depth] {
            enter(&mut out, id);
        }
        if i % 3 == 0 {
            let _on = stack.enter();
            out.push(EventKind::Switch(s));
            if open_on_stack {
                exit(&mut out, f[7]);
            } else {
                enter(&mut out, f[7]);
            }
            open_on_stack = !open_on_stack;
            enter(&mut out, f[6]);
            exit(&mut out, f[6]);
            drop(_on);
            out.push(EventKind::Switch(StackId::OWN));
        }
        for &id in f[..depth].iter().rev() {
            exit(&mut out, id);
        }
    }
    // The stack ran (at i = 0): dropping it ends it.
    drop(stack);
    if iterations > 0 {
        out.push(EventKind::End(s));
    }
    out.push(EventKind::ThreadExit);
    out
}

/// Frames open before event `i`, for each `i`: the recorder's shadow stacks.
struct Model {
    own: Vec<u32>,
    current: StackId,
    stacks: HashMap<u64, Vec<u32>>,
}

impl Model {
    fn snapshot(&self) -> Snapshot {
        let stack_frames = if self.current == StackId::OWN {
            Vec::new()
        } else {
            self.stacks
                .get(&self.current.0)
                .cloned()
                .unwrap_or_default()
        };
        Snapshot {
            own: self.own.clone(),
            stack: self.current,
            stack_frames,
            flags: 0,
        }
    }

    fn apply(&mut self, e: EventKind) {
        let frames = if self.current == StackId::OWN {
            &mut self.own
        } else {
            self.stacks.entry(self.current.0).or_default()
        };
        match e {
            EventKind::Enter(f) => frames.push(f.0),
            EventKind::Exit(f) => assert_eq!(frames.pop(), Some(f.0)),
            EventKind::Switch(s) => self.current = s,
            EventKind::End(s) => {
                self.stacks.remove(&s.0);
            }
            _ => {}
        }
    }
}

/// Splits `events` into chunks as the recorder does: each chunk starts with a
/// snapshot of the frames open before its first event, and holds as many
/// events as fit after it.
fn expected_chunks(events: &[EventKind]) -> Vec<(Snapshot, Vec<EventKind>)> {
    let mut model = Model {
        own: Vec::new(),
        current: StackId::OWN,
        stacks: HashMap::new(),
    };
    let mut chunks = Vec::new();
    let mut at = 0;
    while at < events.len() {
        let snap = model.snapshot();
        // Events stop `LOST_RESERVE` bytes short of the chunk's end.
        let room = CHUNK
            - CHUNK_HEADER_SIZE
            - snapshot_size(snap.own.len(), snap.stack_frames.len())
            - LOST_RESERVE;
        let end = (at + room / EVENT_SIZE).min(events.len());
        for &e in &events[at..end] {
            model.apply(e);
        }
        chunks.push((snap, events[at..end].to_vec()));
        at = end;
    }
    chunks
}

#[test]
fn ring_that_wrapped_decodes_chunk_by_chunk() {
    ring_wraps_and_decodes(Format::Compact);
}

#[test]
fn ring_of_16_byte_events_splits_exactly_as_modelled() {
    ring_wraps_and_decodes(Format::Fixed);
}

/// A ring that wrapped several times keeps the latest chunks, each
/// decodable alone from its snapshot. 16-byte events split at positions
/// the test predicts; compact ones (whose sizes depend on the clock) are
/// checked against the expected events from where the survivors start.
fn ring_wraps_and_decodes(format: Format) {
    let _serial = serial();
    let trace = TempTrace::new("ring");
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(SLOTS * CHUNK as u64)
            .chunk_size(CHUNK)
            .mode(Mode::Ring)
            .format(format),
    )
    .unwrap();
    // Compact events take a few bytes: more iterations wrap the ring as often.
    let iterations = match format {
        Format::Compact => 40_000,
        Format::Fixed => 5_000,
    };
    let expected = std::thread::Builder::new()
        .name("ring-writer".into())
        .spawn(move || workload(iterations))
        .unwrap()
        .join()
        .unwrap();
    let summary = recording.finish().unwrap();
    assert!(summary.wrapped);
    assert_eq!(summary.dropped_events, 0);

    let d = decode(trace.path());
    assert!(d.header.ring());
    assert_eq!(d.header.version, format.version());
    assert!(
        d.header.next_seq > 5 * SLOTS,
        "the ring wrapped several times ({} claims)",
        d.header.next_seq
    );
    let tid = d.tid("ring-writer");
    let chunks = &d.chunks[&tid];
    assert_eq!(
        chunks.len() as u64,
        SLOTS,
        "every slot holds one of the latest chunks"
    );
    let first = chunks[0].chunk_no as usize;
    assert!(first > 0, "the first chunks were overwritten");

    if format == Format::Fixed {
        let model = expected_chunks(&expected);
        assert_eq!(
            chunks.last().unwrap().chunk_no as usize,
            model.len() - 1,
            "the last chunk survives"
        );
        for c in chunks {
            let (_, events) = &model[c.chunk_no as usize];
            let kinds: Vec<EventKind> = c.events.iter().map(|e| e.kind).collect();
            assert_eq!(&kinds, events, "events of chunk {}", c.chunk_no);
        }
    }
    // The survivors hold the last events, in order, each chunk starting
    // from a snapshot of exactly the frames open before its first event.
    let kept: usize = chunks.iter().map(|c| c.events.len()).sum();
    let mut at = expected.len() - kept;
    let mut model = Model {
        own: Vec::new(),
        current: StackId::OWN,
        stacks: HashMap::new(),
    };
    for &e in &expected[..at] {
        model.apply(e);
    }
    for (k, c) in chunks.iter().enumerate() {
        assert_eq!(
            c.chunk_no as usize,
            first + k,
            "surviving chunks are the latest, in a row"
        );
        let mut got = c.snapshot.clone();
        got.flags = 0;
        assert_eq!(got, model.snapshot(), "snapshot of chunk {}", c.chunk_no);
        assert_eq!(c.snapshot.flags, 0, "nothing truncated");
        let kinds: Vec<EventKind> = c.events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            expected[at..at + kinds.len()],
            "events of chunk {}",
            c.chunk_no
        );
        for &e in &kinds {
            model.apply(e);
        }
        at += kinds.len();
        // Decodable alone: replaying from the snapshot never closes a frame
        // that is not open, and ends where the next chunk's snapshot starts.
        let end = replay(&c.snapshot, &c.events);
        if let Some(next) = chunks.get(k + 1) {
            assert!(
                end.agrees_with(&next.snapshot),
                "chunk {} ends at {end:?}, chunk {} starts at {:?}",
                c.chunk_no,
                next.chunk_no,
                next.snapshot
            );
        }
    }
    assert_eq!(at, expected.len(), "the last chunk survives");
    // The snapshots really do name open frames on both kinds of stack.
    assert!(chunks.iter().any(|c| !c.snapshot.own.is_empty()));
    assert!(chunks
        .iter()
        .any(|c| c.snapshot.stack != StackId::OWN || c.snapshot.own.len() >= 3));
}

#[test]
fn deep_stacks_are_cut_to_the_innermost_frames() {
    let _serial = serial();
    let trace = TempTrace::new("ring-deep");
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(8 * CHUNK as u64)
            .chunk_size(CHUNK)
            .mode(Mode::Ring),
    )
    .unwrap();
    std::thread::Builder::new()
        .name("deep".into())
        .spawn(|| {
            let f = mtrace::register_function("deep", file!(), 1, module_path!());
            // 2000 open frames: more than a snapshot (a quarter of the
            // body) holds, over more than a chunk of compact events.
            for _ in 0..2000 {
                mtrace::enter(f);
            }
            for _ in 0..2000 {
                mtrace::exit(f);
            }
        })
        .unwrap()
        .join()
        .unwrap();
    recording.finish().unwrap();
    let d = decode(trace.path());
    let chunks = &d.chunks[&d.tid("deep")];
    let deepest = chunks.iter().map(|c| c.snapshot.own.len()).max().unwrap();
    let room = ((CHUNK - CHUNK_HEADER_SIZE) / 4 - 32) / 4;
    assert_eq!(deepest, room);
    assert!(chunks
        .iter()
        .any(|c| c.snapshot.flags & mtrace_format::layout::SNAP_OWN_TRUNCATED != 0));
}
