//! The page provisioner: a background thread that maps the pages of the
//! chunk slots a little ahead of the claims, so that a claim finds its
//! slot's memory ready instead of waiting for the kernel.
//!
//! Keeping every event writes each one into memory the process never
//! touched. The kernel provides that memory a page at a time: it zeroes a
//! page and maps it when the slot is first used, about 1 us per 4 KiB page
//! (about 3 ns per event) on the development machine, which the thread that
//! claimed the slot paid, in one `madvise(MADV_POPULATE_WRITE)` per claim.
//! The provisioner does the same `madvise` for the next slots before anyone
//! claims them, on another core when one is idle:
//!
//! ```text
//! claims (next_seq)            v
//! slots     | claimed ... claimed | prepared ... prepared | not yet touched ... | (not in the file yet)
//!                                 |<-- lead: up to AHEAD_BYTES -->|
//! ```
//!
//! How it runs, and why this design rather than the alternatives:
//!
//! * **A thread of its own**, started with the recording (spawned while the
//!   clock calibrates, whose 1 ms spin is the floor of a start's cost
//!   anyway, and handed the recording once it exists) and parked until a
//!   claim needs it. A claim whose slot the provisioner has not prepared
//!   maps its pages itself, as before; a claim that leaves fewer than half
//!   the lead prepared wakes it (`unpark`: an atomic swap, and a futex wake
//!   only when the provisioner sleeps, once per half lead of claims). The
//!   hot path (writing an event) is unchanged; only the claim, once per
//!   chunk, reads one more atomic. The alternatives do the kernel's work on
//!   a recording thread all the same: Linux has no asynchronous `madvise`
//!   short of `io_uring`, and populating the whole range a growth step adds
//!   (up to 64 MiB) would stall the growing thread for milliseconds.
//! * **The lead ramps up**: it is as many slots as were claimed so far, up
//!   to [`AHEAD_BYTES`] of slots. A tiny program (a few chunks) makes the
//!   provisioner map a few slots, not megabytes it never writes.
//! * **It never touches a page past the file's current end** (a page there
//!   is either not mapped, or, past a cut, would raise SIGBUS): in
//!   stop-when-full mode, a slot past the ready ones is first grown to with
//!   [`TraceMap::grow_to`], exactly as the claim of that slot would have
//!   grown the file (the same request, so the same outcome on a nearly full
//!   disk, only earlier); when the file can grow no more the provisioner
//!   ends. A ring has its whole size from the start: the provisioner
//!   prepares its first pass and ends; slots that are reused are mapped
//!   already.
//! * **Finish stops it first** ([`Provisioner::stop`]), before the file's
//!   length is decided, so it neither grows nor maps the file while it is
//!   cut, detached and closed. It is told with one atomic store, woken,
//!   and joined, parked or at work: the recording it reads may be freed
//!   once finished (`shared.rs`, "Freed files"). A parked one returns as
//!   it wakes; one at work checks between parts of at most
//!   [`PART_BYTES`], so finish waits for at most one part. (The Python
//!   binding, which starts and finishes a recording per `enable()` and
//!   `disable()`, runs without a provisioner.)
//! * **Fork needs nothing.** Only the forking thread goes on in the child,
//!   so the child has no provisioner; it never needs one for the parent's
//!   recording, whose claims, growths and finish are the parent's alone
//!   (the child stops recording into it at once, and finish refuses it).
//!   The provisioner holds no lock the child could wait for: its only lock
//!   is the file's growth lock, inside `grow_to`, which the child never
//!   takes for the parent's file. A recording the child starts has a
//!   provisioner of its own. Stopping the parent's provisioner around
//!   every `fork` would cost the parent a thread join per fork for nothing.
//! * **Correctness never depends on it**: a page it has not mapped faults
//!   in on first write, as any page would. If the thread cannot be started
//!   (a thread limit), the claims map their own slots, as they did before.
//!
//! On a machine whose cores are all busy with the workload the provisioner
//! competes with it for the same work the claims did (see `docs/BENCHMARKS.md`,
//! "Recorder overhead against other recorders", for the two-thread measurement).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};

use mtrace_format::layout::H_NEXT_SEQ;

use crate::config::Mode;
use crate::file::TraceMap;

/// A lock that a panic elsewhere does not poison for good.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How far ahead of the claims the provisioner keeps slots prepared, in
/// bytes of slots (at least one slot): 64 default (64 KiB) chunks. A claim
/// wakes it with half of that left, about 1.3 ms of one thread recording
/// at the floor's rate (10 ns an event), which covers the time a woken
/// thread can wait for a core on a virtual machine (whose idle virtual CPU
/// the host has to schedule first). With a 1 MiB lead, most runs of the
/// bench's one-thread loop lost the gain (about 1.55x the floor in 54 of 60 runs
/// on the development VM, against 0.99x in 59 of 60 with 4 MiB).
pub(crate) const AHEAD_BYTES: u64 = 4 << 20;

/// The most bytes the provisioner maps in one `madvise` before checking
/// whether the recording is finishing (a slot can be up to 64 MiB).
pub(crate) const PART_BYTES: usize = 256 << 10;

/// The provisioner's shared state, part of the recording (`Shared`).
pub(crate) struct Provisioner {
    /// Slots below this had their pages mapped: by the provisioner, or, for
    /// slots it had not reached, by their claimer. Only grows.
    prepared_to: AtomicU64,
    /// Slots the provisioner mapped before they were claimed.
    prepared_count: AtomicU64,
    /// Largest lead, in slots.
    ahead: u64,
    /// Finish stopped it, or it ended: it touches the file no more. (Finish
    /// also joins the thread, whatever it was doing.)
    stopped: AtomicBool,
    /// The thread, to wake it; unset if it could not be started.
    thread: OnceLock<Thread>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl Provisioner {
    /// The state for a recording whose file has `map`'s layout, with slot 0
    /// already mapped (see [`TraceMap::create`]). No thread yet: [`start`].
    pub fn new(map: &TraceMap) -> Provisioner {
        Provisioner {
            prepared_to: AtomicU64::new(1),
            prepared_count: AtomicU64::new(0),
            ahead: (AHEAD_BYTES / map.chunk_size as u64).max(1),
            stopped: AtomicBool::new(false),
            thread: OnceLock::new(),
            handle: Mutex::new(None),
        }
    }

    /// The claim of slot `seq` on its first use (`seq < chunk_count`): maps
    /// the slot's pages unless the provisioner has, and wakes the provisioner
    /// when fewer than half the lead it should keep are prepared.
    pub fn on_first_claim(&self, map: &TraceMap, seq: u64) {
        if seq == 0 {
            // Slot 0 was mapped at start. A recording that never claims a
            // second slot (a few thousand events) leaves the provisioner
            // asleep: finish then need not wait for it.
            return;
        }
        // Relaxed: a stale value only means mapping pages twice (harmless) or
        // not at all (they fault in at first write); page tables are the
        // process's, no memory ordering makes them visible.
        let prepared_to = self.prepared_to.load(Ordering::Relaxed);
        if seq >= prepared_to {
            map.populate(seq);
        }
        let claimed = seq + 1;
        let low_water = claimed + lead(self.ahead, claimed).div_ceil(2);
        if prepared_to < low_water.min(map.chunk_count) {
            if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
    }

    /// Slots the provisioner mapped before their claim.
    pub fn prepared_count(&self) -> u64 {
        self.prepared_count.load(Ordering::Relaxed)
    }

    /// Slots below this have their pages mapped (see the field).
    #[cfg(test)]
    pub fn prepared_to(&self) -> u64 {
        self.prepared_to.load(Ordering::Relaxed)
    }

    /// Stops the thread (at finish): once this returns, the provisioner
    /// neither grows nor maps the file any more, and its thread has ended
    /// (a parked one, woken, returns at once): the recording may be freed
    /// after that (`shared.rs`, "Freed files"), and the thread reads it.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let handle = lock(&self.handle).take();
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
        if let Some(handle) = handle {
            // The thread does not panic; if it did, it has stopped all the same.
            let _ = handle.join();
        }
    }

    /// Whether the provisioner has stopped for good.
    #[cfg(test)]
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// The lead, in slots, once `claimed` slots were claimed: the claims so far,
/// at most `ahead`.
fn lead(ahead: u64, claimed: u64) -> u64 {
    ahead.min(claimed).max(1)
}

/// What the provisioner thread works on: the recording's file, its mode
/// and the provisioner's state (parts of the recording, which lives as
/// long as the process).
pub(crate) struct Job {
    pub map: &'static TraceMap,
    pub mode: Mode,
    pub state: &'static Provisioner,
}

/// A provisioner thread spawned before its recording exists, waiting for it.
pub(crate) struct Spawned {
    handle: JoinHandle<()>,
    hand_over: SyncSender<Job>,
}

/// Spawns a provisioner thread for a recording being started (while the
/// clock calibrates). Best effort: without it, claims map their own slots.
/// Dropped without [`start`] (the start failed), the thread just exits.
pub(crate) fn spawn() -> Option<Spawned> {
    let (hand_over, recording) = sync_channel::<Job>(1);
    let handle = std::thread::Builder::new()
        .name("mtrace-provisioner".into())
        .spawn(move || {
            if let Ok(job) = recording.recv() {
                run(job);
            }
        })
        .ok()?;
    Some(Spawned { handle, hand_over })
}

/// Hands `job` to its provisioner thread, before the recording is
/// published (the first claim can wake it).
pub(crate) fn start(job: Job, spawned: Option<Spawned>) {
    let Some(spawned) = spawned else {
        return;
    };
    let p = job.state;
    let _ = p.thread.set(spawned.handle.thread().clone());
    *lock(&p.handle) = Some(spawned.handle);
    // Cannot fail: the channel has room and the thread waits on it.
    let _ = spawned.hand_over.send(job);
}

/// The thread: prepares the slots of the lead, sleeps until a claim wakes
/// it, and ends when told to, when every slot is prepared, or when the file
/// can grow no more.
fn run(
    Job {
        map,
        mode,
        state: p,
    }: Job,
) {
    let next_seq = map.counter(H_NEXT_SEQ);
    let mut next = p.prepared_to.load(Ordering::Relaxed);
    loop {
        if p.stopped.load(Ordering::Acquire) {
            return;
        }
        let claimed = next_seq.load(Ordering::Relaxed);
        // Slots claimed while the provisioner was behind were mapped by
        // their claimers.
        next = next.max(claimed);
        if next >= map.chunk_count {
            // Every slot of the file is prepared (a ring's first pass done).
            p.stopped.store(true, Ordering::Release);
            return;
        }
        // Until a second slot is claimed there is nothing to prepare: a
        // recording that never claims one costs no work here.
        let target = if claimed < 2 {
            next
        } else {
            claimed
                .saturating_add(lead(p.ahead, claimed))
                .min(map.chunk_count)
        };
        if next >= target {
            // Parks only once the work is done, never before looking: the
            // claims that wanted it may all have come already, their wake
            // token spent (the channel's `recv` parks this thread too, and
            // so may whatever woke it there). A claim after the look leaves
            // its token, so this returns at once; so does finish's.
            std::thread::park();
            continue;
        }
        while next < target {
            if p.stopped.load(Ordering::Acquire) {
                return;
            }
            if mode == Mode::StopWhenFull && next >= map.ready_slots() && !map.grow_to(next) {
                // The file is at its maximum, or the disk is full: nothing
                // more will ever be claimed (the claims see the same).
                p.stopped.store(true, Ordering::Release);
                return;
            }
            let mut offset = 0;
            while offset < map.chunk_size {
                if p.stopped.load(Ordering::Acquire) {
                    return;
                }
                map.populate_part(next, offset, PART_BYTES);
                offset += PART_BYTES;
            }
            next += 1;
            p.prepared_to.fetch_max(next, Ordering::Relaxed);
            p.prepared_count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek, SeekFrom};
    use std::time::{Duration, Instant};

    use mtrace_format::TraceFile;

    use super::*;
    use crate::config::Config;
    use crate::shared::{current, Reading, Shared};
    use crate::FunctionId;

    use crate::shared::tests::serial;

    fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("mtrace-unit-{}-{name}.mtrace", std::process::id()))
    }

    /// Records `pairs` enter/exit pairs of `f` on the calling thread.
    fn record_pairs(f: FunctionId, pairs: usize) {
        for _ in 0..pairs {
            crate::enter(f);
            crate::exit(f);
        }
    }

    /// Records enter/exit pairs of `f` until `slots` chunks were claimed
    /// (events have no fixed size: compact ones take a few bytes);
    /// returns the pairs recorded.
    fn record_until_claimed(shared: &Shared, f: FunctionId, slots: u64) -> usize {
        let mut pairs = 0;
        while shared.map.counter(H_NEXT_SEQ).load(Ordering::Relaxed) < slots {
            record_pairs(f, 256);
            pairs += 256;
        }
        pairs
    }

    /// Why the finished trace at `path` is not what a clean finish leaves
    /// (finished, cut after the `slots` it claims, every chunk whole),
    /// or its event count.
    fn check_finished_file(path: &std::path::Path, chunk: usize) -> Result<u64, String> {
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        let trace = TraceFile::parse(&bytes).map_err(|e| e.to_string())?;
        let h = trace.header();
        if !h.finished() {
            return Err("not finished".into());
        }
        let cut_len = h.chunks_offset + h.chunk_count * chunk as u64;
        if bytes.len() as u64 != cut_len {
            return Err(format!(
                "{} bytes, {} slots: {cut_len} expected",
                bytes.len(),
                h.chunk_count
            ));
        }
        let mut events = 0;
        for slot in 0..trace.chunk_slots() {
            let Some(c) = trace.chunk(slot).map_err(|e| format!("slot {slot}: {e}"))? else {
                return Err(format!("slot {slot} of {} unclaimed", h.chunk_count));
            };
            if let Some(cut) = c.cut {
                return Err(format!("slot {slot}: {cut}"));
            }
            events += c.events().count() as u64;
        }
        Ok(events)
    }

    /// Whether the page at `addr` is mapped in this process's page tables
    /// (`/proc/self/pagemap`, bit 63), or `None` if that file is unreadable.
    fn present(pagemap: &mut std::fs::File, addr: usize, page: usize) -> Option<bool> {
        let mut entry = [0u8; 8];
        pagemap
            .seek(SeekFrom::Start((addr / page * 8) as u64))
            .ok()?;
        pagemap.read_exact(&mut entry).ok()?;
        Some(u64::from_le_bytes(entry) >> 63 == 1)
    }

    /// Claims that all came before the thread got its recording (a busy
    /// machine can leave a new thread unscheduled that long) left no wake
    /// token for it: the provisioner prepares their lead all the same,
    /// without another claim to wake it.
    #[test]
    fn claims_made_before_the_thread_looks_are_prepared_for_without_a_wake() {
        let path = temp_path("early-claims");
        const CHUNK: usize = 16 << 10;
        let config = Config::new(&path).chunk_size(CHUNK).capacity(64 << 20);
        let map: &'static TraceMap = Box::leak(Box::new(TraceMap::create(&config).unwrap()));
        let state: &'static Provisioner = Box::leak(Box::new(Provisioner::new(map)));
        // The claims' own work (each mapped its slot) without their wakes.
        let claimed = 50;
        map.counter(H_NEXT_SEQ).store(claimed, Ordering::Relaxed);
        let spawned = spawn().expect("a thread");
        start(
            Job {
                map,
                mode: Mode::StopWhenFull,
                state,
            },
            Some(spawned),
        );
        let low_water = claimed + lead(state.ahead, claimed).div_ceil(2);
        // A liveness bound, not a timing measurement.
        let deadline = Instant::now() + Duration::from_secs(20);
        while state.prepared_to() < low_water && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Read once the thread has ended (`stop` joins it): it may still be
        // between its two counters.
        state.stop();
        let prepared_to = state.prepared_to();
        let _ = std::fs::remove_file(&path);
        assert!(
            prepared_to >= low_water,
            "prepared up to slot {prepared_to} of {low_water} (claims at {claimed})"
        );
        assert_eq!(state.prepared_count(), prepared_to - claimed);
    }

    /// After a short run, the slots ahead of the last claim, which nobody
    /// claimed, are mapped: only the provisioner can have done it.
    #[test]
    fn the_slots_ahead_of_the_claims_are_mapped_before_anyone_claims_them() {
        let _serial = serial();
        let Ok(mut pagemap) = std::fs::File::open("/proc/self/pagemap") else {
            eprintln!("skipped: /proc/self/pagemap is not readable");
            return;
        };
        let path = temp_path("provision");
        const CHUNK: usize = 16 << 10;
        let recording =
            crate::start(Config::new(&path).chunk_size(CHUNK).capacity(64 << 20)).unwrap();
        let reading = Reading::begin();
        let shared = current(&reading).unwrap();
        let f = crate::register_function("provisioned", file!(), line!(), module_path!());
        // About 50 chunks of events: the lead ramps up to as many slots, so
        // the provisioner prepares past the file's first step (1 MiB: 64
        // slots of 16 KiB) and grows the file to get there.
        record_until_claimed(shared, f, 50);
        let claimed = shared.map.counter(H_NEXT_SEQ).load(Ordering::Relaxed);
        assert!(claimed >= 50, "{claimed} slots claimed");
        let p = &shared.provisioner;
        // What the last claim asks for: at least half its lead prepared.
        let low_water = claimed + lead(p.ahead, claimed).div_ceil(2);
        assert!(low_water > 64, "the lead reaches past the first step");
        // Wait for the provisioner to get there (a liveness bound, not a
        // timing measurement: it fails only if the provisioner never does).
        let deadline = Instant::now() + Duration::from_secs(20);
        while p.prepared_to() < low_water {
            assert!(
                Instant::now() < deadline,
                "the provisioner prepared up to slot {} of {low_water} (claims at {claimed}; \
                 {} prepared; stopped {}; thread started: {}; file: {} slots, growth failure {:?})",
                p.prepared_to(),
                p.prepared_count(),
                p.stopped.load(Ordering::Relaxed),
                p.thread.get().is_some(),
                shared.map.ready_slots(),
                shared.map.growth_failure(),
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let prepared_to = p.prepared_to();
        assert!(
            shared.map.ready_slots() >= prepared_to,
            "the provisioner grew the file"
        );
        let page = crate::file::page_size();
        let mut checked = 0;
        for slot in claimed..prepared_to {
            let start = shared.map.chunk(slot) as usize;
            for addr in (start..start + CHUNK).step_by(page) {
                match present(&mut pagemap, addr, page) {
                    Some(true) => checked += 1,
                    Some(false) => panic!("slot {slot} (claims at {claimed}): page not mapped"),
                    None => {
                        eprintln!("skipped: /proc/self/pagemap cannot be read");
                        drop(recording);
                        let _ = std::fs::remove_file(&path);
                        return;
                    }
                }
            }
        }
        assert!(checked > 0);
        let summary = recording.finish().unwrap();
        assert!(summary.slots_prepared >= prepared_to - claimed);
        // Cut after the claimed slots, not the prepared ones.
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(
            len,
            shared.map.chunks_offset as u64 + summary.chunk_count * CHUNK as u64
        );
        assert_eq!(summary.chunk_count, claimed);
        let _ = std::fs::remove_file(&path);
    }

    /// With the provisioner off, no thread is started and nothing is
    /// prepared ahead: every claim maps its own slot, and the file holds
    /// every event, as with it.
    #[test]
    fn without_the_provisioner_no_thread_starts_and_every_claim_maps_its_own_slot() {
        let _serial = serial();
        let path = temp_path("no-provisioner");
        const CHUNK: usize = 16 << 10;
        let recording = crate::start(
            Config::new(&path)
                .chunk_size(CHUNK)
                .capacity(64 << 20)
                .provisioner(false),
        )
        .unwrap();
        let reading = Reading::begin();
        let shared = current(&reading).unwrap();
        let f = crate::register_function("unprovisioned", file!(), line!(), module_path!());
        let pairs = record_until_claimed(shared, f, 50);
        let p = &shared.provisioner;
        assert!(p.thread.get().is_none(), "a provisioner thread was started");
        let claimed = shared.map.counter(H_NEXT_SEQ).load(Ordering::Relaxed);
        assert!(claimed >= 50, "{claimed} slots claimed");
        // Slot 0 is mapped at start; nothing was prepared past it.
        assert_eq!(
            p.prepared_to(),
            1,
            "slots were prepared ahead of the claims"
        );
        let summary = recording.finish().unwrap();
        assert_eq!(summary.slots_prepared, 0);
        let events = check_finished_file(&path, CHUNK).unwrap();
        // Each pair is two events; the chunks' snapshots add none.
        assert!(
            events >= 2 * pairs as u64,
            "{events} events for {pairs} pairs"
        );
        let _ = std::fs::remove_file(&path);
    }

    /// A fork while the provisioner works, and a finish right after a burst
    /// of claims: the parent's file and the child's own recording are both
    /// complete and cut after the slots they claimed, and finish joined
    /// the provisioner.
    #[test]
    fn finish_and_fork_while_the_provisioner_works_leave_complete_cut_files() {
        let _serial = serial();
        const CHUNK: usize = 4096;
        const PAIRS_PER_CHUNK: usize = CHUNK / 32;
        let parent_path = temp_path("provision-fork-parent");
        let child_path = temp_path("provision-fork-child");
        let _ = std::fs::remove_file(&child_path);
        let recording = crate::start(
            Config::new(&parent_path)
                .chunk_size(CHUNK)
                .capacity(64 << 20),
        )
        .unwrap();
        let reading = Reading::begin();
        let shared = current(&reading).unwrap();
        let p = &shared.provisioner;
        let f = crate::register_function("around-fork", file!(), line!(), module_path!());
        // Record until the provisioner is at work (a liveness bound only).
        let mut pairs = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while p.prepared_count() == 0 {
            assert!(
                Instant::now() < deadline,
                "the provisioner never prepared a slot"
            );
            record_pairs(f, PAIRS_PER_CHUNK);
            pairs += PAIRS_PER_CHUNK;
        }
        const CHILD_PAIRS: usize = 300 * PAIRS_PER_CHUNK;
        // SAFETY: the child records into a file of its own (the fork
        // handler stopped the parent's recording in it) and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = match crate::start(Config::new(&child_path).chunk_size(CHUNK)) {
                Ok(child) => {
                    // The child's recording has a provisioner of its own:
                    // record until it works, then a burst, then finish.
                    let reading = Reading::begin();
                    let own = current(&reading).map(|s| &s.provisioner);
                    let mut child_pairs = 0;
                    while own.is_some_and(|p| p.prepared_count() == 0) && Instant::now() < deadline
                    {
                        record_pairs(f, PAIRS_PER_CHUNK);
                        child_pairs += PAIRS_PER_CHUNK;
                    }
                    record_pairs(f, CHILD_PAIRS);
                    child_pairs += CHILD_PAIRS;
                    match child.finish() {
                        Ok(s) if s.slots_prepared == 0 => 1,
                        Ok(s) if s.events != 1 + 2 * child_pairs as u64 => 4,
                        Ok(s) if check_finished_file(&child_path, CHUNK) != Ok(s.events) => 5,
                        Ok(_) => 0,
                        Err(_) => 2,
                    }
                }
                Err(_) => 3,
            };
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        // A burst of claims, then finish at once: the provisioner is working.
        record_pairs(f, 200 * PAIRS_PER_CHUNK);
        pairs += 200 * PAIRS_PER_CHUNK;
        let claimed = shared.map.counter(H_NEXT_SEQ).load(Ordering::Relaxed);
        let summary = recording.finish().unwrap();
        assert!(p.stopped(), "finish stopped the provisioner");
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "1: the child's provisioner prepared nothing, 2: its finish failed, \
             3: its start failed, 4: it lost events, 5: its file is not complete and cut"
        );

        // The parent's file: the slots claimed, all of them whole, every
        // event (the thread's start and its pairs) in them.
        assert_eq!(summary.chunk_count, claimed);
        assert_eq!(summary.dropped_events, 0);
        assert!(summary.slots_prepared > 0);
        let parent_events = check_finished_file(&parent_path, CHUNK).unwrap();
        assert_eq!(parent_events, 1 + 2 * pairs as u64);
        assert_eq!(parent_events, summary.events);
        assert!(check_finished_file(&child_path, CHUNK).unwrap() > 2 * CHILD_PAIRS as u64);
        let _ = std::fs::remove_file(&parent_path);
        let _ = std::fs::remove_file(&child_path);
    }
}
