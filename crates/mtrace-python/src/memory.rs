//! A trace recorded into memory, as `disable()` hands it to Python
//! (`mtrace.MemoryTrace`): the recorder's view of the trace file
//! ([`mtrace::MemoryTrace`]), which the analysis reads in place, and a
//! descriptor of it made only when Python asks for a path.
//!
//! A profile per request analyzes its trace once (`pstats.Stats(p)`)
//! and drops it: reading the recorder's own mapping spares it a
//! descriptor, a second mapping (whose page faults and unmapping cost
//! more than the rest of the analysis) and the system calls around them.
//! The class is the extension's own, not a Python class around a handle:
//! a profile per request makes one per request, and a Python class's
//! methods are frames that `sys.monitoring` instruments anew after each
//! `enable()` and `disable()`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

/// A trace recorded into memory (`enable(memory=True)`).
///
/// `path` reads as its trace file (`/proc/self/fd/N`), for
/// `mtrace.analyze`, `mtanalyze` run in this process and `open()`, as long
/// as this object lives: the memory is given back when it is collected or
/// closed (`close()`, or `with`). `os.fspath()` gives `path`. A profile's
/// statistics read the trace where the recorder wrote it, without
/// `path`'s descriptor, which is made only when `path` is first asked for.
#[pyclass(module = "mtrace", name = "MemoryTrace", frozen)]
pub(crate) struct PyMemoryTrace {
    held: Mutex<Option<Held>>,
    /// The descriptor number `path` named, once asked for (-1 before): the
    /// path it gave stays its path after `close()`.
    named_fd: AtomicI32,
}

struct Held {
    view: mtrace::MemoryTrace,
    /// The descriptor Python's path reads, once asked for.
    descriptor: Option<File>,
}

impl PyMemoryTrace {
    pub(crate) fn new(view: mtrace::MemoryTrace) -> PyMemoryTrace {
        PyMemoryTrace {
            held: Mutex::new(Some(Held {
                view,
                descriptor: None,
            })),
            named_fd: AtomicI32::new(-1),
        }
    }

    /// The view, for an analysis; None once closed.
    pub(crate) fn view(&self) -> Option<mtrace::MemoryTrace> {
        lock(&self.held).as_ref().map(|h| h.view.clone())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[pymethods]
impl PyMemoryTrace {
    /// `/proc/self/fd/N`, which reads the trace until `close()`
    /// (ValueError if it was closed before `path` was first asked for).
    #[getter]
    fn path(&self) -> PyResult<String> {
        let mut fd = self.named_fd.load(Ordering::Relaxed);
        if fd < 0 {
            fd = self.fd()?;
            self.named_fd.store(fd, Ordering::Relaxed);
        }
        Ok(format!("/proc/self/fd/{fd}"))
    }

    fn __fspath__(&self) -> PyResult<String> {
        self.path()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        _type: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) {
        self.close();
    }

    fn __repr__(&self) -> String {
        let state = if self.open() { "open" } else { "closed" };
        match self.named_fd.load(Ordering::Relaxed) {
            fd if fd >= 0 => format!("<mtrace.MemoryTrace /proc/self/fd/{fd} ({state})>"),
            _ => format!("<mtrace.MemoryTrace ({state})>"),
        }
    }

    /// The number of a descriptor of the trace (the same at each call),
    /// read as `/proc/self/fd/N` while the trace is held. ValueError once
    /// closed.
    fn fd(&self) -> PyResult<i32> {
        let mut held = lock(&self.held);
        let held = held
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the trace in memory is closed"))?;
        if held.descriptor.is_none() {
            let descriptor = held
                .view
                .descriptor()
                .map_err(|e| PyOSError::new_err(format!("the trace in memory: {e}")))?;
            held.descriptor = Some(descriptor);
        }
        Ok(held.descriptor.as_ref().map_or(-1, |d| d.as_raw_fd()))
    }

    /// Gives the trace back: its descriptor (if one was made) closes, and
    /// its memory may serve the next recording into memory. Idempotent.
    fn close(&self) {
        let held = lock(&self.held).take();
        if let Some(Held {
            descriptor: Some(descriptor),
            ..
        }) = held
        {
            mtrace::give_back_memory_trace(descriptor);
        }
    }

    /// Whether the trace is still held (not closed).
    #[getter]
    fn open(&self) -> bool {
        lock(&self.held).is_some()
    }
}

impl Drop for PyMemoryTrace {
    fn drop(&mut self) {
        self.close();
    }
}
