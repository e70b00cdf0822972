//! Where the analyzer's parallel parts run: on rayon's pool (the default),
//! or every one of them on the calling thread, inside
//! [`on_the_calling_thread`].
//!
//! A program that links the analyzer and calls it in the middle of its run
//! (the Python binding: a `pstats.Stats(profile)` per web request) must not
//! see a thread of it afterwards, and a short trace is analyzed before
//! threads would have started. rayon's global pool starts its threads at
//! its first use and keeps them for the life of the process; so each
//! parallel part of the analysis goes through this module, which runs it
//! on rayon or, on the calling thread, in order. Both give the same report:
//! the parts are independent by construction (that is what lets them run
//! in parallel), and their results are gathered in the same order.

use std::cell::Cell;

use rayon::prelude::*;

thread_local! {
    /// Set inside [`on_the_calling_thread`], on the thread that called it.
    static CALLING_THREAD_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `work` (analyses, renderings) with every parallel part of the
/// analyzer on the calling thread: no thread is started, rayon's pool is
/// neither used nor made.
pub fn on_the_calling_thread<R>(work: impl FnOnce() -> R) -> R {
    /// Restores the flag however `work` ends (a panic included).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CALLING_THREAD_ONLY.set(self.0);
        }
    }
    let _restore = Restore(CALLING_THREAD_ONLY.replace(true));
    work()
}

/// Whether parallel parts may run on rayon's pool (false inside
/// [`on_the_calling_thread`]).
pub fn parallel() -> bool {
    !CALLING_THREAD_ONLY.get()
}

/// `rayon::join`, or `a` then `b`.
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    if parallel() {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}

/// `f` of each of `items`, in their order.
pub fn map_collect<I, T, R, F>(items: I, f: F) -> Vec<R>
where
    I: IntoParallelIterator<Item = T> + IntoIterator<Item = T>,
    F: Fn(T) -> R + Sync + Send,
    T: Send,
    R: Send,
{
    if parallel() {
        items.into_par_iter().map(f).collect()
    } else {
        items.into_iter().map(f).collect()
    }
}

/// `f` on each of `items`.
pub fn for_each<I, T, F>(items: I, f: F)
where
    I: IntoParallelIterator<Item = T> + IntoIterator<Item = T>,
    F: Fn(T) + Sync + Send,
    T: Send,
{
    if parallel() {
        items.into_par_iter().for_each(f)
    } else {
        items.into_iter().for_each(f)
    }
}

/// `f` on each of `items` until one fails.
pub fn try_for_each<I, T, E, F>(items: I, f: F) -> Result<(), E>
where
    I: IntoParallelIterator<Item = T> + IntoIterator<Item = T>,
    F: Fn(T) -> Result<(), E> + Sync + Send,
    T: Send,
    E: Send,
{
    if parallel() {
        items.into_par_iter().try_for_each(f)
    } else {
        items.into_iter().try_for_each(f)
    }
}

/// The threads parallel parts run on: rayon's, or 1.
pub fn current_num_threads() -> usize {
    if parallel() {
        rayon::current_num_threads()
    } else {
        1
    }
}

/// The index of the rayon thread running this, if any (0 on the calling
/// thread inside [`on_the_calling_thread`]).
pub fn current_thread_index() -> Option<usize> {
    if parallel() {
        rayon::current_thread_index()
    } else {
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_the_calling_thread_everything_runs_here_in_order() {
        let caller = std::thread::current().id();
        let (ids, order) = on_the_calling_thread(|| {
            assert!(!parallel());
            let ids = map_collect(0..64u32, |_| std::thread::current().id());
            let (a, b) = join(|| std::thread::current().id(), || 2);
            assert_eq!((a, b), (caller, 2));
            (ids, map_collect(vec![3, 1, 2], |x| x * 10))
        });
        assert!(ids.iter().all(|&id| id == caller));
        assert_eq!(order, [30, 10, 20]);
        assert!(parallel(), "the flag is restored");
        assert_eq!(map_collect(vec![3, 1, 2], |x| x * 10), [30, 10, 20]);
    }
}
