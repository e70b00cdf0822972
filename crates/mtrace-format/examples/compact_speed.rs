//! Encode and decode speed of compact (version 4) events against 16-byte
//! ones, on the events of a real trace.
//!
//! Encoding is timed as the recorder's hot path would run it: per event,
//! one call that stores it at a cursor in a chunk-sized buffer (16 bytes
//! for version 3; [`EncoderState`] with the writer's own frame stack for
//! version 4), the cursor moved on, no commit store (the same for both).
//! Decoding is timed as a reader runs it: every chunk's events iterated
//! as [`Event`]s (`Event::decode` against [`CompactEvents`]) and as the
//! analyzer's hot loops take them, raw parts (`event::raw_parts` against
//! [`CompactEvents::for_each_raw`]), summed so nothing is optimised away;
//! and compact events expanded to 16-byte ones, which is how the analyzer
//! reads a version-4 file (`mtrace_format::convert`).
//! Each is run `ROUNDS` times (15; the environment variable `ROUNDS`
//! overrides it), interleaved; the figures are mean ± standard deviation.
//!
//! ```sh
//! cargo run --release -p mtrace-format --example compact_speed -- TRACE
//! ```

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use mtrace_format::compact::{
    count_events, named_frames, ChunkEncoder, CompactEvents, EncoderState,
};
use mtrace_format::event::{encode_enter, encode_exit, raw_is_valid, raw_parts};
use mtrace_format::layout::COMPACT_MAX_EVENT_SIZE;
use mtrace_format::{Event, EventKind, TraceFile};

const ROUNDS: usize = 15;

/// One chunk's events, both ways.
struct Chunk {
    snapshot_tick: u64,
    named: Vec<u32>,
    v3: Vec<u8>,
    v4: Vec<u8>,
    events: Vec<Event>,
}

fn load(path: &str) -> Result<Vec<Chunk>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let trace = TraceFile::parse(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let mut chunks = Vec::new();
    for index in 0..trace.chunk_slots() {
        let Ok(Some(chunk)) = trace.chunk(index) else {
            continue;
        };
        let events: Vec<Event> = chunk.events().map_while(Result::ok).collect();
        let mut v4 = vec![0u8; events.len() * COMPACT_MAX_EVENT_SIZE];
        let mut enc = ChunkEncoder::from_snapshot(&chunk.snapshot);
        let mut len = 0;
        for e in &events {
            len += enc.push(&mut v4[len..], e).ok_or("no room")?;
        }
        v4.truncate(len);
        chunks.push(Chunk {
            snapshot_tick: chunk.snapshot.tick,
            named: named_frames(&chunk.snapshot).map(|f| f.0).collect(),
            v3: chunk.event_bytes()[..events.len() * 16].to_vec(),
            v4,
            events,
        });
    }
    Ok(chunks)
}

#[inline(never)]
fn decode_v3(chunks: &[Chunk]) -> u64 {
    let mut sum = 0u64;
    for c in chunks {
        for e in c.v3.chunks_exact(16) {
            let e = Event::decode(e.try_into().unwrap_or(&[0; 16])).unwrap_or(Event {
                tick: 0,
                kind: EventKind::Lost,
            });
            sum = sum.wrapping_add(e.tick ^ payload(&e));
        }
    }
    sum
}

#[inline(never)]
fn decode_v4(chunks: &[Chunk], named: &mut Vec<u32>) -> u64 {
    let mut sum = 0u64;
    for c in chunks {
        named.clear();
        named.extend_from_slice(&c.named);
        let events = CompactEvents::from_parts(&c.v4, 0, 0, c.snapshot_tick, std::mem::take(named));
        for e in events.map_while(Result::ok) {
            sum = sum.wrapping_add(e.tick ^ payload(&e));
        }
    }
    sum
}

/// As the analyzer's hot loops decode: (kind, tick, payload) parts.
#[inline(never)]
fn decode_v3_raw(chunks: &[Chunk]) -> u64 {
    let mut sum = 0u64;
    for c in chunks {
        for e in c.v3.chunks_exact(16) {
            let (kind, tick, payload) = raw_parts(e.try_into().unwrap_or(&[0; 16]));
            if !raw_is_valid(kind, payload) {
                break;
            }
            sum = sum.wrapping_add(tick ^ payload ^ kind);
        }
    }
    sum
}

#[inline(never)]
fn decode_v4_raw(chunks: &[Chunk], named: &mut Vec<u32>) -> u64 {
    let mut sum = 0u64;
    for c in chunks {
        named.clear();
        named.extend_from_slice(&c.named);
        let mut events =
            CompactEvents::from_parts(&c.v4, 0, 0, c.snapshot_tick, std::mem::take(named));
        events.for_each_raw(|(kind, tick, payload)| {
            sum = sum.wrapping_add(tick ^ payload ^ kind);
        });
        *named = events.into_named();
    }
    sum
}

/// As the analyzer reads a compact file: each chunk sized by its events'
/// lengths, then every event expanded to 16 bytes
/// (`convert::slot_bound` and `convert::expand_into`'s work), into a
/// buffer reused from chunk to chunk.
#[inline(never)]
fn decode_v4_expand(chunks: &[Chunk], named: &mut Vec<u32>, out: &mut Vec<[u8; 16]>) -> u64 {
    let mut sum = 0u64;
    for c in chunks {
        named.clear();
        named.extend_from_slice(&c.named);
        out.clear();
        out.resize(count_events(&c.v4), [0; 16]);
        let mut events =
            CompactEvents::from_parts(&c.v4, 0, 0, c.snapshot_tick, std::mem::take(named));
        let written = events.write_events(out);
        *named = events.into_named();
        sum = sum.wrapping_add(written as u64);
    }
    sum
}

fn payload(e: &Event) -> u64 {
    match e.kind {
        EventKind::Enter(f) | EventKind::Exit(f) => f.0 as u64,
        EventKind::Switch(s) | EventKind::Wake(s) | EventKind::End(s) => s.0,
        _ => 0,
    }
}

/// The recorder's hot path, version 3: store 16 bytes at the cursor, and
/// keep the shadow frame stack, as the recorder does.
#[inline(never)]
fn encode_v3(out: &mut [u8], c: &Chunk, frames: &mut Vec<u32>) -> usize {
    frames.clear();
    frames.extend_from_slice(&c.named);
    let mut at = 0;
    for e in &c.events {
        let bytes = match e.kind {
            EventKind::Enter(f) => {
                frames.push(f.0);
                encode_enter(e.tick, f)
            }
            EventKind::Exit(f) => {
                if frames.last() == Some(&f.0) {
                    frames.pop();
                }
                encode_exit(e.tick, f)
            }
            _ => e.encode(),
        };
        out[at..at + 16].copy_from_slice(&bytes);
        at += 16;
    }
    at
}

/// The recorder's hot path, version 4: the writer knows its innermost
/// frame (the recorder's shadow stack) and keeps an [`EncoderState`].
#[inline(never)]
fn encode_v4(out: &mut [u8], c: &Chunk, frames: &mut Vec<u32>) -> usize {
    let mut state = EncoderState::new(c.snapshot_tick, c.named.len() as u32);
    frames.clear();
    frames.extend_from_slice(&c.named);
    let mut at = 0;
    for e in &c.events {
        let n = match e.kind {
            EventKind::Enter(f) => {
                frames.push(f.0);
                state.enter(&mut out[at..], e.tick, f)
            }
            EventKind::Exit(f) => {
                let top = frames.last() == Some(&f.0);
                if top {
                    frames.pop();
                }
                state.exit(&mut out[at..], e.tick, f, top)
            }
            _ => state.event(&mut out[at..], e, false),
        };
        at += n.unwrap_or(0);
    }
    at
}

/// Mean and standard deviation, in ns per event, of each of `runs`,
/// the runs interleaved round by round so that a drift of the machine's
/// speed hits them alike.
fn time<const N: usize>(events: usize, runs: &mut [&mut dyn FnMut(); N]) -> [(f64, f64); N] {
    let rounds = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    let mut ns = [(); N].map(|_| Vec::new());
    for round in 0..=rounds {
        for (run, ns) in runs.iter_mut().zip(&mut ns) {
            let t = Instant::now();
            run();
            // Round 0 warms up.
            if round > 0 {
                ns.push(t.elapsed().as_nanos() as f64 / events as f64);
            }
        }
    }
    ns.map(|ns| {
        let n = ns.len().max(1) as f64;
        let mean = ns.iter().sum::<f64>() / n;
        let var = ns.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        (mean, var.sqrt())
    })
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: compact_speed TRACE");
        return ExitCode::FAILURE;
    };
    let chunks = match load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let events: usize = chunks.iter().map(|c| c.events.len()).sum();
    let mut named = Vec::new();
    assert_eq!(decode_v3(&chunks), decode_v4(&chunks, &mut named));
    let room = 16 * chunks.iter().map(|c| c.events.len()).max().unwrap_or(0) + 64;
    let (mut out, mut out4) = (vec![0u8; room], vec![0u8; room]);
    let mut frames = Vec::new();
    let mut frames4 = Vec::new();
    let mut named_raw = Vec::new();
    assert_eq!(
        decode_v3_raw(&chunks),
        decode_v4_raw(&chunks, &mut named_raw)
    );
    let mut expanded = Vec::with_capacity(room / 16);
    let mut named_expand = Vec::new();
    let [(d3, d3s), (d4, d4s), (r3, r3s), (r4, r4s), (x4, x4s), (e3, e3s), (e4, e4s)] = time(
        events,
        &mut [
            &mut || {
                black_box(decode_v3(black_box(&chunks)));
            },
            &mut || {
                black_box(decode_v4(black_box(&chunks), &mut named));
            },
            &mut || {
                black_box(decode_v3_raw(black_box(&chunks)));
            },
            &mut || {
                black_box(decode_v4_raw(black_box(&chunks), &mut named_raw));
            },
            &mut || {
                black_box(decode_v4_expand(
                    black_box(&chunks),
                    &mut named_expand,
                    &mut expanded,
                ));
            },
            &mut || {
                for c in &chunks {
                    black_box(encode_v3(black_box(&mut out), c, &mut frames));
                }
            },
            &mut || {
                for c in &chunks {
                    black_box(encode_v4(black_box(&mut out4), c, &mut frames4));
                }
            },
        ],
    );
    println!("{path}: {events} events, ns per event (mean ± sd over the rounds)");
    println!(
        "  decode Events  16-byte {d3:.2} ± {d3s:.2}   compact {d4:.2} ± {d4s:.2}   compact/16-byte events/s {:.2}x",
        d3 / d4
    );
    println!(
        "  decode raw     16-byte {r3:.2} ± {r3s:.2}   compact {r4:.2} ± {r4s:.2}   compact/16-byte events/s {:.2}x",
        r3 / r4
    );
    println!(
        "  decode raw     16-byte {r3:.2} ± {r3s:.2}   compact expanded to 16-byte {x4:.2} ± {x4s:.2}   compact/16-byte events/s {:.2}x",
        r3 / x4
    );
    println!("  encode         16-byte {e3:.2} ± {e3s:.2}   compact {e4:.2} ± {e4s:.2}");
    ExitCode::SUCCESS
}
