//! The per-thread writer: the hot path, chunk claims, registration and exit.
//!
//! Each thread owns one chunk at a time and is the only writer of it, so
//! recording an event touches only the thread's own cache lines:
//!
//! ```text
//! hot path (inlined):  GEN load -> bound to GEN? room in chunk? -> read clock
//!                      -> encode the event at cursor -> store state word (Release)
//!                      -> push/pop the shadow frame
//! cold path:           register the thread, fill a chunk's last bytes,
//!                      claim a chunk, count a drop
//! ```
//!
//! Events are compact (format version 4, `mtrace_format::compact`) unless
//! the recording asked for 16-byte ones (version 3): the thread keeps the
//! encoder's state (the previous event's tick, and how many of its
//! innermost frames the chunk names, so an exit of the top one needs no
//! id) beside its cursor, restarted from each chunk's snapshot. "Room"
//! is room for a largest event (`cursor < end`), so the hot path stores
//! it whole without a check; the chunk's last bytes take events one at a
//! time out of line, each if it fits. Wherever the frames change without
//! an event in the chunk the thread holds, the named count is forgotten.
//!
//! A chunk's pages are mapped before its slot is first claimed, by the
//! provisioner thread (`provision.rs`), or, when that is behind, in one
//! `madvise` call at the claim, instead of by one page fault per 4 KiB as
//! the events reach them.
//!
//! A chunk is claimed with one `fetch_add` on the header's `next_seq`
//! (`slot = seq % chunk_count`); in ring mode the slot's state word is then
//! won with a compare-and-swap, skipping slots a live writer still holds.
//! In stop-when-full mode a `seq` past the slots already in the file (one
//! acquire load) first grows the file (`file.rs`). The thread releases its
//! old chunk once it has the new one.
//!
//! Events stop 16 bytes (compact: 9) short of a chunk's end (`LOST_RESERVE`): when a
//! claim fails (the file is at its maximum or the disk is full; in ring
//! mode, every slot tried was busy), the thread writes a `lost` event there,
//! stamped with the tick of the first event it could not store, so readers
//! know from when its events are missing; then it releases the chunk.
//! The claimer writes the thread id, the thread's chunk number and a snapshot
//! of its open frames, then commits. Every event is committed by storing the
//! state word with the new length, with release ordering after the event's
//! bytes: a killed process leaves every committed event readable.
//!
//! A thread may also have its stream begun by another
//! (`adopt_thread_frames`, an attach to a running program whose threads
//! sit blocked): that one writes the thread's name and first chunk with
//! a writer state of its own, and leaves the stream, by the thread's
//! operating-system id, in the file's adoptions; the thread takes it up
//! when it binds. Binding a thread new to a file therefore takes that
//! lock once.
//!
//! The thread-local state has no destructor, so the hot path reaches it
//! with a plain TLS access; a second, empty thread-local with a destructor is
//! touched once at registration to record the thread's exit.

use std::cell::{Cell, UnsafeCell};
use std::mem::{self, ManuallyDrop};
use std::ptr;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use mtrace_format::chunk::encode_snapshot;
use mtrace_format::compact::{EncoderState, Room as EventRoom};
use mtrace_format::event::{encode_enter, encode_exit, encode_lost};
use mtrace_format::layout::*;
use mtrace_format::meta::encode_continued_stack;
use mtrace_format::{Event, EventKind, FunctionId, MetaRecord, StackId, ThreadId};

use crate::clock;
use crate::config::Mode;
use crate::error::AdoptError;
use crate::recording;
use crate::shared::{
    self, current_with_gen, lock, same_recording, same_series, Adopted, Reading, Shared, GEN,
    GEN_OFF, GEN_PAUSED, GEN_SERIES_SHIFT, GEN_TSC, GEN_UNCHECKED,
};

/// The state word grows by this much per committed event.
const UNIT: u64 = 1 << STATE_UNITS_SHIFT;
/// Ring mode: slots to try before dropping the event.
const MAX_CLAIM_ATTEMPTS: u32 = 16;

/// One thread's recorder state.
pub(crate) struct Local {
    // --- hot ---
    /// The generation this thread is bound to (`GEN_OFF` when unbound).
    gen: Cell<u64>,
    /// Where the next event goes.
    cursor: Cell<*mut u8>,
    /// Events start before it (`cursor < end`): room for one event, the
    /// worst case of a compact one, before the `lost` reserve. Null with
    /// the cursor when the thread holds no chunk.
    end: Cell<*mut u8>,
    /// The chunk holds compact events (format version 4).
    compact: Cell<bool>,
    /// Compact events: the previous event's tick and the named frames.
    enc: Cell<EncoderState>,
    /// The current chunk's state word.
    state_word: Cell<*const AtomicU64>,
    /// The value last stored in it.
    state: Cell<u64>,
    /// Compact events committed in the chunk held, stored in its header
    /// when it is let go (`C_EVENTS_PLUS_ONE`): the summary then counts a
    /// finished chunk's events without walking them.
    chunk_events: Cell<u32>,
    /// Open frames of the stack the thread runs (its own or a logical one).
    frames: UnsafeCell<ManuallyDrop<Vec<u32>>>,
    // --- cold ---
    /// Compact events: where the last event may end (the `lost` reserve
    /// after it). Between `end` and here, an event is stored only if it fits.
    tail: Cell<*mut u8>,
    shared: Cell<*const Shared>,
    tid: Cell<u64>,
    next_chunk_no: Cell<u64>,
    /// `StopWhenFull` and the file is full: every event is dropped.
    full: Cell<bool>,
    /// The stack the thread runs (`StackId::OWN.0` for its own).
    current: Cell<u64>,
    /// The thread's own frames while it runs a logical stack.
    own_saved: UnsafeCell<ManuallyDrop<Vec<u32>>>,
    /// The thread-exit hook ran: record nothing more.
    exited: Cell<bool>,
    /// `process::forks()` when the thread bound: another value means the process
    /// forked since, and the chunk held belongs to the parent.
    fork_epoch: Cell<u64>,
    /// The thread's next chunk restarts its stream (`CHUNK_FLAG_RESTART`):
    /// it rebound to the recording after a pause, with frames open (or
    /// it is `continued`).
    restart: Cell<bool>,
    /// The thread's next chunk is its first in the next file of a
    /// rotating series, with frames open there, or its first in the
    /// recording, with frames adopted (`CHUNK_FLAG_CONTINUED`): its
    /// snapshot is stamped with the file's start.
    continued: Cell<bool>,
    /// The recording (a generation's number above `GEN_SERIES_SHIFT`)
    /// whose rotating series counted this thread among its threads.
    counted_in: Cell<u64>,
    /// The thread's trace id in every file of that series.
    series_tid: Cell<u64>,
}

impl Local {
    const fn new() -> Local {
        Local {
            gen: Cell::new(GEN_OFF),
            cursor: Cell::new(ptr::null_mut()),
            end: Cell::new(ptr::null_mut()),
            compact: Cell::new(false),
            enc: Cell::new(EncoderState {
                prev_tick: 0,
                named: 0,
            }),
            tail: Cell::new(ptr::null_mut()),
            state_word: Cell::new(ptr::null()),
            state: Cell::new(0),
            chunk_events: Cell::new(0),
            frames: UnsafeCell::new(ManuallyDrop::new(Vec::new())),
            shared: Cell::new(ptr::null()),
            tid: Cell::new(0),
            next_chunk_no: Cell::new(0),
            full: Cell::new(false),
            current: Cell::new(0),
            own_saved: UnsafeCell::new(ManuallyDrop::new(Vec::new())),
            exited: Cell::new(false),
            fork_epoch: Cell::new(0),
            restart: Cell::new(false),
            continued: Cell::new(false),
            counted_in: Cell::new(0),
            series_tid: Cell::new(0),
        }
    }

    /// The open frames of the current stack.
    ///
    /// # Safety
    /// No other reference to them may be live (the recorder never holds one
    /// across a call that could take another).
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    unsafe fn frames(&self) -> &mut Vec<u32> {
        &mut *self.frames.get()
    }

    /// The thread's own frames while a logical stack runs. Same rule as `frames`.
    #[allow(clippy::mut_from_ref)]
    unsafe fn own_saved(&self) -> &mut Vec<u32> {
        &mut *self.own_saved.get()
    }
}

/// Runs at thread exit: records `ThreadExit` and releases the chunk.
struct ExitHook;

impl Drop for ExitHook {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(thread_exit);
    }
}

thread_local! {
    static LOCAL: Local = const { Local::new() };
    static EXIT_HOOK: ExitHook = const { ExitHook };
}

// ---------------------------------------------------------------- hot path

/// The calling thread's state, for a caller that keeps it to pass to
/// [`enter_on`] and [`exit_on`] (`crate::ThreadRecorder`): its address is
/// the thread's for as long as the thread lives, and `Local` is not
/// `Sync`, so the reference cannot leave the thread.
#[inline]
pub(crate) fn this_thread() -> &'static Local {
    local()
}

/// The calling thread's recorder state.
///
/// The body of every hot function starts here, not inside `LOCAL.with(|l|
/// ...)`: with the whole hot path in its closure, `LocalKey::with` was too
/// big to inline, so each event cost a call, register spills, and an
/// indirect call to the thread-local's accessor (about half the
/// instructions of a `scope!`). With only the address taken inside it, it
/// inlines to one `fs`-relative address computation.
#[inline(always)]
fn local() -> &'static Local {
    // `LOCAL` has a const initializer and no destructor, so it is a plain
    // `#[thread_local]` static: `with` never fails, and its storage lives as
    // long as the thread. `Local` is not `Sync`, so the reference cannot
    // leave the thread.
    LOCAL.with(|l| {
        // SAFETY: see above.
        unsafe { &*(l as *const Local) }
    })
}

/// Records entering `f` (non-zero) under generation `g` (not `GEN_OFF`).
#[inline(always)]
pub(crate) fn enter(g: u64, f: u32) {
    enter_on(local(), g, f)
}

/// [`enter`] on `l`, the calling thread's state ([`this_thread`]).
#[inline(always)]
pub(crate) fn enter_on(l: &Local, g: u64, f: u32) {
    let Some(cursor) = hot_cursor(l, g) else {
        return enter_cold(l, g, f);
    };
    let tick = clock::ticks(g & GEN_TSC != 0);
    // SAFETY: bound to the running generation and `cursor < end`.
    unsafe {
        put_event(
            l,
            cursor,
            #[inline(always)]
            |enc, room| enc.enter_in(room, tick, FunctionId(f)),
            #[inline(always)]
            || encode_enter(tick, FunctionId(f)),
        )
    };
    push_frame(l, f);
}

/// Records leaving `f` (non-zero) under generation `g` (not `GEN_OFF`).
#[inline(always)]
pub(crate) fn exit(g: u64, f: u32) {
    exit_on(local(), g, f)
}

/// [`exit`] on `l`, the calling thread's state ([`this_thread`]).
#[inline(always)]
pub(crate) fn exit_on(l: &Local, g: u64, f: u32) {
    let Some(cursor) = hot_cursor(l, g) else {
        return exit_cold(l, g, f);
    };
    let tick = clock::ticks(g & GEN_TSC != 0);
    let top = is_top(l, f);
    // SAFETY: as in `enter`.
    unsafe {
        put_event(
            l,
            cursor,
            #[inline(always)]
            |enc, room| enc.exit_in(room, tick, FunctionId(f), top),
            #[inline(always)]
            || encode_exit(tick, FunctionId(f)),
        )
    };
    pop_known(l, f, top);
}

/// The cursor, if the thread is bound to `g` and has room there for an
/// event on the hot path (`cursor < end`).
///
/// Two branches, each to the cold path: written as one condition (`gen
/// == g && cursor < end`), the cursor's compare became a flag set before
/// the first branch and tested after it, two instructions more an event.
#[inline(always)]
fn hot_cursor(l: &Local, g: u64) -> Option<*mut u8> {
    if l.gen.get() != g {
        return None;
    }
    let cursor = l.cursor.get();
    if cursor >= l.end.get() {
        return None;
    }
    Some(cursor)
}

/// Stores one event at `cursor` and commits it: compact (`compact`, which
/// returns its size) or 16 bytes (`fixed`), by the chunk's format.
///
/// # Safety
/// `cursor` must be the thread's cursor, below `end`, in a chunk it owns:
/// room for a worst-case event of either format.
#[inline(always)]
unsafe fn put_event(
    l: &Local,
    cursor: *mut u8,
    compact: impl FnOnce(&mut EncoderState, &mut EventRoom) -> usize,
    fixed: impl FnOnce() -> [u8; EVENT_SIZE],
) {
    if l.compact.get() {
        let mut enc = l.enc.get();
        let n = compact(&mut enc, &mut *(cursor as *mut EventRoom));
        l.enc.set(enc);
        commit_bytes(l, cursor, n);
    } else {
        put(cursor, fixed());
        commit(l, cursor);
    }
}

/// Writes `kind`, an event that opens or closes no frame (a switch, a
/// wake, an end), stamped now under generation `g`, at `cursor`: the
/// inline path every stack event shares.
///
/// # Safety
/// As [`put_event`]: `cursor` is the thread's cursor, below `end`, in a
/// chunk it owns.
#[inline(always)]
unsafe fn put_stack_event(l: &Local, cursor: *mut u8, g: u64, kind: EventKind) {
    let event = Event {
        tick: clock::ticks(g & GEN_TSC != 0),
        kind,
    };
    put_event(
        l,
        cursor,
        #[inline(always)]
        |enc, room| enc.event_in(room, &event, false),
        #[inline(always)]
        || event.encode(),
    )
}

/// Stores one 16-byte event.
///
/// # Safety
/// `at` must be the thread's cursor inside a chunk it owns, with 16 bytes of room.
#[inline(always)]
unsafe fn put(at: *mut u8, bytes: [u8; EVENT_SIZE]) {
    (at as *mut [u8; EVENT_SIZE]).write(bytes);
}

/// Publishes the 16-byte event just stored at `cursor`.
#[inline(always)]
fn commit(l: &Local, cursor: *mut u8) {
    l.cursor.set(cursor.wrapping_add(EVENT_SIZE));
    let state = l.state.get() + UNIT;
    l.state.set(state);
    // SAFETY: `state_word` points at the owned chunk's state word (the
    // mapping is never unmapped).
    unsafe { (*l.state_word.get()).store(state, Ordering::Release) };
}

/// Publishes the `n`-byte compact event just stored at `cursor`: a
/// version-4 state word counts bytes.
#[inline(always)]
fn commit_bytes(l: &Local, cursor: *mut u8, n: usize) {
    l.cursor.set(cursor.wrapping_add(n));
    // No overflow: a body (under 8 MiB) holds fewer than 2^32 events.
    l.chunk_events.set(l.chunk_events.get().wrapping_add(1));
    let state = l.state.get() + ((n as u64) << STATE_UNITS_SHIFT);
    l.state.set(state);
    // SAFETY: as in `commit`.
    unsafe { (*l.state_word.get()).store(state, Ordering::Release) };
}

/// `f` is the innermost open frame (its exit may name no function).
#[inline(always)]
fn is_top(l: &Local, f: u32) -> bool {
    // SAFETY: no other reference to the frames is live.
    let frames = unsafe { l.frames() };
    frames.last() == Some(&f)
}

/// Pops `f`, which [`is_top`] said is (`top`) or is not the innermost frame.
#[inline(always)]
fn pop_known(l: &Local, f: u32, top: bool) {
    if top {
        // SAFETY: no other reference to the frames is live; `top`: not empty.
        unsafe {
            let frames = l.frames();
            frames.set_len(frames.len() - 1);
        }
    } else {
        pop_frame_unbalanced(l, f);
    }
}

#[inline(always)]
fn push_frame(l: &Local, f: u32) {
    // SAFETY: no other reference to the frames is live.
    let frames = unsafe { l.frames() };
    let len = frames.len();
    if len < frames.capacity() {
        // SAFETY: within capacity.
        unsafe {
            frames.as_mut_ptr().add(len).write(f);
            frames.set_len(len + 1);
        }
    } else {
        push_frame_grow(l, f);
    }
}

#[inline(always)]
fn pop_frame(l: &Local, f: u32) {
    // SAFETY: no other reference to the frames is live.
    let frames = unsafe { l.frames() };
    let len = frames.len();
    if len > 0 && frames[len - 1] == f {
        // SAFETY: shrinking a Vec of u32.
        unsafe { frames.set_len(len - 1) };
    } else {
        pop_frame_unbalanced(l, f);
    }
}

#[cold]
#[inline(never)]
fn push_frame_grow(l: &Local, f: u32) {
    // SAFETY: no other reference to the frames is live.
    let frames = unsafe { l.frames() };
    frames.reserve(frames.capacity().max(16));
    frames.push(f);
}

/// An exit that is not the innermost frame: close the frames above it too,
/// as the analyzer will; an exit of a frame that is not open changes nothing.
#[cold]
#[inline(never)]
fn pop_frame_unbalanced(l: &Local, f: u32) {
    // SAFETY: no other reference to the frames is live.
    let frames = unsafe { l.frames() };
    if let Some(pos) = frames.iter().rposition(|&x| x == f) {
        frames.truncate(pos);
    }
}

// ---------------------------------------------------------------- cold paths

/// What [`record`] did.
enum Room {
    /// The event is stored.
    Written,
    /// Bound, but the event cannot be stored; it has been counted as dropped.
    Dropped,
    /// Bound to the paused recording: frames are kept, nothing is written.
    Idle,
    /// No recording this thread can record into.
    Off,
}

#[cold]
#[inline(never)]
fn enter_cold(l: &Local, g: u64, f: u32) {
    if l.gen.get() == g && g & GEN_PAUSED != 0 {
        // Paused: the frames are all there is to keep (see `bind`). Kept
        // apart from the rest, so this path saves no registers.
        push_frame(l, f);
    } else {
        enter_slow(l, g, f);
    }
}

#[cold]
#[inline(never)]
fn enter_slow(l: &Local, g: u64, f: u32) {
    match record(l, g, EventKind::Enter(FunctionId(f))) {
        Room::Written | Room::Dropped | Room::Idle => push_frame(l, f),
        Room::Off => {}
    }
}

#[cold]
#[inline(never)]
fn exit_cold(l: &Local, g: u64, f: u32) {
    if l.gen.get() == g && g & GEN_PAUSED != 0 {
        pop_frame(l, f);
    } else {
        exit_slow(l, g, f);
    }
}

#[cold]
#[inline(never)]
fn exit_slow(l: &Local, g: u64, f: u32) {
    match record(l, g, EventKind::Exit(FunctionId(f))) {
        Room::Written | Room::Dropped | Room::Idle => pop_frame(l, f),
        Room::Off => {}
    }
}

/// Writes one event at the cursor, which is below `end`.
fn write(l: &Local, g: u64, kind: EventKind) {
    let cursor = l.cursor.get();
    let event = Event {
        tick: clock::ticks(g & GEN_TSC != 0),
        kind,
    };
    let top = exits_top(l, kind);
    // SAFETY: the caller checked `cursor < end` in an owned chunk.
    unsafe {
        put_event(
            l,
            cursor,
            |enc, room| enc.event_in(room, &event, top),
            #[inline(always)]
            || event.encode(),
        )
    };
}

/// `kind` is an exit of the innermost open frame.
fn exits_top(l: &Local, kind: EventKind) -> bool {
    match kind {
        EventKind::Exit(f) => is_top(l, f.0),
        _ => false,
    }
}

/// Compact events, the cursor at or past `end`: writes the event if it
/// fits before the `lost` reserve (the worst case no longer does, this
/// one may). False, writing nothing: the thread needs a new chunk.
fn write_tail(l: &Local, g: u64, kind: EventKind) -> bool {
    let cursor = l.cursor.get();
    let event = Event {
        tick: clock::ticks(g & GEN_TSC != 0),
        kind,
    };
    let top = exits_top(l, kind);
    let room = (l.tail.get() as usize).saturating_sub(cursor as usize);
    // SAFETY: the thread owns its chunk up to `tail` (and the reserve after it).
    let out = unsafe { std::slice::from_raw_parts_mut(cursor, room) };
    let mut enc = l.enc.get();
    let Some(n) = enc.event(out, &event, top) else {
        return false;
    };
    l.enc.set(enc);
    commit_bytes(l, cursor, n);
    true
}

/// Records that the task on logical stack `id` was woken, on the calling
/// thread (whichever thread calls the task's waker: a worker, a timer or
/// I/O driver thread, or the task itself).
///
/// Inline, as a switch is: a task woken at every poll (one that yields,
/// or whose I/O is ready at once) records a wake for each switch pair, and
/// through the cold path it cost a call and the general event writer's
/// bookkeeping on top of the clock read and the store.
#[inline(always)]
pub(crate) fn wake(id: StackId) {
    let g = GEN.load(Ordering::Relaxed);
    if g != GEN_OFF && id != StackId::OWN {
        stack_event(g, EventKind::Wake(id));
    }
}

/// Records `kind`, an event that names a stack and changes no frame (a
/// wake, an end), under generation `g` (not `GEN_OFF`): inline when the
/// thread is bound to `g` with room, else through the cold path.
#[inline(always)]
fn stack_event(g: u64, kind: EventKind) {
    let l = local();
    let Some(cursor) = hot_cursor(l, g) else {
        return stack_event_cold(l, g, kind);
    };
    // SAFETY: `hot_cursor` checked the cursor is below `end`.
    unsafe { put_stack_event(l, cursor, g, kind) };
}

#[cold]
#[inline(never)]
fn stack_event_cold(l: &Local, g: u64, kind: EventKind) {
    emit(l, g, kind);
}

/// Records that logical stack `id`, which ran in the running recording
/// `g`, ended (its owner dropped it), on the calling thread. Out of line:
/// a stack ends once, and [`LogicalStack`](crate::LogicalStack)'s drop,
/// inlined wherever a stack is dropped, keeps only its check.
#[inline(never)]
pub(crate) fn end(g: u64, id: StackId) {
    // A `tracing` span with a stack of its own ends one per span.
    stack_event(g, EventKind::End(id));
}

/// The calling thread's trace id in recording `g`, or 0 if it has recorded
/// nothing in it yet (or its id does not fit the 32 bits a mark keeps).
/// Binds nothing.
pub(crate) fn trace_tid(g: u64) -> u32 {
    let l = local();
    if l.gen.get() == g {
        u32::try_from(l.tid.get()).unwrap_or(0)
    } else {
        0
    }
}

/// Records an event that does not touch the frames (switch, thread start/exit).
fn emit(l: &Local, g: u64, kind: EventKind) -> bool {
    matches!(record(l, g, kind), Room::Written)
}

/// Records one event under generation `g` off the hot path: checks the
/// environment on the process's first event, binds the thread to the
/// recording, fills the end of a compact chunk, claims a chunk when the
/// current one is full. Counts the event as dropped when the thread is
/// bound but there is no room. The caller changes the frames after.
fn record(l: &Local, g: u64, kind: EventKind) -> Room {
    let Some(g) = bind(l, g) else {
        return Room::Off;
    };
    if g & GEN_PAUSED != 0 {
        return Room::Idle;
    }
    if l.cursor.get() < l.end.get() {
        write(l, g, kind);
        return Room::Written;
    }
    // SAFETY: bound, so `shared` points at the recording, which is not
    // freed while the thread is counted in its `bound`.
    let shared = unsafe { &*l.shared.get() };
    let holds_compact = l.compact.get() && !l.state_word.get().is_null();
    if holds_compact && write_tail(l, g, kind) {
        return Room::Written;
    }
    if !l.full.get() && claim(l, shared) {
        write(l, g, kind);
        return Room::Written;
    }
    shared
        .map
        .counter(H_DROPPED_EVENTS)
        .fetch_add(1, Ordering::Relaxed);
    Room::Dropped
}

/// Binds the thread to the running recording if it is not bound to `g` yet.
/// Returns the generation it is bound to, or `None` if nothing runs.
///
/// A pause and a resume change `GEN` between a recording's two values
/// (`shared.rs`), so a thread moves between them here: bound to the
/// paused value it holds no chunk (every event comes here and keeps the
/// frames); back on the running one, it keeps its trace id and chunk
/// numbers, and its next chunk is a `restart` one if frames are open, so
/// readers take them from its snapshot. A thread with no event during
/// the pause stays bound to the running value and writes on in its chunk:
/// its frames did not change.
fn bind(l: &Local, mut g: u64) -> Option<u64> {
    if g == GEN_UNCHECKED {
        recording::check_env();
        g = GEN.load(Ordering::Acquire);
    }
    loop {
        if g <= GEN_OFF || l.exited.get() {
            return None;
        }
        if l.gen.get() == g {
            return Some(g);
        }
        match bind_to(l, g, &[]) {
            Bound::To(g) | Bound::Continued(g) => return Some(g),
            Bound::Nothing => return None,
            // The file was left for another (or finished) as the thread
            // came to it: bind to what runs now.
            Bound::Retired => g = GEN.load(Ordering::Acquire),
        }
    }
}

/// What [`bind_to`] did.
enum Bound {
    /// The thread is bound to this generation.
    To(u64),
    /// The thread is bound to this generation, continuing the stream
    /// another thread began for it there ([`adopt_thread_frames`]), with
    /// that stream's frames.
    Continued(u64),
    /// Nothing records (or the thread is being torn down).
    Nothing,
    /// The file of the generation it was to bind to is no longer running.
    Retired,
}

/// Makes `frames` the thread's open frames, opened before the running
/// recording began (`crate::adopt_open_frames`): the thread binds to the
/// recording as a thread new to it does, with these frames in place of
/// none, and its first chunk is flagged `continued`, as a thread's first
/// chunk in a later file of a rotating series is, so its snapshot is
/// stamped with the file's start. Refused on a thread whose stream in
/// the recording (or its series) has begun: readers know its frames from
/// its events, which never entered these.
///
/// A thread whose stream another thread began ([`adopt_thread_frames`])
/// continues it instead, and its frames become `frames` by exits and
/// enters at this call where the two lists differ (they do not when it
/// had no event between that adoption's walk of its frames and now).
pub(crate) fn adopt_open_frames(frames: &[u32]) -> Result<(), AdoptError> {
    let l = local();
    let mut g = GEN.load(Ordering::Acquire);
    if g == GEN_UNCHECKED {
        recording::check_env();
        g = GEN.load(Ordering::Acquire);
    }
    loop {
        if g <= GEN_OFF || g & GEN_PAUSED != 0 || l.exited.get() {
            return Err(AdoptError::NotRecording);
        }
        let same_process = l.fork_epoch.get() == crate::process::forks();
        let bound = l.gen.get();
        if same_process && (same_recording(bound, g) || same_series(bound, g)) {
            return Err(AdoptError::AlreadyRecorded);
        }
        match bind_to(l, g, frames) {
            Bound::To(_) => return Ok(()),
            Bound::Continued(g) => {
                become_frames(l, g, frames);
                return Ok(());
            }
            Bound::Nothing => return Err(AdoptError::NotRecording),
            Bound::Retired => g = GEN.load(Ordering::Acquire),
        }
    }
}

/// [`bind`]'s work for a thread not bound to generation `g` (a running
/// recording's). `adopted`: frames the thread takes as open since the
/// recording began if it is new to the recording ([`adopt_open_frames`]:
/// only called then); empty otherwise.
fn bind_to(l: &Local, g: u64, adopted: &[u32]) -> Bound {
    // Until the thread is counted in the file's `bound` (`hold`), or
    // finds it no longer running.
    let reading = Reading::begin();
    let Some(shared) = current_with_gen(&reading, g) else {
        return Bound::Nothing;
    };
    // Registering the exit hook fails while the thread is being torn down:
    // such a thread records nothing.
    if EXIT_HOOK.try_with(|_| ()).is_err() {
        return Bound::Nothing;
    }
    let same_process = l.fork_epoch.get() == crate::process::forks();
    let same_recording =
        ptr::eq(l.shared.get(), shared) && same_recording(l.gen.get(), g) && same_process;
    // Another file: count the thread among its users before touching it,
    // so it is not given back under the thread (see `shared.rs`).
    if !same_recording && !hold(shared, g) {
        return Bound::Retired;
    }
    // The recording rotated to its next file: the thread moves there
    // with its frames (see `rotate.rs`).
    let moved = !same_recording && same_process && same_series(l.gen.get(), g);
    // Leave an older recording cleanly (its map is still mapped), or,
    // at a pause, the chunk: a paused thread holds none.
    release_chunk(l);
    if same_recording {
        l.gen.set(g);
        if g & GEN_PAUSED == 0 {
            // SAFETY: no other reference to the frames is live.
            let open = unsafe { !l.frames().is_empty() || !l.own_saved().is_empty() };
            l.restart.set(open || l.current.get() != StackId::OWN.0);
            if l.tid.get() == 0 {
                register(l, shared, g);
            }
        }
        return Bound::To(g);
    }
    // Its last write to the file it leaves is done.
    let_go(l);
    if moved {
        move_to_next_file(l, shared, g);
        return Bound::To(g);
    }
    if let Some(stream) = bind_in_adoptions(shared) {
        continue_stream(l, shared, g, stream);
        return Bound::Continued(g);
    }
    // SAFETY: no other reference to the frames is live.
    unsafe {
        l.frames().clear();
        l.own_saved().clear();
        l.frames().extend_from_slice(adopted);
    }
    l.shared.set(shared);
    l.tid.set(0);
    l.next_chunk_no.set(0);
    l.full.set(false);
    // Adopted frames were open before the file began: its first chunk's
    // snapshot says so (the claim stamps it with the file's start).
    let adopting = !adopted.is_empty() && g & GEN_PAUSED == 0;
    l.restart.set(adopting);
    l.continued.set(adopting);
    l.gen.set(g);
    l.fork_epoch.set(crate::process::forks());
    if g & GEN_PAUSED == 0 {
        register(l, shared, g);
    }
    Bound::To(g)
}

/// Says, under the file's adoptions lock, that the calling thread binds
/// to `shared` (so no stream is begun for it there from now on), and
/// takes the stream another thread began for it there, if any.
fn bind_in_adoptions(shared: &Shared) -> Option<Adopted> {
    let os_tid = crate::process::thread_id();
    if os_tid == 0 {
        // No id to be adopted by (`adopt_thread_frames` refuses 0).
        return None;
    }
    let mut adoptions = lock(&shared.adoptions);
    adoptions.bound.insert(os_tid);
    adoptions.pending.remove(&os_tid)
}

/// Binds the thread, new to `shared` (generation `g`), to the stream
/// another thread began for it there ([`adopt_thread_frames`]): its trace
/// id, that stream's frames, and its chunks from number 1 on (number 0,
/// released, holds them). No name (the stream has it) and no
/// `thread_start`, as a thread that moves to a later file of a series
/// writes none: the thread started before the recording.
fn continue_stream(l: &Local, shared: &Shared, g: u64, stream: Adopted) {
    // SAFETY: no other reference to the frames is live.
    unsafe {
        l.frames().clear();
        l.own_saved().clear();
        l.frames().extend_from_slice(&stream.frames);
    }
    l.shared.set(shared);
    l.tid.set(stream.tid);
    l.next_chunk_no.set(1);
    l.full.set(false);
    l.restart.set(false);
    l.continued.set(false);
    l.gen.set(g);
    l.fork_epoch.set(crate::process::forks());
    if shared.series.is_some() {
        // Its id in the files of the series it moves to.
        l.counted_in.set(g >> GEN_SERIES_SHIFT);
        l.series_tid.set(stream.tid);
    }
    let current = l.current.get();
    if g & GEN_PAUSED == 0 && current != StackId::OWN.0 {
        emit(l, g, EventKind::Switch(StackId(current)));
    }
}

/// Makes `want` the open frames of a thread bound to generation `g`
/// (running): exits the innermost frames it has that `want` does not
/// list, then enters those `want` lists above them.
fn become_frames(l: &Local, g: u64, want: &[u32]) {
    // SAFETY: no other reference to the frames is live (a copy is taken:
    // the exits and enters change them).
    let have = unsafe { l.frames().clone() };
    let same = have.iter().zip(want).take_while(|(a, b)| a == b).count();
    for &f in have[same..].iter().rev() {
        exit(g, f);
    }
    for &f in &want[same..] {
        enter(g, f);
    }
}

/// Begins the stream of the thread whose operating-system id is
/// `os_tid`, which has not bound to the running recording, on its behalf
/// (`crate::adopt_thread_frames`): names it (`name`), and writes its first
/// chunk, number 0, released at once with no event: its snapshot holds
/// `frames`, stamped with the file's start and flagged `continued` as
/// [`adopt_open_frames`] writes it (no flag without frames). The thread
/// continues that stream at its first event ([`bind_to`]).
///
/// Race-free against that thread binding meanwhile: both sides decide
/// under the file's adoptions lock (`Shared::adoptions`), so either the
/// thread bound first and this is refused, writing nothing, or this
/// completes first and the thread finds the stream there.
pub(crate) fn adopt_thread_frames(
    os_tid: u64,
    name: &str,
    frames: &[u32],
) -> Result<(), AdoptError> {
    if os_tid == 0 {
        return Err(AdoptError::UnknownThread);
    }
    let mut g = GEN.load(Ordering::Acquire);
    if g == GEN_UNCHECKED {
        recording::check_env();
        g = GEN.load(Ordering::Acquire);
    }
    loop {
        if g <= GEN_OFF || g & GEN_PAUSED != 0 {
            return Err(AdoptError::NotRecording);
        }
        let reading = Reading::begin();
        let Some(shared) = current_with_gen(&reading, g) else {
            // The recording moved on (rotated, paused, finished) since
            // `GEN` was read: judge what runs now.
            let now = GEN.load(Ordering::Acquire);
            if now == g {
                return Err(AdoptError::NotRecording);
            }
            g = now;
            continue;
        };
        if !shared.first_file {
            return Err(AdoptError::Rotated);
        }
        if !hold(shared, g) {
            g = GEN.load(Ordering::Acquire);
            continue;
        }
        let begun = begin_stream(shared, g, os_tid, name, frames);
        shared::let_go(shared);
        return begun;
    }
}

/// [`adopt_thread_frames`]'s work in `shared` (generation `g`, running),
/// which the calling thread holds.
fn begin_stream(
    shared: &Shared,
    g: u64,
    os_tid: u64,
    name: &str,
    frames: &[u32],
) -> Result<(), AdoptError> {
    let mut adoptions = lock(&shared.adoptions);
    if adoptions.bound.contains(&os_tid) || adoptions.pending.contains_key(&os_tid) {
        return Err(AdoptError::AlreadyRecorded);
    }
    // The other thread's writer state, for this one chunk: it claims and
    // writes the chunk as that thread would at its first event.
    let w = Local::new();
    let adopting = !frames.is_empty();
    w.shared.set(shared);
    w.gen.set(g);
    w.fork_epoch.set(crate::process::forks());
    w.restart.set(adopting);
    w.continued.set(adopting);
    let tid = new_tid(shared);
    w.tid.set(tid);
    // SAFETY: `w` is this function's alone.
    unsafe { w.frames().extend_from_slice(frames) };
    // No event follows the snapshot, not even a `thread_start`: the thread
    // ran nothing of the recording's (under `gil` it holds no turn).
    let claimed = claim(&w, shared);
    if claimed {
        release_chunk(&w);
    }
    // SAFETY: `w` is this function's alone; its vectors go with it.
    unsafe {
        drop(mem::take(w.frames()));
        drop(mem::take(w.own_saved()));
    }
    if !claimed {
        return Err(AdoptError::Full);
    }
    shared.write_meta(&MetaRecord::Thread {
        tid: ThreadId(tid),
        os_tid,
        name: name.to_owned(),
    });
    adoptions.pending.insert(
        os_tid,
        Adopted {
            tid,
            frames: frames.to_vec(),
        },
    );
    Ok(())
}

/// Counts the thread among the threads bound to `shared` if generation
/// `g` (`shared`'s) still runs; false, counting nothing, if it no longer
/// does (the file may be given back: the thread must not touch it).
fn hold(shared: &Shared, g: u64) -> bool {
    shared.bound.fetch_add(1, Ordering::SeqCst);
    // Pairs with the fence before a retired file is given back
    // (`shared::retire`): either that sees this count, or this load sees
    // the generation that replaced `g` before the file was retired.
    fence(Ordering::SeqCst);
    if same_recording(GEN.load(Ordering::Relaxed), g) {
        return true;
    }
    shared::let_go(shared);
    false
}

/// Uncounts the thread from the file it was bound to (after its last
/// write there: its chunk released), if that file is its process's.
fn let_go(l: &Local) {
    let old = l.shared.replace(ptr::null());
    let same_process = l.fork_epoch.get() == crate::process::forks();
    if !old.is_null() && same_process {
        // SAFETY: the thread is still counted in the file's `bound` (it
        // is uncounted there), so the file is not freed yet.
        shared::let_go(unsafe { &*old });
    }
}

/// Binds the thread, bound to an earlier file of the same rotating series,
/// to `shared`, file generation `g`, keeping its frames and its trace id
/// (the series'): chunk numbers from 0 in the new file, and, with frames open, a
/// first chunk flagged `continued` whose snapshot holds them. No
/// `thread_start`: the thread started in an earlier file. A thread that
/// was paused moves as at a resume (its frames changed unseen: opened at
/// its snapshot, not continued).
fn move_to_next_file(l: &Local, shared: &Shared, g: u64) {
    let was_recording = l.gen.get() & GEN_PAUSED == 0;
    l.shared.set(shared);
    l.tid.set(0);
    l.next_chunk_no.set(0);
    l.full.set(false);
    l.gen.set(g);
    // SAFETY: no other reference to the frames is live.
    let open = unsafe { !l.frames().is_empty() || !l.own_saved().is_empty() }
        || l.current.get() != StackId::OWN.0;
    l.restart.set(open);
    l.continued.set(open && was_recording);
    if g & GEN_PAUSED == 0 {
        take_tid(l, shared, g);
    }
}

/// Gives the thread its trace id in `shared` (running, generation `g`)
/// and names it there. In a rotating series the id is the series' (the
/// series' count of threads when the thread first recorded in any of its
/// files), so a thread has one id in every file: `--thread N` and the
/// per-thread call paths of the series read as one name one thread.
fn take_tid(l: &Local, shared: &Shared, g: u64) {
    let in_file = shared.threads.fetch_add(1, Ordering::Relaxed) + 1;
    let tid = match shared.series {
        None => in_file,
        Some(series) => {
            let recording = g >> GEN_SERIES_SHIFT;
            if l.counted_in.get() != recording {
                l.counted_in.set(recording);
                l.series_tid
                    .set(series.threads.fetch_add(1, Ordering::Relaxed) + 1);
            }
            l.series_tid.get()
        }
    };
    l.tid.set(tid);
    name_thread(shared, tid);
}

/// A trace id for a thread new to `shared` and to its series, counted
/// among the file's threads (as [`take_tid`] counts one).
fn new_tid(shared: &Shared) -> u64 {
    let in_file = shared.threads.fetch_add(1, Ordering::Relaxed) + 1;
    match shared.series {
        None => in_file,
        Some(series) => series.threads.fetch_add(1, Ordering::Relaxed) + 1,
    }
}

/// Writes the calling thread's name record (trace id `tid`) into `shared`.
fn name_thread(shared: &Shared, tid: u64) {
    let name = std::thread::current().name().unwrap_or("").to_owned();
    shared.write_meta(&MetaRecord::Thread {
        tid: ThreadId(tid),
        os_tid: crate::process::thread_id(),
        name,
    });
}

/// Gives the thread its trace id in the recording it is bound to (running,
/// generation `g`), names it and records its start.
fn register(l: &Local, shared: &Shared, g: u64) {
    take_tid(l, shared, g);
    emit(l, g, EventKind::ThreadStart);
    let current = l.current.get();
    if current != StackId::OWN.0 {
        emit(l, g, EventKind::Switch(StackId(current)));
    }
}

/// Claims the next chunk for the thread, then releases its current one.
/// False: no chunk (file full, or every slot tried was busy); the current
/// chunk, if any, then ends with a `lost` mark and is released, and the
/// caller counts the event as dropped.
fn claim(l: &Local, shared: &Shared) -> bool {
    let map = &shared.map;
    let next_seq = map.counter(H_NEXT_SEQ);
    let dropped_chunks = map.counter(H_DROPPED_CHUNKS);
    let mut attempts = 0;
    while attempts < MAX_CLAIM_ATTEMPTS {
        attempts += 1;
        let seq = next_seq.fetch_add(1, Ordering::Relaxed);
        // Stop-when-full: slots are used once, in `seq` order, and the file
        // grows to them; past its maximum, or on a full disk, it is full.
        if shared.mode == Mode::StopWhenFull && seq >= map.ready_slots() && !map.grow_to(seq) {
            dropped_chunks.fetch_add(1, Ordering::Relaxed);
            l.full.set(true);
            end_lost(l, shared);
            return false;
        }
        let slot = seq % map.chunk_count;
        let state = map.state(slot);
        // A small ring can hand the thread the slot it holds: it takes it
        // over at once (nobody else can, it is busy for them).
        let held = ptr::eq(state, l.state_word.get());
        if held {
            state.store(pack_state(seq, 0, true), Ordering::Relaxed);
        } else {
            let old = state.load(Ordering::Relaxed);
            if old == SEGMENT_STATE {
                // A ring's slot holding names (`shared.rs`): passed by,
                // neither a try nor a drop (a ring gives a bounded share
                // of its slots to names, so the loop ends).
                attempts -= 1;
                continue;
            }
            let busy = old & STATE_WRITING != 0 || unpack_state(old).seq.is_some_and(|s| s >= seq);
            if busy
                || state
                    .compare_exchange(
                        old,
                        pack_state(seq, 0, true),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_err()
            {
                dropped_chunks.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // The new chunk is won: the thread lets go of the old one.
            release_chunk(l);
        }
        if seq < map.chunk_count {
            // The slot's first use: its pages are mapped unless the
            // provisioner did it already.
            shared.provisioner.on_first_claim(map, seq);
        }
        let chunk = map.chunk(slot);
        let chunk_no = l.next_chunk_no.get();
        l.next_chunk_no.set(chunk_no + 1);
        let body_len = map.chunk_size - CHUNK_HEADER_SIZE;
        // SAFETY: the thread won the chunk's state word, so it alone writes
        // the chunk until it releases it.
        let snapshot_len = unsafe {
            (chunk.add(C_THREAD) as *mut u64).write(l.tid.get().to_le());
            (chunk.add(C_THREAD_CHUNK_NO) as *mut u64).write(chunk_no.to_le());
            let restart = l.restart.replace(false);
            let continued = l.continued.replace(false);
            let flags = match (restart, continued) {
                (true, true) => CHUNK_FLAG_RESTART | CHUNK_FLAG_CONTINUED,
                (true, false) => CHUNK_FLAG_RESTART,
                _ => 0,
            };
            (chunk.add(C_FLAGS) as *mut u64).write(flags.to_le());
            // A ring's slot may hold the count of its last use.
            (*(chunk.add(C_EVENTS_PLUS_ONE) as *const AtomicU32)).store(0, Ordering::Relaxed);
            let body = std::slice::from_raw_parts_mut(chunk.add(CHUNK_HEADER_SIZE), body_len);
            let current = l.current.get();
            let frames: &[u32] = l.frames();
            let (own, stack): (&[u32], &[u32]) = if current == StackId::OWN.0 {
                (frames, &[])
            } else {
                (l.own_saved(), frames)
            };
            // A thread moving to the next file of a series had no event
            // since that file began (its first one would have moved it),
            // so its frames were these from the file's start on; adopted
            // frames were open before the file began.
            let tick = if continued {
                shared.clock.start_tick
            } else {
                clock::ticks(shared.gen & GEN_TSC != 0)
            };
            let max = body_len / 4;
            let len = encode_snapshot(body, max, tick, own, StackId(current), stack);
            // The frames of the current stack the snapshot lists (the
            // innermost, when cut): the chunk's first named frames.
            let room = max.saturating_sub(SNAPSHOT_FIXED) / 4;
            let named = if current == StackId::OWN.0 {
                own.len().min(room)
            } else {
                stack.len().min(room)
            };
            l.enc.set(EncoderState::new(tick, named as u32));
            len
        };
        // Version 4's state word counts bytes, version 3's 16-byte units.
        let committed = if shared.compact {
            pack_state_compact(seq, snapshot_len, true)
        } else {
            pack_state(seq, snapshot_len, true)
        };
        state.store(committed, Ordering::Release);
        l.state_word.set(state);
        l.state.set(committed);
        l.compact.set(shared.compact);
        l.chunk_events.set(0);
        // SAFETY: all inside the owned chunk. Events stop a `lost`
        // event's reserve short of its end, which stays free for a `lost`
        // mark (the snapshot takes at most a quarter of the body).
        unsafe {
            l.cursor.set(chunk.add(CHUNK_HEADER_SIZE + snapshot_len));
            if shared.compact {
                let tail = chunk.add(map.chunk_size - COMPACT_LOST_RESERVE);
                l.tail.set(tail);
                // `cursor < end`: a worst-case event ends by `tail`.
                l.end.set(tail.sub(COMPACT_MAX_EVENT_SIZE - 1));
            } else {
                l.end.set(chunk.add(map.chunk_size - LOST_RESERVE));
            }
        }
        return true;
    }
    end_lost(l, shared);
    false
}

/// The thread's claim failed: its events are missing from now on (until a
/// later claim succeeds, in ring mode). Says so with a `lost` event, whose
/// tick is now (that of the first event not stored), in the bytes its
/// current chunk keeps free for it, and releases the chunk. A thread
/// without a chunk has nowhere to say it.
fn end_lost(l: &Local, shared: &Shared) {
    let cursor = l.cursor.get();
    let holds = !l.state_word.get().is_null();
    if holds && l.compact.get() {
        let lost = Event {
            tick: clock::ticks(shared.gen & GEN_TSC != 0),
            kind: EventKind::Lost,
        };
        // Compact events end by `tail`, so the reserve after the cursor
        // holds the largest `lost`.
        let room = l.tail.get() as usize + COMPACT_LOST_RESERVE - cursor as usize;
        // SAFETY: the thread owns the chunk up to the end of its slot.
        let out = unsafe { std::slice::from_raw_parts_mut(cursor, room) };
        let mut enc = l.enc.get();
        if let Some(n) = enc.event(out, &lost, false) {
            l.enc.set(enc);
            commit_bytes(l, cursor, n);
        }
    } else if holds && cursor == l.end.get() {
        let tick = clock::ticks(shared.gen & GEN_TSC != 0);
        // SAFETY: the thread owns the chunk, and the cursor stands at its
        // end, `LOST_RESERVE` bytes before the end of the slot.
        unsafe { put(cursor, encode_lost(tick)) };
        commit(l, cursor);
    }
    release_chunk(l);
}

/// Gives up the current chunk: stores its state without the writing bit.
fn release_chunk(l: &Local) {
    let word = l.state_word.replace(ptr::null());
    // After a fork, in the child, the chunk is the parent's (the map is
    // shared with it): drop the hold without writing to it.
    let same_process = l.fork_epoch.get() == crate::process::forks();
    if !word.is_null() && same_process {
        // SAFETY: the chunk's map is not given back while the thread is
        // bound to its recording (see `shared.rs`, "Retired files"); the
        // state word is at the start of the chunk's header, which the
        // thread alone writes while it holds the chunk.
        unsafe {
            if l.compact.get() {
                // Atomic (relaxed) because a summary may read it while
                // a ring hands the slot on; little-endian like the file.
                let count = &*((word as *const u8).add(C_EVENTS_PLUS_ONE) as *const AtomicU32);
                count.store(
                    l.chunk_events.get().saturating_add(1).to_le(),
                    Ordering::Relaxed,
                );
            }
            // Release: the count is seen with the state that lets go.
            (*word).store(l.state.get() & !STATE_WRITING, Ordering::Release)
        };
    }
    l.cursor.set(ptr::null_mut());
    l.end.set(ptr::null_mut());
    l.tail.set(ptr::null_mut());
}

fn thread_exit(l: &Local) {
    let g = GEN.load(Ordering::Relaxed);
    if g > GEN_OFF && l.gen.get() == g {
        emit(l, g, EventKind::ThreadExit);
    }
    release_chunk(l);
    let_go(l);
    l.exited.set(true);
    l.gen.set(GEN_OFF);
    // SAFETY: nothing else refers to the vectors; they are replaced by empty ones.
    unsafe {
        drop(mem::take(l.frames()));
        drop(mem::take(l.own_saved()));
    }
}

// ---------------------------------------------------------------- stacks

/// Records `Switch(id)` under generation `g` (not `GEN_OFF`): inline when
/// the thread is bound to `g` with room, else through the cold path.
/// Returns the generation the thread is bound to, or `None` when nothing
/// can be recorded (then the caller must not swap frames).
#[inline(always)]
fn record_switch(l: &Local, g: u64, id: StackId) -> Option<u64> {
    let Some(cursor) = hot_cursor(l, g) else {
        return switch_cold(l, g, id);
    };
    // SAFETY: `hot_cursor` checked the cursor is below `end`.
    unsafe { put_stack_event(l, cursor, g, EventKind::Switch(id)) };
    Some(g)
}

#[cold]
#[inline(never)]
fn switch_cold(l: &Local, g: u64, id: StackId) -> Option<u64> {
    let g = bind(l, g)?;
    emit(l, g, EventKind::Switch(id));
    Some(g)
}

/// Switches the thread onto logical stack `id`, whose open frames are
/// `frames` (valid for generation `*frames_gen`). The stack's frames become
/// the thread's; `frames` is left holding what the thread must get back.
/// Returns the stack the thread ran before and the generation it is bound
/// to, or `None` when nothing is recorded (then nothing was swapped).
///
/// The vectors move by swapping, never by dropping: while the thread runs
/// its own stack, `own_saved` is empty, so the stack's `frames` holds an
/// empty vector while it is switched in from the thread's own stack (the
/// thread's, if it had no frame open; else `own_saved`'s, the own frames
/// then in `own_saved`).
#[inline(always)]
pub(crate) fn switch_in(
    id: StackId,
    frames: &mut Vec<u32>,
    frames_gen: &mut u64,
) -> Option<(StackId, u64)> {
    let g = GEN.load(Ordering::Relaxed);
    if g == GEN_OFF {
        return None;
    }
    let l = local();
    let g = record_switch(l, g, id)?;
    if *frames_gen != g && !same_recording(*frames_gen, g) {
        frames_from_another_file(id, frames, *frames_gen, g);
    }
    let prev = StackId(l.current.get());
    // SAFETY: no other reference to the thread's vectors is live.
    unsafe {
        // The thread's own frames are set aside in `own_saved` (where a
        // chunk's snapshot finds them) only if there are any: a worker
        // thread runs its tasks with none open, and a swap of three words
        // each way was a tenth of a switch's instructions.
        let set_aside = prev == StackId::OWN && !l.frames().is_empty();
        // Two empty vectors stay where they are: the thread keeps the
        // one it has grown, where a new stack's (never grown) would
        // allocate at its first frame and free at its end, once per
        // stack (a root `tracing` span's, a task's).
        if !l.frames().is_empty() || !frames.is_empty() {
            mem::swap(l.frames(), frames);
        }
        if set_aside {
            mem::swap(l.own_saved(), frames);
        }
    }
    *frames_gen = g;
    l.current.set(id.0);
    Some((prev, g))
}

/// The stack the thread runs (its own: `StackId::OWN`).
#[inline]
pub(crate) fn current_stack() -> StackId {
    StackId(local().current.get())
}

/// Undoes [`switch_in`]: the thread goes back to `prev`, and `frames` gets
/// the logical stack's open frames back.
#[inline(always)]
pub(crate) fn switch_out(prev: StackId, frames: &mut Vec<u32>, frames_gen: &mut u64) {
    let l = local();
    let bound = l.gen.get();
    let g = GEN.load(Ordering::Relaxed);
    if g > GEN_OFF && bound == g {
        // Bound to the running recording (an exited thread is bound to none).
        let cursor = l.cursor.get();
        if cursor < l.end.get() {
            // SAFETY: the cursor is below `end`, checked above.
            unsafe { put_stack_event(l, cursor, g, EventKind::Switch(prev)) };
        } else {
            switch_out_cold(l, g, prev);
        }
    } else {
        // No switch is written, yet the frames change: a chunk the thread
        // still holds (bound to a recording now paused, which it may write
        // on in when it resumes) must stop naming them.
        forget_named(l);
    }
    // SAFETY: no other reference to the thread's vectors is live.
    unsafe {
        // The thread gets back what `frames` held; `frames` the stack's
        // (both empty: nothing moves, as in `switch_in`).
        if !l.frames().is_empty() || !frames.is_empty() {
            mem::swap(l.frames(), frames);
        }
        if prev == StackId::OWN {
            // Own frames set aside at the switch in come back; with none
            // set aside, what `frames` held is an empty vector, the
            // thread's own frames (see `switch_in`).
            if !l.own_saved().is_empty() {
                mem::swap(l.frames(), l.own_saved());
            }
        } else if *frames_gen != bound && !same_series(*frames_gen, bound) {
            // The thread moved to a newer recording meanwhile (to the next
            // file of the same series, its snapshot carried the frames).
            l.frames().clear();
        }
    }
    *frames_gen = bound;
    l.current.set(prev.0);
}

/// A logical stack switched onto in generation `g` last ran in
/// `frames_gen`, another file: in an earlier file of the same rotating
/// series its frames stay open, and the new file learns them from a
/// continued-stack record (unless paused: nothing is written then); in
/// another recording they are forgotten.
#[cold]
#[inline(never)]
fn frames_from_another_file(id: StackId, frames: &mut Vec<u32>, frames_gen: u64, g: u64) {
    if !same_series(frames_gen, g) {
        frames.clear();
        return;
    }
    if frames.is_empty() || g & GEN_PAUSED != 0 {
        return;
    }
    let reading = Reading::begin();
    if let Some(shared) = current_with_gen(&reading, g) {
        let tick = clock::ticks(g & GEN_TSC != 0);
        shared.write_meta_with(|out| encode_continued_stack(out, id, tick, frames));
    }
}

/// The chunk names none of the current stack's frames from now on.
#[cold]
#[inline(never)]
fn forget_named(l: &Local) {
    let mut enc = l.enc.get();
    enc.named = 0;
    l.enc.set(enc);
}

#[cold]
#[inline(never)]
fn switch_out_cold(l: &Local, g: u64, prev: StackId) {
    emit(l, g, EventKind::Switch(prev));
}
