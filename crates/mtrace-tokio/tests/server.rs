//! A real HTTP server (hyper on tokio, 127.0.0.1) and its client in one
//! process, instrumented only with `#[tracing::instrument]`, set up as the
//! guide's three lines do (`mtrace_tracing::layer()`, `mtrace_tokio::wakes()`
//! and a `fmt` layer whose own `EnvFilter` passes WARN only, on the runtime
//! `mtrace_tokio::runtime()` builds): every connection task is a stack
//! named by its spawn site, each span is one call per request, and under
//! load the tasks' pauses split into waiting and scheduled. Needs `--cfg
//! tokio_unstable` and this crate's `tracing` feature (without them this
//! file has no test); no timing is asserted beyond what the program's
//! order guarantees.

#[cfg(all(tokio_unstable, feature = "tracing"))]
mod with_wakes {
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
    fn connection_tasks_are_stacks_and_their_pauses_split_under_load() {
        let dir = std::env::temp_dir().join(format!("mtrace-tokio-server-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.mtrace");
        let recording =
            mtrace::start(mtrace::Config::new(&path).capacity(64 << 20)).expect("start");
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry()
                .with(mtrace_tracing::layer())
                .with(mtrace_tokio::wakes())
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_writer(std::io::sink)
                        .with_filter(EnvFilter::new("warn")),
                ),
        )
        .expect("global subscriber");
        let rt = mtrace_tokio::runtime().worker_threads(2).build().unwrap();
        let connection_line = rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let port = listener.local_addr().unwrap().port();
            let (line, lines) = tokio::sync::oneshot::channel();
            let server = tokio::spawn(async move {
                let mut line = Some(line);
                loop {
                    let (stream, _) = listener.accept().await.expect("accept");
                    let at = line!() + 1;
                    tokio::spawn(async move {
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service_fn(handler))
                            .await;
                    });
                    if let Some(line) = line.take() {
                        let _ = line.send(at);
                    }
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
            lines.await.expect("a connection")
        });
        drop(rt);
        recording.finish().expect("finish");

        let loaded = mtanalyze::load(&path).expect("load");
        let report =
            mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
        let function = |name: &str| {
            report
                .functions
                .iter()
                .find(|f| f.function == name)
                .unwrap_or_else(|| panic!("{name} recorded"))
        };
        for name in ["handler", "lookup", "compute"] {
            let f = function(name);
            assert_eq!(f.ncalls, N as u64, "{name}: one call per request");
            assert_eq!((f.open_at_end, f.cut_short), (0, 0), "{name} closed");
        }
        let lookup = function("lookup");
        assert!(lookup.paused_ns >= N as u64 * SLEEP.as_nanos() as u64);
        // Each lookup's timer wakes it SLEEP after the poll that set it:
        // waiting. 2 workers run 2N + 1 tasks: woken tasks wait for one.
        assert!(lookup.waiting_ns > 0, "{lookup:?}");
        let site = format!("{}:{connection_line} task-", file!());
        let connections: Vec<_> = report
            .stacks
            .iter()
            .filter(|s| s.name.starts_with(&site))
            .collect();
        assert_eq!(connections.len(), N, "one stack per connection task");
        assert!(connections.iter().all(|s| s.ended));
        let scheduled: u64 = connections.iter().map(|s| s.scheduled_ns).sum();
        let waiting: u64 = connections.iter().map(|s| s.waiting_ns).sum();
        assert!(scheduled > 0 && waiting > 0, "{connections:?}");
        // The server task was aborted while it waited in accept: its
        // stack ended with its frames closed (no frame of ours on it).
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        std::fs::remove_dir_all(&dir).ok();
    }
}
