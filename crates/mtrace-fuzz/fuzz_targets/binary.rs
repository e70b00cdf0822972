//! The binary trace reader and the analyzer on arbitrary bytes.
//! Seeds: small traces cut from `sample-traces/` (`examples/make_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mtrace_fuzz::format(data);
    mtrace_fuzz::analyzer(data);
});
