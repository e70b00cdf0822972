//! Files in memory kept for the next recording into memory.
//!
//! A program that profiles each request ([`crate::Config::in_memory()`]
//! per request) would otherwise make, map, fault in, unmap and free a new
//! memory file per request: most of the kernel's share of a short
//! recording. Instead, once a recording into memory is over for both of
//! its users, its file and the range it is mapped into are kept here, and
//! the next recording into memory with the same layout takes them:
//!
//! - **the recorder**: no thread is bound to the recording any more (the
//!   moment a file on disk would be unmapped: "Retired files" in
//!   `shared.rs`), so no late write can reach the file;
//! - **the caller**: it gave its descriptor of the trace back
//!   ([`give_back_memory_trace`]), so nobody reads the old trace any more.
//!   A caller that keeps its descriptor (or never gives it back) keeps the
//!   trace: the file is then never reused, only unmapped when it leaves
//!   the list.
//!
//! The two may come in either order. The list is short ([`KEPT_AT_MOST`]);
//! a file pushed out of it is unmapped and closed (the caller's
//! descriptor, if any, keeps its trace). Each kept file holds a
//! descriptor, at 512 or above and closed on `exec` as the recorder's
//! others (`file.rs`): a program that lists its own descriptors after
//! profiling sees at most these few; one that closed them all (a daemon)
//! makes the file unusable, which is checked (device and inode) before the
//! file is reused or its descriptor closed. A process forked from this one
//! has copies of the parent's shared mappings: it never reuses a file its
//! parent kept (each entry remembers its process). The list is only ever
//! taken with `try_lock`: a fork while another thread held it leaves the
//! child without reuse, never stuck.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

/// Files kept at most: a profile per request alternates between two (the
/// thread that finished a recording lets go of it at its first event in
/// the next one, so the one before is the one given back).
const KEPT_AT_MOST: usize = 2;
/// Descriptors given back before their file reached the list, remembered
/// at most (a caller that gives back sooner than the recorder is done).
const RETURNED_AT_MOST: usize = 8;

/// How a kept file is laid out: a new recording reuses it only if it
/// would lay out its own file the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Slots on the file and mapped (a file that grew is not kept).
    pub ready: u64,
    pub chunk_size: usize,
    pub meta_capacity: usize,
    pub chunks_offset: usize,
    pub chunk_count: u64,
    pub reserved: usize,
}

/// A file in memory and the range it is mapped into, with what its last
/// recording wrote (what the next one clears).
pub(crate) struct KeptFile {
    pub base: *mut u8,
    pub layout: Layout,
    pub file: File,
    /// Bytes of names the last recording wrote.
    pub meta_len: usize,
    /// Slots the last recording claimed.
    pub claimed: u64,
}

// SAFETY: the range is owned by the entry (no thread uses it: see the
// module doc), and moved with it.
unsafe impl Send for KeptFile {}

impl KeptFile {
    /// The file's identity (device, inode), which the caller's descriptor shares.
    fn identity(&self) -> Option<(u64, u64)> {
        self.file.metadata().ok().map(|m| (m.dev(), m.ino()))
    }

    /// Gives the range and the file back to the system. The descriptor is
    /// closed only if it is still the file's (`identity`): a program that
    /// closed every descriptor (a daemon) may have reused its number.
    fn release(self, identity: Option<(u64, u64)>) {
        // SAFETY: the range is the entry's (module doc), reserved at
        // `layout.reserved` bytes from `base`.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.layout.reserved) };
        if identity.is_none() || self.identity() != identity {
            std::mem::forget(self.file);
        }
    }
}

struct Entry {
    file: KeptFile,
    identity: Option<(u64, u64)>,
    /// The process that kept it (a forked child must not reuse it).
    pid: u32,
    /// The caller gave its descriptor back: the file may be reused.
    returned: bool,
}

struct Kept {
    entries: Vec<Entry>,
    /// Identities given back before their file was kept.
    returned: Vec<(u64, u64)>,
}

static KEPT: Mutex<Kept> = Mutex::new(Kept {
    entries: Vec::new(),
    returned: Vec::new(),
});

/// Keeps `file`, whose recording no thread is bound to any more, for a
/// later recording; or releases it if the list cannot be had.
pub(crate) fn keep(file: KeptFile) {
    let identity = file.identity();
    let Ok(mut kept) = KEPT.try_lock() else {
        file.release(identity);
        return;
    };
    let returned = match identity.and_then(|id| kept.returned.iter().position(|&r| r == id)) {
        Some(at) => {
            kept.returned.swap_remove(at);
            true
        }
        None => false,
    };
    kept.entries.push(Entry {
        file,
        identity,
        pid: std::process::id(),
        returned,
    });
    if kept.entries.len() > KEPT_AT_MOST {
        // The oldest: its caller is the least likely to give it back now.
        let oldest = kept.entries.remove(0);
        oldest.file.release(oldest.identity);
    }
}

/// A kept file laid out as `layout`, given back by its caller and kept by
/// this process, taken for a new recording.
pub(crate) fn take(layout: Layout) -> Option<KeptFile> {
    let mut kept = KEPT.try_lock().ok()?;
    let pid = std::process::id();
    let at = kept
        .entries
        .iter()
        .position(|e| e.returned && e.pid == pid && e.file.layout == layout)?;
    let entry = kept.entries.remove(at);
    if entry.identity.is_none() || entry.file.identity() != entry.identity {
        // Its descriptor was closed by the program (and maybe reused).
        entry.file.release(entry.identity);
        return None;
    }
    Some(entry.file)
}

/// The caller of a recording into memory is done with its trace: `trace`,
/// the descriptor [`crate::Recording::memory_trace`] gave, is closed, and
/// the memory the trace took may serve the next recording into memory
/// (a profile per request then makes no new memory file per request).
/// Closing the descriptor instead is fine too: the trace's memory is then
/// freed, not reused.
pub fn give_back_memory_trace(trace: File) {
    let identity = trace.metadata().ok().map(|m| (m.dev(), m.ino()));
    drop(trace);
    let (Some(identity), Ok(mut kept)) = (identity, KEPT.try_lock()) else {
        return;
    };
    if let Some(entry) = kept
        .entries
        .iter_mut()
        .find(|e| e.identity == Some(identity))
    {
        entry.returned = true;
        return;
    }
    kept.returned.push(identity);
    if kept.returned.len() > RETURNED_AT_MOST {
        kept.returned.remove(0);
    }
}
