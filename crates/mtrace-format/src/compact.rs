//! Compact events (format version 4): the variable-size encoding of
//! `schemas/trace-format.md`, "Events (version 4: compact)".
//!
//! ```text
//! tag (1 byte): form << 6 | tick class << 4 | tick delta & 0xF
//! then          the delta's high bits, 0 / 1 / 2 / 7 bytes by tick class (LE)
//! then, by form 0 long:      kind << 4 | width code, payload 0/1/2/4/8 bytes (LE)
//!               1 enter:     function id, 1 byte
//!               2 enter:     function id, 2 bytes (LE)
//!               3 exit top:  nothing (the innermost frame the chunk names)
//! ```
//!
//! A tick is a delta from the previous event of the chunk (the first
//! event's from the snapshot's tick), so a chunk decodes alone. An exit of
//! the innermost frame needs no id when the chunk itself names that frame:
//! writer and reader keep the same list of *named frames* (the snapshot's
//! frames of the current stack, plus the chunk's enters; an exit of the
//! innermost frame pops it; a switch or an exit that names its function
//! clears it), so the reader resolves every such exit without the
//! thread's other chunks.
//!
//! The encoder ([`EncoderState`]) is the recorder's hot path: its state is
//! two words the thread owns, one table load gives the tag and the size, and with
//! [`COMPACT_MAX_EVENT_SIZE`] bytes of room it stores whole words whatever
//! the event's size (the bytes past the event's end are the next event's
//! room and are never committed). [`ChunkEncoder`] adds the list of named
//! frames for writers that only have the events. [`CompactEvents`] decodes
//! a committed body: as [`Event`]s (an iterator), or, for hot loops, as
//! the (kind, tick, payload) parts [`crate::event::raw_parts`] gives for a
//! 16-byte event ([`CompactEvents::next_raw`],
//! [`CompactEvents::for_each_raw`]), or written as 16-byte events into
//! a buffer ([`CompactEvents::write_events`], an expansion's walk, and
//! [`CompactEvents::fill_events`], which stops when the buffer is full);
//! it reports the byte offset of the first event it cannot decode. A
//! `switch` forgets the named frames, so a reader can decode a chunk
//! again from one ([`CompactEvents::count_with_switches`] finds them, as
//! does [`CompactEvents::fill_events_noting_switches`] while it expands;
//! [`CompactEvents::resume`] starts there) without the events before it. [`crate::Chunk::events`] and
//! [`crate::Chunk::compact_events`] walk a version-4 chunk through it.

use crate::error::{ChunkProblem, ChunkProblemKind, CompactFault};
use crate::event::{
    encode_raw, BadEvent, Event, EventKind, FunctionId, StackId, KIND_END, KIND_ENTER, KIND_EXIT,
    KIND_LOST, KIND_SWITCH, KIND_THREAD_EXIT, KIND_THREAD_START, KIND_WAKE, MAX_TICK,
};
use crate::layout::{
    COMPACT_MAX_EVENT_SIZE, EVENT_SIZE, FORM_ENTER_1, FORM_ENTER_2, FORM_EXIT_TOP, FORM_LONG,
    PAYLOAD_WIDTH_BYTES, TAG_CLASS_SHIFT, TAG_DELTA_LOW_MASK, TAG_FORM_SHIFT, TICK_CLASS_BYTES,
    TICK_CLASS_MAX,
};
use crate::snapshot::SnapshotRef;

/// Room the fast paths work in: one event's worst case.
pub type Room = [u8; COMPACT_MAX_EVENT_SIZE];

/// The bits of the two bytes after the tick a short form's id keeps, by
/// form (form 3 carries none; form 0 is not short).
const SHORT_ID_MASK: [u32; 4] = [0, 0xFF, 0xFFFF, 0];

/// The bits a long form's payload keeps, by width code.
const PAYLOAD_WIDTH_MASK: [u64; 5] = [0, 0xFF, 0xFFFF, 0xFFFF_FFFF, u64::MAX];

/// What a writer keeps per chunk to encode its next event: the tick of the
/// previous event (the snapshot's at the chunk's start) and how many of the
/// current stack's innermost frames the chunk names (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderState {
    /// Ticks are encoded as deltas from this one.
    pub prev_tick: u64,
    /// Innermost frames of the current stack that the chunk names.
    pub named: u32,
}

impl EncoderState {
    /// The state at the start of a chunk whose snapshot has this tick and
    /// lists `named` frames of the stack the thread runs (the frames of
    /// `current_stack`, or the own frames when that is the own stack).
    pub fn new(snapshot_tick: u64, named: u32) -> EncoderState {
        EncoderState {
            prev_tick: snapshot_tick & MAX_TICK,
            named,
        }
    }

    /// Appends `enter(f)` at the start of `out` (`f` non-zero). Returns the
    /// bytes it took, or `None`, writing nothing, when it does not fit.
    #[inline(always)]
    pub fn enter(&mut self, out: &mut [u8], tick: u64, f: FunctionId) -> Option<usize> {
        self.put(out, |state, room| state.enter_in(room, tick, f))
    }

    /// Appends `exit(f)`. `f_is_top`: `f` is the innermost frame of the
    /// writer's current stack; the exit then names no function if the
    /// chunk names that frame. Returns as [`EncoderState::enter`].
    #[inline(always)]
    pub fn exit(
        &mut self,
        out: &mut [u8],
        tick: u64,
        f: FunctionId,
        f_is_top: bool,
    ) -> Option<usize> {
        self.put(out, |state, room| state.exit_in(room, tick, f, f_is_top))
    }

    /// Appends any event (an exit as [`EncoderState::exit`] with `f_is_top`).
    pub fn event(&mut self, out: &mut [u8], event: &Event, f_is_top: bool) -> Option<usize> {
        self.put(out, |state, room| state.event_in(room, event, f_is_top))
    }

    /// [`EncoderState::enter`] into a worst case's room, where every event
    /// fits: the recorder's hot path, whose cursor keeps that much room
    /// before the chunk's end. Returns the event's size; the bytes of
    /// `room` after it are scratch.
    #[inline(always)]
    pub fn enter_in(&mut self, room: &mut Room, tick: u64, f: FunctionId) -> usize {
        let delta = self.delta(tick);
        let n = put_enter(room, delta, f.0);
        self.prev_tick += delta;
        // No overflow: a body (under 8 MiB) holds fewer than 2^32 enters.
        self.named = self.named.wrapping_add(1);
        n
    }

    /// [`EncoderState::exit`] into a worst case's room (as
    /// [`EncoderState::enter_in`]).
    #[inline(always)]
    pub fn exit_in(&mut self, room: &mut Room, tick: u64, f: FunctionId, f_is_top: bool) -> usize {
        let delta = self.delta(tick);
        let top = f_is_top && self.named > 0;
        let n = if top {
            put_head(room, FORM_EXIT_TOP as usize, delta)
        } else {
            put_long(room, delta, KIND_EXIT, f.0 as u64)
        };
        self.prev_tick += delta;
        // A named exit forgets the named frames (see the module doc).
        self.named = if top { self.named - 1 } else { 0 };
        n
    }

    /// [`EncoderState::event`] into a worst case's room (as
    /// [`EncoderState::enter_in`]).
    #[inline(always)]
    pub fn event_in(&mut self, room: &mut Room, event: &Event, f_is_top: bool) -> usize {
        match event.kind {
            EventKind::Enter(f) => return self.enter_in(room, event.tick, f),
            EventKind::Exit(f) => return self.exit_in(room, event.tick, f, f_is_top),
            _ => {}
        }
        let (kind, payload) = event.kind.raw();
        let delta = self.delta(event.tick);
        let n = put_long(room, delta, kind, payload);
        self.prev_tick += delta;
        if kind == KIND_SWITCH {
            self.named = 0;
        }
        n
    }

    /// Writes one event with `write` at the start of `out`: in place when
    /// `out` holds a worst case, else through [`put_short`].
    #[inline(always)]
    fn put(
        &mut self,
        out: &mut [u8],
        write: impl FnOnce(&mut EncoderState, &mut Room) -> usize,
    ) -> Option<usize> {
        match out.first_chunk_mut::<COMPACT_MAX_EVENT_SIZE>() {
            Some(room) => Some(write(self, room)),
            None => put_short(self, out, write),
        }
    }

    /// The delta to encode: a tick below the previous one (another core's
    /// clock) is stored as the previous one, as a reader would clamp it.
    #[inline(always)]
    fn delta(&self, tick: u64) -> u64 {
        (tick & MAX_TICK).saturating_sub(self.prev_tick)
    }
}

/// Writes an event into `out`, shorter than a worst case's room (near the
/// chunk's end): into a scratch room first, with a copy of the state, of
/// which the event's own bytes and the new state are kept only if they
/// fit. The fast paths, with room, write in place.
#[cold]
#[inline(never)]
fn put_short(
    state: &mut EncoderState,
    out: &mut [u8],
    write: impl FnOnce(&mut EncoderState, &mut Room) -> usize,
) -> Option<usize> {
    let mut scratch = [0u8; COMPACT_MAX_EVENT_SIZE];
    let mut next = *state;
    let n = write(&mut next, &mut scratch);
    out.get_mut(..n)?.copy_from_slice(&scratch[..n]);
    *state = next;
    Some(n)
}

/// The size class of a tick delta.
#[cfg(test)]
fn tick_class(delta: u64) -> usize {
    (delta > TICK_CLASS_MAX[0]) as usize
        + (delta > TICK_CLASS_MAX[1]) as usize
        + (delta > TICK_CLASS_MAX[2]) as usize
}

/// By a delta's bit length less one (`(delta | 1).ilog2()`, 0 for
/// deltas 0 and 1, which share class 0) and form (0 to 3): in bits 0..8
/// the tag's form and tick class bits, in bits 8.. the event's size
/// (`1 + class bytes + id bytes`; for the long form, with its kind byte
/// and without its payload). One table load gives the whole head but the
/// delta's own bits, and the size without a branch on the class; the
/// form is the inner index, so an enter's form (1 or 2 by its id) is
/// added to the address.
const HEADS: [[u16; 4]; 64] = head_table();

/// Bytes after the head (tag and tick bytes) by form: the kind byte
/// (long; its payload comes after), a 1- or 2-byte id, nothing.
const AFTER_HEAD: [usize; 4] = [1, 1, 2, 0];

const fn head_table() -> [[u16; 4]; 64] {
    let mut table = [[0u16; 4]; 64];
    let mut bits = 0;
    while bits < 64 {
        // The largest delta of this bit length.
        let max = if bits == 63 {
            u64::MAX
        } else {
            (1u64 << (bits + 1)) - 1
        };
        let mut class = 0;
        while class < 3 && max > TICK_CLASS_MAX[class] {
            class += 1;
        }
        let mut form = 0;
        while form < 4 {
            let size = 1 + TICK_CLASS_BYTES[class] + AFTER_HEAD[form];
            // What the fast paths store after the head fits the room: a
            // 4-byte id ending by byte 12, an 8-byte payload after a long head.
            assert!(size <= 10 && (form != 0 || size + 8 <= COMPACT_MAX_EVENT_SIZE));
            table[bits][form] =
                (size << 8 | form << TAG_FORM_SHIFT | class << TAG_CLASS_SHIFT) as u16;
            form += 1;
        }
        bits += 1;
    }
    table
}

/// Writes the tag and the delta's high bits (a delta has at most 60
/// bits, so its high bits fit the 7 bytes after the tag; only the
/// class's count is kept): the delta shifted by 4 in one 8-byte store,
/// whose first byte the tag then replaces. Returns the event's size by
/// its form (see [`HEADS`]).
#[inline(always)]
fn put_head(room: &mut Room, form: usize, delta: u64) -> usize {
    let head = HEADS[(delta | 1).ilog2() as usize & 63][form & 3];
    let tag = (delta as u8 & TAG_DELTA_LOW_MASK) | head as u8;
    // SAFETY: 8 bytes, then 1, at the room's start.
    unsafe {
        put_at(room, 0, (delta << 4).to_le_bytes());
        put_at(room, 0, [tag]);
    }
    (head >> 8) as usize
}

/// Stores `bytes` at `at` in the room.
///
/// # Safety
/// `at + N <= COMPACT_MAX_EVENT_SIZE`: the callers' `at` come from
/// [`HEADS`], whose sizes `head_table` checks against the room.
#[inline(always)]
unsafe fn put_at<const N: usize>(room: &mut Room, at: usize, bytes: [u8; N]) {
    debug_assert!(at + N <= COMPACT_MAX_EVENT_SIZE);
    room.as_mut_ptr()
        .add(at)
        .cast::<[u8; N]>()
        .write_unaligned(bytes);
}

#[inline(always)]
fn put_enter(room: &mut Room, delta: u64, f: u32) -> usize {
    if f > 0xFFFF {
        return put_long(room, delta, KIND_ENTER, f as u64);
    }
    // Form 1 or 2 by the id's width, without a branch.
    const _: () = assert!(FORM_ENTER_2 == FORM_ENTER_1 + 1);
    let wide = (f > 0xFF) as usize;
    let n = put_head(room, FORM_ENTER_1 as usize + wide, delta);
    // SAFETY: the id ends the event, which is at most 10 bytes; its 4
    // bytes end by byte 12 of the room.
    unsafe { put_at(room, n - 1 - wide, f.to_le_bytes()) };
    n
}

/// By a payload's leading zeros (64 for 0): its width code in bits 0..8
/// and its width in bytes in bits 8.. (the narrowest of 0, 1, 2, 4, 8
/// that holds it), in one load instead of four compares.
const WIDTH_BY_LEADING_ZEROS: [u16; 65] = width_table();

const fn width_table() -> [u16; 65] {
    let mut table = [0u16; 65];
    let mut zeros: usize = 0;
    while zeros <= 64 {
        let bytes = (64 - zeros).div_ceil(8);
        let code = match bytes {
            0 => 0,
            1 => 1,
            2 => 2,
            3 | 4 => 3,
            _ => 4,
        };
        table[zeros] = (PAYLOAD_WIDTH_BYTES[code] << 8 | code) as u16;
        zeros += 1;
    }
    table
}

/// The long form: head, kind byte, payload in the narrowest width.
#[inline(always)]
fn put_long(room: &mut Room, delta: u64, kind: u64, payload: u64) -> usize {
    let width = WIDTH_BY_LEADING_ZEROS[payload.leading_zeros() as usize];
    let at = put_head(room, FORM_LONG as usize, delta);
    // SAFETY: the head and kind byte take at most 9 bytes, the payload's
    // 8 after them end by byte 17, the room's last.
    unsafe {
        put_at(room, at - 1, [(kind as u8) << 4 | width as u8]);
        put_at(room, at, payload.to_le_bytes());
    }
    at + (width >> 8) as usize
}

/// An encoder that keeps the chunk's named frames itself, for writers
/// that have the events but no frame stack of their own (the trace
/// writer, converters, tools). The recorder uses [`EncoderState`] with
/// its own frames.
#[derive(Clone, Debug)]
pub struct ChunkEncoder {
    state: EncoderState,
    named: Vec<u32>,
}

impl ChunkEncoder {
    /// Starts a chunk whose snapshot has `tick` and lists `named` (the
    /// frames of the stack the thread runs, outermost first).
    pub fn new(snapshot_tick: u64, named: &[u32]) -> ChunkEncoder {
        ChunkEncoder {
            state: EncoderState::new(snapshot_tick, named.len() as u32),
            named: named.to_vec(),
        }
    }

    /// Starts a chunk from its snapshot (see [`named_frames`]).
    pub fn from_snapshot(snapshot: &SnapshotRef<'_>) -> ChunkEncoder {
        let named: Vec<u32> = named_frames(snapshot).map(|f| f.0).collect();
        ChunkEncoder::new(snapshot.tick, &named)
    }

    /// Appends `event` at the start of `out`; `None`, writing nothing, when
    /// it does not fit.
    pub fn push(&mut self, out: &mut [u8], event: &Event) -> Option<usize> {
        let top = match event.kind {
            EventKind::Exit(f) => self.named.last() == Some(&f.0),
            _ => false,
        };
        let n = self.state.event(out, event, top)?;
        match event.kind {
            EventKind::Enter(f) => self.named.push(f.0),
            EventKind::Exit(_) if top => {
                self.named.pop();
            }
            EventKind::Exit(_) | EventKind::Switch(_) => self.named.clear(),
            _ => {}
        }
        debug_assert_eq!(self.named.len(), self.state.named as usize);
        Some(n)
    }

    /// The state a hot-path writer would hold now.
    pub fn state(&self) -> EncoderState {
        self.state
    }
}

/// The frames a chunk names at its start: its snapshot's frames of the
/// stack the thread runs, outermost first.
pub fn named_frames<'a>(snapshot: &SnapshotRef<'a>) -> impl Iterator<Item = FunctionId> + 'a {
    let logical = snapshot.current_stack != StackId::OWN;
    let own = (!logical).then(|| snapshot.own_frames());
    let stack = logical.then(|| snapshot.stack_frames());
    own.into_iter().flatten().chain(stack.into_iter().flatten())
}

/// One decoded event as the analyzer's hot loops take a 16-byte one (see
/// [`crate::event::raw_parts`]): kind number, absolute tick, payload (an
/// exit's function id resolved from the named frames).
pub type RawEvent = (u64, u64, u64);

/// A `switch` event of a compact chunk, from which its events can be
/// decoded again without the ones before it
/// ([`CompactEvents::count_with_switches`], [`CompactEvents::resume`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchPoint {
    /// Its index among the events of the walk that found it (the chunk's,
    /// for a walk from the chunk's start).
    pub event: usize,
    /// Its file offset.
    pub offset: u64,
    /// The tick of the event before it (the snapshot's, for the first).
    pub prev_tick: u64,
}

/// The events of a version-4 chunk body, decoded in order with absolute
/// ticks and every exit naming its function. A damaged event yields one
/// `Err` with its file offset and ends the iteration; a `lost` event ends
/// it too (nothing after it in the chunk is read).
/// [`CompactEvents::next_raw`] is the same walk without building
/// [`Event`]s, for hot loops.
#[derive(Clone, Debug)]
pub struct CompactEvents<'a> {
    rest: &'a [u8],
    offset: u64,
    index: u64,
    tick: u64,
    named: Vec<u32>,
    done: bool,
    problem: Option<ChunkProblem>,
}

impl<'a> CompactEvents<'a> {
    /// Decodes `events` (the committed body after the snapshot) of chunk
    /// slot `index`, whose first byte is at file offset `offset`.
    pub fn new(
        events: &'a [u8],
        index: u64,
        offset: u64,
        snapshot: &SnapshotRef<'_>,
    ) -> CompactEvents<'a> {
        let named = named_frames(snapshot).map(|f| f.0).collect();
        CompactEvents::from_parts(events, index, offset, snapshot.tick, named)
    }

    /// [`CompactEvents::new`] from the snapshot's tick and named frames
    /// (outermost first; a caller may pass a buffer it reuses, see
    /// [`CompactEvents::into_named`]).
    pub fn from_parts(
        events: &'a [u8],
        index: u64,
        offset: u64,
        snapshot_tick: u64,
        named: Vec<u32>,
    ) -> CompactEvents<'a> {
        CompactEvents {
            rest: events,
            offset,
            index,
            tick: snapshot_tick & MAX_TICK,
            named,
            done: false,
            problem: None,
        }
    }

    /// File offset of the next event to decode (after a damaged event:
    /// that event's).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The damage that ended [`CompactEvents::next_raw`]'s walk, if any.
    pub fn problem(&self) -> Option<&ChunkProblem> {
        self.problem.as_ref()
    }

    /// The named-frames buffer, to reuse for the next chunk.
    pub fn into_named(self) -> Vec<u32> {
        self.named
    }

    /// The next event as (kind, tick, payload); `None` at the end of the
    /// body, after a `lost` event, or at damage ([`CompactEvents::problem`]
    /// then says what and where).
    #[inline(always)]
    pub fn next_raw(&mut self) -> Option<RawEvent> {
        // The fast path keeps its result in registers: the body's tail and
        // the damage are handled out of line.
        if let (Some(room), false) = (self.rest.first_chunk::<COMPACT_MAX_EVENT_SIZE>(), self.done)
        {
            if let Ok((len, event)) =
                decode(room, COMPACT_MAX_EVENT_SIZE, self.tick, &mut self.named)
            {
                self.rest = self.rest.get(len..).unwrap_or_default();
                self.offset += len as u64;
                self.tick = event.1;
                self.done = event.0 == KIND_LOST;
                return Some(event);
            }
        }
        self.next_raw_slow()
    }

    /// Hands every remaining event, as [`CompactEvents::next_raw`] would
    /// return it, to `f`: the walk for hot loops. Exits of named frames and
    /// short enters, nearly all events, are decoded without a branch on
    /// their form (which alternates as a program calls and returns, and
    /// would be mispredicted about every other event): both the enter's id
    /// and the innermost named frame are read, the named frames are a
    /// slice written at the top whatever the form, and the form selects.
    /// What a short form's tag says (masks, length, kind, depth step) is
    /// one table load, not bits worked out per event. The long form is
    /// decoded in place; the body's last bytes, a `lost` and damage go
    /// one event at a time through the slow path.
    #[inline]
    pub fn for_each_raw(&mut self, mut f: impl FnMut(RawEvent)) {
        loop {
            let mut named = std::mem::take(&mut self.named);
            let mut depth = named.len();
            // Index 0 holds 0, under the named frames (1..=depth): the
            // innermost frame is always `named[depth]`, and a 0 read there
            // is an exit with no named frame, as an enter of id 0 is
            // damage: one check for both.
            named.insert(0, 0);
            let mut tick = self.tick;
            // After a `lost` or damage nothing is walked (the slow path
            // says so).
            let start = if self.done { &[][..] } else { self.rest };
            // Room above the top for the enters to come; when it runs out
            // the walk leaves the loop, the slow path pushes one, and the
            // room doubles here.
            named.resize(2 * depth + 256, 0);
            let stack = named.as_mut_slice();
            // An index, not a shrinking slice: the next event's position
            // is one add after this one's length (the walk's critical path).
            let mut at_event = 0usize;
            // One compare a turn: an event starting at or before `last`
            // has a worst case's bytes in the body.
            let last = start.len().checked_sub(COMPACT_MAX_EVENT_SIZE);
            // The innermost named frame and the slot above it are in the
            // stack while the depth is below this.
            let deepest = stack.len().saturating_sub(1);
            while last.is_some_and(|last| at_event <= last) {
                let Some(room) = start
                    .get(at_event..at_event + COMPACT_MAX_EVENT_SIZE)
                    .and_then(|room| <&Room>::try_from(room).ok())
                else {
                    break;
                };
                let (tag, short, next) = short_step(room, tick);
                if next > MAX_TICK {
                    break;
                }
                let (len, event) = if tag >> TAG_FORM_SHIFT == FORM_LONG {
                    // Out of line but in place. A `lost` and damage are
                    // left to the slow path (which decodes them again).
                    let at = 1 + tick_bytes((tag >> TAG_CLASS_SHIFT) as usize & 3);
                    match long_event(room, COMPACT_MAX_EVENT_SIZE, at, next) {
                        Ok((len, event)) if event.0 != KIND_LOST => {
                            match event.0 {
                                KIND_ENTER => {
                                    let Some(top) = stack.get_mut(depth + 1) else {
                                        break;
                                    };
                                    *top = event.2 as u32;
                                    depth += 1;
                                }
                                // See the module doc: both forget the
                                // named frames.
                                KIND_EXIT | KIND_SWITCH => depth = 0,
                                _ => {}
                            }
                            (len, event)
                        }
                        _ => break,
                    }
                } else {
                    let exit = short.kind == KIND_EXIT as u8;
                    // The id a short enter carries (0 for form 3): its
                    // bytes follow the tick's, at 1 + 0, 1, 2 or 7
                    // (masked to 3 bits: the room is indexed unchecked).
                    let id = u32::from_le_bytes(quad_at(room, 1 + (short.tick_bytes & 7) as usize))
                        & short.id_mask;
                    if depth >= deepest {
                        break;
                    }
                    let function = std::hint::select_unpredictable(exit, stack[depth], id);
                    // An exit with no named frame (the 0 under them), an
                    // enter of id 0: damage, for the slow path to report.
                    if function == 0 {
                        break;
                    }
                    // An exit leaves it above the new top, where it is
                    // never read.
                    stack[depth + 1] = id;
                    depth = depth.wrapping_add(short.step as usize);
                    (short_len(tag), (short.kind as u64, next, function as u64))
                };
                f(event);
                at_event += len;
                tick = next;
            }
            named.truncate(depth + 1);
            named.remove(0);
            let rest = start.get(at_event..).unwrap_or_default();
            if !self.done {
                self.offset += (start.len() - rest.len()) as u64;
                self.rest = rest;
                self.tick = tick;
            }
            self.named = named;
            match self.next_raw_slow() {
                Some(event) => f(event),
                None => return,
            }
        }
    }

    /// Writes the remaining events, as 16-byte events (see
    /// [`crate::event::raw_parts`]), into `out` in order; returns how many
    /// it wrote. When `out` is full the walk goes on without writing, so
    /// [`CompactEvents::problem`] still reports damage after it.
    ///
    /// The walk an expansion into 16-byte events runs: the same decode as
    /// [`CompactEvents::for_each_raw`], with three bounds (the body's
    /// room, `out`'s room, the named frames' room) folded into one
    /// compare an event. An event takes at least one byte, writes one
    /// slot of `out` and adds at most one named frame, so a batch that
    /// starts at byte `at` with room for `budget` events in `out` and in
    /// the named frames may decode every event that starts by
    /// `at + budget - 1`; the batch is then measured again.
    ///
    /// The short forms stay on one path without a branch on the form: a
    /// jump on the tag to an arm per form and tick class, each with its
    /// sizes as constants, ran fewer instructions but took more CPU time
    /// (the arms alternate as a program calls and returns, and the jump
    /// mispredicts; see `docs/BENCHMARKS.md`).
    pub fn write_events(&mut self, out: &mut [[u8; EVENT_SIZE]]) -> usize {
        self.write_events_until::<false, _>(out, &mut |_| {})
    }

    /// [`CompactEvents::write_events`] that stops when `out` is full: the
    /// events after those are left for the next call (a reader that
    /// expands only the events it needs, from a [`SwitchPoint`]).
    pub fn fill_events(&mut self, out: &mut [[u8; EVENT_SIZE]]) -> usize {
        self.write_events_until::<true, _>(out, &mut |_| {})
    }

    /// [`CompactEvents::fill_events`] that hands each `switch` it writes to
    /// `at`, as [`CompactEvents::count_with_switches`] would (its `event`:
    /// its index in `out`): a reader that cuts the events at their
    /// switches learns there where it may [`CompactEvents::resume`] later,
    /// with no walk of its own. Only the long form, which a `switch`
    /// always takes, looks at the kind, so the short forms cost nothing more.
    pub fn fill_events_noting_switches(
        &mut self,
        out: &mut [[u8; EVENT_SIZE]],
        mut at: impl FnMut(SwitchPoint),
    ) -> usize {
        self.write_events_until::<true, _>(out, &mut at)
    }

    /// Where the remaining events' `switch` events are, for a reader that
    /// decodes a chunk again from one of them ([`CompactEvents::resume`]):
    /// hands each to `at` as it walks, then returns how many events the
    /// walk yielded (as [`CompactEvents::next_raw`] would: up to a `lost`
    /// or damage, which [`CompactEvents::problem`] then reports).
    ///
    /// A count needs no function of an exit, so the walk keeps the depth
    /// of the named frames, not the frames: an exit of a named frame at
    /// depth 0 and an enter of id 0 are the damage a short form can be,
    /// one check for both as in [`CompactEvents::for_each_raw`], and
    /// nothing is stored an event (a snapshot's frame of id 0, damage,
    /// is the one depth at which an exit is damage). The named frames left for the slow
    /// path (the body's last bytes, a `lost`, damage) are as many as the
    /// walk's, with ids no count reads: after this walk, only
    /// [`CompactEvents::problem`] and [`CompactEvents::offset`] are to be
    /// read.
    pub fn count_with_switches(&mut self, mut at: impl FnMut(SwitchPoint)) -> usize {
        let mut events = 0usize;
        loop {
            let mut depth = self.named.len();
            // The depth at which an exit is damage: 0 (no named frame), or
            // that of the innermost named frame of id 0 (a snapshot's, as
            // the walk's own enters of id 0 are damage): the exits above
            // it reach it before any frame below.
            let mut dead = self
                .named
                .iter()
                .rposition(|&f| f == 0)
                .map_or(0, |i| i + 1);
            let mut tick = self.tick;
            // After a `lost` or damage nothing is walked (the slow path
            // says so).
            let start = if self.done { &[][..] } else { self.rest };
            let mut at_event = 0usize;
            // An event starting at or before `last` has a worst case's
            // bytes in the body: one compare a turn.
            let last = start.len().checked_sub(COMPACT_MAX_EVENT_SIZE);
            while last.is_some_and(|last| at_event <= last) {
                // SAFETY: `at_event <= last`, so the event's worst case is
                // in the body.
                let room = unsafe { &*start.as_ptr().add(at_event).cast::<Room>() };
                let (tag, short, next) = short_step(room, tick);
                if next > MAX_TICK {
                    break;
                }
                let len = if tag >> TAG_FORM_SHIFT == FORM_LONG {
                    let from = 1 + tick_bytes((tag >> TAG_CLASS_SHIFT) as usize & 3);
                    match long_event(room, COMPACT_MAX_EVENT_SIZE, from, next) {
                        Ok((len, event)) if event.0 != KIND_LOST => {
                            match event.0 {
                                KIND_ENTER => depth += 1,
                                KIND_EXIT => (depth, dead) = (0, 0),
                                KIND_SWITCH => {
                                    at(SwitchPoint {
                                        event: events,
                                        offset: self.offset + at_event as u64,
                                        prev_tick: tick,
                                    });
                                    (depth, dead) = (0, 0);
                                }
                                _ => {}
                            }
                            len
                        }
                        // A `lost` and damage: the slow path's.
                        _ => break,
                    }
                } else {
                    let exit = short.kind == KIND_EXIT as u8;
                    let id = u32::from_le_bytes(quad_at(room, 1 + (short.tick_bytes & 7) as usize))
                        & short.id_mask;
                    // An exit's depth must not be the dead one, an enter's
                    // id not 0 (a chunk's depth fits in 32 bits: each
                    // frame took a byte of it).
                    let live = (depth ^ dead) as u32;
                    if std::hint::select_unpredictable(exit, live, id) == 0 {
                        break;
                    }
                    depth = depth.wrapping_add(short.step as usize);
                    short_len(tag)
                };
                events += 1;
                at_event += len;
                tick = next;
            }
            if !self.done {
                let rest = start.get(at_event..).unwrap_or_default();
                self.offset += (start.len() - rest.len()) as u64;
                self.rest = rest;
                self.tick = tick;
            }
            // Frames no count reads, but for the dead one, which the slow
            // path must see as 0.
            self.named.clear();
            self.named.resize(depth, u32::MAX);
            if let Some(f) = dead.checked_sub(1).and_then(|i| self.named.get_mut(i)) {
                *f = 0;
            }
            let (offset, prev_tick) = (self.offset, self.tick);
            match self.next_raw_slow() {
                Some((kind, _, _)) => {
                    if kind == KIND_SWITCH {
                        at(SwitchPoint {
                            event: events,
                            offset,
                            prev_tick,
                        });
                    }
                    events += 1;
                }
                None => return events,
            }
        }
    }

    /// The events of a chunk body from a [`SwitchPoint`] on: `rest` is the
    /// body from the point's offset (file offset `offset`). A `switch`
    /// forgets the named frames, so a walk from one decodes what the walk
    /// from the chunk's start decodes from there.
    /// `named` is a buffer to reuse (see [`CompactEvents::into_named`]).
    pub fn resume(
        rest: &'a [u8],
        index: u64,
        offset: u64,
        prev_tick: u64,
        mut named: Vec<u32>,
    ) -> CompactEvents<'a> {
        named.clear();
        CompactEvents::from_parts(rest, index, offset, prev_tick, named)
    }

    fn write_events_until<const STOP: bool, F: FnMut(SwitchPoint)>(
        &mut self,
        out: &mut [[u8; EVENT_SIZE]],
        switch_at: &mut F,
    ) -> usize {
        let mut written = 0usize;
        loop {
            let mut named = std::mem::take(&mut self.named);
            let mut depth = named.len();
            // As in `for_each_raw`: a 0 under the named frames, which an
            // exit reads when the chunk names none.
            named.insert(0, 0);
            named.resize(2 * depth + 256, 0);
            let stack = named.as_mut_slice();
            let mut tick = self.tick;
            let start = if self.done { &[][..] } else { self.rest };
            let mut at = 0usize;
            let last = start.len().checked_sub(COMPACT_MAX_EVENT_SIZE);
            'batches: while let Some(last) = last.filter(|&last| at <= last) {
                // Room in the named frames above the top: `stack[depth + 1]`
                // is written by every event.
                let frames_room = stack.len() - 1 - depth;
                let budget = (out.len() - written).min(frames_room);
                if budget == 0 {
                    break;
                }
                let limit = last.min(at + budget - 1);
                while at <= limit {
                    // SAFETY: `at <= last`, so the event's worst case is in
                    // the body.
                    let room = unsafe { &*start.as_ptr().add(at).cast::<Room>() };
                    let (tag, short, next) = short_step(room, tick);
                    if next > MAX_TICK {
                        break 'batches;
                    }
                    let (len, head, payload) = if tag >> TAG_FORM_SHIFT == FORM_LONG {
                        let kind_at = 1 + tick_bytes((tag >> TAG_CLASS_SHIFT) as usize & 3);
                        match long_event(room, COMPACT_MAX_EVENT_SIZE, kind_at, next) {
                            Ok((len, event)) if event.0 != KIND_LOST => {
                                match event.0 {
                                    KIND_ENTER => {
                                        // SAFETY: within the batch's budget
                                        // of named frames (see above).
                                        unsafe {
                                            *stack.get_unchecked_mut(depth + 1) = event.2 as u32
                                        };
                                        depth += 1;
                                    }
                                    KIND_EXIT => depth = 0,
                                    KIND_SWITCH => {
                                        depth = 0;
                                        switch_at(SwitchPoint {
                                            event: written,
                                            offset: self.offset + at as u64,
                                            prev_tick: tick,
                                        });
                                    }
                                    _ => {}
                                }
                                (len, event.0 << 60 | next, event.2)
                            }
                            // A `lost` and damage: the slow path's.
                            _ => break 'batches,
                        }
                    } else {
                        let exit = short.kind == KIND_EXIT as u8;
                        let id =
                            u32::from_le_bytes(quad_at(room, 1 + (short.tick_bytes & 7) as usize))
                                & short.id_mask;
                        // SAFETY: `depth + 1` is within the batch's budget
                        // of named frames; `depth` never goes below 0, as an
                        // exit at depth 0 reads the 0 there and stops.
                        let top = unsafe { *stack.get_unchecked(depth) };
                        let function = std::hint::select_unpredictable(exit, top, id);
                        if function == 0 {
                            break 'batches;
                        }
                        unsafe { *stack.get_unchecked_mut(depth + 1) = id };
                        depth = depth.wrapping_add(short.step as usize);
                        (
                            short_len(tag),
                            (short.kind as u64) << 60 | next,
                            function as u64,
                        )
                    };
                    // SAFETY: within the batch's budget of `out`'s slots.
                    let slot = unsafe { out.get_unchecked_mut(written) };
                    // `encode_raw`'s bytes, without its mask of the tick
                    // (`next` is at most `MAX_TICK` here): the mask was an
                    // instruction an event more on this path.
                    slot[..8].copy_from_slice(&head.to_le_bytes());
                    slot[8..].copy_from_slice(&payload.to_le_bytes());
                    written += 1;
                    at += len;
                    tick = next;
                }
            }
            named.truncate(depth + 1);
            named.remove(0);
            let rest = start.get(at..).unwrap_or_default();
            if !self.done {
                self.offset += (start.len() - rest.len()) as u64;
                self.rest = rest;
                self.tick = tick;
            }
            self.named = named;
            if STOP && written == out.len() {
                return written;
            }
            let (offset, prev_tick) = (self.offset, self.tick);
            match self.next_raw_slow() {
                Some((kind, tick, payload)) => {
                    if let Some(slot) = out.get_mut(written) {
                        if kind == KIND_SWITCH {
                            switch_at(SwitchPoint {
                                event: written,
                                offset,
                                prev_tick,
                            });
                        }
                        *slot = encode_raw(kind, tick, payload);
                        written += 1;
                    }
                }
                None => return written,
            }
        }
    }

    /// [`CompactEvents::next_raw`] when the body has less than a worst
    /// case's bytes left, or the event is damaged (decoded again here).
    #[inline(never)]
    fn next_raw_slow(&mut self) -> Option<RawEvent> {
        if self.done || self.rest.is_empty() {
            return None;
        }
        match decode_tail(self.rest, self.tick, &mut self.named) {
            Ok((len, event)) => {
                self.rest = self.rest.get(len..).unwrap_or_default();
                self.offset += len as u64;
                self.tick = event.1;
                self.done = event.0 == KIND_LOST;
                Some(event)
            }
            Err(fault) => {
                self.done = true;
                self.problem = Some(ChunkProblem {
                    index: self.index,
                    offset: self.offset,
                    kind: ChunkProblemKind::BadCompactEvent(fault),
                });
                None
            }
        }
    }
}

/// An event at the body's end, in fewer bytes than a worst case (or a
/// damaged one, decoded again to say why): decoded from a zero-padded
/// copy, checked to end before the body does. A failed decode changes no
/// named frame, so decoding again gives the same answer.
#[inline(never)]
fn decode_tail(
    rest: &[u8],
    prev_tick: u64,
    named: &mut Vec<u32>,
) -> Result<(usize, RawEvent), CompactFault> {
    let (room, avail) = padded(rest);
    decode(&room, avail, prev_tick, named)
}

/// The first bytes of `rest` (an event's worst case at most) in a room
/// padded with zeros, and how many of them are `rest`'s.
fn padded(rest: &[u8]) -> (Room, usize) {
    let mut room = [0u8; COMPACT_MAX_EVENT_SIZE];
    let avail = rest.len().min(COMPACT_MAX_EVENT_SIZE);
    room[..avail].copy_from_slice(&rest[..avail]);
    (room, avail)
}

/// The tick delta of the event at the front of `room`: its tag's low bits
/// under the high bits its tick class gives.
#[inline(always)]
fn tick_delta(room: &Room) -> u64 {
    let tag = room[0];
    let class = (tag >> TAG_CLASS_SHIFT) as usize & 3;
    let high = u64::from_le_bytes(word_at(room, 1)) & (TICK_CLASS_MAX[class] >> 4);
    high << 4 | (tag & TAG_DELTA_LOW_MASK) as u64
}

/// Decodes the event at the front of `room`, of whose bytes the first
/// `avail` are the body's (the rest is padding): its length and the
/// event. The length is known from the tag (and the kind byte), so an
/// event the body cuts is reported as cut before its values are
/// judged. The frequent forms (exit top, short enters) take no table
/// jump and no load but the event's.
#[inline(always)]
fn decode(
    room: &Room,
    avail: usize,
    prev_tick: u64,
    named: &mut Vec<u32>,
) -> Result<(usize, RawEvent), CompactFault> {
    let tag = room[0];
    let form = tag >> TAG_FORM_SHIFT;
    let class = (tag >> TAG_CLASS_SHIFT) as usize & 3;
    let at = 1 + tick_bytes(class);
    let tick = prev_tick + tick_delta(room);
    if form == FORM_LONG {
        return decode_long(room, avail, at, tick, named);
    }
    // Forms 1 and 2 carry a 1- or 2-byte id, form 3 none.
    let len = at + form as usize % 3;
    if len > avail {
        return Err(CompactFault::Cut);
    }
    if tick > MAX_TICK {
        return Err(CompactFault::TickOverflow);
    }
    if form == FORM_EXIT_TOP {
        // A snapshot's frame of id 0 (damage) is the exit's function: an
        // exit of id 0 is damage, as it is as a 16-byte event. Nothing
        // is popped unless the exit decodes.
        return match named.last() {
            None => Err(CompactFault::ExitWithoutNamedFrame),
            Some(0) => Err(CompactFault::Event(BadEvent::BadFunctionId(0))),
            Some(&f) => {
                named.pop();
                Ok((len, (KIND_EXIT, tick, f as u64)))
            }
        };
    }
    let id = u16::from_le_bytes([room[at], room[at + 1]]) as u32;
    let f = id & if form == FORM_ENTER_1 { 0xFF } else { 0xFFFF };
    enter(named, f)?;
    Ok((len, (KIND_ENTER, tick, f as u64)))
}

/// [`decode`] of the long form (kind byte at `at`).
#[inline(never)]
fn decode_long(
    room: &Room,
    avail: usize,
    at: usize,
    tick: u64,
    named: &mut Vec<u32>,
) -> Result<(usize, RawEvent), CompactFault> {
    let (len, event) = long_event(room, avail, at, tick)?;
    match event.0 {
        KIND_ENTER => named.push(event.2 as u32),
        KIND_EXIT | KIND_SWITCH => named.clear(),
        _ => {}
    }
    Ok((len, event))
}

/// A long form's length and event, judged as a 16-byte event's parts are,
/// without its effect on the named frames (an enter pushes its function,
/// a named exit and a switch clear them).
#[inline(always)]
fn long_event(
    room: &Room,
    avail: usize,
    at: usize,
    tick: u64,
) -> Result<(usize, RawEvent), CompactFault> {
    if at >= avail {
        return Err(CompactFault::Cut);
    }
    let code = room[at] & 0x0F;
    let (Some(&width), Some(&mask)) = (
        PAYLOAD_WIDTH_BYTES.get(code as usize),
        PAYLOAD_WIDTH_MASK.get(code as usize),
    ) else {
        return Err(CompactFault::BadWidth(code));
    };
    let len = at + 1 + width;
    if len > avail {
        return Err(CompactFault::Cut);
    }
    if tick > MAX_TICK {
        return Err(CompactFault::TickOverflow);
    }
    let payload = u64::from_le_bytes(word_at(room, at + 1)) & mask;
    let kind = (room[at] >> 4) as u64;
    let bad = |b| Err(CompactFault::Event(b));
    match kind {
        KIND_ENTER | KIND_EXIT if payload == 0 || payload > u32::MAX as u64 => {
            return bad(BadEvent::BadFunctionId(payload))
        }
        KIND_ENTER | KIND_EXIT | KIND_SWITCH => {}
        KIND_THREAD_START | KIND_THREAD_EXIT | KIND_LOST if payload != 0 => {
            return bad(BadEvent::NonZeroPayload)
        }
        KIND_THREAD_START | KIND_THREAD_EXIT | KIND_LOST => {}
        KIND_WAKE if payload == 0 => return bad(BadEvent::WakeOfOwnStack),
        KIND_END if payload == 0 => return bad(BadEvent::EndOfOwnStack),
        KIND_WAKE | KIND_END => {}
        other => return bad(BadEvent::UnknownKind(other as u8)),
    }
    Ok((len, (kind, tick, payload)))
}

#[inline(always)]
fn enter(named: &mut Vec<u32>, f: u32) -> Result<(), CompactFault> {
    if f == 0 {
        return Err(CompactFault::Event(BadEvent::BadFunctionId(0)));
    }
    named.push(f);
    Ok(())
}

/// [`TICK_CLASS_BYTES`]`[class]` without a load: the next event's
/// position hangs on it, and a table lookup would add a load's latency.
#[inline(always)]
fn tick_bytes(class: usize) -> usize {
    class + ((class & (class >> 1)) << 2)
}

/// What a short form's tag (forms 1 to 3) says of its event, read with
/// one load in [`CompactEvents::for_each_raw`]'s walk instead of worked
/// out from the tag's bits: the event's position after it is one add
/// and the values a mask each. Long-form tags give only `high_mask` and,
/// as `len`, the bytes of their tag and tick.
#[derive(Clone, Copy)]
struct ShortForm {
    /// The bits of the 8 bytes after the tag that are the delta's high bits.
    high_mask: u64,
    /// The bits of the 4 bytes after the tick that are the enter's id (0
    /// for an exit).
    id_mask: u32,
    /// Bytes of the delta's high bits (0, 1, 2 or 7).
    tick_bytes: u8,
    /// The event's length.
    len: u8,
    /// Its kind: `enter` (forms 1 and 2), or `exit` of the innermost
    /// named frame (form 3).
    kind: u8,
    /// What it adds to the named frames' depth: 1, or -1 as a `usize`
    /// wraps it (the step sign-extends).
    step: i8,
}

const SHORT_BY_TAG: [ShortForm; 256] = short_table();

/// A short form's length by its tag's form and tick class (its high
/// nibble), 4 bits each: `(SHORT_LEN_BY_HIGH_NIBBLE >> 4 * (tag >> 4)) & 0xF`.
const SHORT_LEN_BY_HIGH_NIBBLE: u64 = {
    let table = short_table();
    let mut nibbles = 0u64;
    let mut high = 0;
    while high < 16 {
        // Long forms (high 0..=3) are not short: their nibbles stay 0.
        if high >> 2 != FORM_LONG as usize {
            nibbles |= (table[high << 4].len as u64) << (4 * high);
        }
        high += 1;
    }
    nibbles
};

/// [`ShortForm::len`] of a short form's tag, worked out from the tag in a
/// few register operations rather than loaded from [`SHORT_BY_TAG`]: the
/// next event's position hangs on it, and the walk of an expansion goes
/// no faster than one tag load, this and one add an event.
#[inline(always)]
fn short_len(tag: u8) -> usize {
    ((SHORT_LEN_BY_HIGH_NIBBLE >> ((tag >> 2) & 0x3C)) & 0xF) as usize
}

/// The first step of the fast walks (`for_each_raw`, `write_events`,
/// `count_with_switches`) at the event at the front of `room`: its tag,
/// what the tag says of a short form, and its tick from the previous
/// event's `tick` (the delta's low bits are the tag's, its high bits
/// follow it, masked to the tick class's bytes). The caller checks the
/// tick against [`MAX_TICK`].
#[inline(always)]
fn short_step(room: &Room, tick: u64) -> (u8, &'static ShortForm, u64) {
    let tag = room[0];
    let short = &SHORT_BY_TAG[tag as usize];
    let high = u64::from_le_bytes(word_at(room, 1)) & short.high_mask;
    (
        tag,
        short,
        tick + (high << 4 | (tag & TAG_DELTA_LOW_MASK) as u64),
    )
}

const fn short_table() -> [ShortForm; 256] {
    let mut table = [ShortForm {
        high_mask: 0,
        id_mask: 0,
        tick_bytes: 0,
        len: 0,
        kind: 0,
        step: 0,
    }; 256];
    let mut tag = 0;
    while tag < 256 {
        let form = (tag >> TAG_FORM_SHIFT) as u8;
        let class = (tag >> TAG_CLASS_SHIFT) & 3;
        let tick_bytes = TICK_CLASS_BYTES[class];
        let id_bytes = match form {
            FORM_ENTER_1 => 1,
            FORM_ENTER_2 => 2,
            _ => 0,
        };
        table[tag] = ShortForm {
            high_mask: TICK_CLASS_MAX[class] >> 4,
            id_mask: SHORT_ID_MASK[form as usize],
            tick_bytes: tick_bytes as u8,
            len: (1 + tick_bytes + id_bytes) as u8,
            kind: if form == FORM_EXIT_TOP {
                KIND_EXIT
            } else {
                KIND_ENTER
            } as u8,
            step: if form == FORM_EXIT_TOP { -1 } else { 1 },
        };
        tag += 1;
    }
    table
}

/// The tick of the event before the one at the front of `event` (a
/// version-4 body from an event's first byte), given that event's own
/// decoded tick: ticks are deltas, so the event's bytes say how far back
/// the one before it was. With it, [`CompactEvents::resume`] can start at
/// a `switch` whose tick a reader kept, and no other word of the walk's
/// state. `None` if the bytes cannot hold such an event (too few for its
/// tick, or a delta larger than `tick`).
pub fn tick_before(event: &[u8], tick: u64) -> Option<u64> {
    let &tag = event.first()?;
    // The tick's bytes must be the body's, not the room's padding.
    event.get(..1 + tick_bytes((tag >> TAG_CLASS_SHIFT) as usize & 3))?;
    // A replay resumes at a switch for every stretch of a stack: read in
    // place where a worst case's bytes follow (a copy into a padded room
    // was a call to `memmove` each time).
    let delta = match event.first_chunk::<COMPACT_MAX_EVENT_SIZE>() {
        Some(room) => tick_delta(room),
        None => tick_delta(&padded(event).0),
    };
    tick.checked_sub(delta)
}

/// An upper bound on the events a walk of `events` (a version-4 chunk's
/// committed body) yields, found from their lengths alone: every event
/// whose bytes lie wholly in the body is counted, up to the first whose
/// length cannot be known (a long form's width code above 4). A walk
/// yields exactly these when the body holds no damage and no `lost`;
/// damage and a `lost` only end it sooner. Sizing an expansion by it
/// costs a few instructions an event, a small part of a decode: the next
/// event's position is the only value carried from one event to the next.
pub fn count_events(events: &[u8]) -> usize {
    let mut at = 0usize;
    let mut count = 0usize;
    // One compare a turn: an event starting at or before `last` has a
    // worst case's bytes in the body.
    let last = events.len().checked_sub(COMPACT_MAX_EVENT_SIZE);
    while last.is_some_and(|last| at <= last) {
        let Some(room) = events.get(at..).and_then(|rest| rest.first_chunk()) else {
            break;
        };
        let Some(len) = event_len(room) else {
            return count;
        };
        at += len;
        count += 1;
    }
    // The body's last bytes: an event is counted only if it ends in it.
    while let Some(rest) = events.get(at..).filter(|rest| !rest.is_empty()) {
        let mut room = [0u8; COMPACT_MAX_EVENT_SIZE];
        let avail = rest.len().min(COMPACT_MAX_EVENT_SIZE);
        room[..avail].copy_from_slice(&rest[..avail]);
        match event_len(&room) {
            Some(len) if len <= avail => {
                at += len;
                count += 1;
            }
            _ => break,
        }
    }
    count
}

/// The length of the event at the front of `room` (`None`: a long form
/// whose width code names no width): a short form's is its tag's, a long
/// form's adds its kind byte's and its payload's.
#[inline(always)]
fn event_len(room: &Room) -> Option<usize> {
    let tag = room[0];
    let head = LEN_BY_TAG[tag as usize] as usize;
    if tag >> TAG_FORM_SHIFT != FORM_LONG {
        return Some(head);
    }
    // The kind byte follows the tag and tick bytes (at most 8; the mask
    // keeps the index in the room, so it is not checked).
    match LONG_TAIL_BY_KIND_BYTE[room[head & 15] as usize] {
        0 => None,
        tail => Some(head + tail as usize),
    }
}

/// By tag: a short form's length, a long form's tag and tick bytes.
const LEN_BY_TAG: [u8; 256] = {
    let short = short_table();
    let mut table = [0u8; 256];
    let mut tag = 0;
    while tag < 256 {
        table[tag] = short[tag].len;
        tag += 1;
    }
    table
};

/// By a long form's kind byte: its own byte and its payload's (0 for a
/// width code that names no width).
const LONG_TAIL_BY_KIND_BYTE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 256 {
        let code = byte & 0x0F;
        if code < PAYLOAD_WIDTH_BYTES.len() {
            table[byte] = 1 + PAYLOAD_WIDTH_BYTES[code] as u8;
        }
        byte += 1;
    }
    table
};

/// The 4 bytes of `room` from `at` (at most 13).
#[inline(always)]
fn quad_at(room: &Room, at: usize) -> [u8; 4] {
    let mut out = [0u8; 4];
    out.copy_from_slice(&room[at..at + 4]);
    out
}

/// The 8 bytes of `room` from `at` (at most 9).
#[inline(always)]
fn word_at(room: &Room, at: usize) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&room[at..at + 8]);
    out
}

impl Iterator for CompactEvents<'_> {
    type Item = Result<Event, ChunkProblem>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let Some((kind, tick, payload)) = self.next_raw() else {
            return self.problem.take().map(Err);
        };
        // `next_raw` judged the payload; only the shape is left to build.
        let function = FunctionId(payload as u32);
        let stack = StackId(payload);
        let kind = match kind {
            KIND_ENTER => EventKind::Enter(function),
            KIND_EXIT => EventKind::Exit(function),
            KIND_SWITCH => EventKind::Switch(stack),
            KIND_THREAD_START => EventKind::ThreadStart,
            KIND_THREAD_EXIT => EventKind::ThreadExit,
            KIND_LOST => EventKind::Lost,
            KIND_WAKE => EventKind::Wake(stack),
            _ => EventKind::End(stack),
        };
        Some(Ok(Event { tick, kind }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.rest.len() + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::COMPACT_LOST_RESERVE;
    use proptest::prelude::*;

    fn enter(tick: u64, f: u32) -> Event {
        Event {
            tick,
            kind: EventKind::Enter(FunctionId(f)),
        }
    }

    fn exit(tick: u64, f: u32) -> Event {
        Event {
            tick,
            kind: EventKind::Exit(FunctionId(f)),
        }
    }

    fn at(tick: u64, kind: EventKind) -> Event {
        Event { tick, kind }
    }

    /// Encodes `events` after a snapshot at `base` naming `named`; the body
    /// and each event's size.
    fn encode(base: u64, named: &[u32], events: &[Event]) -> (Vec<u8>, Vec<usize>) {
        let mut body = vec![0u8; events.len() * COMPACT_MAX_EVENT_SIZE];
        let mut enc = ChunkEncoder::new(base, named);
        let mut len = 0;
        let mut sizes = Vec::new();
        for e in events {
            let n = enc.push(&mut body[len..], e).expect("room for every event");
            sizes.push(n);
            len += n;
        }
        body.truncate(len);
        (body, sizes)
    }

    fn decode(base: u64, named: &[u32], body: &[u8]) -> Vec<Result<Event, ChunkProblem>> {
        CompactEvents::from_parts(body, 7, 1000, base, named.to_vec()).collect()
    }

    /// Round-trips `events`, checks the decoded events and returns the sizes.
    fn round_trip(base: u64, named: &[u32], events: &[Event]) -> Vec<usize> {
        let (body, sizes) = encode(base, named, events);
        let got: Vec<Event> = decode(base, named, &body)
            .into_iter()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(got, events);
        sizes
    }

    #[test]
    fn tick_bytes_computes_the_table() {
        for (class, bytes) in TICK_CLASS_BYTES.iter().enumerate() {
            assert_eq!(tick_bytes(class), *bytes);
        }
    }

    #[test]
    fn the_worked_example_of_the_spec_has_these_bytes() {
        let events = [
            enter(100, 1),
            enter(150, 2),
            exit(170, 2),
            at(200, EventKind::Switch(StackId(1))),
        ];
        let (body, _) = encode(100, &[], &events);
        assert_eq!(
            body,
            [0x40, 0x01, 0x52, 0x03, 0x02, 0xD4, 0x01, 0x1E, 0x01, 0x31, 0x01]
        );
        round_trip(100, &[], &events);
    }

    #[test]
    fn tick_deltas_at_every_size_class_edge() {
        // An exit of a named frame is the tag and the delta's bytes alone.
        for (delta, size) in [
            (0, 1),
            (15, 1),
            (16, 2),
            (4095, 2),
            (4096, 3),
            ((1 << 20) - 1, 3),
            (1 << 20, 8),
            (MAX_TICK - 5, 8),
        ] {
            let sizes = round_trip(5, &[9], &[exit(5 + delta, 9)]);
            assert_eq!(sizes, [size], "delta {delta}");
        }
        // The largest tick, reached from 0 and from itself.
        round_trip(0, &[], &[enter(MAX_TICK, 1), exit(MAX_TICK, 1)]);
    }

    #[test]
    fn ticks_above_60_bits_lose_their_top_bits_as_in_version_3() {
        let (body, _) = encode(0, &[], &[enter(u64::MAX, 1)]);
        assert_eq!(decode(0, &[], &body), [Ok(enter(MAX_TICK, 1))]);
    }

    #[test]
    fn a_tick_that_goes_backwards_is_stored_as_the_previous_one() {
        let (body, sizes) = encode(100, &[], &[enter(200, 1), enter(150, 2), enter(40, 3)]);
        assert_eq!(sizes[1..], [2, 2], "delta 0");
        let got: Vec<_> = decode(100, &[], &body)
            .into_iter()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(got, [enter(200, 1), enter(200, 2), enter(200, 3)]);
        // Before the snapshot's tick: the snapshot's.
        let (body, _) = encode(100, &[], &[enter(99, 1)]);
        assert_eq!(decode(100, &[], &body), [Ok(enter(100, 1))]);
    }

    #[test]
    fn function_ids_at_every_width_edge() {
        for (f, size) in [
            (1, 2),
            (255, 2),
            (256, 3),
            (65535, 3),
            (65536, 6),
            (0x100_0000, 6),
            (u32::MAX, 6),
        ] {
            // Enter, exit by its name (nothing named), enter, exit of the top.
            let evs = [exit(0, f), enter(0, f), exit(0, f)];
            let sizes = round_trip(0, &[], &evs);
            let named_exit = match f {
                0..=255 => 3,
                256..=65535 => 4,
                _ => 6,
            };
            assert_eq!(sizes, [named_exit, size, 1], "function {f}");
        }
    }

    #[test]
    fn stack_ids_at_every_width_edge() {
        for (s, size) in [
            (0, 2),
            (1, 3),
            (255, 3),
            (256, 4),
            (65535, 4),
            (65536, 6),
            (u32::MAX as u64, 6),
            (1 << 32, 10),
            (u64::MAX, 10),
        ] {
            let mut evs = vec![at(1, EventKind::Switch(StackId(s)))];
            if s != 0 {
                evs.push(at(1, EventKind::Wake(StackId(s))));
                evs.push(at(1, EventKind::End(StackId(s))));
            }
            let sizes = round_trip(1, &[], &evs);
            assert!(sizes.iter().all(|&n| n == size), "stack {s}: {sizes:?}");
        }
    }

    #[test]
    fn the_head_table_gives_each_deltas_class_and_byte_count() {
        let mut deltas = vec![0, MAX_TICK];
        for bit in 0..60 {
            deltas.extend([(1u64 << bit) - 1, 1 << bit, (1 << bit) + 1]);
        }
        for delta in deltas {
            let class = tick_class(delta);
            let mut room = [0u8; COMPACT_MAX_EVENT_SIZE];
            let len = put_head(&mut room, FORM_EXIT_TOP as usize, delta);
            assert_eq!(len, 1 + TICK_CLASS_BYTES[class], "delta {delta}");
            assert_eq!(room[0] >> TAG_CLASS_SHIFT & 3, class as u8, "delta {delta}");
        }
    }

    #[test]
    fn every_kind_round_trips() {
        let evs = [
            at(10, EventKind::ThreadStart),
            enter(11, 3),
            at(12, EventKind::Wake(StackId(4))),
            at(13, EventKind::Switch(StackId(4))),
            enter(14, 5),
            exit(15, 5),
            exit(16, 2),
            at(17, EventKind::Switch(StackId::OWN)),
            at(18, EventKind::End(StackId(4))),
            exit(19, 3),
            at(20, EventKind::ThreadExit),
            at(21, EventKind::Lost),
        ];
        round_trip(10, &[1], &evs);
    }

    #[test]
    fn exits_name_their_function_unless_the_chunk_names_the_frame() {
        // The snapshot names 1 and 2; 2 exits by the top, 1 too; 7 was
        // never named in the chunk: named exit.
        let sizes = round_trip(0, &[1, 2], &[exit(0, 2), exit(0, 1), exit(0, 7)]);
        assert_eq!(sizes, [1, 1, 3]);
        // An exit that is not of the innermost named frame names its
        // function and forgets the named frames: the next exits name theirs.
        let sizes = round_trip(0, &[1], &[enter(0, 2), exit(0, 1), exit(0, 2)]);
        assert_eq!(sizes, [2, 3, 3]);
        // A switch forgets them too: the frames of the stack switched to
        // are in other chunks.
        let evs = [
            enter(0, 2),
            at(0, EventKind::Switch(StackId(3))),
            exit(0, 2),
            enter(0, 4),
            exit(0, 4),
        ];
        assert_eq!(round_trip(0, &[], &evs), [2, 3, 3, 2, 1]);
    }

    #[test]
    fn the_named_frames_are_the_snapshots_frames_of_the_current_stack() {
        let mut body = vec![0u8; 256];
        let n = crate::snapshot::encode_snapshot(&mut body, 256, 50, &[1, 2], StackId(9), &[3, 4]);
        let snap = crate::snapshot::decode_snapshot(&body[..n]).unwrap();
        assert_eq!(named_frames(&snap).map(|f| f.0).collect::<Vec<_>>(), [3, 4]);
        let n = crate::snapshot::encode_snapshot(&mut body, 256, 50, &[1, 2], StackId::OWN, &[]);
        let snap = crate::snapshot::decode_snapshot(&body[..n]).unwrap();
        assert_eq!(named_frames(&snap).map(|f| f.0).collect::<Vec<_>>(), [1, 2]);
        let mut enc = ChunkEncoder::from_snapshot(&snap);
        let mut out = [0u8; 64];
        let len = enc.push(&mut out, &exit(60, 2)).unwrap();
        let got: Vec<_> = CompactEvents::new(&out[..len], 0, 0, &snap).collect();
        assert_eq!(got, [Ok(exit(60, 2))]);
    }

    #[test]
    fn an_event_that_does_not_fit_writes_nothing() {
        let e = at(1 << 40, EventKind::Switch(StackId(u64::MAX)));
        let mut enc = EncoderState::new(0, 0);
        let mut room = [0xAAu8; COMPACT_MAX_EVENT_SIZE];
        for short in 0..COMPACT_MAX_EVENT_SIZE {
            assert_eq!(enc.event(&mut room[..short], &e, false), None);
            assert_eq!(room, [0xAA; COMPACT_MAX_EVENT_SIZE], "room {short}");
            assert_eq!(enc, EncoderState::new(0, 0));
        }
        assert_eq!(
            enc.event(&mut room, &e, false),
            Some(COMPACT_MAX_EVENT_SIZE)
        );
        // An event that exactly fits a short room is written in full,
        // with the same bytes as in a roomy one.
        let mut big = [0u8; 64];
        let mut small = [0u8; 3];
        let a = EncoderState::new(0, 0).enter(&mut big, 5, FunctionId(300));
        let b = EncoderState::new(0, 0).enter(&mut small, 5, FunctionId(300));
        assert_eq!((a, b), (Some(3), Some(3)));
        assert_eq!(big[..3], small);
        assert_eq!(
            EncoderState::new(0, 0).enter(&mut small[..2], 5, FunctionId(300)),
            None
        );
    }

    #[test]
    fn a_chunk_fills_to_its_last_byte_and_decodes_whole() {
        // A 64-byte body filled until an event does not fit: the events
        // pushed are exactly those that decode from the committed bytes.
        let events = thread_events(42, 100);
        let mut body = [0u8; 64];
        let mut enc = ChunkEncoder::new(0, &[]);
        let (mut len, mut pushed) = (0, 0);
        for e in &events {
            let before = enc.clone();
            match enc.push(&mut body[len..], e) {
                Some(n) => {
                    len += n;
                    pushed += 1;
                }
                None => {
                    assert_eq!(
                        enc.state(),
                        before.state(),
                        "a refused event changes nothing"
                    );
                    break;
                }
            }
        }
        assert!(pushed > 0 && pushed < events.len() && len <= 64);
        let got: Vec<Event> = decode(0, &[], &body[..len])
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got.len(), pushed);
        assert_eq!(got.last().map(|e| e.kind), Some(events[pushed - 1].kind));
    }

    #[test]
    fn a_lost_event_fits_the_reserve_and_ends_the_chunk() {
        let mut room = [0u8; COMPACT_LOST_RESERVE];
        let lost = at(MAX_TICK, EventKind::Lost);
        let n = EncoderState::new(0, 0).event(&mut room, &lost, false);
        assert_eq!(n, Some(COMPACT_LOST_RESERVE));
        let (mut body, _) = encode(0, &[], &[enter(1, 1), lost]);
        body.extend_from_slice(&[0, 0, 0]); // past the lost event: never read
        assert_eq!(decode(0, &[], &body), [Ok(enter(1, 1)), Ok(lost)]);
    }

    #[test]
    fn a_torn_tail_is_reported_at_the_start_of_the_cut_event() {
        let evs = [
            enter(3, 70000),
            at(1 << 30, EventKind::Switch(StackId(1 << 33))),
            enter(1 << 31, 2),
            exit(1 << 31, 2),
            at(1 << 32, EventKind::Wake(StackId(5))),
        ];
        let (body, sizes) = encode(0, &[], &evs);
        let starts: Vec<usize> = sizes
            .iter()
            .scan(0, |at, n| {
                *at += n;
                Some(*at - n)
            })
            .collect();
        for cut in 0..=body.len() {
            let got = decode(0, &[], &body[..cut]);
            let whole = starts
                .iter()
                .zip(&sizes)
                .filter(|(s, n)| *s + *n <= cut)
                .count();
            let ok: Vec<Event> = got.iter().filter_map(|r| r.clone().ok()).collect();
            assert_eq!(ok, evs[..whole], "cut {cut}");
            // What sizes an expansion counts the whole events only.
            assert_eq!(count_events(&body[..cut]), whole, "cut {cut}");
            if whole < evs.len() && cut > starts[whole] {
                let err = got.last().unwrap().clone().unwrap_err();
                assert_eq!(err.offset, 1000 + starts[whole] as u64, "cut {cut}");
                assert_eq!(err.index, 7);
                assert_eq!(
                    err.kind,
                    ChunkProblemKind::BadCompactEvent(CompactFault::Cut)
                );
            } else {
                assert_eq!(got.len(), whole, "cut {cut}: no error at an event boundary");
            }
        }
    }

    #[test]
    fn garbage_is_reported_at_its_offset_and_ends_the_chunk() {
        let fault = |body: &[u8], named: &[u32]| {
            let got = decode(0, named, body);
            let err = got.last().unwrap().clone().unwrap_err();
            assert_eq!(got.len() - 1, got.iter().filter(|r| r.is_ok()).count());
            (err.offset - 1000, err.kind)
        };
        let bad = |f| ChunkProblemKind::BadCompactEvent(f);
        // Zero bytes: a long form of kind 0.
        let (mut body, _) = encode(0, &[], &[enter(1, 1)]);
        body.extend_from_slice(&[0; 20]);
        assert_eq!(
            fault(&body, &[]),
            (2, bad(CompactFault::Event(BadEvent::UnknownKind(0))))
        );
        // An exit of the top frame when the chunk names none.
        assert_eq!(
            fault(&[0xC0], &[]),
            (0, bad(CompactFault::ExitWithoutNamedFrame))
        );
        assert_eq!(
            fault(&[0xC0, 0xC0], &[4]),
            (1, bad(CompactFault::ExitWithoutNamedFrame))
        );
        // Width code 5, kinds 9 and 0, id 0, payloads where none belongs.
        assert_eq!(
            fault(&[0x00, 0x35], &[]),
            (0, bad(CompactFault::BadWidth(5)))
        );
        assert_eq!(
            fault(&[0x00, 0x90], &[]),
            (0, bad(CompactFault::Event(BadEvent::UnknownKind(9))))
        );
        assert_eq!(
            fault(&[0x40, 0x00], &[]),
            (0, bad(CompactFault::Event(BadEvent::BadFunctionId(0))))
        );
        assert_eq!(
            fault(&[0x00, 0x21, 0x00], &[]),
            (0, bad(CompactFault::Event(BadEvent::BadFunctionId(0))))
        );
        assert_eq!(
            fault(&[0x00, 0x14, 0, 0, 0, 0, 1, 0, 0, 0], &[]),
            (
                0,
                bad(CompactFault::Event(BadEvent::BadFunctionId(1 << 32)))
            )
        );
        assert_eq!(
            fault(&[0x00, 0x41, 0x01], &[]),
            (0, bad(CompactFault::Event(BadEvent::NonZeroPayload)))
        );
        assert_eq!(
            fault(&[0x00, 0x70], &[]),
            (0, bad(CompactFault::Event(BadEvent::WakeOfOwnStack)))
        );
        assert_eq!(
            fault(&[0x00, 0x80], &[]),
            (0, bad(CompactFault::Event(BadEvent::EndOfOwnStack)))
        );
        // A delta that carries the tick past 60 bits.
        let (mut body, _) = encode(0, &[], &[enter(MAX_TICK, 1)]);
        body.extend_from_slice(&[0xC1]);
        assert_eq!(fault(&body, &[]), (9, bad(CompactFault::TickOverflow)));
    }

    /// A plausible thread: mostly enters and exits of the innermost frame,
    /// now and then a mismatched exit, a switch, a wake or an end; deltas
    /// of every size class; ids of every width.
    fn thread_events(seed: u64, n: usize) -> Vec<Event> {
        let mut rng = seed | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut tick = next() % (1 << 40);
        let mut frames: Vec<u32> = Vec::new();
        let mut events = Vec::new();
        for _ in 0..n {
            let r = next();
            let scale = [4, 12, 20, 36, 59][(r % 5) as usize];
            tick = (tick + (next() % (1 << scale))).min(MAX_TICK);
            let id = match (r >> 8) % 4 {
                0 => (next() % 255 + 1) as u32,
                1 => (next() % 65535 + 1) as u32,
                2 => (next() as u32).max(1),
                _ => u32::MAX,
            };
            let stack = next() >> (next() % 64);
            let kind = match (r >> 16) % 32 {
                0..=13 => {
                    frames.push(id);
                    EventKind::Enter(FunctionId(id))
                }
                14..=26 => EventKind::Exit(FunctionId(frames.pop().unwrap_or(id))),
                27 => EventKind::Exit(FunctionId(id)),
                28 => EventKind::Switch(StackId(stack)),
                29 => EventKind::Wake(StackId(stack.max(1))),
                30 => EventKind::End(StackId(stack.max(1))),
                _ => [EventKind::ThreadStart, EventKind::ThreadExit][(r >> 24) as usize % 2],
            };
            // Now and then a tick a little before the previous one.
            let tick = if r % 97 == 0 {
                tick.saturating_sub(3)
            } else {
                tick
            };
            events.push(Event { tick, kind });
        }
        events
    }

    #[test]
    fn writing_16_byte_events_outgrows_its_room_for_named_frames() {
        // Deeper than the room the walk first makes for named frames, then
        // every frame left by an exit that names none: each exit resolves.
        let depth = 1000u32;
        let mut events: Vec<Event> = (1..=depth).map(|f| enter(u64::from(f), f)).collect();
        events.extend(
            (1..=depth)
                .rev()
                .map(|f| exit(u64::from(2 * depth - f + 1), f)),
        );
        let (body, sizes) = encode(0, &[], &events);
        assert!(sizes[depth as usize..].iter().all(|&n| n == 1));
        let mut out = vec![[0u8; EVENT_SIZE]; events.len()];
        let mut walk = CompactEvents::from_parts(&body, 0, 0, 0, Vec::new());
        assert_eq!(walk.write_events(&mut out), events.len());
        assert_eq!(walk.problem(), None);
        for (e, got) in events.iter().zip(&out) {
            let (kind, payload) = e.kind.raw();
            assert_eq!(got[..8], (kind << 60 | e.tick).to_le_bytes());
            assert_eq!(got[8..], payload.to_le_bytes());
        }
    }

    /// The count and the switch points of a walk, as
    /// [`CompactEvents::count_with_switches`] gives them, as the one-event
    /// decoder finds them and as [`CompactEvents::fill_events_noting_switches`]
    /// notes them (into room for every event, and into room for three at
    /// a time, its points counted from the walk's start), with each walk's
    /// damage.
    fn counted_every_way(
        body: &[u8],
        tick: u64,
        named: &[u32],
    ) -> [(usize, Vec<SwitchPoint>, Option<ChunkProblem>); 4] {
        let mut walk = CompactEvents::from_parts(body, 3, 500, tick, named.to_vec());
        let mut points = Vec::new();
        let count = walk.count_with_switches(|p| points.push(p));
        let skimmed = (count, points, walk.problem().cloned());
        let mut filled = Vec::new();
        for room in [body.len() + 1, 3] {
            let mut walk = CompactEvents::from_parts(body, 3, 500, tick, named.to_vec());
            let mut out = vec![[0u8; EVENT_SIZE]; room];
            let (mut count, mut points) = (0, Vec::new());
            loop {
                let n = walk.fill_events_noting_switches(&mut out, |mut p| {
                    p.event += count;
                    points.push(p);
                });
                count += n;
                if n < room {
                    break;
                }
            }
            filled.push((count, points, walk.problem().cloned()));
        }
        let [all_at_once, three_at_a_time] = <[_; 2]>::try_from(filled).expect("two walks");
        let mut walk = CompactEvents::from_parts(body, 3, 500, tick, named.to_vec());
        let (mut count, mut points, mut prev_tick) = (0, Vec::new(), tick & MAX_TICK);
        loop {
            let offset = walk.offset();
            let Some((kind, tick, _)) = walk.next_raw() else {
                break;
            };
            if kind == KIND_SWITCH {
                points.push(SwitchPoint {
                    event: count,
                    offset,
                    prev_tick,
                });
            }
            prev_tick = tick;
            count += 1;
        }
        [
            skimmed,
            (count, points, walk.problem().cloned()),
            all_at_once,
            three_at_a_time,
        ]
    }

    /// `short_len`, worked out from a tag in registers, is the length
    /// the table gives every short form.
    #[test]
    fn a_short_form_s_length_is_its_table_entry() {
        for tag in 0x40..=0xFFu8 {
            assert_eq!(
                short_len(tag),
                SHORT_BY_TAG[tag as usize].len as usize,
                "{tag:#x}"
            );
        }
    }

    /// The tick before an event comes from the event's own bytes, all of
    /// its tick's, which the body must hold.
    #[test]
    fn the_tick_before_an_event_needs_its_tick_bytes() {
        // Tick class 3: seven bytes of the delta's high bits.
        let tag = (FORM_EXIT_TOP << TAG_FORM_SHIFT) | (3 << TAG_CLASS_SHIFT) | 5;
        let mut event = vec![tag, 1, 0, 0, 0, 0, 0, 0];
        assert_eq!(tick_before(&event, 1000), Some(1000 - (1 << 4 | 5)));
        event.pop();
        assert_eq!(tick_before(&event, 1000), None);
        assert_eq!(tick_before(&[], 1000), None);
        // A delta larger than the tick.
        assert_eq!(tick_before(&[5], 4), None);
    }

    /// A snapshot's frame of id 0 (damage) ends the chunk at the exit that
    /// would name it, as an exit of id 0 ends a 16-byte chunk; every walk
    /// and the count stop there.
    #[test]
    fn an_exit_of_a_named_frame_of_id_0_is_damage() {
        let exit_top = (FORM_EXIT_TOP << TAG_FORM_SHIFT) | 1;
        let body = [exit_top; 40];
        let mut walk = CompactEvents::from_parts(&body, 0, 100, 0, vec![0, 7]);
        assert_eq!(walk.next_raw(), Some((KIND_EXIT, 1, 7)));
        assert_eq!(walk.next_raw(), None);
        let problem = walk.problem().expect("damage");
        assert_eq!(problem.offset, 101);
        assert_eq!(
            problem.kind,
            ChunkProblemKind::BadCompactEvent(CompactFault::Event(BadEvent::BadFunctionId(0)))
        );
        let [skimmed, decoded, filled, by_three] = counted_every_way(&body, 0, &[0, 7]);
        assert_eq!(skimmed.0, 1);
        assert_eq!(filled, decoded);
        assert_eq!(by_three, decoded);
        assert_eq!(skimmed, decoded);
        let mut out = vec![[0u8; EVENT_SIZE]; 40];
        let mut walk = CompactEvents::from_parts(&body, 0, 100, 0, vec![0, 7]);
        assert_eq!(walk.write_events(&mut out), 1);
        assert_eq!(walk.problem(), Some(problem));
    }

    proptest! {
        #[test]
        fn random_threads_round_trip_with_clamped_ticks(
            seed in any::<u64>(),
            n in 0usize..400,
            base in 0u64..(1 << 41),
            named in proptest::collection::vec(1u32.., 0..5),
        ) {
            let events = thread_events(seed, n);
            let (body, sizes) = encode(base, &named, &events);
            prop_assert!(sizes.iter().all(|&s| (1..=COMPACT_MAX_EVENT_SIZE).contains(&s)));
            let got: Vec<Event> = decode(base, &named, &body)
                .into_iter()
                .collect::<Result<_, _>>()
                .unwrap();
            let mut prev = base;
            let clamped: Vec<Event> = events
                .iter()
                .map(|e| {
                    prev = prev.max(e.tick & MAX_TICK);
                    Event { tick: prev, kind: e.kind }
                })
                .collect();
            prop_assert_eq!(got, clamped);
        }

        #[test]
        fn the_raw_walks_agree_with_the_events(
            seed in any::<u64>(),
            n in 0usize..200,
            garbage in proptest::collection::vec(any::<u8>(), 0..20),
        ) {
            let events = thread_events(seed, n);
            let (mut body, _) = encode(7, &[], &events);
            body.extend_from_slice(&garbage);
            let as_raw = |e: &Event| {
                let (kind, payload) = e.kind.raw();
                (kind, e.tick, payload)
            };
            let all = decode(7, &[], &body);
            let expected: Vec<RawEvent> = all.iter().filter_map(|r| r.as_ref().ok()).map(as_raw).collect();
            let problem = all.iter().find_map(|r| r.clone().err());
            let mut walk = CompactEvents::from_parts(&body, 7, 1000, 7, Vec::new());
            let mut by_next = Vec::new();
            while let Some(e) = walk.next_raw() {
                by_next.push(e);
            }
            prop_assert_eq!(&by_next, &expected);
            prop_assert_eq!(walk.problem(), problem.as_ref());
            let mut walk = CompactEvents::from_parts(&body, 7, 1000, 7, Vec::new());
            let mut by_each = Vec::new();
            walk.for_each_raw(|e| by_each.push(e));
            prop_assert_eq!(&by_each, &expected);
            prop_assert_eq!(walk.problem(), problem.as_ref());
            // The count by lengths alone is exact on the events, and a
            // bound on what the garbage after them decodes to.
            let (clean, _) = encode(7, &[], &events);
            prop_assert_eq!(count_events(&clean), events.len());
            prop_assert!(count_events(&body) >= expected.len());
            let [skimmed, decoded, filled, by_three] = counted_every_way(&body, 7, &[]);
            prop_assert_eq!(skimmed.0, expected.len());
            prop_assert!(!skimmed.1.is_empty() || !events.iter().any(|e| matches!(e.kind, EventKind::Switch(_))));
            prop_assert_eq!(&filled, &decoded);
            prop_assert_eq!(&by_three, &decoded);
            prop_assert_eq!(skimmed, decoded);
            // Every event's bytes and tick give the tick before it.
            let mut walk = CompactEvents::from_parts(&body, 7, 1000, 7, Vec::new());
            let mut prev = 7;
            loop {
                let at = (walk.offset() - 1000) as usize;
                let Some((_, tick, _)) = walk.next_raw() else { break };
                prop_assert_eq!(tick_before(&body[at..], tick), Some(prev));
                prev = tick;
            }
        }

        #[test]
        fn the_raw_walks_agree_on_arbitrary_bytes(
            body in proptest::collection::vec(any::<u8>(), 0..300),
            named in proptest::collection::vec(0u32..4, 0..4),
            tick in prop_oneof![Just(0u64), Just(MAX_TICK - 40), any::<u64>()],
        ) {
            // The fast walk reads short forms through a table of tags:
            // on any bytes, it gives the one-event decoder's events and
            // stops at the same damage.
            let mut walk = CompactEvents::from_parts(&body, 3, 500, tick, named.clone());
            let mut by_next = Vec::new();
            while let Some(e) = walk.next_raw() {
                by_next.push(e);
            }
            let problem = walk.problem().cloned();
            let mut walk = CompactEvents::from_parts(&body, 3, 500, tick, named.clone());
            let mut by_each = Vec::new();
            walk.for_each_raw(|e| by_each.push(e));
            prop_assert_eq!(&by_each, &by_next);
            prop_assert_eq!(walk.problem(), problem.as_ref());
            // What sizes an expansion never counts fewer events than a
            // walk yields, whatever the bytes.
            prop_assert!(count_events(&body) >= by_each.len());
            // The count keeps a depth, not the frames: the same events,
            // switches and damage.
            let [skimmed, decoded, filled, by_three] = counted_every_way(&body, tick, &named);
            prop_assert_eq!(&filled, &decoded);
            prop_assert_eq!(&by_three, &decoded);
            prop_assert_eq!(skimmed, decoded);
        }

        #[test]
        fn writing_16_byte_events_agrees_with_the_walk(
            seed in any::<u64>(),
            n in 0usize..400,
            garbage in proptest::collection::vec(any::<u8>(), 0..40),
            arbitrary in any::<bool>(),
            named in proptest::collection::vec(0u32..4, 0..4),
            room in 0usize..450,
        ) {
            // The expansion's walk writes the events `for_each_raw` gives,
            // as 16-byte events, on encoded events followed by garbage or
            // on arbitrary bytes, stops at the same damage, and writes no
            // more than `out` holds (the walk still finds the damage).
            let body = if arbitrary {
                garbage.clone()
            } else {
                let (mut body, _) = encode(7, &named, &thread_events(seed, n));
                body.extend_from_slice(&garbage);
                body
            };
            let mut walk = CompactEvents::from_parts(&body, 3, 500, 7, named.clone());
            let mut expected = Vec::new();
            walk.for_each_raw(|(kind, tick, payload)| {
                let mut e = [0u8; EVENT_SIZE];
                e[..8].copy_from_slice(&(kind << 60 | tick).to_le_bytes());
                e[8..].copy_from_slice(&payload.to_le_bytes());
                expected.push(e);
            });
            let problem = walk.problem().cloned();
            let mut out = vec![[0xAAu8; EVENT_SIZE]; room];
            let mut walk = CompactEvents::from_parts(&body, 3, 500, 7, named);
            let written = walk.write_events(&mut out);
            prop_assert_eq!(written, expected.len().min(room));
            prop_assert_eq!(&out[..written], &expected[..written]);
            prop_assert!(out[written..].iter().all(|e| *e == [0xAA; EVENT_SIZE]));
            prop_assert_eq!(walk.problem(), problem.as_ref());
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_stop_at_the_first_fault(
            body in proptest::collection::vec(any::<u8>(), 0..64),
            named in proptest::collection::vec(1u32.., 0..3),
        ) {
            let got = decode(0, &named, &body);
            let faults = got.iter().filter(|r| r.is_err()).count();
            prop_assert!(faults <= 1);
            if faults == 1 {
                prop_assert!(got.last().unwrap().is_err());
            }
            // Whatever decoded re-encodes to the bytes it came from, or to
            // a narrower encoding of the same events.
            let ok: Vec<Event> = got.into_iter().filter_map(Result::ok).collect();
            let (again, _) = encode(0, &named, &ok);
            let reread: Vec<Event> = decode(0, &named, &again)
                .into_iter()
                .collect::<Result<_, _>>()
                .unwrap();
            prop_assert_eq!(reread, ok);
        }
    }
}
