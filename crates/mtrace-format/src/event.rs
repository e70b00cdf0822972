//! Events and their 16-byte encoding.
//!
//! ```text
//! word 0 (u64 LE): kind << 60 | tick (60 bits)
//! word 1 (u64 LE): payload: function id (enter/exit), stack id (switch), 0 otherwise
//! ```
//! A fixed size keeps the recorder's hot path to one clock read and two stores,
//! and lets the reader decode any chunk at any offset without a scan.

use crate::layout::EVENT_SIZE;

/// Identifies a function (or scope) registered in the metadata region. Ids start at 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FunctionId(pub u32);

/// Identifies a logical stack. `StackId::OWN` is the current thread's own stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StackId(pub u64);

impl StackId {
    /// The thread's own stack: a `switch` to it returns the thread to where it started.
    pub const OWN: StackId = StackId(0);
}

/// Identifies a recorded thread (the recorder numbers threads from 1 in order of their first event).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ThreadId(pub u64);

/// Largest tick an event can carry.
pub const MAX_TICK: u64 = (1 << 60) - 1;

/// Kind nibble of an `enter` event.
pub const KIND_ENTER: u64 = 1;
/// Kind nibble of an `exit` event.
pub const KIND_EXIT: u64 = 2;
/// Kind nibble of a `switch` event.
pub const KIND_SWITCH: u64 = 3;
/// Kind nibble of a thread-start event.
pub const KIND_THREAD_START: u64 = 4;
/// Kind nibble of a thread-exit event.
pub const KIND_THREAD_EXIT: u64 = 5;
/// Kind nibble of a `lost` event (format version 2).
pub const KIND_LOST: u64 = 6;
/// Kind nibble of a `wake` event (format version 2).
pub const KIND_WAKE: u64 = 7;
/// Kind nibble of an `end` event (format version 3).
pub const KIND_END: u64 = 8;

/// Splits 16 event bytes into (kind, tick, payload) without judging them.
/// For hot loops that branch on the kind themselves; [`raw_is_valid`]
/// tells whether [`Event::decode`] would accept the same bytes.
#[inline(always)]
pub fn raw_parts(bytes: &[u8; EVENT_SIZE]) -> (u64, u64, u64) {
    let (w0, w1) = bytes.split_at(8);
    let w0 = u64::from_le_bytes(w0.try_into().unwrap_or([0; 8]));
    let w1 = u64::from_le_bytes(w1.try_into().unwrap_or([0; 8]));
    (w0 >> 60, w0 & MAX_TICK, w1)
}

/// Whether [`Event::decode`] accepts an event with this kind and payload.
#[inline(always)]
pub fn raw_is_valid(kind: u64, payload: u64) -> bool {
    match kind {
        KIND_ENTER | KIND_EXIT => payload != 0 && payload <= u32::MAX as u64,
        KIND_SWITCH => true,
        KIND_WAKE | KIND_END => payload != 0,
        KIND_THREAD_START | KIND_THREAD_EXIT | KIND_LOST => payload == 0,
        _ => false,
    }
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A frame of this function was pushed on the thread's current stack.
    Enter(FunctionId),
    /// A frame of this function was popped from the thread's current stack.
    Exit(FunctionId),
    /// The thread now runs this logical stack (`StackId::OWN`: its own stack again).
    Switch(StackId),
    /// The thread recorded its first event (names live in the metadata region).
    ThreadStart,
    /// The thread ended.
    ThreadExit,
    /// The thread could not store its events from this tick on (its file
    /// was full): its stacks end here, unless a later chunk of the thread
    /// restarts from its snapshot. Ends its chunk.
    Lost,
    /// The task on this logical stack (never `StackId::OWN`) was woken: it
    /// is ready to run again. Written by whichever thread woke it.
    Wake(StackId),
    /// The logical stack (never `StackId::OWN`) ended: its owner dropped
    /// it, and no thread will switch onto it again. Written by the thread
    /// that dropped it, while no thread runs it.
    End(StackId),
}

/// One decoded event: a tick in the trace's clock and what happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// Timestamp in clock ticks (see [`crate::ClockInfo`]).
    pub tick: u64,
    /// What happened.
    pub kind: EventKind,
}

/// Why 16 bytes are not an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadEvent {
    /// The kind nibble is not one this version knows (0 means never written).
    UnknownKind(u8),
    /// An enter/exit payload does not fit a function id, or names id 0.
    BadFunctionId(u64),
    /// A payload that must be zero is not.
    NonZeroPayload,
    /// A `wake` names stack 0, a thread's own stack, which is never woken.
    WakeOfOwnStack,
    /// An `end` names stack 0: a thread's own stack ends with its thread.
    EndOfOwnStack,
}

impl EventKind {
    /// The kind number and payload that stand for it on disk (both
    /// encodings): what [`raw_parts`] reads back.
    #[inline(always)]
    pub fn raw(&self) -> (u64, u64) {
        match *self {
            EventKind::Enter(f) => (KIND_ENTER, f.0 as u64),
            EventKind::Exit(f) => (KIND_EXIT, f.0 as u64),
            EventKind::Switch(s) => (KIND_SWITCH, s.0),
            EventKind::ThreadStart => (KIND_THREAD_START, 0),
            EventKind::ThreadExit => (KIND_THREAD_EXIT, 0),
            EventKind::Lost => (KIND_LOST, 0),
            EventKind::Wake(s) => (KIND_WAKE, s.0),
            EventKind::End(s) => (KIND_END, s.0),
        }
    }
}

impl Event {
    /// Encodes the event into its 16 on-disk bytes. Ticks above [`MAX_TICK`] are truncated.
    #[inline(always)]
    pub fn encode(&self) -> [u8; EVENT_SIZE] {
        let (kind, payload) = self.kind.raw();
        encode_raw(kind, self.tick, payload)
    }

    /// Decodes 16 bytes.
    #[inline]
    pub fn decode(bytes: &[u8; EVENT_SIZE]) -> Result<Event, BadEvent> {
        let mut w0 = [0u8; 8];
        let mut w1 = [0u8; 8];
        w0.copy_from_slice(&bytes[..8]);
        w1.copy_from_slice(&bytes[8..]);
        let w0 = u64::from_le_bytes(w0);
        let payload = u64::from_le_bytes(w1);
        let tick = w0 & MAX_TICK;
        let function = || match u32::try_from(payload) {
            Ok(id) if id != 0 => Ok(FunctionId(id)),
            _ => Err(BadEvent::BadFunctionId(payload)),
        };
        let no_payload = |kind| {
            if payload == 0 {
                Ok(kind)
            } else {
                Err(BadEvent::NonZeroPayload)
            }
        };
        let kind = match w0 >> 60 {
            KIND_ENTER => EventKind::Enter(function()?),
            KIND_EXIT => EventKind::Exit(function()?),
            KIND_SWITCH => EventKind::Switch(StackId(payload)),
            KIND_THREAD_START => no_payload(EventKind::ThreadStart)?,
            KIND_THREAD_EXIT => no_payload(EventKind::ThreadExit)?,
            KIND_LOST => no_payload(EventKind::Lost)?,
            KIND_WAKE if payload != 0 => EventKind::Wake(StackId(payload)),
            KIND_WAKE => return Err(BadEvent::WakeOfOwnStack),
            KIND_END if payload != 0 => EventKind::End(StackId(payload)),
            KIND_END => return Err(BadEvent::EndOfOwnStack),
            other => return Err(BadEvent::UnknownKind(other as u8)),
        };
        Ok(Event { tick, kind })
    }
}

/// The recorder's mark of a thread that lost its events from `tick` on.
#[inline]
pub fn encode_lost(tick: u64) -> [u8; EVENT_SIZE] {
    encode_raw(KIND_LOST, tick, 0)
}

/// The recorder's hot path: encode without building an [`Event`].
#[inline(always)]
pub fn encode_enter(tick: u64, function: FunctionId) -> [u8; EVENT_SIZE] {
    encode_raw(KIND_ENTER, tick, function.0 as u64)
}

/// The recorder's hot path: encode without building an [`Event`].
#[inline(always)]
pub fn encode_exit(tick: u64, function: FunctionId) -> [u8; EVENT_SIZE] {
    encode_raw(KIND_EXIT, tick, function.0 as u64)
}

/// 16 event bytes from (kind, tick, payload): the inverse of
/// [`raw_parts`], without judging them.
#[inline(always)]
pub fn encode_raw(kind: u64, tick: u64, payload: u64) -> [u8; EVENT_SIZE] {
    let w0 = (kind << 60) | (tick & MAX_TICK);
    let mut out = [0u8; EVENT_SIZE];
    out[..8].copy_from_slice(&w0.to_le_bytes());
    out[8..].copy_from_slice(&payload.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind_strategy() -> impl Strategy<Value = EventKind> {
        prop_oneof![
            (1u32..).prop_map(|f| EventKind::Enter(FunctionId(f))),
            (1u32..).prop_map(|f| EventKind::Exit(FunctionId(f))),
            any::<u64>().prop_map(|s| EventKind::Switch(StackId(s))),
            Just(EventKind::ThreadStart),
            Just(EventKind::ThreadExit),
            Just(EventKind::Lost),
            (1u64..).prop_map(|s| EventKind::Wake(StackId(s))),
            (1u64..).prop_map(|s| EventKind::End(StackId(s))),
        ]
    }

    proptest! {
        #[test]
        fn events_round_trip(tick in 0..=MAX_TICK, kind in kind_strategy()) {
            let e = Event { tick, kind };
            prop_assert_eq!(Event::decode(&e.encode()), Ok(e));
        }

        #[test]
        fn raw_validity_agrees_with_decode(bytes in any::<[u8; 16]>()) {
            let (kind, tick, payload) = raw_parts(&bytes);
            let decoded = Event::decode(&bytes);
            prop_assert_eq!(raw_is_valid(kind, payload), decoded.is_ok());
            if let Ok(e) = decoded {
                prop_assert_eq!(e.tick, tick);
            }
        }
    }

    #[test]
    fn zero_bytes_are_not_an_event() {
        assert_eq!(Event::decode(&[0; 16]), Err(BadEvent::UnknownKind(0)));
    }

    #[test]
    fn hot_path_encoders_match() {
        let f = FunctionId(42);
        assert_eq!(
            encode_enter(99, f),
            Event {
                tick: 99,
                kind: EventKind::Enter(f)
            }
            .encode()
        );
        assert_eq!(
            encode_exit(99, f),
            Event {
                tick: 99,
                kind: EventKind::Exit(f)
            }
            .encode()
        );
    }
}
