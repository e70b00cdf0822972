//! What to record into: [`Config`], built in code or read from the environment.

use std::path::PathBuf;
use std::time::Duration;

use mtrace_format::layout::{
    COMPACT_FORMAT_VERSION, COMPACT_MAX_CHUNK_SIZE, DEFAULT_CHUNK_SIZE, FORMAT_VERSION,
    MAX_CHUNK_SIZE, MIN_CHUNK_SIZE,
};
use mtrace_format::{PreferredClock, Producer};

use crate::error::ConfigError;

/// What happens when the chunks run out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Flight recorder: the oldest chunks are overwritten, so the file always
    /// holds the most recent `capacity` bytes of events. Every chunk starts
    /// with a snapshot of the open frames, so what is left still decodes.
    ///
    /// A chunk a thread is still writing is never overwritten: the claim
    /// skips it. Give the ring comfortably more chunks than threads that
    /// record at once, or claims keep landing on busy chunks and events are
    /// dropped.
    Ring,
    /// Keep the beginning: the file grows as chunks are claimed, up to the
    /// maximum ([`Config::capacity`]) or until the disk is full; then each
    /// thread stops recording at its next chunk, and further events are
    /// dropped and counted exactly in the header's `dropped_events`.
    #[default]
    StopWhenFull,
}

/// How events are stored: which format version the recorder writes.
///
/// 16-byte events stay the default while the compact writer costs more
/// instructions an event than the 16-byte one (issue 49: it must not).
/// The Python binding asks for compact events in its trace files: there
/// the fresh pages a sixth as many events' bytes spare cost more than the
/// encoding's instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Version 4: compact events of 1 to 17 bytes (about 2.5 an event on
    /// typical programs), ticks as deltas within a chunk. Read by readers
    /// of this release on; chunks are at most 8 MiB.
    Compact,
    /// Version 3: 16 bytes an event, which every reader reads (the default).
    #[default]
    Fixed,
}

impl Format {
    /// The format `MTRACE_FORMAT`'s value names: `4` compact, `3` 16-byte
    /// events (surrounding spaces ignored); None for anything else.
    pub fn from_env_value(value: &str) -> Option<Format> {
        match value.trim() {
            "4" => Some(Format::Compact),
            "3" => Some(Format::Fixed),
            _ => None,
        }
    }

    /// The header's `version` for this format.
    pub fn version(self) -> u32 {
        match self {
            Format::Compact => COMPACT_FORMAT_VERSION,
            Format::Fixed => FORMAT_VERSION,
        }
    }

    /// The largest chunk the format's state word can count.
    pub fn max_chunk_size(self) -> usize {
        match self {
            Format::Compact => COMPACT_MAX_CHUNK_SIZE,
            Format::Fixed => MAX_CHUNK_SIZE,
        }
    }
}

/// Which clock stamps the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClockSource {
    /// The time-stamp counter when the CPU has an invariant one (x86-64),
    /// else the monotonic clock.
    #[default]
    Auto,
    /// Always the monotonic clock, in nanoseconds (slower to read than the TSC).
    Monotonic,
}

/// When a recording moves on to the next file of its series (see
/// [`Config::rotate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// When the file's chunks reach this many bytes (or the file is full).
    Size(u64),
    /// When the file has recorded this long.
    Every(Duration),
}

impl Rotation {
    /// Parses `MTRACE_ROTATE`'s syntax: a byte count (`256M`, `1G`,
    /// `65536`; `K`, `M`, `G` are powers of 1024, as for the capacity) or
    /// a duration (`60s`, `500ms`, `5min`, `2h`). A bare `m` means MiB,
    /// as it does for every size here: minutes are `min`.
    pub fn parse(text: &str) -> Option<Rotation> {
        let t = text.trim();
        let duration = |digits: &str, unit_ns: u64| -> Option<Rotation> {
            let n: u64 = digits.trim().parse().ok()?;
            let ns = n.checked_mul(unit_ns)?;
            (ns > 0).then(|| Rotation::Every(Duration::from_nanos(ns)))
        };
        if let Some(d) = t.strip_suffix("ms") {
            return duration(d, 1_000_000);
        }
        if let Some(d) = t.strip_suffix("min") {
            return duration(d, 60_000_000_000);
        }
        if let Some(d) = t
            .strip_suffix('s')
            .filter(|d| d.ends_with(|c: char| c.is_ascii_digit()))
        {
            return duration(d, 1_000_000_000);
        }
        if let Some(d) = t.strip_suffix('h') {
            return duration(d, 3_600_000_000_000);
        }
        parse_bytes(t).filter(|&n| n > 0).map(Rotation::Size)
    }
}

/// Ring mode's size of the chunk area when [`Config::capacity`] is unset: 256 MiB.
pub const DEFAULT_RING_CAPACITY: u64 = 256 << 20;
/// The most bytes of chunks a recording into memory ([`Config::in_memory()`])
/// takes when [`Config::capacity`] is unset: memory is scarcer than disk,
/// and a recording in memory is meant to be short (a profile per request).
pub const MEMORY_CAPACITY: u64 = 1 << 30;
/// Stop-when-full mode's maximum when [`Config::capacity`] is unset is half
/// the free space of the file system the trace is on, but at least this
/// (256 MiB; on a smaller disk the recording stops when the disk is full)...
pub const AUTO_CAPACITY_MIN: u64 = 256 << 20;
/// ... and at most this (1 TiB), so the address range reserved for the
/// file stays a small share of a 64-bit address space.
pub const AUTO_CAPACITY_MAX: u64 = 1 << 40;
/// Default size of the first metadata region: 32 KiB, the names of a few
/// hundred functions. Names past it go on in segments in chunk slots, as
/// many as the file's capacity holds, so this is not a limit: a larger
/// first region only spares a program with many names a few segments.
pub const DEFAULT_META_CAPACITY: usize = 32 << 10;

/// Where and how to record. Build with [`Config::new`] and the builder
/// methods, or read from the environment with [`Config::from_env`].
///
/// ```
/// let config = mtrace::Config::new("/tmp/app.mtrace")
///     .capacity(64 << 20)
///     .mode(mtrace::Mode::Ring);
/// assert_eq!(config.capacity, Some(64 << 20));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The trace file to create (an existing file is replaced).
    pub path: PathBuf,
    /// The most bytes of event chunks: the file holds at most
    /// `capacity / chunk_size` chunks. In [`Mode::StopWhenFull`] this is a
    /// cap: the file starts small and grows as the chunks are claimed; unset
    /// (`None`), the cap is half the free space of the file system the trace
    /// is on, but at least 256 MiB and at most 1 TiB. In
    /// [`Mode::Ring`] the file has this size from the start (unset:
    /// [`DEFAULT_RING_CAPACITY`]).
    pub capacity: Option<u64>,
    /// What to do when the chunks run out.
    pub mode: Mode,
    /// Bytes per chunk, header included: a multiple of 64 between
    /// `MIN_CHUNK_SIZE` and `MAX_CHUNK_SIZE` of [`mtrace_format::layout`]
    /// (`COMPACT_MAX_CHUNK_SIZE` with [`Format::Compact`]).
    pub chunk_size: usize,
    /// How events are stored (the file's format version).
    pub format: Format,
    /// Bytes of the first metadata region, for function, stack and thread
    /// names and marks (rounded up to 4 KiB), reserved on disk when the
    /// file is made. Not a limit: names that outgrow it go on in chunk
    /// slots (metadata segments) while the file can grow (a ring gives
    /// them at most a quarter of its slots). The same whether set here or
    /// by `MTRACE_META_CAPACITY` ([`Config::from_env`]).
    pub meta_capacity: usize,
    /// Which clock stamps the events.
    pub clock: ClockSource,
    /// The analysis clock the header recommends (`mtanalyze`'s default
    /// `--clock` for this trace): [`PreferredClock::Gil`] for an interpreter
    /// with a global lock, such as the Python binding's traces.
    pub preferred_clock: PreferredClock,
    /// Which recorder writes the trace, when that changes what its names
    /// mean to the analyzer ([`Producer::Python`] for the Python binding).
    pub producer: Producer,
    /// Start armed but idle (paused): the file is made, but nothing is
    /// recorded until [`Recording::resume`](crate::Recording::resume), or
    /// the [`Config::signal`].
    pub armed: bool,
    /// A signal (such as `libc::SIGUSR2`) that toggles the recording
    /// between paused and recording: `kill -USR2 PID` from outside. Its
    /// handler replaces any the program had.
    pub signal: Option<i32>,
    /// Rotate: record into a numbered series of files, `STEM.EXT` (the
    /// path), then `STEM.1.EXT`, `STEM.2.EXT`, ..., moving on when the
    /// file reaches a size or an age. Each file is a complete trace;
    /// `mtanalyze` reads the series as one. Stop-when-full mode only.
    pub rotate: Option<Rotation>,
    /// With [`Config::rotate`]: keep at most this many files of the
    /// series on disk, deleting the oldest (`None`: keep all).
    pub keep: Option<u32>,
    /// Start the page provisioner, a thread that maps the pages of the
    /// chunks ahead of the claims (see the crate's `provision` module):
    /// on by default. Off, each claim maps its own chunk's pages, and the
    /// recording adds no thread to the process, which a language runtime
    /// can see (CPython counts the process's threads at every `fork()` and
    /// warns when there is more than one).
    pub provisioner: bool,
    /// Record into memory rather than into a file at `path` (Linux): the
    /// trace is a file with no name (`memfd_create`), its pages taken as
    /// events reach them (none reserved ahead, as a disk's blocks are),
    /// read back through [`Recording::memory_trace`](crate::Recording::memory_trace)
    /// while it is open. `path` only names it (in messages and in
    /// `/proc/PID/fd`). Its default capacity is [`MEMORY_CAPACITY`]; it
    /// cannot rotate.
    pub in_memory: bool,
    /// Functions are named in the recording when the instrumentation first
    /// uses them ([`crate::name_function`], before their first event),
    /// not all at its start: a recording then holds the names of the
    /// functions it saw, not of every function the process ever
    /// registered (a profile per request in a large program would
    /// otherwise write, and its analysis read, thousands of names per
    /// request). Instrumentation that never calls `name_function` leaves
    /// its functions unnamed: only for instrumentation that does (the
    /// Python binding). A rotating recording names every function in each
    /// file and refuses it ([`ConfigError::NamesOnUseRotating`]).
    pub names_on_use: bool,
}

impl Config {
    /// A configuration writing to `path` with the defaults: a file that
    /// grows up to half the free disk space ([`Config::capacity`] unset),
    /// [`Mode::StopWhenFull`], `DEFAULT_CHUNK_SIZE` chunks, a first metadata
    /// region of [`DEFAULT_META_CAPACITY`], the fastest invariant clock.
    pub fn new(path: impl Into<PathBuf>) -> Config {
        Config {
            path: path.into(),
            capacity: None,
            mode: Mode::default(),
            chunk_size: DEFAULT_CHUNK_SIZE,
            format: Format::default(),
            meta_capacity: DEFAULT_META_CAPACITY,
            clock: ClockSource::default(),
            preferred_clock: PreferredClock::Unspecified,
            producer: Producer::Unspecified,
            armed: false,
            signal: None,
            rotate: None,
            keep: None,
            provisioner: true,
            in_memory: false,
            names_on_use: false,
        }
    }

    /// Names functions on first use (see the field of that name).
    pub fn names_on_use(mut self, on: bool) -> Config {
        self.names_on_use = on;
        self
    }

    /// Records into memory (see the field of that name).
    pub fn in_memory(mut self, on: bool) -> Config {
        self.in_memory = on;
        self
    }

    /// Sets the most bytes of chunks (see [`Config::capacity`]).
    pub fn capacity(mut self, bytes: u64) -> Config {
        self.capacity = Some(bytes);
        self
    }

    /// Sets the mode.
    pub fn mode(mut self, mode: Mode) -> Config {
        self.mode = mode;
        self
    }

    /// Sets the chunk size.
    pub fn chunk_size(mut self, bytes: usize) -> Config {
        self.chunk_size = bytes;
        self
    }

    /// Sets how events are stored ([`Config::format`]).
    pub fn format(mut self, format: Format) -> Config {
        self.format = format;
        self
    }

    /// Sets the first metadata region's size ([`Config::meta_capacity`]).
    pub fn meta_capacity(mut self, bytes: usize) -> Config {
        self.meta_capacity = bytes;
        self
    }

    /// Sets the clock.
    pub fn clock(mut self, clock: ClockSource) -> Config {
        self.clock = clock;
        self
    }

    /// Sets the analysis clock the trace's header recommends.
    pub fn preferred_clock(mut self, clock: PreferredClock) -> Config {
        self.preferred_clock = clock;
        self
    }

    /// Sets the producer the trace's header names.
    pub fn producer(mut self, producer: Producer) -> Config {
        self.producer = producer;
        self
    }

    /// Starts the recording armed but idle ([`Config::armed`]).
    pub fn armed(mut self, armed: bool) -> Config {
        self.armed = armed;
        self
    }

    /// Sets the signal that toggles recording ([`Config::signal`]).
    pub fn signal(mut self, signal: i32) -> Config {
        self.signal = Some(signal);
        self
    }

    /// Rotates the recording into a numbered series of files ([`Config::rotate`]).
    pub fn rotate(mut self, rotation: Rotation) -> Config {
        self.rotate = Some(rotation);
        self
    }

    /// Keeps at most `files` files of a rotating series ([`Config::keep`]).
    pub fn keep(mut self, files: u32) -> Config {
        self.keep = Some(files);
        self
    }

    /// Starts the page provisioner thread or not ([`Config::provisioner`]).
    pub fn provisioner(mut self, on: bool) -> Config {
        self.provisioner = on;
        self
    }

    /// Reads the configuration from the environment:
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `MTRACE_OUT` | trace file (required) |
    /// | `MTRACE_CAPACITY` | most bytes of chunks ([`Config::capacity`]), with an optional `K`, `M` or `G` suffix (powers of 1024) |
    /// | `MTRACE_MODE` | `ring` or `stop` |
    /// | `MTRACE_CHUNK_SIZE` | bytes per chunk, same syntax as the capacity |
    /// | `MTRACE_META_CAPACITY` | bytes of the first metadata region ([`Config::meta_capacity`]), same syntax |
    /// | `MTRACE_CLOCK` | `auto` or `monotonic` |
    /// | `MTRACE_FORMAT` | `3` (16-byte events, the default) or `4` (compact events) ([`Config::format`]) |
    /// | `MTRACE_ARMED` | `1` to start armed but idle ([`Config::armed`]) |
    /// | `MTRACE_SIGNAL` | the signal that toggles recording ([`Config::signal`]): `SIGUSR2`, `USR1`, ... or a number |
    /// | `MTRACE_ROTATE` | rotate the file ([`Config::rotate`]) at a size (`256M`, `1G`) or an age (`60s`, `5min`, `1h`) |
    /// | `MTRACE_KEEP` | keep at most this many files of the series ([`Config::keep`]) |
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_vars(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// [`Config::from_env`] with the variables looked up by `var`.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let path = var("MTRACE_OUT")
            .filter(|p| !p.is_empty())
            .ok_or(ConfigError::NoOutput)?;
        let mut config = Config::new(path);
        if let Some(n) = byte_var(
            &var,
            "MTRACE_CAPACITY",
            "a byte count such as 65536, 512K, 64M or 1G",
        )? {
            config.capacity = Some(n);
        }
        if let Some(n) = byte_var(
            &var,
            "MTRACE_CHUNK_SIZE",
            "a byte count such as 65536 or 64K",
        )? {
            config.chunk_size = n;
        }
        if let Some(n) = byte_var(
            &var,
            "MTRACE_META_CAPACITY",
            "a byte count such as 32K or 1M",
        )? {
            config.meta_capacity = n;
        }
        if let Some(v) = var("MTRACE_MODE") {
            config.mode = match v.trim().to_ascii_lowercase().as_str() {
                "ring" => Mode::Ring,
                "stop" | "stop-when-full" => Mode::StopWhenFull,
                _ => {
                    return Err(ConfigError::BadValue {
                        variable: "MTRACE_MODE",
                        value: v,
                        expected: "`ring` or `stop`",
                    })
                }
            };
        }
        if let Some(v) = var("MTRACE_ARMED") {
            config.armed = match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "" | "0" | "false" | "no" | "off" => false,
                _ => {
                    return Err(ConfigError::BadValue {
                        variable: "MTRACE_ARMED",
                        value: v,
                        expected: "`1` or `0`",
                    })
                }
            };
        }
        if let Some(v) = var("MTRACE_SIGNAL").filter(|v| !v.trim().is_empty()) {
            config.signal = Some(parse_signal(&v).ok_or(ConfigError::BadValue {
                variable: "MTRACE_SIGNAL",
                value: v,
                expected: "a signal such as `SIGUSR2`, `USR1` or `12`",
            })?);
        }
        if let Some(v) = var("MTRACE_ROTATE").filter(|v| !v.trim().is_empty()) {
            config.rotate = Some(Rotation::parse(&v).ok_or(ConfigError::BadValue {
                variable: "MTRACE_ROTATE",
                value: v,
                expected: "a size such as `256M` or `1G`, or an age such as `60s`, `5min` or `1h`",
            })?);
        }
        if let Some(v) = var("MTRACE_KEEP").filter(|v| !v.trim().is_empty()) {
            let files = v.trim().parse().ok().filter(|&n: &u32| n > 0);
            config.keep = Some(files.ok_or(ConfigError::BadValue {
                variable: "MTRACE_KEEP",
                value: v,
                expected: "a number of files, at least 1",
            })?);
        }
        if let Some(v) = var("MTRACE_FORMAT").filter(|v| !v.trim().is_empty()) {
            config.format = Format::from_env_value(&v).ok_or(ConfigError::BadValue {
                variable: "MTRACE_FORMAT",
                value: v,
                expected: "`4` (compact events) or `3` (16-byte events)",
            })?;
        }
        if let Some(v) = var("MTRACE_CLOCK") {
            config.clock = match v.trim().to_ascii_lowercase().as_str() {
                "auto" | "tsc" => ClockSource::Auto,
                "monotonic" => ClockSource::Monotonic,
                _ => {
                    return Err(ConfigError::BadValue {
                        variable: "MTRACE_CLOCK",
                        value: v,
                        expected: "`auto` or `monotonic`",
                    })
                }
            };
        }
        Ok(config)
    }

    /// Checks the sizes that do not depend on the file system: the chunk
    /// size, and a capacity set by the user (it must hold one chunk).
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let cs = self.chunk_size;
        if !(MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&cs) || !cs.is_multiple_of(64) {
            return Err(ConfigError::BadChunkSize(cs));
        }
        if cs > self.format.max_chunk_size() {
            return Err(ConfigError::ChunkTooLargeForFormat(cs));
        }
        if let Some(capacity) = self.capacity.filter(|&c| c < cs as u64) {
            return Err(ConfigError::CapacityTooSmall {
                capacity,
                chunk_size: cs,
            });
        }
        match self.rotate {
            Some(_) if self.mode == Mode::Ring => Err(ConfigError::RotatingRing),
            Some(_) if self.in_memory => Err(ConfigError::RotatingMemory),
            Some(_) if self.names_on_use => Err(ConfigError::NamesOnUseRotating),
            Some(Rotation::Size(bytes)) if bytes < cs as u64 => {
                Err(ConfigError::RotationTooSmall {
                    bytes,
                    chunk_size: cs,
                })
            }
            _ if self.keep == Some(0) => Err(ConfigError::KeepNothing),
            _ => Ok(()),
        }
    }

    /// The most chunk slots the file may hold, given the free bytes of its
    /// file system (`None` when they are unknown). [`Config::check`] first.
    pub(crate) fn max_chunks(&self, free_bytes: Option<u64>) -> u64 {
        let capacity = match (self.capacity, self.mode) {
            (Some(capacity), _) => capacity,
            (None, Mode::Ring) => DEFAULT_RING_CAPACITY,
            (None, Mode::StopWhenFull) if self.in_memory => MEMORY_CAPACITY,
            (None, Mode::StopWhenFull) => auto_capacity(free_bytes),
        };
        (capacity / self.chunk_size as u64).max(1)
    }
}

/// Stop-when-full's maximum when the user set none: half the free space,
/// within [`AUTO_CAPACITY_MIN`]..=[`AUTO_CAPACITY_MAX`] (the minimum when
/// the free space is unknown). Half, so a long run leaves room on the disk
/// for everything else the machine writes meanwhile.
fn auto_capacity(free_bytes: Option<u64>) -> u64 {
    free_bytes
        .map_or(AUTO_CAPACITY_MIN, |free| free / 2)
        .clamp(AUTO_CAPACITY_MIN, AUTO_CAPACITY_MAX)
}

/// Parses a signal: `SIGUSR2`, `usr2`, `SIGHUP`, ... or its number.
/// Signals the recorder cannot take over (`SIGKILL`, `SIGSTOP`, and those
/// a fault raises, such as `SIGSEGV`) are refused.
pub fn parse_signal(text: &str) -> Option<i32> {
    let t = text.trim().to_ascii_uppercase();
    let name = t.strip_prefix("SIG").unwrap_or(&t);
    let number = match name {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "HUP" => libc::SIGHUP,
        "WINCH" => libc::SIGWINCH,
        "URG" => libc::SIGURG,
        "PROF" => libc::SIGPROF,
        _ => name.parse().ok()?,
    };
    let refused = [
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
    ];
    (number > 0 && number < 65 && !refused.contains(&number)).then_some(number)
}

/// Parses `123`, `64K`, `64k`, `64M`, `1G`, `64KiB`, `64MB` (powers of 1024).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 10),
        (i, 'm' | 'M') => (&t[..i], 20),
        (i, 'g' | 'G') => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

/// The byte count in environment variable `variable` (looked up by `var`),
/// if it is set; an error if it is not a byte count that fits `T`.
fn byte_var<T: TryFrom<u64>>(
    var: &impl Fn(&str) -> Option<String>,
    variable: &'static str,
    expected: &'static str,
) -> Result<Option<T>, ConfigError> {
    var(variable)
        .map(|value| {
            parse_bytes(&value)
                .and_then(|n| T::try_from(n).ok())
                .ok_or(ConfigError::BadValue {
                    variable,
                    value,
                    expected,
                })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_accept_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("512K"), Some(512 << 10));
        assert_eq!(parse_bytes("64m"), Some(64 << 20));
        assert_eq!(parse_bytes("1G"), Some(1 << 30));
        assert_eq!(parse_bytes("2MiB"), Some(2 << 20));
        assert_eq!(parse_bytes(" 8 KB "), Some(8 << 10));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("M"), None);
        assert_eq!(parse_bytes("-1"), None);
        assert_eq!(parse_bytes("99999999999G"), None);
    }

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn signals_parse_by_name_or_number() {
        assert_eq!(parse_signal("SIGUSR2"), Some(libc::SIGUSR2));
        assert_eq!(parse_signal("usr1"), Some(libc::SIGUSR1));
        assert_eq!(parse_signal("12"), Some(12));
        assert_eq!(parse_signal("SIGKILL"), None);
        assert_eq!(parse_signal("often"), None);
        let c = Config::from_vars(vars(&[
            ("MTRACE_OUT", "x"),
            ("MTRACE_ARMED", "1"),
            ("MTRACE_SIGNAL", "SIGUSR2"),
        ]))
        .unwrap();
        assert!(c.armed);
        assert_eq!(c.signal, Some(libc::SIGUSR2));
    }

    #[test]
    fn rotation_is_a_size_or_an_age() {
        assert_eq!(Rotation::parse("256M"), Some(Rotation::Size(256 << 20)));
        assert_eq!(Rotation::parse("5m"), Some(Rotation::Size(5 << 20)));
        assert_eq!(Rotation::parse("4096"), Some(Rotation::Size(4096)));
        let every = |s| Some(Rotation::Every(Duration::from_secs(s)));
        assert_eq!(Rotation::parse("60s"), every(60));
        assert_eq!(Rotation::parse(" 5min "), every(300));
        assert_eq!(Rotation::parse("2h"), every(7200));
        assert_eq!(
            Rotation::parse("250ms"),
            Some(Rotation::Every(Duration::from_millis(250)))
        );
        for bad in ["", "0", "0s", "s", "fast", "-5s", "1.5s"] {
            assert_eq!(Rotation::parse(bad), None, "{bad:?}");
        }
        let c = Config::from_vars(vars(&[
            ("MTRACE_OUT", "/tmp/x.bin"),
            ("MTRACE_ROTATE", "60s"),
            ("MTRACE_KEEP", "3"),
        ]))
        .unwrap();
        assert_eq!(c.rotate, every(60));
        assert_eq!(c.keep, Some(3));
        assert!(c.check().is_ok());
    }

    #[test]
    fn rotation_is_refused_where_it_cannot_work() {
        let bad_var = |name, value| {
            Config::from_vars(vars(&[("MTRACE_OUT", "/tmp/x.bin"), (name, value)])).unwrap_err()
        };
        assert!(matches!(
            bad_var("MTRACE_ROTATE", "soon"),
            ConfigError::BadValue { .. }
        ));
        assert!(matches!(
            bad_var("MTRACE_KEEP", "0"),
            ConfigError::BadValue { .. }
        ));
        let ring = Config::new("x")
            .mode(Mode::Ring)
            .rotate(Rotation::Size(1 << 30));
        assert!(matches!(ring.check(), Err(ConfigError::RotatingRing)));
        let tiny = Config::new("x").rotate(Rotation::Size(100));
        assert!(matches!(
            tiny.check(),
            Err(ConfigError::RotationTooSmall { .. })
        ));
        let keep_none = Config::new("x").rotate(Rotation::Size(1 << 30)).keep(0);
        assert!(matches!(keep_none.check(), Err(ConfigError::KeepNothing)));
    }

    #[test]
    fn environment_fills_the_config() {
        let c = Config::from_vars(vars(&[
            ("MTRACE_OUT", "/tmp/x.mtrace"),
            ("MTRACE_CAPACITY", "8M"),
            ("MTRACE_MODE", "ring"),
            ("MTRACE_META_CAPACITY", "16M"),
        ]))
        .unwrap();
        assert_eq!(c.path, PathBuf::from("/tmp/x.mtrace"));
        assert_eq!(c.capacity, Some(8 << 20));
        assert_eq!(c.mode, Mode::Ring);
        assert_eq!(c.chunk_size, DEFAULT_CHUNK_SIZE);
        assert_eq!(c.meta_capacity, 16 << 20);
    }

    #[test]
    fn bad_environment_values_are_errors() {
        assert!(matches!(
            Config::from_vars(vars(&[])),
            Err(ConfigError::NoOutput)
        ));
        let err = Config::from_vars(vars(&[("MTRACE_OUT", "x"), ("MTRACE_MODE", "sometimes")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "MTRACE_MODE=`sometimes`: expected `ring` or `stop`"
        );
        let err = Config::from_vars(vars(&[("MTRACE_OUT", "x"), ("MTRACE_CAPACITY", "big")]))
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::BadValue {
                variable: "MTRACE_CAPACITY",
                ..
            }
        ));
        let err = Config::from_vars(vars(&[
            ("MTRACE_OUT", "x"),
            ("MTRACE_META_CAPACITY", "lots"),
        ]))
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::BadValue {
                variable: "MTRACE_META_CAPACITY",
                ..
            }
        ));
    }

    #[test]
    fn the_format_is_16_byte_events_unless_asked_for_compact_ones() {
        assert_eq!(Config::new("x").format, Format::Fixed);
        let format = |v| Config::from_vars(vars(&[("MTRACE_OUT", "x"), ("MTRACE_FORMAT", v)]));
        assert_eq!(format("3").unwrap().format, Format::Fixed);
        assert_eq!(format(" 4 ").unwrap().format, Format::Compact);
        assert!(matches!(
            format("16"),
            Err(ConfigError::BadValue {
                variable: "MTRACE_FORMAT",
                ..
            })
        ));
        // A compact chunk's state word counts at most 8 MiB.
        let big = Config::new("x").chunk_size(16 << 20).capacity(1 << 30);
        assert_eq!(big.clone().check(), Ok(()));
        assert_eq!(
            big.format(Format::Compact).check(),
            Err(ConfigError::ChunkTooLargeForFormat(16 << 20))
        );
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(Config::new("x").capacity(1 << 20).check(), Ok(()));
        assert_eq!(Config::new("x").capacity(1 << 20).max_chunks(None), 16);
        assert_eq!(
            Config::new("x").capacity(100).check(),
            Err(ConfigError::CapacityTooSmall {
                capacity: 100,
                chunk_size: DEFAULT_CHUNK_SIZE
            })
        );
        assert_eq!(
            Config::new("x").chunk_size(1000).check(),
            Err(ConfigError::BadChunkSize(1000))
        );
    }

    #[test]
    fn the_default_maximum_is_half_the_free_space_within_bounds() {
        let chunks = |free| Config::new("x").max_chunks(free) * DEFAULT_CHUNK_SIZE as u64;
        assert_eq!(chunks(Some(100 << 30)), 50 << 30);
        assert_eq!(chunks(Some(10 << 20)), AUTO_CAPACITY_MIN, "floor");
        assert_eq!(chunks(None), AUTO_CAPACITY_MIN, "free space unknown");
        assert_eq!(chunks(Some(u64::MAX)), AUTO_CAPACITY_MAX, "ceiling");
        // A ring without a capacity keeps the fixed default; a user's cap is kept.
        let ring = Config::new("x").mode(Mode::Ring);
        assert_eq!(
            ring.max_chunks(Some(100 << 30)) * DEFAULT_CHUNK_SIZE as u64,
            DEFAULT_RING_CAPACITY
        );
        let capped = Config::new("x").capacity(8 << 20);
        assert_eq!(capped.max_chunks(Some(100 << 30)), 128);
    }
}
