//! The JSON-lines interchange format (`schemas/events-jsonl.md`), converted
//! to the binary layout through the format crate's writer.
//!
//! Two details keep the conversion exact:
//! * Equal timestamps of different threads keep the file's line order: ticks
//!   are `ts * K + rank`, where `rank` counts earlier lines with the same
//!   `ts` and `K` (a power of two, 1 when no timestamps tie) is the clock's
//!   ticks per nanosecond, so every `ts` converts back to itself exactly while
//!   the tick order remembers the line order (the `gil` clock needs it).
//! * An `exit` without `file`/`line` closes the innermost open frame of that
//!   name on its stack, whatever file the `enter` named.
//!
//! A `mark` line becomes a mark record of the metadata region (not an
//! event), with the tick its `ts` and rank give it like any line's.

use std::collections::HashMap;
use std::io::Cursor;

use mtrace_format::event::MAX_TICK;
use mtrace_format::{
    ClockInfo, ClockKind, EventKind, FunctionId, StackId, ThreadId, TraceWriter, WriterOptions,
};
use serde::Deserialize;

/// A line that is not a valid event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    ts: Option<u64>,
    tid: u64,
    ev: String,
    #[serde(rename = "fn")]
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    #[serde(default)]
    stack: serde_json::Value,
    name: Option<String>,
}

enum Parsed {
    Enter {
        name: String,
        file: String,
        line: u32,
    },
    Exit {
        name: String,
        site: Option<(String, u32)>,
    },
    Switch(Option<String>),
    /// The recorder lost the thread's events from here on.
    Lost,
    /// The task on the named stack was woken.
    Wake(String),
    /// The named logical stack ended: no thread will run it again.
    End(String),
    /// A named instant (a metadata record, not an event).
    Mark(String),
}

struct Line {
    line_no: usize,
    tid: u64,
    ts: u64,
    what: Parsed,
}

/// Parses JSON lines and writes the same events as a binary trace.
pub fn to_binary(text: &str) -> Result<Vec<u8>, JsonlError> {
    let mut events = Vec::new();
    let mut names: Vec<(u64, String)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |message: String| JsonlError {
            line: line_no,
            message,
        };
        if raw.trim().is_empty() {
            continue;
        }
        let r: RawLine = serde_json::from_str(raw).map_err(|e| err(e.to_string()))?;
        if r.tid == 0 {
            return Err(err("tid 0 is reserved; number threads from 1".into()));
        }
        let need_fn = || {
            r.function
                .clone()
                .ok_or_else(|| err(format!("`{}` needs \"fn\"", r.ev)))
        };
        let what = match r.ev.as_str() {
            "thread" => {
                names.push((r.tid, r.name.clone().unwrap_or_default()));
                continue;
            }
            "enter" => Parsed::Enter {
                name: need_fn()?,
                file: r.file.clone().unwrap_or_default(),
                line: r.line.unwrap_or(0),
            },
            "exit" => Parsed::Exit {
                name: need_fn()?,
                site: r.file.clone().map(|f| (f, r.line.unwrap_or(0))),
            },
            "switch" => match &r.stack {
                serde_json::Value::Null => Parsed::Switch(None),
                serde_json::Value::String(s) => Parsed::Switch(Some(s.clone())),
                other => {
                    return Err(err(format!(
                        "\"stack\" must be a string or null, not {other}"
                    )))
                }
            },
            "lost" => Parsed::Lost,
            "mark" => {
                if u32::try_from(r.tid).is_err() {
                    return Err(err(format!(
                        "a mark's tid must be below 2^32 (the binary record keeps 32 bits), not {}",
                        r.tid
                    )));
                }
                match &r.name {
                    Some(name) => Parsed::Mark(name.clone()),
                    None => return Err(err("`mark` needs \"name\"".into())),
                }
            }
            "wake" => match &r.stack {
                serde_json::Value::String(s) if own_stack_tid(s).is_none() => {
                    Parsed::Wake(s.clone())
                }
                _ => {
                    return Err(err(
                        "\"wake\" needs \"stack\": the name of a logical stack".into()
                    ))
                }
            },
            "end" => match &r.stack {
                serde_json::Value::String(s) if own_stack_tid(s).is_none() => {
                    Parsed::End(s.clone())
                }
                _ => {
                    return Err(err(
                        "\"end\" needs \"stack\": the name of a logical stack".into()
                    ))
                }
            },
            other => {
                return Err(err(format!(
                    "unknown \"ev\" {other:?} (expected enter, exit, switch, lost, wake, end, mark or thread)"
                )))
            }
        };
        let ts =
            r.ts.ok_or_else(|| err(format!("`{}` needs an integer \"ts\"", r.ev)))?;
        events.push(Line {
            line_no,
            tid: r.tid,
            ts,
            what,
        });
    }
    write(&events, &names)
}

fn write(events: &[Line], names: &[(u64, String)]) -> Result<Vec<u8>, JsonlError> {
    // Rank equal timestamps in line order; K = ticks per ns.
    let mut ties: HashMap<u64, u64> = HashMap::new();
    let mut ranks = Vec::with_capacity(events.len());
    for e in events {
        let r = ties.entry(e.ts).or_insert(0);
        ranks.push(*r);
        *r += 1;
    }
    let k = ties
        .values()
        .copied()
        .max()
        .unwrap_or(1)
        .next_power_of_two();
    let max_ts = events.iter().map(|e| e.ts).max().unwrap_or(0);
    if max_ts.checked_mul(k).is_none_or(|t| t > MAX_TICK - k) {
        return Err(JsonlError {
            line: 0,
            message: format!("timestamps up to {max_ts} with {k} events at one instant do not fit the 60-bit tick"),
        });
    }
    let clock = ClockInfo {
        kind: ClockKind::Nanoseconds,
        calib_ticks: k,
        calib_ns: 1,
        ..ClockInfo::nanoseconds()
    };
    let options = WriterOptions {
        clock,
        chunk_size: chunk_size_for(events),
        ..Default::default()
    };
    let io = |e: mtrace_format::WriteError| JsonlError {
        line: 0,
        message: e.to_string(),
    };
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), options).map_err(io)?;
    for (tid, name) in names {
        w.thread_name(ThreadId(*tid), 0, name);
    }
    // Open frames per stack, to resolve exits that name only the function.
    let mut current: HashMap<u64, StackKey> = HashMap::new();
    let mut open: HashMap<StackKey, Vec<(FunctionId, String)>> = HashMap::new();
    for (e, rank) in events.iter().zip(ranks) {
        let tick = e.ts * k + rank;
        if let Parsed::Mark(name) = &e.what {
            // Checked below 2^32 when parsed.
            w.mark(tick, u32::try_from(e.tid).unwrap_or(0), name);
            continue;
        }
        let stack = current.entry(e.tid).or_insert(StackKey::Own(e.tid)).clone();
        let kind = match &e.what {
            Parsed::Enter { name, file, line } => {
                let id = w.function(name, file, *line, "");
                open.entry(stack).or_default().push((id, name.clone()));
                EventKind::Enter(id)
            }
            Parsed::Exit { name, site } => {
                let frames = open.entry(stack).or_default();
                let id = match site {
                    Some((file, line)) => w.function(name, file, *line, ""),
                    None => match frames.iter().rev().find(|(_, n)| n == name) {
                        Some((id, _)) => *id,
                        None => w.function(name, "", 0, ""),
                    },
                };
                if let Some(pos) = frames.iter().rposition(|(f, _)| *f == id) {
                    frames.truncate(pos);
                }
                EventKind::Exit(id)
            }
            Parsed::Switch(target) => {
                let key = match target.as_deref() {
                    None => StackKey::Own(e.tid),
                    Some(s) => match own_stack_tid(s) {
                        Some(tid) => StackKey::Own(tid),
                        None => StackKey::Named(s.to_owned()),
                    },
                };
                let id = match &key {
                    StackKey::Own(tid) if *tid == e.tid => StackId::OWN,
                    StackKey::Own(_) => {
                        return Err(JsonlError {
                            line: e.line_no,
                            message: "a switch onto another thread's own stack is not supported"
                                .into(),
                        })
                    }
                    StackKey::Named(s) => w.stack(s),
                };
                current.insert(e.tid, key);
                EventKind::Switch(id)
            }
            Parsed::Lost => EventKind::Lost,
            Parsed::Wake(name) => EventKind::Wake(w.stack(name)),
            Parsed::End(name) => EventKind::End(w.stack(name)),
            Parsed::Mark(_) => continue, // written above
        };
        w.event(ThreadId(e.tid), tick, kind)
            .map_err(|err| JsonlError {
                line: e.line_no,
                message: err.to_string(),
            })?;
    }
    Ok(w.finish(None).map_err(io)?.into_inner())
}

/// Every thread of the output fills at least one whole chunk, so a file of
/// one-line threads would turn each ~40-byte line into a 64 KiB chunk (and
/// a writer buffer as large). Up to 1024 threads keep the default chunk
/// size; beyond, chunks shrink so the threads' chunks stay within 64 MiB,
/// down to the format's 1 KiB minimum: memory and output grow with the
/// input, never with what it claims.
fn chunk_size_for(events: &[Line]) -> usize {
    use mtrace_format::layout::{DEFAULT_CHUNK_SIZE, MIN_CHUNK_SIZE};
    const BUDGET: usize = 64 << 20;
    let mut tids: Vec<u64> = events
        .iter()
        .filter(|e| !matches!(e.what, Parsed::Mark(_)))
        .map(|e| e.tid)
        .collect();
    tids.sort_unstable();
    tids.dedup();
    let fit = BUDGET / tids.len().max(1);
    if fit >= DEFAULT_CHUNK_SIZE {
        DEFAULT_CHUNK_SIZE
    } else {
        // The largest power of two that fits (a multiple of 64 from 1 KiB on).
        (1usize << fit.max(1).ilog2()).max(MIN_CHUNK_SIZE)
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum StackKey {
    Own(u64),
    Named(String),
}

/// `thread:<tid>` names a thread's own stack.
fn own_stack_tid(name: &str) -> Option<u64> {
    name.strip_prefix("thread:")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtrace_format::TraceFile;

    fn events_of(bytes: &[u8]) -> Vec<(u64, u64, EventKind)> {
        let t = TraceFile::parse(bytes).unwrap();
        let mut out = Vec::new();
        for i in 0..t.chunk_slots() {
            let c = t.chunk(i).unwrap().unwrap();
            for e in c.events() {
                let e = e.unwrap();
                out.push((c.thread.0, t.header().clock.ticks_to_ns(e.tick), e.kind));
            }
        }
        out
    }

    #[test]
    fn timestamps_survive_and_ties_keep_line_order() {
        let text = r#"{"ts": 5, "tid": 2, "ev": "enter", "fn": "a", "file": "x.rs", "line": 3}
{"ts": 5, "tid": 1, "ev": "enter", "fn": "b"}
{"ev": "thread", "tid": 1, "name": "main"}
{"ts": 9, "tid": 2, "ev": "exit", "fn": "a"}
{"ts": 9, "tid": 1, "ev": "switch", "stack": "task"}
"#;
        let bytes = to_binary(text).unwrap();
        let t = TraceFile::parse(&bytes).unwrap();
        assert_eq!(t.header().clock.calib_ticks, 2);
        let evs = events_of(&bytes);
        assert!(evs.contains(&(2, 5, EventKind::Enter(FunctionId(1)))));
        // The exit names no file but closes the frame entered with one.
        assert!(evs.contains(&(2, 9, EventKind::Exit(FunctionId(1)))));
        assert!(evs.contains(&(1, 9, EventKind::Switch(StackId(1)))));
    }

    #[test]
    fn an_end_names_the_logical_stack_that_ended() {
        let text = r#"{"ts": 5, "tid": 1, "ev": "switch", "stack": "task-7"}
{"ts": 7, "tid": 1, "ev": "switch", "stack": null}
{"ts": 9, "tid": 2, "ev": "end", "stack": "task-7"}
{"ts": 9, "tid": 2, "ev": "end", "stack": "never-ran"}
"#;
        let evs = events_of(&to_binary(text).unwrap());
        assert!(evs.contains(&(2, 9, EventKind::End(StackId(1)))));
        assert!(evs.contains(&(2, 9, EventKind::End(StackId(2)))));
    }

    #[test]
    fn marks_become_mark_records_with_their_ticks() {
        use mtrace_format::MetaRecord;
        // Two lines share ts 10: K = 2, and the mark keeps its line order.
        let text = r#"{"ts": 10, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 10, "tid": 1, "ev": "mark", "name": "warm-up done"}
{"ts": 30, "tid": 2, "ev": "mark", "name": ""}
{"ts": 20, "tid": 1, "ev": "exit", "fn": "main"}
"#;
        let bytes = to_binary(text).unwrap();
        let t = TraceFile::parse(&bytes).unwrap();
        let clock = t.header().clock;
        assert_eq!(clock.calib_ticks, 2);
        // The last mark ends the trace, as the last event would.
        assert_eq!(t.header().end_tick, Some(60));
        let (records, problem) = t.metadata();
        assert!(problem.is_none());
        let marks: Vec<(u64, u64, u32, String)> = records
            .into_iter()
            .filter_map(|r| match r {
                MetaRecord::Mark { tick, tid, name } => {
                    Some((tick, clock.ticks_to_ns(tick), tid, name))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            marks,
            [
                (21, 10, 1, "warm-up done".into()),
                (60, 30, 2, String::new())
            ]
        );
        // Marks are not events, and make no thread of their own.
        assert_eq!(events_of(&bytes).len(), 2);
    }

    #[test]
    fn many_one_line_threads_get_small_chunks() {
        let text: String = (1..=5000)
            .map(|t| format!("{{\"ts\": {t}, \"tid\": {t}, \"ev\": \"enter\", \"fn\": \"f\"}}\n"))
            .collect();
        let bytes = to_binary(&text).unwrap();
        let t = TraceFile::parse(&bytes).unwrap();
        assert_eq!(t.header().chunk_size, 8192);
        assert!(bytes.len() < 50 << 20, "{} bytes", bytes.len());
        assert_eq!(events_of(&bytes).len(), 5000);
        // A few threads keep the default.
        let few = to_binary("{\"ts\": 1, \"tid\": 1, \"ev\": \"enter\", \"fn\": \"f\"}").unwrap();
        let t = TraceFile::parse(&few).unwrap();
        assert_eq!(t.header().chunk_size, 65536);
    }

    #[test]
    fn bad_lines_name_their_line_number() {
        let cases = [
            (
                "{\"ts\": 1, \"tid\": 1, \"ev\": \"jump\"}",
                "unknown \"ev\"",
            ),
            ("{\"ts\": 1, \"tid\": 1, \"ev\": \"enter\"}", "needs \"fn\""),
            (
                "{\"ts\": 1, \"tid\": 1, \"ev\": \"mark\"}",
                "needs \"name\"",
            ),
            (
                "{\"tid\": 1, \"ev\": \"mark\", \"name\": \"m\"}",
                "needs an integer \"ts\"",
            ),
            (
                "{\"ts\": 1, \"tid\": 4294967296, \"ev\": \"mark\", \"name\": \"m\"}",
                "below 2^32",
            ),
            (
                "{\"tid\": 1, \"ev\": \"exit\", \"fn\": \"f\"}",
                "needs an integer \"ts\"",
            ),
            (
                "{\"ts\": -1, \"tid\": 1, \"ev\": \"exit\", \"fn\": \"f\"}",
                "invalid value",
            ),
            ("not json", "expected"),
            (
                "{\"ts\": 1, \"tid\": 1, \"ev\": \"end\", \"stack\": null}",
                "\"end\" needs \"stack\"",
            ),
            (
                "{\"ts\": 1, \"tid\": 1, \"ev\": \"end\", \"stack\": \"thread:1\"}",
                "the name of a logical stack",
            ),
        ];
        for (line, want) in cases {
            let text =
                format!("{{\"ts\": 0, \"tid\": 1, \"ev\": \"enter\", \"fn\": \"ok\"}}\n{line}\n");
            let e = to_binary(&text).unwrap_err();
            assert_eq!(e.line, 2, "{line}");
            assert!(e.message.contains(want), "{line}: {}", e.message);
        }
    }
}
