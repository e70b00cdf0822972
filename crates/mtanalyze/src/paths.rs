//! Call paths: calls and self time per distinct root-to-leaf path of
//! functions, the data behind folded stacks, flame graphs and path diffs.
//!
//! Each stack's replay grows a small tree (one node per distinct path, found
//! with one hash lookup per frame entered); the trees of all stacks are then
//! merged path by path. Memory grows with distinct paths, not events.

use rustc_hash::FxHashMap;

/// The parent of root frames.
pub const ROOT: u32 = u32::MAX;
/// Marks a node that stands for a stack (per-stack trees), not a function.
pub const STACK_LABEL: u32 = 1 << 31;

/// One distinct path: its last function, its parent path, and totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathNode {
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
pub struct PathTree {
    index: FxHashMap<(u32, u32), u32>,
    nodes: Vec<PathNode>,
}

impl PathTree {
    /// The node for `func` called from `parent` (created on first use).
    #[inline]
    pub fn child(&mut self, parent: u32, func: u32) -> u32 {
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

    /// Adds one finished frame on path `node`.
    #[inline]
    pub fn record(&mut self, node: u32, self_ns: u64) {
        let n = &mut self.nodes[node as usize];
        n.ncalls += 1;
        n.self_ns = n.self_ns.saturating_add(self_ns);
    }

    /// Adds every path of `other` into `self`, with `other`'s roots hung
    /// under `root` ([`ROOT`], or a stack label node of `self`).
    pub fn merge_from(&mut self, other: &PathTree, root: u32) {
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

    /// Every path with at least one call: (functions from the root, calls, self ns).
    pub fn paths(&self) -> Vec<(Vec<u32>, u64, u64)> {
        let mut out = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.ncalls == 0 {
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
        a.record(y, 10);
        a.record(x, 5);
        let mut b = PathTree::default();
        let x2 = b.child(ROOT, 1);
        let z = b.child(x2, 3);
        let y2 = b.child(x2, 2);
        b.record(y2, 7);
        b.record(z, 1);
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
}
