//! The parent process: runs one child per recorder and workload, `--rounds`
//! times, and prints a table per workload of the medians, then each mtrace
//! API's cost over the floor, then the lines `mtrace_over_floor_max: X`
//! and `slowest_peer_over_mtrace_min: X`.
//!
//! Columns: `ns/scope` is the instrumented workload's time per scope (per
//! poll for async, per call or pair for the mtrace-only workloads);
//! `overhead` subtracts the uninstrumented baseline timed in the same
//! child; `vs floor` is that overhead over the floor timed in the same
//! child (both for two events; 1.00: the recorder costs what a TSC read and
//! a 16-byte store cost); `vs mtrace` is the overhead over mtrace's (above
//! 1: the peer costs more than mtrace); `trace B/event` is what the recorder
//! keeps per event (file, records, stream: see each peer's module), or,
//! marked `*`, its peak memory above the uninstrumented child per event,
//! for a recorder that cannot say; `peak MiB` is the child's `VmHWM`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::str::FromStr;

use crate::measure::{cpu_model, median};
use crate::workloads::{Workload, WARMUP};
use crate::{ChildResult, Peer};

/// Timed samples per child unless `--samples` says otherwise.
pub const DEFAULT_SAMPLES: usize = 41;
/// Children per recorder and workload unless `--rounds` says otherwise.
pub const DEFAULT_ROUNDS: usize = 3;

/// How each recorder was set up, printed under the tables.
const SETUPS: &[(&str, &str)] = &[
    ("mtrace", "scope!; tasks .on_logical_stack(); ring file on /dev/shm (tmpfs) sized to keep every event"),
    ("mtrace-ring", "the same, into a 4 MiB ring on /dev/shm that wraps (memory reused, as the floor's buffer is): the recording path without the kernel's cost of fresh trace pages; keeps only the last 4 MiB"),
    ("tracy", "tracy-client 0.19, features = [enable] (collecting, not ondemand; no sampling, system tracing or broadcast); no profiler connected, so every zone stays queued in memory; a zone per poll"),
    ("fastrace", "0.7 with `enable`; LocalSpan under a root Span per 4096 scopes; tasks in_span(root).enter_on_poll(); the reporter keeps every SpanRecord"),
    ("puffin", "0.20, scopes on; profile_scope under a batch scope; a scope per poll; new_frame() per sample, a sink keeps every frame"),
    ("tracing-chrome", "tracing 0.1 + tracing-chrome 0.7 ChromeLayer (defaults), JSON file on /dev/shm; tasks .instrument(span)"),
    ("tracing-timing", "tracing 0.1 + a minimal Layer: rdtsc on enter/exit, 24-byte record per interval in a thread-local Vec"),
    ("tracing-registry", "tracing 0.1 + a Layer that does nothing: the registry's own cost per span, what every layer starts from (not a peer: the reference for a layer's own cost)"),
    ("mtrace-tracing", "the same spans under mtrace-tracing's layer, recording with mtrace (ring on /dev/shm sized for every event): a root span on a thread's own stack gets a logical stack of its own (7 events), a span inside it 2"),
    ("mtrace-tracing-thread", "the same with with_own_stacks(false): a root span opens on the thread's own stack (2 events); on async the task's frames then stay open under the next task's (wrong, shown for the cost)"),
    ("mtrace-tokio", "mtrace with tokio's task hooks (mtrace_tokio::instrument on the runtime's builder) instead of .on_logical_stack(): a switch in and out from the before- and after-poll hooks, each task's stack in a table entry with an atomic state word between polls; async only, in a --cfg tokio_unstable build"),
];

/// `--name VALUE` parsed, if present.
pub fn option<T: FromStr>(args: &[String], name: &str) -> Option<T> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1)?.parse().ok()
}

/// `--name a,b,c` parsed with `parse`, or `all` if absent.
fn list<T: Copy>(
    args: &[String],
    name: &str,
    all: &[T],
    parse: fn(&str) -> Option<T>,
) -> Result<Vec<T>, String> {
    let Some(at) = args.iter().position(|a| a == name) else {
        return Ok(all.to_vec());
    };
    let value = args.get(at + 1).ok_or(format!("{name} needs a value"))?;
    value
        .split(',')
        .map(|n| parse(n).ok_or(format!("{name}: unknown name {n:?}")))
        .collect()
}

/// One child: its result, or why it failed.
fn spawn(
    peer: Peer,
    workload: Workload,
    samples: usize,
    tracy_exe: &Path,
) -> Result<ChildResult, String> {
    let exe = if peer == Peer::Tracy {
        tracy_exe.to_owned()
    } else {
        std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?
    };
    let output = Command::new(exe)
        .args(["--child", peer.name(), workload.name(), "--samples"])
        .arg(samples.to_string())
        .env_remove("MTRACE_OUT")
        .output()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("{}: {last}", output.status));
    }
    stdout
        .lines()
        .find_map(ChildResult::from_line)
        .map(|(_, _, r)| r)
        .ok_or_else(|| "no RESULT line".to_owned())
}

/// One row of a table: medians over the rounds.
struct Row {
    ns: f64,
    overhead: f64,
    /// Median over the children of overhead / floor.
    over_floor: f64,
    bytes_per_event: Option<(f64, bool)>,
    peak_mib: Option<f64>,
}

fn row(results: &[ChildResult], none_peak_kib: Option<f64>) -> Row {
    let ns = median(
        &results
            .iter()
            .map(|r| r.timing.instrumented)
            .collect::<Vec<_>>(),
    );
    let overhead = median(
        &results
            .iter()
            .map(|r| r.timing.instrumented - r.timing.baseline)
            .collect::<Vec<_>>(),
    );
    let over_floor = median(
        &results
            .iter()
            .map(|r| (r.timing.instrumented - r.timing.baseline) / r.timing.floor)
            .collect::<Vec<_>>(),
    );
    let peaks: Vec<f64> = results
        .iter()
        .filter_map(|r| r.peak_kib)
        .map(|k| k as f64)
        .collect();
    let peak_kib = (!peaks.is_empty()).then(|| median(&peaks));
    let reported: Vec<f64> = results
        .iter()
        .filter_map(|r| {
            let bytes = r.trace.bytes? as f64;
            let events = r.trace.events.unwrap_or(r.events).max(1) as f64;
            Some(bytes / events)
        })
        .collect();
    let bytes_per_event = if !reported.is_empty() {
        Some((median(&reported), false))
    } else {
        match (peak_kib, none_peak_kib) {
            (Some(peak), Some(none)) => {
                let events = median(&results.iter().map(|r| r.events as f64).collect::<Vec<_>>());
                Some(((peak - none).max(0.0) * 1024.0 / events.max(1.0), true))
            }
            _ => None,
        }
    };
    Row {
        ns,
        overhead,
        over_floor,
        bytes_per_event,
        peak_mib: peak_kib.map(|k| k / 1024.0),
    }
}

/// Runs every child and prints the tables. Errors are bad arguments.
pub fn parent(args: &[String], tracy_exe: &Path) -> Result<(), String> {
    let rounds: usize = option(args, "--rounds").unwrap_or(DEFAULT_ROUNDS).max(1);
    let samples: usize = option(args, "--samples").unwrap_or(DEFAULT_SAMPLES).max(1);
    let peers = list(args, "--peers", &Peer::ALL, Peer::from_name)?;
    let workloads = list(args, "--workloads", &Workload::ALL, Workload::from_name)?;

    println!("mtrace-bench: recorder overhead on the same workloads, one process per recorder and workload");
    println!(
        "machine: {}, {} CPUs, {}; clock: {}",
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_total(),
        if mtrace::bench::has_invariant_tsc() {
            "invariant TSC"
        } else {
            "no invariant TSC"
        }
    );
    println!(
        "{rounds} rounds x {samples} timed samples per process (after {WARMUP} warm-up); medians of the per-process medians"
    );

    if peers.contains(&Peer::MtraceTokio) && !mtrace_tokio::HOOKS_AVAILABLE {
        println!("mtrace-tokio: not measured, tokio's task hooks need a --cfg tokio_unstable build (see crates/mtrace-bench/README.md)");
    }
    let mut results: HashMap<(Peer, Workload), Vec<ChildResult>> = HashMap::new();
    let mut failures: HashMap<(Peer, Workload), String> = HashMap::new();
    for round in 0..rounds {
        for &workload in &workloads {
            for k in 0..peers.len() {
                let peer = peers[(k + round) % peers.len()];
                if !peer.runs(workload) {
                    continue;
                }
                eprintln!(
                    "round {}/{rounds}: {} {}",
                    round + 1,
                    workload.name(),
                    peer.name()
                );
                match spawn(peer, workload, samples, tracy_exe) {
                    Ok(r) => results.entry((peer, workload)).or_default().push(r),
                    Err(e) => {
                        eprintln!("  failed: {e}");
                        failures.insert((peer, workload), e);
                    }
                }
            }
        }
    }

    let mut slowest: Option<(f64, Peer, Workload)> = None;
    // (workload, peer, overhead / floor) of the mtrace rows, for the summary.
    let mut mtrace_ratios: Vec<(Workload, Peer, f64)> = Vec::new();
    for &workload in &workloads {
        let all: Vec<&ChildResult> = peers
            .iter()
            .filter_map(|p| results.get(&(*p, workload)))
            .flatten()
            .collect();
        if all.is_empty() {
            continue;
        }
        let floor = median(&all.iter().map(|r| r.timing.floor).collect::<Vec<_>>());
        let base = median(&all.iter().map(|r| r.timing.baseline).collect::<Vec<_>>());
        let none_peak = results.get(&(Peer::None, workload)).map(|rs| {
            median(
                &rs.iter()
                    .filter_map(|r| r.peak_kib)
                    .map(|k| k as f64)
                    .collect::<Vec<_>>(),
            )
        });
        let mtrace = results
            .get(&(Peer::Mtrace, workload))
            .map(|rs| row(rs, none_peak));
        println!();
        println!("## {}", workload.title());
        println!(
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>13} {:>9}",
            "recorder",
            "ns/scope",
            "overhead",
            "vs floor",
            "vs mtrace",
            "trace B/event",
            "peak MiB"
        );
        println!(
            "{:<16} {floor:>9.2}   (2 x (TSC read + 16-byte store), timed in the same processes)",
            "floor"
        );
        println!("{:<16} {base:>9.2}", "uninstrumented");
        for &peer in &peers {
            let name = peer.name();
            if let Some(reason) = failures.get(&(peer, workload)) {
                if !results.contains_key(&(peer, workload)) {
                    println!("{name:<16} failed: {reason}");
                    continue;
                }
            }
            let Some(rs) = results.get(&(peer, workload)) else {
                continue;
            };
            let r = row(rs, none_peak);
            let peak = r.peak_mib.map_or("-".to_owned(), |m| format!("{m:.1}"));
            if peer == Peer::None {
                println!(
                    "{:<16} {:>9} {:>9} {:>9} {:>9} {:>13} {peak:>9}",
                    "(no recorder)", "", "", "", "", ""
                );
                continue;
            }
            if peer.is_mtrace() || peer == Peer::MtraceTokio {
                mtrace_ratios.push((workload, peer, r.over_floor));
            }
            let ratio = mtrace.as_ref().map(|m| r.overhead / m.overhead);
            if let (Some(ratio), false) = (ratio, peer.is_mtrace() || peer.is_integration()) {
                if slowest.is_none_or(|(s, _, _)| ratio < s) {
                    slowest = Some((ratio, peer, workload));
                }
            }
            let bytes = match r.bytes_per_event {
                Some((b, true)) => format!("{b:.1}*"),
                Some((b, false)) => format!("{b:.1}"),
                None => "-".to_owned(),
            };
            let notes: Vec<&str> = rs
                .iter()
                .map(|r| r.trace.note.as_str())
                .filter(|n| !n.is_empty())
                .collect();
            println!(
                "{name:<16} {:>9.2} {:>9.2} {:>9.2} {:>9} {bytes:>13} {peak:>9}{}",
                r.ns,
                r.overhead,
                r.over_floor,
                ratio.map_or("-".to_owned(), |x| format!("{x:.2}")),
                notes.first().map_or(String::new(), |n| format!("  ({n})")),
            );
        }
    }

    print_mtrace_ratios(&workloads, &mtrace_ratios);

    println!();
    println!("* no byte count from the recorder: its peak memory above the no-recorder process, per event");
    for (name, setup) in SETUPS {
        if peers.iter().any(|p| p.name() == *name) {
            println!("{name}: {setup}");
        }
    }
    if let Some((ratio, peer, workload)) = slowest {
        println!(
            "slowest_peer_over_mtrace: {} on {}",
            peer.name(),
            workload.name()
        );
        println!("slowest_peer_over_mtrace_min: {ratio:.2}");
    }
    Ok(())
}

/// The summary of the mtrace rows: each API's overhead over the floor on
/// each workload, then the largest of each mtrace row as a line of its own.
fn print_mtrace_ratios(workloads: &[Workload], ratios: &[(Workload, Peer, f64)]) {
    if ratios.is_empty() {
        return;
    }
    let get = |w: Workload, p: Peer| {
        ratios
            .iter()
            .find(|(rw, rp, _)| *rw == w && *rp == p)
            .map(|r| r.2)
    };
    let cell = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
    println!();
    println!("## mtrace per event over the floor: overhead / floor (both for two events; medians of the per-process ratios)");
    println!(
        "{:<44} {:<17} {:>17} {:>12}",
        "API", "workload", "keeps every event", "4 MiB ring"
    );
    for &w in workloads {
        let (all, ring) = (get(w, Peer::Mtrace), get(w, Peer::MtraceRing));
        if all.is_some() || ring.is_some() {
            println!(
                "{:<44} {:<17} {:>17} {:>12}",
                w.mtrace_api(),
                w.name(),
                cell(all),
                cell(ring)
            );
        }
    }
    // The runtime's hooks beside the adapter (their row keeps every event).
    if let Some(hooks) = get(Workload::Async, Peer::MtraceTokio) {
        println!(
            "{:<44} {:<17} {:>17} {:>12}",
            "tokio task hooks (mtrace_tokio::instrument)",
            Workload::Async.name(),
            cell(Some(hooks)),
            "-"
        );
    }
    for (peer, label) in [
        (Peer::Mtrace, "mtrace_over_floor_max"),
        (Peer::MtraceRing, "mtrace_ring_over_floor_max"),
    ] {
        let worst = ratios
            .iter()
            .filter(|r| r.1 == peer)
            .max_by(|a, b| a.2.total_cmp(&b.2));
        if let Some((w, _, ratio)) = worst {
            println!("{label}: {ratio:.2} ({} on {})", w.mtrace_api(), w.name());
        }
    }
}

/// `MemTotal` from `/proc/meminfo`, as `N GiB`.
fn memory_total() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or("memory unknown".to_owned(), |kib| {
            format!("{:.0} GiB", kib as f64 / (1 << 20) as f64)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn options_and_lists() {
        let a = args("--bench --rounds 5 --peers mtrace,tracy");
        assert_eq!(option::<usize>(&a, "--rounds"), Some(5));
        assert_eq!(option::<usize>(&a, "--samples"), None);
        assert_eq!(
            list(&a, "--peers", &Peer::ALL, Peer::from_name),
            Ok(vec![Peer::Mtrace, Peer::Tracy])
        );
        assert_eq!(
            list(&a, "--workloads", &Workload::ALL, Workload::from_name),
            Ok(Workload::ALL.to_vec())
        );
        assert!(list(
            &args("--peers nope"),
            "--peers",
            &Peer::ALL,
            Peer::from_name
        )
        .is_err());
    }
}
