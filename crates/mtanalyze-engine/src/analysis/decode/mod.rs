//! Decoding: the file's chunks (in parallel) become each thread's ordered
//! chunk sequence, and the metadata region becomes name tables (and the
//! list of marks). One concern a file:
//!
//! ```text
//! mod.rs        the chunks in each thread's order, the metadata read: [`decode`] -> [`Decoded`]
//! functions.rs  function ids -> dense indices (or a worker's numbers): [`FunctionTable`]
//! names.rs      logical stacks' names, kept or read from the file: [`StackNames`]
//! cursor.rs     a thread's events a batch at a time, for the passes: [`Batches`], [`Pos`]
//! ```
//!
//! Chunks are self-describing, so their headers are decoded independently;
//! a damaged chunk is skipped and listed, never fatal. A thread's chunks are
//! ordered by their per-thread number; a missing number means chunks were
//! overwritten (ring mode) or lost, and the chunk after the hole restarts
//! from its snapshot of open frames.
//!
//! A later file of a rotating series starts its threads with `continued`
//! chunks and names, in continued-stack records, the logical stacks that
//! carry on with frames opened in an earlier file: both are kept here
//! ([`ChunkRef::continued`], [`Decoded::continued_stacks`]) for the
//! replay, which takes those frames as opened before the trace began
//! ("Rotating series" in `semantics.md`).

mod cursor;
mod functions;
mod kinds;
mod names;

#[cfg(test)]
pub(crate) use cursor::switch_points;
pub(crate) use cursor::{prefetch, Batch, Batches, Pos, Restart, ResumePoint};
pub(crate) use functions::{
    DenseOf, FreshFunctions, FunctionIds, FunctionTable, Numbering, StepFunctions,
};
pub(crate) use kinds::StackKinds;
pub(crate) use names::StackNames;

use std::borrow::Cow;

use rustc_hash::{FxHashMap, FxHashSet};

use mtrace_format::meta::MetaProblem;
use mtrace_format::{
    Chunk, ChunkProblem, ChunkProblemKind, FormatError, FunctionId, MetaRecord, MetaRecordRef,
    StackId, ThreadId, TickScale, TraceFile,
};

use mtanalyze_model::functions::FunctionEntry;
use mtanalyze_model::warnings::Warnings;

/// A mark record as read (`crate::analysis::marks` makes it a `Mark`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawMark {
    /// The raw tick.
    pub tick: u64,
    /// The writer's trace thread id (0: unknown).
    pub tid: u32,
    /// The name.
    pub name: String,
}

/// A chunk's place in its thread's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkRef {
    /// Slot index in the file.
    pub slot: u64,
    /// Position among the thread's chunks.
    pub thread_chunk_no: u64,
    /// Global claim order.
    pub seq: u64,
    /// Start from its snapshot: chunks before this one are missing, or
    /// the recorder restarted the thread here (a `restart` chunk: it was
    /// paused, or the thread moved to this file of a rotating series).
    pub gap_before: bool,
    /// Start from its snapshot: the chunk before it ended at a damaged
    /// compact event, a restart as after a damaged 16-byte event (which
    /// the decode does not see, the segment pass does).
    pub after_damage: bool,
    /// The thread's first chunk in a later file of a rotating series: its
    /// snapshot's frames were opened in an earlier file (and the stream
    /// restarts there without a gap: `gap_before` is set too).
    pub continued: bool,
    /// Committed event slots. A compact chunk's: the count its writer
    /// stored when it let go of it (`Chunk::released_count`), else those
    /// a decode yields; with the writer's count, damage is found where
    /// the events are expanded (`cursor.rs`), as in a 16-byte chunk.
    pub events: u32,
    /// File offset of the first event slot (the events are read from here
    /// without decoding the chunk header again).
    pub events_offset: u64,
    /// Bytes of its events in the file (a compact walk that resumes at a
    /// `switch` reads them without decoding the chunk header again).
    pub event_bytes: u32,
    /// The writer still owned it (the recorder was killed or never released it).
    pub writing: bool,
    /// Its events are compact (format version 4): a batch expands them
    /// (see `cursor.rs`).
    pub compact: bool,
}

/// One thread's chunks, in order.
#[derive(Clone, Debug)]
pub(crate) struct ThreadChunks {
    /// The thread.
    pub tid: ThreadId,
    /// Its chunks in order.
    pub chunks: Vec<ChunkRef>,
}

impl ChunkRef {
    /// The thread's events restart from this chunk's snapshot (the
    /// thread's `index`-th chunk), as the decode found: chunks before it
    /// are missing, it is flagged `restart` (after a pause, or a thread
    /// carrying on from an earlier file), or the compact chunk before it
    /// ended at damage. The batches restart here (`cursor.rs`), and after
    /// a damaged 16-byte event or a `lost` mark.
    pub(crate) fn restarts(&self, index: usize) -> bool {
        self.gap_before || self.after_damage || (index == 0 && self.thread_chunk_no > 0)
    }
}

/// A trace whose chunk headers and metadata have been read.
pub(crate) struct Decoded<'a> {
    /// The file.
    pub file: TraceFile<'a>,
    /// Ticks to nanoseconds, for every stage (one converter, so all stages
    /// agree to the nanosecond).
    pub scale: TickScale,
    /// Functions by dense index (unknown ids are added by the segment pass).
    pub functions: FunctionTable<'a>,
    /// Names of logical stacks.
    pub stack_names: StackNames<'a>,
    /// Kinds of logical stacks.
    pub stack_kinds: StackKinds,
    /// Names and OS ids of threads.
    pub thread_names: FxHashMap<u64, (String, u64)>,
    /// The host the trace was recorded on ("" if unknown).
    pub host: String,
    /// Mark records, in the order written.
    pub marks: Vec<RawMark>,
    /// Logical stacks that carry on from an earlier file of a rotating
    /// series (continued-stack records): stack id -> the function ids open
    /// when the file first switched onto it, outermost first. The first
    /// record of a stack is kept.
    pub continued_stacks: FxHashMap<u64, Vec<FunctionId>>,
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
    /// Whether the analysis keeps every warning's places (see
    /// `AnalyzeOptions::warning_details`): each stage's warnings are made
    /// with [`Decoded::warnings`].
    pub warning_details: bool,
}

impl Decoded<'_> {
    /// An empty accumulator of warnings, keeping details if the analysis
    /// asked for them.
    pub(crate) fn warnings(&self) -> Warnings {
        Warnings::new(self.warning_details)
    }

    /// Events in the trace's chunks, every thread's.
    pub(crate) fn events(&self) -> u64 {
        self.threads
            .iter()
            .flat_map(|t| &t.chunks)
            .map(|c| u64::from(c.events))
            .sum()
    }
}

/// Decodes chunk headers (in parallel) and metadata, numbering the
/// functions by `numbering` if given (see [`Numbering`]). Stack names are
/// only counted unless `keep_names`: a task-per-request trace has one a
/// task, which a report without stack rows never shows.
pub(crate) fn decode<'a>(
    bytes: &'a [u8],
    mut numbering: Option<&mut Numbering<'_>>,
    keep_names: bool,
) -> Result<Decoded<'a>, FormatError> {
    let file = TraceFile::parse(bytes)?;
    let mut functions = match numbering {
        Some(_) => FunctionTable::numbered(),
        None => FunctionTable::default(),
    };
    let mut stack_names = StackNames::in_file(file.bytes());
    let mut stack_kinds = StackKinds::default();
    let (mut names_counted, mut last_named) = (0usize, None);
    let mut thread_names = FxHashMap::default();
    let mut host = String::new();
    let mut marks = Vec::new();
    let mut continued_stacks = FxHashMap::default();
    let mut meta_records = 0u64;
    // One record at a time: half a million task names are not held twice.
    // Stack names borrowed from the file: one `StackName` each, not a
    // `String` made and freed first (half a million of them in a
    // task-per-request trace).
    let meta_problem = file.for_each_metadata_located(|at, r| {
        meta_records += 1;
        let r = match r {
            MetaRecordRef::Stack { id, name, kind } => {
                stack_kinds.set(id.0, kind);
                if keep_names {
                    stack_names.push(id.0, at, name);
                } else if last_named.replace(id.0) != Some(id.0) {
                    names_counted += 1;
                }
                return;
            }
            MetaRecordRef::Function {
                id,
                name,
                file,
                line,
                module,
            } => {
                match numbering.as_deref_mut() {
                    Some(to) => {
                        let key = (name, file, line);
                        functions.insert_numbered(id.0, key, Cow::Borrowed(module), to);
                    }
                    None => {
                        let lossy = mtrace_format::meta::text;
                        let entry =
                            FunctionEntry::new(lossy(name), lossy(file), line, lossy(module));
                        functions.insert(id.0, entry);
                    }
                }
                return;
            }
            MetaRecordRef::Other(r) => r,
        };
        match r {
            MetaRecord::Function(f) => {
                // Function records come borrowed (above); kept for completeness.
                match numbering.as_deref_mut() {
                    Some(to) => {
                        let key = (f.name.as_bytes(), f.file.as_bytes(), f.line);
                        let module = Cow::Owned(f.module.clone().into_bytes());
                        functions.insert_numbered(f.id.0, key, module, to);
                    }
                    None => {
                        let entry = FunctionEntry::new(
                            f.name.into(),
                            f.file.into(),
                            f.line,
                            f.module.into(),
                        );
                        functions.insert(f.id.0, entry);
                    }
                }
            }
            // Stack records come borrowed (above); kept for completeness.
            MetaRecord::Stack { id, name, kind } => {
                stack_kinds.set(id.0, kind);
                if keep_names {
                    stack_names.push(id.0, usize::MAX, name.as_bytes());
                } else if last_named.replace(id.0) != Some(id.0) {
                    names_counted += 1;
                }
            }
            MetaRecord::Thread { tid, os_tid, name } => {
                thread_names.insert(tid.0, (name, os_tid));
            }
            MetaRecord::Host { name } => host = name,
            MetaRecord::Mark { tick, tid, name } => marks.push(RawMark { tick, tid, name }),
            // The frames were counted by the format crate against the
            // record's length before it allocated them.
            MetaRecord::ContinuedStack { id, frames, .. } => {
                if id != StackId::OWN {
                    continued_stacks.entry(id.0).or_insert(frames);
                }
            }
        }
    });

    let slots = file.chunk_slots();
    let decoded: Vec<_> = crate::threads::map_collect(0..slots, |i| {
        file.chunk(i).map(|c| {
            c.map(|c| {
                let (events, cut) = count_events(&c);
                let r = ChunkRef {
                    slot: c.index,
                    thread_chunk_no: c.thread_chunk_no,
                    seq: c.seq,
                    gap_before: c.restart,
                    after_damage: false,
                    continued: c.continued,
                    events,
                    events_offset: c.events_offset(),
                    // A body is under 2^23 bytes (the state word's field).
                    event_bytes: c.event_bytes().len() as u32,
                    writing: c.writing,
                    compact: c.is_compact(),
                };
                (c.thread, r, cut)
            })
        })
    });

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
    // A compact chunk whose events end at damage lost its tail: the
    // thread's next chunk restarts from its snapshot, as after a damaged
    // 16-byte event (which the segment pass finds: `Batches::damaged`).
    let ends_at_damage: FxHashSet<u64> = cut
        .iter()
        .filter(|p| matches!(p.kind, ChunkProblemKind::BadCompactEvent(_)))
        .map(|p| p.index)
        .collect();
    let mut lost = 0u64;
    let mut threads: Vec<ThreadChunks> = by_thread
        .into_iter()
        .map(|(tid, mut chunks)| {
            // A slot rewritten with the same number (damage) keeps the newest.
            chunks.sort_by_key(|c| (c.thread_chunk_no, std::cmp::Reverse(c.seq)));
            chunks.dedup_by_key(|c| c.thread_chunk_no);
            let mut expected = 0;
            let mut after_damage = false;
            for c in &mut chunks {
                if c.thread_chunk_no != expected {
                    c.gap_before = true;
                    // Chunk numbers are the file's claims: saturate.
                    lost = lost.saturating_add(c.thread_chunk_no.saturating_sub(expected));
                }
                c.after_damage = after_damage;
                after_damage = ends_at_damage.contains(&c.slot);
                expected = c.thread_chunk_no.saturating_add(1);
            }
            ThreadChunks { tid, chunks }
        })
        .collect();
    threads.sort_by_key(|t| t.tid);
    // The ids continued stacks' records name and the metadata does not:
    // unknown functions, as those that events and snapshots use are
    // (numbered here, before any engine reads the table).
    for id in continued_stacks.values().flatten() {
        if functions.get(id.0).is_none() {
            functions.insert_unknown(id.0, numbering.as_deref_mut());
        }
    }
    Ok(Decoded {
        warning_details: false,
        scale: file.header().clock.scale(),
        file,
        functions,
        stack_names: stack_names.finish().counted(names_counted),
        stack_kinds,
        thread_names,
        host,
        marks,
        continued_stacks,
        threads,
        damaged,
        cut,
        lost,
        empty_slots,
        meta_records,
        meta_problem,
    })
}

/// A chunk's events as the passes see them: their number, and the damage
/// that cut the chunk short. A compact chunk that its writer let go of
/// whole has its count in its header (`Chunk::released_count`): taken as
/// it is, so its events are decoded once, by the segment pass, which
/// finds any damage in them there (`cursor.rs`), as in a 16-byte chunk.
/// Any other compact chunk (held by a writer that was killed, cut by the
/// file's end, from a writer that stores no count) is walked once here,
/// in the parallel decode of the chunk headers: its events are counted by
/// decoding them, so a chunk cut by damage counts the events before the
/// damage, as the batches that expand it later find them. Where its
/// `switch` events are is not kept: the segment pass notes each as it
/// expands the chunk, in the segment the switch opens
/// ([`crate::analysis::segment::Segment::resume_at`]).
fn count_events(chunk: &Chunk<'_>) -> (u32, Option<ChunkProblem>) {
    if let Some(count) = chunk.released_count() {
        return (count, None);
    }
    let Some(mut walk) = chunk.compact_events(Vec::new()) else {
        return (chunk.event_count() as u32, chunk.cut.clone());
    };
    let events = walk.count_with_switches(|_| {});
    // The walk's damage is where the chunk ends; without any, a chunk the
    // file's end cut is reported as cut there.
    let cut = walk.problem().cloned().or_else(|| chunk.cut.clone());
    (events as u32, cut)
}
