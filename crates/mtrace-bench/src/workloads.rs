//! The instrumented workloads, generic over the [`Recorder`], and how one
//! child process times them.
//!
//! Every timed sample runs three times in a row, on the same threads: the
//! floor (two TSC reads and 16-byte stores per scope), the workload with
//! [`NoRecorder`] (the baseline), and the workload with the recorder under
//! test. Interleaving them means a noisy moment of the machine hits all
//! three alike; the overhead of a recorder is its median minus the
//! baseline's median.
//!
//! ```text
//! loop-1t    one thread:  BATCHES x { batch; BATCH x { scope } }
//! loop-2t    two threads at once, each the same as loop-1t
//! recursion  one thread:  BATCHES x { batch; CALLS x recurse(20) }, a scope per call
//! async      tokio, 2 workers: TASKS tasks x POLLS polls (yield_now), every poll instrumented
//! ```
//!
//! The mtrace-only workloads (`#[profile]`, the explicit switch pair, the
//! future adapter polled on one thread) are in [`crate::mtrace_apis`].

use std::hint::black_box;
use std::sync::Barrier;

use crate::measure::{median, time_ns, Floor};
use crate::mtrace_apis;
use crate::peers::{NoRecorder, Recorder};

/// Scopes per batch: fastrace drops local spans past 10240 under one parent.
pub const BATCH: usize = 4096;
/// Batches per timed sample of the loops.
pub const LOOP_BATCHES: usize = 4;
/// Depth of the recursion: scopes open at once at the bottom.
pub const DEPTH: u32 = 20;
/// Top-level calls per batch of the recursion (`CALLS * DEPTH <= BATCH`).
pub const CALLS: usize = BATCH / DEPTH as usize;
/// Batches per timed sample of the recursion.
pub const RECURSION_BATCHES: usize = 4;
/// Tasks spawned per timed sample of the async workload.
pub const TASKS: usize = 64;
/// Polls of each task (it yields `POLLS - 1` times).
pub const POLLS: usize = 64;
/// Untimed samples first (registration, first allocations, page faults).
pub const WARMUP: usize = 3;

/// One workload of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Empty scope begin+end in a tight loop, one thread.
    Loop1,
    /// The same on two threads at once.
    Loop2,
    /// A recursive function, depth 20, a scope per call.
    Recursion,
    /// Tasks on a multi-thread tokio runtime, every poll instrumented.
    Async,
    /// mtrace only: a `#[profile]` function called in a tight loop.
    ProfileFn,
    /// mtrace only: a `#[profile] async fn`, polled once per call.
    ProfileAsyncFn,
    /// mtrace only: `LogicalStack::enter` and the guard's drop, in a loop.
    SwitchPair,
    /// mtrace only: a future on its own logical stack, polled in a loop.
    AdapterPoll,
}

impl Workload {
    /// Every workload, in table order.
    pub const ALL: [Workload; 8] = [
        Workload::Loop1,
        Workload::Loop2,
        Workload::Recursion,
        Workload::Async,
        Workload::ProfileFn,
        Workload::ProfileAsyncFn,
        Workload::SwitchPair,
        Workload::AdapterPoll,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Loop1 => "loop-1t",
            Workload::Loop2 => "loop-2t",
            Workload::Recursion => "recursion",
            Workload::Async => "async",
            Workload::ProfileFn => "profile-fn",
            Workload::ProfileAsyncFn => "profile-async-fn",
            Workload::SwitchPair => "switch-pair",
            Workload::AdapterPoll => "adapter-poll",
        }
    }

    /// Whether only the mtrace rows run it (an API the peers do not have).
    pub fn mtrace_only(self) -> bool {
        matches!(
            self,
            Workload::ProfileFn
                | Workload::ProfileAsyncFn
                | Workload::SwitchPair
                | Workload::AdapterPoll
        )
    }

    /// The mtrace API the workload exercises, for the ratio summary.
    pub fn mtrace_api(self) -> &'static str {
        match self {
            Workload::Loop1 | Workload::Loop2 | Workload::Recursion => "scope!",
            Workload::Async => "on_logical_stack (Instrumented), tokio",
            Workload::ProfileFn => "#[profile] fn",
            Workload::ProfileAsyncFn => "#[profile] async fn",
            Workload::SwitchPair => "LogicalStack::enter + drop",
            Workload::AdapterPoll => "on_logical_stack (Instrumented), poll loop",
        }
    }

    /// By command-line name.
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// The table's title.
    pub fn title(self) -> String {
        match self {
            Workload::Loop1 => format!(
                "(a) empty scope begin+end, tight loop, 1 thread ({} scopes per sample)",
                self.scopes_per_sample()
            ),
            Workload::Loop2 => format!(
                "(a) empty scope begin+end, tight loop, 2 threads at once ({} scopes per thread per sample; ns per scope on the slower thread)",
                self.scopes_per_sample()
            ),
            Workload::Recursion => format!(
                "(b) recursive function, depth {DEPTH}, a scope per call ({} scopes per sample)",
                self.scopes_per_sample()
            ),
            Workload::Async => format!(
                "(c) tokio multi-thread runtime (2 workers): {TASKS} tasks x {POLLS} polls per sample, every poll instrumented (ns per poll)"
            ),
            Workload::ProfileFn => format!(
                "(d) mtrace only: #[mtrace::profile] on an empty #[inline(never)] fn, called in a tight loop, 1 thread ({} calls per sample; ns per call)",
                self.scopes_per_sample()
            ),
            Workload::ProfileAsyncFn => format!(
                "(e) mtrace only: #[mtrace::profile] async fn, ready on its first poll, polled once per call, 1 thread ({} calls per sample; ns per call)",
                self.scopes_per_sample()
            ),
            Workload::SwitchPair => format!(
                "(f) mtrace only: LogicalStack::enter() and the guard's drop (a switch in and out) in a tight loop, 1 thread ({} pairs per sample; ns per pair)",
                self.scopes_per_sample()
            ),
            Workload::AdapterPoll => format!(
                "(g) mtrace only: a future .on_logical_stack(), polled in a loop with a no-op waker, 1 thread ({} polls per sample; ns per poll)",
                self.scopes_per_sample()
            ),
        }
    }

    /// Scopes (polls, for `Async`) per timed sample on each thread.
    pub fn scopes_per_sample(self) -> usize {
        match self {
            Workload::Loop1 | Workload::Loop2 => LOOP_BATCHES * BATCH,
            Workload::Recursion => RECURSION_BATCHES * CALLS * DEPTH as usize,
            Workload::Async => TASKS * POLLS,
            Workload::ProfileFn
            | Workload::ProfileAsyncFn
            | Workload::SwitchPair
            | Workload::AdapterPoll => mtrace_apis::CALLS,
        }
    }

    /// Threads that run scopes (the runtime's workers, for `Async`).
    pub fn threads(self) -> usize {
        match self {
            Workload::Loop2 | Workload::Async => 2,
            _ => 1,
        }
    }

    /// Events (two per scope or poll) a run of `samples` timed samples records.
    pub fn events(self, samples: usize) -> u64 {
        let per_thread = match self {
            Workload::Async => 1,
            _ => self.threads(),
        };
        (2 * self.scopes_per_sample() * per_thread * (samples + WARMUP)) as u64
    }
}

/// Medians of one child's samples, in ns per scope.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// With the recorder.
    pub instrumented: f64,
    /// With [`NoRecorder`].
    pub baseline: f64,
    /// Two floor events.
    pub floor: f64,
}

/// Runs `workload` with recorder `R`: `samples` timed samples after [`WARMUP`].
pub fn run<R: Recorder>(workload: Workload, samples: usize) -> Timing {
    match workload {
        Workload::Loop1 => on_threads::<R>(
            1,
            samples,
            workload,
            loop_sample::<NoRecorder>,
            loop_sample::<R>,
        ),
        Workload::Loop2 => on_threads::<R>(
            2,
            samples,
            workload,
            loop_sample::<NoRecorder>,
            loop_sample::<R>,
        ),
        Workload::Recursion => on_threads::<R>(
            1,
            samples,
            workload,
            recursion_sample::<NoRecorder>,
            recursion_sample::<R>,
        ),
        Workload::Async => on_runtime::<R>(samples),
        // The instrumented sides call mtrace whatever `R` is: only the
        // mtrace recorders run these (see `Workload::mtrace_only`).
        Workload::ProfileFn => on_threads::<R>(
            1,
            samples,
            workload,
            mtrace_apis::plain_fn_sample,
            mtrace_apis::profile_fn_sample,
        ),
        Workload::ProfileAsyncFn => on_threads::<R>(
            1,
            samples,
            workload,
            mtrace_apis::plain_async_sample,
            mtrace_apis::profile_async_sample,
        ),
        Workload::SwitchPair => on_threads::<R>(
            1,
            samples,
            workload,
            mtrace_apis::no_switch_sample,
            mtrace_apis::switch_sample,
        ),
        Workload::AdapterPoll => on_threads::<R>(
            1,
            samples,
            workload,
            mtrace_apis::bare_poll_sample,
            mtrace_apis::adapter_sample,
        ),
    }
}

/// One sample of the loop.
#[inline(never)]
fn loop_sample<R: Recorder>() {
    for _ in 0..LOOP_BATCHES {
        let _batch = R::batch();
        for i in 0..BATCH {
            let _scope = R::scope();
            black_box(i);
        }
    }
}

/// One sample of the recursion.
#[inline(never)]
fn recursion_sample<R: Recorder>() {
    for _ in 0..RECURSION_BATCHES {
        let _batch = R::batch();
        for _ in 0..CALLS {
            black_box(recurse::<R>(black_box(DEPTH)));
        }
    }
}

/// `depth` nested calls, a scope in each.
#[inline(never)]
fn recurse<R: Recorder>(depth: u32) -> u64 {
    let _scope = R::recurse_scope();
    if depth <= 1 {
        black_box(1)
    } else {
        recurse::<R>(depth - 1) + black_box(1)
    }
}

/// Times `base` and `instrumented` on `threads` threads started together;
/// each sample on every thread: floor, baseline, instrumented, with all
/// threads in the same phase at once.
fn on_threads<R: Recorder>(
    threads: usize,
    samples: usize,
    workload: Workload,
    base: fn(),
    instrumented: fn(),
) -> Timing {
    let scopes = workload.scopes_per_sample() as f64;
    let barrier = Barrier::new(threads);
    let per_thread: Vec<Timing> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut floor = Floor::new();
                    let (mut f, mut b, mut x) = (vec![], vec![], vec![]);
                    for i in 0..WARMUP + samples {
                        barrier.wait();
                        let floor_ns = 2.0 * floor.run(2 * workload.scopes_per_sample());
                        let time_base = || {
                            barrier.wait();
                            time_ns(base) / scopes
                        };
                        let time_instrumented = || {
                            barrier.wait();
                            time_ns(|| {
                                instrumented();
                                if t == 0 {
                                    R::end_sample();
                                }
                            }) / scopes
                        };
                        // Alternate which goes first, so neither always follows the floor.
                        let (base_ns, instr_ns) = if i % 2 == 0 {
                            let b = time_base();
                            (b, time_instrumented())
                        } else {
                            let x = time_instrumented();
                            (time_base(), x)
                        };
                        if i >= WARMUP {
                            f.push(floor_ns);
                            b.push(base_ns);
                            x.push(instr_ns);
                        }
                    }
                    Timing {
                        instrumented: median(&x),
                        baseline: median(&b),
                        floor: median(&f),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("workload thread"))
            .collect()
    });
    // Two threads: the slower thread's medians.
    let worst = |get: fn(&Timing) -> f64| per_thread.iter().map(get).fold(f64::NAN, f64::max);
    Timing {
        instrumented: worst(|t| t.instrumented),
        baseline: worst(|t| t.baseline),
        floor: worst(|t| t.floor),
    }
}

/// One sample of the async workload: spawn every task, wait for all.
async fn async_sample<R: Recorder>() {
    let handles: Vec<_> = (0..TASKS)
        .map(|_| {
            tokio::spawn(R::task(async {
                for _ in 1..POLLS {
                    tokio::task::yield_now().await;
                }
            }))
        })
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
}

/// A few short tasks, untimed: gets the workers out of their parked state.
async fn wake() {
    let handles: Vec<_> = (0..4)
        .map(|_| tokio::spawn(tokio::task::yield_now()))
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
}

/// Times the async workload on a 2-worker runtime (the floor on this thread).
fn on_runtime<R: Recorder>(samples: usize) -> Timing {
    let builder = || {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(2);
        b
    };
    let runtime = builder().build().expect("tokio runtime");
    // A recorder that hooks into the runtime (tokio's task hooks) gets one
    // of its own: the baseline's tasks must not run through its hooks.
    let mut hooked = builder();
    let hooked = R::hook_runtime(&mut hooked).then(|| hooked.build().expect("tokio runtime"));
    let instrumented = hooked.as_ref().unwrap_or(&runtime);
    let polls = Workload::Async.scopes_per_sample() as f64;
    let mut floor = Floor::new();
    let (mut f, mut b, mut x) = (vec![], vec![], vec![]);
    for i in 0..WARMUP + samples {
        let floor_ns = 2.0 * floor.run(2 * Workload::Async.scopes_per_sample());
        // Each timed sample starts with the workers awake (a parked worker
        // takes a while to wake), and neither kind always goes first.
        let time_base = || {
            runtime.block_on(wake());
            time_ns(|| runtime.block_on(async_sample::<NoRecorder>())) / polls
        };
        let time_instrumented = || {
            instrumented.block_on(wake());
            time_ns(|| {
                instrumented.block_on(async_sample::<R>());
                R::end_sample();
            }) / polls
        };
        let (base_ns, instr_ns) = if i % 2 == 0 {
            let b = time_base();
            (b, time_instrumented())
        } else {
            let x = time_instrumented();
            (time_base(), x)
        };
        if i >= WARMUP {
            f.push(floor_ns);
            b.push(base_ns);
            x.push(instr_ns);
        }
    }
    // Workers exit (and run their thread-local destructors) before the
    // recorder is asked what it holds.
    runtime.shutdown_timeout(std::time::Duration::from_secs(10));
    if let Some(hooked) = hooked {
        hooked.shutdown_timeout(std::time::Duration::from_secs(10));
    }
    Timing {
        instrumented: median(&x),
        baseline: median(&b),
        floor: median(&f),
    }
}
