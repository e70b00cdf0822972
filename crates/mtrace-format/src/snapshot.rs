//! The snapshot record that starts every chunk body: the frames open on
//! the thread when it claimed the chunk, so the chunk decodes alone (a
//! chunk of 16-byte events in [`crate::chunk`], of compact ones in
//! [`crate::compact`], whose named frames start from it).
//!
//! ```text
//! snapshot: "SNAP" u32, own depth u32, current stack u64, stack depth u32, flags u32, tick u64,
//!           own frames (u32 each), then the current stack's frames, padded to 16 bytes
//! ```

use crate::event::{FunctionId, StackId};
use crate::layout::*;

/// The frames open on a thread when its chunk was claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRef<'a> {
    /// The tick at which the chunk was claimed.
    pub tick: u64,
    /// The stack the thread was running (`StackId::OWN` for its own stack).
    pub current_stack: StackId,
    /// `SNAP_*` flags: whether either frame list was cut.
    pub flags: u32,
    own: &'a [u8],
    stack: &'a [u8],
}

impl<'a> SnapshotRef<'a> {
    /// Frames open on the thread's own stack, outermost first (innermost
    /// frames are kept when the list had to be cut).
    pub fn own_frames(&self) -> impl ExactSizeIterator<Item = FunctionId> + 'a {
        ids(self.own)
    }

    /// Frames open on the current logical stack, outermost first (empty when
    /// the thread runs its own stack).
    pub fn stack_frames(&self) -> impl ExactSizeIterator<Item = FunctionId> + 'a {
        ids(self.stack)
    }

    /// Bytes the snapshot occupies in the body.
    pub fn encoded_len(&self) -> usize {
        snapshot_size(self.own.len() / 4, self.stack.len() / 4)
    }
}

fn ids(bytes: &[u8]) -> impl ExactSizeIterator<Item = FunctionId> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| FunctionId(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
}

/// Writes a snapshot at the start of `body` and returns how many bytes it
/// took. Frame lists that do not fit in `max_bytes` keep their innermost
/// frames and are flagged as cut. `body` must hold at least `max_bytes`
/// (itself at least [`SNAPSHOT_FIXED`]).
pub fn encode_snapshot(
    body: &mut [u8],
    max_bytes: usize,
    tick: u64,
    own: &[u32],
    current_stack: StackId,
    stack_frames: &[u32],
) -> usize {
    let room = (max_bytes.saturating_sub(SNAPSHOT_FIXED)) / 4;
    let mut flags = 0;
    let stack_keep = stack_frames.len().min(room);
    if stack_keep < stack_frames.len() {
        flags |= SNAP_STACK_TRUNCATED;
    }
    let own_keep = own.len().min(room - stack_keep);
    if own_keep < own.len() {
        flags |= SNAP_OWN_TRUNCATED;
    }
    let own = &own[own.len() - own_keep..];
    let stack_frames = &stack_frames[stack_frames.len() - stack_keep..];
    let size = snapshot_size(own.len(), stack_frames.len());
    let out = &mut body[..size];
    out.fill(0);
    out[0..4].copy_from_slice(&SNAPSHOT_MAGIC.to_le_bytes());
    out[4..8].copy_from_slice(&(own.len() as u32).to_le_bytes());
    out[8..16].copy_from_slice(&current_stack.0.to_le_bytes());
    out[16..20].copy_from_slice(&(stack_frames.len() as u32).to_le_bytes());
    out[20..24].copy_from_slice(&flags.to_le_bytes());
    out[24..32].copy_from_slice(&tick.to_le_bytes());
    let mut at = SNAPSHOT_FIXED;
    for id in own.iter().chain(stack_frames) {
        out[at..at + 4].copy_from_slice(&id.to_le_bytes());
        at += 4;
    }
    size
}

pub(crate) fn decode_snapshot(body: &[u8]) -> Result<SnapshotRef<'_>, &'static str> {
    if body.len() < SNAPSHOT_FIXED {
        return Err("shorter than a snapshot");
    }
    if read_u32(body, 0) != Some(SNAPSHOT_MAGIC) {
        return Err("no SNAP marker");
    }
    let own_depth = read_u32(body, 4).unwrap_or(u32::MAX) as usize;
    let stack_depth = read_u32(body, 16).unwrap_or(u32::MAX) as usize;
    let own_end = own_depth
        .checked_mul(4)
        .and_then(|n| n.checked_add(SNAPSHOT_FIXED))
        .ok_or("frame count overflows")?;
    let stack_end = stack_depth
        .checked_mul(4)
        .and_then(|n| n.checked_add(own_end))
        .ok_or("frame count overflows")?;
    if stack_end > body.len() {
        return Err("frame list runs past the committed body");
    }
    Ok(SnapshotRef {
        tick: read_u64(body, 24).unwrap_or(0) & crate::event::MAX_TICK,
        current_stack: StackId(read_u64(body, 8).unwrap_or(0)),
        flags: read_u32(body, 20).unwrap_or(0),
        own: &body[SNAPSHOT_FIXED..own_end],
        stack: &body[own_end..stack_end],
    })
}
