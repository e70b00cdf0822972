//! A real HTTP server (hyper on tokio, 127.0.0.1) and its client in one
//! process, instrumented only with `#[tracing::instrument]`, recorded
//! through the layer under a per-layer `EnvFilter`, analyzed with the
//! analyzer's library: each span is one call per request, the awaited
//! lookup's sleep is its paused time, and the filtered span is absent.

use std::convert::Infallible;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Requests, each on its own connection.
const N: usize = 12;
/// The lookup's wait.
const SLEEP: Duration = Duration::from_millis(20);

#[tracing::instrument(skip_all)]
async fn handler(_request: Request<Incoming>) -> Result<Response<String>, Infallible> {
    let value = lookup(7).await;
    let result = compute(value);
    noisy::audit();
    Ok(Response::new(format!("{result}\n")))
}

#[tracing::instrument]
async fn lookup(key: u64) -> u64 {
    tokio::time::sleep(SLEEP).await;
    key * 2
}

#[tracing::instrument]
fn compute(seed: u64) -> u64 {
    (0..200_000u64).fold(seed, |a, i| std::hint::black_box(a.wrapping_mul(31) ^ i))
}

mod noisy {
    /// Excluded by the filter (`server::noisy=off`).
    #[tracing::instrument]
    pub fn audit() {}
}

async fn get(port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .expect("request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("response");
    response
}

#[test]
fn spans_of_a_server_are_one_call_each_and_paused_while_they_wait() {
    let dir = std::env::temp_dir().join(format!("mtrace-tracing-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("server.mtrace");
    let recording = mtrace::start(mtrace::Config::new(&path).capacity(64 << 20)).expect("start");
    let filter = EnvFilter::new("trace,server::noisy=off");
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(mtrace_tracing::layer().with_filter(filter)),
    )
    .expect("global subscriber");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.expect("accept");
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service_fn(handler))
                        .await;
                });
            }
        });
        let clients: Vec<_> = (0..N).map(|_| tokio::spawn(get(port))).collect();
        tokio::time::timeout(Duration::from_secs(30), async {
            for client in clients {
                let response = client.await.expect("client");
                assert!(response.starts_with("HTTP/1.1 200"), "{response}");
            }
        })
        .await
        .expect("every request answered in time");
        server.abort();
    });
    drop(rt);
    recording.finish().expect("finish");

    let loaded = mtanalyze::load(&path).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    let function = |name: &str| report.functions.iter().find(|f| f.function == name);
    for name in ["handler", "lookup", "compute"] {
        let f = function(name).unwrap_or_else(|| panic!("{name} recorded"));
        assert_eq!(
            f.ncalls, N as u64,
            "{name}: one call per request, not per poll"
        );
        assert!(
            f.file.ends_with("server.rs"),
            "{name} at {}:{}",
            f.file,
            f.line
        );
        assert_eq!((f.open_at_end, f.cut_short), (0, 0), "{name} closed");
    }
    let lookup = function("lookup").unwrap();
    assert!(
        lookup.paused_ns >= N as u64 * SLEEP.as_nanos() as u64,
        "lookup paused {} ns",
        lookup.paused_ns
    );
    let handler = function("handler").unwrap();
    assert!(handler.paused_ns >= lookup.paused_ns);
    let compute = function("compute").unwrap();
    assert_eq!(compute.paused_ns, 0);
    assert!(function("audit").is_none(), "the filter excludes audit");
    let stacks: Vec<_> = report
        .stacks
        .iter()
        .filter(|s| &*s.name == "handler")
        .collect();
    assert_eq!(stacks.len(), N, "one stack per request's handler span");
    assert!(stacks.iter().all(|s| s.ended));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    std::fs::remove_dir_all(&dir).ok();
}
