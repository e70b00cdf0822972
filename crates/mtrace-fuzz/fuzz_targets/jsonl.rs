//! The JSON-lines reader and the analyzer on arbitrary text.
//! Seeds: events of `sample-traces/` written as JSON lines (`examples/make_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mtrace_format::layout::MAGIC;

fuzz_target!(|data: &[u8]| {
    // Binary input is the `binary` target's work.
    if data.starts_with(&MAGIC) {
        return;
    }
    mtrace_fuzz::analyzer(data);
});
