//! Decoding: the file's chunks (in parallel) become each thread's ordered
//! chunk sequence, and the metadata region becomes name tables (and the
//! list of marks).
//!
//! Chunks are self-describing, so their headers are decoded independently;
//! a damaged chunk is skipped and listed, never fatal. A thread's chunks are
//! ordered by their per-thread number; a missing number means chunks were
//! overwritten (ring mode) or lost, and the chunk after the hole restarts
//! from its snapshot of open frames.

use std::borrow::Cow;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use mtrace_format::event::raw_parts;
use mtrace_format::layout::EVENT_SIZE;
use mtrace_format::meta::{self, MetaProblem};
use mtrace_format::{
    BadEvent, ChunkProblem, ChunkProblemKind, Event, FormatError, MetaRecord, MetaRecordRef,
    StackId, ThreadId, TickScale, TraceFile,
};

use crate::model::functions::{EntryKey, FunctionEntry};
use crate::model::merge::Sums;
use crate::model::report::{FunctionKey, StackName};

/// Maps the trace's function ids to dense indices, one per distinct
/// (name, file, line), so recursion and statistics are per function as the
/// user sees it even if two ids name the same site.
///
/// Numbered (built with a [`Numbering`]), the dense indices are a
/// worker's numbers instead, shared by every trace it sums, and the table
/// keeps no entries: only each function's number and module (the report
/// has no rows of its own to name), the names having gone to the
/// numbering. Indices that none of this trace's functions has belong to
/// the worker's other traces.
#[derive(Clone, Debug, Default)]
pub(crate) struct FunctionTable<'a> {
    entries: Vec<FunctionEntry<'a>>,
    /// Borrowed keys: a copy costs no allocation.
    by_key: FxHashMap<EntryKey<'a>, u32>,
    /// Small ids (every writer numbers from 1) index this directly; the
    /// hot loops look ids up once per event.
    by_small_id: Vec<u32>,
    by_id: FxHashMap<u32, u32>,
    /// Numbered: the functions.
    numbered: Option<Numbered<'a>>,
}

/// The functions of a numbered [`FunctionTable`].
#[derive(Clone, Debug, Default)]
struct Numbered<'a> {
    /// Each function's number and module, as the metadata wrote it.
    functions: Vec<(u32, Cow<'a, [u8]>)>,
    /// One more than the highest number.
    len: usize,
}

/// Function numbers shared by the traces one worker sums: each trace's
/// functions are numbered as the worker's [`Sums`] numbers them, so the
/// tally the worker keeps from trace to trace counts every trace under
/// the same numbers, and its totals and edges go to the sums without a
/// lookup (see `pipeline.rs`, [`FunctionTable`]). The metadata's strings
/// are looked up as written: bytes the sums have met need no UTF-8 check.
pub(crate) struct Numbering<'s> {
    /// Gives the numbers (by name, file and line).
    pub sums: &'s mut Sums,
    /// By number: the last trace (its `trace` below) that has the
    /// function, so two ids of one function in a trace count it once.
    pub met: &'s mut Vec<u32>,
    /// This trace's mark in `met`: new for every trace, never 0.
    pub trace: u32,
}

/// Ids below this are looked up in a vector (4 MiB at most).
const SMALL_IDS: u32 = 1 << 20;
const NONE: u32 = u32::MAX;

/// [`FunctionTable::get`] for a loop over events: the small ids' slice
/// held apart from the table, so the loop keeps it at hand whatever else
/// the table holds.
#[derive(Clone, Copy)]
pub(crate) struct FunctionIds<'t> {
    small: &'t [u32],
    by_id: &'t FxHashMap<u32, u32>,
}

impl FunctionIds<'_> {
    /// [`FunctionTable::get`].
    #[inline(always)]
    pub(crate) fn get(self, id: u32) -> Option<u32> {
        match self.small.get(id as usize) {
            Some(&NONE) => None,
            Some(&d) => Some(d),
            None if id < SMALL_IDS => None,
            None => self.by_id.get(&id).copied(),
        }
    }
}

impl<'a> FunctionTable<'a> {
    /// The dense index of a function id, if known.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<u32> {
        self.ids().get(id)
    }

    /// The lookup of [`FunctionTable::get`], for a loop over events.
    #[inline(always)]
    pub(crate) fn ids(&self) -> FunctionIds<'_> {
        FunctionIds {
            small: &self.by_small_id,
            by_id: &self.by_id,
        }
    }

    /// An empty table whose dense indices a [`Numbering`] gives.
    pub(crate) fn numbered() -> FunctionTable<'a> {
        FunctionTable {
            numbered: Some(Numbered::default()),
            ..FunctionTable::default()
        }
    }

    /// Registers `id` with this identity (ids seen twice keep the first).
    /// Not for a numbered table ([`FunctionTable::insert_numbered`]).
    pub(crate) fn insert(&mut self, id: u32, entry: FunctionEntry<'a>) -> u32 {
        if let Some(dense) = self.get(id) {
            return dense;
        }
        debug_assert!(
            self.numbered.is_none(),
            "a numbered table needs its numbering"
        );
        let dense = match self.by_key.get(&entry.key) {
            Some(&d) => d,
            None => {
                let d = self.entries.len() as u32;
                self.by_key.insert(entry.key.clone(), d);
                self.entries.push(entry);
                d
            }
        };
        self.map(id, dense);
        dense
    }

    /// Registers `id` as function `name` (`file`, `line`; the metadata's
    /// bytes) with its `module`, numbered by `to`, in a numbered table
    /// (ids seen twice keep the first).
    pub(crate) fn insert_numbered(
        &mut self,
        id: u32,
        (name, file, line): (&[u8], &[u8], u32),
        module: Cow<'a, [u8]>,
        to: &mut Numbering<'_>,
    ) -> u32 {
        if let Some(dense) = self.get(id) {
            return dense;
        }
        let n = to.sums.number_bytes(name, file, line);
        let met = match to.met.get_mut(n as usize) {
            Some(m) => m,
            None => {
                to.met.resize(n as usize + 1, 0);
                &mut to.met[n as usize]
            }
        };
        if *met != to.trace {
            *met = to.trace;
            let numbered = self.numbered.get_or_insert_with(Numbered::default);
            numbered.functions.push((n, module));
            numbered.len = numbered.len.max(n as usize + 1);
        }
        self.map(id, n);
        n
    }

    /// Maps `id` to `dense`.
    fn map(&mut self, id: u32, dense: u32) {
        if id < SMALL_IDS {
            if self.by_small_id.len() <= id as usize {
                self.by_small_id.resize(id as usize + 1, NONE);
            }
            self.by_small_id[id as usize] = dense;
        } else {
            self.by_id.insert(id, dense);
        }
    }

    /// Registers an id that appears in events but not in the metadata
    /// (numbered by `numbering` if the table is numbered).
    pub(crate) fn insert_unknown(&mut self, id: u32, numbering: Option<&mut Numbering<'_>>) -> u32 {
        let name = format!("fn#{id}");
        match numbering {
            Some(to) => {
                let key = (name.as_bytes(), &b""[..], 0);
                self.insert_numbered(id, key, Cow::Borrowed(b""), to)
            }
            None => self.insert(id, FunctionEntry::new(name.into(), "".into(), 0, "".into())),
        }
    }

    /// All functions, by dense index (not numbered: see
    /// [`FunctionTable::numbered_modules`]).
    pub(crate) fn entries(&self) -> &[FunctionEntry<'a>] {
        debug_assert!(self.numbered.is_none(), "a numbered table has no entries");
        &self.entries
    }

    /// A numbered table's functions: each one's number and module (the
    /// metadata's bytes).
    pub(crate) fn numbered_modules(&self) -> impl Iterator<Item = (u32, &[u8])> {
        let functions = self.numbered.as_ref().map_or(&[][..], |n| &n.functions);
        functions.iter().map(|(n, module)| (*n, &module[..]))
    }

    /// A numbered table's numbers (not in order).
    pub(crate) fn numbers(&self) -> impl Iterator<Item = u32> + '_ {
        self.numbered_modules().map(|(n, _)| n)
    }

    /// How many dense indices there are: a tally for this trace needs
    /// that many functions.
    pub(crate) fn dense_len(&self) -> usize {
        self.numbered.as_ref().map_or(self.entries.len(), |n| n.len)
    }

    /// Every function's key, by dense index (the table is not needed after).
    pub(crate) fn into_keys(self) -> Vec<FunctionKey> {
        self.entries().iter().map(|e| e.key.to_key()).collect()
    }
}

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
    /// Chunks before this one are missing: start from its snapshot.
    pub gap_before: bool,
    /// Committed event slots.
    pub events: u32,
    /// File offset of the first event slot (the events are read from here
    /// without decoding the chunk header again).
    pub events_offset: u64,
    /// The writer still owned it (the recorder was killed or never released it).
    pub writing: bool,
}

/// One thread's chunks, in order.
#[derive(Clone, Debug)]
pub(crate) struct ThreadChunks {
    /// The thread.
    pub tid: ThreadId,
    /// Its chunks in order.
    pub chunks: Vec<ChunkRef>,
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
    /// Names and OS ids of threads.
    pub thread_names: FxHashMap<u64, (String, u64)>,
    /// The host the trace was recorded on ("" if unknown).
    pub host: String,
    /// Mark records, in the order written.
    pub marks: Vec<RawMark>,
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

/// Logical stacks' names, by stack id. The recorder numbers stacks in the
/// order it names them, so the records usually come sorted and dense:
/// then only where each record is is kept (4 bytes a stack, not the
/// name), and a name is read from the file when asked for. Half a
/// million task names are 2 MB, not 16. Records in any other order are
/// kept as names, sorted by id. Either way a later record for an id wins,
/// as it would in a map.
#[derive(Clone, Debug, Default)]
pub(crate) struct StackNames<'a> {
    table: NameTable<'a>,
    /// How many stacks the metadata names when the names are not kept
    /// ([`decode`]'s `keep_names`).
    counted: usize,
}

#[derive(Clone, Debug)]
enum NameTable<'a> {
    /// Stacks `first..first + records.len()`: `records[i]` is the offset
    /// in `region` of the record naming stack `first + i`, or [`UNNAMED`].
    InFile {
        region: &'a [u8],
        first: u64,
        records: Vec<u32>,
        /// Entries that are [`UNNAMED`].
        holes: usize,
    },
    /// (id, name), ascending by id, one an id.
    Owned(Vec<(u64, StackName)>),
}

impl Default for NameTable<'_> {
    fn default() -> Self {
        NameTable::Owned(Vec::new())
    }
}

/// A stack in [`NameTable::InFile`]'s range that no record names.
const UNNAMED: u32 = u32::MAX;

/// Ids a dense table may skip (unnamed stacks) beyond one per name.
const HOLES_ALLOWED: usize = 1024;

impl<'a> StackNames<'a> {
    /// From names in file order.
    #[cfg(test)]
    pub(crate) fn new(names: Vec<(u64, StackName)>) -> StackNames<'static> {
        StackNames {
            table: NameTable::Owned(sorted_by_id(names)),
            counted: 0,
        }
    }

    /// An empty table whose names will be read from `region` (the trace's
    /// metadata region) where they can.
    fn in_file(region: &'a [u8]) -> StackNames<'a> {
        StackNames {
            table: NameTable::InFile {
                region,
                first: 0,
                records: Vec::new(),
                holes: 0,
            },
            counted: 0,
        }
    }

    /// Adds the record at `at` in the region, naming stack `id` `name`
    /// (records in file order; the name's bytes are only read, and made
    /// valid UTF-8, if the names are kept rather than their places).
    fn push(&mut self, id: u64, at: usize, name: &[u8]) {
        if let NameTable::InFile {
            first,
            records,
            holes,
            ..
        } = &mut self.table
        {
            let at = u32::try_from(at).ok().filter(|&at| at != UNNAMED);
            let next = first.checked_add(records.len() as u64);
            if let (Some(at), Some(next)) = (at, next) {
                match records.last_mut() {
                    None => {
                        *first = id;
                        records.push(at);
                        return;
                    }
                    Some(last) if id == next - 1 => {
                        // Renamed: the later record wins.
                        *last = at;
                        return;
                    }
                    Some(_) => {}
                }
                let gap = id.saturating_sub(next);
                let fits = usize::try_from(gap)
                    .is_ok_and(|gap| *holes + gap <= records.len() - *holes + 1 + HOLES_ALLOWED);
                if id >= next && fits {
                    records.extend(std::iter::repeat_n(UNNAMED, gap as usize));
                    *holes += gap as usize;
                    records.push(at);
                    return;
                }
            }
            self.table =
                NameTable::Owned(self.iter().map(|(i, n)| (i, StackName::new(&n))).collect());
        }
        if let NameTable::Owned(names) = &mut self.table {
            names.push((id, StackName::new(&String::from_utf8_lossy(name))));
        }
    }

    /// Done pushing: owned names are sorted by id, a later record winning.
    fn finish(mut self) -> StackNames<'a> {
        if let NameTable::Owned(names) = &mut self.table {
            *names = sorted_by_id(std::mem::take(names));
        }
        self
    }

    /// How many names (at most one an id; if they were only counted, the
    /// records naming a stack other than the record before).
    pub(crate) fn len(&self) -> usize {
        let kept = match &self.table {
            NameTable::InFile { records, holes, .. } => records.len() - holes,
            NameTable::Owned(names) => names.len(),
        };
        kept.max(self.counted)
    }

    /// The name of stack `id`.
    pub(crate) fn get(&self, id: u64) -> Option<Cow<'_, str>> {
        match &self.table {
            NameTable::InFile {
                region,
                first,
                records,
                ..
            } => {
                let i = usize::try_from(id.checked_sub(*first)?).ok()?;
                read_name(region, *records.get(i)?)
            }
            NameTable::Owned(names) => {
                let i = names.binary_search_by_key(&id, |(k, _)| *k).ok()?;
                Some(Cow::Borrowed(&names[i].1))
            }
        }
    }

    /// (id, name) pairs, ascending by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, Cow<'_, str>)> + '_ {
        let (in_file, owned) = match &self.table {
            NameTable::InFile {
                region,
                first,
                records,
                ..
            } => (Some((*region, *first, records)), None),
            NameTable::Owned(names) => (None, Some(names)),
        };
        let in_file = in_file.into_iter().flat_map(|(region, first, records)| {
            // `first + i` is an id some record named, or between two.
            (0u64..)
                .zip(records)
                .filter_map(move |(i, &at)| Some((first + i, read_name(region, at)?)))
        });
        let owned = owned
            .into_iter()
            .flatten()
            .map(|(id, name)| (*id, Cow::Borrowed(name.as_str())));
        in_file.chain(owned)
    }
}

/// The stack name in the record at `at` of `region` (`None` for
/// [`UNNAMED`]; every other offset is one [`decode`] read a stack record at).
fn read_name(region: &[u8], at: u32) -> Option<Cow<'_, str>> {
    if at == UNNAMED {
        return None;
    }
    match meta::record_at(region, at as usize)? {
        MetaRecordRef::Stack { name, .. } => Some(String::from_utf8_lossy(name)),
        _ => None,
    }
}

/// `names` (in file order) sorted by id, one an id: the later record wins.
fn sorted_by_id(mut names: Vec<(u64, StackName)>) -> Vec<(u64, StackName)> {
    if !names.is_sorted_by_key(|(id, _)| *id) {
        names.sort_by_key(|(id, _)| *id); // stable: file order within an id
    }
    // `dedup_by` keeps the first of equal ids: hand it the later name.
    names.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(&mut later.1, &mut kept.1);
        }
        same
    });
    names
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
    let mut stack_names = StackNames::in_file(file.metadata_region().0);
    let (mut names_counted, mut last_named) = (0usize, None);
    let mut thread_names = FxHashMap::default();
    let mut host = String::new();
    let mut marks = Vec::new();
    let mut meta_records = 0u64;
    // One record at a time: half a million task names are not held twice.
    // Stack names borrowed from the file: one `StackName` each, not a
    // `String` made and freed first (half a million of them in a
    // task-per-request trace).
    let meta_problem = file.for_each_metadata_located(|at, r| {
        meta_records += 1;
        let r = match r {
            MetaRecordRef::Stack { id, name } => {
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
                        let lossy = String::from_utf8_lossy;
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
            MetaRecord::Stack { id, name } => {
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
        }
    });

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
                        events_offset: c.events_offset(),
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
    let mut lost = 0u64;
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
                    // Chunk numbers are the file's claims: saturate.
                    lost = lost.saturating_add(c.thread_chunk_no.saturating_sub(expected));
                }
                expected = c.thread_chunk_no.saturating_add(1);
            }
            ThreadChunks { tid, chunks }
        })
        .collect();
    threads.sort_by_key(|t| t.tid);
    Ok(Decoded {
        scale: file.header().clock.scale(),
        file,
        functions,
        stack_names: StackNames {
            counted: names_counted,
            ..stack_names.finish()
        },
        thread_names,
        host,
        marks,
        threads,
        damaged,
        cut,
        lost,
        empty_slots,
        meta_records,
        meta_problem,
    })
}

/// Asks the CPU to start loading the cache line at `p`. The replay reads
/// short runs of events scattered over the file (a fiber's stretch is a few
/// cache lines), too short for the hardware prefetcher to pick up.
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    // SAFETY: a prefetch is a hint that never faults, whatever `p` is;
    // SSE is part of the x86_64 baseline.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Where an event sits in its thread's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Pos {
    /// Index into the thread's chunk list.
    pub chunk: u32,
    /// Index of the event within the chunk.
    pub event: u32,
}

/// A chunk that follows missing or damaged chunks: its snapshot tells what was open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Restart {
    /// The snapshot's tick, clamped.
    pub tick: u64,
    /// The stack the thread was running.
    pub current_stack: StackId,
}

/// The events of one chunk that fall in the requested range, as raw
/// 16-byte slots: the hot loops split them with `event::raw_parts` and
/// branch on the kind themselves (an `Event` enum match compiles to an
/// indirect jump that mispredicts on every enter/exit alternation).
pub(crate) struct Batch<'a> {
    /// Index of the chunk in the thread's list.
    pub chunk: u32,
    /// Index (in the chunk) of the first event in `raw`.
    pub first_event: u32,
    /// Set when the thread's history before this chunk is missing.
    pub restart: Option<Restart>,
    /// The events in range, 16 bytes each.
    pub raw: &'a [u8],
    slot: u64,
    offset: u64,
}

impl Batch<'_> {
    /// The events in range.
    #[inline]
    pub(crate) fn events(&self) -> impl Iterator<Item = &[u8; EVENT_SIZE]> + '_ {
        self.raw
            .chunks_exact(EVENT_SIZE)
            .map(|e| e.try_into().unwrap_or(&[0; EVENT_SIZE]))
    }

    /// Number of events.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.raw.len() / EVENT_SIZE
    }

    /// The `i`-th event split by `event::raw_parts` into (kind, tick,
    /// payload); past the end, a kind no event has.
    #[inline(always)]
    pub(crate) fn parts(&self, i: usize) -> (u64, u64, u64) {
        self.raw
            .get(i * EVENT_SIZE..(i + 1) * EVENT_SIZE)
            .and_then(|b| <&[u8; EVENT_SIZE]>::try_from(b).ok())
            .map_or((u64::MAX, 0, 0), raw_parts)
    }

    /// What is wrong with the `i`-th event of the batch, which the caller
    /// found invalid (`event::raw_is_valid`).
    pub(crate) fn problem(&self, i: usize) -> ChunkProblem {
        let at = i * EVENT_SIZE;
        let bad = self
            .raw
            .get(at..at + EVENT_SIZE)
            .and_then(|b| <&[u8; EVENT_SIZE]>::try_from(b).ok())
            .and_then(|b| Event::decode(b).err())
            .unwrap_or(BadEvent::UnknownKind(0));
        ChunkProblem {
            index: self.slot,
            offset: self.offset + at as u64,
            kind: ChunkProblemKind::BadEvent(bad),
        }
    }
}

/// Walks a thread's chunks from `from` (inclusive) to `to` (exclusive) one
/// chunk at a time. Callers decode the batch's events in a tight loop and
/// pass every tick through [`Batches::clamp`], so all passes over a thread
/// see the same events with the same clamped ticks.
pub(crate) struct Batches<'a, 'd> {
    file: &'d TraceFile<'a>,
    chunks: &'d [ChunkRef],
    next: Pos,
    to: Pos,
    prev_tick: u64,
    restart_pending: bool,
}

impl<'a, 'd> Batches<'a, 'd> {
    /// Events of `chunks` in `[from, to)`, clamping from `floor_tick`.
    pub(crate) fn new(
        file: &'d TraceFile<'a>,
        chunks: &'d [ChunkRef],
        from: Pos,
        to: Pos,
        floor_tick: u64,
    ) -> Self {
        Batches {
            file,
            chunks,
            next: from,
            to,
            prev_tick: floor_tick,
            restart_pending: false,
        }
    }

    /// The whole stream of a thread.
    pub(crate) fn all(file: &'d TraceFile<'a>, chunks: &'d [ChunkRef]) -> Self {
        let end = Pos {
            chunk: chunks.len() as u32,
            event: 0,
        };
        Self::new(file, chunks, Pos::default(), end, 0)
    }

    /// Clamps a tick so the thread's ticks never go backwards; returns the
    /// clamped tick and whether it had to be clamped.
    #[inline(always)]
    pub(crate) fn clamp(&mut self, tick: u64) -> (u64, bool) {
        if tick < self.prev_tick {
            (self.prev_tick, true)
        } else {
            self.prev_tick = tick;
            (tick, false)
        }
    }

    /// Accepts, in one step, a run of events whose ticks the caller checked
    /// never go backwards from [`Batches::floor`], the last being `last_tick`.
    #[inline(always)]
    pub(crate) fn accept_ordered(&mut self, last_tick: u64) {
        self.prev_tick = last_tick;
    }

    /// The tick the next event must not be earlier than.
    #[inline(always)]
    pub(crate) fn floor(&self) -> u64 {
        self.prev_tick
    }

    /// Where the next batch starts.
    pub(crate) fn position(&self) -> Pos {
        self.next
    }

    /// Tells the walk that an event of the last batch was damaged: the
    /// rest of that chunk is dropped and the next one restarts from its snapshot.
    pub(crate) fn damaged(&mut self) {
        self.restart_pending = true;
    }

    /// The next chunk's batch.
    pub(crate) fn next_batch(&mut self) -> Option<Batch<'a>> {
        loop {
            if self.next >= self.to {
                return None;
            }
            let Pos {
                chunk: ci,
                event: first,
            } = self.next;
            let r = self.chunks.get(ci as usize)?;
            self.next = Pos {
                chunk: ci + 1,
                event: 0,
            };
            let restart_here = first == 0
                && (std::mem::take(&mut self.restart_pending)
                    || r.gap_before
                    || (ci == 0 && r.thread_chunk_no > 0));
            let restart = if restart_here {
                // Only a restart needs the snapshot. The header decoded in
                // `decode`, so it decodes again; a `None` here would mean
                // the bytes changed under us: skip the chunk.
                let Some(chunk) = self.file.chunk(r.slot).ok().flatten() else {
                    continue;
                };
                let tick = chunk.snapshot.tick.max(self.prev_tick);
                self.prev_tick = tick;
                Some(Restart {
                    tick,
                    current_stack: chunk.snapshot.current_stack,
                })
            } else {
                None
            };
            let end = if ci == self.to.chunk {
                self.to.event.min(r.events)
            } else {
                r.events
            };
            let first = first.min(end);
            // `decode` checked that the committed events lie in the file.
            let from = r.events_offset as usize + first as usize * EVENT_SIZE;
            let to = r.events_offset as usize + end as usize * EVENT_SIZE;
            let Some(raw) = self.file.bytes().get(from..to) else {
                continue;
            };
            return Some(Batch {
                chunk: ci,
                first_event: first,
                restart,
                raw,
                slot: r.slot,
                offset: from as u64,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(pairs: &[(u64, &str)]) -> StackNames<'static> {
        StackNames::new(pairs.iter().map(|&(id, n)| (id, n.into())).collect())
    }

    #[test]
    fn stack_names_sort_by_id_and_a_later_record_wins() {
        let n = names(&[
            (5, "e"),
            (2, "b"),
            (9, "old"),
            (1, "a"),
            (9, "new"),
            (2, "b2"),
        ]);
        assert_eq!(n.get(9).as_deref(), Some("new"));
        assert_eq!(n.get(2).as_deref(), Some("b2"));
        assert_eq!(n.get(3), None);
        let ids: Vec<u64> = n.iter().map(|(id, _)| id).collect();
        assert_eq!(ids, [1, 2, 5, 9]);
        // Already sorted (the recorder's order), with a repeat.
        let n = names(&[(1, "a"), (2, "b"), (2, "c"), (3, "d")]);
        assert_eq!((n.get(2), n.get(3)), (Some("c".into()), Some("d".into())));
    }

    /// The table read from a metadata region holding `pairs`' records (with
    /// a function record between every two, as a recorder writes them).
    fn from_region(region: &[u8]) -> StackNames<'_> {
        let mut n = StackNames::in_file(region);
        meta::for_each_record_located(region, 0, |at, r| {
            if let MetaRecordRef::Stack { id, name } = r {
                n.push(id.0, at, name);
            }
        });
        n.finish()
    }

    #[test]
    fn stack_names_read_from_the_file_are_the_names_a_map_would_keep() {
        let dense: Vec<(u64, String)> = (7..400).map(|i| (i, format!("task-{i}"))).collect();
        let mut renamed = dense.clone();
        renamed.insert(50, (renamed[49].0, "again".into()));
        let gaps: Vec<(u64, String)> = dense.iter().filter(|(i, _)| i % 3 != 0).cloned().collect();
        let mut far = dense.clone();
        far.push((1 << 40, "far".into()));
        let mut back = dense.clone();
        back.push((9, "back".into()));
        back.push((1000, "after".into()));
        let descending: Vec<(u64, String)> = dense.iter().rev().cloned().collect();
        let ends = vec![
            (u64::MAX - 1, "a".into()),
            (u64::MAX, "b".into()),
            (0, "c".into()),
        ];
        let lone = vec![(u64::MAX, "top".into())];
        for (case, pairs) in [
            ("dense", dense),
            ("renamed", renamed),
            ("gaps", gaps),
            ("far", far),
            ("back", back),
            ("descending", descending),
            ("ends", ends),
            ("lone", lone),
            ("none", vec![]),
        ] {
            let mut region = Vec::new();
            for (i, (id, name)) in pairs.iter().enumerate() {
                encode_stack_record(&mut region, *id, name, i as u32);
            }
            let read = from_region(&region);
            let want = names(
                &pairs
                    .iter()
                    .map(|(i, n)| (*i, n.as_str()))
                    .collect::<Vec<_>>(),
            );
            assert_eq!(read.len(), want.len(), "{case}");
            let got: Vec<(u64, String)> = read.iter().map(|(i, n)| (i, n.into())).collect();
            let expected: Vec<(u64, String)> = want.iter().map(|(i, n)| (i, n.into())).collect();
            assert_eq!(got, expected, "{case}");
            for id in pairs
                .iter()
                .flat_map(|(i, _)| [*i, i.wrapping_add(1), i.wrapping_sub(1)])
            {
                assert_eq!(read.get(id), want.get(id), "{case}: stack {id}");
            }
            let in_file = matches!(read.table, NameTable::InFile { .. });
            let expect_in_file = matches!(case, "dense" | "renamed" | "gaps" | "lone" | "none");
            assert_eq!(in_file, expect_in_file, "{case}: where the names are");
        }
    }

    /// A stack record naming `id`, then a function record (`fid`).
    fn encode_stack_record(region: &mut Vec<u8>, id: u64, name: &str, fid: u32) {
        meta::encode_stack(region, mtrace_format::StackId(id), name);
        MetaRecord::Function(mtrace_format::FunctionMeta {
            id: mtrace_format::FunctionId(fid),
            name: format!("f{fid}"),
            file: "x.py".into(),
            line: fid,
            module: String::new(),
        })
        .encode(region);
    }

    #[test]
    fn stack_names_not_kept_are_counted() {
        let text: String = (1..=5)
            .map(|i| {
                format!(
                    "{{\"ts\": {i}, \"tid\": 1, \"ev\": \"switch\", \"stack\": \"task-{i}\"}}\n"
                )
            })
            .collect();
        let trace = crate::input::from_bytes("t", text.into_bytes()).expect("loads");
        let kept = decode(trace.bytes(), None, true).expect("decodes");
        let counted = decode(trace.bytes(), None, false).expect("decodes");
        assert_eq!(kept.stack_names.len(), 5);
        assert_eq!(counted.stack_names.len(), 5);
        let (id, name) = kept.stack_names.iter().next().expect("a name");
        assert_eq!(&*name, "task-1");
        assert_eq!(counted.stack_names.get(id), None);
        assert_eq!(counted.stack_names.iter().count(), 0);
    }
}
