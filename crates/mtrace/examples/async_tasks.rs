//! An async service on tokio's multi-thread runtime, recorded with mtrace.
//!
//! ```text
//! cargo run --release -p mtrace --example async_tasks -- --out tasks.bin
//! cargo run --release -p mtanalyze-cli -- tasks.bin
//! cargo run --release -p mtanalyze-cli -- tasks.bin --stacks --limit 5
//! ```
//!
//! Every request is a task that parses (CPU), waits for a fetch (a tokio
//! sleep standing in for I/O) and renders (CPU). Each task runs on its own
//! logical stack (`on_logical_stack`), so its `async fn` frames stay open
//! across the await and move with the task to whichever worker polls it
//! next; the wait shows as `paused`, not as time spent in `fetch`.
//!
//! `--one-stack` records the same service without logical stacks, as a
//! profiler with one stack per thread sees it: frames of different
//! requests interleave on the workers' stacks, exits stop matching their
//! enters, and the analyzer reports them as warnings.
//!
//! The end-to-end tests (`tests/e2e/async_tasks.rs`) include this file and
//! call [`record`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use mtrace::LogicalStackExt;

/// What [`record`] runs.
#[derive(Clone, Debug)]
pub struct Service {
    /// Requests, one task each, all spawned at once.
    pub requests: u64,
    /// Worker threads of the runtime.
    pub workers: usize,
    /// How long each fetch waits.
    pub wait: Duration,
    /// Put each task on its own logical stack (`false`: `--one-stack`).
    pub logical_stacks: bool,
    /// Rotate the trace into a series of files (`--rotate 50ms`).
    pub rotate: Option<mtrace::Rotation>,
}

impl Default for Service {
    fn default() -> Self {
        Service {
            requests: 200,
            workers: 2,
            wait: Duration::from_millis(2),
            logical_stacks: true,
            rotate: None,
        }
    }
}

/// Runs `service` on a fresh runtime while recording into `out`.
pub fn record(out: &Path, service: &Service) -> Result<mtrace::Summary, String> {
    // Fourteen 16-byte events a request (two polls, eight frame events, a
    // wake, the end of its stack), twice over for partly filled chunks.
    let capacity = (service.requests * 14 * 16 * 2).max(16 << 20);
    // A name a request ("request-123456" and its record), 1 MiB at least.
    let names = (service.requests as usize * 64).max(1 << 20);
    let mut config = mtrace::Config::new(out)
        .capacity(capacity)
        .meta_capacity(names);
    if let Some(rotation) = service.rotate {
        config = config.rotate(rotation);
    }
    let recording = mtrace::start(config).map_err(|e| format!("{}: {e}", out.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(service.workers.max(1))
        .enable_time()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let checksum = runtime.block_on(async {
        let mut tasks = Vec::new();
        for id in 0..service.requests {
            let request = handle(id, service.wait);
            tasks.push(if service.logical_stacks {
                tokio::spawn(request.on_logical_stack(format!("request-{id}")))
            } else {
                tokio::spawn(request)
            });
        }
        let mut sum = 0u64;
        for t in tasks {
            sum = sum.wrapping_add(t.await.unwrap_or_default());
        }
        sum
    });
    // Workers stop (and record their thread exits) before the file is finished.
    runtime.shutdown_timeout(Duration::from_secs(5));
    std::hint::black_box(checksum);
    recording
        .finish()
        .map_err(|e| format!("{}: {e}", out.display()))
}

#[mtrace::profile]
async fn handle(id: u64, wait: Duration) -> u64 {
    let query = parse(id);
    let rows = fetch(query, wait).await;
    render(rows)
}

#[mtrace::profile]
fn parse(id: u64) -> u64 {
    spin(id, 20_000)
}

#[mtrace::profile]
async fn fetch(query: u64, wait: Duration) -> u64 {
    tokio::time::sleep(wait).await;
    query.rotate_left(7)
}

#[mtrace::profile]
fn render(rows: u64) -> u64 {
    spin(rows, 40_000)
}

/// CPU work the optimizer cannot drop.
fn spin(seed: u64, rounds: u32) -> u64 {
    (0..rounds).fold(seed | 1, |x, _| {
        std::hint::black_box(x ^ (x << 13) ^ (x >> 7) ^ (x << 17))
    })
}

const USAGE: &str =
    "usage: async_tasks [--requests N] [--workers W] [--wait-ms MS] [--one-stack] [--rotate SIZE|AGE] [--out FILE]";

fn parse_args() -> Result<(Service, PathBuf), String> {
    let mut service = Service::default();
    let mut out = PathBuf::from("tasks.bin");
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value\n{USAGE}"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--requests" => service.requests = number(value()?)?,
            "--workers" => service.workers = number(value()?)? as usize,
            "--wait-ms" => service.wait = Duration::from_millis(number(value()?)?),
            "--one-stack" => service.logical_stacks = false,
            "--rotate" => {
                let v = value()?;
                let rotation = mtrace::Rotation::parse(&v).ok_or(format!(
                    "--rotate {v}: expected a size (64M) or an age (50ms)"
                ))?;
                service.rotate = Some(rotation);
            }
            "--out" => out = PathBuf::from(value()?),
            _ => return Err(USAGE.into()),
        }
    }
    Ok((service, out))
}

fn main() -> ExitCode {
    let run = parse_args().and_then(|(service, out)| {
        let summary = record(&out, &service)?;
        Ok((summary, service.requests))
    });
    match run {
        Ok((summary, requests)) => {
            let files = match summary.files {
                1 => String::new(),
                n => format!(" and the {} files after it", n - 1),
            };
            println!(
                "{} events in {}{files} ({requests} requests)",
                summary.events,
                summary.path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("async_tasks: {e}");
            ExitCode::from(2)
        }
    }
}
