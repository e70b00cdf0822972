"""mtrace for Python: a multi-thread-aware drop-in for cProfile.

cProfile keeps one stack and profiles only the thread that enabled it. mtrace
records every Python thread (including threads started later) into an mtrace
trace file, each on its own stack, through a C-level profile function (the
mechanism cProfile uses). ``mtanalyze TRACE`` reads the file (with the ``gil``
clock, which the trace asks for), and ``mtanalyze TRACE --format pstats -o
out.prof`` writes a file ``pstats.Stats``, snakeviz and gprof2dot load.

    import mtrace

    with mtrace.profile("trace.bin"):
        work()

    mtrace.enable("trace.bin")
    work()
    mtrace.disable()

Or, from the shell, like ``python -m cProfile``::

    python -m mtrace -o trace.bin script.py args...
    python -m mtrace -o trace.bin -m package.module args...
"""

import contextlib
import sys
import threading

from . import _mtrace

__all__ = [
    "enable",
    "disable",
    "profile",
    "is_enabled",
    "set_context_id_callback",
    "DEFAULT_OUTPUT",
]

#: The trace file written when no path is given.
DEFAULT_OUTPUT = "mtrace.bin"


def enable(path=DEFAULT_OUTPUT, *, capacity=None, ring=False, builtins=True):
    """Start recording into ``path``.

    Every thread started afterwards through ``threading`` is recorded, and so
    is the calling thread. Threads already running are recorded too on Python
    3.12+ (``PyEval_SetProfileAllThreads``); on older versions they are not
    (there is no supported way to reach them).

    ``capacity``: bytes for events (``"256M"`` by default; ``"1G"``...).
    ``ring``: keep the end of the run rather than its beginning when full.
    ``builtins``: also record C functions called from Python, as cProfile does.
    """
    _mtrace.start(str(path), capacity=capacity, ring=ring, builtins=builtins)
    threading.setprofile(_mtrace.thread_hook)
    _mtrace.install(all_threads=True)


def disable():
    """Stop recording and finish the file; returns a summary dict
    (``path``, ``events``, ``dropped_events``, ``threads``), or None if
    nothing was recording."""
    threading.setprofile(None)
    _mtrace.uninstall(all_threads=True)
    return _mtrace.stop()


def is_enabled():
    """Whether a recording runs."""
    return _mtrace.is_recording()


def set_context_id_callback(callback):
    """Give each context its own stack in the trace, as yappi does.

    ``callback()`` returns an int naming the context that runs (a greenlet's
    or an asyncio task's ``id``), or None for the thread's own stack. It is
    called on every event, so it should be cheap; None removes it. Example::

        def current_task_id():
            try:
                task = asyncio.current_task()
            except RuntimeError:
                return None
            return id(task) if task is not None else None

        mtrace.set_context_id_callback(current_task_id)
    """
    _mtrace.set_context_id_callback(callback)


@contextlib.contextmanager
def profile(path=DEFAULT_OUTPUT, **options):
    """Record the ``with`` block (and every thread it starts) into ``path``."""
    enable(path, **options)
    try:
        yield
    finally:
        disable()
