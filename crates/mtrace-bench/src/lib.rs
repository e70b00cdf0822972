//! Recorder overhead, side by side: mtrace against the Rust instrumentation
//! recorders people pick instead, on the same workloads, in one run.
//!
//! ```text
//! cargo bench -p mtrace-bench                                   # everything, 3 rounds
//! cargo bench -p mtrace-bench -- --rounds 9 --samples 61        # longer
//! cargo bench -p mtrace-bench -- --peers mtrace,tracy --workloads loop-1t,async
//! ```
//!
//! The bench binary is a parent that re-executes itself once per recorder
//! and workload (`--child RECORDER WORKLOAD`), so that each recorder's
//! process-wide state (threads, queues, a global subscriber) lives alone in
//! its process and `VmHWM` is that workload's peak memory. Every child
//! times, interleaved on the same threads, the floor, the uninstrumented
//! workload and the instrumented one ([`workloads`]), asks the recorder
//! what it kept ([`peers::TraceStats`]), and prints one `RESULT` line. The
//! parent runs every child `--rounds` times, in a rotated order, and prints
//! one table per workload of medians ([`report`]).
//!
//! Module map: `peers` (one file per recorder, behind the `Recorder`
//! trait; Tracy's is the `tracy_peer` binary, since its client starts
//! before `main` in any binary that links it), `workloads` (the workloads
//! and their timing), `mtrace_apis` (the workloads of mtrace's other APIs,
//! which only the mtrace rows run), `measure` (medians, the floor,
//! `VmHWM`), `report` (children, tables, the ratio lines). See the crate's README for how each
//! recorder is set up.
#![deny(missing_docs)]

pub mod measure;
pub mod mtrace_apis;
pub mod peers;
pub mod report;
pub mod workloads;

use peers::Recorder;
use workloads::Workload;

/// The recorders, by command-line name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// No recorder: the reference for peak memory.
    None,
    /// mtrace (this repository), keeping every event.
    Mtrace,
    /// mtrace into a 4 MiB ring that wraps: the recording path without the
    /// cost of fresh trace memory (see `peers::mtrace`).
    MtraceRing,
    /// Tracy through `tracy-client`.
    Tracy,
    /// fastrace.
    Fastrace,
    /// puffin.
    Puffin,
    /// `tracing` with `tracing-chrome`'s layer.
    TracingChrome,
    /// `tracing` with a minimal timing layer.
    TracingTiming,
    /// `tracing` with a layer that does nothing: the registry's own cost,
    /// the reference for what a layer adds.
    TracingRegistry,
    /// `tracing` with `mtrace-tracing`'s layer, recording with mtrace.
    MtraceTracing,
    /// The same with `with_own_stacks(false)`.
    MtraceTracingThread,
    /// mtrace with tokio's task hooks (`mtrace-tokio`) instead of the
    /// adapter: `async` only, in a `--cfg tokio_unstable` build.
    MtraceTokio,
}

impl Peer {
    /// Every recorder, in table order.
    pub const ALL: [Peer; 12] = [
        Peer::None,
        Peer::Mtrace,
        Peer::MtraceRing,
        Peer::Tracy,
        Peer::Fastrace,
        Peer::Puffin,
        Peer::TracingChrome,
        Peer::TracingTiming,
        Peer::TracingRegistry,
        Peer::MtraceTracing,
        Peer::MtraceTracingThread,
        Peer::MtraceTokio,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Peer::None => "none",
            Peer::Mtrace => "mtrace",
            Peer::MtraceRing => "mtrace-ring",
            Peer::Tracy => "tracy",
            Peer::Fastrace => "fastrace",
            Peer::Puffin => "puffin",
            Peer::TracingChrome => "tracing-chrome",
            Peer::TracingTiming => "tracing-timing",
            Peer::TracingRegistry => "tracing-registry",
            Peer::MtraceTracing => "mtrace-tracing",
            Peer::MtraceTracingThread => "mtrace-tracing-thread",
            Peer::MtraceTokio => "mtrace-tokio",
        }
    }

    /// By command-line name.
    pub fn from_name(name: &str) -> Option<Peer> {
        Peer::ALL.into_iter().find(|p| p.name() == name)
    }

    /// One of the mtrace rows.
    pub fn is_mtrace(self) -> bool {
        matches!(self, Peer::Mtrace | Peer::MtraceRing)
    }

    /// One of mtrace's own integrations (`mtrace-tracing`, `mtrace-tokio`):
    /// a row beside the peers it plugs into, not a peer `mtrace` is
    /// compared against.
    pub fn is_integration(self) -> bool {
        matches!(
            self,
            Peer::MtraceTracing
                | Peer::MtraceTracingThread
                | Peer::MtraceTokio
                | Peer::TracingRegistry
        )
    }

    /// Whether this recorder runs `workload` (the mtrace-only workloads
    /// exercise APIs the other recorders do not have; tokio's hooks exist
    /// only in a `--cfg tokio_unstable` build, and only for tasks).
    pub fn runs(self, workload: Workload) -> bool {
        match self {
            Peer::MtraceTokio => mtrace_tokio::HOOKS_AVAILABLE && workload == Workload::Async,
            _ => self.is_mtrace() || !workload.mtrace_only(),
        }
    }
}

/// What one child measured.
#[derive(Clone, Debug)]
pub struct ChildResult {
    /// Timing medians, ns per scope.
    pub timing: workloads::Timing,
    /// Events the workload recorded (two per scope or poll).
    pub events: u64,
    /// What the recorder says it kept.
    pub trace: peers::TraceStats,
    /// `VmHWM` at the end, KiB.
    pub peak_kib: Option<u64>,
}

impl ChildResult {
    /// The `RESULT` line a child prints (the note last: it may hold spaces).
    pub fn to_line(&self, peer: Peer, workload: Workload) -> String {
        let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
        format!(
            "RESULT peer={} workload={} ns={:.4} base={:.4} floor={:.4} events={} trace_bytes={} trace_events={} peak_kib={} note={}",
            peer.name(),
            workload.name(),
            self.timing.instrumented,
            self.timing.baseline,
            self.timing.floor,
            self.events,
            opt(self.trace.bytes),
            opt(self.trace.events),
            opt(self.peak_kib),
            self.trace.note,
        )
    }

    /// Parses a `RESULT` line back.
    pub fn from_line(line: &str) -> Option<(Peer, Workload, ChildResult)> {
        let rest = line.strip_prefix("RESULT ")?;
        let (fields, note) = match rest.split_once(" note=") {
            Some((fields, note)) => (fields, note.trim().to_owned()),
            None => (rest, String::new()),
        };
        let get = |key: &str| {
            fields
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        };
        let num = |key: &str| get(key)?.parse::<f64>().ok();
        let int = |key: &str| get(key)?.parse::<u64>().ok();
        Some((
            Peer::from_name(get("peer")?)?,
            Workload::from_name(get("workload")?)?,
            ChildResult {
                timing: workloads::Timing {
                    instrumented: num("ns")?,
                    baseline: num("base")?,
                    floor: num("floor")?,
                },
                events: int("events")?,
                trace: peers::TraceStats {
                    bytes: int("trace_bytes"),
                    events: int("trace_events"),
                    note,
                },
                peak_kib: int("peak_kib"),
            },
        ))
    }
}

/// Runs one workload under one recorder in this process (Tracy's runs in
/// its own binary, `tracy_peer`, and a recorder does not run a workload of
/// another's API: `None` here).
pub fn run_child(peer: Peer, workload: Workload, samples: usize) -> Option<ChildResult> {
    if !peer.runs(workload) {
        return None;
    }
    Some(match peer {
        Peer::None => child::<peers::NoRecorder>(workload, samples),
        Peer::Mtrace => child::<peers::mtrace::Mtrace>(workload, samples),
        Peer::MtraceRing => child::<peers::mtrace::MtraceRing>(workload, samples),
        Peer::Tracy => return None,
        Peer::Fastrace => child::<peers::fastrace::Fastrace>(workload, samples),
        Peer::Puffin => child::<peers::puffin::Puffin>(workload, samples),
        Peer::TracingChrome => child::<peers::tracing::TracingChrome>(workload, samples),
        Peer::TracingTiming => child::<peers::tracing::TracingTiming>(workload, samples),
        Peer::TracingRegistry => child::<peers::tracing::TracingRegistry>(workload, samples),
        Peer::MtraceTracing => child::<peers::tracing::MtraceTracing>(workload, samples),
        Peer::MtraceTracingThread => {
            child::<peers::tracing::MtraceTracingThread>(workload, samples)
        }
        Peer::MtraceTokio => child::<peers::mtrace::MtraceTokio>(workload, samples),
    })
}

/// Runs `workload` under `R` in this process.
pub fn child<R: Recorder>(workload: Workload, samples: usize) -> ChildResult {
    let events = workload.events(samples);
    let recorder = R::start(events);
    let timing = workloads::run::<R>(workload, samples);
    let mut trace = recorder.finish();
    if let Some(kept) = trace.events.filter(|&kept| kept < events) {
        // The recorder lost some (fastrace drops what its queues cannot take).
        let kept = format!("kept {kept} of {events} events");
        trace.note = [trace.note.as_str(), &kept]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
    }
    ChildResult {
        timing,
        events,
        trace,
        peak_kib: measure::peak_rss_kib(),
    }
}

/// A child's arguments: `--child RECORDER WORKLOAD [--samples N]`.
fn child_args(args: &[String]) -> Option<(Peer, Workload, usize)> {
    let at = args.iter().position(|a| a == "--child")?;
    let peer = Peer::from_name(args.get(at + 1)?)?;
    let workload = Workload::from_name(args.get(at + 2)?)?;
    let samples = report::option(args, "--samples").unwrap_or(report::DEFAULT_SAMPLES);
    Some((peer, workload, samples))
}

fn usage_exit() -> ! {
    eprintln!("usage: --child RECORDER WORKLOAD [--samples N]");
    std::process::exit(2);
}

/// `main` of a binary that runs only recorder `R` (as `peer`), as a child.
pub fn child_main<R: Recorder>(peer: Peer) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match child_args(&args) {
        Some((p, workload, samples)) if p == peer && peer.runs(workload) => {
            let result = child::<R>(workload, samples);
            println!("{}", result.to_line(peer, workload));
        }
        _ => usage_exit(),
    }
}

/// The bench binary's `main`: a child with `--child RECORDER WORKLOAD`,
/// else the parent. `tracy_exe` is the binary that runs the Tracy child.
pub fn main(tracy_exe: &std::path::Path) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Tools that enumerate benchmarks run `--list`: there is nothing to list.
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if args.iter().any(|a| a == "--child") {
        let Some((peer, workload, samples)) = child_args(&args) else {
            usage_exit();
        };
        match run_child(peer, workload, samples) {
            Some(result) => println!("{}", result.to_line(peer, workload)),
            None => usage_exit(),
        }
        return;
    }
    if let Err(message) = report::parent(&args, tracy_exe) {
        eprintln!("mtrace-bench: {message}");
        std::process::exit(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_round_trips() {
        let result = ChildResult {
            timing: workloads::Timing {
                instrumented: 19.5,
                baseline: 0.25,
                floor: 18.75,
            },
            events: 1000,
            trace: peers::TraceStats {
                bytes: Some(16400),
                events: None,
                note: "dropped_events=3 wrapped=false".to_owned(),
            },
            peak_kib: Some(5120),
        };
        let line = result.to_line(Peer::TracingChrome, Workload::Async);
        let (peer, workload, back) = ChildResult::from_line(&line).expect("parses");
        assert_eq!((peer, workload), (Peer::TracingChrome, Workload::Async));
        assert_eq!(back.timing.instrumented, 19.5);
        assert_eq!(back.timing.floor, 18.75);
        assert_eq!(back.trace.bytes, Some(16400));
        assert_eq!(back.trace.events, None);
        assert_eq!(back.trace.note, "dropped_events=3 wrapped=false");
        assert_eq!(back.peak_kib, Some(5120));
    }

    #[test]
    fn only_mtrace_runs_the_mtrace_only_workloads() {
        assert!(Peer::Mtrace.runs(Workload::ProfileFn));
        assert!(Peer::MtraceRing.runs(Workload::AdapterPoll));
        assert!(Peer::Tracy.runs(Workload::Async));
        assert!(!Peer::Tracy.runs(Workload::SwitchPair));
        assert!(!Peer::None.runs(Workload::ProfileAsyncFn));
        assert!(run_child(Peer::Fastrace, Workload::ProfileFn, 1).is_none());
    }

    #[test]
    fn mtrace_only_workloads_record_two_events_per_unit() {
        for w in Workload::ALL.into_iter().filter(|w| w.mtrace_only()) {
            let result = child::<peers::mtrace::Mtrace>(w, 1);
            let expected = w.events(1);
            let kept = result.trace.events.expect("mtrace counts its events");
            // Plus the thread's start (and exit) event, and where each
            // sample runs on a stack of its own, that stack's end.
            let ends = match w {
                Workload::SwitchPair | Workload::AdapterPoll => (1 + workloads::WARMUP) as u64,
                _ => 0,
            };
            assert!(
                (expected..=expected + 2 + ends).contains(&kept),
                "{}: recorded {kept}, expected {expected}",
                w.name()
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for p in Peer::ALL {
            assert_eq!(Peer::from_name(p.name()), Some(p));
        }
        for w in Workload::ALL {
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
    }
}
