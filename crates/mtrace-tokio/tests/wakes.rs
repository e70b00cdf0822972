//! Wakes of tasks put on stacks by the runtime hooks, recorded by
//! `mtrace_tokio::wakes()` from tokio's own waker events: a task woken
//! while the runtime's one thread is busy has both waiting time (before
//! its wake) and scheduled time (woken, the thread still busy). Needs
//! `--cfg tokio_unstable` and this crate's `tracing` feature (see the
//! README; without them this file has no test); the sizes asserted are
//! the ones the program's order guarantees, never a measured duration.

#[cfg(all(tokio_unstable, feature = "tracing"))]
mod with_wakes {
    use std::time::Duration;

    use tokio::sync::oneshot;
    use tracing_subscriber::layer::SubscriberExt;

    /// How long the waking task waits (on tokio's timer) before it wakes
    /// the other: all of it is the other's waiting time.
    const WAIT: Duration = Duration::from_millis(20);
    /// How long the waking task keeps the thread after the wake: all of it
    /// is the woken task's scheduled time.
    const BUSY: Duration = Duration::from_millis(20);

    #[mtrace::profile]
    async fn woken(receive: oneshot::Receiver<()>) {
        receive.await.unwrap();
    }

    #[mtrace::profile]
    async fn waking(send: oneshot::Sender<()>) {
        tokio::time::sleep(WAIT).await;
        send.send(()).unwrap();
        // The thread is busy: the woken task cannot run until this returns.
        std::thread::sleep(BUSY);
    }

    #[test]
    fn a_task_woken_while_the_thread_is_busy_waits_then_is_scheduled() {
        let dir = std::env::temp_dir().join(format!("mtrace-tokio-wakes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("wakes.mtrace");
        let recording =
            mtrace::start(mtrace::Config::new(&path).capacity(16 << 20)).expect("start");
        let subscriber = tracing_subscriber::registry()
            .with(mtrace_tokio::wakes())
            .with(mtrace_tracing::layer());
        let _default = tracing::subscriber::set_default(subscriber);
        // One thread: the woken task runs only after the waking one's poll.
        let rt =
            mtrace_tokio::instrument(tokio::runtime::Builder::new_current_thread().enable_time())
                .build()
                .unwrap();
        rt.block_on(async {
            let (send, receive) = oneshot::channel();
            let a = tokio::spawn(woken(receive));
            let b = tokio::spawn(waking(send));
            a.await.unwrap();
            b.await.unwrap();
        });
        drop(rt);
        recording.finish().expect("finish");

        let loaded = mtanalyze::load(&path).expect("load");
        let report =
            mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
        let woken = report
            .functions
            .iter()
            .find(|f| f.function == "woken")
            .expect("woken recorded");
        assert_eq!(woken.ncalls, 1);
        assert!(
            woken.waiting_ns >= WAIT.as_nanos() as u64,
            "waited for the timer: {woken:?}"
        );
        assert!(
            woken.scheduled_ns >= BUSY.as_nanos() as u64,
            "woken, then kept from the thread: {woken:?}"
        );
        let stack = report
            .stacks
            .iter()
            .find(|s| s.scheduled_ns > 0)
            .expect("a stack with scheduled time");
        assert!(stack.name.contains(file!()), "the task's stack: {stack:?}");
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        std::fs::remove_dir_all(&dir).ok();
    }
}
