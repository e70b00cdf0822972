//! The backend on Python 3.11: a C-level profile function (the mechanism
//! cProfile uses there, no Python callback per event).
//!
//! ```text
//! PyTrace_CALL       stacks::py_enter(code, Start | Resume | Throw)
//! PyTrace_RETURN     stacks::py_leave(code, Return | Yield | Unwind)
//! PyTrace_C_CALL     stacks::c_enter(def)           (only with builtins)
//! PyTrace_C_RETURN / PyTrace_C_EXCEPTION    stacks::c_leave(def)
//! ```
//!
//! 3.11 reports a generator's start, resumption and throw all as `call`,
//! and its return, yield and unwind all as `return`; which one it was is
//! read off the frame, only for generators and coroutines: the instruction
//! at `f_lasti` is `RESUME 0` at a start, `RESUME n` after a yield, anything
//! else for a throw; `return` with no value is an unwind, at a
//! `YIELD_VALUE` a yield. The bytecode is read once per code object
//! (`registry::Entry::bytecode`).
//!
//! # Threads
//!
//! The profile function is per thread state, and 3.11 gives a new thread
//! state none: `new_threadstate` (`Python/pystate.c`) links it into the
//! interpreter's list under the runtime's head lock, without the GIL and
//! without any callback or audit event, and `PyGILState_Ensure` (how a
//! thread that C started, such as a ctypes callback's, enters Python) then
//! takes the GIL and runs. Two mechanisms between them reach every thread
//! state:
//!
//! ```text
//! existing at start    install_all: set_all walks PyInterpreterState_ThreadHead /
//!                      PyThreadState_Next and calls _PyEval_SetProfile on each
//!                      (what 3.12's PyEval_SetProfileAllThreads does), under the GIL
//! appearing later      evaluate, the interpreter's PEP 523 frame evaluator: every
//!                      frame of every thread state passes through it before it
//!                      runs; on a thread state it has not seen (PyThreadState_GetID,
//!                      the last one kept per OS thread) that is newer than those
//!                      set_all reached (ids only grow), it sets the profile
//!                      function, then the frame runs: its first call is recorded
//! ```
//!
//! The evaluator is the one hook CPython 3.11 runs on a new thread state
//! before its first Python call whatever started the thread (`threading`,
//! `_thread`, `pthread_create` in a C library, an embedding application),
//! and it touches only the thread state it runs on, so no other thread's
//! state is ever read: not one being created (the list changes under a lock
//! this module cannot take), nor one that ended. Noticing the new thread
//! state from another thread's events (the list's head, whose id grows)
//! would cost less but sees nothing while no other thread runs Python,
//! which is when a C library's threads call back: the caller is waiting in
//! C, without the GIL.
//!
//! Its price: while an evaluator is set, 3.11 no longer inlines a Python
//! function's call into the caller's `_PyEval_EvalFrameDefault`, so every
//! Python call is a C call again (as on 3.10), plus the check here: a
//! load of the thread state's profile function, which is already mtrace's
//! on nearly every frame, else an exported call and a thread-local (an
//! extension reaches those through a call to `__tls_get_addr`).
//! `bench/bench.py` measures it with the rest of the recording. Deep recursion uses the C stack again: a program
//! that raises the recursion limit far above its default can overflow it
//! while recording. An evaluator that was set before [`install_all`] (a
//! JIT, a debugger) is chained: it runs each frame after the check; one set
//! after it replaces this one, and thread states that appear from then on
//! are not recorded; [`uninstall_all`] then leaves it in place.

use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;

use crate::registry::Entry;
use crate::stacks::{self, Enter, Leave};

/// C functions are recorded.
static BUILTINS: AtomicBool = AtomicBool::new(true);

extern "C" {
    // Exported by CPython 3.11 (cpython/ceval.h), not declared by pyo3-ffi.
    fn _PyEval_SetProfile(
        tstate: *mut ffi::PyThreadState,
        func: Option<ffi::Py_tracefunc>,
        arg: *mut ffi::PyObject,
    ) -> c_int;
    // CPython's own frame evaluator (cpython/ceval.h): what runs a frame
    // when no PEP 523 evaluator is set.
    fn _PyEval_EvalFrameDefault(
        tstate: *mut ffi::PyThreadState,
        frame: *mut ffi::_PyInterpreterFrame,
        throwflag: c_int,
    ) -> *mut ffi::PyObject;
}

/// 3.11's opcodes (`dis.opmap`).
const RESUME: u8 = 151;
const YIELD_VALUE: u8 = 86;

/// The opcode and argument of the instruction at the frame's `f_lasti`.
unsafe fn instruction(
    frame: *mut ffi::PyFrameObject,
    (code, len): (*const u8, usize),
) -> Option<(u8, u8)> {
    let lasti = ffi::PyFrame_GetLasti(frame);
    if lasti < 0 || code.is_null() || lasti as usize + 1 >= len {
        return None;
    }
    let at = lasti as usize;
    Some((*code.add(at), *code.add(at + 1)))
}

unsafe fn enter_kind(frame: *mut ffi::PyFrameObject, e: Entry) -> Enter {
    match instruction(frame, e.bytecode) {
        Some((RESUME, 0)) | None => Enter::Start,
        Some((RESUME, _)) => Enter::Resume,
        Some(_) => Enter::Throw,
    }
}

unsafe fn leave_kind(frame: *mut ffi::PyFrameObject, e: Entry, arg: *mut ffi::PyObject) -> Leave {
    if arg.is_null() {
        return Leave::Unwind;
    }
    match instruction(frame, e.bytecode) {
        Some((YIELD_VALUE, _)) => Leave::Yield,
        _ => Leave::Return,
    }
}

/// CPython 3.11's frame object and interpreter frame
/// (`Include/internal/pycore_frame.h`), up to the first two locals: 3.11
/// has no public way to read a frame's argument without building its
/// locals dict (`PyFrame_GetVar` is 3.12's). The layout is checked on
/// every read (the interpreter frame's code and frame object must be this
/// frame's), so a build whose layout differs reads nothing.
#[repr(C)]
struct FrameObject311 {
    ob_refcnt: ffi::Py_ssize_t,
    ob_type: *mut ffi::PyTypeObject,
    f_back: *mut ffi::PyObject,
    f_frame: *mut InterpreterFrame311,
}

#[repr(C)]
struct InterpreterFrame311 {
    f_func: *mut ffi::PyObject,
    f_globals: *mut ffi::PyObject,
    f_builtins: *mut ffi::PyObject,
    f_locals: *mut ffi::PyObject,
    f_code: *mut ffi::PyObject,
    frame_obj: *mut ffi::PyObject,
    previous: *mut InterpreterFrame311,
    prev_instr: *mut u16,
    stacktop: c_int,
    is_entry: bool,
    owner: std::os::raw::c_char,
    localsplus: [*mut ffi::PyObject; 2],
}

/// The `callback` argument (local 1) of the frame that starts, the event
/// loop's `call_soon` (`stacks::py_enter` asks only there; the registry
/// checked the argument's name), a new reference, or null.
unsafe fn callback_arg(
    frame: *mut ffi::PyFrameObject,
    code: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let iframe = (*frame.cast::<FrameObject311>()).f_frame;
    if iframe.is_null()
        || (*iframe).f_code != code
        || (*iframe).frame_obj != frame.cast::<ffi::PyObject>()
    {
        return std::ptr::null_mut();
    }
    let callback = (*iframe).localsplus[1];
    if !callback.is_null() {
        ffi::Py_INCREF(callback);
    }
    callback
}

/// The profile function CPython calls on this thread's events.
unsafe extern "C" fn profile(
    _obj: *mut ffi::PyObject,
    frame: *mut ffi::PyFrameObject,
    what: c_int,
    arg: *mut ffi::PyObject,
) -> c_int {
    if !stacks::ACTIVE.load(Ordering::Relaxed) {
        // Nothing records: stop paying for profile events on this thread
        // (allowed inside a profile function, as `sys.setprofile(None)` is).
        ffi::PyEval_SetProfile(None, std::ptr::null_mut());
        return 0;
    }
    match what {
        ffi::PyTrace_CALL => {
            let code = ffi::PyFrame_GetCode(frame).cast::<ffi::PyObject>();
            stacks::py_enter(code, |e| enter_kind(frame, e), || callback_arg(frame, code));
            ffi::Py_DECREF(code);
        }
        ffi::PyTrace_RETURN => {
            let code = ffi::PyFrame_GetCode(frame).cast::<ffi::PyObject>();
            stacks::py_leave(code, |e| leave_kind(frame, e, arg));
            ffi::Py_DECREF(code);
        }
        ffi::PyTrace_C_CALL if is_traced_cfunction(arg) => {
            let def = (*arg.cast::<ffi::PyCFunctionObject>()).m_ml as usize;
            stacks::c_enter(def, arg, std::ptr::null_mut());
        }
        ffi::PyTrace_C_RETURN | ffi::PyTrace_C_EXCEPTION if is_traced_cfunction(arg) => {
            let def = (*arg.cast::<ffi::PyCFunctionObject>()).m_ml as usize;
            stacks::c_leave(def);
        }
        _ => {}
    }
    0
}

/// Whether a C event's callable is recorded (a `PyCFunction`, with built-ins on).
#[inline(always)]
unsafe fn is_traced_cfunction(arg: *mut ffi::PyObject) -> bool {
    BUILTINS.load(Ordering::Relaxed) && ffi::PyCFunction_Check(arg) != 0
}

/// Sets (or, with None, removes) the profile function on every thread of
/// the interpreter, and notes the newest of them in [`EXISTING`]. The
/// caller holds the GIL, so no other thread runs Python code meanwhile.
unsafe fn set_all(func: Option<ffi::Py_tracefunc>) {
    let interp = ffi::PyInterpreterState_Get();
    let mut ts = ffi::PyInterpreterState_ThreadHead(interp);
    let mut newest = 0;
    while !ts.is_null() {
        newest = newest.max(ffi::PyThreadState_GetID(ts));
        if _PyEval_SetProfile(ts, func, std::ptr::null_mut()) < 0 {
            // Only the audit hook of the calling thread can refuse.
            ffi::PyErr_Clear();
        }
        ts = ffi::PyThreadState_Next(ts);
    }
    EXISTING.store(newest, Ordering::Relaxed);
}

/// Installs the profile function on every thread state that exists now,
/// and the frame evaluator that gives it to those that appear later.
pub(crate) fn install_all(_py: Python<'_>, builtins: bool) -> PyResult<()> {
    BUILTINS.store(builtins, Ordering::Relaxed);
    // SAFETY: attached (a Python token), so the thread list is stable.
    unsafe {
        set_all(Some(profile));
        let reads = profile_field(ffi::PyThreadState_Get()) == profile as *const ();
        PROFILE_FIELD_READS.store(reads, Ordering::Relaxed);
        hook_frames();
    }
    Ok(())
}

/// A profile function that does nothing: the floor `bench/bench.py`
/// measures recording against.
unsafe extern "C" fn nothing(
    _obj: *mut ffi::PyObject,
    _frame: *mut ffi::PyFrameObject,
    _what: c_int,
    _arg: *mut ffi::PyObject,
) -> c_int {
    0
}

/// Installs [`nothing`] on every thread that exists now (`bench.py`'s
/// floor; threads started later call this again from `threading.setprofile`),
/// and with `evaluator` the frame evaluator [`evaluate`] too (which, with
/// nothing recording, gives no thread the profile function: only its cost
/// per frame is added).
pub(crate) fn install_floor(_py: Python<'_>, evaluator: bool) {
    // SAFETY: as in `install_all`.
    unsafe {
        set_all(Some(nothing));
        if evaluator {
            hook_frames();
        }
    }
}

/// Removes the frame evaluator (if it is still the interpreter's) and the
/// profile function from every thread.
pub(crate) fn uninstall_all(_py: Python<'_>) -> PyResult<()> {
    // SAFETY: as above.
    unsafe {
        unhook_frames();
        set_all(None);
    }
    Ok(())
}

// ------------------------------------------------ thread states that appear later

/// The newest thread state [`set_all`] reached (ids only grow): [`evaluate`]
/// leaves it and older ones alone, so a profile function that replaced
/// mtrace's on one of them (a cProfile enabled after mtrace on that thread)
/// is not taken back.
static EXISTING: AtomicI64 = AtomicI64::new(0);

/// Offset of `c_profilefunc` in 3.11's `PyThreadState` (`struct _ts`,
/// `Include/cpython/pystate.h`: three pointers, seven `int`s, `cframe`).
/// Checked at [`install_all`] on the calling thread, whose profile
/// function is then [`profile`]; where it does not read back,
/// [`PROFILE_FIELD_READS`] stays false and every frame takes the check
/// through [`SEEN`].
const C_PROFILEFUNC_OFFSET: usize = 64;

/// [`C_PROFILEFUNC_OFFSET`] read back [`profile`] on the installing thread.
static PROFILE_FIELD_READS: AtomicBool = AtomicBool::new(false);

/// Whether `tstate`'s profile function is [`profile`] (false, whatever it
/// is, if the field's offset did not check out).
#[inline(always)]
unsafe fn runs_profile(tstate: *mut ffi::PyThreadState) -> bool {
    PROFILE_FIELD_READS.load(Ordering::Relaxed) && profile_field(tstate) == profile as *const ()
}

/// What [`C_PROFILEFUNC_OFFSET`] holds in `tstate`.
///
/// # Safety
/// `tstate` is a live thread state (larger than the offset, where a
/// function pointer or null is stored).
#[inline(always)]
unsafe fn profile_field(tstate: *mut ffi::PyThreadState) -> *const () {
    tstate
        .cast::<u8>()
        .add(C_PROFILEFUNC_OFFSET)
        .cast::<*const ()>()
        .read()
}

/// The evaluator [`evaluate`] hands each frame to: the one the interpreter
/// had when it was installed, or null for CPython's own. Written under the
/// GIL before the interpreter can call `evaluate`.
static NEXT: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    /// The thread state (`PyThreadState_GetID`: unique in the interpreter,
    /// never reused, from 1) that [`evaluate`] last saw on this OS thread.
    /// An id, not the address: a C thread whose every callback goes
    /// through `PyGILState_Ensure`/`Release` gets a new thread state each
    /// time, which can be at the freed one's address. Const and without a
    /// destructor, so the check costs a thread-local read.
    static SEEN: Cell<i64> = const { Cell::new(0) };
}

/// The interpreter's frame evaluator while recording: a thread state it has
/// not seen gets the profile function before the frame runs.
unsafe extern "C" fn evaluate(
    tstate: *mut ffi::PyThreadState,
    frame: *mut ffi::_PyInterpreterFrame,
    throwflag: c_int,
) -> *mut ffi::PyObject {
    // A thread state already running `profile` needs nothing: `adopt`
    // would set what is set. Otherwise (not yet given it, or another
    // profile function replaced it), the thread state is adopted once.
    if !runs_profile(tstate) {
        let id = ffi::PyThreadState_GetID(tstate);
        if SEEN.with(|seen| seen.replace(id)) != id {
            adopt(tstate, id);
        }
    }
    let next = NEXT.load(Ordering::Relaxed);
    if next.is_null() {
        _PyEval_EvalFrameDefault(tstate, frame, throwflag)
    } else {
        // SAFETY: only `hook_frames` stores it, from a `_PyFrameEvalFunction`.
        let next: ffi::_PyFrameEvalFunction = std::mem::transmute(next);
        next(tstate, frame, throwflag)
    }
}

/// Gives the calling thread's state (`tstate`, which runs a frame, with the
/// GIL; `id` its id) the profile function if it appeared after
/// `install_all`, which gave it to the others.
#[cold]
unsafe fn adopt(tstate: *mut ffi::PyThreadState, id: i64) {
    // Not active: an evaluator set after ours still calls it after `disable()`.
    if id <= EXISTING.load(Ordering::Relaxed) || !stacks::ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    // A frame entered by a generator's `throw` comes with its exception
    // set; the audit event of `_PyEval_SetProfile` must neither see nor
    // lose it.
    let (mut kind, mut value, mut traceback) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    ffi::PyErr_Fetch(&mut kind, &mut value, &mut traceback);
    if _PyEval_SetProfile(tstate, Some(profile), std::ptr::null_mut()) < 0 {
        // An audit hook refused `sys.setprofile`: this thread is not recorded.
        ffi::PyErr_Clear();
    }
    ffi::PyErr_Restore(kind, value, traceback);
}

/// Makes [`evaluate`] the interpreter's frame evaluator, chaining the one
/// it had.
unsafe fn hook_frames() {
    let interp = ffi::PyInterpreterState_Get();
    let current = address(ffi::_PyInterpreterState_GetEvalFrameFunc(interp));
    if current == address(evaluate) {
        // Still ours: an evaluator that replaced it gave it back after
        // `uninstall_all` left that one in place. `NEXT` is already right.
        return;
    }
    // 3.11 reports no evaluator as `_PyEval_EvalFrameDefault`.
    let next = if current == address(_PyEval_EvalFrameDefault) {
        std::ptr::null_mut()
    } else {
        current
    };
    NEXT.store(next, Ordering::Relaxed);
    ffi::_PyInterpreterState_SetEvalFrameFunc(interp, Some(evaluate));
}

/// A frame evaluator's address: what the interpreter holds, and what
/// [`NEXT`] keeps. Both sides of each comparison are one symbol each
/// ([`evaluate`], or CPython's export), so addresses compare reliably.
fn address(f: ffi::_PyFrameEvalFunction) -> *mut () {
    f as *mut ()
}

/// Gives the interpreter back the evaluator it had, if [`evaluate`] is
/// still its evaluator. If another one replaced it since, that one stays
/// (and `NEXT` too, in case it hands frames on to ours).
unsafe fn unhook_frames() {
    let interp = ffi::PyInterpreterState_Get();
    if address(ffi::_PyInterpreterState_GetEvalFrameFunc(interp)) != address(evaluate) {
        return;
    }
    let next = NEXT.load(Ordering::Relaxed);
    // Null (none) rather than `_PyEval_EvalFrameDefault`: 3.11 inlines
    // Python calls only when no evaluator is set.
    let next = if next.is_null() {
        None
    } else {
        // SAFETY: stored by `hook_frames` from a `_PyFrameEvalFunction`.
        Some(std::mem::transmute::<*mut (), ffi::_PyFrameEvalFunction>(
            next,
        ))
    };
    ffi::_PyInterpreterState_SetEvalFrameFunc(interp, next);
}
