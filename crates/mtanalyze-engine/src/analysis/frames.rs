//! One stack's open frames and what closing them adds up: the recursion
//! rule, self/cumulative/paused time, per function and per call edge.
//!
//! Recursion is decided per stack with counters of open frames per function
//! and per (caller, callee) edge: a frame is recursive iff its function's
//! counter is non-zero when it is entered, which is exactly what a walk down
//! the stack would find (a property test compares the two).
//!
//! Pieces: [`FrameStack`] (open frames, counters, totals of one stack) over
//! a [`Tally`] (a worker's statistics and scratch, reused stack after
//! stack), summed into an [`Acc`]. An [`Observer`] sees every frame; the
//! statistics use [`NoObserver`], which compiles to nothing.

use rustc_hash::FxHashMap;

use crate::analysis::paths::{PathTree, ROOT};
use crate::analysis::window::{Span, Window};
use mtanalyze_model::histogram::SelfTimeHistogram;
use mtanalyze_model::sums::EdgeSums;
use mtanalyze_model::timeline::ClosedFrame;
use mtanalyze_model::warnings::{LeftOpenStack, WarningKind};

/// Totals of one function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct FnAcc {
    /// Frames.
    pub ncalls: u64,
    /// Non-recursive frames.
    pub primitive_calls: u64,
    /// Sum of self time.
    pub tottime_ns: u64,
    /// Sum of the squares of each frame's self time (ns²): with the frame
    /// count, the spread a diff's significance test needs. Integer, so
    /// sums merged in any order agree.
    pub tottime_sq: u128,
    /// The counted frames by self time (the frames `ncalls` counts): the
    /// per-call samples a diff compares by rank.
    pub tottime_hist: SelfTimeHistogram,
    /// Sum of active time of non-recursive frames.
    pub cumtime_ns: u64,
    /// Sum of paused time of non-recursive frames.
    pub paused_ns: u64,
    /// Frames still open at the end of the trace (closed there).
    pub open_at_end: u64,
    /// Frames whose start or end the trace lost (see `FunctionStats::cut_short`).
    pub cut_short: u64,
    /// The part of `paused_ns` during which the frame's task had been
    /// woken and waited for a thread (see `StackReplay`'s scheduled clock).
    pub scheduled_ns: u64,
    /// In a time window: frames with no call or self time in it whose
    /// callees (or theirs) had some. The function then lies on a call path
    /// that did something in the window, which gives it a row ("Time
    /// windows" in `semantics.md`), whether or not call paths are kept.
    pub through_callees: u64,
}

impl FnAcc {
    /// Every total back to zero, keeping the histogram's memory (a worker
    /// summing trace after trace counts mostly the same functions).
    pub(super) fn clear(&mut self) {
        let mut hist = std::mem::take(&mut self.tottime_hist);
        hist.clear();
        *self = FnAcc {
            tottime_hist: hist,
            ..FnAcc::default()
        };
    }
}

/// Statistics accumulated over any number of stacks. Sums only, so merging
/// in any order gives the same result.
#[derive(Clone, Debug, Default)]
pub(super) struct Acc {
    /// By dense function index.
    pub functions: Vec<FnAcc>,
    /// By (caller, callee) dense indices.
    pub edges: EdgeList,
    /// Call paths, when asked for.
    pub paths: Option<PathTree>,
    /// Frames left open on logical stacks at their `end`, closed by the
    /// analyzer: the `frames_open_at_stack_end` warning ("Frames left
    /// open" in `semantics.md`). Like calls, only frames entered in the
    /// time window count.
    pub left_open: LeftOpen,
}

/// Frames left open at logical stacks' ends, for each stack that had any,
/// in no particular order. Kept per stack, with the frames, so the warning
/// can say which kinds of stack (tasks, greenlets, spans) they were on
/// and, asked for details, which stacks and frames; few stacks have any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LeftOpen(pub Vec<LeftOpenStack>);

/// Where a stack's replay finishes: whether the frames still open then
/// count as left open by the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Leftover {
    /// Logical stack `stack` at its `end`: they do.
    AtStackEnd {
        /// The stack's id.
        stack: u64,
        /// The thread that recorded its `end`.
        thread: u64,
    },
    /// At the end of the trace (a task still running when the recording
    /// finished, as often as one never finished), or cut short by lost
    /// events (which have warnings of their own): they do not.
    NotCounted,
}

impl Acc {
    /// An empty accumulator for `n` functions.
    pub(super) fn new(n: usize, paths: bool) -> Acc {
        Acc {
            functions: vec![FnAcc::default(); n],
            edges: EdgeList::default(),
            paths: paths.then(PathTree::default),
            left_open: LeftOpen::default(),
        }
    }

    /// Adds `other` into `self`.
    pub(super) fn merge(&mut self, other: Acc) {
        if self.functions.len() < other.functions.len() {
            self.functions
                .resize(other.functions.len(), FnAcc::default());
        }
        for (a, b) in self.functions.iter_mut().zip(other.functions) {
            a.ncalls += b.ncalls;
            a.primitive_calls += b.primitive_calls;
            a.tottime_ns = a.tottime_ns.saturating_add(b.tottime_ns);
            a.tottime_sq = a.tottime_sq.saturating_add(b.tottime_sq);
            a.tottime_hist.merge(&b.tottime_hist);
            a.cumtime_ns = a.cumtime_ns.saturating_add(b.cumtime_ns);
            a.paused_ns = a.paused_ns.saturating_add(b.paused_ns);
            a.open_at_end += b.open_at_end;
            a.cut_short += b.cut_short;
            a.scheduled_ns = a.scheduled_ns.saturating_add(b.scheduled_ns);
            a.through_callees += b.through_callees;
        }
        self.edges.merge(other.edges);
        self.left_open.0.extend(other.left_open.0);
        if let (Some(a), Some(b)) = (&mut self.paths, &other.paths) {
            a.merge_from(b, ROOT);
        }
    }
}

/// The totals of every (caller, callee) edge, each listed once: a tally's
/// edges as they are (its table numbers each edge once), summed with
/// another's through an index only when two are merged.
#[derive(Clone, Debug, Default)]
pub(super) struct EdgeList {
    list: Vec<((u32, u32), EdgeSums)>,
}

impl EdgeList {
    /// Every edge with its totals, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&(u32, u32), &EdgeSums)> {
        self.list.iter().map(|(k, a)| (k, a))
    }

    /// Adds `other`'s totals.
    fn merge(&mut self, other: EdgeList) {
        if self.list.is_empty() {
            self.list = other.list;
            return;
        }
        let mut index: FxHashMap<(u32, u32), usize> = FxHashMap::default();
        index.reserve(self.list.len() + other.list.len());
        for (i, (k, _)) in self.list.iter().enumerate() {
            index.insert(*k, i);
        }
        for (k, b) in other.list {
            match index.get(&k) {
                Some(&i) => self.list[i].1.add(&b),
                None => {
                    index.insert(k, self.list.len());
                    self.list.push((k, b));
                }
            }
        }
    }
}

const NO_PARENT: u32 = u32::MAX;

/// A stack's (caller, callee) edges: numbered on first use, each with its
/// open frames and totals in one entry, found through an open-addressing
/// index of 4-byte numbers kept at most half full.
///
/// Entering a frame costs one multiply, a probe of the small index and the
/// edge's entry; leaving it touches the same entry again. (A general hash
/// map behind a small cache missed on traces with thousands of edges.)
#[derive(Debug)]
struct EdgeTable {
    /// Edge numbers, or `VACANT`.
    index: Vec<u32>,
    shift: u32,
    /// By number.
    entries: Vec<EdgeEntry>,
}

#[derive(Clone, Copy, Debug, Default)]
struct EdgeEntry {
    /// `caller << 32 | callee`.
    key: u64,
    /// Frames of this edge open now.
    open: u32,
    totals: EdgeSums,
}

impl EdgeTable {
    const INITIAL_BITS: u32 = 6;
    const VACANT: u32 = u32::MAX;

    fn new() -> EdgeTable {
        EdgeTable {
            index: vec![Self::VACANT; 1 << Self::INITIAL_BITS],
            shift: 64 - Self::INITIAL_BITS,
            entries: Vec::new(),
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// Opens a frame of edge (`caller`, `callee`); returns the edge's
    /// number and whether a frame of it was already open.
    #[inline(always)]
    fn open(&mut self, caller: u32, callee: u32) -> (u32, bool) {
        let key = (caller as u64) << 32 | callee as u64;
        let mask = self.index.len() - 1;
        let mut i = self.home(key);
        let number = loop {
            match self.index[i] {
                Self::VACANT => break self.insert(i, key),
                n if self.entries[n as usize].key == key => break n,
                _ => i = (i + 1) & mask,
            }
        };
        let e = &mut self.entries[number as usize];
        e.open += 1;
        (number, e.open > 1)
    }

    /// Counts a frame of edge `number` open again (see `FrameStack::put_back`).
    fn reopen(&mut self, number: u32) {
        self.entries[number as usize].open += 1;
    }

    /// Closes a frame of edge `number`; returns the edge's totals.
    #[inline(always)]
    fn close(&mut self, number: u32) -> &mut EdgeSums {
        let e = &mut self.entries[number as usize];
        e.open -= 1;
        &mut e.totals
    }

    #[cold]
    fn insert(&mut self, at: usize, key: u64) -> u32 {
        let number = self.entries.len() as u32;
        self.entries.push(EdgeEntry {
            key,
            ..EdgeEntry::default()
        });
        self.index[at] = number;
        if self.entries.len() * 2 > self.index.len() {
            self.index = vec![Self::VACANT; self.index.len() * 2];
            self.shift -= 1;
            let mask = self.index.len() - 1;
            for (n, e) in self.entries.iter().enumerate() {
                let mut i = self.home(e.key);
                while self.index[i] != Self::VACANT {
                    i = (i + 1) & mask;
                }
                self.index[i] = n as u32;
            }
        }
        number
    }

    /// Empties the table, keeping its index as large as it grew.
    fn clear(&mut self) {
        self.entries.clear();
        self.index.fill(Self::VACANT);
    }

    /// Every edge with its totals, emptying the table.
    fn drain(&mut self) -> impl Iterator<Item = ((u32, u32), EdgeSums)> + '_ {
        self.entries
            .drain(..)
            .map(|e| (((e.key >> 32) as u32, e.key as u32), e.totals))
    }
}

/// Where the frames a snapshot (or a continued-stack record) opens were
/// entered, as far as the trace knows ([`FrameStack::reconcile`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Opened {
    /// Their enters were lost (lost or damaged chunks, a paused recording):
    /// they count as calls, cut short.
    Lost,
    /// In an earlier file of a rotating series, which counts their calls:
    /// here they are frames entered before the trace began (their time
    /// counts, their calls do not; "Rotating series" in `semantics.md`).
    BeforeTrace,
}

/// An open frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    func: u32,
    /// Number in `FrameStack::edges`, or `NO_PARENT` for a root frame.
    edge: u32,
    /// Node in `FrameStack::paths` (unused when paths are off).
    node: u32,
    recursive: bool,
    edge_recursive: bool,
    /// Entered inside the window: its call counts.
    counted: bool,
    /// A callee (or one of theirs) was entered inside the window or had
    /// self time in it (see [`FnAcc::through_callees`]).
    callee_did: bool,
    /// Clamped to the window.
    enter_ns: u64,
    enter_r: u64,
    /// The stack's scheduled clock ([`FrameStack::scheduled`]) at entry.
    enter_s: u64,
    child_active: u64,
}

/// Sees every frame and every running stretch of a stack as the replay
/// finds them; the exports that draw timelines use it. The statistics never
/// need it: [`NoObserver`] compiles to nothing.
pub(super) trait Observer {
    /// A frame closed.
    fn frame(&mut self, _frame: &ClosedFrame) {}
    /// The stack ran from `start_ns` to `end_ns` (stretches may touch or,
    /// on broken input, overlap).
    fn running(&mut self, _start_ns: u64, _end_ns: u64) {}
    /// The stack lived from `start_ns` (its first stretch) to `end_ns` (its
    /// last switch away, or the end of the trace if frames were open there).
    fn life(&mut self, _start_ns: u64, _end_ns: u64) {}
}

/// Observes nothing.
pub(super) struct NoObserver;

impl Observer for NoObserver {}

/// The open frames of one stack and the counters that decide recursion.
/// Edges are numbered per stack on first use, so entering a frame costs one
/// table lookup and leaving it none.
pub(super) struct FrameStack<'a, O: Observer = NoObserver> {
    t: &'a mut Tally,
    paths: Option<PathTree>,
    /// Where this stack's paths hang in the merged tree.
    paths_root: u32,
    pub(crate) observer: &'a mut O,
    /// Deepest depth reached.
    pub max_depth: u32,
    /// The stack's scheduled clock: how long, in total so far, it was
    /// switched out while woken (ready, waiting for a thread). It only
    /// moves between segments, so a frame's scheduled time is its value at
    /// exit minus its value at entry.
    pub scheduled: u64,
}

/// A stack's call paths while its replay is set aside (boxed: most
/// replays set aside have none).
#[derive(Debug)]
pub(crate) struct SetAsidePaths {
    tree: PathTree,
    root: u32,
}

/// What one replay worker accumulates, stack after stack: the statistics,
/// and the scratch a stack's replay needs. Every replay ends with all its
/// frames closed, which leaves the open-frame counters at zero for the next
/// stack; allocating them per stack cost more than replaying a short async
/// task. Edges keep their numbers across stacks and reach the statistics in
/// [`Tally::into_acc`].
#[derive(Debug)]
pub(super) struct Tally {
    acc: Acc,
    frames: Vec<Frame>,
    fn_open: Vec<u32>,
    edges: EdgeTable,
    /// What part of the trace counts.
    window: Window,
}

impl Tally {
    /// An empty tally for `n` functions, with call paths or not, counting
    /// what happens in `window`.
    pub(super) fn new(n: usize, paths: bool, window: Window) -> Tally {
        Tally {
            acc: Acc::new(n, paths),
            frames: Vec::new(),
            fn_open: vec![0; n],
            edges: EdgeTable::new(),
            window,
        }
    }

    /// Makes this tally as [`Tally::new`] would, keeping its buffers: a
    /// worker that analyzes trace after trace makes its tables once.
    /// Whatever an earlier trace left in it is cleared.
    pub(super) fn reset(&mut self, n: usize, paths: bool, window: Window) {
        self.acc.functions.clear();
        self.acc.functions.resize(n, FnAcc::default());
        self.acc.edges.list.clear();
        self.acc.paths = paths.then(PathTree::default);
        self.acc.left_open.0.clear();
        self.frames.clear();
        self.fn_open.clear();
        self.fn_open.resize(n, 0);
        self.edges.clear();
        self.window = window;
    }

    /// Makes room for `n` functions (the ids the metadata does not name
    /// follow the named ones; see `prepare.rs`).
    pub(super) fn grow(&mut self, n: usize) {
        if self.fn_open.len() < n {
            self.fn_open.resize(n, 0);
        }
        if self.acc.functions.len() < n {
            self.acc.functions.resize(n, FnAcc::default());
        }
    }

    /// Readies this tally for a worker's next trace when its functions
    /// are the worker's numbers ([`crate::analysis::decode::Numbering`]):
    /// every total and open-frame counter back to zero, the edges keeping
    /// their numbers (a worker's traces call mostly the same edges, which
    /// are then numbered once, not per trace). `used`: the functions the
    /// last trace counted, if [`Tally::take_edge_totals`] took its edges
    /// (only those then need zeroing); `None`: everything.
    pub(super) fn clear_numbered(&mut self, used: Option<&[u32]>) {
        match used {
            Some(used) => {
                for &n in used {
                    if let Some(a) = self.acc.functions.get_mut(n as usize) {
                        a.clear();
                    }
                }
                debug_assert!(self.fn_open.iter().all(|&o| o == 0), "frames left open");
                debug_assert!(self.edges.entries.iter().all(|e| e.open == 0));
            }
            None => {
                self.acc.functions.iter_mut().for_each(FnAcc::clear);
                self.fn_open.fill(0);
                for e in &mut self.edges.entries {
                    e.open = 0;
                    e.totals = EdgeSums::default();
                }
            }
        }
        self.acc.edges.list.clear();
        self.acc.paths = None;
        self.frames.clear();
    }

    /// Counts what happens in `window` from now on.
    pub(super) fn set_window(&mut self, window: Window) {
        self.window = window;
    }

    /// The totals of function `n` (dense index).
    pub(super) fn function(&self, n: u32) -> Option<&FnAcc> {
        self.acc.functions.get(n as usize)
    }

    /// Every edge's (caller, callee) and totals, by number, the totals
    /// left zero and the numbers kept (see [`Tally::clear_numbered`]).
    pub(super) fn take_edge_totals(&mut self) -> impl Iterator<Item = ((u32, u32), EdgeSums)> + '_ {
        self.edges.entries.iter_mut().map(|e| {
            let key = ((e.key >> 32) as u32, e.key as u32);
            (key, std::mem::take(&mut e.totals))
        })
    }

    /// How many edges are numbered.
    pub(super) fn edge_count(&self) -> usize {
        self.edges.entries.len()
    }

    /// Forgets the edges' numbers (their totals must have been taken).
    pub(super) fn forget_edges(&mut self) {
        self.edges.clear();
    }

    /// The frames left open on the stacks replayed since the last call
    /// (or the tally's start), for one trace's warnings when the tally
    /// goes on summing the next trace's stacks.
    pub(super) fn take_left_open(&mut self) -> LeftOpen {
        std::mem::take(&mut self.acc.left_open)
    }

    /// The statistics of every stack replayed.
    pub(super) fn into_acc(mut self) -> Acc {
        self.take_acc()
    }

    /// The statistics of every stack replayed, leaving the tally empty
    /// but for its buffers (see [`Tally::reset`]).
    pub(super) fn take_acc(&mut self) -> Acc {
        let mut acc = std::mem::replace(
            &mut self.acc,
            Acc {
                functions: Vec::new(),
                edges: EdgeList::default(),
                paths: None,
                left_open: LeftOpen::default(),
            },
        );
        // The table numbers each edge once: the list needs no index.
        acc.edges.merge(EdgeList {
            list: self.edges.drain().collect(),
        });
        self.edges.clear();
        acc
    }
}

impl<'a, O: Observer> FrameStack<'a, O> {
    /// Makes room in the tally for `n` functions ([`Tally::grow`]).
    pub(super) fn grow_functions(&mut self, n: usize) {
        self.t.grow(n);
    }

    /// An empty stack replayed with `tally`'s scratch, into its statistics
    /// (its call paths are added by [`FrameStack::merge_paths`]). `paths_root`: [`ROOT`] to
    /// merge call paths of all stacks, or a `STACK_LABEL` node to keep this
    /// stack's apart.
    pub(super) fn new(
        tally: &'a mut Tally,
        paths_root: u32,
        observer: &'a mut O,
    ) -> FrameStack<'a, O> {
        debug_assert!(tally.frames.is_empty(), "the last stack closed its frames");
        let paths = tally.acc.paths.is_some().then(PathTree::default);
        FrameStack {
            t: tally,
            paths,
            paths_root,
            observer,
            max_depth: 0,
            scheduled: 0,
        }
    }

    /// Adds this stack's call paths to the tally's tree, under its
    /// `paths_root`. Called once, when the stack's replay ends or is set aside.
    pub(crate) fn merge_paths(&mut self) {
        if let (Some(all), Some(mine)) = (&mut self.t.acc.paths, self.paths.take()) {
            let root = match self.paths_root {
                ROOT => ROOT,
                label => all.child(ROOT, label),
            };
            all.merge_from(&mine, root);
        }
    }

    /// Takes this stack's call paths, not merged yet, to set its replay
    /// aside: its open frames' nodes are in them, and its later frames
    /// hang below those ([`FrameStack::put_back_paths`] puts them back).
    pub(crate) fn take_paths(&mut self) -> Option<Box<SetAsidePaths>> {
        let tree = self.paths.take()?;
        Some(Box::new(SetAsidePaths {
            tree,
            root: self.paths_root,
        }))
    }

    /// Puts back what [`FrameStack::take_paths`] took from this stack.
    pub(crate) fn put_back_paths(&mut self, paths: Option<Box<SetAsidePaths>>) {
        if let Some(p) = paths {
            self.paths = Some(p.tree);
            self.paths_root = p.root;
        }
    }

    /// Frames open now.
    pub(super) fn depth(&self) -> usize {
        self.t.frames.len()
    }

    /// The tally's window.
    pub(super) fn window(&self) -> Window {
        self.t.window
    }

    /// Pushes a frame of `func` at wall time `ns`, running clock `r` (which
    /// the clock model has already confined to the window).
    pub(super) fn enter(&mut self, func: u32, ns: u64, r: u64) {
        let window = self.t.window;
        self.enter_in(func, ns, r, window);
    }

    /// [`FrameStack::enter`] for the per-event loops, which know the kind
    /// of window `span` (the tally's) at compile time.
    #[inline(always)]
    pub(super) fn enter_in<W: Span>(&mut self, func: u32, ns: u64, r: u64, span: W) {
        let recursive = self.t.fn_open[func as usize] > 0;
        self.t.fn_open[func as usize] += 1;
        let (edge, edge_recursive) = match self.t.frames.last() {
            None => (NO_PARENT, false),
            Some(parent) => self.t.edges.open(parent.func, func),
        };
        let node = match &mut self.paths {
            Some(t) => t.child(self.t.frames.last().map_or(ROOT, |p| p.node), func),
            None => 0,
        };
        self.t.frames.push(Frame {
            func,
            edge,
            node,
            counted: span.contains(ns),
            callee_did: false,
            enter_ns: span.clamp(ns),
            enter_r: r,
            enter_s: self.scheduled,
            child_active: 0,
            recursive,
            edge_recursive,
        });
        self.max_depth = self.max_depth.max(self.t.frames.len() as u32);
    }

    /// Pops the frame of `func` (repairing as `schemas/semantics.md` says),
    /// `span` being the tally's window (see [`FrameStack::enter_in`]).
    #[inline(always)]
    pub(super) fn exit_in<W: Span>(
        &mut self,
        func: u32,
        ns: u64,
        r: u64,
        span: W,
    ) -> Result<(), WarningKind> {
        match self.t.frames.last() {
            None => Err(WarningKind::ExitOnEmpty),
            Some(top) if top.func == func => {
                self.pop_in(ns, r, span);
                Ok(())
            }
            Some(_) => {
                let Some(pos) = self.t.frames.iter().rposition(|f| f.func == func) else {
                    return Err(WarningKind::ExitNotOpen);
                };
                while self.t.frames.len() > pos {
                    self.pop_in(ns, r, span);
                }
                Err(WarningKind::ExitMismatch)
            }
        }
    }

    /// Makes the open frames equal `truth` (outermost first), after events
    /// were lost or where a later file of a rotating series begins: frames
    /// that match from the bottom stay open, the rest are closed at `ns`,
    /// and the missing ones are opened at `ns`. Returns how many were
    /// opened. `opened`: what the trace knows of the missing frames'
    /// starts ([`Opened`]).
    pub(super) fn reconcile(&mut self, truth: &[u32], ns: u64, r: u64, opened: Opened) -> u64 {
        let common = self
            .t
            .frames
            .iter()
            .zip(truth)
            .take_while(|(f, &t)| f.func == t)
            .count();
        while self.t.frames.len() > common {
            self.pop(ns, r);
        }
        let counted = self.t.window.contains(ns) as u64;
        for &f in &truth[common..] {
            self.enter(f, ns, r);
            match opened {
                // Opened where the trace starts knowing of it, not where it began.
                Opened::Lost => self.t.acc.functions[f as usize].cut_short += counted,
                // As if entered before a window's start: an earlier file counts the call.
                Opened::BeforeTrace => {
                    if let Some(top) = self.t.frames.last_mut() {
                        top.counted = false;
                    }
                }
            }
        }
        (truth.len() - common) as u64
    }

    /// Removes the open frames without accounting them, undoing their
    /// counts (see
    /// [`StackReplay::suspend`](crate::analysis::replay::StackReplay::suspend)).
    pub(crate) fn take_all(&mut self) -> Vec<Frame> {
        // Copied out, not taken: the tally keeps its buffer for the next
        // stack (a streamed analysis sets stacks aside all the time), and
        // a stack with no open frame costs no allocation.
        let frames: Vec<Frame> = self.t.frames.drain(..).collect();
        for f in &frames {
            self.t.fn_open[f.func as usize] -= 1;
            if f.edge != NO_PARENT {
                self.t.edges.close(f.edge);
            }
        }
        frames
    }

    /// Puts back frames [`FrameStack::take_all`] removed from the same tally.
    pub(crate) fn put_back(&mut self, frames: Vec<Frame>) {
        for f in &frames {
            self.t.fn_open[f.func as usize] += 1;
            if f.edge != NO_PARENT {
                self.t.edges.reopen(f.edge);
            }
        }
        self.t.frames.extend(frames);
    }

    /// Counts the frames open now as left open (`at`, at `end_ns`),
    /// before [`FrameStack::close_all`] closes them.
    pub(super) fn count_left_open(&mut self, at: Leftover, end_ns: u64) {
        if let Leftover::AtStackEnd { stack, thread } = at {
            let open: Vec<u32> = self
                .t
                .frames
                .iter()
                .filter(|f| f.counted)
                .map(|f| f.func)
                .collect();
            if !open.is_empty() {
                self.t.acc.left_open.0.push(LeftOpenStack {
                    stack,
                    frames: open.len() as u64,
                    end_ns,
                    thread,
                    open,
                });
            }
        }
    }

    /// Closes every open frame at `ns`, counting them as open at the end
    /// of the trace, or as cut short (`cut`: the trace lost their end);
    /// like calls, only frames entered in the window count.
    pub(super) fn close_all(&mut self, ns: u64, r: u64, cut: bool) {
        while let Some(f) = self.t.frames.last() {
            let stats = &mut self.t.acc.functions[f.func as usize];
            if cut {
                stats.cut_short += f.counted as u64;
            } else {
                stats.open_at_end += f.counted as u64;
            }
            self.pop(ns, r);
        }
    }

    /// Pops the top frame at wall time `ns` (clamped to the window here),
    /// running clock `r`.
    fn pop(&mut self, ns: u64, r: u64) {
        let window = self.t.window;
        self.pop_in(ns, r, window);
    }

    /// [`FrameStack::pop`] with the kind of window known (see [`FrameStack::enter_in`]).
    #[inline(always)]
    fn pop_in<W: Span>(&mut self, ns: u64, r: u64, span: W) {
        let Some(f) = self.t.frames.pop() else { return };
        let ns = span.clamp(ns);
        let active = r.saturating_sub(f.enter_r);
        let paused = ns.saturating_sub(f.enter_ns).saturating_sub(active);
        let self_ns = active.saturating_sub(f.child_active);
        self.t.fn_open[f.func as usize] -= 1;
        // Not a constant for the whole trace: a later file of a rotating
        // series opens frames before its start (see `Opened::BeforeTrace`).
        let counted = f.counted as u64;
        // A frame wholly outside the time window is not shown.
        if f.counted || ns > f.enter_ns {
            self.observer.frame(&ClosedFrame {
                func: f.func,
                parent: self.t.frames.last().map(|p| p.func),
                depth: self.t.frames.len() as u32,
                enter_ns: f.enter_ns,
                exit_ns: ns.max(f.enter_ns),
                active_ns: active,
                self_ns,
                paused_ns: paused,
                recursive: f.recursive,
                counted: f.counted,
            });
        }
        if let Some(t) = &mut self.paths {
            t.record(f.node, counted, self_ns);
        }
        // Recursion is data: masks instead of branches, which mispredict
        // whenever recursion comes and goes.
        let primitive = !f.recursive as u64;
        let keep = primitive.wrapping_neg();
        let a = &mut self.t.acc.functions[f.func as usize];
        a.ncalls += counted;
        a.tottime_ns = a.tottime_ns.saturating_add(self_ns);
        a.tottime_sq = a
            .tottime_sq
            .saturating_add(u128::from(self_ns) * u128::from(self_ns));
        a.tottime_hist.add_frames(self_ns, counted);
        a.primitive_calls += primitive & counted;
        a.cumtime_ns = a.cumtime_ns.saturating_add(active & keep);
        a.paused_ns = a.paused_ns.saturating_add(paused & keep);
        let scheduled = self.scheduled.saturating_sub(f.enter_s).min(paused);
        a.scheduled_ns = a.scheduled_ns.saturating_add(scheduled & keep);
        if f.edge != NO_PARENT {
            let primitive = !f.edge_recursive as u64;
            let e = self.t.edges.close(f.edge);
            e.ncalls += counted;
            e.tottime_ns = e.tottime_ns.saturating_add(self_ns);
            e.primitive_calls += primitive & counted;
            e.cumtime_ns = e
                .cumtime_ns
                .saturating_add(active & primitive.wrapping_neg());
            e.callee_cumtime_ns = e.callee_cumtime_ns.saturating_add(active & keep);
        }
        // Without a window every frame counts: nothing to mark.
        let did = !W::WHOLE && (f.counted || self_ns > 0 || f.callee_did);
        if !W::WHOLE && f.callee_did && !f.counted && self_ns == 0 {
            a.through_callees += 1;
        }
        if let Some(parent) = self.t.frames.last_mut() {
            parent.child_active = parent.child_active.saturating_add(active);
            parent.callee_did |= did;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_keep_their_numbers_and_open_counts_across_growth() {
        let mut table = EdgeTable::new();
        let edges: Vec<(u32, u32)> = (0..5000u32)
            .map(|i| (i % 97, i.wrapping_mul(2_654_435_761) % 1009))
            .collect();
        let mut first_seen: Vec<(u32, u32)> = Vec::new();
        let mut opened = Vec::new();
        for &(a, b) in &edges {
            let (n, recursive) = table.open(a, b);
            opened.push(n);
            if n as usize == first_seen.len() {
                assert!(!recursive);
                first_seen.push((a, b));
            } else {
                assert_eq!(first_seen[n as usize], (a, b));
                assert!(recursive, "another frame of the edge is still open");
            }
        }
        assert!(first_seen.len() > 1000, "the table grew several times");
        for &n in &opened {
            table.close(n).ncalls += 1;
        }
        // Nothing is open now: the next frame of any edge is not recursive.
        for (n, &(a, b)) in first_seen.iter().enumerate() {
            assert_eq!(table.open(a, b), (n as u32, false));
        }
        // Extreme keys are edges too.
        let (big, next) = (u32::MAX - 1, first_seen.len() as u32);
        assert_eq!(table.open(big, big), (next, false));
        assert_eq!(table.open(big, big), (next, true));
        assert_eq!(table.open(0, 0).0, 0, "key 0 is an edge, not a hole");
        let totals: Vec<_> = table.drain().collect();
        assert_eq!(totals.len(), first_seen.len() + 1);
        let calls: u64 = totals.iter().map(|(_, t)| t.ncalls).sum();
        assert_eq!(calls, edges.len() as u64);
        assert_eq!(totals[0].0, first_seen[0]);
        assert_eq!(totals[next as usize].0, (big, big));
    }
}
