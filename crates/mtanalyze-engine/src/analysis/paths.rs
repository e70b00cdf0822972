//! Call paths: calls and self time per distinct root-to-leaf path of
//! functions, the data behind folded stacks, flame graphs and path diffs.
//!
//! Each stack's replay grows a small tree (one node per distinct path, found
//! with one hash lookup per frame entered); the trees of all stacks are then
//! merged path by path. Memory grows with distinct paths, not events.
//!
//! A recursion of depth D has D distinct paths, and printing them (folded
//! stacks) takes D²/2 frames. [`PathTree::collapse_recursion`] folds
//! recursive frames into the outer frame of the same function, as the
//! Firefox Profiler's "collapse recursion" transforms do, so deep
//! recursion stays one short path.

use rustc_hash::FxHashMap;

/// The parent of root frames.
pub(crate) const ROOT: u32 = u32::MAX;
/// Marks a node that stands for a stack (per-stack trees), not a function.
pub(crate) const STACK_LABEL: u32 = 1 << 31;

/// Which recursive frames fold into an outer frame on call paths ([`crate::AnalyzeOptions::collapse_recursion`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecursionCollapse {
    /// A frame whose caller is the same function: `a;a;a;b` becomes `a;b`.
    Direct,
    /// A frame whose function is anywhere on the path above it, with every
    /// frame in between: `a;b;a;c` becomes `a;c` (`a;b` stays).
    All,
}

/// One distinct path: its last function, its parent path, and totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PathNode {
    /// Parent node, or [`ROOT`].
    pub parent: u32,
    /// Dense function index, or `STACK_LABEL | stack index`.
    pub func: u32,
    /// Frames that ended on this path.
    pub ncalls: u64,
    /// Their self time.
    pub self_ns: u64,
}

/// A tree of call paths.
#[derive(Clone, Debug, Default)]
pub(crate) struct PathTree {
    index: FxHashMap<(u32, u32), u32>,
    nodes: Vec<PathNode>,
}

impl PathTree {
    /// The node for `func` called from `parent` (created on first use).
    #[inline]
    pub(crate) fn child(&mut self, parent: u32, func: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let id = *self.index.entry((parent, func)).or_insert(next);
        if id == next {
            self.nodes.push(PathNode {
                parent,
                func,
                ncalls: 0,
                self_ns: 0,
            });
        }
        id
    }

    /// Adds a finished frame on path `node` (`calls`: 1, or 0 for a frame
    /// entered before the time window).
    #[inline]
    pub(crate) fn record(&mut self, node: u32, calls: u64, self_ns: u64) {
        let n = &mut self.nodes[node as usize];
        n.ncalls += calls;
        n.self_ns = n.self_ns.saturating_add(self_ns);
    }

    /// Adds every path of `other` into `self`, with `other`'s roots hung
    /// under `root` ([`ROOT`], or a stack label node of `self`).
    pub(crate) fn merge_from(&mut self, other: &PathTree, root: u32) {
        // Parents are always created before their children, so one pass in
        // creation order can map every node.
        let mut map = Vec::with_capacity(other.nodes.len());
        for n in &other.nodes {
            let parent = if n.parent == ROOT {
                root
            } else {
                map[n.parent as usize]
            };
            let id = self.child(parent, n.func);
            let m = &mut self.nodes[id as usize];
            m.ncalls += n.ncalls;
            m.self_ns = m.self_ns.saturating_add(n.self_ns);
            map.push(id);
        }
    }

    /// The same calls and self time on collapsed paths: a frame that
    /// `mode` folds is counted on the outer frame's path. No path of the
    /// result has a function twice in a row (`Direct`) or at all (`All`).
    /// Stack label roots are never folded.
    pub(crate) fn collapse_recursion(&self, mode: RecursionCollapse) -> PathTree {
        let mut out = PathTree::default();
        // Parents come before their children: one pass in creation order.
        let mut map: Vec<u32> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let parent = if n.parent == ROOT {
                ROOT
            } else {
                map[n.parent as usize]
            };
            let id = match mode {
                RecursionCollapse::Direct => {
                    if parent != ROOT && out.nodes[parent as usize].func == n.func {
                        parent
                    } else {
                        out.child(parent, n.func)
                    }
                }
                // A collapsed path holds each function once, so this walk
                // is bounded by the number of distinct functions on it.
                RecursionCollapse::All => match out.ancestor_with(parent, n.func) {
                    Some(outer) => outer,
                    None => out.child(parent, n.func),
                },
            };
            let m = &mut out.nodes[id as usize];
            m.ncalls += n.ncalls;
            m.self_ns = m.self_ns.saturating_add(n.self_ns);
            map.push(id);
        }
        out
    }

    /// The node on the path ending at `node` (itself included) whose function is `func`.
    fn ancestor_with(&self, mut node: u32, func: u32) -> Option<u32> {
        while node != ROOT {
            let n = &self.nodes[node as usize];
            if n.func == func {
                return Some(node);
            }
            node = n.parent;
        }
        None
    }

    /// Marks in `seen` (by dense index) every function on a path that has
    /// calls or self time: in a time window, a frame entered before it
    /// and idle in it has no totals, but its callees' paths go through it.
    pub(crate) fn mark_functions(&self, seen: &mut [bool]) {
        let mut done = vec![false; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            if n.ncalls == 0 && n.self_ns == 0 {
                continue;
            }
            let mut at = i as u32;
            while at != ROOT && !done[at as usize] {
                done[at as usize] = true;
                let node = &self.nodes[at as usize];
                if let Some(s) = seen.get_mut(node.func as usize) {
                    *s = true;
                }
                at = node.parent;
            }
        }
    }

    /// Every path with calls or self time: (functions from the root, calls, self ns).
    pub(crate) fn paths(&self) -> Vec<(Vec<u32>, u64, u64)> {
        let mut out = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.ncalls == 0 && n.self_ns == 0 {
                continue;
            }
            let mut path = Vec::new();
            let mut at = i as u32;
            while at != ROOT {
                let node = &self.nodes[at as usize];
                path.push(node.func);
                at = node.parent;
            }
            path.reverse();
            out.push((path, n.ncalls, n.self_ns));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_equal_paths_and_keeps_distinct_ones() {
        let mut a = PathTree::default();
        let x = a.child(ROOT, 1);
        let y = a.child(x, 2);
        a.record(y, 1, 10);
        a.record(x, 1, 5);
        let mut b = PathTree::default();
        let x2 = b.child(ROOT, 1);
        let z = b.child(x2, 3);
        let y2 = b.child(x2, 2);
        b.record(y2, 1, 7);
        b.record(z, 1, 1);
        let mut all = PathTree::default();
        all.merge_from(&a, ROOT);
        all.merge_from(&b, ROOT);
        let mut paths = all.paths();
        paths.sort();
        assert_eq!(
            paths,
            vec![(vec![1], 1, 5), (vec![1, 2], 2, 17), (vec![1, 3], 1, 1)]
        );
    }

    /// Builds a tree from (path, self ns) pairs, one recorded frame each.
    fn tree(paths: &[(&[u32], u64)]) -> PathTree {
        let mut t = PathTree::default();
        for (path, ns) in paths {
            let node = path.iter().fold(ROOT, |at, &f| t.child(at, f));
            t.record(node, 1, *ns);
        }
        t
    }

    /// What collapsing does to one path, literally: the frames a walk of
    /// that path keeps.
    fn collapse_literally(path: &[u32], mode: RecursionCollapse) -> Vec<u32> {
        let mut kept: Vec<u32> = Vec::new();
        for &f in path {
            match mode {
                RecursionCollapse::Direct if kept.last() == Some(&f) => {}
                RecursionCollapse::All if kept.contains(&f) => {
                    let at = kept.iter().position(|&k| k == f).unwrap_or(kept.len());
                    kept.truncate(at + 1);
                }
                _ => kept.push(f),
            }
        }
        kept
    }

    /// Paths with their calls and self time, merged by sequence.
    fn by_path(t: &PathTree) -> std::collections::BTreeMap<Vec<u32>, (u64, u64)> {
        let mut m = std::collections::BTreeMap::new();
        for (p, n, ns) in t.paths() {
            let e: &mut (u64, u64) = m.entry(p).or_default();
            e.0 += n;
            e.1 += ns;
        }
        m
    }

    #[test]
    fn direct_recursion_folds_into_the_outer_frame() {
        let t = tree(&[(&[1], 1), (&[1, 1], 2), (&[1, 1, 1], 4), (&[1, 1, 1, 2], 8)]);
        let c = by_path(&t.collapse_recursion(RecursionCollapse::Direct));
        let want = [(vec![1], (3, 7)), (vec![1, 2], (1, 8))]
            .into_iter()
            .collect();
        assert_eq!(c, want);
    }

    #[test]
    fn indirect_recursion_folds_only_in_all_mode() {
        let t = tree(&[(&[1], 1), (&[1, 2], 2), (&[1, 2, 1], 4), (&[1, 2, 1, 3], 8)]);
        let direct = by_path(&t.collapse_recursion(RecursionCollapse::Direct));
        assert_eq!(direct, by_path(&t));
        let all = by_path(&t.collapse_recursion(RecursionCollapse::All));
        let want = [
            (vec![1], (2, 5)),
            (vec![1, 2], (1, 2)),
            (vec![1, 3], (1, 8)),
        ]
        .into_iter()
        .collect();
        assert_eq!(all, want);
    }

    #[test]
    fn stack_labels_are_never_folded() {
        let label = STACK_LABEL | 1;
        let t = tree(&[(&[label, 1, 1], 3), (&[label, 1], 4)]);
        for mode in [RecursionCollapse::Direct, RecursionCollapse::All] {
            let c = by_path(&t.collapse_recursion(mode));
            assert_eq!(c, [(vec![label, 1], (2, 7))].into_iter().collect());
        }
    }

    #[test]
    fn a_deep_recursion_stays_one_node() {
        let mut t = PathTree::default();
        let mut at = ROOT;
        for _ in 0..100_000 {
            at = t.child(at, 7);
            t.record(at, 1, 1);
        }
        let c = t.collapse_recursion(RecursionCollapse::All);
        assert_eq!(c.paths(), vec![(vec![7], 100_000, 100_000)]);
    }

    proptest::proptest! {
        /// The collapsed tree equals collapsing every path on its own and
        /// merging equal results.
        #[test]
        fn collapsing_the_tree_equals_collapsing_each_path(
            paths in proptest::collection::vec(
                (proptest::collection::vec(1u32..5, 1..12), 0u64..1000),
                1..40,
            ),
            all in proptest::bool::ANY,
        ) {
            let mode = if all { RecursionCollapse::All } else { RecursionCollapse::Direct };
            let pairs: Vec<(&[u32], u64)> = paths.iter().map(|(p, ns)| (&p[..], *ns)).collect();
            let t = tree(&pairs);
            let mut want: std::collections::BTreeMap<Vec<u32>, (u64, u64)> = Default::default();
            for (p, n, ns) in t.paths() {
                let e = want.entry(collapse_literally(&p, mode)).or_default();
                e.0 += n;
                e.1 += ns;
            }
            proptest::prop_assert_eq!(by_path(&t.collapse_recursion(mode)), want);
        }
    }
}
