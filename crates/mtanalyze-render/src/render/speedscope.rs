//! `export --format speedscope`: speedscope's own file format, one
//! *evented* profile per logical stack.
//!
//! ```text
//! {"$schema": "https://www.speedscope.app/file-format-schema.json",
//!  "shared": {"frames": [{"name": "handler", "file": "src/h.rs", "line": 5}, ..., {"name": "[paused]"}]},
//!  "profiles": [{"type": "evented", "name": "task-1 (stack:1)", "unit": "nanoseconds",
//!                "startValue": 10, "endValue": 90,
//!                "events": [{"type": "O", "frame": 0, "at": 10}, ..., {"type": "C", "frame": 0, "at": 80}]}],
//!  "name": "...", "activeProfileIndex": 0, "exporter": "mtanalyze 0.1.0"}
//! ```
//!
//! A frame's name is its function's label ([`mtanalyze_model::labels::Labels`]: two
//! functions that share a name are two frames, each with its site).
//! Times are integer nanoseconds. A stack's paused stretches are a
//! `[paused]` frame opened on top of the innermost frame, so speedscope's
//! self time of every function is the report's.

use std::io::{self, Write};

use serde::Serialize;

use super::chrome::{json, track_name, JsonList};
use mtanalyze_model::labels::{LabelSite, Labels};
use mtanalyze_model::timeline::{SliceKind, TimelineSource};

/// The name of the frame that stands for a paused stretch.
pub(crate) const PAUSED_FRAME: &str = "[paused]";

#[derive(Serialize)]
struct Frame<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    file: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Serialize)]
struct Event {
    #[serde(rename = "type")]
    kind: &'static str,
    frame: u32,
    at: u64,
}

/// Writes the whole file. `progress` is called after each stack with the
/// number of events its replay read.
pub fn speedscope(
    out: &mut dyn Write,
    t: &dyn TimelineSource,
    progress: &mut dyn FnMut(u64),
) -> io::Result<()> {
    out.write_all(
        b"{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\",\n\"shared\": {\"frames\": [",
    )?;
    let functions = t.functions();
    let labels = Labels::new(functions.iter().map(LabelSite::from));
    let mut frames = JsonList::new(b",");
    for (i, f) in functions.iter().enumerate() {
        let frame = Frame {
            name: labels.get(i),
            file: &f.key.file,
            line: (f.key.line > 0).then_some(f.key.line),
        };
        frames.item(out, &frame)?;
    }
    let paused_frame = functions.len() as u32;
    let paused = Frame {
        name: PAUSED_FRAME,
        file: "",
        line: None,
    };
    frames.item(out, &paused)?;
    out.write_all(b"]},\n\"profiles\": [")?;
    for (i, stack) in t.stacks().iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let timeline = t.stack(i);
        let start = timeline
            .slices
            .iter()
            .map(|s| s.start_ns)
            .fold(timeline.start_ns, u64::min);
        let end = timeline
            .slices
            .iter()
            .map(|s| s.end_ns)
            .fold(timeline.end_ns.max(start), u64::max);
        write!(out, "\n{{\"type\": \"evented\", \"name\": ")?;
        json(out, &track_name(stack))?;
        write!(
            out,
            ", \"unit\": \"nanoseconds\", \"startValue\": {start}, \"endValue\": {end}, \"events\": ["
        )?;
        // Slices are in pre-order and nest: close what ended before each
        // opens, then the rest at the end.
        let mut open: Vec<(u32, u64)> = Vec::new();
        let mut events = JsonList::new(b",");
        let mut emit =
            |out: &mut dyn Write, kind, frame, at| events.item(out, &Event { kind, frame, at });
        for s in &timeline.slices {
            while open.len() > s.depth as usize {
                if let Some((frame, at)) = open.pop() {
                    emit(out, "C", frame, at)?;
                }
            }
            let frame = match s.kind {
                SliceKind::Frame(f) => f,
                SliceKind::Paused => paused_frame,
            };
            emit(out, "O", frame, s.start_ns)?;
            open.push((frame, s.end_ns));
        }
        while let Some((frame, at)) = open.pop() {
            emit(out, "C", frame, at)?;
        }
        out.write_all(b"]}")?;
        progress(stack.events);
    }
    out.write_all(b"],\n\"name\": ")?;
    json(out, &format!("{} (clock: {})", t.source(), t.clock()))?;
    writeln!(
        out,
        ", \"activeProfileIndex\": 0, \"exporter\": \"mtanalyze {}\"}}",
        env!("CARGO_PKG_VERSION")
    )
}
