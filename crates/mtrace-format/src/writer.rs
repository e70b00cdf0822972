//! `TraceWriter`: a valid trace from explicit (thread, tick, event) values.
//!
//! Used by tests, importers, the JSONL converter and the synthetic trace
//! generator. It lays the file out as `header | chunks | metadata` and streams
//! chunks to the output as they fill, so memory stays at one chunk per thread
//! plus the open frames. Like the recorder, it keeps a shadow of each thread's
//! open frames so every chunk starts with a correct snapshot.
//!
//! It also writes a later file of a rotating series, whose threads and
//! logical stacks carry on with frames opened in an earlier file:
//! [`TraceWriter::continue_thread`] and [`TraceWriter::continued_stack`].

use std::collections::HashMap;
use std::io::{self, Seek, SeekFrom, Write};

use crate::chunk::{encode_chunk_header, encode_snapshot};
use crate::clock::{ClockInfo, PreferredClock};
use crate::event::{Event, EventKind, FunctionId, StackId, ThreadId, MAX_TICK};
use crate::header::Header;
use crate::layout::*;
use crate::meta::{FunctionMeta, MetaRecord, StackKind};

/// Settings for a [`TraceWriter`].
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Bytes per chunk (a multiple of 64 in `MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE`).
    pub chunk_size: usize,
    /// The clock the ticks are in.
    pub clock: ClockInfo,
    /// The analysis clock that suits the trace.
    pub preferred_clock: PreferredClock,
    /// Process id to record.
    pub pid: u32,
    /// Command line to record.
    pub cmdline: String,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            clock: ClockInfo::nanoseconds(),
            preferred_clock: PreferredClock::Unspecified,
            pid: 0,
            cmdline: String::new(),
        }
    }
}

/// Why the writer refused an event.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The output failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A tick does not fit in 60 bits.
    #[error("tick {0} does not fit the format's 60 bits")]
    TickTooLarge(u64),
    /// Thread id 0 is reserved.
    #[error("thread id 0 is reserved")]
    ThreadZero,
    /// Bad options.
    #[error(
        "chunk size {0} is not a multiple of 64 between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE}"
    )]
    BadChunkSize(usize),
}

#[derive(Default)]
struct ThreadBuf {
    chunk: Vec<u8>,
    used: usize,
    chunks_written: u64,
    own_frames: Vec<u32>,
    current: StackId,
    /// Chunk flags of the chunk being filled (the `continued` first chunk).
    flags: u64,
}

/// Writes a trace to any seekable output.
pub struct TraceWriter<W: Write + Seek> {
    out: W,
    header: Header,
    threads: HashMap<ThreadId, ThreadBuf>,
    stack_frames: HashMap<StackId, Vec<u32>>,
    functions: HashMap<(String, String, u32), FunctionId>,
    stacks: HashMap<String, StackId>,
    meta: Vec<u8>,
    next_seq: u64,
    last_tick: u64,
}

impl<W: Write + Seek> TraceWriter<W> {
    /// Starts a trace; `out` should be empty and positioned at 0.
    pub fn new(mut out: W, options: WriterOptions) -> Result<Self, WriteError> {
        let cs = options.chunk_size;
        if !(MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&cs) || !cs.is_multiple_of(64) {
            return Err(WriteError::BadChunkSize(cs));
        }
        let mut header = Header::new(options.clock, cs as u32);
        header.preferred_clock = options.preferred_clock;
        header.pid = options.pid;
        header.cmdline = options.cmdline;
        out.write_all(&header.encode())?;
        Ok(TraceWriter {
            out,
            header,
            threads: HashMap::new(),
            stack_frames: HashMap::new(),
            functions: HashMap::new(),
            stacks: HashMap::new(),
            meta: Vec::new(),
            next_seq: 0,
            last_tick: 0,
        })
    }

    /// Registers a function (interned by name, file and line) and returns its id.
    pub fn function(&mut self, name: &str, file: &str, line: u32, module: &str) -> FunctionId {
        let key = (name.to_owned(), file.to_owned(), line);
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = FunctionId(self.functions.len() as u32 + 1);
        self.functions.insert(key, id);
        MetaRecord::Function(FunctionMeta {
            id,
            name: name.to_owned(),
            file: file.to_owned(),
            line,
            module: module.to_owned(),
        })
        .encode(&mut self.meta);
        id
    }

    /// Registers a logical stack by name (interned) and returns its id.
    pub fn stack(&mut self, name: &str) -> StackId {
        if let Some(&id) = self.stacks.get(name) {
            return id;
        }
        let id = StackId(self.stacks.len() as u64 + 1);
        self.stacks.insert(name.to_owned(), id);
        MetaRecord::Stack {
            id,
            name: name.to_owned(),
            kind: StackKind::Unspecified,
        }
        .encode(&mut self.meta);
        id
    }

    /// Names a thread.
    pub fn thread_name(&mut self, tid: ThreadId, os_tid: u64, name: &str) {
        MetaRecord::Thread {
            tid,
            os_tid,
            name: name.to_owned(),
        }
        .encode(&mut self.meta);
    }

    /// Records a mark: the instant `tick` (a tick of the trace's clock, like
    /// an event's) named `name`, written by trace thread `tid` (0: none).
    /// A mark is metadata, not an event: it takes no room in a chunk, but
    /// like an event it moves the end of the trace (`finish(None)`) to its
    /// tick if that is later.
    pub fn mark(&mut self, tick: u64, tid: u32, name: &str) {
        self.last_tick = self.last_tick.max(tick);
        crate::meta::encode_mark(&mut self.meta, tick, tid, name);
    }

    /// Appends one event to `tid`'s stream. Events of one thread must be given
    /// in that thread's order; threads may interleave freely.
    pub fn event(&mut self, tid: ThreadId, tick: u64, kind: EventKind) -> Result<(), WriteError> {
        if tick > MAX_TICK {
            return Err(WriteError::TickTooLarge(tick));
        }
        if tid.0 == 0 {
            return Err(WriteError::ThreadZero);
        }
        self.last_tick = self.last_tick.max(tick);
        let chunk_size = self.header.chunk_size as usize;
        let mut t = self.threads.remove(&tid).unwrap_or_default();
        if t.chunk.is_empty() || t.used + EVENT_SIZE > chunk_size {
            if !t.chunk.is_empty() {
                self.flush(tid, &mut t)?;
            }
            self.open_chunk(&mut t, tick);
        }
        let bytes = Event { tick, kind }.encode();
        t.chunk[t.used..t.used + EVENT_SIZE].copy_from_slice(&bytes);
        t.used += EVENT_SIZE;
        // Keep the shadow of open frames for the next chunk's snapshot.
        let frames = match t.current {
            StackId::OWN => &mut t.own_frames,
            s => self.stack_frames.entry(s).or_default(),
        };
        match kind {
            EventKind::Enter(f) => frames.push(f.0),
            EventKind::Exit(f) => {
                if let Some(pos) = frames.iter().rposition(|&x| x == f.0) {
                    frames.truncate(pos);
                }
            }
            EventKind::Switch(s) => t.current = s,
            EventKind::ThreadStart
            | EventKind::ThreadExit
            | EventKind::Lost
            // An end changes no frames. The ended stack's are kept: input
            // that runs it again after its end (an end the analyzer
            // ignores) still needs them in later snapshots.
            | EventKind::Wake(_)
            | EventKind::End(_) => {}
        }
        // A `lost` event ends its chunk; the thread's next event, if any,
        // starts a chunk that readers restart from its snapshot.
        if kind == EventKind::Lost {
            self.flush(tid, &mut t)?;
        }
        self.threads.insert(tid, t);
        Ok(())
    }

    /// Starts `tid`'s stream as a later file of a rotating series does:
    /// the thread carries on at `tick` (the file's start) on stack
    /// `current` with `own` frames open on its own stack and, if `current`
    /// is a logical stack, `on_stack` frames open on it (outermost first).
    /// Its first chunk gets the `restart` and `continued` flags and a
    /// snapshot of those frames; later events exit them as usual. Call it
    /// before the thread's first event.
    pub fn continue_thread(
        &mut self,
        tid: ThreadId,
        tick: u64,
        own: &[FunctionId],
        current: StackId,
        on_stack: &[FunctionId],
    ) -> Result<(), WriteError> {
        if tick > MAX_TICK {
            return Err(WriteError::TickTooLarge(tick));
        }
        if tid.0 == 0 {
            return Err(WriteError::ThreadZero);
        }
        self.last_tick = self.last_tick.max(tick);
        let mut t = self.threads.remove(&tid).unwrap_or_default();
        if !t.chunk.is_empty() {
            self.flush(tid, &mut t)?;
        }
        t.own_frames = own.iter().map(|f| f.0).collect();
        t.current = current;
        if current != StackId::OWN {
            self.stack_frames
                .insert(current, on_stack.iter().map(|f| f.0).collect());
        }
        self.open_chunk(&mut t, tick);
        t.flags = CHUNK_FLAG_RESTART | CHUNK_FLAG_CONTINUED;
        self.threads.insert(tid, t);
        Ok(())
    }

    /// Records that logical stack `id` ran in an earlier file of a
    /// rotating series and is first switched onto in this one at `tick`
    /// with `frames` open (outermost first): the continued-stack record.
    /// Later snapshots of a thread on the stack start from these frames.
    pub fn continued_stack(&mut self, id: StackId, tick: u64, frames: &[FunctionId]) {
        self.stack_frames
            .insert(id, frames.iter().map(|f| f.0).collect());
        MetaRecord::ContinuedStack {
            id,
            tick,
            frames: frames.to_vec(),
        }
        .encode(&mut self.meta);
    }

    fn open_chunk(&mut self, t: &mut ThreadBuf, tick: u64) {
        let chunk_size = self.header.chunk_size as usize;
        t.chunk.clear();
        t.chunk.resize(chunk_size, 0);
        let empty = Vec::new();
        let stack_frames = match t.current {
            StackId::OWN => &empty,
            s => self.stack_frames.get(&s).unwrap_or(&empty),
        };
        let max = (chunk_size - CHUNK_HEADER_SIZE) / 4;
        let snap = encode_snapshot(
            &mut t.chunk[CHUNK_HEADER_SIZE..],
            max,
            tick,
            &t.own_frames,
            t.current,
            stack_frames,
        );
        t.used = CHUNK_HEADER_SIZE + snap;
    }

    fn flush(&mut self, tid: ThreadId, t: &mut ThreadBuf) -> io::Result<()> {
        let state = pack_state(self.next_seq, t.used - CHUNK_HEADER_SIZE, false);
        encode_chunk_header(&mut t.chunk, state, tid, t.chunks_written);
        t.chunk[C_FLAGS..C_FLAGS + 8].copy_from_slice(&std::mem::take(&mut t.flags).to_le_bytes());
        self.out.write_all(&t.chunk)?;
        self.next_seq += 1;
        t.chunks_written += 1;
        t.chunk.clear();
        Ok(())
    }

    /// Flushes every thread's last chunk, writes the metadata and the final
    /// header, and returns the output. `end_tick`: the end-of-trace marker
    /// (`None`: the largest tick written).
    pub fn finish(mut self, end_tick: Option<u64>) -> Result<W, WriteError> {
        let mut tids: Vec<ThreadId> = self.threads.keys().copied().collect();
        tids.sort();
        for tid in tids {
            let mut t = self.threads.remove(&tid).unwrap_or_default();
            if !t.chunk.is_empty() {
                self.flush(tid, &mut t)?;
            }
        }
        let chunk_size = self.header.chunk_size as u64;
        let h = &mut self.header;
        h.chunk_count = self.next_seq;
        h.next_seq = self.next_seq;
        h.chunks_offset = HEADER_SIZE as u64;
        h.meta_offset = HEADER_SIZE as u64 + self.next_seq * chunk_size;
        h.meta_capacity = self.meta.len() as u64;
        h.meta_len = self.meta.len() as u64;
        h.flags |= FLAG_FINISHED;
        h.end_tick = Some(end_tick.unwrap_or(self.last_tick));
        self.out.write_all(&self.meta)?;
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&self.header.encode())?;
        self.out.seek(SeekFrom::End(0))?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::TraceFile;
    use std::io::Cursor;

    #[test]
    fn writer_output_reads_back_across_many_chunks() {
        let opts = WriterOptions {
            chunk_size: 1024,
            ..Default::default()
        };
        let mut w = TraceWriter::new(Cursor::new(Vec::new()), opts).unwrap();
        let f = w.function("f", "a.rs", 1, "m");
        let g = w.function("g", "a.rs", 2, "m");
        let s = w.stack("fiber");
        w.thread_name(ThreadId(1), 100, "main");
        w.mark(3, 1, "warm-up done");
        let mut expected: HashMap<u64, Vec<Event>> = HashMap::new();
        for i in 0..500u64 {
            let tid = ThreadId(1 + i % 2);
            let kind = match i % 8 {
                0 | 1 => EventKind::Enter(f),
                2 => EventKind::Switch(s),
                3 => EventKind::Enter(g),
                4 => EventKind::Exit(g),
                5 => EventKind::Switch(StackId::OWN),
                _ => EventKind::Exit(f),
            };
            w.event(tid, i, kind).unwrap();
            expected
                .entry(tid.0)
                .or_default()
                .push(Event { tick: i, kind });
        }
        let bytes = w.finish(None).unwrap().into_inner();
        let trace = TraceFile::parse(&bytes).unwrap();
        assert_eq!(trace.header().end_tick, Some(499));
        let mut got: HashMap<u64, Vec<(u64, Vec<Event>)>> = HashMap::new();
        for i in 0..trace.chunk_slots() {
            let c = trace.chunk(i).unwrap().unwrap();
            got.entry(c.thread.0)
                .or_default()
                .push((c.thread_chunk_no, c.events().map(|e| e.unwrap()).collect()));
        }
        for (tid, mut chunks) in got {
            assert!(chunks.len() > 1, "test should span chunks");
            chunks.sort_by_key(|c| c.0);
            let flat: Vec<Event> = chunks.into_iter().flat_map(|c| c.1).collect();
            assert_eq!(flat, expected[&tid]);
        }
        let (meta, problem) = trace.metadata();
        assert!(problem.is_none());
        assert_eq!(meta.len(), 5);
        assert!(meta.contains(&MetaRecord::Mark {
            tick: 3,
            tid: 1,
            name: "warm-up done".into()
        }));
    }

    #[test]
    fn a_continued_thread_and_stack_read_back_as_a_later_file_of_a_series() {
        let opts = WriterOptions {
            chunk_size: 1024,
            ..Default::default()
        };
        let mut w = TraceWriter::new(Cursor::new(Vec::new()), opts).unwrap();
        let (main, serve, job) = (
            w.function("main", "a.rs", 1, "m"),
            w.function("serve", "a.rs", 2, "m"),
            w.function("job", "a.rs", 3, "m"),
        );
        let task = w.stack("task");
        w.continue_thread(ThreadId(1), 100, &[main, serve], StackId::OWN, &[])
            .unwrap();
        w.continued_stack(task, 110, &[job]);
        w.event(ThreadId(1), 110, EventKind::Switch(task)).unwrap();
        // Plenty of events: the later chunks are ordinary ones.
        for i in 0..100 {
            w.event(ThreadId(1), 111 + i, EventKind::Enter(job))
                .unwrap();
            w.event(ThreadId(1), 111 + i, EventKind::Exit(job)).unwrap();
        }
        let bytes = w.finish(None).unwrap().into_inner();
        let trace = TraceFile::parse(&bytes).unwrap();
        let mut chunks: Vec<_> = (0..trace.chunk_slots())
            .map(|i| trace.chunk(i).unwrap().unwrap())
            .collect();
        chunks.sort_by_key(|c| c.thread_chunk_no);
        assert!(chunks.len() > 1, "test should span chunks");
        let first = &chunks[0];
        assert!(first.restart && first.continued);
        assert_eq!(first.snapshot.tick, 100);
        let own: Vec<_> = first.snapshot.own_frames().collect();
        assert_eq!(own, [main, serve]);
        let second = &chunks[1];
        assert!(!second.restart && !second.continued);
        // The stack's frames, from the record, are in the later snapshot.
        assert_eq!(second.snapshot.current_stack, task);
        let on_task: Vec<_> = second.snapshot.stack_frames().collect();
        assert_eq!(on_task, [job]);
        let (meta, problem) = trace.metadata();
        assert!(problem.is_none());
        assert!(meta.contains(&MetaRecord::ContinuedStack {
            id: task,
            tick: 110,
            frames: vec![job]
        }));
    }
}
