//! The trace file while it is being written: created at its full size,
//! mapped once, and written in place.
//!
//! ```text
//! 0        HEADER_SIZE           chunks_offset (page aligned)
//! | header | metadata region ... | chunk 0 | chunk 1 | ... | chunk n-1 |
//! ```
//!
//! The header's counters (`next_seq`, the drop counters, `meta_len`) and
//! every chunk's state word are used as atomics in place: their offsets are
//! multiples of 8 and the map is page aligned.
//!
//! **The address range is never unmapped.** A thread that passed the
//! "recording?" check just before [`crate::Recording::finish`] may still
//! write one event afterwards, and a thread keeps a pointer to its chunk's
//! state word until its next event or its exit, when it releases the chunk.
//! With the range leaked, those writes land harmlessly instead of faulting.
//!
//! **But the file is let go of at finish** ([`TraceMap::detach`]): the range
//! is remapped onto anonymous memory, so the late writes reach memory nobody
//! reads, never the file. Otherwise a later recording to the same path, which
//! truncates and maps the same file again, would get them: a thread's release
//! of its old chunk would stamp the old chunk's state word (committed length,
//! sequence number) on a slot of the new file, whose header and snapshot are
//! zero (a damaged chunk of thread 0, its length counted as events, and the
//! slot skipped by the new recording's claims). Each recording keeps its
//! address range (not its memory: anonymous pages nobody touches cost
//! nothing) until the process exits.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use memmap2::MmapMut;
use mtrace_format::layout::*;
use mtrace_format::{ClockInfo, Header};

use crate::clock::RunClock;
use crate::config::{Config, Mode};
use crate::error::StartError;

/// A trace file mapped for writing.
pub(crate) struct TraceMap {
    /// Kept (never dropped: the owner is leaked) so the range stays mapped.
    map: MmapMut,
    /// The file, kept to cut off its unused end at finish.
    file: File,
    base: *mut u8,
    pub chunks_offset: usize,
    pub meta_offset: usize,
    pub meta_capacity: usize,
    pub chunk_size: usize,
    pub chunk_count: u64,
    pub path: PathBuf,
}

// SAFETY: the raw pointer points into `map`, which lives as long as the
// `TraceMap`; concurrent access goes through atomics or through chunks that
// one thread owns after winning their state word.
unsafe impl Send for TraceMap {}
// SAFETY: see above.
unsafe impl Sync for TraceMap {}

/// Rounds `n` up to a multiple of `to` (a power of two).
fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

impl TraceMap {
    /// Creates the file, reserves its blocks, maps it and writes the header.
    pub fn create(
        config: &Config,
        chunk_count: u64,
        clock: &RunClock,
    ) -> Result<TraceMap, StartError> {
        let path = config.path.clone();
        let meta_capacity = round_up(config.meta_capacity.max(META_ALIGN), 4096);
        let meta_offset = HEADER_SIZE;
        let chunks_offset = HEADER_SIZE + meta_capacity;
        let total = (chunks_offset as u64)
            .checked_add(chunk_count.saturating_mul(config.chunk_size as u64))
            .filter(|&t| usize::try_from(t).is_ok() && t < i64::MAX as u64)
            .ok_or(StartError::NoSpace {
                path: path.clone(),
                bytes: u64::MAX,
            })?;
        let create = |source| StartError::Create {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(create)?;
        let sized = size(&file, total).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOSPC) {
                StartError::NoSpace {
                    path: path.clone(),
                    bytes: total,
                }
            } else {
                create(e)
            }
        });
        // SAFETY: the file was just created by us and is only written through
        // this map; other processes modifying it concurrently is outside the
        // recorder's contract.
        let mapped = sized.and_then(|()| {
            unsafe { MmapMut::map_mut(&file) }.map_err(|source| StartError::Map {
                path: path.clone(),
                source,
            })
        });
        let mut map = match mapped {
            Ok(map) => map,
            Err(e) => {
                // Leave no half-made (possibly huge, sparse) file behind.
                drop(file);
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        let base = map.as_mut_ptr();
        let this = TraceMap {
            map,
            file,
            base,
            chunks_offset,
            meta_offset,
            meta_capacity,
            chunk_size: config.chunk_size,
            chunk_count,
            path,
        };
        let mut header = Header::new(
            ClockInfo {
                kind: clock.kind(),
                start_tick: clock.start_tick,
                start_unix_ns: clock.start_unix_ns,
                calib_ticks: clock.calib_ticks,
                calib_ns: clock.calib_ns,
            },
            config.chunk_size as u32,
        );
        if config.mode == Mode::Ring {
            header.flags |= FLAG_RING;
        }
        header.preferred_clock = config.preferred_clock;
        header.producer = config.producer;
        header.pid = std::process::id();
        header.chunk_count = chunk_count;
        header.chunks_offset = chunks_offset as u64;
        header.meta_offset = meta_offset as u64;
        header.meta_capacity = meta_capacity as u64;
        header.cmdline = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("\0");
        this.write(0, &header.encode());
        Ok(this)
    }

    /// The header counter at `offset` (one of the `H_*` counters).
    #[inline]
    pub fn counter(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= HEADER_SIZE);
        // SAFETY: in bounds, 8-aligned (the map is page aligned), and only
        // ever accessed atomically while the recording runs.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// The start of chunk slot `slot`.
    #[inline]
    pub fn chunk(&self, slot: u64) -> *mut u8 {
        debug_assert!(slot < self.chunk_count);
        // SAFETY: slot < chunk_count, so the chunk lies inside the map.
        unsafe {
            self.base
                .add(self.chunks_offset + slot as usize * self.chunk_size)
        }
    }

    /// Maps chunk slot `slot`'s pages writable now, in one system call,
    /// rather than with one page fault per 4 KiB page as events reach them
    /// (each fault costs the recording thread an exception on top of the
    /// kernel's work for the page). Best effort: kernels before 5.14 refuse
    /// it, and then the faults happen.
    pub fn populate(&self, slot: u64) {
        #[cfg(target_os = "linux")]
        {
            const PAGE: usize = 4096;
            let start = self.chunks_offset + slot as usize * self.chunk_size;
            let first = start / PAGE * PAGE;
            let end = round_up(start + self.chunk_size, PAGE).min(self.map.len());
            // SAFETY: the range lies inside the live mapping; populating
            // changes no byte of it.
            unsafe {
                libc::madvise(
                    self.base.add(first) as *mut libc::c_void,
                    end - first,
                    libc::MADV_POPULATE_WRITE,
                )
            };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = slot;
    }

    /// The state word of chunk slot `slot`.
    #[inline]
    pub fn state(&self, slot: u64) -> &AtomicU64 {
        // SAFETY: chunks are 64-aligned; the state word is only accessed atomically.
        unsafe { &*(self.chunk(slot).add(C_STATE) as *const AtomicU64) }
    }

    /// Copies `bytes` to `offset`. The caller must own that range (the
    /// header's plain fields, or the metadata region under its lock).
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.map.len());
        // SAFETY: in bounds (checked above); the caller owns the range.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(offset), bytes.len()) }
    }

    /// Reads a u32 at `offset` of the map (no other thread writes it concurrently).
    pub fn read_u32(&self, offset: usize) -> u32 {
        assert!(offset + 4 <= self.map.len());
        // SAFETY: in bounds; volatile because other threads may have written it.
        u32::from_le(unsafe { std::ptr::read_volatile(self.base.add(offset) as *const u32) })
    }

    /// Writes the map back to the file.
    pub fn flush(&self) -> io::Result<()> {
        self.map.flush()
    }

    /// Lets go of the file once the recording is finished (and flushed):
    /// the same address range is mapped again, in place, onto private
    /// anonymous memory, so a write through a stale pointer into the map
    /// (see the module doc) can no longer reach the file. Nothing may read
    /// the map afterwards. If the system refuses, the range stays on the
    /// file: returns whether it let go.
    pub fn detach(&self) -> bool {
        #[cfg(unix)]
        {
            #[cfg(target_os = "linux")]
            let no_reserve = libc::MAP_NORESERVE;
            #[cfg(not(target_os = "linux"))]
            let no_reserve = 0;
            // SAFETY: the range is exactly this map's, which stays reserved
            // for the life of the process (the map is never dropped); MAP_FIXED
            // replaces its pages atomically, so a concurrent store lands in
            // either the file or the new memory, both writable.
            let remapped = unsafe {
                libc::mmap(
                    self.base as *mut libc::c_void,
                    self.map.len(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_FIXED | no_reserve,
                    -1,
                    0,
                )
            };
            remapped != libc::MAP_FAILED
        }
        #[cfg(not(unix))]
        false
    }

    /// Cuts the file after its first `slots` chunk slots. Only once the map
    /// is detached ([`TraceMap::detach`]): a write into the map past the
    /// new end of the file would fault.
    pub fn shrink_to(&self, slots: u64) -> io::Result<()> {
        let len = (self.chunks_offset as u64)
            .saturating_add(slots.saturating_mul(self.chunk_size as u64));
        self.file.set_len(len)
    }
}

/// Sizes the file and reserves its blocks, so a full disk is an error now
/// rather than a SIGBUS on a later write into the map. File systems that
/// cannot reserve keep the file sparse.
fn size(file: &File, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // Refuse at once what cannot fit, rather than let fallocate fill the disk first.
        // SAFETY: a valid descriptor and an out-pointer to a zeroed struct.
        let mut fs: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstatvfs(fd, &mut fs) } == 0 {
            let free = (fs.f_bavail as u64).saturating_mul(fs.f_frsize as u64);
            if free < len {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
        }
        file.set_len(len)?;
        // SAFETY: a valid descriptor; mode 0 only allocates blocks.
        if unsafe { libc::fallocate(fd, 0, 0, len as libc::off_t) } != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => Ok(()),
                _ => Err(e),
            };
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    file.set_len(len)
}
