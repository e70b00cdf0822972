//! Marks: named instants in a recording (`mtrace::mark("warm-up done")`).
//!
//! A mark is a metadata record (`MetaRecord::Mark`), not an event: it goes
//! through the metadata region's lock like a function's or a stack's name,
//! and never touches a chunk, so the hot path neither knows nor pays for
//! it. Its tick is read from the recording's event clock before the lock
//! is taken, so it falls between the calling thread's events before and
//! after the call; marks of different threads may land in the log out of
//! tick order (readers sort them by tick).

use std::sync::atomic::Ordering;

use mtrace_format::meta::encode_mark;

use crate::clock;
use crate::recording;
use crate::shared::{current_with_gen, Reading, GEN, GEN_OFF, GEN_TSC, GEN_UNCHECKED};
use crate::thread;

/// Writes a mark named `name` into the running recording, if any.
pub(crate) fn mark(name: &str) {
    let mut g = GEN.load(Ordering::Relaxed);
    if g == GEN_UNCHECKED {
        // Like an event, the process's first mark starts the `MTRACE_OUT`
        // recording, so the mark is in it.
        recording::check_env();
        g = GEN.load(Ordering::Acquire);
    }
    if g <= GEN_OFF {
        return;
    }
    let reading = Reading::begin();
    let Some(shared) = current_with_gen(&reading, g) else {
        return;
    };
    let tick = clock::ticks(g & GEN_TSC != 0);
    let tid = thread::trace_tid(g);
    shared.write_meta_with(|out| encode_mark(out, tick, tid, name));
}
