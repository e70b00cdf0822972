//! The lanes of the streamed analysis: stacks by id in a fixed number of
//! lanes, each lane with one tally, replayed in parallel. A lane takes what
//! a step's passes routed to it (its [`Inbox`]), keeps each live stack's
//! suspended replay and its segments not replayed yet ([`LiveStack`]),
//! replays what the step made safe, and judges each stack's `end` as
//! `ends.rs` does.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::analysis::cut::{NotStreamable, ThreadPass, ThreadStream};
use crate::analysis::decode::Decoded;
use crate::analysis::ends::StackEnd;
use crate::analysis::ends::{fits_end, ignore_end, replaces};
use crate::analysis::frames::{NoObserver, Tally};
use crate::analysis::options::{named, own_stack_selected};
use crate::analysis::paths::{ROOT, STACK_LABEL};
use crate::analysis::replay::{
    replay_one_segment, stack_kind, LastEnd, ReplayContext, StackReplay, StackTotals, Suspended,
};
use crate::analysis::segment::{Segment, StackKey};
use mtanalyze_model::report::{Clock, StackName, StackRows, StackStats};
use mtanalyze_model::warnings::Warnings;

use super::{key, row_name, SegmentKey};

/// The key of thread `index`'s own stack.
fn own_key(ctx: &ReplayContext<'_, '_>, index: u32) -> StackKey {
    let tid = ctx
        .decoded
        .threads
        .get(index as usize)
        .map_or(0, |t| t.tid.0);
    StackKey::Own(tid)
}

/// Hands what every thread's last step found to the lanes.
pub(super) fn route(threads: &mut [ThreadStream], decoded: &Decoded<'_>, lanes: &mut [Lane]) {
    for (index, t) in threads.iter_mut().enumerate() {
        route_parts(index, decoded, &mut t.pass, lanes);
    }
}

/// Moves a pass's segments, wakes and ends to the lanes of their stacks.
pub(super) fn route_parts(
    index: usize,
    decoded: &Decoded<'_>,
    pass: &mut ThreadPass,
    lanes: &mut [Lane],
) {
    let tid = decoded.threads.get(index).map_or(0, |t| t.tid.0);
    let n = lanes.len() as u64;
    for s in std::mem::take(&mut pass.segments) {
        // Own stacks' segments (only under `gil`; else the segment pass
        // replays them): a lane by thread, all of a thread's to one.
        if s.is_own() {
            lanes[(s.thread as u64 % n) as usize].inbox.own.push(s);
        } else {
            lanes[(s.stack % n) as usize].inbox.segments.push(s);
        }
    }
    for (id, tick) in std::mem::take(&mut pass.wakes) {
        lanes[(id % n) as usize].inbox.wakes.push((id, tick));
    }
    for (id, tick) in std::mem::take(&mut pass.ends) {
        let end = End { tick, tid };
        lanes[(id % n) as usize].inbox.ends.push((id, end));
    }
}

/// Sorts a step's segments by stack, each stack's in time order. They
/// come thread after thread, each thread's in time order: a stable sort
/// by stack id ([`by_id`]) leaves every stack's as a run per thread,
/// which a short sort orders (most tasks have one to three).
pub(super) fn by_stack(segments: &mut [Segment], order: &mut Vec<u32>) {
    if !by_id(segments, order, |s| s.stack) {
        segments.sort_unstable_by_key(|s| (s.stack, key(s)));
        return;
    }
    let mut rest = &mut segments[..];
    while let Some(first) = rest.first() {
        let id = first.stack;
        let n = rest.iter().take_while(|s| s.stack == id).count();
        let (group, tail) = rest.split_at_mut(n);
        if n > 1 && !group.is_sorted_by_key(key) {
            group.sort_unstable_by_key(key);
        }
        rest = tail;
    }
}

/// Sorts `items` by `id`, stably, with a counting sort: the ids of a
/// step's stacks are dense. The sort finds each item's place (`order`:
/// room for it, four bytes an item) and moves the items there in place,
/// so a step's segments are not held twice. Returns false, leaving
/// `items` as they were, if the ids are too sparse for one.
pub(super) fn by_id<T: Clone>(
    items: &mut [T],
    order: &mut Vec<u32>,
    id: impl Fn(&T) -> u64,
) -> bool {
    let (Some(lo), Some(hi)) = (items.iter().map(&id).min(), items.iter().map(&id).max()) else {
        return true;
    };
    let span = hi - lo;
    // The places are `u32`s (as are the counts).
    if span > 4 * items.len() as u64 + 1024 || u32::try_from(items.len()).is_err() {
        return false;
    }
    let mut starts = vec![0u32; span as usize + 2];
    for s in items.iter() {
        starts[(id(s) - lo) as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    // `order[k]`: the item that goes to place `k`.
    order.clear();
    order.resize(items.len(), 0);
    for (i, s) in items.iter().enumerate() {
        let slot = &mut starts[(id(s) - lo) as usize];
        order[*slot as usize] = i as u32;
        *slot += 1;
    }
    apply_order(items, order);
    true
}

/// Moves `items[order[k]]` to place `k`, for every `k`, in place (`order`
/// is a permutation of the places; it is left as the identity): each of
/// its cycles is followed once, the item at its start held aside and every
/// other moved once (`T`'s clone is a copy here: segments and ends).
fn apply_order<T: Clone>(items: &mut [T], order: &mut [u32]) {
    for start in 0..order.len() {
        let mut from = order[start] as usize;
        if from == start {
            continue;
        }
        let first = items[start].clone();
        let mut place = start;
        loop {
            order[place] = place as u32;
            if from == start {
                items[place] = first;
                break;
            }
            items[place] = items[from].clone();
            place = from;
            from = order[place] as usize;
        }
    }
}

/// An `end` event: when, and which thread recorded it (threads ascend
/// by id, so the id orders them as `ends.rs` meets them).
#[derive(Clone, Copy, Debug)]
pub(super) struct End {
    tick: u64,
    tid: u64,
}

/// What a lane gets from one step's passes.
#[derive(Default)]
pub(super) struct Inbox {
    segments: Vec<Segment>,
    /// Own stacks' segments, thread after thread, each's in time order.
    own: Vec<Segment>,
    wakes: Vec<(u64, u64)>,
    ends: Vec<(u64, End)>,
}

/// A logical stack between steps.
#[derive(Default)]
pub(super) struct LiveStack {
    /// Its replay so far (`None`: no segment replayed yet).
    replay: Option<Suspended>,
    /// Closed segments not replayed yet, in no order.
    pending: Vec<Segment>,
    /// Its wakes (ns) the replay has not used (sorted before each use).
    wakes: Vec<u64>,
    /// Its latest end so far, not judged yet (ns, and the end).
    end: Option<(u64, End)>,
    /// The latest start and end of a replayed segment, ns.
    replayed_start_ns: Option<u64>,
    replayed_end_ns: u64,
    /// It is in its lane's `waiting` list.
    waiting: bool,
    /// Where its last segment left the `gil` clock's runs.
    gil_hint: usize,
    /// How its last replayed segment left it (at a `lost` mark, ...).
    last_end: LastEnd,
    /// Whether the options select it.
    choice: Choice,
    /// Left out, it had segments (which were not replayed).
    skipped: bool,
}

impl LiveStack {
    pub(super) fn ran(&self) -> bool {
        self.replay.is_some() || self.skipped || !self.pending.is_empty()
    }
}

/// Keeps the times of a stack's segment `s`, replayed or (left out)
/// skipped, that its `end` is judged against: the latest start
/// (`start_ns`) and switch away (`end_ns`).
#[inline(always)]
fn keep_times(
    start_ns: &mut Option<u64>,
    end_ns: &mut u64,
    s: &Segment,
    scale: mtrace_format::TickScale,
) {
    let start = scale.ns(s.start_tick);
    *start_ns = Some(start_ns.map_or(start, |l| l.max(start)));
    if let Some(away) = s.switched_away() {
        *end_ns = (*end_ns).max(scale.ns(away));
    }
}

/// Whether the options select a stack (`--stack`, `--thread`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Choice {
    /// No thread it ran on so far is selected: it is held (its segments
    /// not replayed) until one is, or it finishes left out.
    #[default]
    Undecided,
    Selected,
    LeftOut,
}

/// The stacks the options select: by key or name (`--stack`) and by a
/// thread that ran them (`--thread`); all where both are empty.
#[derive(Debug, Default)]
pub(super) struct Selection {
    pub(super) stacks: Vec<String>,
    pub(super) threads: Vec<u64>,
}

/// The logical stacks whose ids fall in one lane: each replayed on the
/// lane's tally (a suspended replay's frames hold its tally's edge
/// numbers, so a stack stays in its lane).
pub(super) struct Lane {
    stacks: FxHashMap<u64, LiveStack>,
    /// Own stacks (only under `gil`), by their thread's index.
    own: FxHashMap<u32, LiveStack>,
    /// Stacks with segments not replayed or an end not judged.
    waiting: Vec<u64>,
    inbox: Inbox,
    /// Room for sorting the inbox ([`by_id`]'s order).
    order: Vec<u32>,
    pub(super) work: LaneWork,
}

/// What a lane's replays write to.
pub(super) struct LaneWork {
    pub(super) tally: Tally,
    /// Stacks finished by an end that counts: any later sign of them
    /// stops the stream.
    finished: IdSet,
    /// What becomes of the rows (which [`row_name`] names).
    stack_rows: StackRows,
    /// The rows of the stacks finished in this step (the caller takes
    /// them into one vector after each step).
    pub(super) rows: Vec<StackStats>,
    pub(super) warnings: Warnings,
    /// Stacks that ran.
    pub(super) seen: u64,
    /// Open frames of the stacks set aside since the caller last took
    /// this count ([`Lane::take_frames_set_aside`]).
    frames_set_aside: u64,
    /// With call paths kept per stack: the labels of this lane's stacks.
    pub(super) labels: Option<PathLabels>,
    /// The stacks the options select.
    selection: Selection,
}

/// The roots of per-stack call paths a lane gave its stacks, numbered
/// `first`, `first + step`, `first + 2 step`... (the stream gives each
/// lane numbers of its own, so no lane waits on another), and the stack
/// of each, which the report labels it by.
#[derive(Debug)]
pub(super) struct PathLabels {
    next: u32,
    step: u32,
    /// The stack of each number given.
    pub(super) given: Vec<(u32, StackKey)>,
}

impl PathLabels {
    /// Numbers from `first`, `step` apart.
    pub(super) fn new(first: u32, step: u32) -> PathLabels {
        PathLabels {
            next: first,
            step,
            given: Vec::new(),
        }
    }

    /// The root of stack `key`'s paths (its first replay asks, once).
    fn root(&mut self, key: StackKey) -> u32 {
        let n = self.next;
        self.next += self.step;
        self.given.push((n, key));
        STACK_LABEL | n
    }
}

/// What became of a stack in a step.
pub(super) enum Settled {
    /// Finished by its end: its row is made.
    Finished,
    /// It has segments or an end for a later step.
    Waiting,
    /// Suspended until it runs again or the trace ends.
    Idle,
}

impl Lane {
    /// A lane counting into `tally`, keeping its problems in `warnings`
    /// (with their places if the analysis asked: `Decoded::warnings`), of
    /// the stacks `selection` selects.
    pub(super) fn new(
        tally: Tally,
        stack_rows: StackRows,
        warnings: Warnings,
        labels: Option<PathLabels>,
        selection: Selection,
    ) -> Lane {
        Lane {
            stacks: FxHashMap::default(),
            own: FxHashMap::default(),
            waiting: Vec::new(),
            inbox: Inbox::default(),
            order: Vec::new(),
            work: LaneWork {
                tally,
                finished: IdSet::default(),
                stack_rows,
                rows: Vec::new(),
                warnings,
                seen: 0,
                frames_set_aside: 0,
                labels,
                selection,
            },
        }
    }

    /// Stack `id`, made if new; an error if an end that counted finished it.
    pub(super) fn live(
        &mut self,
        id: u64,
        what: &'static str,
    ) -> Result<&mut LiveStack, NotStreamable> {
        match self.stacks.entry(id) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) if self.work.finished.contains(id) => {
                let _ = e;
                Err(NotStreamable(what))
            }
            Entry::Vacant(e) => Ok(e.insert(LiveStack::default())),
        }
    }

    /// The open frames of the stacks this lane set aside since the last
    /// call: what taking them up again will cost.
    pub(super) fn take_frames_set_aside(&mut self) -> u64 {
        std::mem::take(&mut self.work.frames_set_aside)
    }

    /// Takes in the inbox, then replays and judges what `horizon` (ticks;
    /// `None`: the end of the trace) allows, `opens` being the stacks
    /// threads are on. The inbox's segments and ends are sorted by stack:
    /// a stack that begins and ends within the step (most tasks) is
    /// replayed from them and never enters the map of live stacks.
    pub(super) fn step(
        &mut self,
        ctx: &ReplayContext<'_, '_>,
        horizon: Option<u64>,
        opens: &FxHashMap<u64, SegmentKey>,
    ) -> Result<(), NotStreamable> {
        let scale = ctx.decoded.scale;
        let mut inbox = std::mem::take(&mut self.inbox);
        for &(id, tick) in &inbox.wakes {
            if let Ok(live) = self.live(id, "") {
                live.wakes.push(scale.ns(tick));
            }
        }
        by_stack(&mut inbox.segments, &mut self.order);
        // Stable: each stack's ends stay in thread order.
        if !by_id(&mut inbox.ends, &mut self.order, |e| e.0) {
            inbox.ends.sort_by_key(|&(id, _)| id);
        }
        let (mut segs, mut ends) = (&inbox.segments[..], &inbox.ends[..]);
        loop {
            let id = match (segs.first(), ends.first()) {
                (Some(s), Some(e)) => s.stack.min(e.0),
                (Some(s), None) => s.stack,
                (None, Some(e)) => e.0,
                (None, None) => break,
            };
            let n = segs.iter().take_while(|s| s.stack == id).count();
            let m = ends.iter().take_while(|e| e.0 == id).count();
            let (group, stack_ends) = (&segs[..n], &ends[..m]);
            (segs, ends) = (&segs[n..], &ends[m..]);
            let mut live = match self.stacks.remove(&id) {
                Some(live) => live,
                None if self.work.finished.contains(id) => {
                    return Err(NotStreamable(
                        "a stack ran or ended after an end that counted",
                    ));
                }
                None => LiveStack::default(),
            };
            self.work.seen += (!live.ran() && !group.is_empty()) as u64;
            for &(_, end) in stack_ends {
                self.work.take_end(&mut live, end, scale);
            }
            let was_waiting = std::mem::take(&mut live.waiting);
            let open = opens.get(&id).copied();
            let key = StackKey::Logical(id);
            match self.work.settle(ctx, key, &mut live, group, horizon, open) {
                Settled::Finished => continue,
                Settled::Waiting => {
                    live.waiting = true;
                    if !was_waiting {
                        self.waiting.push(id);
                    }
                }
                Settled::Idle => {}
            }
            if live.replay.is_some() || live.skipped || live.waiting || !live.wakes.is_empty() {
                self.stacks.insert(id, live);
            }
        }
        self.step_own(ctx, &inbox.own, horizon);
        inbox.segments.clear();
        inbox.own.clear();
        inbox.ends.clear();
        inbox.wakes.clear();
        self.inbox = inbox;
        // Stacks left waiting by an earlier step that got nothing new.
        let waiting = std::mem::take(&mut self.waiting);
        for id in waiting {
            let Some(live) = self.stacks.get_mut(&id) else {
                continue;
            };
            if !live.waiting {
                continue;
            }
            let open = opens.get(&id).copied();
            let key = StackKey::Logical(id);
            match self.work.settle(ctx, key, live, &[], horizon, open) {
                Settled::Finished => {
                    self.stacks.remove(&id);
                }
                Settled::Waiting => self.waiting.push(id),
                Settled::Idle => live.waiting = false,
            }
        }
        Ok(())
    }

    /// Replays what `horizon` allows of the own stacks: this step's
    /// segments (`own`) and those an earlier step left.
    pub(super) fn step_own(
        &mut self,
        ctx: &ReplayContext<'_, '_>,
        own: &[Segment],
        horizon: Option<u64>,
    ) {
        let mut rest = own;
        while let Some(first) = rest.first() {
            let thread = first.thread;
            let n = rest.iter().take_while(|s| s.thread == thread).count();
            let (group, tail) = rest.split_at(n);
            rest = tail;
            let live = self.own.entry(thread).or_default();
            self.work.seen += (!live.ran()) as u64;
            // No end, and no other thread runs it: only the horizon waits.
            let key = own_key(ctx, thread);
            self.work.settle(ctx, key, live, group, horizon, None);
        }
        for (&thread, live) in &mut self.own {
            if !live.pending.is_empty() {
                let key = own_key(ctx, thread);
                self.work.settle(ctx, key, live, &[], horizon, None);
            }
        }
    }

    /// The earliest start (tick) of a segment the lane has not replayed.
    pub(super) fn earliest_segment(&self) -> Option<u64> {
        let waiting = self.waiting.iter().filter_map(|id| self.stacks.get(id));
        let pending = waiting
            .chain(self.own.values())
            .filter_map(|live| live.pending.first());
        let inbox = self.inbox.segments.iter().chain(&self.inbox.own);
        pending.chain(inbox).map(|s| s.start_tick).min()
    }

    /// The step after the last event: everything is judged and replayed,
    /// and every stack still alive finished at the end of the trace
    /// (`end_ns`).
    pub(super) fn last_step(
        &mut self,
        ctx: &ReplayContext<'_, '_>,
        end_ns: u64,
    ) -> Result<(), NotStreamable> {
        self.step(ctx, None, &FxHashMap::default())?;
        let logical = std::mem::take(&mut self.stacks)
            .into_iter()
            .map(|(id, live)| (StackKey::Logical(id), live));
        let own = std::mem::take(&mut self.own)
            .into_iter()
            .map(|(index, live)| (own_key(ctx, index), live));
        for (key, mut live) in logical.chain(own) {
            if live.replay.is_some() {
                let logical = match key {
                    StackKey::Logical(id) => Some(id),
                    StackKey::Own(_) => None,
                };
                let finish = Some(Finish {
                    logical,
                    ended: None,
                });
                if let Some(totals) = self.work.replay(ctx, key, &mut live, &[], finish, end_ns) {
                    let kind = stack_kind(ctx.decoded, key);
                    let row = totals.into_row(key, self.work.name(ctx, key), kind);
                    self.work.rows.push(row);
                }
            }
        }
        Ok(())
    }
}

impl LaneWork {
    /// The name stack `key`'s row is made with ([`row_name`]).
    pub(super) fn name(&self, ctx: &ReplayContext<'_, '_>, key: StackKey) -> StackName {
        row_name(self.stack_rows, ctx.decoded, key)
    }

    /// Takes `end` as `live`'s latest end if it is (the latest is kept;
    /// of equal ones, the last in thread order, as `ends.rs` meets them);
    /// the other is ignored.
    pub(super) fn take_end(
        &mut self,
        live: &mut LiveStack,
        end: End,
        scale: mtrace_format::TickScale,
    ) {
        let ns = scale.ns(end.tick);
        match live.end {
            Some((t, e)) if !replaces(ns, end.tid, t, e.tid) => {
                ignore_end(&mut self.warnings, ns, end.tid);
            }
            Some((t, e)) => {
                ignore_end(&mut self.warnings, t, e.tid);
                live.end = Some((ns, end));
            }
            None => live.end = Some((ns, end)),
        }
    }

    /// Replays what `horizon` allows of `stack` (its pending segments
    /// and `group`, this step's, in time order) and judges its end (see
    /// [`Lane::step`]; `open`: the segment of it a thread is in).
    pub(super) fn settle(
        &mut self,
        ctx: &ReplayContext<'_, '_>,
        stack: StackKey,
        live: &mut LiveStack,
        group: &[Segment],
        horizon: Option<u64>,
        open: Option<SegmentKey>,
    ) -> Settled {
        let scale = ctx.decoded.scale;
        let h_ns = horizon.map(|h| scale.ns(h));
        // Segments carried from earlier steps (rare) join this step's.
        let carried = !live.pending.is_empty();
        let merged = if carried {
            let mut all = std::mem::take(&mut live.pending);
            all.extend_from_slice(group);
            all.sort_unstable_by_key(key);
            all
        } else {
            Vec::new()
        };
        let segments = if carried { &merged[..] } else { group };
        self.choose(ctx, stack, live, segments);
        // Only logical stacks have ends.
        let ended = live.end.filter(|(t, _)| h_ns.is_none_or(|h| *t < h));
        if let (Some((t, end)), StackKey::Logical(id)) = (ended, stack) {
            if counts(live, segments, t, open.is_some(), scale) {
                // It finished, and no thread that ran it was selected.
                if live.choice == Choice::Undecided {
                    live.choice = Choice::LeftOut;
                }
                let finish = Some(Finish {
                    logical: Some(id),
                    ended: Some(StackEnd {
                        ns: t,
                        thread: end.tid,
                    }),
                });
                if let Some(totals) = self.replay(ctx, stack, live, segments, finish, u64::MAX) {
                    let kind = stack_kind(ctx.decoded, stack);
                    let row = totals.into_row(stack, self.name(ctx, stack), kind);
                    self.rows.push(row);
                }
                self.finished.insert(id);
                return Settled::Finished;
            }
            ignore_end(&mut self.warnings, t, end.tid);
            live.end = None;
        }
        // Before the horizon, a segment's events are all read (it is
        // closed); under `gil`, its switch away must be too: how long a
        // thread ran after an event depends on the next event of any
        // thread, and the runs are merged up to the horizon.
        let gil = ctx.clock == Clock::Gil;
        let before = |s: &Segment, h: u64| match s.switched_away() {
            Some(away) if gil => away < h,
            Some(_) => s.start_tick < h,
            None => false,
        };
        let ready = match live.choice {
            // Held until a selected thread runs it, or it finishes.
            Choice::Undecided => 0,
            Choice::Selected | Choice::LeftOut => segments
                .iter()
                .take_while(|s| {
                    horizon.is_none_or(|h| before(s, h)) && open.is_none_or(|o| key(s) < o)
                })
                .count(),
        };
        if ready > 0 {
            self.replay(ctx, stack, live, &segments[..ready], None, u64::MAX);
        }
        live.pending = segments[ready..].to_vec();
        if !live.pending.is_empty() || live.end.is_some() {
            Settled::Waiting
        } else {
            Settled::Idle
        }
    }

    /// Decides whether the options select `stack` (`live`), given its
    /// `segments` not replayed yet, as the batch does (`options::wanted`):
    /// by key or name at once, by thread once a selected thread ran it.
    #[inline]
    fn choose(
        &self,
        ctx: &ReplayContext<'_, '_>,
        stack: StackKey,
        live: &mut LiveStack,
        segments: &[Segment],
    ) {
        if live.choice != Choice::Undecided {
            return;
        }
        let sel = &self.selection;
        if sel.stacks.is_empty() && sel.threads.is_empty() {
            live.choice = Choice::Selected;
            return;
        }
        let threads = &ctx.decoded.threads;
        let ran_on_a_selected_thread = || {
            sel.threads.is_empty()
                || segments
                    .iter()
                    .any(|s| sel.threads.contains(&s.tid(threads)))
        };
        live.choice = match stack {
            StackKey::Own(tid) if own_stack_selected(tid, &sel.threads, &sel.stacks) => {
                Choice::Selected
            }
            StackKey::Own(_) => Choice::LeftOut,
            _ if !named(&stack, &ctx.decoded.stack_names, &sel.stacks) => Choice::LeftOut,
            StackKey::Logical(_) if ran_on_a_selected_thread() => Choice::Selected,
            StackKey::Logical(_) => Choice::Undecided,
        };
    }

    /// Replays `segments` (in time order) onto `live`'s replay (of
    /// `stack`); then finishes it as `finish` says (`end_ns`: the end of
    /// the trace) or suspends it. A stack the options leave out is not
    /// replayed (and has no statistics): only the times its `end` is
    /// judged against are kept.
    pub(super) fn replay(
        &mut self,
        ctx: &ReplayContext<'_, '_>,
        stack: StackKey,
        live: &mut LiveStack,
        segments: &[Segment],
        finish: Option<Finish>,
        end_ns: u64,
    ) -> Option<StackTotals> {
        let scale = ctx.decoded.scale;
        if live.choice == Choice::LeftOut {
            // Not replayed: what its `end` is judged against is kept, and
            // its wakes are of no use.
            for s in segments {
                keep_times(
                    &mut live.replayed_start_ns,
                    &mut live.replayed_end_ns,
                    s,
                    scale,
                );
                live.skipped = true;
            }
            live.wakes.clear();
            return None;
        }
        let mut observer = NoObserver;
        let mut state = live.replay.take();
        if let Some(s) = &mut state {
            let used = s.wakes_used().min(live.wakes.len());
            live.wakes.drain(..used);
            s.forget_used_wakes();
        }
        live.wakes.sort_unstable();
        let mut stack = match state {
            Some(s) => StackReplay::reopen(s, &mut self.tally, &mut observer, &live.wakes),
            None => {
                let root = match &mut self.labels {
                    Some(labels) => labels.root(stack),
                    None => ROOT,
                };
                let mut r = StackReplay::new(&mut self.tally, root, &mut observer);
                r.wakes(&live.wakes);
                r
            }
        };
        if ctx.decoded.file.is_compact() {
            let times = (&mut live.replayed_start_ns, &mut live.replayed_end_ns);
            live.gil_hint = replay_prefetching(
                ctx,
                &mut stack,
                times,
                live.gil_hint,
                segments,
                &mut self.warnings,
            );
        } else {
            for s in segments {
                keep_times(
                    &mut live.replayed_start_ns,
                    &mut live.replayed_end_ns,
                    s,
                    scale,
                );
                live.gil_hint =
                    replay_one_segment(ctx, &mut stack, s, live.gil_hint, &mut self.warnings);
            }
        }
        if let Some(last) = segments.last() {
            live.last_end = LastEnd::of(ctx, last);
        }
        match finish {
            Some(Finish { logical, ended }) => {
                Some(stack.finish_stack(ctx, end_ns, live.last_end, logical, ended))
            }
            None => {
                let suspended = stack.suspend(None);
                self.frames_set_aside += suspended.frames() as u64;
                live.replay = Some(suspended);
                None
            }
        }
    }
}

/// [`LaneWork::replay`]'s loop over `segments` for a compact trace: a
/// compact stretch's first load (at the `switch` its expansion resumes
/// from) is a miss, so the next one's first bytes are loaded while this one
/// replays. A function of its own: 16-byte stretches gain nothing by it,
/// and sharing the loop cost a trace of many short tasks instructions for
/// every segment.
///
/// `times` are the stack's replayed start and end ([`keep_times`]); returns
/// the gil hint after the last segment.
#[inline(never)]
fn replay_prefetching(
    ctx: &ReplayContext<'_, '_>,
    stack: &mut StackReplay<'_>,
    times: (&mut Option<u64>, &mut u64),
    mut gil_hint: usize,
    segments: &[Segment],
    warnings: &mut Warnings,
) -> usize {
    let (start_ns, end_ns) = times;
    for (k, s) in segments.iter().enumerate() {
        if let Some(next) = segments.get(k + 1) {
            next.prefetch_first_read(ctx.decoded);
        }
        keep_times(start_ns, end_ns, s, ctx.decoded.scale);
        gil_hint = replay_one_segment(ctx, stack, s, gil_hint, warnings);
    }
    gil_hint
}

/// How [`LaneWork::replay`] finishes a stack.
pub(super) struct Finish {
    /// Its id, if it is a logical stack.
    logical: Option<u64>,
    /// Its `end` that counts, if it has one.
    ended: Option<StackEnd>,
}

/// Whether `live`'s latest end, at `t` ns, counts (see `ends.rs`), given
/// its segments not replayed yet (`pending`) and all that can still run
/// it: `open`, a thread on it now (every later segment starts after `t`).
pub(super) fn counts(
    live: &LiveStack,
    pending: &[Segment],
    t: u64,
    open: bool,
    scale: mtrace_format::TickScale,
) -> bool {
    (live.replay.is_some() || live.skipped || !pending.is_empty())
        && !open
        && live.replayed_start_ns.is_none_or(|s| s < t)
        && live.replayed_end_ns <= t
        && pending.iter().all(|s| fits_end(s, t, scale))
}

/// A set of stack ids, as a bitmap in pages of 512 ids: ids are dense
/// (the recorder numbers stacks in order), so half a million finished
/// tasks take 64 KB, and a lookup is one hash and one bit.
#[derive(Debug, Default)]
pub(super) struct IdSet {
    pages: FxHashMap<u64, [u64; 8]>,
}

impl IdSet {
    pub(super) fn contains(&self, id: u64) -> bool {
        self.pages
            .get(&(id >> 9))
            .is_some_and(|p| p[(id >> 6 & 7) as usize] & 1 << (id & 63) != 0)
    }

    pub(super) fn insert(&mut self, id: u64) {
        let page = self.pages.entry(id >> 9).or_default();
        page[(id >> 6 & 7) as usize] |= 1 << (id & 63);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_id_sorts_stably_in_place() {
        let mut order = Vec::new();
        // (id, the item's place before the sort), ids from a small generator.
        let mut x = 12345u64;
        for n in [0usize, 1, 2, 3, 10, 257, 2000] {
            for ids in [3u64, 50, 1000] {
                let mut items: Vec<(u64, usize)> = (0..n)
                    .map(|i| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        ((x >> 33) % ids + 1000, i)
                    })
                    .collect();
                let mut want = items.clone();
                want.sort_by_key(|&(id, _)| id);
                let sorted = by_id(&mut items, &mut order, |&(id, _)| id);
                assert!(sorted, "{n} items of {ids} ids are dense enough");
                assert_eq!(items, want, "{n} items of {ids} ids");
                assert!(order.iter().enumerate().all(|(k, &o)| o as usize == k));
            }
        }
        // Too sparse: left as they were.
        let mut sparse = vec![(1u64 << 40, 0), (1, 1), (7, 2)];
        let before = sparse.clone();
        assert!(!by_id(&mut sparse, &mut order, |&(id, _)| id));
        assert_eq!(sparse, before);
    }

    #[test]
    pub(super) fn id_set_holds_what_was_inserted() {
        let mut s = IdSet::default();
        let ids = [5, 7, 6, 1, 3, 2, 511, 512, 1 << 40, u64::MAX];
        for id in ids {
            s.insert(id);
        }
        assert!(ids.iter().all(|&id| s.contains(id)));
        assert!([0, 4, 8, 510, 513, (1 << 40) + 1, u64::MAX - 1]
            .iter()
            .all(|&id| !s.contains(id)));
    }
}
