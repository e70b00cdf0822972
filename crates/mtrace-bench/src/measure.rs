//! Timing, medians, the hardware floor, and the process's peak memory.

use std::hint::black_box;
use std::time::Instant;

use mtrace_format::event::encode_enter;
use mtrace_format::FunctionId;

/// Bytes of the floor's buffer (the size of the recorder bench's ring).
const FLOOR_BUFFER: usize = 4 << 20;

/// The median of `values` (the upper one of an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Nanoseconds `f` took.
#[inline(never)]
pub fn time_ns(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64
}

/// The floor: what recording one event cannot go below, a TSC read and a
/// 16-byte store into a buffer that wraps (touched once before timing, so
/// page faults are not measured).
pub struct Floor {
    buffer: Vec<u8>,
    at: usize,
}

impl Floor {
    /// A floor with its buffer touched.
    pub fn new() -> Floor {
        Floor {
            buffer: vec![1u8; FLOOR_BUFFER],
            at: 0,
        }
    }

    /// Records `events` floor events; returns nanoseconds per event.
    pub fn run(&mut self, events: usize) -> f64 {
        let base = black_box(self.buffer.as_mut_ptr());
        let f = black_box(FunctionId(1));
        let mut at = self.at;
        let ns = time_ns(|| {
            for _ in 0..events {
                let bytes = encode_enter(mtrace::bench::read_tsc(), f);
                // SAFETY: `at + 16 <= FLOOR_BUFFER` (the buffer is a multiple of 16).
                unsafe { (base.add(at) as *mut [u8; 16]).write(bytes) };
                at += 16;
                if at == FLOOR_BUFFER {
                    at = 0;
                }
            }
        });
        self.at = at;
        black_box(&self.buffer);
        ns / events as f64
    }
}

impl Default for Floor {
    fn default() -> Floor {
        Floor::new()
    }
}

/// The process's peak resident set (`VmHWM`) in KiB, if `/proc` has it.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

/// `VmHWM:   1234 kB` -> 1234.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The CPU's model name, for the record.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn vm_hwm_is_read_from_status() {
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    5120 kB\nVmRSS:\t 100 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(5120));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
    }

    #[test]
    fn floor_measures_something() {
        let mut floor = Floor::new();
        assert!(floor.run(1000) > 0.0);
    }
}
