//! The backend on Python 3.12+: `sys.monitoring` (PEP 669) callbacks that
//! are C functions, as cProfile's own on 3.12+.
//!
//! `PyEval_SetProfile` still works on 3.12+, but through CPython's legacy
//! shim on top of `sys.monitoring`, which builds a frame object and
//! translates every event; registering callables of our own skips that.
//! Each callback is a `PyCFunction` with `METH_FASTCALL`: CPython calls it
//! through vectorcall with the event's arguments in a C array, so no tuple,
//! no frame object and no Python code runs per event.
//!
//! ```text
//! PY_START                    stacks::py_enter(code, Start)
//! PY_RESUME / PY_THROW        stacks::py_enter(code, Resume / Throw)
//! PY_RETURN / PY_YIELD        stacks::py_leave(code, Return / Yield)
//! PY_UNWIND                   stacks::py_leave(code, Unwind)
//! CALL (a C function)         stacks::c_enter(def)        (only with builtins)
//! C_RETURN / C_RAISE          stacks::c_leave(def)        (only with builtins)
//! ```
//!
//! `sys.monitoring` is process-wide: every thread, whenever and however it
//! was started, reports to the same callbacks. mtrace takes a tool id of
//! its own (3 or 4, the ones CPython names nothing; then 5, 1, 0), never
//! cProfile's `PROFILER_ID` (2), so both can run in one process.
//!
//! By default no callback returns `sys.monitoring.DISABLE`: every
//! location's events are needed while recording (a call site may call a C
//! function on one call and a Python one on the next). With
//! `builtins="fast"`, a CALL whose callable is a Python function (or a
//! class) disables CALL (and so C_RETURN/C_RAISE) at that location: a
//! third fewer callbacks in call-heavy Python code, at the price of the
//! built-in calls such a site makes later. `disable()` then calls
//! `restart_events` (and only then: a restart re-instruments the code of
//! every frame on the stack).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, Ordering};
use std::sync::OnceLock;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::{ffi, intern};

use crate::registry::{cfunction_def, clear_error};
use crate::stacks::{self, Enter, Leave};

/// The tool id mtrace holds (-1: none).
static TOOL: AtomicI64 = AtomicI64::new(-1);
/// `sys.monitoring.MISSING`, the "no argument" value of CALL's `arg0`.
static MISSING: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());
/// `sys.monitoring.DISABLE`.
static DISABLE: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());
/// `builtins="fast"`: call sites that call a Python function stop
/// reporting calls (one callback per Python call fewer).
static FAST_BUILTINS: AtomicBool = AtomicBool::new(false);

/// Tool ids to try, in order.
const TOOL_IDS: [i64; 5] = [3, 4, 5, 1, 0];

/// The callbacks' result. None is immortal on 3.12+: the reference needs
/// no count (CPython's own `Py_RETURN_NONE` does not count it either).
#[inline(always)]
unsafe fn none() -> *mut ffi::PyObject {
    ffi::Py_None()
}

/// A `sys.monitoring` callback (METH_FASTCALL) for a Python-frame event:
/// its first argument is the code object, passed to `stacks::$handler`
/// with what happened (and, for an enter, how to read the `callback`
/// argument of the event loop's `call_soon`). Each must be a function of
/// its own (one `PyMethodDef` per event).
macro_rules! frame_callback {
    ($name:ident, $handler:ident, $what:expr $(, $extra:expr)?) => {
        unsafe extern "C" fn $name(
            _slf: *mut ffi::PyObject,
            args: *mut *mut ffi::PyObject,
            nargs: ffi::Py_ssize_t,
        ) -> *mut ffi::PyObject {
            if nargs >= 1 {
                stacks::$handler(*args, |_| $what $(, $extra)?);
            }
            none()
        }
    };
}

frame_callback!(on_start, py_enter, Enter::Start, || callback_arg());
frame_callback!(on_resume, py_enter, Enter::Resume, || callback_arg());
frame_callback!(on_throw, py_enter, Enter::Throw, || callback_arg());

/// The interned name `callback`, for [`callback_arg`] (a reference kept
/// for the process).
static CALLBACK_NAME: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());

/// asyncio's `events.Handle` class (a reference kept for the process), once
/// the event loop's `call_soon` has run.
static HANDLE: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());
/// CALL events are watched (built-ins on).
static CALLS: AtomicBool = AtomicBool::new(false);

/// The `callback` argument of the frame that starts (the event loop's
/// `call_soon`; asked for by `stacks::py_enter` only there), a new
/// reference, or null.
///
/// With built-ins on, null: the wake comes from the CALL event of the
/// `events.Handle(callback, ...)` that `call_soon` makes (see [`on_call`]),
/// whose first argument is the callback, at no cost beyond a comparison
/// per CALL of a non-function; here `Handle` is only looked up, the first
/// time. Without CALL events, the frame's local is read: `PY_START` is
/// reported from the new frame's first instruction, so the current frame
/// is that one, and `PyEval_GetFrame` makes its frame object (once per
/// call of `call_soon`; an allocation the garbage collector counts, too
/// dear to pay by default: `bench/bench.py`'s asyncio workload showed it).
unsafe fn callback_arg() -> *mut ffi::PyObject {
    if CALLS.load(Ordering::Relaxed) {
        if HANDLE.load(Ordering::Relaxed).is_null() {
            find_handle();
        }
        return std::ptr::null_mut();
    }
    let name = CALLBACK_NAME.load(Ordering::Relaxed);
    let frame = ffi::PyEval_GetFrame();
    if name.is_null() || frame.is_null() {
        return std::ptr::null_mut();
    }
    ffi::PyFrame_GetVar(frame, name)
}
frame_callback!(on_return, py_leave, Leave::Return);
frame_callback!(on_yield, py_leave, Leave::Yield);
frame_callback!(on_unwind, py_leave, Leave::Unwind);

/// `asyncio.events.Handle` into [`HANDLE`] (asyncio is imported: its
/// loop's `call_soon` runs). Through the C API, its errors cleared at once
/// (see `registry.rs` on why not through pyo3's `PyErr`).
#[cold]
unsafe fn find_handle() {
    let module = ffi::PyImport_ImportModule(c"asyncio.events".as_ptr());
    let handle = if module.is_null() {
        std::ptr::null_mut()
    } else {
        let handle = ffi::PyObject_GetAttrString(module, c"Handle".as_ptr());
        ffi::Py_DECREF(module);
        handle
    };
    if !handle.is_null() && ffi::PyType_Check(handle) != 0 {
        // Kept for the process.
        HANDLE.store(handle, Ordering::Relaxed);
        return;
    }
    ffi::Py_XDECREF(handle);
    clear_error();
}

unsafe extern "C" fn on_call(
    _slf: *mut ffi::PyObject,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    if nargs >= 4 {
        let (callable, self_arg) = (*args.add(2), *args.add(3));
        if let Some(def) = cfunction_def(callable, self_arg, MISSING.load(Ordering::Relaxed)) {
            stacks::c_enter(def, callable, self_arg);
        } else if callable == HANDLE.load(Ordering::Relaxed) {
            // The loop's `_call_soon` makes the ready queue's handle of a
            // callback (`self_arg` is the first argument): perhaps a task's
            // wakeup. Never disabled, also with builtins="fast".
            if self_arg != MISSING.load(Ordering::Relaxed) {
                stacks::wake_task_of(self_arg);
            }
        } else if FAST_BUILTINS.load(Ordering::Relaxed) && calls_python(callable) {
            // builtins="fast": this site calls Python functions (or
            // classes); stop reporting its calls (a built-in it calls later
            // goes unseen).
            return disable();
        }
    }
    none()
}

/// A Python function or a class.
#[inline(always)]
unsafe fn calls_python(callable: *mut ffi::PyObject) -> bool {
    ffi::Py_TYPE(callable) == std::ptr::addr_of_mut!(ffi::PyFunction_Type)
        || ffi::PyType_Check(callable) != 0
}

/// `sys.monitoring.DISABLE`, a new reference.
#[inline(always)]
unsafe fn disable() -> *mut ffi::PyObject {
    let d = DISABLE.load(Ordering::Relaxed);
    if d.is_null() {
        return none();
    }
    ffi::Py_INCREF(d);
    d
}

unsafe extern "C" fn on_c_return(
    _slf: *mut ffi::PyObject,
    args: *mut *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    if nargs >= 4 {
        let (callable, self_arg) = (*args.add(2), *args.add(3));
        if let Some(def) = cfunction_def(callable, self_arg, MISSING.load(Ordering::Relaxed)) {
            stacks::c_leave(def);
        }
    }
    none()
}

/// Does nothing: registered for the same events as a recording, it is
/// the floor `bench/bench.py` measures recording against (what CPython's
/// dispatch of a C callback costs by itself).
unsafe extern "C" fn on_nothing(
    _slf: *mut ffi::PyObject,
    _args: *mut *mut ffi::PyObject,
    _nargs: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    none()
}

type Callback = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *mut *mut ffi::PyObject,
    ffi::Py_ssize_t,
) -> *mut ffi::PyObject;

/// (event name in `sys.monitoring.events`, callback, only with builtins).
const CALLBACKS: [(&str, &std::ffi::CStr, Callback, bool); 9] = [
    ("PY_START", c"mtrace_py_start", on_start, false),
    ("PY_RESUME", c"mtrace_py_resume", on_resume, false),
    ("PY_THROW", c"mtrace_py_throw", on_throw, false),
    ("PY_RETURN", c"mtrace_py_return", on_return, false),
    ("PY_YIELD", c"mtrace_py_yield", on_yield, false),
    ("PY_UNWIND", c"mtrace_py_unwind", on_unwind, false),
    ("CALL", c"mtrace_call", on_call, true),
    ("C_RETURN", c"mtrace_c_return", on_c_return, true),
    ("C_RAISE", c"mtrace_c_raise", on_c_return, true),
];

/// The method definitions of the callbacks, then of [`on_nothing`]
/// (CPython keeps pointers to them).
struct Defs(Vec<ffi::PyMethodDef>);
// SAFETY: written once, then only read (by CPython).
unsafe impl Send for Defs {}
unsafe impl Sync for Defs {}
static DEFS: OnceLock<Defs> = OnceLock::new();

fn defs() -> &'static Defs {
    DEFS.get_or_init(|| {
        Defs(
            CALLBACKS
                .iter()
                .map(|&(_, name, f, _)| (name, f))
                .chain([(c"mtrace_nothing", on_nothing as Callback)])
                .map(|(name, f)| ffi::PyMethodDef {
                    ml_name: name.as_ptr(),
                    ml_meth: ffi::PyMethodDefPointer { PyCFunctionFast: f },
                    ml_flags: ffi::METH_FASTCALL,
                    ml_doc: std::ptr::null(),
                })
                .collect(),
        )
    })
}

/// What installing the callbacks needs from `sys.monitoring`, looked up
/// once a process: a profile per request installs and uninstalls them each
/// time, and the lookups (the module, each event's bit, a function object
/// per callback) were a fifth of that.
struct Hooks {
    monitoring: Py<PyAny>,
    /// `sys.monitoring.events.X` of each of [`CALLBACKS`].
    bits: Vec<i64>,
    /// A function object per callback of [`CALLBACKS`].
    callbacks: Vec<Py<PyAny>>,
    /// [`on_nothing`]'s function object (the floor).
    nothing: Py<PyAny>,
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// The process's [`Hooks`], made at the first install; its first call also
/// stores `MISSING`, `DISABLE` and the interned `callback` for the
/// callbacks.
fn hooks(py: Python<'_>) -> PyResult<&'static Hooks> {
    if let Some(hooks) = HOOKS.get() {
        return Ok(hooks);
    }
    let mon = py.import("sys")?.getattr("monitoring")?;
    MISSING.store(mon.getattr("MISSING")?.into_ptr(), Ordering::Relaxed);
    if CALLBACK_NAME.load(Ordering::Relaxed).is_null() {
        let name = pyo3::types::PyString::intern(py, "callback");
        CALLBACK_NAME.store(name.clone().into_ptr(), Ordering::Relaxed);
    }
    DISABLE.store(mon.getattr("DISABLE")?.into_ptr(), Ordering::Relaxed);
    let events = mon.getattr("events")?;
    let bits = CALLBACKS
        .iter()
        .map(|&(event, _, _, _)| events.getattr(event)?.extract::<i64>())
        .collect::<PyResult<Vec<i64>>>()?;
    let function = |def: &'static ffi::PyMethodDef| -> PyResult<Py<PyAny>> {
        // SAFETY: `def` is 'static; a PyCFunction without self or module.
        unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyCFunction_NewEx(
                    def as *const ffi::PyMethodDef as *mut ffi::PyMethodDef,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                ),
            )
            .map(Bound::unbind)
        }
    };
    let defs = &defs().0;
    let Some((nothing, callbacks)) = defs.split_last() else {
        return Err(PyRuntimeError::new_err("mtrace: no callback definitions"));
    };
    let made = Hooks {
        monitoring: mon.unbind(),
        bits,
        callbacks: callbacks.iter().map(function).collect::<PyResult<_>>()?,
        nothing: function(nothing)?,
    };
    // Two threads may both make one: the first kept wins, the other is
    // dropped (it holds only references).
    Ok(HOOKS.get_or_init(|| made))
}

/// Takes a tool id and registers the callbacks (the C ones only with
/// `builtins`; `fast_builtins`: see [`FAST_BUILTINS`]); with `floor`,
/// [`on_nothing`] for each of those events instead.
pub(crate) fn install(
    py: Python<'_>,
    builtins: bool,
    fast_builtins: bool,
    floor: bool,
) -> PyResult<()> {
    if TOOL.load(Ordering::Relaxed) >= 0 {
        return Ok(());
    }
    let hooks = hooks(py)?;
    let mon = hooks.monitoring.bind(py);
    let mut tool = None;
    for id in TOOL_IDS {
        if mon.call_method1(intern!(py, "get_tool"), (id,))?.is_none()
            && mon
                .call_method1(intern!(py, "use_tool_id"), (id, intern!(py, "mtrace")))
                .is_ok()
        {
            tool = Some(id);
            break;
        }
    }
    let Some(tool) = tool else {
        let taken: Vec<String> = (0..6)
            .map(|id| {
                let name = mon
                    .call_method1("get_tool", (id,))
                    .and_then(|n| n.str().map(|s| s.to_string()))
                    .unwrap_or_default();
                format!("{id}: {name}")
            })
            .collect();
        return Err(PyRuntimeError::new_err(format!(
            "mtrace needs a sys.monitoring tool id, and every one is taken ({})",
            taken.join(", ")
        )));
    };
    FAST_BUILTINS.store(fast_builtins, Ordering::Relaxed);
    CALLS.store(builtins, Ordering::Relaxed);
    let mut mask: i64 = 0;
    let result = (|| -> PyResult<()> {
        let register = intern!(py, "register_callback");
        for (i, &(_, _, _, c_only)) in CALLBACKS.iter().enumerate() {
            if c_only && !builtins {
                continue;
            }
            let callable = if floor {
                &hooks.nothing
            } else {
                &hooks.callbacks[i]
            };
            let bit = hooks.bits[i];
            mon.call_method1(register, (tool, bit, callable.bind(py)))?;
            mask |= bit;
        }
        mon.call_method1(intern!(py, "set_events"), (tool, mask))?;
        Ok(())
    })();
    TOOL.store(tool, Ordering::Relaxed);
    if let Err(e) = result {
        uninstall(py)?;
        return Err(e);
    }
    Ok(())
}

/// Unregisters the callbacks and frees the tool id.
pub(crate) fn uninstall(py: Python<'_>) -> PyResult<()> {
    let tool = TOOL.swap(-1, Ordering::Relaxed);
    if tool < 0 {
        return Ok(());
    }
    let hooks = hooks(py)?;
    let mon = hooks.monitoring.bind(py);
    mon.call_method1(intern!(py, "set_events"), (tool, 0))?;
    let register = intern!(py, "register_callback");
    for &bit in &hooks.bits {
        mon.call_method1(register, (tool, bit, py.None()))?;
    }
    // Sites disabled by builtins="fast" report again to the next tool.
    // Only then: a restart re-instruments the code of every frame on
    // every thread's stack, which a profile per request pays each time
    // (`FAST_BUILTINS` is the one path that returns `DISABLE`).
    if FAST_BUILTINS.load(Ordering::Relaxed) {
        mon.call_method0(intern!(py, "restart_events"))?;
    }
    mon.call_method1(intern!(py, "free_tool_id"), (tool,))?;
    Ok(())
}

/// The tool id mtrace holds, if any.
pub(crate) fn tool_id() -> Option<i64> {
    let t = TOOL.load(Ordering::Relaxed);
    (t >= 0).then_some(t)
}
