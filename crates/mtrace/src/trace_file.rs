//! One file of a recording, from its making to its finish: the map, the
//! header, the provisioner and the [`Shared`] the threads write through
//! ([`open`]), and at the end the header's end time, the cut after the
//! slots used and the detach ([`finish`]). A recording has one file; a
//! rotating one (`rotate.rs`) a series of them. Publishing a file to the
//! threads, and the locking around both, are the callers' (`recording.rs`,
//! `rotate.rs`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mtrace_format::layout::*;

use crate::clock::RunClock;
use crate::config::{Config, Format, Mode};
use crate::error::StartError;
use crate::file::TraceMap;
use crate::provision::{self, Provisioner};
use crate::shared::{generation, lock, MetaRegion, Series, Shared};

/// What a finished recording holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The trace file (a rotating recording's first path: the series' name).
    pub path: PathBuf,
    /// Files written: 1, or more when the recording rotated (`MTRACE_KEEP`
    /// may have deleted some). The counts below are the series' totals
    /// where they say so.
    pub files: u64,
    /// Events committed (snapshots not counted; `lost` marks, one per
    /// thread whose claim failed while it held a chunk, counted); all
    /// files' of a series.
    pub events: u64,
    /// Chunks holding committed data (all files').
    pub chunks: u64,
    /// Chunk slots in the (last) file: in `StopWhenFull` mode the slots
    /// chunks were claimed in (the file ends after them), in `Ring` mode all.
    pub chunk_count: u64,
    /// Ring mode only: older chunks were overwritten.
    pub wrapped: bool,
    /// Events that could not be stored (`StopWhenFull` after the file reached
    /// its maximum or the disk filled up, or a ring whose chunks were all
    /// busy); all files'.
    pub dropped_events: u64,
    /// Chunk claims refused (file full) or skipped (slot busy); all files'.
    pub dropped_chunks: u64,
    /// `StopWhenFull`: how many times the (last) file grew after its first step.
    pub growths: u64,
    /// `StopWhenFull`: why the file stopped growing before its maximum (the
    /// system's message, such as "No space left on device"), if it did.
    pub growth_failure: Option<String>,
    /// Chunk slots of the (last) file whose pages the provisioner thread
    /// mapped before they were claimed (at most 4 MiB of them past the
    /// last claim).
    pub slots_prepared: u64,
    /// Threads that recorded at least one event (in a rotating series: in
    /// any of its files, each thread once).
    pub threads: u64,
    /// Bytes of metadata written in the (last) file.
    pub meta_bytes: u64,
    /// Metadata records that did not fit (all files').
    pub meta_dropped: u64,
    /// Wall time from start to finish (of the last file).
    pub duration: Duration,
}

/// Makes a file for `config`, file `k` of recording (series) number
/// `series_no`, whose clock `clock` starts once the file exists (a
/// start's clock calibration spins meanwhile; a rotation's next file
/// starts as late as it can): the file, its header, its provisioner
/// thread. The file is not published to the threads yet. Leaves no file
/// behind on error.
pub(crate) fn open(
    config: &Config,
    (series_no, k): (u64, u64),
    clock: impl FnOnce() -> RunClock,
    series: Option<&'static Series>,
    stretches: u64,
) -> Result<&'static Shared, StartError> {
    // Started while the file is made (see `provision.rs`).
    let provisioner_thread = if config.provisioner {
        provision::spawn()
    } else {
        None
    };
    let map = TraceMap::create(config)?;
    let clock = clock();
    map.write_header(config, &clock);
    let provisioner = Provisioner::new(&map);
    let meta = MetaRegion::new(&map);
    let shared: &'static Shared = Box::leak(Box::new(Shared {
        gen: generation(series_no, k, clock.tsc),
        map,
        provisioner,
        mode: config.mode,
        compact: config.format == Format::Compact,
        names_on_use: config.names_on_use,
        clock,
        threads: AtomicU64::new(0),
        meta: Mutex::new(meta),
        finished: AtomicBool::new(false),
        stretches: AtomicU64::new(stretches),
        started: Instant::now(),
        pid: crate::process::pid(),
        series,
        bound: AtomicU64::new(0),
        retired: AtomicBool::new(false),
        next_given_back: AtomicPtr::new(std::ptr::null_mut()),
        first_file: k == 0,
        adoptions: Mutex::new(Default::default()),
    }));
    #[cfg(test)]
    crate::shared::tests::LIVE_FILES.fetch_add(1, Ordering::Relaxed);
    // Before the file is published: the first claim can wake it.
    let job = provision::Job {
        map: &shared.map,
        mode: shared.mode,
        state: &shared.provisioner,
    };
    provision::start(job, provisioner_thread);
    Ok(shared)
}

/// The events of compact chunk `slot` as its writer counted them when it
/// let go of it (`C_EVENTS_PLUS_ONE`, stored before the state word, which
/// was loaded with acquire ordering), if it did (`writing` is clear).
fn released_count(map: &TraceMap, slot: u64, writing: bool) -> Option<u64> {
    if writing {
        return None;
    }
    // SAFETY: the slot is below the ready slots, so its header is mapped
    // (4-aligned at 0x20 of a 64-aligned header). Atomic: a ring may hand
    // the slot to a new claim meanwhile (a thread still running as the
    // recording finishes), which zeroes the count first; the summary then
    // walks what it finds, as for a chunk still held.
    let plus_one = unsafe {
        (*(map.chunk(slot).add(C_EVENTS_PLUS_ONE) as *const AtomicU32)).load(Ordering::Relaxed)
    };
    u32::from_le(plus_one).checked_sub(1).map(u64::from)
}

/// The events of compact chunk `slot`, whose state word (loaded with
/// acquire ordering) says `committed` bytes: compact events have no fixed
/// size, so they are counted by walking their sizes.
fn compact_events_in(map: &TraceMap, slot: u64, committed: usize) -> u64 {
    let len = committed.min(map.chunk_size - CHUNK_HEADER_SIZE);
    // SAFETY: the slot is below the ready slots, so its bytes are mapped;
    // the committed bytes were published before the state word
    // (release/acquire) and are not written again while the chunk lives.
    let body = unsafe { std::slice::from_raw_parts(map.chunk(slot).add(CHUNK_HEADER_SIZE), len) };
    count_compact_events(body)
}

/// The sizes of compact events by their tag byte: forms 1 to 3 whole
/// (tag, the tick class's bytes, the id's); form 0 without its payload,
/// whose width is in the kind byte after them.
const SIZE_BY_TAG: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut tag = 0;
    while tag < 256 {
        let class_bytes = TICK_CLASS_BYTES[(tag >> TAG_CLASS_SHIFT) & 3];
        let rest = match (tag >> TAG_FORM_SHIFT) as u8 {
            FORM_ENTER_1 => 1,
            FORM_ENTER_2 => 2,
            FORM_EXIT_TOP => 0,
            _ => 1, // the kind byte; the payload is added by its width code
        };
        table[tag] = (1 + class_bytes + rest) as u8;
        tag += 1;
    }
    table
};

/// Counts the events of a compact chunk body (its snapshot, then events),
/// as the recorder wrote them: by their sizes alone, without decoding
/// them (`finish` counts every event of the file; decoding them was most
/// of what a short recording's finish cost). Stops at a `lost` event
/// (counted), which ends its chunk, and at an event that does not fit.
fn count_compact_events(body: &[u8]) -> u64 {
    let word = |at: usize| -> usize {
        body.get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let mut at = snapshot_size(word(4), word(16));
    let mut n = 0;
    while let Some(&tag) = body.get(at) {
        let mut size = SIZE_BY_TAG[tag as usize] as usize;
        if tag >> TAG_FORM_SHIFT == FORM_LONG {
            let Some(&kind) = body.get(at + size - 1) else {
                break;
            };
            let Some(&width) = PAYLOAD_WIDTH_BYTES.get((kind & 0x0F) as usize) else {
                break;
            };
            size += width;
            if (kind >> 4) as u64 == mtrace_format::event::KIND_LOST {
                n += (at + size <= body.len()) as u64;
                break;
            }
        }
        if at + size > body.len() {
            break;
        }
        at += size;
        n += 1;
    }
    n
}

/// Counts what the file's first `slots` chunk slots hold: those its cut
/// keeps, decided from `claimed` chunk claims (see [`finish`]). Exact once
/// the writing threads have stopped; a thread still writing may add
/// events to a chunk it holds after the count.
fn summarize(shared: &Shared, claimed: u64, slots: u64) -> Summary {
    let map = &shared.map;
    let mut events = 0;
    let mut chunks = 0;
    for slot in 0..slots {
        let word = map.state(slot).load(Ordering::Acquire);
        let state = if shared.compact {
            unpack_state_compact(word)
        } else {
            unpack_state(word)
        };
        if state.seq.is_none() || state.committed_bytes < SNAPSHOT_FIXED {
            continue;
        }
        chunks += 1;
        if shared.compact {
            events += match released_count(map, slot, state.writing) {
                Some(count) => count,
                None => compact_events_in(map, slot, state.committed_bytes),
            };
            continue;
        }
        let body = map.chunks_offset + slot as usize * map.chunk_size + CHUNK_HEADER_SIZE;
        let own = map.read_u32(body + 4) as usize;
        let stack = map.read_u32(body + 16) as usize;
        let snap = snapshot_size(own, stack);
        events += (state.committed_bytes.saturating_sub(snap) / EVENT_SIZE) as u64;
    }
    Summary {
        path: map.path.clone(),
        files: 1,
        events,
        chunks,
        chunk_count: map.chunk_count,
        wrapped: shared.mode == Mode::Ring && claimed > map.chunk_count,
        dropped_events: map.counter(H_DROPPED_EVENTS).load(Ordering::Relaxed),
        dropped_chunks: map.counter(H_DROPPED_CHUNKS).load(Ordering::Relaxed),
        growths: map.growths(),
        growth_failure: map.growth_failure(),
        slots_prepared: shared.provisioner.prepared_count(),
        threads: shared.threads.load(Ordering::Relaxed),
        meta_bytes: lock(&shared.meta).total,
        meta_dropped: map.counter(H_META_DROPPED).load(Ordering::Relaxed),
        duration: shared.started.elapsed(),
    }
}

/// Finishes a file no thread is sent to any more (`GEN` moved on): writes
/// the end time (`end_tick`, or now) and the final clock calibration into
/// the header, marks it finished, cuts it after the slots used and lets
/// go of it. A rotated file ends where the next one starts, so a thread's
/// frames open across the switch are timed once; a straggler's event
/// after that (a thread that read `GEN` just before the switch) still
/// lands, and the reader's end is the later of the two.
pub(crate) fn finish(shared: &'static Shared, end_tick: Option<u64>) -> Summary {
    // Before the file's length is decided: the provisioner grows and maps
    // the file, which is about to be cut and detached.
    shared.provisioner.stop();
    let (now_tick, now_unix_ns, calib_ticks, calib_ns) = shared.clock.finish();
    let (end_tick, end_unix_ns) = match end_tick {
        Some(tick) => (
            tick,
            shared
                .clock
                .start_unix_ns
                .saturating_add(shared.clock.ns_since_start(tick, calib_ticks, calib_ns)),
        ),
        None => (now_tick, now_unix_ns),
    };
    let map = &shared.map;
    map.write(H_END_TICK, &end_tick.to_le_bytes());
    map.write(H_END_UNIX_NS, &end_unix_ns.to_le_bytes());
    map.write(H_CALIB_TICKS, &calib_ticks.to_le_bytes());
    map.write(H_CALIB_NS, &calib_ns.to_le_bytes());
    let flags = map.read_u32(H_FLAGS) | FLAG_FINISHED;
    map.write(H_FLAGS, &flags.to_le_bytes());
    // The metadata log is closed before the slots in use are counted: a
    // record that went on in a new segment (a slot it claims) after the
    // count would link to a slot past the cut. A record written after this
    // is dropped (it would be lost to the finished file anyway).
    lock(&shared.meta).closed = true;
    // The file leaves no unused slots on disk: the header claims the slots
    // chunks were claimed in (from 0, in claim order; slots the file never
    // grew to were claimed by no one), and the file ends after them. A ring
    // keeps its size: it is a fixed buffer. A thread still recording may
    // claim a chunk or grow the file meanwhile, past the cut, where readers
    // do not look: the cut and the summary take the claims and the ready
    // slots read here, once, or the summary would count chunks past the
    // file's end.
    let claimed = map.counter(H_NEXT_SEQ).load(Ordering::Acquire);
    // Slots past the claimed ones were never claimed (and may never have
    // been touched); slots past the ready ones are not in the file.
    let slots = claimed.min(map.ready_slots());
    let used = (shared.mode == Mode::StopWhenFull).then_some(slots);
    if let Some(used) = used {
        map.write(H_CHUNK_COUNT, &used.to_le_bytes());
    }
    let mut summary = summarize(shared, claimed, slots);
    summary.chunk_count = used.unwrap_or(map.chunk_count);
    // Threads may still hold pointers into the map: from here on their
    // writes must not reach the file, which a next recording to the same
    // path would truncate and map again. The metadata log is closed
    // (above), so `detach` leaves its region on the file (no write reaches
    // it any more).
    let detached = map.detach();
    // Cut only once detached (see `TraceMap::close`).
    map.close(used.filter(|_| detached));
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtrace_format::chunk::encode_snapshot;
    use mtrace_format::compact::{ChunkEncoder, CompactEvents};
    use mtrace_format::{Event, EventKind, FunctionId, StackId};

    /// Counting by sizes agrees with decoding, for every form, tick class
    /// and payload width, cut anywhere (a torn last event is not counted),
    /// and stops at a `lost` event as a reader does.
    #[test]
    fn counting_by_sizes_counts_what_a_reader_decodes() {
        let mut body = vec![0u8; 4096];
        let snap = encode_snapshot(&mut body, 1024, 1000, &[1, 2], StackId::OWN, &[]);
        let mut enc = ChunkEncoder::new(1000, &[1, 2]);
        let mut tick = 1000;
        let mut at = snap;
        let kinds = [
            EventKind::Exit(FunctionId(2)),
            EventKind::Enter(FunctionId(7)),
            EventKind::Enter(FunctionId(300)),
            EventKind::Enter(FunctionId(70_000)),
            EventKind::Exit(FunctionId(70_000)),
            EventKind::Exit(FunctionId(5)),
            EventKind::Switch(StackId(u64::MAX)),
            EventKind::Switch(StackId::OWN),
            EventKind::Wake(StackId(1 << 20)),
            EventKind::ThreadStart,
        ];
        for (i, kind) in kinds.iter().cycle().take(60).enumerate() {
            tick += [3, 100, 5000, 1 << 30][i % 4];
            at += enc
                .push(&mut body[at..], &Event { tick, kind: *kind })
                .unwrap();
        }
        let decoded = |body: &[u8]| {
            CompactEvents::from_parts(&body[snap..], 0, 0, 1000, vec![1, 2])
                .take_while(Result::is_ok)
                .count() as u64
        };
        for len in snap..=at {
            assert_eq!(
                count_compact_events(&body[..len]),
                decoded(&body[..len]),
                "{len}"
            );
        }
        assert_eq!(count_compact_events(&body[..at]), 60);
        let lost = Event {
            tick,
            kind: EventKind::Lost,
        };
        let end = at + enc.push(&mut body[at..], &lost).unwrap();
        // Bytes after a `lost` are never events.
        body[end..end + 4].copy_from_slice(&[0x40, 1, 0x40, 1]);
        assert_eq!(count_compact_events(&body[..end + 4]), 61);
        assert_eq!(decoded(&body[..end + 4]), 61);
    }
}
