//! Rotation: a recording started with [`Config::rotate`](crate::Config)
//! writes a numbered series of files, `STEM.EXT` (the path it was given),
//! then `STEM.1.EXT`, `STEM.2.EXT`, ..., each a complete trace.
//!
//! A thread of its own, `mtrace-rotate`, watches the file being written
//! (its claimed size, or its age) and switches to the next file: it makes
//! the file, names every known function in it, and publishes it as a new
//! generation of the same series (`shared.rs`). Each writing thread moves
//! at its next event, keeping its open frames: its first chunk in the new
//! file is flagged `continued`, its snapshot stamped with the file's start,
//! and a logical stack first switched onto there with frames open gets a
//! continued-stack record (`thread.rs`). A grace period later, when the
//! threads that read the old generation just before the switch have
//! written their last event, the old file is finished with its end at the
//! new one's start, so a frame open across the switch is timed once and
//! counted as a call once (in the file where it was entered). With
//! [`Config::keep`](crate::Config) the oldest files beyond the count are
//! deleted then. A paused recording does not rotate.

use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mtrace_format::layout::H_NEXT_SEQ;

use crate::config::{Config, Rotation};
use crate::meta;
use crate::shared::{
    self, current, lock, Reading, Series, Shared, CONTROL, CURRENT, GEN, GEN_SERIES_SHIFT,
};
use crate::trace_file;

/// How often a size-rotating series looks at its file's size.
const SIZE_POLL: Duration = Duration::from_millis(10);
/// How long the old file stays open after a switch for the events of
/// threads that read the old generation just before it.
const GRACE: Duration = Duration::from_millis(100);

/// The path of file `k` of the series named `first`: `STEM.k.EXT`, or
/// `STEM.k` when the name has no extension (`k` = 0 is `first` itself).
pub(crate) fn series_path(first: &Path, k: u64) -> PathBuf {
    if k == 0 {
        return first.to_path_buf();
    }
    let (before, after) = number_place(first);
    first.with_file_name(format!("{before}{k}{after}"))
}

/// The file name of `first`'s series members around their number:
/// (`STEM.`, `.EXT`), or (`STEM.`, "") without an extension.
fn number_place(first: &Path) -> (String, String) {
    let name = first
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (format!("{stem}."), format!(".{ext}")),
        _ => (format!("{name}."), String::new()),
    }
}

/// Deletes the files an earlier rotating recording to the same path left
/// (`STEM.N.EXT`, N >= 1): the new series would otherwise be read with
/// them. Before the first file is made.
pub(crate) fn remove_stale(first: &Path) {
    let folder = match first.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    let (before, after) = number_place(first);
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let number = name
            .strip_prefix(&before)
            .and_then(|rest| rest.strip_suffix(after.as_str()));
        if number.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Starts the series' rotation thread. A thread that cannot be started
/// leaves the recording in its first file, with a warning.
pub(crate) fn spawn(series: &'static Series) {
    let started = std::thread::Builder::new()
        .name("mtrace-rotate".into())
        .spawn(move || run(series));
    match started {
        Ok(handle) => *lock(&series.controller) = Some(handle),
        Err(e) => warn(format_args!("cannot start the rotation thread: {e}")),
    }
}

/// Stops the rotation thread and waits for it: a switch under way
/// finishes, and so does the old file it left (at once, without the
/// grace period's rest).
pub(crate) fn stop(series: &'static Series) {
    *lock(&series.stop) = true;
    series.wake.notify_all();
    let handle = lock(&series.controller).take();
    if let Some(handle) = handle {
        let _ = handle.join();
    }
}

/// Waits up to `timeout` or until told to stop; true when told.
fn sleep(series: &Series, timeout: Duration) -> bool {
    let stop = lock(&series.stop);
    if *stop {
        return true;
    }
    let (stop, _) = series
        .wake
        .wait_timeout(stop, timeout)
        .unwrap_or_else(|e| e.into_inner());
    *stop
}

/// A file a switch left, to finish once the grace period is over.
struct Leaving {
    file: &'static Shared,
    /// Where it ends: the next file's start.
    end_tick: u64,
    finish_at: Instant,
}

/// The rotation thread's loop: a switch when the file is due, and the
/// finish of the file it left a grace period later (sooner if the next
/// switch comes first, or the recording finishes).
fn run(series: &'static Series) {
    let Some(rotation) = series.config.rotate else {
        return;
    };
    let mut file_started = Instant::now();
    let mut leaving: Option<Leaving> = None;
    loop {
        let next_look = match rotation {
            Rotation::Size(_) => Instant::now() + SIZE_POLL,
            Rotation::Every(age) => file_started + age,
        };
        let wake_at = leaving
            .as_ref()
            .map_or(next_look, |l| l.finish_at.min(next_look));
        let stopping = sleep(series, wake_at.saturating_duration_since(Instant::now()));
        if stopping
            || leaving
                .as_ref()
                .is_some_and(|l| Instant::now() >= l.finish_at)
        {
            if let Some(l) = leaving.take() {
                finish_old(series, l.file, l.end_tick);
            }
        }
        if stopping {
            return;
        }
        // A file of the series is never freed; the file running may be
        // another recording's only once this series is finished.
        let file = {
            let reading = Reading::begin();
            current(&reading)
                .filter(|s| series.holds(s))
                .map(|s| s as *const Shared)
        };
        // SAFETY: a file of a series (see above).
        let Some(file) = file.map(|s| unsafe { &*s }) else {
            return; // finished
        };
        let due = match rotation {
            Rotation::Size(bytes) => {
                let claimed = file.map.counter(H_NEXT_SEQ).load(Ordering::Relaxed);
                claimed.saturating_mul(file.map.chunk_size as u64) >= bytes
                    || claimed >= file.map.chunk_count
            }
            Rotation::Every(age) => file_started.elapsed() >= age,
        };
        if !due {
            continue;
        }
        // Paused (the age counts again from now), or the next file could
        // not be made (said; the recording goes on in this one): `None`.
        if let Some((old, end_tick)) = switch(series, file) {
            if let Some(l) = leaving.take() {
                finish_old(series, l.file, l.end_tick);
            }
            leaving = Some(Leaving {
                file: old,
                end_tick,
                finish_at: Instant::now() + GRACE,
            });
        }
        file_started = Instant::now();
    }
}

/// Moves the recording from `old` to the next file of its series, if
/// `old` is still the running file and not paused. Returns `old` and the
/// new file's start tick (where `old` is to end).
fn switch(series: &'static Series, old: &'static Shared) -> Option<(&'static Shared, u64)> {
    let _control = lock(&CONTROL);
    if !ptr::eq(CURRENT.load(Ordering::Acquire), old) || GEN.load(Ordering::Relaxed) != old.gen {
        return None;
    }
    let k = series.made.load(Ordering::Relaxed);
    let config = Config {
        path: series_path(&series.config.path, k),
        ..series.config.clone()
    };
    let series_no = old.gen >> GEN_SERIES_SHIFT;
    let stretches = old.stretches.load(Ordering::Relaxed);
    let opened = trace_file::open(
        &config,
        (series_no, k),
        || old.clock.next_in_series(),
        Some(series),
        stretches,
    );
    let next = match opened {
        Ok(next) => next,
        Err(e) => {
            warn(format_args!(
                "cannot rotate to {}: {e}; recording goes on in {}",
                config.path.display(),
                old.map.path.display()
            ));
            return None;
        }
    };
    series.made.store(k + 1, Ordering::Relaxed);
    lock(&series.on_disk).push_back(config.path.clone());
    meta::publish(next, || {
        CURRENT.store(next as *const Shared as *mut Shared, Ordering::Release);
        GEN.store(next.gen, Ordering::Release);
    });
    Some((old, next.clock.start_tick))
}

/// Finishes the file a switch left, ending it at `end_tick`, and deletes
/// the series' oldest files beyond [`Config::keep`].
fn finish_old(series: &'static Series, old: &'static Shared, end_tick: u64) {
    {
        let _control = lock(&CONTROL);
        if old.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        let s = trace_file::finish(old, Some(end_tick));
        shared::retire(old);
        let mut totals = lock(&series.finished_totals);
        totals.events += s.events;
        totals.chunks += s.chunks;
        totals.dropped_events += s.dropped_events;
        totals.dropped_chunks += s.dropped_chunks;
        totals.meta_dropped += s.meta_dropped;
    }
    let Some(keep) = series.config.keep else {
        return;
    };
    let mut on_disk = lock(&series.on_disk);
    while on_disk.len() > keep as usize {
        if let Some(oldest) = on_disk.pop_front() {
            if let Err(e) = std::fs::remove_file(&oldest) {
                warn(format_args!("cannot delete {}: {e}", oldest.display()));
            }
        }
    }
}

/// Prints a line to stderr, ignoring failure (stderr may be closed).
fn warn(message: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "mtrace: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_numbered_before_the_extension() {
        let p = |s: &str, k| series_path(Path::new(s), k);
        assert_eq!(p("/t/trace.bin", 0), PathBuf::from("/t/trace.bin"));
        assert_eq!(p("/t/trace.bin", 1), PathBuf::from("/t/trace.1.bin"));
        assert_eq!(p("/t/a.b.mtrace", 12), PathBuf::from("/t/a.b.12.mtrace"));
        assert_eq!(p("trace", 2), PathBuf::from("trace.2"));
        assert_eq!(p("/t/.hidden", 3), PathBuf::from("/t/.hidden.3"));
        assert_eq!(p("/t/a.1x.bin", 2), PathBuf::from("/t/a.1x.2.bin"));
    }

    #[test]
    fn a_new_series_removes_only_the_old_series_files() {
        let d = std::env::temp_dir().join(format!("mtrace-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let names = [
            "trace.bin",
            "trace.1.bin",
            "trace.17.bin",
            "trace.x.bin",
            "trace.pid42.bin",
            "other.1.bin",
            "trace.1.bin.txt",
            "trace..bin",
        ];
        for n in names {
            std::fs::write(d.join(n), b"x").unwrap();
        }
        remove_stale(&d.join("trace.bin"));
        let mut left: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "other.1.bin",
                "trace..bin",
                "trace.1.bin.txt",
                "trace.bin",
                "trace.pid42.bin",
                "trace.x.bin"
            ]
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
