//! `mtrace._mtrace`: the native half of the Python binding.
//!
//! A C-level profile function (the mechanism cProfile uses, installed with
//! `PyEval_SetProfile`, not a Python callback) turns CPython's profile
//! events into mtrace `enter`/`exit` events:
//!
//! ```text
//! PyTrace_CALL       code object -> FunctionId (cached)  -> push, mtrace::enter
//! PyTrace_RETURN                                         -> pop,  mtrace::exit
//! PyTrace_C_CALL     PyCFunction's method def -> FunctionId -> push, mtrace::enter
//! PyTrace_C_RETURN / PyTrace_C_EXCEPTION                 -> pop,  mtrace::exit
//! ```
//!
//! Each thread keeps a shadow stack of the ids it entered, so a return whose
//! call was not seen (the frames open when profiling started) is ignored, as
//! cProfile ignores it, and `stop` closes what is still open on the calling
//! thread. Every Python thread is a thread of the trace; with a context-id
//! callback (as yappi's `set_context_id_callback`), each context (greenlet,
//! asyncio task) runs on its own [`mtrace::LogicalStack`].
//!
//! Function identity: a code object is registered once (its pointer is the
//! cache key, and the cache keeps a strong reference so the pointer is never
//! reused); its name is `co_qualname`, file `co_filename`, line
//! `co_firstlineno`. A C function is keyed by its `PyMethodDef`, as cProfile
//! keys it, and named as cProfile names it (`<built-in method builtins.len>`,
//! `<method 'append' of 'list' objects>`) with file `~` and line 0, the key
//! `pstats` gives built-ins.
//!
//! The caches and the context table are only touched with the GIL held (every
//! profile callback holds it), which is what makes [`GilCell`] sound.

use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use mtrace::{
    Config, FunctionId, LogicalStack, Mode, PreferredClock, Producer, Recording, StartError,
    SwitchGuard,
};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// Events are turned into trace events (a recording runs).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// C functions are recorded too.
static BUILTINS: AtomicBool = AtomicBool::new(true);
/// Incremented by every `start`: a thread's shadow stack from an older
/// session is cleared on its next event.
static SESSION: AtomicU64 = AtomicU64::new(0);
/// The running recording.
static RECORDING: Mutex<Option<Recording>> = Mutex::new(None);

/// A value only touched with the GIL held.
struct GilCell<T>(UnsafeCell<T>);

// SAFETY: every access happens with the GIL held (from the profile function
// or a `#[pyfunction]`), so accesses never overlap. The profile function is
// not re-entered: CPython turns profiling off while it runs.
unsafe impl<T> Sync for GilCell<T> {}

impl<T> GilCell<T> {
    /// # Safety
    /// The GIL must be held and no other reference from `get` may be live.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self) -> &mut T {
        &mut *self.0.get()
    }
}

/// A hasher for pointers: one multiply (keys are addresses, already unique).
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(26);
    }
}

type PtrMap<V> = HashMap<usize, V, BuildHasherDefault<PtrHasher>>;

/// Code object address -> function id (the code objects are kept alive).
static CODES: GilCell<PtrMap<u32>> = GilCell(UnsafeCell::new(HashMap::with_hasher(
    BuildHasherDefault::new(),
)));
/// `PyMethodDef` address -> function id.
static CFUNCS: GilCell<PtrMap<u32>> = GilCell(UnsafeCell::new(HashMap::with_hasher(
    BuildHasherDefault::new(),
)));

/// The context-id callback (null: none) and the logical stack of each context.
struct Contexts {
    callback: *mut ffi::PyObject,
    stacks: PtrMap<Box<Context>>,
}

/// One context's logical stack and the shadow stack of ids open on it.
struct Context {
    stack: LogicalStack,
    shadow: Vec<u32>,
    /// A thread runs it now (another thread reporting the same id stays on its own stack).
    busy: bool,
}

static CONTEXTS: GilCell<Contexts> = GilCell(UnsafeCell::new(Contexts {
    callback: std::ptr::null_mut(),
    stacks: HashMap::with_hasher(BuildHasherDefault::new()),
}));

/// One thread's view.
struct Local {
    session: Cell<u64>,
    /// Ids entered and not yet left on the stack the thread runs.
    shadow: UnsafeCell<Vec<u32>>,
    /// The context the thread runs (0: its own stack).
    context: Cell<u64>,
    /// The thread's own shadow stack while it runs a context.
    own: UnsafeCell<Vec<u32>>,
    /// The switch onto the current context's logical stack.
    guard: UnsafeCell<Option<SwitchGuard<'static>>>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            session: Cell::new(0),
            shadow: UnsafeCell::new(Vec::new()),
            context: Cell::new(0),
            own: UnsafeCell::new(Vec::new()),
            guard: UnsafeCell::new(None),
        }
    };
}

/// The profile function CPython calls on this thread's events.
unsafe extern "C" fn profile(
    _obj: *mut ffi::PyObject,
    frame: *mut ffi::PyFrameObject,
    what: c_int,
    arg: *mut ffi::PyObject,
) -> c_int {
    if !ACTIVE.load(Ordering::Relaxed) {
        // Nothing records: stop paying for profile events on this thread
        // (allowed inside a profile function, as `sys.setprofile(None)` is).
        ffi::PyEval_SetProfile(None, std::ptr::null_mut());
        return 0;
    }
    let _ = LOCAL.try_with(|l| {
        let session = SESSION.load(Ordering::Relaxed);
        if l.session.get() != session {
            reset_thread(l, session);
        }
        if !CONTEXTS.get().callback.is_null() {
            follow_context(l);
        } else if l.context.get() != 0 {
            // The callback was removed: back to the thread's own stack.
            leave_context(l);
        }
        let shadow = &mut *l.shadow.get();
        match what {
            ffi::PyTrace_CALL => {
                let code = ffi::PyFrame_GetCode(frame);
                let id = match CODES.get().get(&(code as usize)) {
                    Some(&id) => id,
                    None => register_code(code),
                };
                ffi::Py_DECREF(code.cast());
                shadow.push(id);
                mtrace::enter(FunctionId(id));
            }
            ffi::PyTrace_RETURN => {
                if let Some(id) = shadow.pop() {
                    mtrace::exit(FunctionId(id));
                }
            }
            ffi::PyTrace_C_CALL if is_traced_cfunction(arg) => {
                let def = (*arg.cast::<ffi::PyCFunctionObject>()).m_ml as usize;
                let id = match CFUNCS.get().get(&def) {
                    Some(&id) => id,
                    None => register_cfunction(arg, def),
                };
                shadow.push(id);
                mtrace::enter(FunctionId(id));
            }
            ffi::PyTrace_C_RETURN | ffi::PyTrace_C_EXCEPTION if is_traced_cfunction(arg) => {
                if let Some(id) = shadow.pop() {
                    mtrace::exit(FunctionId(id));
                }
            }
            _ => {}
        }
    });
    0
}

/// Whether a C event's callable is recorded (a `PyCFunction`, with built-ins on).
#[inline(always)]
unsafe fn is_traced_cfunction(arg: *mut ffi::PyObject) -> bool {
    BUILTINS.load(Ordering::Relaxed) && ffi::PyCFunction_Check(arg) != 0
}

/// The thread's first event of a session: forget the last session's frames.
unsafe fn reset_thread(l: &Local, session: u64) {
    leave_context(l);
    (*l.shadow.get()).clear();
    (*l.own.get()).clear();
    l.session.set(session);
}

/// Registers a code object (first call only) and keeps it alive.
#[cold]
#[inline(never)]
unsafe fn register_code(code: *mut ffi::PyCodeObject) -> u32 {
    let py = Python::assume_attached();
    let obj = Bound::from_borrowed_ptr(py, code.cast());
    let text = |attr: &str| -> String {
        obj.getattr(attr)
            .and_then(|v| v.extract::<String>())
            .unwrap_or_default()
    };
    let mut name = text("co_qualname");
    if name.is_empty() {
        name = text("co_name");
    }
    let file = text("co_filename");
    let line = obj
        .getattr("co_firstlineno")
        .and_then(|v| v.extract::<u32>())
        .unwrap_or(0);
    let id = mtrace::register_function(&name, &file, line, "").0;
    // Keep the code object alive so its address is never reused.
    std::mem::forget(obj);
    CODES.get().insert(code as usize, id);
    id
}

/// Registers a C function under the name cProfile gives it.
#[cold]
#[inline(never)]
unsafe fn register_cfunction(func: *mut ffi::PyObject, def: usize) -> u32 {
    let py = Python::assume_attached();
    let name = cfunction_name(py, func).unwrap_or_else(|_| {
        let _ = PyErr::take(py);
        "<built-in function>".to_owned()
    });
    let id = mtrace::register_function(&name, "~", 0, "").0;
    CFUNCS.get().insert(def, id);
    id
}

/// cProfile's `normalizeUserObj`: `<built-in method builtins.len>`,
/// `<method 'append' of 'list' objects>`, `<_io.open>`, `<len>`.
unsafe fn cfunction_name(py: Python<'_>, func: *mut ffi::PyObject) -> PyResult<String> {
    let f = &*func.cast::<ffi::PyCFunctionObject>();
    let ml_name = std::ffi::CStr::from_ptr((*f.m_ml).ml_name)
        .to_string_lossy()
        .into_owned();
    let module_name = |m: *mut ffi::PyObject| -> Option<String> {
        if m.is_null() {
            return None;
        }
        let m = Bound::from_borrowed_ptr(py, m);
        if let Ok(s) = m.cast::<PyString>() {
            return Some(s.to_string());
        }
        m.getattr("__name__").ok()?.extract::<String>().ok()
    };
    if f.m_self.is_null() {
        return Ok(match module_name(f.m_module) {
            Some(m) if m != "builtins" => format!("<{m}.{ml_name}>"),
            _ => format!("<{ml_name}>"),
        });
    }
    // repr(getattr(type(self), name)), looked up along the MRO without descriptors.
    let this = Bound::from_borrowed_ptr(py, f.m_self);
    let mro = this.get_type().getattr("__mro__")?;
    for cls in mro.try_iter()? {
        let dict = cls?.getattr("__dict__")?;
        if let Ok(Some(found)) = dict.get_item(&ml_name).map(Some).or_else(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyKeyError>(py) {
                Ok(None)
            } else {
                Err(e)
            }
        }) {
            return Ok(found.repr()?.to_string());
        }
    }
    let module = if f.m_module.is_null() {
        None
    } else {
        Bound::from_borrowed_ptr(py, f.m_module)
            .cast::<PyString>()
            .ok()
            .map(|s| s.to_string())
    };
    Ok(match module {
        Some(m) => format!("<built-in method {m}.{ml_name}>"),
        None => format!("<built-in method {ml_name}>"),
    })
}

/// Asks the context-id callback which context runs, and switches the thread
/// onto that context's logical stack when it changed.
#[cold]
unsafe fn follow_context(l: &Local) {
    let contexts = CONTEXTS.get();
    let result = ffi::PyObject_CallNoArgs(contexts.callback);
    let ctx = if result.is_null() {
        ffi::PyErr_Clear();
        0
    } else {
        let v = if result == ffi::Py_None() {
            0
        } else {
            ffi::PyLong_AsUnsignedLongLongMask(result)
        };
        ffi::Py_DECREF(result);
        if !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear();
        }
        v as u64
    };
    if ctx == l.context.get() {
        return;
    }
    leave_context(l);
    if ctx == 0 {
        return;
    }
    let context = contexts.stacks.entry(ctx as usize).or_insert_with(|| {
        Box::new(Context {
            stack: LogicalStack::new(format!("context {ctx}")),
            shadow: Vec::new(),
            busy: false,
        })
    });
    if context.busy {
        return;
    }
    context.busy = true;
    // SAFETY: the Box never moves or drops while `busy` (contexts are never
    // removed), and only this thread uses it until `leave_context`.
    let context: &'static mut Context = &mut *(&mut **context as *mut Context);
    *l.own.get() = std::mem::replace(&mut *l.shadow.get(), std::mem::take(&mut context.shadow));
    *l.guard.get() = Some(context.stack.enter());
    l.context.set(ctx);
}

/// Switches the thread back onto its own stack.
unsafe fn leave_context(l: &Local) {
    let ctx = l.context.get();
    if ctx == 0 {
        return;
    }
    drop((*l.guard.get()).take());
    if let Some(context) = CONTEXTS.get().stacks.get_mut(&(ctx as usize)) {
        context.shadow = std::mem::replace(&mut *l.shadow.get(), std::mem::take(&mut *l.own.get()));
        context.busy = false;
    }
    l.context.set(0);
}

/// Starts a recording into `path` (the header prefers the `gil` clock and
/// names the Python producer). A bad capacity raises ValueError, a file that
/// cannot be made OSError.
#[pyfunction]
#[pyo3(signature = (path, capacity = None, ring = false, builtins = true))]
fn start(path: &str, capacity: Option<&str>, ring: bool, builtins: bool) -> PyResult<()> {
    let mut slot = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        return Err(PyRuntimeError::new_err("mtrace is already recording"));
    }
    // The producer tells mtanalyze the names are `co_qualname`s, so its
    // pstats output can key them by `co_name` as cProfile does.
    let mut config = Config::new(path)
        .preferred_clock(PreferredClock::Gil)
        .producer(Producer::Python);
    if let Some(text) = capacity {
        config = config.capacity(mtrace::parse_bytes(text).ok_or_else(|| {
            PyValueError::new_err(format!(
                "capacity {text:?}: expected a byte count such as 64M"
            ))
        })?);
    }
    if ring {
        config = config.mode(Mode::Ring);
    }
    let recording = mtrace::start(config).map_err(|e| match e {
        StartError::Config(_) => PyValueError::new_err(e.to_string()),
        StartError::AlreadyRecording { .. } => PyRuntimeError::new_err(e.to_string()),
        _ => PyOSError::new_err(e.to_string()),
    })?;
    *slot = Some(recording);
    BUILTINS.store(builtins, Ordering::Relaxed);
    SESSION.fetch_add(1, Ordering::Relaxed);
    ACTIVE.store(true, Ordering::Release);
    Ok(())
}

/// Stops the recording: closes the frames still open on this thread (as
/// cProfile does when it is disabled), finishes the file and returns a
/// summary (`path`, `events`, `dropped_events`, `threads`), or None if
/// nothing was recording.
#[pyfunction]
fn stop(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    ACTIVE.store(false, Ordering::Release);
    let _ = LOCAL.try_with(|l| {
        // SAFETY: the GIL is held; no other reference to the vectors is live.
        unsafe {
            if l.session.get() == SESSION.load(Ordering::Relaxed) {
                while let Some(id) = (*l.shadow.get()).pop() {
                    mtrace::exit(FunctionId(id));
                }
                leave_context(l);
                while let Some(id) = (*l.shadow.get()).pop() {
                    mtrace::exit(FunctionId(id));
                }
            }
        }
    });
    let recording = RECORDING.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(recording) = recording else {
        return Ok(None);
    };
    let summary = py
        .detach(|| recording.finish())
        .map_err(|e| PyOSError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("path", summary.path.to_string_lossy().into_owned())?;
    d.set_item("events", summary.events)?;
    d.set_item("dropped_events", summary.dropped_events)?;
    d.set_item("threads", summary.threads)?;
    Ok(Some(d))
}

/// Installs the profile function on the current thread; with `all_threads`
/// on every thread of the interpreter where Python allows it (3.12+).
#[pyfunction]
#[pyo3(signature = (all_threads = false))]
fn install(all_threads: bool) {
    // SAFETY: called with the GIL held.
    unsafe {
        #[cfg(Py_3_12)]
        if all_threads {
            ffi::PyEval_SetProfileAllThreads(Some(profile), std::ptr::null_mut());
            return;
        }
        let _ = all_threads;
        ffi::PyEval_SetProfile(Some(profile), std::ptr::null_mut());
    }
}

/// Removes the profile function from the current thread (all threads on 3.12+ with `all_threads`).
#[pyfunction]
#[pyo3(signature = (all_threads = false))]
fn uninstall(all_threads: bool) {
    // SAFETY: called with the GIL held.
    unsafe {
        #[cfg(Py_3_12)]
        if all_threads {
            ffi::PyEval_SetProfileAllThreads(None, std::ptr::null_mut());
            return;
        }
        let _ = all_threads;
        ffi::PyEval_SetProfile(None, std::ptr::null_mut());
    }
}

/// Whether `PyEval_SetProfileAllThreads` is available (Python 3.12+).
#[pyfunction]
fn has_all_threads() -> bool {
    cfg!(Py_3_12)
}

/// The hook `threading.setprofile` installs in new threads: replaces itself
/// with the C profile function and records the event it was called for.
#[pyfunction]
fn thread_hook(frame: &Bound<'_, PyAny>, event: &str, arg: &Bound<'_, PyAny>) {
    let what = match event {
        "call" => ffi::PyTrace_CALL,
        "return" => ffi::PyTrace_RETURN,
        "c_call" => ffi::PyTrace_C_CALL,
        "c_return" => ffi::PyTrace_C_RETURN,
        "c_exception" => ffi::PyTrace_C_EXCEPTION,
        _ => -1,
    };
    // SAFETY: the GIL is held; `frame` is a frame object (sys.setprofile's contract).
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

/// Sets (or, with None, clears) the callback whose result (an int, or None
/// for the thread's own stack) names the context that runs: each context
/// gets a logical stack of its own. Called on every event: it costs.
#[pyfunction]
fn set_context_id_callback(callback: Option<Bound<'_, PyAny>>) -> PyResult<()> {
    if let Some(cb) = &callback {
        if !cb.is_callable() {
            return Err(PyValueError::new_err(
                "the context-id callback must be callable",
            ));
        }
    }
    // SAFETY: the GIL is held.
    unsafe {
        let contexts = CONTEXTS.get();
        if !contexts.callback.is_null() {
            ffi::Py_DECREF(contexts.callback);
        }
        contexts.callback = callback.map_or(std::ptr::null_mut(), |cb| cb.into_ptr());
    }
    Ok(())
}

/// Whether a recording runs.
#[pyfunction]
fn is_recording() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

#[pymodule]
fn _mtrace(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(stop, m)?)?;
    m.add_function(wrap_pyfunction!(install, m)?)?;
    m.add_function(wrap_pyfunction!(uninstall, m)?)?;
    m.add_function(wrap_pyfunction!(has_all_threads, m)?)?;
    m.add_function(wrap_pyfunction!(thread_hook, m)?)?;
    m.add_function(wrap_pyfunction!(set_context_id_callback, m)?)?;
    m.add_function(wrap_pyfunction!(is_recording, m)?)?;
    Ok(())
}
