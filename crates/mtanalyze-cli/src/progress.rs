//! A progress indicator on stderr for the runs that last.

use std::io::{self, IsTerminal};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress indicator on stderr for runs that last: it appears only if
/// the work is still going after a second, and only when stderr is a
/// terminal and threads may be started (not inside
/// `mtanalyze::threads::on_the_calling_thread`: a program that runs the
/// command line in its own process). Finishing it clears it.
pub(crate) struct Progress {
    bar: ProgressBar,
    state: Arc<Mutex<Shown>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shown {
    Waiting,
    Drawn,
    Finished,
}

impl Progress {
    /// An indicator without a known amount of work.
    pub(crate) fn spinner(what: String) -> Progress {
        let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        Progress::start(None, style, what)
    }

    /// A bar over `total` units of work.
    pub(crate) fn bar(total: u64, what: String) -> Progress {
        let style = ProgressStyle::with_template("{msg} [{bar:30}] {percent}% ({eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        Progress::start(Some(total), style, what)
    }

    fn start(total: Option<u64>, style: ProgressStyle, what: String) -> Progress {
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden())
            .with_style(style)
            .with_message(what);
        let state = Arc::new(Mutex::new(Shown::Waiting));
        if io::stderr().is_terminal() && mtanalyze::threads::parallel() {
            let (bar, state) = (bar.clone(), Arc::clone(&state));
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(1));
                if let Ok(mut s) = state.lock() {
                    if *s == Shown::Waiting {
                        bar.set_draw_target(ProgressDrawTarget::stderr());
                        bar.enable_steady_tick(Duration::from_millis(120));
                        *s = Shown::Drawn;
                    }
                }
            });
        }
        Progress { bar, state }
    }

    pub(crate) fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    pub(crate) fn finish(&self) {
        if let Ok(mut s) = self.state.lock() {
            if *s == Shown::Drawn {
                self.bar.finish_and_clear();
            }
            *s = Shown::Finished;
        }
    }
}
