//! Function identity: which mtrace [`FunctionId`] a code object or a C
//! function records as, and how it is named.
//!
//! A code object is registered once per process, as `co_qualname` at
//! `co_filename:co_firstlineno`, together with whether it is a coroutine or
//! generator (the stack rules of `stacks.rs` need that on every event). The
//! process-wide table keeps a strong reference to every code object it
//! names, so an address is never reused for another code object; each thread
//! copies the entries it uses into its own cache (`stacks::Thread`), so the
//! hot path takes no lock and needs no GIL.
//!
//! A C function is keyed by its `PyMethodDef`, as cProfile keys it, and
//! named as cProfile names it (`<built-in method builtins.len>`, `<method
//! 'append' of 'list' objects>`), with file `~` and line 0, the key `pstats`
//! gives built-ins.
//!
//! Names are computed before the table's lock is taken: computing them calls
//! into Python, and a thread must not wait for a lock while it holds the
//! interpreter (on a free-threaded build that could stall a stop-the-world
//! pause).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// What the stack rules need to know about a code object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub id: u32,
    /// `CO_COROUTINE`, `CO_GENERATOR`, `CO_ASYNC_GENERATOR` or
    /// `CO_ITERABLE_COROUTINE`: its frames can suspend and resume.
    pub resumable: bool,
    /// `CO_COROUTINE` (an `async def`): a task's frames are these.
    pub coroutine: bool,
    /// asyncio's `BaseEventLoop.call_soon` or `call_soon_threadsafe`: its
    /// start may wake a task (see `stacks::wake_task_of`); its `callback`
    /// argument is local 1.
    pub wakes: bool,
    /// 3.11, generators and coroutines: the bytecode (`co_code`, a bytes
    /// object kept alive), to tell a start from a resumption and a yield
    /// from a return by the instruction at `f_lasti` (see `legacy.rs`).
    #[cfg(not(Py_3_12))]
    pub bytecode: (*const u8, usize),
}

// SAFETY: the bytecode pointer points into a bytes object that is never
// freed (its reference is leaked) and never written.
#[cfg(not(Py_3_12))]
unsafe impl Send for Entry {}

/// A hasher for pointers: one multiply (keys are addresses, already unique).
#[derive(Default)]
pub(crate) struct PtrHasher(u64);

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

pub(crate) type PtrMap<V> = HashMap<usize, V, BuildHasherDefault<PtrHasher>>;

pub(crate) fn ptr_map<V>() -> PtrMap<V> {
    HashMap::with_hasher(BuildHasherDefault::default())
}

/// Code object address -> entry; the code objects are kept alive (leaked
/// references), so an address is never reused.
static CODES: Mutex<Option<PtrMap<Entry>>> = Mutex::new(None);
/// `PyMethodDef` address -> function id (method definitions are static).
static CFUNCS: Mutex<Option<PtrMap<u32>>> = Mutex::new(None);

const CO_GENERATOR: i64 = 0x0020;
const CO_COROUTINE: i64 = 0x0080;
const CO_ITERABLE_COROUTINE: i64 = 0x0100;
const CO_ASYNC_GENERATOR: i64 = 0x0200;

/// The entry of a code object, registering it the first time any thread sees it.
///
/// # Safety
/// The thread must be attached to the interpreter and `code` a code object.
#[cold]
#[inline(never)]
pub(crate) unsafe fn code_entry(code: *mut ffi::PyObject) -> Entry {
    if let Some(&e) = lock(&CODES).as_ref().and_then(|m| m.get(&(code as usize))) {
        return e;
    }
    let py = Python::assume_attached();
    let obj = Bound::from_borrowed_ptr(py, code);
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
    let flags = obj
        .getattr("co_flags")
        .and_then(|v| v.extract::<i64>())
        .unwrap_or(0);
    if !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
    }
    let id = mtrace::register_function(&name, &file, line, "").0;
    let resumable =
        flags & (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR) != 0;
    let entry = Entry {
        id,
        resumable,
        coroutine: flags & CO_COROUTINE != 0,
        wakes: schedules_callbacks(&obj, &name, &file),
        #[cfg(not(Py_3_12))]
        bytecode: if resumable {
            bytecode(code)
        } else {
            (std::ptr::null(), 0)
        },
    };
    let mut codes = lock(&CODES);
    let map = codes.get_or_insert_with(ptr_map);
    if let Some(&e) = map.get(&(code as usize)) {
        // Another thread registered it meanwhile: it holds the reference.
        return e;
    }
    // Keep the code object alive so its address is never reused.
    std::mem::forget(obj.clone());
    map.insert(code as usize, entry);
    entry
}

/// Whether a code object is one of the event loop's methods that put a
/// callback on the loop's ready queue, `BaseEventLoop.call_soon(self,
/// callback, ...)` or `call_soon_threadsafe`: asyncio's futures schedule a
/// waiting task's wakeup through them (the C `_asyncio` futures too, which
/// call the loop's `call_soon` method), and a task its own next step. The
/// first two arguments' names are checked as well: the hook reads
/// `callback` as local 1.
fn schedules_callbacks(code: &Bound<'_, PyAny>, name: &str, file: &str) -> bool {
    let method = matches!(
        name,
        "BaseEventLoop.call_soon" | "BaseEventLoop.call_soon_threadsafe"
    );
    if !method
        || !(file.ends_with("asyncio/base_events.py") || file.ends_with("asyncio\\base_events.py"))
    {
        return false;
    }
    let args = code
        .getattr("co_varnames")
        .and_then(|v| v.extract::<Vec<String>>())
        .unwrap_or_default();
    let argcount = code
        .getattr("co_argcount")
        .and_then(|v| v.extract::<usize>())
        .unwrap_or(0);
    argcount >= 2 && args.get(1).is_some_and(|a| a == "callback")
}

/// The `PyMethodDef` that keys a C callable as cProfile keys it, and the
/// callable to name it by: a `PyCFunction` itself, or (3.12+, where calls of
/// `list.append(l, x)` report the descriptor) a method descriptor with a
/// bound `self`. None for anything else (Python functions, classes...).
///
/// # Safety
/// `callable` must be a live object; `self_arg` one or the `MISSING` sentinel.
#[cfg(Py_3_12)]
#[inline(always)]
pub(crate) unsafe fn cfunction_def(
    callable: *mut ffi::PyObject,
    self_arg: *mut ffi::PyObject,
    missing: *mut ffi::PyObject,
) -> Option<usize> {
    let ty = ffi::Py_TYPE(callable);
    if ty == std::ptr::addr_of_mut!(ffi::PyFunction_Type) {
        // Most calls: a Python function, whose own events follow.
        return None;
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyCFunction_Type) || ffi::PyCFunction_Check(callable) != 0
    {
        return Some((*callable.cast::<ffi::PyCFunctionObject>()).m_ml as usize);
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyMethodDescr_Type) && self_arg != missing {
        return Some((*callable.cast::<ffi::PyMethodDescrObject>()).d_method as usize);
    }
    None
}

/// The function id of a C function, registering it the first time.
///
/// # Safety
/// As [`cfunction_def`], with `def` what it returned for these arguments.
#[cold]
#[inline(never)]
pub(crate) unsafe fn cfunction_id(
    def: usize,
    callable: *mut ffi::PyObject,
    self_arg: *mut ffi::PyObject,
) -> u32 {
    if let Some(&id) = lock(&CFUNCS).as_ref().and_then(|m| m.get(&def)) {
        return id;
    }
    let py = Python::assume_attached();
    let name = if ffi::PyCFunction_Check(callable) != 0 {
        cfunction_name(py, callable)
    } else {
        // A method descriptor: name the method bound to `self_arg`, as
        // cProfile does (it binds one on every call; we only to name it).
        let descr_get = (*ffi::Py_TYPE(callable)).tp_descr_get;
        match descr_get {
            Some(get) => {
                let bound = get(callable, self_arg, ffi::Py_TYPE(self_arg).cast());
                if bound.is_null() {
                    Err(PyErr::fetch(py))
                } else {
                    let bound = Bound::from_owned_ptr(py, bound);
                    if ffi::PyCFunction_Check(bound.as_ptr()) != 0 {
                        cfunction_name(py, bound.as_ptr())
                    } else {
                        Err(PyErr::fetch(py))
                    }
                }
            }
            None => Err(PyErr::fetch(py)),
        }
    };
    let name = name.unwrap_or_else(|_| "<built-in function>".to_owned());
    if !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
    }
    let id = mtrace::register_function(&name, "~", 0, "").0;
    lock(&CFUNCS).get_or_insert_with(ptr_map).insert(def, id);
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

/// Locks a mutex, ignoring poisoning (nothing panics while holding these).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `co_code` of a code object as (pointer, length), its reference leaked so
/// the buffer lives as long as the process; (null, 0) if it has none.
#[cfg(not(Py_3_12))]
unsafe fn bytecode(code: *mut ffi::PyObject) -> (*const u8, usize) {
    let bytes = ffi::PyObject_GetAttrString(code, c"co_code".as_ptr());
    if bytes.is_null() || ffi::PyBytes_Check(bytes) == 0 {
        ffi::PyErr_Clear();
        ffi::Py_XDECREF(bytes);
        return (std::ptr::null(), 0);
    }
    let len = ffi::PyBytes_Size(bytes).max(0) as usize;
    (ffi::PyBytes_AsString(bytes).cast::<u8>().cast_const(), len)
}
