"""mtrace for Python: a multi-thread-aware drop-in for cProfile.

cProfile keeps one stack and profiles only the thread that enabled it. mtrace
records every Python thread into an mtrace trace file, each on its own stack,
and each asyncio task and greenlet on a stack of its own, through C-level
callbacks (``sys.monitoring`` on 3.12+, a profile function on 3.11). The
analyzer is in the package too: ``mtrace.analyze(TRACE)`` returns the
report as Python objects, and the ``mtanalyze`` command (installed with the
package) prints it, diffs two traces and exports them.

From the shell, as ``python -m cProfile``::

    python -m mtrace script.py args...          # prints the table at the end
    python -m mtrace -s cumtime -m package.module args...
    python -m mtrace -o out.prof script.py      # a pstats file (snakeviz out.prof)

cProfile's API::

    profile = mtrace.Profile()
    profile.runcall(work)
    profile.print_stats("cumtime")
    pstats.Stats(profile).sort_stats("tottime").print_stats(10)

Recording into a trace file, and reading it::

    with mtrace.profile("trace.bin"):
        work()
    report = mtrace.analyze("trace.bin")
    print(report.function("work").cumtime_ns)
"""

from __future__ import annotations

import contextlib
import os
import sys

from . import _children, _mtrace
from ._profiler import Profile, run, runctx
from ._report import Report, Row, TraceError, analyze

__all__ = [
    "enable",
    "disable",
    "profile",
    "is_enabled",
    "pause",
    "resume",
    "is_paused",
    "mark",
    "set_context_id_callback",
    "DEFAULT_OUTPUT",
    "MemoryTrace",
    "Profile",
    "run",
    "runctx",
    "analyze",
    "Report",
    "Row",
    "TraceError",
]

# What type checkers read (the package ships py.typed): names imported
# for them alone, not at run time, where `typing`'s import would add to
# every recorded program's start-up; the modules' annotations are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import importlib.machinery
    import types
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any, Self

# This package's code is mtrace's own: never recorded, so no table shows
# the frames of enable(), disable() or the greenlet hooks.
_mtrace.set_own_folder(os.path.join(os.path.dirname(os.path.abspath(__file__)), ""))

#: The trace file written when no path is given.
DEFAULT_OUTPUT = "mtrace.bin"

# greenlet: each greenlet on a stack of its own, through greenlet.settrace.
_greenlet_state: dict[str, Any] = {"module": None, "previous": None, "watcher": None}


def _greenlet_tracer(event: str, args: object) -> None:
    _mtrace.greenlet_trace(event, args)
    previous = _greenlet_state["previous"]
    if previous is not None:
        previous(event, args)


def _trace_greenlets() -> None:
    module = sys.modules.get("greenlet")
    if module is not None:
        _install_greenlet_tracer(module)
    elif _greenlet_state["watcher"] is None:
        # Not imported yet (python -m mtrace starts recording first): trace
        # it as soon as the program imports it.
        watcher = _GreenletImportWatcher()
        _greenlet_state["watcher"] = watcher
        sys.meta_path.insert(0, watcher)


def _install_greenlet_tracer(module: types.ModuleType) -> None:
    settrace = getattr(module, "settrace", None)
    if settrace is None or _greenlet_state["module"] is not None:
        return
    _greenlet_state["previous"] = settrace(_greenlet_tracer)
    _greenlet_state["module"] = module


def _untrace_greenlets() -> None:
    watcher = _greenlet_state["watcher"]
    if watcher is not None:
        _greenlet_state["watcher"] = None
        if watcher in sys.meta_path:
            sys.meta_path.remove(watcher)
    module = _greenlet_state["module"]
    if module is not None:
        module.settrace(_greenlet_state["previous"])
        _greenlet_state["module"] = None
        _greenlet_state["previous"] = None


class _GreenletImportWatcher:
    """A meta path finder that only watches for ``import greenlet`` and
    installs the tracer once the module has run."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name != "greenlet":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if _greenlet_state["watcher"] is self:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        class Loader:
            def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
                return loader.create_module(spec)

            def exec_module(self, module: types.ModuleType) -> None:
                exec_module(module)
                if _greenlet_state["watcher"] is not None:
                    _install_greenlet_tracer(module)

        # A loader by its two methods, not an importlib.abc.Loader subclass.
        spec.loader = Loader()  # type: ignore[assignment]
        return spec


def enable(path: str | os.PathLike[str] = DEFAULT_OUTPUT, *, capacity: str | None = None,
           ring: bool = False, builtins: bool | str = True, tasks: bool = True,
           meta_capacity: str | None = None, children: bool | None = None, armed: bool = False,
           signal: str | None = None, rotate: str | None = None, keep: int | None = None,
           memory: bool = False, _root: str | None = None, _open_frames: bool = False) -> None:
    """Start recording into ``path``.

    Every thread is recorded: the calling thread, threads already running,
    and threads started later (``threading``, ``_thread``, or a C library's
    own threads calling into Python).

    ``capacity``: the most bytes of events (``"64M"``, ``"1G"``...): the file
    grows up to it as the run needs; by default up to half the free space of
    the disk the file is on (at least 256M). With ``ring``: the ring's fixed
    size (256M by default).
    ``ring``: keep the end of the run rather than its beginning when full.
    ``builtins``: also record C functions called from Python, as cProfile
    does (True); False: not; ``"fast"`` (3.12+): a call site that called a
    Python function is no longer watched for C calls, which saves a third
    of the callbacks of call-heavy code but misses the built-ins such a site
    calls later (a callback parameter that is sometimes a built-in).
    ``tasks``: run each asyncio task on a stack of its own, named by the
    task's name; a coroutine is then one call from its start to its return
    (with ``tasks=False``, each resumption is a call, as in cProfile).
    ``meta_capacity``: bytes of the first region for the names of
    functions, threads and tasks (``"32K"`` by default). It is no limit:
    names past it go on in the file's chunk slots as the file grows. Names
    are lost only when the file cannot grow (or a ring has given a quarter
    of its slots to names); ``mtanalyze`` then shows them by id and warns
    ``dropped_metadata``.
    ``children``: child processes record too, each into ``NAME.pid<PID>.EXT``
    beside ``path`` (forks, ``multiprocessing``'s every start method,
    ``subprocess`` runs of Python), and ``mtanalyze path`` reports the whole
    process tree; False: this process only.
    ``armed``: start paused, armed but idle: nothing is recorded until
    ``mtrace.resume()`` (or the signal). ``signal``: a signal (``"USR2"``)
    that switches recording on and off from outside, ``kill -USR2 PID``;
    its handler replaces any the program installs. Each recorded stretch is
    a mark pair ``mtrace:resume:K`` / ``mtrace:pause:K``.
    ``rotate``: a size (``"256M"``) or an age (``"60s"``, ``"5min"``; a bare
    ``m`` is MiB) at which the recording moves on to the next file of a
    series, ``NAME.1.EXT``, ``NAME.2.EXT``, ... beside ``path``, each a
    complete trace; ``mtanalyze path`` reads the series as one. ``keep``:
    keep only the newest ``keep`` files of it, deleting older ones.
    ``memory``: record into memory, no file (Linux); ``path`` only names
    the trace. ``disable()``'s summary then holds it as ``trace``, a
    ``MemoryTrace``. Memory is scarcer than disk: ``capacity`` is 1G by
    default, and this process alone is recorded (``children`` False; True
    is refused). For short recordings, such as a profile per request.
    """
    path, options, armed = _prepare(path, capacity=capacity, ring=ring, builtins=builtins,
                                    tasks=tasks, meta_capacity=meta_capacity,
                                    children=children, armed=armed, signal=signal,
                                    rotate=rotate, keep=keep, memory=memory, _root=_root,
                                    _open_frames=_open_frames)
    try:
        _mtrace.start(path, **options)
    except BaseException:
        _unprepare(armed)
        raise


# Everything around the start and the stop is done before the start and
# after the stop, in functions of their own: the functions on the stack
# when the recording starts or stops (`enable`, `disable`, `Profile`'s) are
# instrumented by `sys.monitoring` there, at a cost that grows with their
# code, and a profile per request pays it twice a request.
def _prepare(path: str | os.PathLike[str], *, capacity: str | None = None, ring: bool = False,
             builtins: bool | str = True, tasks: bool = True, meta_capacity: str | None = None,
             children: bool | None = None, armed: bool = False, signal: str | None = None,
             rotate: str | None = None, keep: int | None = None, memory: bool = False,
             _root: str | None = None,
             _open_frames: bool = False) -> tuple[str, dict[str, Any], bool]:
    """``enable``'s arguments checked and the hooks set up: returns the
    recorder's path and options, and whether hooks were set up here
    (``_unprepare`` takes them down if the start fails)."""
    if memory:
        if children:
            raise ValueError("a recording into memory records this process only: "
                             "children=True needs a file")
        children = False
    elif children is None:
        children = True
    options: dict[str, Any] = dict(capacity=capacity, ring=ring, builtins=builtins, tasks=tasks,
                   meta_capacity=meta_capacity, armed=armed, signal=signal,
                   rotate=rotate, keep=keep)
    if memory:
        options["memory"] = True
    if _open_frames:
        # `python -m mtrace attach`: the frames running when it attached.
        options["open_frames"] = True
    # Armed before the recording starts, so that its work is not recorded
    # (nothing of mtrace's runs after the start: the calls its own code
    # makes would be in the tables).
    # If this start fails because a recording runs, that recording keeps
    # its children armed and its greenlet hooks.
    running = _mtrace.is_recording()
    if children and not running:
        _children.arm(str(path) if _root is None else _root, options, first=_root is None)
    if not running:
        _trace_greenlets()
    return str(path), options, not running


def _unprepare(prepared_here: bool) -> None:
    """Takes down what ``_prepare`` set up, after a start that failed."""
    if prepared_here:
        _untrace_greenlets()
        _children.disarm()


def disable() -> dict[str, Any] | None:
    """Stop recording and finish the file; returns a summary dict
    (``path``, ``files``: more than 1 when it rotated, ``events``,
    ``dropped_events``, ``threads``,
    ``growth_failure``: why the file stopped growing before its maximum,
    such as a full disk, or None; for a recording into memory ``trace``, its
    ``MemoryTrace``), or None if nothing was recording."""
    return _stopped(_mtrace.stop())


def _stopped(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """The rest of ``disable`` once the recording has stopped (so that none
    of it is recorded): hooks taken down, the summary completed."""
    # Checked here, not in a call: after a recording into memory (a
    # profile per request) there is nothing to take down.
    if _children._state["armed"] is not None:
        _children.disarm()
    if _greenlet_state["watcher"] is not None or _greenlet_state["module"] is not None:
        _untrace_greenlets()
    return summary


#: A trace recorded into memory (``enable(memory=True)``): the extension's
#: own class (``src/memory.rs``), which a profile per request makes once per
#: request with no Python frame. ``path`` reads as its trace file
#: (``/proc/self/fd/N``), for ``mtrace.analyze``, ``mtanalyze`` run in this
#: process and ``open()``, as long as it lives: the memory is given back
#: when it is collected or closed (``close()``, or ``with``).
#: ``os.fspath()`` gives ``path``.
MemoryTrace = _mtrace.MemoryTrace


def is_enabled() -> bool:
    """Whether a recording runs (paused or not)."""
    return _mtrace.is_recording()


def pause() -> bool:
    """Pause the recording: nothing is recorded until ``resume()``, but
    the frames each thread opens and closes are still followed, so the
    resume knows those open then (they count from the resume on). Writes
    the mark ``mtrace:pause:K``. False if nothing records or it was paused."""
    return _mtrace.pause()


def resume() -> bool:
    """Resume a paused (or armed) recording: writes the mark
    ``mtrace:resume:K`` (K = 1, 2, ...), so ``mtanalyze TRACE --from
    mark:mtrace:resume:1 --to mark:mtrace:pause:1`` selects the stretch.
    False if nothing was paused."""
    return _mtrace.resume()


def is_paused() -> bool:
    """Whether the recording is paused (or armed and not resumed yet)."""
    return _mtrace.is_paused()


def mark(name: str) -> None:
    """Record a named instant of the run: a *mark* (``"warm-up done"``).

    The mark is written into the trace with the recording's clock and the
    calling thread; ``mtanalyze TRACE --format json`` lists marks under
    ``marks`` (name, ``time_ns`` from the start of the trace, ``thread``),
    and ``mtanalyze check TRACE`` prints them. Names need not be unique.
    Does nothing when nothing is recording. ``name`` must be a ``str``
    (``TypeError`` otherwise). Example::

        mtrace.enable("trace.bin")
        warm_up()
        mtrace.mark("warm-up done")
        serve()
        mtrace.disable()
    """
    _mtrace.mark(name)


def set_context_id_callback(callback: Callable[[], int | None] | None) -> None:
    """Give each context of another scheduler its own stack, as yappi does.

    asyncio tasks and greenlets get stacks of their own without this. For
    other schedulers, ``callback()`` returns an int naming the context that
    runs, or None for the thread's own stack. It is called on every event,
    so it should be cheap; None removes it. While it is set, asyncio tasks
    get no stacks of their own (the callback decides) and coroutines count
    a call per resumption. Example::

        def current_fiber_id():
            fiber = my_scheduler.current()
            return id(fiber) if fiber is not None else None

        mtrace.set_context_id_callback(current_fiber_id)
    """
    _mtrace.set_context_id_callback(callback)


@contextlib.contextmanager
def profile(path: str | os.PathLike[str] = DEFAULT_OUTPUT, **options: Any) -> Iterator[None]:
    """Record the ``with`` block (and every thread it starts) into ``path``."""
    enable(path, **options)
    try:
        yield
    finally:
        disable()
