//! The synthetic trace generators shared by the `synth` example and the
//! analyzer throughput benchmark. Both are deterministic for a given seed.
//!
//! * [`generate`]: a few hundred functions in deep call trees with direct
//!   and mutual recursion, threads running their own stacks, and a few
//!   long-lived fibers migrating between threads (many events, few stacks).
//! * [`generate_tasks`]: an async service as the recorder's
//!   `crates/mtrace/examples/async_tasks.rs` records it: many short-lived
//!   tasks, each on its own named logical stack, polled two or three times
//!   by whichever worker thread is free (many stacks, a dozen events each,
//!   the last the task's `end`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use mtrace_format::{EventKind, FunctionId, StackId, ThreadId, TraceWriter, WriterOptions};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct Thread {
    current: Option<usize>, // fiber index, None = own stack
    own: Vec<FunctionId>,
}

/// What to generate.
pub struct SynthOptions {
    /// Events to write (approximately: open frames are not closed).
    pub events: u64,
    /// Threads.
    pub threads: u64,
    /// Logical stacks (fibers) that migrate between threads.
    pub fibers: u64,
    /// Distinct functions.
    pub functions: u32,
    /// Random seed.
    pub seed: u64,
}

/// The generators' trace writer.
type Writer = TraceWriter<BufWriter<File>>;

/// A writer into a new file at `path` and the generator's random numbers
/// for `seed`.
fn start(
    path: &Path,
    cmdline: String,
    seed: u64,
) -> Result<(Writer, Rng), Box<dyn std::error::Error>> {
    let out = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let w = TraceWriter::new(
        out,
        WriterOptions {
            cmdline,
            ..Default::default()
        },
    )?;
    Ok((w, Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)))
}

/// Writes the synthetic trace to `path`; returns the number of events.
pub fn generate(
    args: &SynthOptions,
    path: &Path,
    cmdline: String,
) -> Result<u64, Box<dyn std::error::Error>> {
    let (mut w, mut rng) = start(path, cmdline, args.seed)?;
    let fns: Vec<FunctionId> = (0..args.functions.max(4))
        .map(|i| {
            let module = format!("app::m{}", i % 17);
            w.function(
                &format!("{module}::f{i}"),
                &format!("src/m{}.rs", i % 17),
                10 + i * 7,
                &module,
            )
        })
        .collect();
    let stacks: Vec<StackId> = (0..args.fibers)
        .map(|i| w.stack(&format!("fiber-{i}")))
        .collect();
    let threads = args.threads.max(1);
    for t in 1..=threads {
        w.thread_name(ThreadId(t), 1000 + t, &format!("worker-{t}"));
    }
    let mut state: Vec<Thread> = (0..threads)
        .map(|_| Thread {
            current: None,
            own: Vec::new(),
        })
        .collect();
    let mut fiber_frames: Vec<Vec<FunctionId>> = vec![Vec::new(); args.fibers as usize];
    let mut fiber_owner: Vec<Option<usize>> = vec![None; args.fibers as usize];
    let mut now = 1_000u64;
    let mut written = 0u64;
    // Each thread runs a burst of events before another thread takes over,
    // as under a scheduler; time is global, so hand-offs are consistent.
    while written < args.events {
        let t = rng.below(threads) as usize;
        let burst = 1 + rng.below(64);
        for _ in 0..burst {
            now += 1 + rng.below(40);
            let tid = ThreadId(t as u64 + 1);
            let roll = rng.below(1000);
            let th = &mut state[t];
            if roll < 8 && !stacks.is_empty() {
                // switch: back to own stack, or onto a fiber nobody runs
                let target = match th.current {
                    Some(f) => {
                        fiber_owner[f] = None;
                        None
                    }
                    None => {
                        let f = rng.below(stacks.len() as u64) as usize;
                        if fiber_owner[f].is_some() {
                            continue;
                        }
                        fiber_owner[f] = Some(t);
                        Some(f)
                    }
                };
                th.current = target;
                let id = target.map_or(StackId::OWN, |f| stacks[f]);
                w.event(tid, now, EventKind::Switch(id))?;
                written += 1;
                continue;
            }
            let frames = match th.current {
                Some(f) => &mut fiber_frames[f],
                None => &mut th.own,
            };
            // Deeper stacks are more likely to return; keeps depth around 10-30.
            let depth = frames.len() as u64;
            let enter = depth < 3 || rng.below(100) >= 35 + depth.min(60);
            if enter {
                let f = match (rng.below(100), frames.last()) {
                    // direct recursion
                    (0..=9, Some(&top)) => top,
                    // mutual recursion within a small family
                    (10..=17, Some(&top)) => fns[((top.0 as usize - 1) ^ 1) % fns.len()],
                    // a callee close to the caller, as real call trees are
                    (_, Some(&top)) => fns[(top.0 as usize + rng.below(12) as usize) % fns.len()],
                    (_, None) => fns[rng.below(16) as usize],
                };
                frames.push(f);
                w.event(tid, now, EventKind::Enter(f))?;
            } else if let Some(f) = frames.pop() {
                w.event(tid, now, EventKind::Exit(f))?;
            } else {
                continue;
            }
            written += 1;
        }
    }
    w.finish(Some(now + 1))?;
    Ok(written)
}

/// What [`generate_tasks`] writes.
#[derive(Clone, Debug)]
pub struct TaskOptions {
    /// Tasks (requests), each on its own logical stack `request-N`.
    pub tasks: u64,
    /// Worker threads that poll them.
    pub workers: u64,
    /// Tasks alive at once: a finished task makes room for the next, as
    /// requests arrive at a busy server.
    pub in_flight: u64,
    /// Random seed.
    pub seed: u64,
}

impl Default for TaskOptions {
    fn default() -> Self {
        TaskOptions {
            tasks: 500_000,
            workers: 4,
            in_flight: 256,
            seed: 1,
        }
    }
}

/// Where a task is between polls.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    /// Not polled yet.
    Spawned,
    /// Waiting in `fetch` for a page of rows with another to follow (one
    /// task in four: the middle poll).
    MorePages,
    /// Waiting in `fetch` for the last page of rows.
    LastPage,
}

/// Writes a many-task trace to `path`; returns the number of events.
///
/// Every task is a request of the recorder's `async_tasks` example:
/// `handle` parses (CPU), awaits `fetch` (the task is switched out while
/// it waits) and renders (CPU). Each poll runs on one worker, is framed by
/// a switch onto the task's stack and a switch back to the worker's own
/// stack, and leaves the task's open frames (`handle`, `fetch`) on the
/// task's stack for the next worker:
///
/// ```text
/// poll 1 (worker A):  switch(task) enter handle, enter parse, exit parse, enter fetch  switch(own)
/// poll 2 (worker B):  switch(task) enter decode, exit decode                           switch(own)   (one task in four)
/// poll 3 (worker C):  switch(task) exit fetch, enter render, exit render, exit handle  switch(own)  end(task)
/// ```
///
/// Thirteen events a task (seventeen with the middle poll), as the recorder
/// writes for the example: the last is the task's `end`, when the runtime
/// drops it (format version 3). Workers pick the task that became ready first
/// whenever they are free, so they run in parallel and a task's polls land
/// on different workers; a task's next poll starts after its wait, never
/// while another worker still runs it.
pub fn generate_tasks(
    args: &TaskOptions,
    path: &Path,
    cmdline: String,
) -> Result<u64, Box<dyn std::error::Error>> {
    let (mut w, mut rng) = start(path, cmdline, args.seed)?;
    // The example's functions, as the recorder names them.
    let file = "crates/mtrace/examples/async_tasks.rs";
    let module = "async_tasks";
    let handle = w.function("handle", file, 93, module);
    let parse = w.function("parse", file, 100, module);
    let fetch = w.function("fetch", file, 105, module);
    // Not in the example: a step of `fetch` between two waits.
    let decode = w.function("decode", file, 107, module);
    let render = w.function("render", file, 111, module);
    let workers = args.workers.max(1);
    for t in 1..=workers {
        w.thread_name(ThreadId(t), 1000 + t, "tokio-rt-worker");
    }
    // When each worker is next free, in ns.
    let mut free_at = vec![1_000u64; workers as usize];
    // Tasks ready to be polled: (ready at, task number, its stack, phase).
    let mut ready: BinaryHeap<Reverse<(u64, u64, u64, Phase)>> = BinaryHeap::new();
    let mut spawned = 0u64;
    let mut spawn = |w: &mut TraceWriter<_>, ready: &mut BinaryHeap<_>, at: u64| {
        if spawned < args.tasks {
            let stack = w.stack(&format!("request-{spawned}"));
            ready.push(Reverse((at, spawned, stack.0, Phase::Spawned)));
            spawned += 1;
        }
    };
    for i in 0..args.in_flight.max(1) {
        spawn(&mut w, &mut ready, 1_000 + i * 50);
    }
    let mut written = 0u64;
    let mut end = 0u64;
    while let Some(Reverse((at, n, stack, phase))) = ready.pop() {
        // The worker free first; ties go to the lowest, so all workers work.
        let (worker, &free) = free_at
            .iter()
            .enumerate()
            .min_by_key(|&(_, &t)| t)
            .unwrap_or((0, &0));
        let tid = ThreadId(worker as u64 + 1);
        let mut now = at.max(free) + 100 + rng.below(400);
        let mut poll: Vec<(u64, EventKind)> = Vec::with_capacity(6);
        // CPU work takes tens of microseconds (as the example's `spin`
        // does), each event a little time of its own.
        let mut step = |now: &mut u64, work: u64, kind| {
            *now += work;
            poll.push((*now, kind));
        };
        step(&mut now, 0, EventKind::Switch(StackId(stack)));
        let next = match phase {
            Phase::Spawned => {
                step(&mut now, 50, EventKind::Enter(handle));
                step(&mut now, 50, EventKind::Enter(parse));
                step(&mut now, 40_000 + rng.below(60_000), EventKind::Exit(parse));
                step(&mut now, 50, EventKind::Enter(fetch));
                Some(if rng.below(4) == 0 {
                    Phase::MorePages
                } else {
                    Phase::LastPage
                })
            }
            Phase::MorePages => {
                step(&mut now, 50, EventKind::Enter(decode));
                step(&mut now, 5_000 + rng.below(20_000), EventKind::Exit(decode));
                Some(Phase::LastPage)
            }
            Phase::LastPage => {
                step(&mut now, 50, EventKind::Exit(fetch));
                step(&mut now, 50, EventKind::Enter(render));
                step(
                    &mut now,
                    80_000 + rng.below(160_000),
                    EventKind::Exit(render),
                );
                step(&mut now, 50, EventKind::Exit(handle));
                None
            }
        };
        step(&mut now, 50, EventKind::Switch(StackId::OWN));
        if next.is_none() {
            // The runtime drops the finished task on the worker: its stack ends.
            step(&mut now, 50, EventKind::End(StackId(stack)));
        }
        for (tick, kind) in poll {
            w.event(tid, tick, kind)?;
            written += 1;
        }
        free_at[worker] = now;
        end = end.max(now);
        match next {
            // The fetch waits 1-2 ms (the example's `--wait-ms 1`, and the
            // timer's resolution) before the task is woken.
            Some(p) => ready.push(Reverse((
                now + 1_000_000 + rng.below(1_000_000),
                n,
                stack,
                p,
            ))),
            // A new request arrives in its place.
            None => spawn(&mut w, &mut ready, now + rng.below(20_000)),
        }
    }
    w.finish(Some(end + 1))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The many-task trace is what the benchmark claims it is: one stack
    /// per task, polled two or three times by several workers, thirteen
    /// events a task (its `end` the last) plus four per middle poll, every
    /// frame closed, every task ended, and nothing for the analyzer to
    /// repair.
    #[test]
    fn tasks_are_short_lived_migrating_stacks_of_a_dozen_events() {
        let path = std::env::temp_dir().join(format!("synth-tasks-{}.bin", std::process::id()));
        let opts = TaskOptions {
            tasks: 2_000,
            ..TaskOptions::default()
        };
        let written = generate_tasks(&opts, &path, String::new()).unwrap();
        let trace = mtanalyze::load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let r = mtanalyze::analyze(&trace, &mtanalyze::AnalyzeOptions::default()).unwrap();
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(r.trace.events, written);
        let tasks: Vec<_> = r
            .stacks
            .iter()
            .filter(|s| s.name.starts_with("request-"))
            .collect();
        assert_eq!(tasks.len(), 2_000);
        assert_eq!(r.stacks.len(), 2_000 + opts.workers as usize);
        let middle_polls: u64 = tasks.iter().map(|s| s.switches_in - 2).sum();
        assert!(tasks.iter().all(|s| (2..=3).contains(&s.switches_in)));
        assert!((300..700).contains(&middle_polls), "{middle_polls} of 2000");
        assert_eq!(written, 2_000 * 13 + middle_polls * 4);
        assert!(tasks.iter().all(|s| s.ended));
        let migrated = tasks.iter().filter(|s| s.threads.len() > 1).count();
        assert!(migrated > 1_000, "{migrated} of 2000 tasks changed workers");
        assert!(r.functions.iter().all(|f| f.open_at_end == 0));
        let handle = r.functions.iter().find(|f| f.function == "handle").unwrap();
        assert_eq!(handle.ncalls, 2_000);
    }
}
