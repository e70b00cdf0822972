//! An after-poll hook installed over `instrument`'s (tokio keeps one):
//! no hook gives a task's stack back, and the next poll must not wait for
//! it forever. The task goes on without its stack, and a mark in the
//! trace says why. Needs `--cfg tokio_unstable`; without it this file has
//! no test.

#[cfg(tokio_unstable)]
mod with_hooks {
    use std::time::{Duration, Instant};

    #[mtrace::profile]
    async fn yields(n: u32) -> u32 {
        for _ in 0..n {
            tokio::task::yield_now().await;
        }
        n
    }

    #[test]
    fn a_stack_never_given_back_costs_no_wait() {
        let path = std::env::temp_dir().join(format!(
            "mtrace-tokio-replaced-{}.mtrace",
            std::process::id()
        ));
        let recording = mtrace::start(mtrace::Config::new(&path)).expect("start");
        let mut builder = tokio::runtime::Builder::new_current_thread();
        mtrace_tokio::instrument(&mut builder).on_after_task_poll(|_| {});
        let rt = builder.build().expect("runtime");
        let started = Instant::now();
        let done = rt.block_on(async { tokio::spawn(yields(5)).await.expect("task") });
        let took = started.elapsed();
        drop(rt);
        recording.finish().expect("finish");
        assert_eq!(done, 5);
        // One thread: it finds the stack taken by itself and does not wait.
        // A wait would be the hooks' give-up time, a whole second: five
        // yields on a current-thread runtime take microseconds, so the
        // bound is a liveness check (a loaded machine cannot reach it),
        // not a timing measurement.
        assert!(took < Duration::from_millis(900), "{took:?}");

        let loaded = mtanalyze::load(&path).expect("load");
        let report =
            mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
        std::fs::remove_file(&path).ok();
        let lost = report
            .marks
            .iter()
            .filter(|m| {
                m.name
                    .starts_with("mtrace-tokio: a task's stack was not given back")
            })
            .count();
        assert_eq!(lost, 1, "one mark, for the one task: {:?}", report.marks);
    }
}
