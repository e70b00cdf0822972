//! Call sites and scope guards: what `scope!` and `#[profile]` expand to.
//!
//! Each instrumented place is a `static` [`CallSite`] holding its name and
//! source position. Its function id is registered the first time the site
//! records (0 until then) and cached in the site, so the hot path passes only
//! the id.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};

use mtrace_format::FunctionId;

use crate::shared::{GEN, GEN_OFF};
use crate::{meta, thread};

/// A named place in the source, usually a `static` made by [`scope!`](crate::scope!)
/// or `#[profile]`.
#[derive(Debug)]
pub struct CallSite {
    id: AtomicU32,
    name: &'static str,
    file: &'static str,
    line: u32,
    module: &'static str,
}

impl CallSite {
    /// A call site; its id is assigned on first use.
    pub const fn new(
        name: &'static str,
        file: &'static str,
        line: u32,
        module: &'static str,
    ) -> CallSite {
        CallSite {
            id: AtomicU32::new(0),
            name,
            file,
            line,
            module,
        }
    }

    /// The site's function id, registering it on first use.
    #[inline]
    pub fn id(&'static self) -> FunctionId {
        match self.id.load(Ordering::Relaxed) {
            0 => self.register(),
            id => FunctionId(id),
        }
    }

    #[cold]
    #[inline(never)]
    fn register(&'static self) -> FunctionId {
        let id = meta::register(self.name, self.file, self.line, self.module);
        self.id.store(id.0, Ordering::Relaxed);
        id
    }

    /// The name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Enters `site` if recording; returns its id, or 0 if nothing was entered.
#[inline(always)]
pub(crate) fn enter_site(site: &'static CallSite) -> u32 {
    let g = GEN.load(Ordering::Relaxed);
    if g == GEN_OFF {
        return 0;
    }
    let id = site.id().0;
    thread::enter(g, id);
    id
}

/// Leaves the frame [`enter_site`] opened (`id` 0: none).
#[inline(always)]
pub(crate) fn exit_site(id: u32) {
    if id != 0 {
        let g = GEN.load(Ordering::Relaxed);
        if g != GEN_OFF {
            thread::exit(g, id);
        }
    }
}

/// An open frame; leaving the scope (dropping the guard) closes it.
///
/// Made by [`scope!`](crate::scope!). It is not `Send`: a frame opens and
/// closes on one stack. (For work that moves between threads, use a
/// [`LogicalStack`](crate::LogicalStack).)
#[must_use = "the frame closes as soon as the guard is dropped"]
#[derive(Debug)]
pub struct ScopeGuard {
    id: u32,
    _not_send: PhantomData<*const ()>,
}

impl ScopeGuard {
    /// Opens a frame of `site` on the current stack.
    #[inline]
    pub fn enter(site: &'static CallSite) -> ScopeGuard {
        ScopeGuard {
            id: enter_site(site),
            _not_send: PhantomData,
        }
    }
}

impl Drop for ScopeGuard {
    #[inline]
    fn drop(&mut self) {
        exit_site(self.id);
    }
}

/// Opens a frame named `$name` until the returned guard is dropped.
///
/// The name must be a string literal (or another constant `&'static str`).
/// When nothing is recorded this costs one atomic load and one branch, and
/// the guard's drop one more branch.
///
/// ```
/// fn parse(input: &str) -> usize {
///     let _frame = mtrace::scope!("parse");
///     input.len()
/// }
/// # assert_eq!(parse("abc"), 3);
/// ```
#[macro_export]
macro_rules! scope {
    ($name:expr $(,)?) => {{
        static SITE: $crate::CallSite =
            $crate::CallSite::new($name, file!(), line!(), module_path!());
        $crate::ScopeGuard::enter(&SITE)
    }};
}
