//! Test helpers: temporary trace paths, a lock for the process-global
//! recorder, and a decoder that stitches each thread's chunks back together
//! with `mtrace_format` (the same reader the analyzer uses).
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use mtrace_format::{
    Event, EventKind, FunctionId, FunctionMeta, Header, MetaRecord, StackId, TraceFile,
};

/// The recorder is process-global: tests in one binary that record take this.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs test `child` of this test binary in a child process (it records
/// into `trace`, which it finds in the environment variable `env`, and
/// prints `PREFIX N` lines as its work commits), and kills it with SIGKILL
/// once a line says at least `at_least`. Returns the count of the last
/// line read: everything the child counted up to it is committed.
pub fn kill_child_at(child: &str, env: &str, trace: &Path, prefix: &str, at_least: u64) -> u64 {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut process = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child, "--nocapture", "--test-threads=1"])
        .env(env, trace)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
    let mut reached = 0u64;
    while reached < at_least {
        let line = lines
            .next()
            .expect("child ended before it was killed")
            .unwrap();
        if let Some(n) = line.strip_prefix(prefix) {
            reached = n.trim().parse().unwrap();
        }
    }
    // `Child::kill` is SIGKILL on Unix.
    process.kill().unwrap();
    assert!(!process.wait().unwrap().success());
    reached
}

/// A trace path in the temp dir, removed when dropped.
pub struct TempTrace(pub PathBuf);

impl TempTrace {
    pub fn new(name: &str) -> TempTrace {
        let path =
            std::env::temp_dir().join(format!("mtrace-test-{}-{name}.mtrace", std::process::id()));
        let _ = std::fs::remove_file(&path);
        TempTrace(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempTrace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The frames a chunk's snapshot says were open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub own: Vec<u32>,
    pub stack: StackId,
    pub stack_frames: Vec<u32>,
    pub flags: u32,
}

/// One decoded chunk.
#[derive(Clone, Debug)]
pub struct DecodedChunk {
    pub seq: u64,
    /// The chunk header's flags (`CHUNK_FLAG_RESTART`, `CHUNK_FLAG_CONTINUED`).
    pub restart: bool,
    pub continued: bool,
    pub chunk_no: u64,
    pub writing: bool,
    pub snapshot: Snapshot,
    /// The snapshot's tick (a `continued` chunk's is the file's start).
    pub snapshot_tick: u64,
    pub events: Vec<Event>,
    /// Committed bytes of the body, snapshot included.
    pub committed: usize,
}

/// A whole decoded trace.
#[derive(Debug)]
pub struct Decoded {
    pub header: Header,
    pub functions: HashMap<u32, FunctionMeta>,
    pub stacks: HashMap<u64, String>,
    /// tid -> (os tid, name)
    pub threads: BTreeMap<u64, (u64, String)>,
    /// The host records (one a recording).
    pub hosts: Vec<String>,
    /// The marks, in the order they were written: (tick, tid, name).
    pub marks: Vec<(u64, u32, String)>,
    /// Continued-stack records (rotating series): (stack, tick, frames).
    pub continued_stacks: Vec<(u64, u64, Vec<u32>)>,
    /// tid -> chunks sorted by thread_chunk_no
    pub chunks: BTreeMap<u64, Vec<DecodedChunk>>,
}

/// Decodes a trace file; panics on any chunk or metadata problem.
pub fn decode(path: &Path) -> Decoded {
    decode_bytes(&std::fs::read(path).expect("read trace"))
}

/// Decodes a trace file's bytes; panics on any chunk or metadata problem.
pub fn decode_bytes(bytes: &[u8]) -> Decoded {
    let trace = TraceFile::parse(bytes).expect("parse header");
    let (records, problem) = trace.metadata();
    assert!(problem.is_none(), "metadata problem: {problem:?}");
    let mut functions = HashMap::new();
    let mut stacks = HashMap::new();
    let mut threads = BTreeMap::new();
    let mut hosts = Vec::new();
    let mut marks = Vec::new();
    let mut continued_stacks = Vec::new();
    for r in records {
        match r {
            MetaRecord::Function(f) => {
                assert!(
                    functions.insert(f.id.0, f.clone()).is_none(),
                    "function {} named twice",
                    f.id.0
                );
            }
            MetaRecord::Stack { id, name, .. } => {
                stacks.insert(id.0, name);
            }
            MetaRecord::Thread { tid, os_tid, name } => {
                threads.insert(tid.0, (os_tid, name));
            }
            MetaRecord::Host { name } => hosts.push(name),
            MetaRecord::Mark { tick, tid, name } => marks.push((tick, tid, name)),
            MetaRecord::ContinuedStack { id, tick, frames } => {
                continued_stacks.push((id.0, tick, frames.iter().map(|f| f.0).collect()))
            }
        }
    }
    let mut chunks: BTreeMap<u64, Vec<DecodedChunk>> = BTreeMap::new();
    for i in 0..trace.chunk_slots() {
        let Some(c) = trace.chunk(i).unwrap_or_else(|e| panic!("chunk {i}: {e}")) else {
            continue;
        };
        assert!(c.cut.is_none(), "chunk {i} cut: {:?}", c.cut);
        let events: Vec<Event> = c
            .events()
            .map(|e| e.unwrap_or_else(|e| panic!("chunk {i}: {e}")))
            .collect();
        chunks.entry(c.thread.0).or_default().push(DecodedChunk {
            seq: c.seq,
            restart: c.restart,
            continued: c.continued,
            chunk_no: c.thread_chunk_no,
            writing: c.writing,
            snapshot: Snapshot {
                own: c.snapshot.own_frames().map(|f| f.0).collect(),
                stack: c.snapshot.current_stack,
                stack_frames: c.snapshot.stack_frames().map(|f| f.0).collect(),
                flags: c.snapshot.flags,
            },
            snapshot_tick: c.snapshot.tick,
            events,
            committed: c.snapshot.encoded_len() + c.event_bytes().len(),
        });
    }
    for list in chunks.values_mut() {
        list.sort_by_key(|c| c.chunk_no);
    }
    Decoded {
        header: trace.header().clone(),
        functions,
        stacks,
        threads,
        hosts,
        marks,
        continued_stacks,
        chunks,
    }
}

impl Decoded {
    /// The trace thread id of the thread named `name`.
    pub fn tid(&self, name: &str) -> u64 {
        let found: Vec<u64> = self
            .threads
            .iter()
            .filter(|(_, (_, n))| n == name)
            .map(|(&t, _)| t)
            .collect();
        assert_eq!(found.len(), 1, "threads named {name}: {:?}", self.threads);
        found[0]
    }

    /// All events of thread `tid`, its chunks in order. Panics if a chunk is missing.
    pub fn events(&self, tid: u64) -> Vec<Event> {
        let chunks = self.chunks.get(&tid).map(Vec::as_slice).unwrap_or(&[]);
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.chunk_no, i as u64, "thread {tid} misses chunk {i}");
        }
        chunks
            .iter()
            .flat_map(|c| c.events.iter().copied())
            .collect()
    }

    /// The `lost` marks of every thread (at most one a thread in
    /// stop-when-full mode: the thread records nothing after it).
    pub fn lost_marks(&self) -> u64 {
        self.events_of_kind(EventKind::Lost)
    }

    /// The enters of `f` on every thread.
    pub fn enters(&self, f: FunctionId) -> u64 {
        self.events_of_kind(EventKind::Enter(f))
    }

    /// The events of every thread that are `kind`.
    pub fn events_of_kind(&self, kind: EventKind) -> u64 {
        self.chunks
            .values()
            .flatten()
            .flat_map(|c| &c.events)
            .filter(|e| e.kind == kind)
            .count() as u64
    }

    /// Every event of every thread.
    pub fn event_count(&self) -> u64 {
        self.chunks
            .values()
            .flatten()
            .map(|c| c.events.len() as u64)
            .sum()
    }

    /// The function named `name` (exactly one).
    pub fn function(&self, name: &str) -> &FunctionMeta {
        let found: Vec<&FunctionMeta> =
            self.functions.values().filter(|m| m.name == name).collect();
        assert_eq!(found.len(), 1, "functions named {name}");
        found[0]
    }

    pub fn name(&self, f: FunctionId) -> &str {
        self.functions
            .get(&f.0)
            .map(|m| m.name.as_str())
            .unwrap_or("?")
    }
}

/// An event without its tick, with names, for comparing with an expected script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Start,
    Enter(String),
    Exit(String),
    Switch(u64),
    End,
    /// The recorder's `lost` mark: the thread's events stop being complete here.
    Lost,
    /// A task's stack was woken.
    Wake(u64),
    /// A logical stack ended (was dropped).
    StackEnd(u64),
}

pub fn steps(d: &Decoded, events: &[Event]) -> Vec<Step> {
    let mut last = 0;
    events
        .iter()
        .map(|e| {
            assert!(e.tick >= last, "ticks go back: {} after {last}", e.tick);
            last = e.tick;
            match e.kind {
                EventKind::ThreadStart => Step::Start,
                EventKind::ThreadExit => Step::End,
                EventKind::Enter(f) => Step::Enter(d.name(f).to_owned()),
                EventKind::Exit(f) => Step::Exit(d.name(f).to_owned()),
                EventKind::Switch(s) => Step::Switch(s.0),
                EventKind::Lost => Step::Lost,
                EventKind::Wake(s) => Step::Wake(s.0),
                EventKind::End(s) => Step::StackEnd(s.0),
            }
        })
        .collect()
}

/// Where a chunk leaves its thread, by [`replay`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replayed {
    pub own: Vec<u32>,
    pub stack: StackId,
    /// The current logical stack's frames, if the chunk knows them all (it
    /// started on that stack); `None` for a stack switched to mid-chunk,
    /// whose older frames only another chunk's snapshot names.
    pub stack_frames: Option<Vec<u32>>,
}

impl Replayed {
    /// Whether `next` (the next chunk's snapshot) agrees with this end state.
    pub fn agrees_with(&self, next: &Snapshot) -> bool {
        self.own == next.own
            && self.stack == next.stack
            && self
                .stack_frames
                .as_ref()
                .is_none_or(|f| *f == next.stack_frames)
    }
}

/// Replays a chunk's events from its snapshot, per stack. Panics on an exit
/// that does not match the innermost open frame of a stack whose frames are
/// known (the thread's own stack, and the stack the chunk started on).
pub fn replay(start: &Snapshot, events: &[Event]) -> Replayed {
    // stack id -> (frames, all frames known)
    let mut stacks: HashMap<u64, (Vec<u32>, bool)> = HashMap::new();
    stacks.insert(StackId::OWN.0, (start.own.clone(), true));
    if start.stack != StackId::OWN {
        stacks.insert(start.stack.0, (start.stack_frames.clone(), true));
    }
    let mut current = start.stack;
    for e in events {
        let (frames, known) = stacks.entry(current.0).or_insert((Vec::new(), false));
        match e.kind {
            EventKind::Enter(f) => frames.push(f.0),
            EventKind::Exit(f) => match frames.pop() {
                Some(top) => assert_eq!(top, f.0, "exit of {f:?} is not the innermost frame"),
                None => assert!(!*known, "exit of {f:?} on an empty stack"),
            },
            EventKind::Switch(s) => current = s,
            EventKind::ThreadStart
            | EventKind::ThreadExit
            | EventKind::Lost
            | EventKind::Wake(_) => {}
            EventKind::End(s) => {
                stacks.remove(&s.0);
            }
        }
    }
    let own = stacks[&StackId::OWN.0].0.clone();
    let stack_frames = if current == StackId::OWN {
        Some(Vec::new())
    } else {
        stacks
            .get(&current.0)
            .and_then(|(f, known)| known.then(|| f.clone()))
    };
    Replayed {
        own,
        stack: current,
        stack_frames,
    }
}

/// Each logical stack's events, gathered from every thread that ran it:
/// stack id -> segments (tick of the switch onto it, events until the
/// thread switched away), in time order.
pub fn stack_segments(d: &Decoded) -> HashMap<u64, Vec<(u64, u64, Vec<Event>)>> {
    let mut out: HashMap<u64, Vec<(u64, u64, Vec<Event>)>> = HashMap::new();
    for &tid in d.threads.keys() {
        let mut open: Option<(u64, u64, Vec<Event>)> = None;
        for e in d.events(tid) {
            match e.kind {
                EventKind::Switch(s) => {
                    if let Some((stack, tick, events)) = open.take() {
                        out.entry(stack).or_default().push((tick, tid, events));
                    }
                    if s != StackId::OWN {
                        open = Some((s.0, e.tick, Vec::new()));
                    }
                }
                _ => {
                    if let Some((_, _, events)) = &mut open {
                        events.push(e);
                    }
                }
            }
        }
        if let Some((stack, tick, events)) = open {
            out.entry(stack).or_default().push((tick, tid, events));
        }
    }
    for segments in out.values_mut() {
        segments.sort_by_key(|s| s.0);
    }
    out
}
