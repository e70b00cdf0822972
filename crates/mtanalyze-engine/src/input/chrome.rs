//! Chrome Trace Event JSON -> binary trace. `schemas/chrome-import.md` is
//! the contract; in short:
//!
//! * both shapes: a bare array of events (the closing `]` may be missing,
//!   as in a trace cut off while it was written) and `{"traceEvents": [...]}`;
//! * `B`/`E` pairs and `X` complete events become enter/exit pairs; every
//!   (`pid`, `tid`) becomes a thread with its own stack; `M` events name
//!   threads (`thread_name`) and processes (`process_name`);
//! * `ts` and `dur` are microseconds, fractions allowed; they become
//!   integer nanoseconds (rounded);
//! * every other phase (instants, counters, async, flow, samples, objects)
//!   is ignored, and so are `args` other than the source locations below.
//!
//! Function identity: the event's `name`, plus a source location from
//! `tracing-chrome`'s `.file`/`.line` fields (or its older `args`
//! `[file]`/`[line]`), from `args` `file` and `line` together (what
//! `mtanalyze export --format chrome` writes), or from a name of
//! VizTracer's shape `qualname (file.py:12)`.
//!
//! Nesting: a thread's intervals are sorted by start, longer first, and
//! swept with a stack, so exits come out innermost first and never before
//! their enters, whatever order the file listed them in (VizTracer writes
//! a call when it returns, after its callees). An interval that outlives
//! its parent is cut at the parent's end.

use std::collections::{BTreeMap, HashMap};
use std::io::Cursor;

use serde::Deserialize;

use mtrace_format::event::MAX_TICK;
use mtrace_format::{
    ClockInfo, EventKind, FunctionId, StackId, ThreadId, TraceWriter, WriterOptions,
};

use mtanalyze_model::timeline::PAUSED_CATEGORY;

/// Why a file could not be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    /// What is wrong, with the place in the file when known (`line 3 column 7: ...`).
    pub message: String,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ImportError {}

#[derive(Deserialize)]
struct ObjectForm {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<RawEvent>,
}

/// One event. Unknown fields are ignored; fields this importer does not
/// use are not even typed, so odd values in them cannot fail the import.
#[derive(Deserialize, Default)]
struct RawEvent {
    #[serde(default)]
    ph: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    cat: Option<String>,
    #[serde(default)]
    ts: Option<f64>,
    #[serde(default)]
    dur: Option<f64>,
    #[serde(default)]
    pid: Option<Id>,
    #[serde(default)]
    tid: Option<Id>,
    #[serde(default)]
    args: Option<serde_json::Value>,
    #[serde(default, rename = ".file")]
    dot_file: Option<String>,
    #[serde(default, rename = ".line")]
    dot_line: Option<serde_json::Value>,
}

/// A `pid` or `tid`: producers write integers, some write strings.
#[derive(Deserialize, Clone, Debug)]
#[serde(untagged)]
enum Id {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Text(String),
}

/// An [`Id`] that can be ordered and hashed: numbers before strings.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key {
    Num(i128),
    Text(String),
}

impl Key {
    fn of(id: Option<&Id>) -> Key {
        match id {
            None => Key::Num(0),
            Some(Id::Unsigned(u)) => Key::Num(*u as i128),
            Some(Id::Signed(i)) => Key::Num(*i as i128),
            Some(Id::Float(f)) if f.fract() == 0.0 && f.abs() < 1e30 => Key::Num(*f as i128),
            Some(Id::Float(f)) => Key::Text(f.to_string()),
            Some(Id::Text(s)) => Key::Text(s.clone()),
        }
    }

    fn show(&self) -> String {
        match self {
            Key::Num(n) => n.to_string(),
            Key::Text(s) => s.clone(),
        }
    }
}

/// A function as the binary trace names it.
type FnKey = (String, String, u32);

/// One interval on a thread: a frame, or (from our own export) a paused stretch.
struct Interval {
    start: i64,
    /// `None`: still open at the end of the trace (a `B` without its `E`).
    end: Option<i64>,
    func: usize,
    paused: bool,
    order: usize,
}

#[derive(Default)]
struct Thread {
    intervals: Vec<Interval>,
    /// `B` and `E` events in file order: (ns, order, is a `B`, function).
    begin_end: Vec<(i64, usize, bool, usize, bool)>,
}

/// What the sweep writes for a thread, in time order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Enter(usize),
    Exit(usize),
    Pause,
    Resume,
}

/// Parses Chrome Trace Event JSON and writes the same frames as a binary trace.
pub(crate) fn to_binary(text: &str) -> Result<Vec<u8>, ImportError> {
    convert(parse(text)?)
}

fn json_error(e: &serde_json::Error) -> ImportError {
    ImportError {
        message: format!("Chrome trace JSON: {e}"),
    }
}

fn parse(text: &str) -> Result<Vec<RawEvent>, ImportError> {
    let body = text.trim_start();
    if !body.starts_with('[') {
        return serde_json::from_str::<ObjectForm>(text)
            .map(|o| o.trace_events)
            .map_err(|e| json_error(&e));
    }
    match serde_json::from_str::<Vec<RawEvent>>(text) {
        Ok(events) => Ok(events),
        // The array form may lack its closing bracket (and end with a comma).
        Err(e) if e.is_eof() => {
            let mut fixed = text.trim_end().trim_end_matches(',').to_owned();
            fixed.push(']');
            serde_json::from_str(&fixed).map_err(|_| json_error(&e))
        }
        Err(e) => Err(json_error(&e)),
    }
}

fn nanoseconds(us: f64) -> i64 {
    // `as` saturates; the range check comes later.
    (us * 1000.0).round() as i64
}

/// Splits VizTracer's `qualname (path/file.py:12)` into its parts.
fn split_site(name: &str) -> Option<(&str, &str, u32)> {
    let inner = name.strip_suffix(')')?;
    let (function, site) = inner.rsplit_once(" (")?;
    let (file, line) = site.rsplit_once(':')?;
    let line = line.parse().ok()?;
    (!function.is_empty() && !file.is_empty()).then_some((function, file, line))
}

fn number(v: &serde_json::Value) -> Option<u32> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn function_of(e: &RawEvent) -> FnKey {
    let name = e
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("(unnamed)");
    let arg = |k: &str| e.args.as_ref().and_then(|a| a.get(k));
    let file = e
        .dot_file
        .clone()
        .or_else(|| arg("[file]").and_then(|f| f.as_str()).map(str::to_owned));
    if let Some(file) = file {
        let line = e
            .dot_line
            .as_ref()
            .or_else(|| arg("[line]"))
            .and_then(number)
            .unwrap_or(0);
        return (name.to_owned(), file, line);
    }
    // `mtanalyze export --format chrome` writes `args: {file, line}`; both
    // must be there, so a function argument named `file` is not taken for one.
    if let (Some(file), Some(line)) = (
        arg("file").and_then(|f| f.as_str()),
        arg("line").and_then(number),
    ) {
        return (name.to_owned(), file.to_owned(), line);
    }
    match split_site(name) {
        Some((f, file, line)) => (f.to_owned(), file.to_owned(), line),
        None => (name.to_owned(), String::new(), 0),
    }
}

fn convert(events: Vec<RawEvent>) -> Result<Vec<u8>, ImportError> {
    let mut functions: Vec<FnKey> = Vec::new();
    let mut function_ids: HashMap<FnKey, usize> = HashMap::new();
    let mut intern = |key: FnKey| -> usize {
        *function_ids.entry(key.clone()).or_insert_with(|| {
            functions.push(key);
            functions.len() - 1
        })
    };
    let mut threads: BTreeMap<(Key, Key), Thread> = BTreeMap::new();
    let mut thread_names: HashMap<(Key, Key), String> = HashMap::new();
    let mut process_names: HashMap<Key, String> = HashMap::new();
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for (order, e) in events.iter().enumerate() {
        let ph = e.ph.as_deref().unwrap_or("");
        let at = |what: &str| ImportError {
            message: format!("event {} (\"ph\": {ph:?}): {what}", order + 1),
        };
        let pid = Key::of(e.pid.as_ref());
        let key = (pid.clone(), Key::of(e.tid.as_ref()));
        if ph == "M" {
            let name = e
                .args
                .as_ref()
                .and_then(|a| a.get("name"))
                .and_then(|n| n.as_str());
            match (e.name.as_deref(), name) {
                (Some("thread_name"), Some(n)) => {
                    thread_names.insert(key, n.to_owned());
                }
                (Some("process_name"), Some(n)) => {
                    process_names.insert(pid, n.to_owned());
                }
                _ => {}
            }
            continue;
        }
        // Every timestamped event bounds the trace, even one we ignore.
        let ts = e.ts.map(nanoseconds);
        if let Some(t) = ts {
            first = first.min(t);
            last = last.max(t);
        }
        if !matches!(ph, "B" | "E" | "X") {
            continue;
        }
        let start = ts.ok_or_else(|| at("no \"ts\""))?;
        let thread = threads.entry(key).or_default();
        match ph {
            "X" => {
                let end = nanoseconds(e.ts.unwrap_or(0.0) + e.dur.unwrap_or(0.0).max(0.0));
                let end = end.max(start);
                last = last.max(end);
                let paused = e.cat.as_deref() == Some(PAUSED_CATEGORY);
                thread.intervals.push(Interval {
                    start,
                    end: Some(end),
                    func: intern(function_of(e)),
                    paused,
                    order,
                });
            }
            _ => {
                let f = intern(function_of(e));
                let paused = e.cat.as_deref() == Some(PAUSED_CATEGORY);
                thread.begin_end.push((start, order, ph == "B", f, paused));
            }
        }
    }
    if threads.is_empty() {
        return Err(ImportError {
            message: "Chrome trace JSON without any duration event (\"ph\" B, E or X): \
                      nothing to analyze"
                .into(),
        });
    }
    // Ticks are nanoseconds from the earliest timestamp if it is negative,
    // else the file's own (so times match the producer's).
    let shift = if first < 0 { -(first as i128) } else { 0 };
    let end_tick = last as i128 + shift;
    if end_tick > MAX_TICK as i128 {
        return Err(ImportError {
            message: format!(
                "timestamps span {} µs, more than the trace format's 60-bit nanosecond ticks hold",
                (last as i128 - first as i128) / 1000
            ),
        });
    }
    let tick = |ns: i64| (ns as i128 + shift) as u64;

    let several_processes = threads.keys().map(|(p, _)| p).collect::<Vec<_>>();
    let several_processes = several_processes.windows(2).any(|w| w[0] != w[1]);
    let single_pid = match threads.keys().next() {
        Some((Key::Num(p), _)) if !several_processes => u32::try_from(*p).unwrap_or(0),
        _ => 0,
    };
    let options = WriterOptions {
        clock: ClockInfo::nanoseconds(),
        pid: single_pid,
        ..WriterOptions::default()
    };
    let io = |e: mtrace_format::WriteError| ImportError {
        message: e.to_string(),
    };
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), options).map_err(io)?;
    let mut ids: Vec<Option<FunctionId>> = vec![None; functions.len()];
    for (n, (key, thread)) in threads.into_iter().enumerate() {
        let tid = ThreadId(n as u64 + 1);
        let (pid, raw_tid) = &key;
        let mut name = thread_names
            .get(&key)
            .cloned()
            .unwrap_or_else(|| format!("tid {}", raw_tid.show()));
        if several_processes {
            let process = process_names
                .get(pid)
                .cloned()
                .unwrap_or_else(|| format!("pid {}", pid.show()));
            name = format!("{process}: {name}");
        }
        let os_tid = match raw_tid {
            Key::Num(t) => u64::try_from(*t).unwrap_or(0),
            Key::Text(_) => 0,
        };
        w.thread_name(tid, os_tid, &name);
        let mut paused_stack: Option<StackId> = None;
        for (ns, step) in sweep(thread) {
            let kind = match step {
                Step::Enter(f) | Step::Exit(f) => {
                    let id = *ids[f].get_or_insert_with(|| {
                        let (name, file, line) = &functions[f];
                        w.function(name, file, *line, "")
                    });
                    if matches!(step, Step::Enter(_)) {
                        EventKind::Enter(id)
                    } else {
                        EventKind::Exit(id)
                    }
                }
                Step::Pause => EventKind::Switch(
                    *paused_stack.get_or_insert_with(|| w.stack(&format!("paused ({name})"))),
                ),
                Step::Resume => EventKind::Switch(StackId::OWN),
            };
            w.event(tid, tick(ns), kind).map_err(io)?;
        }
    }
    Ok(w.finish(Some(end_tick as u64)).map_err(io)?.into_inner())
}

/// A thread's steps in time order: `B`/`E` paired into intervals, then all
/// intervals swept with a stack so they nest.
fn sweep(mut thread: Thread) -> Vec<(i64, Step)> {
    // Pair B and E in time order (file order for equal times): an E closes
    // the newest open B, as in the format's definition.
    thread
        .begin_end
        .sort_by_key(|&(ns, order, _, _, _)| (ns, order));
    let mut open_b: Vec<(i64, usize, usize, bool)> = Vec::new();
    let mut stray_exits: Vec<(i64, usize)> = Vec::new();
    for (ns, order, begin, func, paused) in thread.begin_end {
        match begin {
            true => open_b.push((ns, func, order, paused)),
            false => match open_b.pop() {
                Some((start, f, order, paused)) => thread.intervals.push(Interval {
                    start,
                    end: Some(ns),
                    func: f,
                    paused,
                    order,
                }),
                // An E with nothing open: kept (as an exit of the
                // function it names), so the analyzer warns about it.
                None => stray_exits.push((ns, func)),
            },
        }
    }
    for (start, func, order, paused) in open_b {
        thread.intervals.push(Interval {
            start,
            end: None,
            func,
            paused,
            order,
        });
    }
    let mut intervals = thread.intervals;
    intervals.sort_by_key(|i| {
        (
            i.start,
            std::cmp::Reverse(i.end.unwrap_or(i64::MAX)),
            i.paused,
            i.order,
        )
    });
    let mut steps = Vec::with_capacity(intervals.len() * 2);
    // Open intervals: (end, step that closes it).
    let mut open: Vec<(i64, Step)> = Vec::new();
    for i in intervals {
        while let Some(&(end, close)) = open.last() {
            // A paused stretch has no children: a slice starting inside it
            // ends it.
            if end <= i.start || close == Step::Resume {
                steps.push((end.min(i.start), close));
                open.pop();
            } else {
                break;
            }
        }
        let parent_end = open.last().map_or(i64::MAX, |&(e, _)| e);
        let end = i.end.unwrap_or(i64::MAX).min(parent_end);
        if i.paused {
            steps.push((i.start, Step::Pause));
            open.push((end, Step::Resume));
        } else {
            steps.push((i.start, Step::Enter(i.func)));
            open.push((end, Step::Exit(i.func)));
        }
    }
    while let Some((end, close)) = open.pop() {
        if end != i64::MAX {
            steps.push((end, close));
        }
    }
    if !stray_exits.is_empty() {
        steps.extend(stray_exits.into_iter().map(|(ns, f)| (ns, Step::Exit(f))));
        steps.sort_by_key(|&(ns, _)| ns);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viztracer_names_carry_their_source_location() {
        assert_eq!(
            split_site("fib (/home/u/fib.py:3)"),
            Some(("fib", "/home/u/fib.py", 3))
        );
        assert_eq!(
            split_site("A.run (C:\\x\\a.py:12)"),
            Some(("A.run", "C:\\x\\a.py", 12))
        );
        assert_eq!(split_site("builtins.print"), None);
        assert_eq!(split_site("f (no line)"), None);
    }

    fn steps_of(intervals: &[(i64, Option<i64>)]) -> Vec<(i64, Step)> {
        let thread = Thread {
            intervals: intervals
                .iter()
                .enumerate()
                .map(|(order, &(start, end))| Interval {
                    start,
                    end,
                    func: order,
                    paused: false,
                    order,
                })
                .collect(),
            begin_end: Vec::new(),
        };
        sweep(thread)
    }

    #[test]
    fn the_sweep_nests_intervals_listed_children_first() {
        use Step::*;
        // Listed as VizTracer writes them: callees first.
        let steps = steps_of(&[(2, Some(4)), (4, Some(4)), (0, Some(10)), (5, Some(12))]);
        assert_eq!(
            steps,
            vec![
                (0, Enter(2)),
                (2, Enter(0)),
                (4, Exit(0)),
                (4, Enter(1)),
                (4, Exit(1)),
                (5, Enter(3)),
                // Cut at its parent's end.
                (10, Exit(3)),
                (10, Exit(2)),
            ]
        );
    }
}
