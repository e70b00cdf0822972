//! The guide's "Record your own program" example (`docs/GUIDE.md`; the
//! README shows it shortened), kept compiling by
//! `cargo test` (which builds examples). Run it with
//! `cargo run --release -p mtrace --example readme`, then
//! `cargo run --release -p mtanalyze-cli -- trace.bin`.

fn main() {
    // Records until `_rec` is dropped; an error leaves the program running unprofiled.
    let _rec = mtrace::start(mtrace::Config::new("trace.bin")).ok();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| work(20));
        }
    });
}

#[mtrace::profile]
fn work(n: u64) -> u64 {
    let _s = mtrace::scope!("inner loop");
    (0..n).map(|i| i * i).sum()
}
