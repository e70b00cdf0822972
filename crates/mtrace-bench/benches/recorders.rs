//! `cargo bench -p mtrace-bench`: mtrace against tracy-client, fastrace,
//! puffin and tracing on the same workloads; see the crate docs
//! (`src/lib.rs`) for what is measured and how.

fn main() {
    // Tracy's rows run in the package's `tracy_peer` binary (see it for why).
    mtrace_bench::main(std::path::Path::new(env!("CARGO_BIN_EXE_tracy_peer")));
}
