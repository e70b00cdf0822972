//! Function ids to dense indices: one per distinct (name, file, line), or
//! a worker's numbers when it sums many traces.

use std::borrow::Cow;

use rustc_hash::FxHashMap;

use mtanalyze_model::functions::{EntryKey, FunctionEntry};
use mtanalyze_model::merge::Sums;
use mtanalyze_model::report::FunctionKey;

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
    /// The ids numbered as functions the metadata does not name, each
    /// once, in the order they were.
    unknown: Vec<u32>,
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

/// The name of a function the metadata does not name.
fn unknown_name(id: u32) -> String {
    format!("fn#{id}")
}

fn unknown_entry(id: u32) -> FunctionEntry<'static> {
    FunctionEntry::new(unknown_name(id).into(), "".into(), 0, "".into())
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

    /// Registers an id that the trace uses (an event, a snapshot, a
    /// continued stack's record) but the metadata does not name, as
    /// function `fn#<id>` (numbered by `numbering` if the table is
    /// numbered).
    pub(crate) fn insert_unknown(&mut self, id: u32, numbering: Option<&mut Numbering<'_>>) -> u32 {
        if self.get(id).is_none() {
            self.unknown.push(id);
        }
        match numbering {
            Some(to) => {
                let name = unknown_name(id);
                let key = (name.as_bytes(), &b""[..], 0);
                self.insert_numbered(id, key, Cow::Borrowed(b""), to)
            }
            None => self.insert(id, unknown_entry(id)),
        }
    }

    /// The dense index [`FunctionTable::insert_unknown`] would give `id`
    /// if it gives one already (a function the metadata names `fn#<id>`,
    /// with no file or line, is that one). Not for a numbered table.
    fn unknown_dense(&self, id: u32) -> Option<u32> {
        self.get(id)
            .or_else(|| self.by_key.get(&unknown_entry(id).key).copied())
    }

    /// The ids [`FunctionTable::insert_unknown`] numbered, each once.
    pub(crate) fn unknown_ids(&self) -> &[u32] {
        &self.unknown
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

/// The ids the metadata does not name that the segment pass meets,
/// numbered as they are met: threads' passes run in parallel, and a
/// thread's own stack, replayed on the way, counts such a function at
/// once. The pass's function table is read by every pass (and, in a
/// stream, by every replay of the step) and takes these ids after the
/// passes (a stream: between steps) with [`FreshFunctions::fold_into`].
/// Rare (a damaged trace's), so a lock.
///
/// Dense indices follow the table's in the order the ids were met, which
/// varies from run to run: nothing in a report depends on dense indices,
/// whose rows are sorted by name, file and line. A numbered table's
/// functions take the worker's numbers (by name), as the metadata's do.
pub(crate) struct FreshFunctions<'n> {
    fresh: std::sync::Mutex<Fresh<'n>>,
}

struct Fresh<'n> {
    /// How many dense indices there are: the next new function's, if the
    /// table is not numbered.
    next: u32,
    /// The ids met since the last fold, in the order they were met.
    met: Vec<u32>,
    /// Their dense indices.
    by_id: FxHashMap<u32, u32>,
    /// A numbered table's numbering.
    numbering: Option<Numbering<'n>>,
}

impl<'n> FreshFunctions<'n> {
    /// None met yet, for `table` (numbered by `numbering` if it is).
    pub(crate) fn new(table: &FunctionTable<'_>, numbering: Option<&'n mut Numbering<'_>>) -> Self {
        let numbering = numbering.map(|to| Numbering {
            sums: &mut *to.sums,
            met: &mut *to.met,
            trace: to.trace,
        });
        let fresh = Fresh {
            next: table.dense_len() as u32,
            met: Vec::new(),
            by_id: FxHashMap::default(),
            numbering,
        };
        FreshFunctions {
            fresh: std::sync::Mutex::new(fresh),
        }
    }

    /// The dense index of `id`, which `table` (the pass's) does not map,
    /// given a new one if no earlier call since the last fold gave it one,
    /// and how many dense indices there now are (a tally that counts `id`
    /// needs room for them).
    pub(crate) fn dense(&self, table: &FunctionTable<'_>, id: u32) -> (u32, usize) {
        let mut fresh = self.lock();
        let fresh = &mut *fresh;
        let dense = match fresh.by_id.get(&id) {
            Some(&d) => d,
            None => {
                let d = match &mut fresh.numbering {
                    Some(to) => to.sums.number_bytes(unknown_name(id).as_bytes(), b"", 0),
                    None => table.unknown_dense(id).unwrap_or(fresh.next),
                };
                fresh.next = fresh.next.max(d + 1);
                fresh.by_id.insert(id, d);
                fresh.met.push(id);
                d
            }
        };
        (dense, fresh.next as usize)
    }

    /// The dense index [`FreshFunctions::dense`] gave `id` since the last fold.
    pub(crate) fn get(&self, id: u32) -> Option<u32> {
        self.lock().by_id.get(&id).copied()
    }

    /// Gives `table` the ids met since the last fold, with the dense
    /// indices they were given.
    pub(crate) fn fold_into(&mut self, table: &mut FunctionTable<'_>) {
        let fresh = self.fresh.get_mut().unwrap_or_else(|e| e.into_inner());
        for &id in &fresh.met {
            let dense = table.insert_unknown(id, fresh.numbering.as_mut());
            debug_assert_eq!(dense, fresh.by_id[&id], "fn#{id} numbered twice");
        }
        fresh.met.clear();
        fresh.by_id.clear();
        fresh.next = table.dense_len() as u32;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Fresh<'n>> {
        // A pass that panicked is reported by the thread pool; the ids
        // numbered so far are whole either way.
        self.fresh.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Looks a function id up: its dense index, if it has one.
pub(crate) trait DenseOf {
    fn dense_of(&self, id: u32) -> Option<u32>;
}

impl DenseOf for FunctionTable<'_> {
    fn dense_of(&self, id: u32) -> Option<u32> {
        self.get(id)
    }
}

/// The segment pass's function table and the ids it met since (see
/// [`FreshFunctions`]).
#[derive(Clone, Copy)]
pub(crate) struct StepFunctions<'t, 'a, 'n> {
    pub table: &'t FunctionTable<'a>,
    pub fresh: &'t FreshFunctions<'n>,
}

impl DenseOf for StepFunctions<'_, '_, '_> {
    fn dense_of(&self, id: u32) -> Option<u32> {
        self.table.get(id).or_else(|| self.fresh.get(id))
    }
}
