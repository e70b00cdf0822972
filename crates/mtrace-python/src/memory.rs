//! A trace recorded into memory, as `disable()` hands it to Python
//! (`mtrace.MemoryTrace` wraps it): the recorder's view of the trace file
//! ([`mtrace::MemoryTrace`]), which the analysis reads in place, and a
//! descriptor of it made only when Python asks for a path.
//!
//! A profile per request analyzes its trace once (`pstats.Stats(p)`)
//! and drops it: reading the recorder's own mapping spares it a
//! descriptor, a second mapping (whose page faults and unmapping cost
//! more than the rest of the analysis) and the system calls around them.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

/// A trace in memory; closed (given back) by `close()` or when collected.
#[pyclass(module = "mtrace._mtrace", name = "MemoryTraceHandle", frozen)]
pub(crate) struct MemoryTraceHandle {
    held: Mutex<Option<Held>>,
}

struct Held {
    view: mtrace::MemoryTrace,
    /// The descriptor Python's path reads, once asked for.
    descriptor: Option<File>,
}

impl MemoryTraceHandle {
    pub(crate) fn new(view: mtrace::MemoryTrace) -> MemoryTraceHandle {
        MemoryTraceHandle {
            held: Mutex::new(Some(Held {
                view,
                descriptor: None,
            })),
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
impl MemoryTraceHandle {
    /// The number of a descriptor of the trace (the same at each call),
    /// read as `/proc/self/fd/N` while the handle is open. ValueError once
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

impl Drop for MemoryTraceHandle {
    fn drop(&mut self) {
        self.close();
    }
}
