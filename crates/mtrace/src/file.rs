//! The trace file while it is being written: an address range reserved at
//! start for the file at its maximum size, and the file, mapped into the
//! start of that range and written in place.
//!
//! ```text
//! 0        HEADER_SIZE           chunks_offset (page aligned)
//! | header | metadata region ... | chunk 0 | ... | chunk k-1 | (not yet) ... | chunk n-1 |
//! |<--------------- the file: blocks reserved on disk, mapped --->|
//! |<------------------ the address range reserved at start (PROT_NONE) ---------------->|
//! ```
//!
//! The header's counters (`next_seq`, the drop counters, `meta_len`) and
//! every chunk's state word are used as atomics in place: their offsets are
//! multiples of 8 and the range is page aligned.
//!
//! **The file grows** (stop-when-full mode). It is created with the header,
//! the metadata region and a first step of chunk slots; the header's
//! `chunk_count` says `n`, the maximum. A claim whose `seq` lands at or past
//! the slots already on disk ([`TraceMap::ready_slots`], one acquire load)
//! calls [`TraceMap::grow_to`]: under a lock, one thread reserves the next
//! step's blocks with `posix_fallocate` (so a full disk is an error now,
//! not a SIGBUS at a later store into the map), maps the new part of the
//! file over the reservation with `MAP_FIXED`, and then publishes the new
//! slot count (release). Steps double from [`FIRST_STEP`] up to
//! [`MAX_STEP`], so a tiny program leaves a tiny file and a long run grows
//! it a few dozen times. When a step cannot be had (the maximum is reached,
//! or the disk is full) the claim fails as a full file's always did, and
//! the file grows no more. A ring has its full size from the start. The
//! provisioner (`provision.rs`) calls [`TraceMap::grow_to`] too, for the
//! slot after the last one in the file, when its lead ahead of the claims
//! reaches the end: usually the file has grown before a claim needs it.
//! A recording into memory ([`Config::in_memory()`]) is the same file with no
//! name (`memfd_create`), lengthened without reserving anything: its pages
//! are taken as they are first written, as a program's own memory is.
//!
//! **The address range is never given back while it may be used.** A
//! thread that passed the "recording?" check just before
//! [`crate::Recording::finish`] may still write one event afterwards, and a
//! thread keeps a pointer to its chunk's state word until its next event or
//! its exit, when it releases the chunk. With the range kept, those writes
//! land harmlessly instead of faulting.
//!
//! **But the file is let go of at finish** ([`TraceMap::detach`]): the parts
//! of the range late writes can reach (the header's counters and the
//! chunks; the metadata region is closed first, so no record reaches it)
//! are mapped again onto anonymous memory, so the late writes reach memory
//! nobody reads, never the file. A file in memory has no path a later
//! recording could open: it stays mapped, and once no thread can write
//! into it and its caller gave its trace back, it serves a later recording
//! into memory (`kept.rs`).
//! Otherwise a later recording to the same path, which truncates and maps
//! the same file again, would get them: a thread's release of its old chunk
//! would stamp the old chunk's state word (committed length, sequence
//! number) on a slot of the new file, whose header and snapshot are zero (a
//! damaged chunk of thread 0, its length counted as events, and the slot
//! skipped by the new recording's claims). The rest of the reservation,
//! which no pointer reaches, is unmapped then, and the file closed
//! ([`TraceMap::close`]). The range the file had (not its memory:
//! anonymous pages nobody touches cost nothing) is kept until no thread
//! can use it any more, and then given back ([`TraceMap::unmap`], when
//! every thread bound to the recording has let go of it: see `shared.rs`).
//!
//! **No descriptor is held between growths** ([`Backing`]). A file on disk
//! is opened by its path for each growth and the cut at finish, and
//! closed again; its mapping needs no
//! descriptor. A program that lists its descriptors (a child started with
//! `pass_fds`, a test of them) or closes them all (a daemon) sees none of
//! mtrace's. A file in memory has no other name: it is held open.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mtrace_format::layout::*;
use mtrace_format::{ClockInfo, Header};

use crate::clock::RunClock;
use crate::config::{Config, Mode};
use crate::error::StartError;
use crate::fds::out_of_the_way;
use crate::kept::{self, KeptFile, Layout, MemoryFile, MemoryTrace};

/// Bytes of chunk slots in the file at start (stop-when-full mode), and
/// the first growth step's half.
pub(crate) const FIRST_STEP: u64 = 1 << 20;

/// The largest growth step: each step doubles the last one up to this, so
/// a growth (one `posix_fallocate` and one `mmap`, during which other
/// threads needing a new slot wait) stays short.
pub(crate) const MAX_STEP: u64 = 64 << 20;
/// How much of the file [`TraceMap::detach`] replaces in one call (see there).
const DETACH_PART: usize = 1 << 20;

/// A trace file mapped for writing.
pub(crate) struct TraceMap {
    /// Start of the reserved range (page aligned); the file is mapped from here.
    base: *mut u8,
    /// Length of the reserved range: the file at its maximum, page rounded.
    reserved: usize,
    /// The system's page size: file mappings start and end on pages.
    page: usize,
    /// Slots per growth granule: a multiple of it keeps the file's end page aligned.
    granule: u64,
    pub chunks_offset: usize,
    pub meta_offset: usize,
    pub meta_capacity: usize,
    pub chunk_size: usize,
    /// Slots the file is laid out with: its maximum (the header's `chunk_count`).
    pub chunk_count: u64,
    /// Slots on disk and mapped. Only grows, under `growth`; claims read it
    /// with acquire ordering.
    ready: AtomicU64,
    growth: Mutex<Growth>,
    pub path: PathBuf,
    /// The file is memory with no name ([`Config::in_memory()`]): its pages
    /// are taken when first written, nothing is reserved ahead.
    in_memory: bool,
}

/// How the trace file is reached to grow it (see "No descriptor is held
/// between growths" in the module doc).
enum Backing {
    /// A file in memory, held open (it has no other name) with the range it
    /// is mapped into, both shared with the views of its trace.
    Memory(Arc<MemoryFile>),
    /// A file on disk whose path or identity could not be had, held open.
    Held(File),
    /// A file on disk, opened by its (absolute) path when needed; the one
    /// made at the start only if the device and inode still say so.
    ByPath {
        path: PathBuf,
        device: u64,
        inode: u64,
    },
}

impl Backing {
    /// `file`, on disk, made at the start: closed and reached by its
    /// path, or held if its path or identity cannot be had.
    fn new(file: File, path: &Path) -> Backing {
        use std::os::unix::fs::MetadataExt;
        match (std::path::absolute(path), file.metadata()) {
            (Ok(path), Ok(meta)) => Backing::ByPath {
                path,
                device: meta.dev(),
                inode: meta.ino(),
            },
            _ => Backing::Held(file),
        }
    }

    /// Runs `f` on the file: the held one, or the one at the path, opened
    /// for `f` and closed after it. An error if the file at the path is
    /// not the recording's any more (removed, or replaced by another).
    fn with<T>(&self, f: impl FnOnce(&File) -> io::Result<T>) -> io::Result<T> {
        use std::os::unix::fs::MetadataExt;
        match self {
            Backing::Memory(memory) => f(&memory.file),
            Backing::Held(file) => f(file),
            Backing::ByPath {
                path,
                device,
                inode,
            } => {
                let file = OpenOptions::new().read(true).write(true).open(path)?;
                let meta = file.metadata()?;
                if meta.dev() != *device || meta.ino() != *inode {
                    return Err(io::Error::other(format!(
                        "the trace file {} was replaced by another file",
                        path.display()
                    )));
                }
                f(&file)
            }
        }
    }
}

/// What growing the file needs; under [`TraceMap`]'s lock.
struct Growth {
    /// The file; `None` once closed at finish.
    file: Option<Backing>,
    /// Bytes of chunks the next growth adds.
    step: u64,
    /// Growths so far (the first step at start not counted).
    count: u64,
    /// Why the file stopped growing before its maximum, if it did.
    failure: Option<io::Error>,
    /// The file is let go of ([`TraceMap::detach`]): it grows no more.
    detached: bool,
    /// The range the file was mapped into is given back ([`TraceMap::unmap`]).
    unmapped: bool,
}

impl Growth {
    /// A file's at its start: its first step made.
    fn new(file: Option<Backing>) -> Growth {
        Growth {
            file,
            step: (FIRST_STEP * 2).min(MAX_STEP),
            count: 0,
            failure: None,
            detached: false,
            unmapped: false,
        }
    }
}

/// Where a file for a configuration puts its parts, whatever its size.
#[derive(Clone, Copy)]
struct Plan {
    page: usize,
    meta_capacity: usize,
    chunks_offset: usize,
    /// Slots per growth granule (see [`TraceMap`]).
    granule: u64,
}

impl Plan {
    fn of(config: &Config) -> Plan {
        let page = page_size();
        let meta_capacity = round_up(config.meta_capacity.max(META_ALIGN), 4096);
        Plan {
            page,
            meta_capacity,
            chunks_offset: round_up(HEADER_SIZE + meta_capacity, page),
            granule: page as u64 / gcd(config.chunk_size as u64, page as u64),
        }
    }

    /// Slots a new file has at its start: a ring's all, else the first step's.
    fn first_slots(&self, config: &Config, chunk_count: u64) -> u64 {
        match config.mode {
            Mode::Ring => chunk_count,
            Mode::StopWhenFull => {
                round_up((FIRST_STEP / config.chunk_size as u64).max(1), self.granule)
                    .min(chunk_count)
            }
        }
    }

    /// The map of a file laid out this way in the range `(base, reserved)`,
    /// `chunk_count` slots at most, `ready` of them mapped.
    fn map(
        self,
        config: &Config,
        (base, reserved): (*mut u8, usize),
        chunk_count: u64,
        ready: u64,
        file: Option<Backing>,
    ) -> TraceMap {
        TraceMap {
            base,
            reserved,
            page: self.page,
            granule: self.granule,
            chunks_offset: self.chunks_offset,
            meta_offset: HEADER_SIZE,
            meta_capacity: self.meta_capacity,
            chunk_size: config.chunk_size,
            chunk_count,
            ready: AtomicU64::new(ready),
            growth: Mutex::new(Growth::new(file)),
            path: config.path.clone(),
            in_memory: config.in_memory,
        }
    }
}

// SAFETY: the raw pointer points into the reserved range, which stays
// mapped as long as any thread may use it (see the module doc); concurrent
// access goes through atomics or through chunks that one thread owns after
// winning their state word.
unsafe impl Send for TraceMap {}
// SAFETY: see above.
unsafe impl Sync for TraceMap {}

/// Rounds `n` up to a multiple of `to`.
fn round_up<T>(n: T, to: T) -> T
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Div<Output = T> + std::ops::Mul<Output = T>,
    T: std::ops::Sub<Output = T> + From<u8>,
{
    (n + to - T::from(1)) / to * to
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn lock(m: &Mutex<Growth>) -> MutexGuard<'_, Growth> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TraceMap {
    /// Creates the file, reserves the address range for its maximum size,
    /// reserves the blocks of its first step (a ring's whole file) on disk
    /// and maps it, with the pages written first (the header's, the first
    /// names', slot 0's) faulted in; [`TraceMap::write_header`] next. Leaves
    /// no file behind on error.
    pub fn create(config: &Config) -> Result<TraceMap, StartError> {
        config.check()?;
        if config.in_memory {
            if let Some(map) = TraceMap::reuse(config) {
                return Ok(map);
            }
        }
        let path = config.path.clone();
        let created = if config.in_memory {
            memory_file(&path)
        } else {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
        };
        let file = created.map_err(|source| StartError::Create {
            path: path.clone(),
            source,
        })?;
        let file = out_of_the_way(file);
        match TraceMap::lay_out(config, file) {
            Ok(map) => Ok(map),
            Err(e) => {
                // Leave no half-made file behind (its handle is closed by now).
                if !config.in_memory {
                    let _ = std::fs::remove_file(&path);
                }
                Err(e)
            }
        }
    }

    /// A file in memory a finished recording left ([`crate::kept`]), laid
    /// out as `config` would lay out a new one, cleared of what that
    /// recording wrote; None if there is none.
    fn reuse(config: &Config) -> Option<TraceMap> {
        let plan = Plan::of(config);
        let chunk_count = config.max_chunks(None);
        let reserved = (plan.chunks_offset as u64)
            .checked_add(chunk_count.checked_mul(config.chunk_size as u64)?)
            .and_then(|t| usize::try_from(round_up(t, plan.page as u64)).ok())?;
        let ready = plan.first_slots(config, chunk_count);
        let kept = kept::take(Layout {
            ready,
            chunk_size: config.chunk_size,
            meta_capacity: plan.meta_capacity,
            chunks_offset: plan.chunks_offset,
            chunk_count,
            reserved,
        })?;
        let (base, file) = (kept.memory.base, Backing::Memory(kept.memory));
        let this = plan.map(config, (base, reserved), chunk_count, ready, Some(file));
        let meta_offset = this.meta_offset;
        let meta_capacity = this.meta_capacity;
        // The header is written whole next (`write_header`); the names and
        // the chunk headers the last recording wrote are cleared, so that
        // readers see zeros past `meta_len` and no slot of it. Event bytes
        // past a chunk's committed length are never read.
        // SAFETY: the range is this map's alone (`kept`), mapped to `ready` slots.
        unsafe {
            std::ptr::write_bytes(
                this.base.add(meta_offset),
                0,
                kept.meta_len.min(meta_capacity),
            );
            for slot in 0..kept.claimed.min(ready) {
                std::ptr::write_bytes(this.chunk(slot), 0, CHUNK_HEADER_SIZE);
            }
        }
        Some(this)
    }

    fn lay_out(config: &Config, file: File) -> Result<TraceMap, StartError> {
        let path = config.path.clone();
        let plan = Plan::of(config);
        let Plan {
            page,
            chunks_offset,
            granule,
            ..
        } = plan;
        let chunk_size = config.chunk_size;
        // Memory has a maximum of its own: no file system to ask.
        let free = if config.in_memory {
            None
        } else {
            free_bytes(&file)
        };
        let mut chunk_count = config.max_chunks(free);
        // The address range for the file at its maximum. A default maximum
        // the system will not reserve is halved until it does; a user's is an
        // error.
        let (base, reserved) = loop {
            let len = (chunks_offset as u64)
                .checked_add(chunk_count.saturating_mul(chunk_size as u64))
                .filter(|&t| t < i64::MAX as u64)
                .and_then(|t| usize::try_from(round_up(t, page as u64)).ok());
            let reserve_error = |source| StartError::Reserve {
                path: path.clone(),
                bytes: (chunks_offset as u64)
                    .saturating_add(chunk_count.saturating_mul(chunk_size as u64)),
                source,
            };
            let result = match len {
                Some(len) => reserve(len).map(|base| (base, len)),
                None => Err(io::Error::from_raw_os_error(libc::ENOMEM)),
            };
            match result {
                Ok(reserved) => break reserved,
                Err(e) if config.capacity.is_some() || chunk_count <= granule => {
                    return Err(reserve_error(e))
                }
                Err(_) => chunk_count /= 2,
            }
        };
        let first_slots = plan.first_slots(config, chunk_count);
        let this = plan.map(config, (base, reserved), chunk_count, 0, None);
        let first_len = this.file_len(first_slots);
        if let Err(e) = this.make_first(&file, first_len) {
            // SAFETY: the range was reserved above and nothing else uses it yet.
            unsafe { libc::munmap(base as *mut libc::c_void, reserved) };
            return Err(if e.raw_os_error() == Some(libc::ENOSPC) {
                StartError::NoSpace {
                    path,
                    bytes: first_len,
                }
            } else {
                StartError::Create { path, source: e }
            });
        }
        let backing = if this.in_memory {
            // From here on the range is the memory file's: it is unmapped
            // when the last of its owners lets go (`kept.rs`).
            Backing::Memory(Arc::new(MemoryFile::new(file, (base, reserved), first_len)))
        } else {
            Backing::new(file, &this.path)
        };
        lock(&this.growth).file = Some(backing);
        this.ready.store(first_slots, Ordering::Release);
        // Fault in now (while the clock calibrates, see `recording.rs`) the
        // pages every recording writes first, rather than one write fault at
        // a time as the header, the first names and the first chunk are written.
        this.populate_bytes(0, this.meta_offset + 4096);
        if !this.in_memory {
            // In memory, a short recording (a profile of one request) uses
            // a few pages of its first chunk: faulting in the whole chunk,
            // and taking it out again at the finish, was a fifth of its cost.
            this.populate(0);
        }
        Ok(this)
    }

    /// Writes the header (the clock's calibration included).
    pub fn write_header(&self, config: &Config, clock: &RunClock) {
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
        header.version = config.format.version();
        header.pid = crate::process::pid();
        header.chunk_count = self.chunk_count;
        header.chunks_offset = self.chunks_offset as u64;
        header.meta_offset = self.meta_offset as u64;
        header.meta_capacity = self.meta_capacity as u64;
        header.cmdline = crate::process::command_line().to_owned();
        assert!(HEADER_SIZE <= self.mapped_len(self.ready_slots()));
        // SAFETY: the header's bytes are mapped (checked above), and the
        // recording being set up is the only one writing them.
        let bytes = unsafe { &mut *(self.base as *mut [u8; HEADER_SIZE]) };
        header.encode_into(bytes);
    }

    /// The file's length with `slots` chunk slots.
    fn file_len(&self, slots: u64) -> u64 {
        self.chunks_offset as u64 + slots * self.chunk_size as u64
    }

    /// The end of the mapped part of the range with `slots` slots on disk
    /// (the last page of the file is mapped whole).
    fn mapped_len(&self, slots: u64) -> usize {
        round_up(self.file_len(slots), self.page as u64) as usize
    }

    /// Makes the new (empty) file `first_len` bytes long and maps it: the
    /// header, the first metadata region and the first chunk slots, all
    /// reserved on disk. The region is small and has no hole: names that
    /// outgrow it go on in segments in chunk slots (`shared.rs`).
    fn make_first(&self, file: &File, first_len: u64) -> io::Result<()> {
        self.extend(file, 0, first_len)?;
        if !self.in_memory {
            self.no_readahead(0, self.chunks_offset);
        }
        Ok(())
    }

    /// Makes the file `new_len` bytes long from `old_len` (which it is):
    /// reserves the new blocks on disk, then maps the new pages into the
    /// reserved range. On error the file is cut back to `old_len`.
    fn extend(&self, file: &File, old_len: u64, new_len: u64) -> io::Result<()> {
        let lengthened = if self.in_memory {
            file.set_len(new_len)
        } else {
            reserve_blocks(file, old_len, new_len)
        };
        let result = lengthened.and_then(|()| {
            let from = round_up(old_len, self.page as u64) as usize;
            let to = round_up(new_len, self.page as u64) as usize;
            if to > from {
                map_file(file, self.base, from, to)
            } else {
                Ok(())
            }
        });
        if result.is_err() {
            // Give back what was reserved of the step (nothing maps it).
            let _ = file.set_len(old_len);
        }
        result
    }

    /// Slots on disk and mapped: a claimed `seq` below this can be written
    /// at once. One acquire load, the claim path's only cost of growth.
    #[inline]
    pub fn ready_slots(&self) -> u64 {
        self.ready.load(Ordering::Acquire)
    }

    /// Grows the file so that slot `seq` is on disk and mapped (stop-when-full
    /// mode, `seq >= ready_slots()`). False when it cannot be: `seq` is past
    /// the maximum, the disk is full (or the system refused otherwise), or
    /// the recording let go of its file; then the file grows no more.
    #[cold]
    #[inline(never)]
    pub fn grow_to(&self, seq: u64) -> bool {
        if seq >= self.chunk_count {
            return false;
        }
        let mut growth = lock(&self.growth);
        let ready = self.ready.load(Ordering::Relaxed);
        if seq < ready {
            // Another thread grew the file meanwhile.
            return true;
        }
        if growth.detached || growth.failure.is_some() {
            return false;
        }
        let Some(file) = growth.file.as_ref() else {
            return false;
        };
        let step_slots = (growth.step / self.chunk_size as u64).max(1);
        let needed = round_up(seq + 1, self.granule).min(self.chunk_count);
        let wanted =
            round_up((ready + step_slots).max(seq + 1), self.granule).min(self.chunk_count);
        let old_len = self.file_len(ready);
        let grown = file.with(|file| {
            let grown = self
                .extend(file, old_len, self.file_len(wanted))
                .map(|()| wanted);
            if grown.is_err() && needed < wanted {
                // The whole step does not fit (a nearly full disk): take only
                // what this claim needs, so the disk's last blocks are used too.
                return self
                    .extend(file, old_len, self.file_len(needed))
                    .map(|()| needed);
            }
            grown
        });
        match grown {
            Ok(slots) => {
                if let Backing::Memory(memory) = file {
                    memory.len.store(self.file_len(slots), Ordering::Release);
                }
                growth.count += 1;
                growth.step = (growth.step * 2).min(MAX_STEP);
                self.ready.store(slots, Ordering::Release);
                true
            }
            Err(e) => {
                growth.failure = Some(e);
                false
            }
        }
    }

    /// Growths of the file so far (the first step at start not counted).
    pub fn growths(&self) -> u64 {
        lock(&self.growth).count
    }

    /// Why the file stopped growing before its maximum, if it did.
    pub fn growth_failure(&self) -> Option<String> {
        lock(&self.growth).failure.as_ref().map(|e| e.to_string())
    }

    /// The header counter at `offset` (one of the `H_*` counters).
    #[inline]
    pub fn counter(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= HEADER_SIZE);
        // SAFETY: in bounds (the header is always mapped), 8-aligned (the
        // range is page aligned), and only ever accessed atomically while
        // the recording runs.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// The atomic word at `offset` of the mapped file: a header counter,
    /// or a word of a claimed slot (a metadata segment's committed length).
    pub fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.mapped_len(self.ready_slots()));
        // SAFETY: in bounds (checked above), 8-aligned (the range is page
        // aligned), and only ever accessed atomically while the recording runs.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// The start of chunk slot `slot`, which must be below [`TraceMap::ready_slots`].
    #[inline]
    pub fn chunk(&self, slot: u64) -> *mut u8 {
        debug_assert!(slot < self.chunk_count);
        // SAFETY: slot < chunk_count, so the chunk lies inside the reserved range.
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
        self.populate_bytes(
            self.chunks_offset + slot as usize * self.chunk_size,
            self.chunk_size,
        );
    }

    /// [`TraceMap::populate`] for bytes `offset..offset + len` of chunk slot
    /// `slot` only (the provisioner maps a large slot in parts, so that it
    /// can stop between them).
    pub fn populate_part(&self, slot: u64, offset: usize, len: usize) {
        let len = len.min(self.chunk_size.saturating_sub(offset));
        self.populate_bytes(
            self.chunks_offset + slot as usize * self.chunk_size + offset,
            len,
        );
    }

    /// Tells the kernel not to read ahead when a page of `start..end` (of
    /// the map) faults: the metadata region is written a record at a time,
    /// never read, and a fault at its start read ahead into the hole after
    /// its first MiB, zeroing page cache for nothing (10 ms of every
    /// `enable()` with a 16 MiB region).
    fn no_readahead(&self, start: usize, end: usize) {
        #[cfg(target_os = "linux")]
        self.advise(start, end, libc::MADV_RANDOM);
        #[cfg(not(target_os = "linux"))]
        let _ = (start, end);
    }

    /// [`TraceMap::populate`] for the pages of bytes `start..start + len` of
    /// the file. Never past the file's current end (the ready slots): a page
    /// there is not mapped, or, after a cut, would raise SIGBUS.
    fn populate_bytes(&self, start: usize, len: usize) {
        #[cfg(target_os = "linux")]
        {
            let first = start / self.page * self.page;
            let end = round_up(start + len, self.page).min(self.mapped_len(self.ready_slots()));
            self.advise(first, end, libc::MADV_POPULATE_WRITE);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (start, len);
    }

    /// `madvise(advice)` over bytes `start..end` of the map (nothing if
    /// empty). The callers' advice changes no byte of the file.
    #[cfg(target_os = "linux")]
    fn advise(&self, start: usize, end: usize, advice: libc::c_int) {
        if end > start {
            // SAFETY: the range lies inside the mapping (the callers keep
            // it there), and the advice given does not change its bytes.
            unsafe {
                libc::madvise(
                    self.base.add(start) as *mut libc::c_void,
                    end - start,
                    advice,
                )
            };
        }
    }

    /// The state word of chunk slot `slot` (below [`TraceMap::ready_slots`]).
    #[inline]
    pub fn state(&self, slot: u64) -> &AtomicU64 {
        // SAFETY: chunks are 64-aligned; the state word is only accessed atomically.
        unsafe { &*(self.chunk(slot).add(C_STATE) as *const AtomicU64) }
    }

    /// Copies `bytes` to `offset`, in the header, the metadata region
    /// (always mapped) or a metadata segment (a claimed slot). The caller
    /// must own that range (the header's plain fields, or the metadata log
    /// under its lock).
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.mapped_len(self.ready_slots()));
        // SAFETY: in bounds (checked above); the caller owns the range.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(offset), bytes.len()) }
    }

    /// Reads a u32 at `offset` of the mapped file (no other thread writes it concurrently).
    pub fn read_u32(&self, offset: usize) -> u32 {
        assert!(offset + 4 <= self.mapped_len(self.ready_slots()));
        // SAFETY: in bounds; volatile because other threads may have written it.
        u32::from_le(unsafe { std::ptr::read_volatile(self.base.add(offset) as *const u32) })
    }

    /// Lets go of the file once the recording is finished:
    /// the file stops growing; the parts of the range threads may still
    /// write through a stale pointer (see the module doc), the header's
    /// counters and the chunks, are mapped again, in place, onto private
    /// anonymous memory, so that such a write can no longer reach the file;
    /// the rest of the reservation, which nothing points into, is unmapped.
    /// The metadata region stays on the file: the caller closed the
    /// metadata log (no record is written into it, nor into a segment in
    /// a chunk slot, any more), and a large region need not be remapped.
    /// Nothing may read the map afterwards. If the system refuses the
    /// remap, the range stays on the file: returns whether it let go.
    ///
    /// A file in memory stays mapped (returns false): no other recording
    /// maps it until no thread can write into it any more ([`crate::kept`]),
    /// and a late write into it adds to the trace its caller holds, as a
    /// thread's write just before the finish would.
    pub fn detach(&self) -> bool {
        let mut growth = lock(&self.growth);
        growth.detached = true;
        if self.in_memory {
            return false;
        }
        let mapped = self.mapped_len(self.ready.load(Ordering::Relaxed));
        let written_late = [
            (0, round_up(self.meta_offset, self.page).min(mapped)),
            (self.chunks_offset.min(mapped), mapped),
        ];
        #[cfg(target_os = "linux")]
        let no_reserve = libc::MAP_NORESERVE;
        #[cfg(not(target_os = "linux"))]
        let no_reserve = 0;
        // A part at a time: the kernel holds the process's memory map lock
        // while it takes a part's pages out, and every page fault of the
        // process's other threads waits for it (a recording thread
        // writing the next file of a rotating series: one call for a 16
        // MiB file stalled it for about 1 ms).
        let mut remapped = true;
        for (mut at, end) in written_late {
            while at < end {
                let len = DETACH_PART.min(end - at);
                // SAFETY: the range is the mapped file's, inside the
                // reservation, which is never unmapped; MAP_FIXED replaces
                // its pages atomically, so a concurrent store lands in
                // either the file or the new memory, both writable.
                remapped &= unsafe {
                    libc::mmap(
                        self.base.add(at) as *mut libc::c_void,
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANON | libc::MAP_FIXED | no_reserve,
                        -1,
                        0,
                    )
                } != libc::MAP_FAILED;
                at += len;
            }
        }
        if self.reserved > mapped {
            // SAFETY: past the mapped file: no slot there was ever handed out,
            // and none will be (the file grows no more), so no pointer reaches it.
            unsafe {
                libc::munmap(
                    self.base.add(mapped) as *mut libc::c_void,
                    self.reserved - mapped,
                )
            };
        }
        remapped
    }

    /// Gives back the range the file was mapped into, once detached. The
    /// caller vouches that no pointer into it is used any more: no thread
    /// is bound to the recording and its metadata region is closed (see
    /// `shared.rs`, "Retired files"). A long-running server that rotates
    /// its files would otherwise keep one mapping per file it ever wrote,
    /// until the process reached the system's limit of mappings
    /// (`vm.max_map_count`, 65530 by default) and every `mmap`, the
    /// allocator's included, failed.
    /// True if this call gave the range back (once, and only once
    /// detached).
    ///
    /// A file in memory that never grew (a short recording's) is kept
    /// with its range for the next recording into memory instead
    /// ([`crate::kept`]).
    pub fn unmap(&self) -> bool {
        let mut growth = lock(&self.growth);
        if !growth.detached || growth.unmapped {
            return false;
        }
        growth.unmapped = true;
        if self.in_memory {
            let file = growth.file.take();
            if let (Some(Backing::Memory(memory)), 0) = (file, growth.count) {
                kept::keep(KeptFile {
                    memory,
                    layout: Layout {
                        ready: self.ready.load(Ordering::Relaxed),
                        chunk_size: self.chunk_size,
                        meta_capacity: self.meta_capacity,
                        chunks_offset: self.chunks_offset,
                        chunk_count: self.chunk_count,
                        reserved: self.reserved,
                    },
                    meta_len: self.counter(H_META_LEN).load(Ordering::Relaxed) as usize,
                    claimed: self.counter(H_NEXT_SEQ).load(Ordering::Relaxed),
                });
            }
            // Otherwise the file is let go of: its range is unmapped when
            // the views of its trace are dropped too (`kept.rs`).
            return true;
        }
        let mapped = self.mapped_len(self.ready.load(Ordering::Relaxed));
        // SAFETY: the detached part of the reservation (the rest was
        // unmapped at detach); nothing uses it any more (the caller's word).
        unsafe { libc::munmap(self.base as *mut libc::c_void, mapped) };
        true
    }

    /// A descriptor of its own for a file in memory ([`Config::in_memory()`]),
    /// from which its trace reads while the descriptor is open (also after
    /// the recording finished); None for a file on disk or once closed.
    pub fn memory_file(&self) -> Option<io::Result<File>> {
        if !self.in_memory {
            return None;
        }
        match lock(&self.growth).file.as_ref()? {
            Backing::Memory(memory) => Some(memory.descriptor()),
            Backing::Held(_) | Backing::ByPath { .. } => None,
        }
    }

    /// A view of a file in memory ([`Config::in_memory()`]) that reads its
    /// trace in place; None for a file on disk or once let go of.
    pub fn memory_view(&self) -> Option<MemoryTrace> {
        match lock(&self.growth).file.as_ref()? {
            Backing::Memory(memory) => Some(MemoryTrace::new(Arc::clone(memory))),
            Backing::Held(_) | Backing::ByPath { .. } => None,
        }
    }

    /// Closes the file, first cutting it after its first `slots` chunk
    /// slots if asked (best effort: a longer file holds the same trace).
    /// Cut only once detached ([`TraceMap::detach`]): a write into the map
    /// past the new end of the file would fault.
    ///
    /// It does not wait for the disk. The pages written through the map
    /// are the file's pages in the page cache: every reader sees the whole
    /// trace at once, and the kernel writes them back as it does any
    /// file's, so the trace outlives the process (killed or not) but not a
    /// power cut, as other profilers' output does. Waiting (`fdatasync`)
    /// cost 0.5 ms on a calm disk and up to 20 ms on a busy one at every
    /// `disable()`, for a guarantee nobody asks of a profile.
    ///
    /// A file in memory stays open: its trace is read through it until the
    /// caller has its own descriptor, and it may serve the next recording
    /// ([`TraceMap::unmap`]).
    pub fn close(&self, cut_after: Option<u64>) {
        if self.in_memory {
            return;
        }
        let Some(file) = lock(&self.growth).file.take() else {
            return;
        };
        if let Some(slots) = cut_after {
            let _ = file.with(|file| file.set_len(self.file_len(slots)));
        }
    }
}

/// The system's page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// A new file with no name, in memory (`memfd_create`, close-on-exec),
/// named `path` in `/proc/PID/fd` for whoever looks.
fn memory_file(path: &std::path::Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        let name = path.file_name().map_or(&[][..], |n| n.as_bytes());
        let name = CString::new(
            name.iter()
                .copied()
                .filter(|&b| b != 0)
                .collect::<Vec<u8>>(),
        )
        .unwrap_or_default();
        // SAFETY: a valid C string and flags; the new descriptor is ours.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "recording into memory needs Linux (memfd_create)",
        ))
    }
}

/// Bytes free (to an unprivileged user) on `file`'s file system, if known.
fn free_bytes(file: &File) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor and an out-pointer to a zeroed struct.
    let mut fs: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut fs) } != 0 {
        return None;
    }
    Some((fs.f_bavail as u64).saturating_mul(fs.f_frsize as u64))
}

/// Reserves `len` bytes of address space, inaccessible, backed by nothing.
fn reserve(len: usize) -> io::Result<*mut u8> {
    #[cfg(target_os = "linux")]
    let no_reserve = libc::MAP_NORESERVE;
    #[cfg(not(target_os = "linux"))]
    let no_reserve = 0;
    // SAFETY: a new anonymous mapping at an address the system picks.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANON | no_reserve,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(base as *mut u8)
    }
}

/// Maps bytes `from..to` of `file` (page aligned) at the same offsets from
/// `base`, over the reservation.
fn map_file(file: &File, base: *mut u8, from: usize, to: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `from..to` lies inside the reservation made for this file and
    // is not in use (past the slots handed out so far); MAP_FIXED replaces
    // the inaccessible pages there. The file was created by us and is only
    // written through this map.
    let mapped = unsafe {
        libc::mmap(
            base.add(from) as *mut libc::c_void,
            to - from,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            file.as_raw_fd(),
            from as libc::off_t,
        )
    };
    if mapped == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Extends the file from `from` to `to` bytes and reserves the new blocks,
/// so a full disk is an error now rather than a SIGBUS on a later write into
/// the map. File systems that cannot reserve keep the new part sparse.
fn reserve_blocks(file: &File, from: u64, to: u64) -> io::Result<()> {
    match allocate(file, from, to)? {
        true => Ok(()),
        false => file.set_len(to),
    }
}

/// Reserves the blocks of `from..to` (`posix_fallocate`, which also
/// extends the file to `to`): true if they are, false if the file system
/// cannot reserve blocks. A range larger than the free space is refused at
/// once (ENOSPC), rather than let the allocation fill the disk first.
fn allocate(file: &File, from: u64, to: u64) -> io::Result<bool> {
    if free_bytes(file).is_some_and(|free| free < to - from) {
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor and a range of non-negative offsets.
        let err = unsafe {
            libc::posix_fallocate(
                file.as_raw_fd(),
                from as libc::off_t,
                (to - from) as libc::off_t,
            )
        };
        match err {
            0 => Ok(true),
            libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL => Ok(false),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }
    #[cfg(not(target_os = "linux"))]
    Ok(false)
}
