//! Compact events (format version 4) through the recorder: every event
//! kind at the encoding's boundaries (tick deltas of every size class,
//! function ids of every width, exits with and without an id, chunk ends
//! reached mid-stream by events of every size), read back by the format
//! crate; a chunk torn by a crash keeps its whole events.

mod common;

use common::{decode, serial, TempTrace};
use mtrace::{Config, Format, FunctionId, LogicalStack, Mode, StackId};
use mtrace_format::layout::{
    CHUNK_HEADER_SIZE, COMPACT_FORMAT_VERSION, COMPACT_LOST_RESERVE, COMPACT_MAX_EVENT_SIZE,
    C_EVENTS_PLUS_ONE, C_STATE,
};
use mtrace_format::{ChunkProblemKind, Event, EventKind, TraceFile};

const CHUNK: usize = 1024;

/// Function ids at the edges of the encodings' widths: one byte, two
/// bytes, four bytes (the enter's short forms end at 2^16 - 1).
const IDS: [u32; 6] = [1, 255, 256, 65535, 65536, u32::MAX];

/// Records, on a thread of its own, a workload that uses every event kind
/// and every id width, with pauses that make tick deltas of each size
/// class; returns what it recorded, in order.
fn workload(rounds: usize) -> Vec<EventKind> {
    let mut out = vec![EventKind::ThreadStart];
    // Even ids go through the thread's recorder taken once (as the Python
    // binding records), odd ones through the functions: the same stream.
    let here = mtrace::ThreadRecorder::current();
    let enter = |out: &mut Vec<EventKind>, f: u32| {
        if f.is_multiple_of(2) {
            here.enter(FunctionId(f));
        } else {
            mtrace::enter(FunctionId(f));
        }
        out.push(EventKind::Enter(FunctionId(f)));
    };
    let exit = |out: &mut Vec<EventKind>, f: u32| {
        if f.is_multiple_of(2) {
            here.exit(FunctionId(f));
        } else {
            mtrace::exit(FunctionId(f));
        }
        out.push(EventKind::Exit(FunctionId(f)));
    };
    let mut task = LogicalStack::new("compact-task");
    let t = task.id();
    for r in 0..rounds {
        // Nested enters of every width, exited innermost first (exits of
        // the named frame: no id), with a long pause now and then (the
        // largest delta class).
        for &f in &IDS {
            enter(&mut out, f);
        }
        if r % 50 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        for &f in IDS.iter().rev() {
            exit(&mut out, f);
        }
        // An exit of a frame that is not the innermost (it names its
        // function, and the chunk forgets its named frames), then the
        // frame left open above it, then a frame never entered.
        enter(&mut out, IDS[r % IDS.len()]);
        enter(&mut out, 7);
        exit(&mut out, IDS[r % IDS.len()]);
        exit(&mut out, 7);
        exit(&mut out, 9);
        // A wake, a switch onto the task and back, with a frame left open
        // on it every other round (exited from the task's next switch in).
        mtrace::wake(t);
        out.push(EventKind::Wake(t));
        {
            let _on = task.enter();
            out.push(EventKind::Switch(t));
            if r % 2 == 0 {
                enter(&mut out, 300 + r as u32);
            } else {
                exit(&mut out, 300 + r as u32 - 1);
            }
        }
        out.push(EventKind::Switch(StackId::OWN));
    }
    drop(task);
    out.push(EventKind::End(t));
    out.push(EventKind::ThreadExit);
    out
}

#[test]
fn every_kind_round_trips_through_the_recorder_across_chunk_ends() {
    let _serial = serial();
    let trace = TempTrace::new("compact-kinds");
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(4 << 20)
            .chunk_size(CHUNK)
            .format(Format::Compact),
    )
    .unwrap();
    let expected = std::thread::Builder::new()
        .name("compact".into())
        .spawn(|| workload(400))
        .unwrap()
        .join()
        .unwrap();
    let summary = recording.finish().unwrap();
    assert_eq!(summary.dropped_events, 0);

    let d = decode(trace.path());
    assert_eq!(d.header.version, COMPACT_FORMAT_VERSION);
    let tid = d.tid("compact");
    let events = d.events(tid);
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds.len(), expected.len());
    assert_eq!(
        kinds, expected,
        "every event, every exit naming its function"
    );
    assert!(events.windows(2).all(|w| w[0].tick <= w[1].tick));
    // The pauses made deltas past the third size class (2^20 ticks).
    assert!(events.windows(2).any(|w| w[1].tick - w[0].tick > 1 << 20));
    assert_eq!(summary.events, d.event_count(), "the summary counts them");
    // Every chunk let go of holds its count, which the summary reads.
    let whole = std::fs::read(trace.path()).unwrap();
    let file = TraceFile::parse(&whole).unwrap();
    let mut counted = 0;
    for slot in 0..file.chunk_slots() {
        let Some(c) = file.chunk(slot).unwrap() else {
            continue;
        };
        let at = c.offset as usize + C_EVENTS_PLUS_ONE;
        let stored = u32::from_le_bytes(whole[at..at + 4].try_into().unwrap());
        assert_eq!(stored as usize, c.events().count() + 1, "slot {slot}");
        counted += 1;
    }
    assert!(counted > 20, "{counted} chunks");

    // Many chunks, each filled to less than a largest event before the
    // `lost` reserve (events of every size met the end of a chunk).
    let chunks = &d.chunks[&tid];
    assert!(chunks.len() > 20, "{} chunks", chunks.len());
    for c in &chunks[..chunks.len() - 1] {
        let end = CHUNK_HEADER_SIZE + c.committed;
        assert!(
            end <= CHUNK - COMPACT_LOST_RESERVE
                && end > CHUNK - COMPACT_LOST_RESERVE - COMPACT_MAX_EVENT_SIZE,
            "chunk {} ends at byte {end}",
            c.chunk_no
        );
    }
    // Compact: the same events took a fraction of 16 bytes each.
    let bytes: usize = chunks.iter().map(|c| c.committed).sum();
    assert!(
        bytes < events.len() * 6,
        "{bytes} bytes for {} events",
        events.len()
    );
}

#[test]
fn a_ring_of_compact_events_drops_nothing_it_did_not_count() {
    let _serial = serial();
    let trace = TempTrace::new("compact-ring");
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(8 * CHUNK as u64)
            .chunk_size(CHUNK)
            .mode(Mode::Ring)
            .format(Format::Compact),
    )
    .unwrap();
    let expected = std::thread::Builder::new()
        .name("compact-ring".into())
        .spawn(|| workload(300))
        .unwrap()
        .join()
        .unwrap();
    let summary = recording.finish().unwrap();
    assert!(summary.wrapped);
    assert_eq!(summary.dropped_events, 0);
    // The survivors are the last events, each chunk decoded alone (its
    // first exits resolved from its own snapshot).
    let d = decode(trace.path());
    let tid = d.tid("compact-ring");
    let chunks = &d.chunks[&tid];
    let kept: Vec<EventKind> = chunks
        .iter()
        .flat_map(|c| c.events.iter().map(|e| e.kind))
        .collect();
    assert!(!kept.is_empty() && kept.len() < expected.len());
    assert_eq!(kept, expected[expected.len() - kept.len()..]);
}

/// The events of every chunk of `bytes`, in slot order: those that decode,
/// and whether the chunk ended at damage.
fn chunk_events(bytes: &[u8]) -> Vec<(Vec<Event>, bool)> {
    let trace = TraceFile::parse(bytes).unwrap();
    (0..trace.chunk_slots())
        .filter_map(|i| trace.chunk(i).ok().flatten())
        .map(|c| {
            let mut ok = Vec::new();
            let mut damaged = c.cut.is_some();
            for e in c.events() {
                match e {
                    Ok(e) => ok.push(e),
                    Err(_) => damaged = true,
                }
            }
            (ok, damaged)
        })
        .collect()
}

#[test]
fn a_torn_chunk_loses_at_most_its_tail() {
    let _serial = serial();
    let trace = TempTrace::new("compact-torn");
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(64 * CHUNK as u64)
            .chunk_size(CHUNK)
            .format(Format::Compact),
    )
    .unwrap();
    std::thread::Builder::new()
        .name("torn".into())
        .spawn(|| workload(40))
        .unwrap()
        .join()
        .unwrap();
    recording.finish().unwrap();
    let whole = std::fs::read(trace.path()).unwrap();
    let chunks_offset = TraceFile::parse(&whole).unwrap().header().chunks_offset as usize;
    let intact = chunk_events(&whole);
    let (first, damaged) = &intact[0];
    assert!(!damaged && first.len() > 10);
    let slot = chunks_offset;
    let state = u64::from_le_bytes(
        whole[slot + C_STATE..slot + C_STATE + 8]
            .try_into()
            .unwrap(),
    );
    let committed = ((state >> 1) & ((1 << 23) - 1)) as usize;
    let body_end = slot + CHUNK_HEADER_SIZE + committed;

    // A file cut anywhere inside the chunk (a crash before the disk got
    // its last pages): exactly the events wholly before the cut are kept,
    // and the chunk says it was cut.
    let mut kept_at = Vec::new();
    for cut in (1..=40).rev() {
        let truncated = &whole[..body_end - cut];
        let got = chunk_events(truncated);
        let (events, damaged) = &got[0];
        assert!(*damaged, "cut {cut}: the chunk says it was cut");
        assert!(
            first.starts_with(events) && events.len() + cut >= first.len(),
            "cut {cut}: {} of {} events kept",
            events.len(),
            first.len()
        );
        kept_at.push((body_end - cut, events.len()));
    }
    // Bytes past an event's start never committed (zeros where the writer
    // had not yet stored them): the events before it are kept, whole, and
    // the rest of the chunk is damage; the other chunks are untouched.
    let mut boundaries = Vec::new();
    for w in kept_at.windows(2) {
        let ((_, before), (at, n)) = (w[0], w[1]);
        if n == before {
            continue; // not an event boundary
        }
        boundaries.push(at);
        // `at` is where event `n` ends, so where event `n + 1` starts.
        let mut torn = whole.clone();
        torn[at..body_end].fill(0);
        let got = chunk_events(&torn);
        let (events, damaged) = &got[0];
        assert!(*damaged, "zeros from {at}");
        assert_eq!(events[..], first[..n], "zeros from {at}");
        assert_eq!(got[1..], intact[1..]);
    }
    // The analyzer reads the torn file, with the events before the tear.
    assert!(boundaries.len() > 3, "events end in the chunk's last bytes");
    let at = boundaries[0];
    let mut torn = whole.clone();
    torn[at..body_end].fill(0);
    let torn_path = trace.path().with_extension("torn");
    std::fs::write(&torn_path, &torn).unwrap();
    let loaded = mtanalyze::load(&torn_path);
    let _ = std::fs::remove_file(&torn_path);
    let loaded = loaded.expect("a torn chunk still loads");
    mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    // A zeroed event is damage, reported at its offset.
    let trace = TraceFile::parse(&torn).unwrap();
    let chunk = trace.chunk(0).unwrap().unwrap();
    let problem = chunk.events().find_map(Result::err).expect("damage found");
    assert!(matches!(problem.kind, ChunkProblemKind::BadCompactEvent(_)));
    assert_eq!(problem.offset, at as u64);
}
