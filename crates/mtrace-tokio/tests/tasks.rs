//! A multi-thread runtime built through `mtrace_tokio::instrument`, tasks
//! spawned from two sites with plain `tokio::spawn`: each task is one
//! logical stack, named by its spawn site, ended when it finishes; the
//! frames of `#[mtrace::profile]`, `scope!` and `#[tracing::instrument]`
//! nest on it as the code nests; with this crate's `tracing` feature,
//! tasks are woken (scheduled and waiting time). Needs `--cfg
//! tokio_unstable` (see the README); without it, the one test checks that
//! nothing is installed.

#[cfg(tokio_unstable)]
mod with_hooks {
    use std::time::Duration;

    use tracing_subscriber::layer::SubscriberExt;

    const N: usize = 24;
    const M: usize = 8;
    const SLEEP: Duration = Duration::from_millis(5);

    #[mtrace::profile]
    async fn handle(i: u64) -> u64 {
        let v = lookup(i).await;
        let _scope = mtrace::scope!("compute");
        (0..10_000u64).fold(v, |a, x| std::hint::black_box(a ^ x))
    }

    #[tracing::instrument]
    async fn lookup(key: u64) -> u64 {
        tokio::time::sleep(SLEEP).await;
        key
    }

    #[mtrace::profile]
    async fn background() {
        tokio::task::yield_now().await;
    }

    #[test]
    fn every_task_is_a_stack_named_by_its_spawn_site() {
        let dir = std::env::temp_dir().join(format!("mtrace-tokio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tasks.mtrace");
        let recording =
            mtrace::start(mtrace::Config::new(&path).capacity(32 << 20)).expect("start");
        let subscriber = tracing_subscriber::registry().with(mtrace_tracing::layer());
        // With tokio's instrumentation: the wakes too.
        #[cfg(feature = "tracing")]
        let subscriber = subscriber.with(mtrace_tokio::wakes());
        tracing::subscriber::set_global_default(subscriber).unwrap();
        let rt = mtrace_tokio::instrument(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all(),
        )
        .build()
        .unwrap();
        rt.block_on(async {
            let tasks: Vec<_> = (0..N as u64).map(|i| tokio::spawn(handle(i))).collect();
            let others: Vec<_> = (0..M).map(|_| tokio::spawn(background())).collect();
            tokio::time::timeout(Duration::from_secs(30), async {
                for t in tasks {
                    t.await.unwrap();
                }
                for t in others {
                    t.await.unwrap();
                }
            })
            .await
            .expect("tasks done in time");
        });
        drop(rt);
        recording.finish().expect("finish");

        let loaded = mtanalyze::load(&path).expect("load");
        let report =
            mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
        // Tasks by spawn site: the name without its ` task-ID`.
        let mut sites: std::collections::BTreeMap<&str, Vec<&mtanalyze::StackStats>> =
            Default::default();
        for s in &report.stacks {
            if let Some((site, _id)) = s.name.rsplit_once(" task-") {
                sites.entry(site).or_default().push(s);
            }
        }
        let mut counts: Vec<usize> = sites.values().map(Vec::len).collect();
        counts.sort_unstable();
        assert_eq!(
            counts,
            [M, N],
            "one stack per task, by site: {:?}",
            sites.keys()
        );
        assert!(
            sites.keys().all(|site| site.starts_with(file!())),
            "{:?}",
            sites.keys()
        );
        assert!(
            sites.values().flatten().all(|s| s.ended),
            "each ends when its task does"
        );
        let function = |name: &str| {
            report
                .functions
                .iter()
                .find(|f| f.function == name)
                .unwrap()
        };
        for (name, calls) in [
            ("handle", N),
            ("lookup", N),
            ("compute", N),
            ("background", M),
        ] {
            let f = function(name);
            assert_eq!(f.ncalls, calls as u64, "{name}");
            assert_eq!((f.open_at_end, f.cut_short), (0, 0), "{name}");
        }
        assert!(function("lookup").paused_ns >= N as u64 * SLEEP.as_nanos() as u64);
        let edge = |caller: &str, callee: &str| {
            report
                .edges
                .iter()
                .any(|e| e.caller == caller && e.callee == callee)
        };
        assert!(
            edge("handle", "lookup"),
            "the tracing span nests in the profiled fn"
        );
        assert!(edge("handle", "compute"), "scope! nests in the profiled fn");
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        #[cfg(feature = "tracing")]
        {
            // Each lookup waits for its timer, which wakes it SLEEP after
            // the poll that set it, before its task switches away: waiting.
            // A woken task runs after its wake, and 32 tasks share 2
            // workers: scheduled, for some of them.
            let lookup = function("lookup");
            assert!(lookup.waiting_ns > 0, "{lookup:?}");
            let handle = function("handle");
            assert!(handle.scheduled_ns > 0, "{handle:?}");
            assert!(handle.waiting_ns > 0, "{handle:?}");
            // tokio's own spans (runtime.spawn, runtime.resource) are not
            // frames: the task's stack stands for them.
            assert!(
                report
                    .functions
                    .iter()
                    .all(|f| !f.function.starts_with("runtime.")),
                "{:?}",
                report
                    .functions
                    .iter()
                    .map(|f| &f.function)
                    .collect::<Vec<_>>()
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[cfg(not(tokio_unstable))]
#[test]
fn without_tokio_unstable_no_task_hook_is_installed() {
    const { assert!(!mtrace_tokio::HOOKS_AVAILABLE) };
    let mut builder = tokio::runtime::Builder::new_current_thread();
    let rt = mtrace_tokio::instrument(&mut builder).build().unwrap();
    assert_eq!(
        rt.block_on(async { tokio::spawn(async { 1 }).await.unwrap() }),
        1
    );
}
