//! `mtanalyze top TRACE`: a live view of a recording while it runs.
//!
//! Every refresh (each second) reads the trace again and analyzes the
//! chunks committed so far: it opens the file read-only and takes no
//! lock, so the writer never waits for it. It reads the file into memory
//! rather than mapping it: the recorder cuts a file's unused chunk slots
//! off when it closes it, and a map of the longer file would fault on the
//! pages cut, where a read only ends sooner. A chunk still being filled
//! reads as unreleased and a header not yet finished as an unfinished
//! trace, never as damage; the chunks that changed while the file was
//! read are settled after the read (`settle_chunks`), so no thread's
//! events show a gap the recorder did not make. With a rotating series (`TRACE` is the path
//! the recording was started with: `STEM.EXT`, then `STEM.1.EXT`, ...;
//! see `series.rs`) the view follows the newest file, which is the one
//! being written (each file is a complete trace), or the one before
//! while a file just begun has no header yet. Before the file exists the
//! view says it is waiting for it.
//!
//! The view is drawn with escape sequences on the alternate screen; keys
//! are read with the terminal in non-canonical mode without echo or
//! signals (so Ctrl-C arrives as a key and ends the view like `q`). The
//! terminal's settings are restored on every way out: `q`, Ctrl-C, an
//! error, and a panic (a hook restores them before
//! the panic message). Hand-written rather than with a terminal crate:
//! the view needs one non-blocking key read and four escape sequences,
//! which the tree's `libc` gives without a new dependency.
//!
//! `--once` prints one refresh and exits; `--format json` prints it as
//! `{"top": {...}, "report": REPORT}` for scripts and tests.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mtanalyze::render;
use mtanalyze::view::{self, EdgeSelection, SortKey, ViewOptions};
use mtanalyze::{AnalyzeOptions, Report};

use crate::args::TopFormat;
use crate::output::{message, Failure};
use crate::plan::{TopMode, TopPlan};
use crate::series;

/// How often the view is redrawn.
const REFRESH: Duration = Duration::from_secs(1);

/// The sort keys `s` cycles through (each orders functions and stacks).
const SORTS: [SortKey; 5] = [
    SortKey::Tottime,
    SortKey::Cumtime,
    SortKey::Ncalls,
    SortKey::Paused,
    SortKey::Name,
];

/// One refresh: the file read and its report.
struct Snapshot {
    /// The file analyzed (the newest of a series).
    file: PathBuf,
    /// The series' files found (just `file` for a single trace).
    files: Vec<PathBuf>,
    report: Report,
}

/// The files of the recording started at `trace`, oldest first.
fn files_of(trace: &Path) -> Vec<PathBuf> {
    let members = series::beside(trace);
    if members.is_empty() {
        vec![trace.to_path_buf()]
    } else {
        members.into_iter().map(|m| m.path).collect()
    }
}

/// Reads and analyzes the newest file of the recording; when a rotation
/// has just begun a file whose header is not written yet, the one before.
fn snapshot(trace: &Path, options: &AnalyzeOptions) -> Result<Snapshot, String> {
    let files = files_of(trace);
    let mut first_error = None;
    for file in files.iter().rev().take(2) {
        match analyze_file(file, options) {
            Ok(report) => {
                return Ok(Snapshot {
                    file: file.clone(),
                    files,
                    report,
                })
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| format!("{}: no trace", trace.display())))
}

fn analyze_file(file: &Path, options: &AnalyzeOptions) -> Result<Report, String> {
    // Read, not mapped: the recorder cuts a file's unused slots off when
    // it closes it (at the end, and at each rotation), and a map of the
    // longer file would fault (SIGBUS) on the pages cut; a read of a file
    // that shrinks only ends sooner.
    let mut bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    settle_chunks(&mut bytes, file);
    let loaded =
        mtanalyze::from_bytes(&file.display().to_string(), bytes).map_err(|e| e.to_string())?;
    mtanalyze::analyze(&loaded, options).map_err(|e| e.to_string())
}

/// Makes `copy` (the file read from start to end, while the recorder
/// writes) a view in which no thread's events have a gap. A file read takes
/// time: a chunk read early may have committed more events by the time
/// its thread's next chunk is read, and the copy then misses them (the
/// analysis would repair that gap as exits that do not match). So each
/// slot's state word is read again after the copy: a chunk that committed
/// more since is read again, and now holds all it had when its next chunk
/// was read; in a ring, a slot the recorder claimed again (another
/// sequence number) is marked empty, as the copy may hold the old chunk's
/// state with some of the new chunk's events (a writer claims the state
/// word before it writes the body); the analysis counts it lost, like the
/// chunks the ring overwrote before the read.
fn settle_chunks(copy: &mut [u8], file: &Path) {
    use std::os::unix::fs::FileExt;
    let Ok(header) = mtrace_format::Header::decode(copy) else {
        return;
    };
    let Ok(now) = std::fs::File::open(file) else {
        return;
    };
    settle_slots(copy, &header, |at, into| now.read_exact_at(into, at).ok());
}

/// [`settle_chunks`] with `read_at(offset, into)` reading the file now.
fn settle_slots(
    copy: &mut [u8],
    header: &mtrace_format::Header,
    read_at: impl Fn(u64, &mut [u8]) -> Option<()>,
) {
    let seq = |state: u64| state >> 24;
    let size = header.chunk_size as usize;
    for slot in 0..header.chunk_count {
        let Some(at) = slot
            .checked_mul(u64::from(header.chunk_size))
            .and_then(|o| o.checked_add(header.chunks_offset))
        else {
            return;
        };
        let Some(start) = usize::try_from(at).ok().filter(|&a| a < copy.len()) else {
            return;
        };
        let end = start.saturating_add(size).min(copy.len());
        let chunk = &mut copy[start..end];
        let (Some(copied), Some(now)) = (
            chunk
                .get(..8)
                .and_then(|w| Some(u64::from_le_bytes(w.try_into().ok()?))),
            {
                let mut word = [0u8; 8];
                read_at(at, &mut word).map(|()| u64::from_le_bytes(word))
            },
        ) else {
            continue;
        };
        if now == copied {
            continue;
        }
        if seq(now) != seq(copied) && seq(copied) != 0 {
            chunk[..8].fill(0);
            continue;
        }
        // The same chunk with more committed (or a slot first claimed
        // since): read it again, whole.
        let mut again = vec![0u8; chunk.len()];
        match read_at(at, &mut again) {
            Some(())
                if seq(u64::from_le_bytes(
                    again[..8].try_into().unwrap_or_default(),
                )) == seq(now) =>
            {
                chunk.copy_from_slice(&again)
            }
            _ => chunk[..8].fill(0),
        }
    }
}

/// Events per second: between two refreshes of the same file when there
/// is one, else over the trace's own duration.
fn event_rate(now: &Snapshot, before: Option<(&Path, u64, Instant)>) -> f64 {
    match before {
        Some((file, events, at)) if file == now.file && now.report.trace.events >= events => {
            let secs = at.elapsed().as_secs_f64();
            if secs > 0.0 {
                (now.report.trace.events - events) as f64 / secs
            } else {
                0.0
            }
        }
        _ => {
            let t = &now.report.trace;
            let secs = t.duration_ns as f64 / 1e9;
            if secs > 0.0 {
                t.events as f64 / secs
            } else {
                0.0
            }
        }
    }
}

pub(crate) fn top(plan: &TopPlan, out: &mut dyn Write) -> Result<(), Failure> {
    let TopMode::Once { format, width } = plan.mode else {
        return live(plan);
    };
    let now = snapshot(&plan.trace, &plan.options).map_err(message)?;
    let rate = event_rate(&now, None);
    let sort = plan.sort;
    match format {
        TopFormat::Json => write_json(out, &now, rate, sort, plan.limit),
        TopFormat::Table => write_table(out, &now, rate, sort, plan, width, false),
    }
    .map_err(Failure::Output)
}

/// The `top` fields of the JSON output.
fn write_json(
    out: &mut dyn Write,
    now: &Snapshot,
    rate: f64,
    sort: SortKey,
    limit: Option<usize>,
) -> io::Result<()> {
    let t = &now.report.trace;
    let top = serde_json::json!({
        "file": now.file.display().to_string(),
        "files": now.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "events": t.events,
        "events_per_second": rate,
        "dropped_events": t.dropped_events,
        "chunks_damaged": t.chunks_damaged,
        "finished": t.finished,
        "window": {"from_ns": t.first_event_ns, "to_ns": t.end_ns},
        "sort": sort.name(),
    });
    write!(out, "{{\"top\": {top}, \"report\": ")?;
    let view = view_options(sort, limit);
    render::json::report(
        out,
        &view::filtered_report(&now.report, &view, &EdgeSelection::default()),
    )?;
    writeln!(out, "}}")
}

fn view_options(sort: SortKey, limit: Option<usize>) -> ViewOptions {
    ViewOptions {
        sort,
        limit,
        filter: None,
    }
}

/// The view's text: a status block, then the function (or stack) table.
fn write_table(
    out: &mut dyn Write,
    now: &Snapshot,
    rate: f64,
    sort: SortKey,
    plan: &TopPlan,
    width: Option<usize>,
    live: bool,
) -> io::Result<()> {
    let t = &now.report.trace;
    let series = match now.files.len() {
        1 => String::new(),
        n => format!(" (newest of {n} files)"),
    };
    writeln!(out, "mtanalyze top: {}{series}", now.file.display())?;
    writeln!(
        out,
        "window: {:.3}s..{:.3}s  events: {}  rate: {:.0} events/s  dropped events: {}  {}",
        t.first_event_ns as f64 / 1e9,
        t.end_ns as f64 / 1e9,
        t.events,
        rate,
        t.dropped_events,
        if t.finished { "finished" } else { "recording" },
    )?;
    // The keys are the live view's (`--once` reads none).
    let keys = if live {
        "  (s: next sort, q: quit)"
    } else {
        ""
    };
    writeln!(out, "sort: {}{keys}", sort.name())?;
    writeln!(out)?;
    if plan.stacks {
        let rows = view::stack_rows(&now.report, Some(sort), plan.limit);
        render::table::stacks(
            out,
            &rows,
            now.report.stacks.len(),
            width,
            render::table::Wakes::of(&now.report.trace),
        )
    } else {
        let rows = view::function_rows(&now.report, &view_options(sort, plan.limit));
        render::table::functions(out, &rows, now.report.functions.len(), width, None)
    }
}

/// The terminal's settings while the view runs, restored when dropped.
struct Screen {
    saved: libc::termios,
}

/// The settings to restore from the panic hook (`Screen` is not reachable
/// from there).
static SAVED: std::sync::Mutex<Option<libc::termios>> = std::sync::Mutex::new(None);

fn restore(saved: &libc::termios) {
    // SAFETY: `saved` is a termios `tcgetattr` filled for this descriptor.
    unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, saved) };
    // Main screen back, cursor shown.
    let mut stdout = io::stdout();
    let _ = stdout.write_all(b"\x1b[?25h\x1b[?1049l");
    let _ = stdout.flush();
}

impl Screen {
    fn enter() -> io::Result<Screen> {
        let mut saved = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr fills the struct when it returns 0.
        if unsafe { libc::tcgetattr(libc::STDIN_FILENO, saved.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: filled above.
        let saved = unsafe { saved.assume_init() };
        let mut raw = saved;
        // Keys one at a time, no echo, Ctrl-C as a key; a read waits at
        // most a tenth of a second, so the view redraws on time.
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
        raw.c_cc[libc::VMIN] = 0;
        raw.c_cc[libc::VTIME] = 1;
        if let Ok(mut s) = SAVED.lock() {
            *s = Some(saved);
        }
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(saved) = SAVED.lock().ok().and_then(|s| *s) {
                restore(&saved);
            }
            hook(info);
        }));
        // SAFETY: `raw` is a valid termios derived from the saved one.
        if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // Alternate screen, cursor hidden.
        let mut stdout = io::stdout();
        stdout.write_all(b"\x1b[?1049h\x1b[?25l")?;
        stdout.flush()?;
        Ok(Screen { saved })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore(&self.saved);
        if let Ok(mut s) = SAVED.lock() {
            *s = None;
        }
    }
}

/// A key read within a tenth of a second, if any.
fn read_key() -> Option<u8> {
    let mut byte = 0u8;
    // SAFETY: reads at most one byte into `byte`.
    let n = unsafe { libc::read(libc::STDIN_FILENO, (&mut byte as *mut u8).cast(), 1) };
    (n == 1).then_some(byte)
}

/// The live view: redraws every [`REFRESH`], `s` cycles the sort, `q` or
/// Ctrl-C quits.
fn live(plan: &TopPlan) -> Result<(), Failure> {
    let screen = Screen::enter().map_err(Failure::Output)?;
    let mut sort_at = SORTS.iter().position(|&s| s == plan.sort).unwrap_or(0);
    let mut sort = plan.sort;
    let mut before: Option<(PathBuf, u64, Instant)> = None;
    let mut last: Option<Snapshot> = None;
    let mut drawn_at: Option<Instant> = None;
    let mut redraw_only = false;
    let mut rate = 0.0;
    loop {
        if redraw_only || drawn_at.is_none_or(|at| at.elapsed() >= REFRESH) {
            let fresh = !redraw_only;
            redraw_only = false;
            let mut text = Vec::new();
            let (rows, columns) = console::Term::stdout().size();
            let width = Some(columns as usize);
            let limit = plan
                .limit
                .or(Some((rows as usize).saturating_sub(8).max(1)));
            let shown = TopPlan {
                limit,
                ..plan.clone()
            };
            if fresh {
                match snapshot(&plan.trace, &plan.options) {
                    Ok(now) => {
                        rate = event_rate(
                            &now,
                            before.as_ref().map(|(f, e, at)| (f.as_path(), *e, *at)),
                        );
                        before = Some((now.file.clone(), now.report.trace.events, Instant::now()));
                        last = Some(now);
                    }
                    Err(e) => {
                        last = None;
                        let _ = writeln!(
                            text,
                            "mtanalyze top: waiting for {}: {e}\n(q: quit)",
                            plan.trace.display()
                        );
                    }
                }
                drawn_at = Some(Instant::now());
            }
            if let Some(now) = &last {
                write_table(&mut text, now, rate, sort, &shown, width, true)
                    .map_err(Failure::Output)?;
            }
            // Home, clear, the text with the terminal's line ends.
            let mut stdout = io::stdout().lock();
            stdout.write_all(b"\x1b[H\x1b[2J")?;
            for line in text.split(|&b| b == b'\n') {
                stdout.write_all(line)?;
                stdout.write_all(b"\r\n")?;
            }
            stdout.flush()?;
        }
        match read_key() {
            Some(b'q') | Some(b'Q') | Some(3) => break,
            Some(b's') | Some(b'S') => {
                sort_at = (sort_at + 1) % SORTS.len();
                sort = SORTS[sort_at];
                redraw_only = true;
            }
            _ => {}
        }
    }
    drop(screen);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_that_changed_during_the_read_are_read_again_or_dropped() {
        let mut header = mtrace_format::Header::new(mtrace_format::ClockInfo::nanoseconds(), 1024);
        header.chunk_count = 4;
        header.chunks_offset = 4096;
        let state = |seq: u64, units: u64| ((seq + 1) << 24) | (units << 1);
        let slot_at = |slot: usize| 4096 + slot * 1024;
        let write = |bytes: &mut [u8], slot: usize, s: u64, fill: u8| {
            let at = slot_at(slot);
            bytes[at + 8..at + 1024].fill(fill);
            bytes[at..at + 8].copy_from_slice(&s.to_le_bytes());
        };
        let mut copy = vec![0u8; 4096 + 4 * 1024];
        let mut file = copy.clone();
        // Slot 0: committed more since; slot 1: claimed again by seq 7;
        // slot 2: unchanged; slot 3: empty then, claimed since.
        write(&mut copy, 0, state(3, 4), 1);
        write(&mut file, 0, state(3, 6), 2);
        write(&mut copy, 1, state(4, 2), 1);
        write(&mut file, 1, state(7, 1) | 1, 3);
        write(&mut copy, 2, state(5, 9), 1);
        write(&mut file, 2, state(5, 9), 1);
        write(&mut file, 3, state(8, 1), 4);
        settle_slots(&mut copy, &header, |at, into| {
            let at = at as usize;
            into.copy_from_slice(file.get(at..at + into.len())?);
            Some(())
        });
        let word = |copy: &[u8], slot: usize| {
            let at = slot_at(slot);
            u64::from_le_bytes(copy[at..at + 8].try_into().unwrap())
        };
        assert_eq!(word(&copy, 0), state(3, 6));
        assert_eq!(copy[slot_at(0) + 100], 2, "slot 0 read again");
        assert_eq!(word(&copy, 1), 0, "slot 1 dropped");
        assert_eq!(word(&copy, 2), state(5, 9));
        assert_eq!(copy[slot_at(2) + 100], 1);
        assert_eq!(word(&copy, 3), state(8, 1));
        assert_eq!(copy[slot_at(3) + 100], 4, "slot 3 read");
    }
}
