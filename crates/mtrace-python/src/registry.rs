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

impl Entry {
    /// The entry of no code object: what an empty slot of a cache holds.
    pub(crate) const NONE: Entry = Entry {
        id: OWN,
        resumable: false,
        coroutine: false,
        wakes: false,
        #[cfg(not(Py_3_12))]
        bytecode: (std::ptr::null(), 0),
    };
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

/// The id of mtrace's own code, which is never recorded: the Python
/// package's files, the code `python -m mtrace attach` injects, and this
/// extension's functions. No function is registered under it.
pub(crate) const OWN: u32 = u32::MAX;

/// The Python package's folder, with a trailing separator: its code is
/// mtrace's own. Set when the package is imported.
static OWN_FOLDER: Mutex<Option<String>> = Mutex::new(None);

/// The first constant (the docstring) of the code `python -m mtrace attach`
/// runs in a target through `sys.remote_exec`, which CPython compiles as
/// `<string>`: its frames are mtrace's own.
const INJECTED_MARKER: &str = "mtrace: code injected by python -m mtrace attach";

/// Sets the package's folder ([`OWN_FOLDER`]).
pub(crate) fn set_own_folder(folder: String) {
    *lock(&OWN_FOLDER) = Some(folder);
}

/// Whether `code`, from `file`, is mtrace's own.
unsafe fn is_own(code: *mut ffi::PyObject, file: &str) -> bool {
    if lock(&OWN_FOLDER)
        .as_deref()
        .is_some_and(|folder| file.starts_with(folder))
    {
        return true;
    }
    if file != "<string>" {
        return false;
    }
    attr_item_text(code, c"co_consts", 0).as_deref() == Some(INJECTED_MARKER)
}

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
    let mut name = attr_text(code, c"co_qualname").unwrap_or_default();
    if name.is_empty() {
        name = attr_text(code, c"co_name").unwrap_or_default();
    }
    let file = attr_text(code, c"co_filename").unwrap_or_default();
    let line = attr_int(code, c"co_firstlineno")
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0);
    let flags = attr_int(code, c"co_flags").unwrap_or(0);
    let id = if is_own(code, &file) {
        OWN
    } else {
        mtrace::register_function(&name, &file, line, "").0
    };
    let resumable =
        flags & (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR) != 0;
    let entry = Entry {
        id,
        resumable,
        coroutine: flags & CO_COROUTINE != 0,
        wakes: schedules_callbacks(code, &name, &file),
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
    ffi::Py_INCREF(code);
    map.insert(code as usize, entry);
    entry
}

// Naming runs inside CPython's event callbacks, on the program's threads,
// perhaps in an `except` block: an exception raised there (a failed look-up)
// takes the exception being handled as its `__context__`, and with it that
// exception's traceback and every frame of it. So these helpers call the C
// API directly and clear what it raises at once, never through pyo3's
// `PyErr`: a `PyErr` (or any `Py<T>`) dropped outside a `#[pyfunction]`
// does not let go of its object but queues it in pyo3's pool, which is only
// emptied when the program next calls into this module (`mtrace.disable()`):
// until then the handled exception, its frames and their locals (a thread
// whose `run()` raised, the arguments of `threading.excepthook`) would stay
// alive.

/// Clears the error indicator if a failed call set it.
pub(crate) unsafe fn clear_error() {
    if !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
    }
}

/// The text of `obj.<attr>` if it is a str, else None (error cleared).
unsafe fn attr_text(obj: *mut ffi::PyObject, attr: &std::ffi::CStr) -> Option<String> {
    let value = ffi::PyObject_GetAttrString(obj, attr.as_ptr());
    if value.is_null() {
        clear_error();
        return None;
    }
    let text = str_text(value);
    ffi::Py_DECREF(value);
    text
}

/// The text of `s` (borrowed) if it is a str, else None (error cleared).
unsafe fn str_text(s: *mut ffi::PyObject) -> Option<String> {
    if ffi::PyUnicode_Check(s) == 0 {
        return None;
    }
    let mut size: ffi::Py_ssize_t = 0;
    let data = ffi::PyUnicode_AsUTF8AndSize(s, &mut size);
    if data.is_null() {
        clear_error();
        return None;
    }
    let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size.max(0) as usize);
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// The text of item `index` of the tuple `obj.<attr>` if it is a str, else
/// None (error cleared).
unsafe fn attr_item_text(
    obj: *mut ffi::PyObject,
    attr: &std::ffi::CStr,
    index: ffi::Py_ssize_t,
) -> Option<String> {
    let tuple = ffi::PyObject_GetAttrString(obj, attr.as_ptr());
    if tuple.is_null() {
        clear_error();
        return None;
    }
    let text = if ffi::PyTuple_Check(tuple) != 0 && ffi::PyTuple_Size(tuple) > index {
        str_text(ffi::PyTuple_GetItem(tuple, index))
    } else {
        None
    };
    ffi::Py_DECREF(tuple);
    text
}

/// `obj.<attr>` if it is an int that fits, else None (error cleared).
unsafe fn attr_int(obj: *mut ffi::PyObject, attr: &std::ffi::CStr) -> Option<i64> {
    let value = ffi::PyObject_GetAttrString(obj, attr.as_ptr());
    if value.is_null() {
        clear_error();
        return None;
    }
    let n = if ffi::PyLong_Check(value) != 0 {
        let n = ffi::PyLong_AsLongLong(value);
        if n == -1 && !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear();
            None
        } else {
            Some(n)
        }
    } else {
        None
    };
    ffi::Py_DECREF(value);
    n
}

/// Whether a code object is one of the event loop's methods that put a
/// callback on the loop's ready queue, `BaseEventLoop.call_soon(self,
/// callback, ...)` or `call_soon_threadsafe`: asyncio's futures schedule a
/// waiting task's wakeup through them (the C `_asyncio` futures too, which
/// call the loop's `call_soon` method), and a task its own next step. The
/// first two arguments' names are checked as well: the hook reads
/// `callback` as local 1.
unsafe fn schedules_callbacks(code: *mut ffi::PyObject, name: &str, file: &str) -> bool {
    let method = matches!(
        name,
        "BaseEventLoop.call_soon" | "BaseEventLoop.call_soon_threadsafe"
    );
    if !method
        || !(file.ends_with("asyncio/base_events.py") || file.ends_with("asyncio\\base_events.py"))
    {
        return false;
    }
    if attr_int(code, c"co_argcount").unwrap_or(0) < 2 {
        return false;
    }
    attr_item_text(code, c"co_varnames", 1).is_some_and(|a| a == "callback")
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
    let name = if ffi::PyCFunction_Check(callable) != 0 {
        cfunction_name(callable)
    } else {
        // A method descriptor: name the method bound to `self_arg`, as
        // cProfile does (it binds one on every call; we only to name it).
        match (*ffi::Py_TYPE(callable)).tp_descr_get {
            Some(get) => {
                let bound = get(callable, self_arg, ffi::Py_TYPE(self_arg).cast());
                if bound.is_null() {
                    None
                } else {
                    let name = if ffi::PyCFunction_Check(bound) != 0 {
                        cfunction_name(bound)
                    } else {
                        None
                    };
                    ffi::Py_DECREF(bound);
                    name
                }
            }
            None => None,
        }
    };
    clear_error();
    let name = name.unwrap_or_else(|| "<built-in function>".to_owned());
    // This extension's functions (`mtrace._mtrace.stop`, ...) are mtrace's own.
    let own = ["<mtrace._mtrace.", "<built-in method mtrace._mtrace."]
        .iter()
        .any(|prefix| name.starts_with(prefix));
    let id = if own {
        OWN
    } else {
        mtrace::register_function(&name, "~", 0, "").0
    };
    lock(&CFUNCS).get_or_insert_with(ptr_map).insert(def, id);
    id
}

/// cProfile's `normalizeUserObj`: `<built-in method builtins.len>`,
/// `<method 'append' of 'list' objects>`, `<_io.open>`, `<len>`; None if a
/// look-up failed (its error cleared).
unsafe fn cfunction_name(func: *mut ffi::PyObject) -> Option<String> {
    let f = &*func.cast::<ffi::PyCFunctionObject>();
    let ml_name = std::ffi::CStr::from_ptr((*f.m_ml).ml_name)
        .to_string_lossy()
        .into_owned();
    if f.m_self.is_null() {
        let module = if f.m_module.is_null() {
            None
        } else if ffi::PyUnicode_Check(f.m_module) != 0 {
            str_text(f.m_module)
        } else {
            attr_text(f.m_module, c"__name__")
        };
        return Some(match module {
            Some(m) if m != "builtins" => format!("<{m}.{ml_name}>"),
            _ => format!("<{ml_name}>"),
        });
    }
    // repr(getattr(type(self), name)), looked up along the MRO without descriptors.
    if let Some(found) = type_lookup(ffi::Py_TYPE(f.m_self), &ml_name) {
        let repr = ffi::PyObject_Repr(found);
        ffi::Py_DECREF(found);
        if repr.is_null() {
            clear_error();
            return None;
        }
        let text = str_text(repr);
        ffi::Py_DECREF(repr);
        return text;
    }
    let module = if f.m_module.is_null() {
        None
    } else {
        str_text(f.m_module)
    };
    Some(match module {
        Some(m) => format!("<built-in method {m}.{ml_name}>"),
        None => format!("<built-in method {ml_name}>"),
    })
}

/// The attribute `name` of type `ty` as its class dictionaries hold it (a
/// new reference), looked up along its MRO, without calling descriptors;
/// None if no class has it (no error left set).
unsafe fn type_lookup(ty: *mut ffi::PyTypeObject, name: &str) -> Option<*mut ffi::PyObject> {
    let key = ffi::PyUnicode_FromStringAndSize(name.as_ptr().cast(), name.len() as ffi::Py_ssize_t);
    if key.is_null() {
        clear_error();
        return None;
    }
    let mro = (*ty).tp_mro;
    let mut found = None;
    if !mro.is_null() && ffi::PyTuple_Check(mro) != 0 {
        for i in 0..ffi::PyTuple_Size(mro) {
            let cls = ffi::PyTuple_GetItem(mro, i);
            if cls.is_null() || ffi::PyType_Check(cls) == 0 {
                continue;
            }
            let dict = type_dict(cls.cast());
            if dict.is_null() {
                continue;
            }
            let mut value = std::ptr::null_mut();
            let got = ffi::compat::PyDict_GetItemRef(dict, key, &mut value);
            ffi::Py_DECREF(dict);
            if got > 0 {
                found = Some(value);
                break;
            }
            clear_error();
        }
    }
    ffi::Py_DECREF(key);
    found
}

/// A class's own dictionary (a new reference), or null: 3.12 keeps those
/// of the built-in types per interpreter, behind `PyType_GetDict`.
unsafe fn type_dict(ty: *mut ffi::PyTypeObject) -> *mut ffi::PyObject {
    #[cfg(Py_3_12)]
    {
        ffi::PyType_GetDict(ty)
    }
    #[cfg(not(Py_3_12))]
    {
        let dict = (*ty).tp_dict;
        if !dict.is_null() {
            ffi::Py_INCREF(dict);
        }
        dict
    }
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
