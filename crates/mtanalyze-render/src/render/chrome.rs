//! `export --format chrome`: Chrome Trace Event JSON for Perfetto UI,
//! `chrome://tracing` and speedscope.
//!
//! ```text
//! {"traceEvents": [
//!   {"name": "thread_name", "ph": "M", "pid": 1, "tid": 3, "args": {"name": "task-1 (stack:1)"}},
//!   {"name": "handler", "cat": "function", "ph": "B", "ts": 0.01, "pid": 1, "tid": 3, ".file": "src/h.rs", ".line": 12},
//!   {"name": "query", "cat": "function", "ph": "B", "ts": 0.02, "pid": 1, "tid": 3, ...},
//!   {"name": "paused", "cat": "mtrace.paused", "ph": "B", "ts": 0.03, "pid": 1, "tid": 3, "cname": "grey"},
//!   {"name": "paused", "cat": "mtrace.paused", "ph": "E", "ts": 0.06, "pid": 1, "tid": 3},
//!   {"name": "query", "cat": "function", "ph": "E", "ts": 0.075, "pid": 1, "tid": 3},
//!   {"name": "handler", "cat": "function", "ph": "E", "ts": 0.08, "pid": 1, "tid": 3}
//! ], "displayTimeUnit": "ns", "otherData": {...}}
//! ```
//!
//! One track (a `tid` of one process) per logical stack, named after it;
//! a frame is named by its function's label ([`mtanalyze_model::labels::Labels`]); frames are properly nested begin/end (`B`/`E`) pairs; each stretch
//! during which the stack did not run is a `paused` slice under the
//! innermost open frame, so a viewer's self time (duration minus children)
//! is the report's. Times are microseconds from the trace's time zero with
//! nanosecond fractions.
//!
//! Why `B`/`E` and not `X` (`ts` + `dur`): viewers compute an `X` slice's
//! end as `ts + dur` in float64, where a child that ends at the same
//! nanosecond as its parent can end a hair later (`28501.113 + 0.361 =
//! 28501.474000000002` against `28501.103 + 0.371 = 28501.474`), which
//! breaks the nesting: speedscope reports "Tried to end X when Y was on the
//! top of the stack" and draws a staircase. No choice of `dur` avoids it
//! every time (for `ts` 2.044 no double lands on 7.04). A `B`/`E` time is
//! one division, `ns / 1000`, and rounding is monotone: equal nanoseconds
//! give equal times and ordered ones ordered times in every float64 reader,
//! and the file lists events in nesting order for readers that keep it at
//! equal times. Source locations go in tracing-chrome's top-level `.file`
//! and `.line` fields, not in `args`, which speedscope appends to names.

use std::io::{self, Write};

use serde::Serialize;

use mtanalyze_model::labels::{LabelSite, Labels};
use mtanalyze_model::timeline::{SliceKind, TimelineSource, TimelineStack, PAUSED_CATEGORY};

#[derive(Serialize)]
struct Meta<'a, A: Serialize> {
    name: &'a str,
    ph: &'a str,
    pid: u32,
    tid: u64,
    args: A,
}

#[derive(Serialize)]
struct NameArg<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct SortArg {
    sort_index: u64,
}

/// A `B` (begin) or `E` (end) event.
#[derive(Serialize)]
struct Edge<'a> {
    name: &'a str,
    cat: &'a str,
    ph: &'a str,
    ts: f64,
    pid: u32,
    tid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cname: Option<&'a str>,
    #[serde(rename = ".file", skip_serializing_if = "Option::is_none")]
    file: Option<&'a str>,
    #[serde(rename = ".line", skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Serialize)]
struct OtherData<'a> {
    source: &'a str,
    clock: String,
    exporter: String,
}

/// Microseconds with the nanoseconds as a fraction: `ns / 1000` in an f64,
/// which prints as the exact decimal (shortest round trip) below 2^53 ns.
/// Rounding is monotone, so ordered nanoseconds give ordered microseconds.
fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The track name: the stack's name with its id, or the id alone.
pub(crate) fn track_name(stack: &TimelineStack) -> String {
    if stack.name.is_empty() {
        stack.id.clone()
    } else {
        format!("{} ({})", stack.name, stack.id)
    }
}

/// Writes the whole export. `progress` is called after each stack with the
/// number of events its replay read.
pub fn chrome(
    out: &mut dyn Write,
    t: &dyn TimelineSource,
    progress: &mut dyn FnMut(u64),
) -> io::Result<()> {
    let pid = if t.pid() == 0 { 1 } else { t.pid() };
    let mut list = JsonList::new(b",\n");
    let mut event = |out: &mut dyn Write, value: &dyn Erased| list.item(out, value);
    out.write_all(b"{\"traceEvents\": [\n")?;
    let process = format!("mtanalyze: {} (clock: {})", t.source(), t.clock());
    event(
        out,
        &Meta {
            name: "process_name",
            ph: "M",
            pid,
            tid: 0,
            args: NameArg { name: &process },
        },
    )?;
    let functions = t.functions();
    let labels = Labels::new(functions.iter().map(LabelSite::from));
    for (i, stack) in t.stacks().iter().enumerate() {
        let tid = i as u64 + 1;
        let name = track_name(stack);
        event(
            out,
            &Meta {
                name: "thread_name",
                ph: "M",
                pid,
                tid,
                args: NameArg { name: &name },
            },
        )?;
        event(
            out,
            &Meta {
                name: "thread_sort_index",
                ph: "M",
                pid,
                tid,
                args: SortArg {
                    sort_index: i as u64,
                },
            },
        )?;
        // Slices come in pre-order with their depth: the open ones end
        // before a slice at their depth or above begins.
        let mut open: Vec<Edge<'_>> = Vec::new();
        let timeline = t.stack(i);
        for s in &timeline.slices {
            while open.len() > s.depth as usize {
                if let Some(e) = open.pop() {
                    event(out, &e)?;
                }
            }
            let begin = match s.kind {
                SliceKind::Frame(f) => {
                    let key = functions.get(f as usize).map(|e| &e.key);
                    let site = key.filter(|k| !k.file.is_empty());
                    Edge {
                        name: labels.get(f as usize),
                        cat: "function",
                        ph: "B",
                        ts: micros(s.start_ns),
                        pid,
                        tid,
                        cname: None,
                        file: site.map(|k| &*k.file),
                        line: site.map(|k| k.line),
                    }
                }
                SliceKind::Paused => Edge {
                    name: "paused",
                    cat: PAUSED_CATEGORY,
                    ph: "B",
                    ts: micros(s.start_ns),
                    pid,
                    tid,
                    cname: Some("grey"),
                    file: None,
                    line: None,
                },
            };
            let end = Edge {
                ph: "E",
                ts: micros(s.end_ns.max(s.start_ns)),
                cname: None,
                file: None,
                line: None,
                ..begin
            };
            event(out, &begin)?;
            open.push(end);
        }
        while let Some(e) = open.pop() {
            event(out, &e)?;
        }
        progress(stack.events);
    }
    out.write_all(b"\n], \"displayTimeUnit\": \"ns\", \"otherData\": ")?;
    let other = OtherData {
        source: t.source(),
        clock: t.clock().to_string(),
        exporter: format!("mtanalyze {}", env!("CARGO_PKG_VERSION")),
    };
    json(out, &other)?;
    out.write_all(b"}\n")
}

/// Writes one value as compact JSON.
pub(crate) fn json<T: Serialize + ?Sized>(out: &mut dyn Write, value: &T) -> io::Result<()> {
    serde_json::to_writer(out, value).map_err(io::Error::from)
}

/// Any serializable value, behind one pointer type.
pub(crate) trait Erased {
    fn write_json(&self, out: &mut dyn Write) -> io::Result<()>;
}

impl<T: Serialize> Erased for T {
    fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        json(out, self)
    }
}

/// The items of a JSON array written one at a time: separators between them.
pub(crate) struct JsonList {
    first: bool,
    separator: &'static [u8],
}

impl JsonList {
    pub(crate) fn new(separator: &'static [u8]) -> JsonList {
        JsonList {
            first: true,
            separator,
        }
    }

    pub(crate) fn item(&mut self, out: &mut dyn Write, value: &dyn Erased) -> io::Result<()> {
        if !std::mem::take(&mut self.first) {
            out.write_all(self.separator)?;
        }
        value.write_json(out)
    }
}
