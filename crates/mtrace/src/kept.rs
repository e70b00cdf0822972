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
//! - **the caller**: it dropped every view of the trace ([`MemoryTrace`],
//!   which reads the file's mapping in place) and gave back any descriptor
//!   of it it asked for ([`give_back_memory_trace`]), so nobody reads the
//!   old trace any more. A caller that keeps a view or a descriptor keeps
//!   the trace: the file is then never reused.
//!
//! The two may come in either order. The list is short ([`KEPT_AT_MOST`]);
//! a file pushed out of it is unmapped and closed once its views are
//! dropped (a descriptor the caller holds keeps its trace). Each kept file holds a
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
use std::mem::ManuallyDrop;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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

/// A file in memory and the address range it is mapped into, shared by
/// whoever may still use them: the recording that writes it, the list of
/// kept files, and the caller's views of its trace ([`MemoryTrace`]). The
/// last of them to let go unmaps the range and closes the file.
pub(crate) struct MemoryFile {
    /// Start of the reserved range; the file is mapped from here.
    pub base: *mut u8,
    /// Length of the reserved range.
    pub reserved: usize,
    /// The file's length: what a view of it reads. Set as it grows.
    pub len: AtomicU64,
    /// Closed at the end only if it is still the file's ([`MemoryFile::identity`]).
    pub file: ManuallyDrop<File>,
    /// The file's device and inode when it was made.
    identity: Option<(u64, u64)>,
    /// Descriptors of it handed out ([`MemoryFile::descriptor`]): it is
    /// reused only once as many are given back ([`give_back_memory_trace`]).
    descriptors_out: AtomicUsize,
}

// SAFETY: the range is the file's own (reserved for it, unmapped only when
// the last owner drops it); writes into it follow the recorder's rules
// (atomics, and chunks one thread owns), and readers read a finished trace.
unsafe impl Send for MemoryFile {}
// SAFETY: see above.
unsafe impl Sync for MemoryFile {}

impl MemoryFile {
    /// The file `file`, `len` bytes long, mapped at the start of the range
    /// `(base, reserved)`, which it owns from now on.
    pub fn new(file: File, (base, reserved): (*mut u8, usize), len: u64) -> MemoryFile {
        let identity = file.metadata().ok().map(|m| (m.dev(), m.ino()));
        MemoryFile {
            base,
            reserved,
            len: AtomicU64::new(len),
            file: ManuallyDrop::new(file),
            identity,
            descriptors_out: AtomicUsize::new(0),
        }
    }

    /// A descriptor of its own of the file (at 512 or above, closed on
    /// `exec`), after which the file is reused only once it is given back.
    pub fn descriptor(&self) -> std::io::Result<File> {
        let descriptor = crate::fds::clone_out_of_the_way(&self.file)?;
        self.descriptors_out.fetch_add(1, Ordering::AcqRel);
        Ok(descriptor)
    }

    /// The file's identity (device, inode) now, which the caller's
    /// descriptors share; None if its descriptor no longer reads it.
    fn identity(&self) -> Option<(u64, u64)> {
        self.file.metadata().ok().map(|m| (m.dev(), m.ino()))
    }

    /// Whether its descriptor still reads the file: a program that closed
    /// every descriptor (a daemon) may have reused its number.
    fn still_ours(&self) -> bool {
        self.identity.is_some() && self.identity() == self.identity
    }
}

impl Drop for MemoryFile {
    fn drop(&mut self) {
        // SAFETY: the range is this file's, reserved at `reserved` bytes
        // from `base`, and nobody uses it any more (this was its last owner).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.reserved) };
        if self.still_ours() {
            // SAFETY: dropped once, here, and never used again.
            unsafe { ManuallyDrop::drop(&mut self.file) };
        }
    }
}

/// A finished recording into memory's trace, read in place
/// ([`crate::Recording::memory_view`]): its bytes are the trace file's,
/// without a descriptor, a second mapping or a copy. While a view lives,
/// its memory serves no other recording; once every view of it is
/// dropped (and any descriptor [`crate::Recording::memory_trace`] gave is
/// given back), it may serve the next recording into memory.
#[derive(Clone)]
pub struct MemoryTrace {
    memory: Arc<MemoryFile>,
}

impl MemoryTrace {
    pub(crate) fn new(memory: Arc<MemoryFile>) -> MemoryTrace {
        MemoryTrace { memory }
    }

    /// The trace file's bytes, read as any trace file (`mtanalyze`'s
    /// loader, `mtrace_format`). Read them once the recording is finished:
    /// before, they are still being written.
    pub fn bytes(&self) -> &[u8] {
        let len = usize::try_from(self.memory.len.load(Ordering::Acquire))
            .unwrap_or(usize::MAX)
            .min(self.memory.reserved);
        // SAFETY: the file is mapped from `base` over its whole length
        // (`len` is set after each growth is mapped), and the range stays
        // mapped while this view holds the file. A thread that passed the
        // "recording?" check just before the finish may still add an event
        // to its chunk, as it may in a mapping of the file's descriptor.
        unsafe { std::slice::from_raw_parts(self.memory.base, len) }
    }

    /// A descriptor of the trace file, closed on `exec` (read it as
    /// `/proc/self/fd/N`), for readers that need a path. Like
    /// [`crate::Recording::memory_trace`]'s, it keeps the trace (also
    /// after the view is dropped) until given back with
    /// [`give_back_memory_trace`].
    pub fn descriptor(&self) -> std::io::Result<File> {
        self.memory.descriptor()
    }
}

impl AsRef<[u8]> for MemoryTrace {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::fmt::Debug for MemoryTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTrace")
            .field("len", &self.memory.len.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A file in memory that no recording writes any more, with what its last
/// recording wrote (what the next one clears).
pub(crate) struct KeptFile {
    pub memory: Arc<MemoryFile>,
    pub layout: Layout,
    /// Bytes of names the last recording wrote.
    pub meta_len: usize,
    /// Slots the last recording claimed.
    pub claimed: u64,
}

struct Entry {
    file: KeptFile,
    /// The process that kept it (a forked child must not reuse it).
    pid: u32,
    /// Descriptors of it given back ([`give_back_memory_trace`]).
    given_back: usize,
}

impl Entry {
    /// Whether a new recording may take it: kept by this process, every
    /// descriptor handed out given back, and no view alive (the list's is
    /// its only owner).
    fn free(&self, pid: u32) -> bool {
        let memory = &self.file.memory;
        self.pid == pid
            && self.given_back >= memory.descriptors_out.load(Ordering::Acquire)
            && Arc::strong_count(memory) == 1
    }
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
/// later recording; or lets go of it if the list cannot be had.
pub(crate) fn keep(file: KeptFile) {
    let Ok(mut kept) = KEPT.try_lock() else {
        return;
    };
    let before = kept.returned.len();
    kept.returned.retain(|&r| Some(r) != file.memory.identity);
    let given_back = before - kept.returned.len();
    kept.entries.push(Entry {
        file,
        pid: crate::process::pid(),
        given_back,
    });
    if kept.entries.len() > KEPT_AT_MOST {
        // The oldest: its caller is the least likely to give it back now.
        // Its memory goes when its views (if any) are dropped too.
        kept.entries.remove(0);
    }
}

/// A kept file laid out as `layout`, free ([`Entry::free`]), taken for a
/// new recording.
pub(crate) fn take(layout: Layout) -> Option<KeptFile> {
    let mut kept = KEPT.try_lock().ok()?;
    let pid = crate::process::pid();
    let at = kept
        .entries
        .iter()
        .position(|e| e.file.layout == layout && e.free(pid))?;
    let entry = kept.entries.remove(at);
    // Every descriptor of its last recording was given back: the new one
    // counts its own.
    entry
        .file
        .memory
        .descriptors_out
        .store(0, Ordering::Release);
    // A file whose descriptor was closed by the program (and maybe
    // reused) is let go of.
    entry.file.memory.still_ours().then_some(entry.file)
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
        .find(|e| e.file.memory.identity == Some(identity))
    {
        entry.given_back += 1;
        return;
    }
    kept.returned.push(identity);
    if kept.returned.len() > RETURNED_AT_MOST {
        kept.returned.remove(0);
    }
}
