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
//! Threads: the profile function is per thread. [`install_all`] sets it on
//! every thread state of the interpreter (`PyInterpreterState_ThreadHead` /
//! `PyThreadState_Next` and `_PyEval_SetProfile`, what 3.12's
//! `PyEval_SetProfileAllThreads` does, under the GIL); `threading` threads
//! started later get it from `threading.setprofile` (see [`thread_hook`]),
//! and `_thread.start_new_thread` threads from the Python package's wrapper.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

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
            stacks::py_enter(code, |e| enter_kind(frame, e));
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
/// the interpreter. The caller holds the GIL, so no other thread runs
/// Python code meanwhile.
unsafe fn set_all(func: Option<ffi::Py_tracefunc>) {
    let interp = ffi::PyInterpreterState_Get();
    let mut ts = ffi::PyInterpreterState_ThreadHead(interp);
    while !ts.is_null() {
        if _PyEval_SetProfile(ts, func, std::ptr::null_mut()) < 0 {
            // Only the audit hook of the calling thread can refuse.
            ffi::PyErr_Clear();
        }
        ts = ffi::PyThreadState_Next(ts);
    }
}

/// Installs the profile function on every thread that exists now.
pub(crate) fn install_all(_py: Python<'_>, builtins: bool) -> PyResult<()> {
    BUILTINS.store(builtins, Ordering::Relaxed);
    // SAFETY: attached (a Python token), so the thread list is stable.
    unsafe { set_all(Some(profile)) };
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
/// floor; threads started later call this again from `threading.setprofile`).
pub(crate) fn install_floor(_py: Python<'_>) {
    // SAFETY: as in `install_all`.
    unsafe { set_all(Some(nothing)) };
}

/// Removes it from every thread.
pub(crate) fn uninstall_all(_py: Python<'_>) -> PyResult<()> {
    // SAFETY: as above.
    unsafe { set_all(None) };
    Ok(())
}

/// Installs it on the calling thread only (a thread started later).
pub(crate) fn install_current(_py: Python<'_>) {
    // SAFETY: attached.
    unsafe { ffi::PyEval_SetProfile(Some(profile), std::ptr::null_mut()) };
}

/// The hook `threading.setprofile` installs in new threads: replaces itself
/// with the C profile function and records the event it was called for.
pub(crate) fn thread_hook(frame: &Bound<'_, PyAny>, event: &str, arg: &Bound<'_, PyAny>) {
    let what = match event {
        "call" => ffi::PyTrace_CALL,
        "return" => ffi::PyTrace_RETURN,
        "c_call" => ffi::PyTrace_C_CALL,
        "c_return" => ffi::PyTrace_C_RETURN,
        "c_exception" => ffi::PyTrace_C_EXCEPTION,
        _ => -1,
    };
    // SAFETY: attached; `frame` is checked to be a frame object.
    unsafe {
        ffi::PyEval_SetProfile(Some(profile), std::ptr::null_mut());
        if what >= 0 && ffi::PyFrame_Check(frame.as_ptr()) != 0 {
            profile(
                std::ptr::null_mut(),
                frame.as_ptr().cast(),
                what,
                arg.as_ptr(),
            );
        }
    }
}
