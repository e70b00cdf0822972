//! The guide's tokio service (`docs/GUIDE.md`): three lines profile it (the recorder; the
//! tracing layer with the wakes of tasks, beside the service's own log
//! output; the runtime, with the hooks, in place of `#[tokio::main]`);
//! the code itself has only `#[tracing::instrument]`. The block between
//! the `README` marks is the guide's, word for word (`tests/readme.rs`).
//!
//! ```sh
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/tokio-unstable \
//!     cargo run --release -p mtrace-tokio --features tracing --example service
//! cargo run --release -p mtanalyze-cli -- service.mtrace --stacks --group
//! ```

use std::time::Duration;

// README: begin
use tracing_subscriber::layer::SubscriberExt; // .with(..)
use tracing_subscriber::{EnvFilter, Layer}; // .with_filter(..)

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _recording = mtrace::start(mtrace::Config::new("service.mtrace")).ok(); // 1: the recorder
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(mtrace_tracing::layer()) // 2: spans as frames,
            .with(mtrace_tokio::wakes()) //    the wakes of tasks (scheduled vs waiting),
            .with(tracing_subscriber::fmt::layer().with_filter(EnvFilter::from_default_env())), // your logs as before
    )?;
    mtrace_tokio::run(serve())?; // 3: tasks as stacks (was `#[tokio::main]`)
    Ok(())
}
// README: end

/// What `#[tokio::main] async fn main` did: 200 requests, a task each.
async fn serve() {
    let requests: Vec<_> = (0..200).map(|id| tokio::spawn(handle(id))).collect();
    for request in requests {
        if let Err(e) = request.await {
            tracing::error!("request failed: {e}");
        }
    }
}

#[tracing::instrument]
async fn handle(id: u64) -> u64 {
    let row = fetch(id).await;
    render(row)
}

#[tracing::instrument]
async fn fetch(id: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(2 + id % 5)).await;
    id * 7
}

#[tracing::instrument]
fn render(row: u64) -> u64 {
    (0..20_000u64).fold(row, |a, i| std::hint::black_box(a.wrapping_mul(31) ^ i))
}
