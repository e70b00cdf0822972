//! Decoding: the file's chunks (in parallel) become each thread's ordered
//! chunk sequence, and the metadata region becomes name tables.
//!
//! Chunks are self-describing, so their headers are decoded independently;
//! a damaged chunk is skipped and listed, never fatal. A thread's chunks are
//! ordered by their per-thread number; a missing number means chunks were
//! overwritten (ring mode) or lost, and the chunk after the hole restarts
//! from its snapshot of open frames.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use mtrace_format::meta::MetaProblem;
use mtrace_format::{
    ChunkProblem, Event, EventKind, FormatError, MetaRecord, StackId, ThreadId, TraceFile,
};

use crate::report::FunctionKey;

/// One function of the report: its identity and module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionEntry {
    /// Name, file and line.
    pub key: FunctionKey,
    /// Module path ("" if unknown).
    pub module: String,
}

/// Maps the trace's function ids to dense indices, one per distinct
/// (name, file, line), so recursion and statistics are per function as the
/// user sees it even if two ids name the same site.
#[derive(Clone, Debug, Default)]
pub struct FunctionTable {
    entries: Vec<FunctionEntry>,
    by_key: FxHashMap<FunctionKey, u32>,
    by_id: FxHashMap<u32, u32>,
}

impl FunctionTable {
    /// The dense index of a function id, if known.
    #[inline]
    pub fn get(&self, id: u32) -> Option<u32> {
        self.by_id.get(&id).copied()
    }

    /// Registers `id` with this identity (ids seen twice keep the first).
    pub fn insert(&mut self, id: u32, entry: FunctionEntry) -> u32 {
        if let Some(&dense) = self.by_id.get(&id) {
            return dense;
        }
        let dense = match self.by_key.get(&entry.key) {
            Some(&d) => d,
            None => {
                let d = self.entries.len() as u32;
                self.by_key.insert(entry.key.clone(), d);
                self.entries.push(entry);
                d
            }
        };
        self.by_id.insert(id, dense);
        dense
    }

    /// Registers an id that appears in events but not in the metadata.
    pub fn insert_unknown(&mut self, id: u32) -> u32 {
        self.insert(
            id,
            FunctionEntry {
                key: FunctionKey {
                    function: format!("fn#{id}"),
                    file: String::new(),
                    line: 0,
                },
                module: String::new(),
            },
        )
    }

    /// All functions, by dense index.
    pub fn entries(&self) -> &[FunctionEntry] {
        &self.entries
    }
}

/// A chunk's place in its thread's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    /// Slot index in the file.
    pub slot: u64,
    /// Position among the thread's chunks.
    pub thread_chunk_no: u64,
    /// Global claim order.
    pub seq: u64,
    /// Chunks before this one are missing: start from its snapshot.
    pub gap_before: bool,
    /// Committed event slots.
    pub events: u32,
    /// The writer still owned it (the recorder was killed or never released it).
    pub writing: bool,
}

/// One thread's chunks, in order.
#[derive(Clone, Debug)]
pub struct ThreadChunks {
    /// The thread.
    pub tid: ThreadId,
    /// Its chunks in order.
    pub chunks: Vec<ChunkRef>,
}

/// A trace whose chunk headers and metadata have been read.
pub struct Decoded<'a> {
    /// The file.
    pub file: TraceFile<'a>,
    /// Functions by dense index (unknown ids are added by the segment pass).
    pub functions: FunctionTable,
    /// Names of logical stacks.
    pub stack_names: FxHashMap<u64, String>,
    /// Names and OS ids of threads.
    pub thread_names: FxHashMap<u64, (String, u64)>,
    /// Threads ascending by id, each with its chunks in order.
    pub threads: Vec<ThreadChunks>,
    /// Chunks that could not be decoded at all.
    pub damaged: Vec<ChunkProblem>,
    /// Chunks cut short (file truncated), with where.
    pub cut: Vec<ChunkProblem>,
    /// Chunks missing from threads' sequences.
    pub lost: u64,
    /// Slots never claimed or empty.
    pub empty_slots: u64,
    /// Metadata records read.
    pub meta_records: u64,
    /// Damage in the metadata region, if any.
    pub meta_problem: Option<MetaProblem>,
}

/// Decodes chunk headers (in parallel) and metadata.
pub fn decode(bytes: &[u8]) -> Result<Decoded<'_>, FormatError> {
    let file = TraceFile::parse(bytes)?;
    let (records, meta_problem) = file.metadata();
    let mut functions = FunctionTable::default();
    let mut stack_names = FxHashMap::default();
    let mut thread_names = FxHashMap::default();
    let meta_records = records.len() as u64;
    for r in records {
        match r {
            MetaRecord::Function(f) => {
                functions.insert(
                    f.id.0,
                    FunctionEntry {
                        key: FunctionKey {
                            function: f.name,
                            file: f.file,
                            line: f.line,
                        },
                        module: f.module,
                    },
                );
            }
            MetaRecord::Stack { id, name } => {
                stack_names.insert(id.0, name);
            }
            MetaRecord::Thread { tid, os_tid, name } => {
                thread_names.insert(tid.0, (name, os_tid));
            }
        }
    }

    let slots = file.chunk_slots();
    let decoded: Vec<_> = (0..slots)
        .into_par_iter()
        .map(|i| {
            file.chunk(i).map(|c| {
                c.map(|c| {
                    let r = ChunkRef {
                        slot: c.index,
                        thread_chunk_no: c.thread_chunk_no,
                        seq: c.seq,
                        gap_before: false,
                        events: c.event_count() as u32,
                        writing: c.writing,
                    };
                    (c.thread, r, c.cut)
                })
            })
        })
        .collect();

    let mut by_thread: FxHashMap<ThreadId, Vec<ChunkRef>> = FxHashMap::default();
    let mut damaged = Vec::new();
    let mut cut = Vec::new();
    let mut empty_slots = 0;
    for d in decoded {
        match d {
            Ok(Some((tid, r, c))) => {
                by_thread.entry(tid).or_default().push(r);
                cut.extend(c);
            }
            Ok(None) => empty_slots += 1,
            Err(p) => damaged.push(p),
        }
    }
    let mut lost = 0;
    let mut threads: Vec<ThreadChunks> = by_thread
        .into_iter()
        .map(|(tid, mut chunks)| {
            // A slot rewritten with the same number (damage) keeps the newest.
            chunks.sort_by_key(|c| (c.thread_chunk_no, std::cmp::Reverse(c.seq)));
            chunks.dedup_by_key(|c| c.thread_chunk_no);
            let mut expected = 0;
            for c in &mut chunks {
                if c.thread_chunk_no != expected {
                    c.gap_before = true;
                    lost += c.thread_chunk_no.saturating_sub(expected);
                }
                expected = c.thread_chunk_no + 1;
            }
            ThreadChunks { tid, chunks }
        })
        .collect();
    threads.sort_by_key(|t| t.tid);
    Ok(Decoded {
        file,
        functions,
        stack_names,
        thread_names,
        threads,
        damaged,
        cut,
        lost,
        empty_slots,
        meta_records,
        meta_problem,
    })
}

/// Where an event sits in its thread's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    /// Index into the thread's chunk list.
    pub chunk: u32,
    /// Index of the event within the chunk.
    pub event: u32,
}

/// What the event iterator reports besides events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// An event, with its tick clamped so a thread's ticks never go backwards.
    Event {
        /// Where it is.
        pos: Pos,
        /// Clamped tick.
        tick: u64,
        /// The tick as recorded, if it had to be clamped.
        clamped_from: Option<u64>,
        /// What happened.
        kind: EventKind,
    },
    /// A chunk that follows missing chunks begins: its snapshot tells what was open.
    Restart {
        /// The chunk's index in the thread's list.
        chunk: u32,
        /// Its snapshot's tick, clamped.
        tick: u64,
        /// The stack the thread was running.
        current_stack: StackId,
    },
    /// A damaged event ended its chunk early.
    Damaged(ChunkProblem),
}

/// Iterates a thread's events from `from` (inclusive) to `to` (exclusive),
/// clamping ticks from `floor_tick` on. Both passes over a thread use this,
/// so they see the same events with the same ticks.
pub struct ThreadEvents<'a, 'd> {
    file: &'d TraceFile<'a>,
    chunks: &'d [ChunkRef],
    pos: Pos,
    to: Pos,
    prev_tick: u64,
    current: Option<mtrace_format::chunk::EventIter<'a>>,
    restart_pending: bool,
}

impl<'a, 'd> ThreadEvents<'a, 'd> {
    /// Events of `chunks` in `[from, to)`.
    pub fn new(
        file: &'d TraceFile<'a>,
        chunks: &'d [ChunkRef],
        from: Pos,
        to: Pos,
        floor_tick: u64,
    ) -> Self {
        ThreadEvents {
            file,
            chunks,
            pos: from,
            to,
            prev_tick: floor_tick,
            current: None,
            restart_pending: false,
        }
    }

    /// The whole stream of a thread.
    pub fn all(file: &'d TraceFile<'a>, chunks: &'d [ChunkRef]) -> Self {
        let end = Pos {
            chunk: chunks.len() as u32,
            event: 0,
        };
        Self::new(file, chunks, Pos::default(), end, 0)
    }

    fn open_chunk(&mut self) -> Option<Item> {
        let r = self.chunks.get(self.pos.chunk as usize)?;
        // Decoding the header again is a few loads; it cannot fail now
        // because it succeeded in `decode`.
        let chunk = self.file.chunk(r.slot).ok().flatten()?;
        let it = chunk.events_from(self.pos.event as usize);
        if self.pos.event > 0 {
            self.restart_pending = false;
        } else if r.gap_before || (self.pos.chunk == 0 && r.thread_chunk_no > 0) {
            self.restart_pending = true;
        }
        self.current = Some(it);
        if std::mem::take(&mut self.restart_pending) {
            let tick = (chunk.snapshot.tick).max(self.prev_tick);
            self.prev_tick = tick;
            return Some(Item::Restart {
                chunk: self.pos.chunk,
                tick,
                current_stack: chunk.snapshot.current_stack,
            });
        }
        None
    }
}

impl Iterator for ThreadEvents<'_, '_> {
    type Item = Item;

    #[inline]
    fn next(&mut self) -> Option<Item> {
        loop {
            if self.pos >= self.to {
                return None;
            }
            if self.current.is_none() {
                if let Some(restart) = self.open_chunk() {
                    return Some(restart);
                }
                self.current.as_ref()?;
            }
            let it = self.current.as_mut()?;
            match it.next() {
                Some(Ok(Event { tick, kind })) => {
                    let pos = self.pos;
                    self.pos.event += 1;
                    let clamped_from = (tick < self.prev_tick).then_some(tick);
                    let tick = tick.max(self.prev_tick);
                    self.prev_tick = tick;
                    return Some(Item::Event {
                        pos,
                        tick,
                        clamped_from,
                        kind,
                    });
                }
                Some(Err(problem)) => {
                    // Events after damage are gone: the next chunk restarts
                    // from its snapshot.
                    self.next_chunk();
                    self.restart_pending = true;
                    return Some(Item::Damaged(problem));
                }
                None => self.next_chunk(),
            }
        }
    }
}

impl ThreadEvents<'_, '_> {
    fn next_chunk(&mut self) {
        self.current = None;
        self.pos = Pos {
            chunk: self.pos.chunk + 1,
            event: 0,
        };
    }
}
