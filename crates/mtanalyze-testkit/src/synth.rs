//! The synthetic trace generator shared by the `synth` example and the
//! analyzer throughput benchmark: a few hundred functions in deep call trees
//! with direct and mutual recursion, threads running their own stacks, and
//! fibers migrating between threads. Deterministic for a given seed.

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

/// Writes the synthetic trace to `path`; returns the number of events.
pub fn generate(
    args: &SynthOptions,
    path: &Path,
    cmdline: String,
) -> Result<u64, Box<dyn std::error::Error>> {
    let out = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut w = TraceWriter::new(
        out,
        WriterOptions {
            cmdline,
            ..Default::default()
        },
    )?;
    let mut rng = Rng(args.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
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
