//! What every thread shares with the running recording: the one global
//! word the hot path reads, the recording itself ([`Shared`]), and the
//! fork epoch.
//!
//! `GEN` tells every instrumentation point what to do with a single relaxed
//! load and one comparison:
//!
//! ```text
//! GEN = 0          environment not checked yet: take the cold path once
//! GEN = 1          not recording: return
//! GEN = 4n | tsc   recording file number n (n >= 1); bit 0 says the clock is the TSC
//! GEN = 4n | 2 | tsc  file n, paused (armed but idle): threads keep
//!                  their open frames and write nothing
//! ```
//!
//! A file's number n is `series << 24 | k`: the recording's number (its
//! series) and the file's place k in it (0 without rotation; see
//! `rotate.rs`). Frames kept under one file of a series stay valid in the
//! next one: a thread moving there carries them in its first chunk's
//! snapshot, a logical stack in a continued-stack record.
//!
//! A thread remembers the generation it is bound to; a different value sends
//! it down the cold path, which registers it with the new recording. Old
//! recordings stay mapped while a thread may use them (see [`crate::file`]
//! and below), so a thread still holding pointers into one writes
//! harmlessly. Starting and finishing recordings is `recording.rs`'s job.
//!
//! **Retired files.** A finished file ([`retire`]) keeps its range while
//! any thread is bound to it (`Shared::bound`: a thread counts itself in
//! the cold path before it first touches a file, and uncounts itself once
//! it has released its chunk there, when it binds elsewhere or exits);
//! then the range is given back, by [`retire`] if no thread is bound, else
//! by the last thread to let go ([`let_go`]). A thread that read a file's
//! generation just before the file was left counts itself and then checks
//! that the generation still runs, with a fence that pairs with the one
//! before a range is given back; if it no longer runs, the thread uncounts
//! itself and binds to what runs now. A writer of metadata records
//! (function and stack names, marks) takes the file's metadata lock, under
//! which the region is closed before the range goes. A thread that
//! recorded in a file and then idles keeps that file's range until its
//! next event: a long-running server that rotates its files keeps a few
//! ranges, not one mapping per file it ever wrote.
//!
//! **Freed files.** A file given back is also freed (its [`Shared`]), so
//! a program that records many short recordings (a profile per request)
//! does not grow, except the files of a rotating series, which its
//! `Series` and rotation thread refer to. Bound threads hold a file
//! through `bound`; everything else that reaches a file through
//! [`CURRENT`] (a thread about to bind, a name or mark written from any
//! thread, a pause from a signal) does so inside a [`Reading`], which
//! counts it in `READERS` before it loads `CURRENT` and uncounts it after
//! its last touch. A given-back file waits in a list until a start or a
//! finish (under [`CONTROL`]) finds no reader: any reader that could
//! have loaded its pointer counted itself before the file left
//! `CURRENT`, so none is left when the count is seen at zero afterwards.
//! The list is pushed from any thread and taken whole by one thread at a
//! time, without a lock (a fork while another thread held one would
//! deadlock the child).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::ptr;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once};
use std::thread::JoinHandle;
use std::time::Instant;

use mtrace_format::layout::*;
use mtrace_format::meta::{encode_next_segment, encode_stack_of_kind};
use mtrace_format::{MetaRecord, StackId, StackKind};

use crate::clock::RunClock;
use crate::config::{Config, Mode};
use crate::file::TraceMap;
use crate::provision::Provisioner;

/// `GEN`: the environment has not been checked for `MTRACE_OUT` yet.
pub(crate) const GEN_UNCHECKED: u64 = 0;
/// `GEN`: no recording.
pub(crate) const GEN_OFF: u64 = 1;
/// Bit of a recording's generation: ticks come from the TSC.
pub(crate) const GEN_TSC: u64 = 1;
/// Bit of `GEN`: the recording is paused. A thread bound to the paused
/// value holds no chunk, so every event takes the cold path, which keeps
/// the thread's open frames and writes nothing (see `thread.rs`).
pub(crate) const GEN_PAUSED: u64 = 2;
/// A generation's bits above this one are its recording's (series') number.
pub(crate) const GEN_SERIES_SHIFT: u32 = 26;
/// A generation's file number within its series sits above the flag bits.
const GEN_FILE_SHIFT: u32 = 2;

/// The generation of file `k` of recording `series` (`series >= 1`).
pub(crate) fn generation(series: u64, k: u64, tsc: bool) -> u64 {
    let file_bits = (k << GEN_FILE_SHIFT) & ((1 << GEN_SERIES_SHIFT) - 1);
    (series << GEN_SERIES_SHIFT) | file_bits | if tsc { GEN_TSC } else { 0 }
}

/// Whether generations `a` and `b` are files of the same recording (a
/// rotating series; one of them possibly paused).
#[inline]
pub(crate) fn same_series(a: u64, b: u64) -> bool {
    a >> GEN_SERIES_SHIFT == b >> GEN_SERIES_SHIFT && a > GEN_OFF && b > GEN_OFF
}

/// Whether generations `a` and `b` are the same file of a recording (one
/// of them possibly paused): frames kept under one are valid under the
/// other, and the trace already knows them.
#[inline]
pub(crate) fn same_recording(a: u64, b: u64) -> bool {
    a | GEN_PAUSED == b | GEN_PAUSED
}

/// The hot path's word; see the module doc.
pub(crate) static GEN: AtomicU64 = AtomicU64::new(GEN_UNCHECKED);
/// The running recording (null when none). Read it inside a [`Reading`]
/// (see "Freed files").
pub(crate) static CURRENT: AtomicPtr<Shared> = AtomicPtr::new(ptr::null_mut());

/// Threads inside a [`Reading`] ("Freed files" in the module doc).
static READERS: AtomicU64 = AtomicU64::new(0);
/// Given-back files waiting to be freed, linked through
/// `Shared::next_given_back` ("Freed files").
static GIVEN_BACK: AtomicPtr<Shared> = AtomicPtr::new(ptr::null_mut());

/// A stretch in which the thread may touch a recording it reached through
/// [`CURRENT`] without being bound to it: no file is freed meanwhile.
#[must_use]
pub(crate) struct Reading(());

impl Reading {
    pub(crate) fn begin() -> Reading {
        // SeqCst, with the load of `CURRENT` after it and the load in
        // `free_given_back` (after the file left `CURRENT`): either the
        // reader sees the file gone, or the freer sees the reader.
        READERS.fetch_add(1, Ordering::SeqCst);
        Reading(())
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        READERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where a recording's metadata log is appended now, and the buffer
/// records are encoded in (reused: naming each task's stack as it is
/// created costs no allocation).
///
/// The log starts in the small region after the header and goes on in
/// *segments*, chunk slots claimed as event chunks are (`next_seq`): when
/// a record does not fit the part being written, a slot is claimed and
/// made a segment (its state word [`SEGMENT_STATE`], which every reader of
/// chunks sees as an empty slot and a ring's claims pass by), and a
/// next-segment record naming it ends the full part. Every part keeps
/// [`META_NEXT_SEGMENT_LEN`] bytes free at its end for that record. The
/// log thus grows as the file does, up to the file's maximum, with no
/// room reserved ahead.
#[derive(Debug)]
pub(crate) struct MetaRegion {
    /// The file is finished (or its range given back): no record is
    /// written any more, and its part of the map may be left on the file
    /// (see [`TraceMap::detach`]).
    pub closed: bool,
    /// Committed bytes of the part being written.
    len: usize,
    part: Part,
    /// Bytes of records written, over every part (links not counted).
    pub total: u64,
    /// Segments claimed so far.
    segments: u64,
    scratch: Vec<u8>,
}

/// A part of the metadata log: the first region or a segment's log.
#[derive(Clone, Copy, Debug)]
struct Part {
    /// File offset of its first byte.
    start: usize,
    /// Bytes it can hold.
    capacity: usize,
    /// File offset of the atomic word that counts its committed bytes
    /// (the header's `meta_len`, or the segment's).
    committed: usize,
}

impl MetaRegion {
    /// The empty log of the file `map`: its first region.
    pub(crate) fn new(map: &TraceMap) -> MetaRegion {
        MetaRegion {
            closed: false,
            len: 0,
            part: Part {
                start: map.meta_offset,
                capacity: map.meta_capacity,
                committed: H_META_LEN,
            },
            total: 0,
            segments: 0,
            scratch: Vec::new(),
        }
    }
}

/// A ring gives at most this share (1 / n) of its slots to metadata
/// segments: the rest stay for events, and a claim that meets segments
/// passes them by without counting them as tries.
const RING_SEGMENT_SHARE: u64 = 4;
/// Slots a ring's segment claim tries before the record is dropped (a
/// busy slot is one a thread is writing).
const SEGMENT_CLAIM_ATTEMPTS: u32 = 16;

/// Serialises the starts, finishes, pauses, resumes and rotations of
/// recordings; holds the last recording (series) number used.
pub(crate) static CONTROL: Mutex<u64> = Mutex::new(0);

/// Locks a mutex, ignoring poisoning (the recorder never panics while holding one).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Everything threads share about one recording. Allocated at start,
/// freed once given back and unread ("Freed files"; never for a file of a
/// rotating series).
pub(crate) struct Shared {
    /// This recording's generation (`GEN` while it runs; with
    /// [`GEN_PAUSED`] set while it is paused).
    pub gen: u64,
    pub map: TraceMap,
    /// Maps the pages of the slots ahead of the claims (`provision.rs`).
    pub provisioner: Provisioner,
    pub mode: Mode,
    /// Events are compact (format version 4), not 16 bytes.
    pub compact: bool,
    /// Functions are named on first use (`Config::names_on_use`), not at the start.
    pub names_on_use: bool,
    pub clock: RunClock,
    /// Threads that recorded in the file (without rotation, also the last
    /// trace thread id handed out; a series' ids are its own, `Series::threads`).
    pub threads: AtomicU64,
    pub meta: Mutex<MetaRegion>,
    pub(crate) finished: AtomicBool,
    /// On stretches begun so far (resumes; see `recording.rs`).
    pub(crate) stretches: AtomicU64,
    pub(crate) started: Instant,
    /// The process that owns the file (a forked child must not touch it).
    pub(crate) pid: u32,
    /// The rotating series this file belongs to (`None`: no rotation).
    pub(crate) series: Option<&'static Series>,
    /// Threads bound to the file (holding, or about to hold, pointers into
    /// its range): while any is, the range is kept ("Retired files").
    pub(crate) bound: AtomicU64,
    /// The file is finished and no longer running: its range is given
    /// back when no thread is bound to it ([`retire`]).
    pub(crate) retired: AtomicBool,
    /// The next file in the list of given-back files ("Freed files").
    pub(crate) next_given_back: AtomicPtr<Shared>,
    /// The file is its recording's first (the only one without rotation):
    /// the one where other threads' frames can be adopted.
    pub(crate) first_file: bool,
    /// Which threads bound to the file, and the streams begun on behalf of
    /// threads that had not ([`Adoptions`]).
    pub(crate) adoptions: Mutex<Adoptions>,
}

/// The threads of one file by operating-system id, for adopting another
/// thread's frames (`thread::adopt_thread_frames`): one lock orders each
/// thread's own binding to the file against a stream begun on its behalf,
/// so a thread that binds first refuses the adoption, and one adopted first
/// continues the stream it finds here instead of starting its own.
#[derive(Debug, Default)]
pub(crate) struct Adoptions {
    /// Threads that bound to the file themselves.
    pub bound: HashSet<u64>,
    /// Threads another thread began a stream for, which none has taken over yet.
    pub pending: HashMap<u64, Adopted>,
}

/// A stream begun on behalf of a thread that had not recorded in the file:
/// its first chunk (number 0) is written and released.
#[derive(Debug)]
pub(crate) struct Adopted {
    /// The thread's trace id there.
    pub tid: u64,
    /// The frames its first chunk's snapshot holds, outermost first.
    pub frames: Vec<u32>,
}

/// A rotating recording: what every file of it shares. Leaked at start.
#[derive(Debug)]
pub(crate) struct Series {
    /// The configuration each file is made with; its path is the first
    /// file's, the series' name, made absolute at the start.
    pub config: Config,
    /// The first file's path as the program gave it (the summary's).
    pub given_path: PathBuf,
    /// Files made so far (the next file's number).
    pub made: AtomicU64,
    /// The files of the series on disk, oldest first (`Config::keep`).
    pub on_disk: Mutex<VecDeque<PathBuf>>,
    /// Totals of the files finished so far, for the last file's summary.
    pub finished_totals: Mutex<SeriesTotals>,
    /// Threads that recorded in any file of the series, each once (a
    /// file's own count, `Shared::threads`, counts those that moved
    /// there); also the last trace thread id handed out in the series.
    pub threads: AtomicU64,
    /// Set to stop the rotation thread, which waits on `wake`.
    pub stop: Mutex<bool>,
    pub wake: Condvar,
    /// The rotation thread, joined when the recording finishes.
    pub controller: Mutex<Option<JoinHandle<()>>>,
}

/// What the finished files of a series held.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SeriesTotals {
    pub events: u64,
    pub chunks: u64,
    pub dropped_events: u64,
    pub dropped_chunks: u64,
    pub meta_dropped: u64,
}

impl Series {
    /// Whether `shared` is a file of this series.
    pub fn holds(&'static self, shared: &Shared) -> bool {
        shared.series.is_some_and(|s| ptr::eq(s, self))
    }
}

/// The file of `first`'s recording that is being written now: `first`
/// itself without rotation, else the running file of its series (or
/// `first` once the series is finished).
pub(crate) fn live(control: &MutexGuard<'_, u64>, first: &'static Shared) -> &'static Shared {
    match (first.series, running(control)) {
        (Some(series), Some(running)) if series.holds(running) => running,
        _ => first,
    }
}

impl Shared {
    /// Appends a metadata record; counts it in `meta_dropped` if the region is full.
    pub fn write_meta(&self, record: &MetaRecord) {
        self.write_meta_with(|out| record.encode(out));
    }

    /// Appends the metadata record `encode` appends to its buffer; counts
    /// it in `meta_dropped` if it cannot be stored (the file cannot grow,
    /// or a ring's slots for names are taken).
    pub fn write_meta_with(&self, encode: impl FnOnce(&mut Vec<u8>)) {
        let mut region = lock(&self.meta);
        let region = &mut *region;
        if region.closed {
            // A writer that found the file running just before it was
            // finished, and came after its range was given back.
            return;
        }
        region.scratch.clear();
        encode(&mut region.scratch);
        let need = region.scratch.len();
        let fits = region.len + need + META_NEXT_SEGMENT_LEN <= region.part.capacity;
        if !fits && !self.next_segment(region, need) {
            self.map
                .counter(H_META_DROPPED)
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.map
            .write(region.part.start + region.len, &region.scratch);
        region.len += need;
        region.total += need as u64;
        // Release: a reader that sees the length sees the bytes before it.
        self.map
            .word(region.part.committed)
            .store(region.len as u64, Ordering::Release);
    }

    /// Goes on with the log in a new segment, which holds a record of
    /// `need` bytes: claims a slot, makes it a segment, and ends the part
    /// being written with a record naming it. False (nothing written) if
    /// no segment can be had, or the record would not fit one.
    fn next_segment(&self, region: &mut MetaRegion, need: usize) -> bool {
        let map = &self.map;
        let capacity = map.chunk_size - SEGMENT_HEADER_SIZE;
        if need + META_NEXT_SEGMENT_LEN > capacity {
            return false;
        }
        let Some(slot) = self.claim_segment_slot(region.segments) else {
            return false;
        };
        region.segments += 1;
        let at = map.chunks_offset + slot as usize * map.chunk_size;
        // The segment's header before the link that leads to it: a reader
        // that sees the link sees the header. A ring's slot held a chunk
        // before: its header's other words are cleared.
        let mut header = [0u8; SEGMENT_HEADER_SIZE - S_MAGIC];
        header[..8].copy_from_slice(&SEGMENT_MAGIC.to_le_bytes());
        map.write(at + S_MAGIC, &header);
        let mut link = Vec::with_capacity(META_NEXT_SEGMENT_LEN);
        encode_next_segment(&mut link, at as u64, map.chunk_size as u64);
        map.write(region.part.start + region.len, &link);
        map.word(region.part.committed)
            .store((region.len + link.len()) as u64, Ordering::Release);
        region.part = Part {
            start: at + SEGMENT_HEADER_SIZE,
            capacity,
            committed: at + S_META_LEN,
        };
        region.len = 0;
        true
    }

    /// Claims a chunk slot for a metadata segment, as a thread claims one
    /// for its events (`thread.rs`), and marks it [`SEGMENT_STATE`]. `None`
    /// if the file is full (stop-when-full), or a ring has given its share
    /// of slots to segments already or found every slot it tried busy.
    fn claim_segment_slot(&self, segments: u64) -> Option<u64> {
        let map = &self.map;
        let next_seq = map.counter(H_NEXT_SEQ);
        match self.mode {
            Mode::StopWhenFull => {
                let seq = next_seq.fetch_add(1, Ordering::Relaxed);
                if seq >= map.ready_slots() && !map.grow_to(seq) {
                    return None;
                }
                // Slots are used once, in `seq` order: this one is fresh.
                map.state(seq).store(SEGMENT_STATE, Ordering::Release);
                self.provisioner.on_first_claim(map, seq);
                Some(seq)
            }
            Mode::Ring => {
                if segments >= map.chunk_count / RING_SEGMENT_SHARE {
                    return None;
                }
                for _ in 0..SEGMENT_CLAIM_ATTEMPTS {
                    let seq = next_seq.fetch_add(1, Ordering::Relaxed);
                    let slot = seq % map.chunk_count;
                    let state = map.state(slot);
                    let old = state.load(Ordering::Relaxed);
                    let busy =
                        old & STATE_WRITING != 0 || unpack_state(old).seq.is_some_and(|s| s >= seq);
                    if !busy
                        && state
                            .compare_exchange(
                                old,
                                SEGMENT_STATE,
                                Ordering::Acquire,
                                Ordering::Relaxed,
                            )
                            .is_ok()
                    {
                        if seq < map.chunk_count {
                            self.provisioner.on_first_claim(map, seq);
                        }
                        return Some(slot);
                    }
                }
                None
            }
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("gen", &self.gen)
            .field("path", &self.map.path)
            .finish_non_exhaustive()
    }
}

/// Marks `file` finished and not running any more (`GEN` moved on), and
/// gives its range back if no thread is bound to it; otherwise the last
/// bound thread to let go of it does ("Retired files" in the module doc).
pub(crate) fn retire(file: &'static Shared) {
    file.retired.store(true, Ordering::SeqCst);
    give_back_if_unused(file);
}

/// Uncounts a thread from `file`'s bound threads; the last one to let go
/// of a retired file gives its range back.
pub(crate) fn let_go(file: &Shared) {
    // Once uncounted, the file may be given back and freed by another
    // thread while this one still reads `retired`.
    let _reading = Reading::begin();
    // SeqCst, with `retire`'s store: either this sees `retired`, or
    // `retire` sees this count.
    if file.bound.fetch_sub(1, Ordering::SeqCst) == 1 && file.retired.load(Ordering::SeqCst) {
        give_back_if_unused(file);
    }
}

/// Gives back the range of retired `file` if no thread is bound to it.
/// Per file, with the file's own locks, and no list of retired files: a
/// process forked while another thread held a global lock would have
/// deadlocked on it in the child.
fn give_back_if_unused(file: &Shared) {
    // The latest `GEN` read here (a read-modify-write reads the last
    // value: the file was retired after `GEN` left it), then a fence that
    // pairs with `thread::hold`'s: a thread that counts itself after this
    // sees that value or a later one, never the file's generation, and
    // does not touch the file.
    GEN.fetch_add(0, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if file.bound.load(Ordering::SeqCst) != 0 {
        return;
    }
    // Under the metadata lock: a writer of records that found the file
    // running finds it closed, or is done before the range goes.
    let mut meta = lock(&file.meta);
    meta.closed = true;
    // Given back once (the last bound thread and `retire` may both come
    // here), and listed to be freed once.
    let given_back = file.map.unmap();
    drop(meta);
    if given_back && file.series.is_none() {
        push_given_back(file);
    }
}

/// Lists given-back `file` to be freed ("Freed files").
fn push_given_back(file: &Shared) {
    let file = file as *const Shared as *mut Shared;
    let mut head = GIVEN_BACK.load(Ordering::Relaxed);
    loop {
        // SAFETY: `file` is alive: it is freed only once listed.
        unsafe { (*file).next_given_back.store(head, Ordering::Relaxed) };
        match GIVEN_BACK.compare_exchange_weak(head, file, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => head = now,
        }
    }
}

/// Frees the given-back files if no thread is inside a [`Reading`] (else
/// they wait for the next call). Under [`CONTROL`]: one thread takes the
/// list at a time, whole, so a file cannot be taken twice.
pub(crate) fn free_given_back() {
    let mut list = GIVEN_BACK.swap(ptr::null_mut(), Ordering::SeqCst);
    if list.is_null() {
        return;
    }
    if READERS.load(Ordering::SeqCst) != 0 {
        while !list.is_null() {
            // SAFETY: listed files are alive until freed here.
            let next = unsafe { (*list).next_given_back.load(Ordering::Relaxed) };
            push_given_back(unsafe { &*list });
            list = next;
        }
        return;
    }
    while !list.is_null() {
        // SAFETY: a listed file came from `Box::leak` in `trace_file::open`,
        // was given back (no thread is bound to it, and none will bind:
        // it left `CURRENT` before), and no reader that could hold it is
        // left (the count above); it is listed once.
        let file = unsafe { Box::from_raw(list) };
        list = file.next_given_back.load(Ordering::Relaxed);
        drop(file);
    }
}

/// The running recording, if any, valid while `reading` lasts.
#[inline]
pub(crate) fn current(reading: &Reading) -> Option<&Shared> {
    let _ = reading;
    // SAFETY: non-null pointers stored here come from `Box::leak`, and
    // are not freed while a `Reading` lasts ("Freed files").
    unsafe { CURRENT.load(Ordering::SeqCst).as_ref() }
}

/// The running recording, if any, for a holder of [`CONTROL`]: a running
/// file is not freed, and no file is while the lock is held.
pub(crate) fn running(control: &MutexGuard<'_, u64>) -> Option<&'static Shared> {
    let _ = control;
    // SAFETY: as in `current`; files are freed under `CONTROL` only.
    unsafe { CURRENT.load(Ordering::SeqCst).as_ref() }
}

/// The running recording if it has generation `gen` (running or paused).
pub(crate) fn current_with_gen(reading: &Reading, gen: u64) -> Option<&Shared> {
    current(reading).filter(|s| s.gen == gen & !GEN_PAUSED)
}

/// Writes a stack's name into recording `gen`; false if it is not running
/// (or paused: the stack is named when it runs after the resume).
pub(crate) fn name_stack(gen: u64, id: StackId, name: &str, kind: StackKind) -> bool {
    if gen & GEN_PAUSED != 0 {
        return false;
    }
    let reading = Reading::begin();
    match current_with_gen(&reading, gen) {
        Some(s) => {
            s.write_meta_with(|out| encode_stack_of_kind(out, id, name, kind));
            true
        }
        None => false,
    }
}

/// In a child made by `fork`: the parent's recording is mapped shared, so
/// the child must never write into it. Stop recording (the child may start
/// its own recording) and start a new fork epoch, so the forking thread drops
/// its chunk without writing to it. Only atomics are touched, as a fork
/// handler must.
/// Registers [`after_fork_in_child`] once a process (before the
/// recorder's first recording), and the fork count's handler
/// (`process::watch_forks`) before it.
pub(crate) fn watch_forks() {
    crate::process::watch_forks();
    static AT_FORK: Once = Once::new();
    AT_FORK.call_once(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe {
            libc::pthread_atfork(
                None,
                None,
                Some(after_fork_in_child as unsafe extern "C" fn()),
            )
        };
    });
}

pub(crate) extern "C" fn after_fork_in_child() {
    GEN.store(GEN_OFF, Ordering::Relaxed);
    CURRENT.store(ptr::null_mut(), Ordering::Relaxed);
    // The readers counted were the parent's other threads, which the
    // child does not have (the forking thread is in no `Reading`: the
    // recorder does not fork).
    READERS.store(0, Ordering::Relaxed);
    // A thread holding a chunk of the parent's notices the fork count
    // (`process::forks`, counted by its own handler) at its next release
    // and forgets the chunk instead of writing to it (see `thread.rs`).
}

#[cfg(test)]
impl Drop for Shared {
    fn drop(&mut self) {
        tests::LIVE_FILES.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::Config;

    /// Files (`Shared`s) allocated and not freed.
    pub(crate) static LIVE_FILES: AtomicUsize = AtomicUsize::new(0);

    /// The recorder is process-global: the tests that record take this.
    pub(crate) fn serial() -> MutexGuard<'static, ()> {
        static SERIAL: Mutex<()> = Mutex::new(());
        lock(&SERIAL)
    }

    /// Records a few events of `f` on the calling thread.
    fn record(f: mtrace_format::FunctionId) {
        for _ in 0..10 {
            crate::enter(f);
            crate::exit(f);
        }
    }

    #[test]
    fn short_recordings_are_freed_once_no_thread_holds_them() {
        let _serial = serial();
        let f = crate::register_function("freed", file!(), line!(), module_path!());
        let one = |with_thread: bool| {
            let recording = crate::start(Config::new("unused").in_memory(true)).unwrap();
            record(f);
            if with_thread {
                // A thread that records and exits lets go of the file.
                std::thread::spawn(move || record(f)).join().unwrap();
            }
            // A reader inside a `Reading` over a finish keeps the file
            // until a later start or finish finds no reader.
            let reading = Reading::begin();
            recording.finish().unwrap();
            drop(reading);
        };
        one(false);
        let before = LIVE_FILES.load(Ordering::Relaxed);
        for k in 0..200 {
            one(k % 10 == 0);
        }
        // The calling thread stays bound to the last file until its next
        // event; the reader held the last one; every earlier file is freed.
        let after = LIVE_FILES.load(Ordering::Relaxed);
        assert!(after <= before + 1, "{before} files before, {after} after");
    }
}
