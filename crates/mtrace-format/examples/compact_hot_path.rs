//! The recorder's hot path with 16-byte and with compact events, as
//! functions that do what `crates/mtrace/src/thread.rs` does per event
//! (room check, encode, store, commit the state word with release
//! ordering), to count their instructions:
//!
//! ```sh
//! cargo build --release -p mtrace-format --example compact_hot_path
//! valgrind --tool=callgrind --callgrind-out-file=hot.out \
//!     target/release/examples/compact_hot_path
//! callgrind_annotate --inclusive=yes hot.out | grep -E 'enter_v|exit_v'
//! ```
//!
//! Each function is called `CALLS` / 2 times per run, in two runs; Ir /
//! `CALLS` is its instructions per event. The shadow frame stack the
//! recorder also keeps, and the clock read, are left out of both (they
//! are the same for both). It also prints the time per event, with the
//! buffer's pages touched first by the run (as a recorder whose pages
//! were not provisioned ahead) and already mapped.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use mtrace_format::compact::EncoderState;
use mtrace_format::event::{encode_enter, encode_exit};
use mtrace_format::layout::{COMPACT_MAX_EVENT_SIZE, EVENT_SIZE, STATE_UNITS_SHIFT};
use mtrace_format::FunctionId;

const CALLS: usize = 1_000_000;

/// A thread's chunk and cursor, as the recorder's `Local` holds them.
struct Chunk {
    body: Vec<u8>,
    cursor: usize,
    /// Where events stop (room for the `lost` reserve left after it).
    end: usize,
    state: u64,
    state_word: AtomicU64,
    encoder: EncoderState,
}

#[inline(never)]
fn enter_v3(c: &mut Chunk, tick: u64, f: u32) -> bool {
    if c.cursor == c.end {
        return false;
    }
    let Some(slot) = c.body.get_mut(c.cursor..c.cursor + EVENT_SIZE) else {
        return false;
    };
    slot.copy_from_slice(&encode_enter(tick, FunctionId(f)));
    c.cursor += EVENT_SIZE;
    c.state += 1 << STATE_UNITS_SHIFT;
    c.state_word.store(c.state, Ordering::Release);
    true
}

#[inline(never)]
fn exit_v3(c: &mut Chunk, tick: u64, f: u32) -> bool {
    if c.cursor == c.end {
        return false;
    }
    let Some(slot) = c.body.get_mut(c.cursor..c.cursor + EVENT_SIZE) else {
        return false;
    };
    slot.copy_from_slice(&encode_exit(tick, FunctionId(f)));
    c.cursor += EVENT_SIZE;
    c.state += 1 << STATE_UNITS_SHIFT;
    c.state_word.store(c.state, Ordering::Release);
    true
}

#[inline(never)]
fn enter_v4(c: &mut Chunk, tick: u64, f: u32) -> bool {
    // Room for a worst case before `end`: the fast path, no exact fit.
    let Some(room) = c.body.get_mut(c.cursor..c.end) else {
        return false;
    };
    if room.len() < COMPACT_MAX_EVENT_SIZE {
        return false;
    }
    let Some(n) = c.encoder.enter(room, tick, FunctionId(f)) else {
        return false;
    };
    c.cursor += n;
    c.state += (n as u64) << STATE_UNITS_SHIFT;
    c.state_word.store(c.state, Ordering::Release);
    true
}

#[inline(never)]
fn exit_v4(c: &mut Chunk, tick: u64, f: u32, f_is_top: bool) -> bool {
    let Some(room) = c.body.get_mut(c.cursor..c.end) else {
        return false;
    };
    if room.len() < COMPACT_MAX_EVENT_SIZE {
        return false;
    }
    let Some(n) = c.encoder.exit(room, tick, FunctionId(f), f_is_top) else {
        return false;
    };
    c.cursor += n;
    c.state += (n as u64) << STATE_UNITS_SHIFT;
    c.state_word.store(c.state, Ordering::Release);
    true
}

fn chunk(events: usize) -> Chunk {
    Chunk {
        body: vec![0; events * EVENT_SIZE + 64],
        cursor: 0,
        end: events * EVENT_SIZE,
        state: 0,
        state_word: AtomicU64::new(0),
        encoder: EncoderState::new(0, 0),
    }
}

/// Stores `CALLS` events (enter/exit pairs of 200 functions, 250 to
/// 306 ticks apart) with both encodings; returns the ns per event of each.
fn run(v3: &mut Chunk, v4: &mut Chunk) -> (f64, f64) {
    for c in [&mut *v3, &mut *v4] {
        c.cursor = 0;
        c.encoder = EncoderState::new(0, 0);
    }
    let events = |mut store: Box<dyn FnMut(u64, u32, bool) -> bool + '_>| {
        let start = Instant::now();
        let mut tick = 1_000u64;
        for i in 0..CALLS / 2 {
            tick += 300 + (i as u64 % 7);
            let f = (i % 200) as u32 + 1;
            black_box(store(tick, f, true));
            tick += 250;
            black_box(store(tick, f, false));
        }
        start.elapsed().as_nanos() as f64 / CALLS as f64
    };
    let t3 = events(Box::new(|tick, f, enter| {
        if enter {
            enter_v3(black_box(&mut *v3), tick, f)
        } else {
            exit_v3(black_box(&mut *v3), tick, f)
        }
    }));
    let t4 = events(Box::new(|tick, f, enter| {
        if enter {
            enter_v4(black_box(&mut *v4), tick, f)
        } else {
            exit_v4(black_box(&mut *v4), tick, f, true)
        }
    }));
    (t3, t4)
}

fn main() {
    let mut v3 = chunk(CALLS);
    let mut v4 = chunk(CALLS);
    let (cold3, cold4) = run(&mut v3, &mut v4);
    let (warm3, warm4) = run(&mut v3, &mut v4);
    println!(
        "{CALLS} events: 16-byte {} bytes, compact {} bytes",
        v3.cursor, v4.cursor
    );
    println!("ns per event, pages first touched: 16-byte {cold3:.2}, compact {cold4:.2}");
    println!("ns per event, pages already mapped: 16-byte {warm3:.2}, compact {warm4:.2}");
}
