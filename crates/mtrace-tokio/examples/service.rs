//! The README's tokio service: three lines profile it (the recorder, the
//! tracing layer, the runtime hooks); the code itself has only
//! `#[tracing::instrument]`.
//!
//! ```sh
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/tokio-unstable \
//!     cargo run --release -p mtrace-tokio --example service -- service.mtrace
//! cargo run --release -p mtanalyze-cli -- service.mtrace --stacks --group
//! ```

use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "service.mtrace".into());
    let _recording = mtrace::start(mtrace::Config::new(out)).ok(); // 1: the recorder
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(mtrace_tracing::layer()), // 2: spans as frames
    )
    .expect("no other subscriber");
    let runtime = mtrace_tokio::instrument(&mut tokio::runtime::Builder::new_multi_thread()) // 3: tasks as stacks
        .enable_all()
        .build()
        .expect("runtime");

    runtime.block_on(async {
        let requests: Vec<_> = (0..200).map(|id| tokio::spawn(handle(id))).collect();
        for request in requests {
            request.await.expect("request");
        }
    });
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
