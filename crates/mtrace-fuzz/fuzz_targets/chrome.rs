//! The Chrome Trace Event JSON importer and the analyzer on arbitrary text.
//! Seeds: the samples' events exported as Chrome JSON by `mtanalyze`'s own
//! exporter, and VizTracer- and tracing-chrome-shaped files (`examples/make_seeds.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Only what input.rs reads as Chrome JSON: an array, or an object with traceEvents.
    let first = data.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[')
        || (first == Some(&b'{') && data.windows(11).any(|w| w == b"traceEvents"))
    {
        mtrace_fuzz::analyzer(data);
    }
});
