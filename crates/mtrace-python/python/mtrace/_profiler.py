"""cProfile's API on mtrace: ``Profile``, ``run`` and ``runctx``.

Code written against ``cProfile.Profile`` switches by its import: the same
methods, ``pstats.Stats(profile)`` (which reads ``create_stats()`` and
``.stats``), ``dump_stats`` writing what ``pstats``, snakeviz and every
cProfile tool read. The numbers are mtrace's: every thread is recorded, each
thread, asyncio task and greenlet on a stack of its own, and the time other
stacks ran is cut out of each frame (the ``gil`` clock).

Each ``enable()``/``disable()`` records one trace, in memory unless the
profile was given a ``path`` (a profile per web request makes no file);
``create_stats`` sums them, through the Rust analyzer's pstats output
(``mtanalyze TRACE... --format pstats``), so the table and the file agree
with ``mtanalyze``.

Where it takes cProfile's place it answers as cProfile does on the Python
running: its exceptions for a second ``enable()`` and for a profile that
recorded nothing, every sort its ``print_stats`` takes (pstats itself
judges them), and ``Profile(timer)``: a timer other than the wall clocks
mtrace's own clock stands for is cProfile's own profiler behind this API.
"""

import marshal
import os
import sys
import time
import weakref

from . import _cli, _mtrace

# No ``from __future__ import annotations`` in this module: ``runctx``'s ``exec`` would
# inherit it, and the profiled code must compile as under plain python.
# What only a type checker imports is named in quoted annotations.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import cProfile
    from collections.abc import Callable, Mapping, Sequence
    from typing import IO, Any, ParamSpec, Self, TypeAlias, TypeVar

    from . import MemoryTrace

    _P = ParamSpec("_P")
    _T = TypeVar("_T")
    #: A function in pstats' dict: ``(file, line, name)``.
    _Label: TypeAlias = tuple[str, int, str]
    #: pstats' dict (cProfile's ``Profile.stats``): for each function, ``(cc,
    #: nc, tt, ct, callers)``, callers as ``{label: (cc, nc, tt, ct)}``.
    _Stats: TypeAlias = dict[_Label, Any]
    #: What cProfile's ``print_stats`` takes (on 3.13+ a tuple of them too).
    _Sort: TypeAlias = str | int | tuple[str | int, ...]
    #: A trace: its path.
    _Trace: TypeAlias = str | os.PathLike[str] | MemoryTrace

# The package, for its enable() and disable(): an attribute read makes no
# event, where `from . import disable` in a method would run importlib's
# `_handle_fromlist` (with its calls of hasattr, isinstance, ...) while
# recording, and put them in the profile's table.
_package: "Any" = sys.modules[__package__]

__all__ = ["Profile", "run", "runctx", "SORT_KEYS", "sort_name"]

#: The sort names ``python -m mtrace -s`` takes: ``python -m cProfile``'s
#: (the names of ``pstats.Stats.sort_arg_dict_default``) and mtrace's
#: ``paused``. ``print_stats`` and ``run`` take more: whatever cProfile's
#: take on the Python running (see ``sort_name``).
SORT_KEYS = ("calls", "cumtime", "cumulative", "filename", "line", "module", "name", "ncalls",
             "nfl", "paused", "pcalls", "stdname", "time", "tottime")
#: mtrace's own sort, which pstats does not know.
_PAUSED = "paused"
#: cProfile's ``print_stats`` reads a tuple as several keys from 3.13 on;
#: before, a tuple is one (unknown) key.
_SEVERAL_KEYS = sys.version_info >= (3, 13)
#: On 3.12+ cProfile holds the one profiler id of ``sys.monitoring``, so a
#: second ``enable()`` (of the same profiler or another) raises; on 3.11 it
#: sets the profile function, which a second one silently replaces.
_EXCLUSIVE = sys.version_info >= (3, 12)
#: What cProfile 3.12 and 3.13 say then.
_ANOTHER_TOOL = "Another profiling tool is already active"
#: The standard clocks that mean what mtrace's own clock means (monotonic
#: wall time): ``Profile(timer)`` with one of them records with mtrace.
_WALL_CLOCKS = (time.perf_counter, time.perf_counter_ns, time.monotonic, time.monotonic_ns)


def _sort_fields(sort: "_Sort") -> "tuple[Any, ...]":
    """The arguments cProfile's ``print_stats`` gives ``sort_stats``."""
    return tuple(sort) if _SEVERAL_KEYS and isinstance(sort, tuple) else (sort,)


def sort_name(sort: "_Sort") -> str | None:
    """The ``mtanalyze --sort`` value of a cProfile sort, or None for a
    sort mtanalyze cannot express (several keys, or none: ``()`` on 3.13+),
    which pstats then orders.

    ``sort`` is what cProfile's ``print_stats`` takes on the Python running
    (a name of ``pstats.Stats.sort_arg_dict_default`` or its unique
    abbreviation, -1 standard name, 0 calls, 1 time, 2 cumulative, a
    ``pstats.SortKey``; on 3.13+ a tuple of them), or ``"paused"``. A sort
    cProfile refuses raises what cProfile raises (pstats' ``KeyError`` or
    ``TypeError``), as pstats itself is asked."""
    import pstats

    if isinstance(sort, str) and sort == _PAUSED:
        return _PAUSED
    fields = _sort_fields(sort)
    # An empty Stats sorts nothing, but refuses what cProfile's would.
    pstats.Stats().sort_stats(*fields)
    if len(fields) != 1:
        return None
    (word,) = fields
    if isinstance(word, int):
        # pstats' own reading of the old profiler's numbers (True is 1).
        word = {-1: "stdname", 0: "calls", 1: "time", 2: "cumulative"}[word]
    word = getattr(word, "value", word)  # a pstats.SortKey is a str enum
    # An abbreviation ("tot") is the name whose sort it is; names that
    # share a sort ("time", "tottime") are the same order in mtanalyze too.
    order = pstats.Stats().get_sort_arg_defs()[word]
    return next(name for name, value in pstats.Stats.sort_arg_dict_default.items()
                if value == order)


def print_table(traces: "Sequence[_Trace]", sort: "_Sort" = -1, clock: str | None = None,
                file: "IO[str] | None" = None) -> int:
    """Print the report of ``traces`` (their sum) as ``mtanalyze``'s table,
    ordered by ``sort`` (see ``sort_name``), to ``file`` (``sys.stdout``).
    A sort of several keys, which mtanalyze has no order for, prints
    pstats' table of the same statistics instead, as cProfile prints it."""
    name = sort_name(sort)
    stream = sys.stdout if file is None else file
    if name is None:
        import pstats

        stats = _Snapshot(pstats_dict(traces, clock))
        pstats.Stats(stats, stream=stream).strip_dirs().sort_stats(  # type: ignore[arg-type]
            *_sort_fields(sort)).print_stats()
        return 0
    args = [*traces, "--sort", name]
    if clock is not None:
        args += ["--clock", clock]
    status, out = _cli.run(args, capture=True)
    stream.write(out.decode("utf-8", "replace"))
    stream.flush()
    return status


class _Snapshot:
    """Statistics as ``pstats.Stats`` reads them from a profiler."""

    def __init__(self, stats: "_Stats") -> None:
        self.stats = stats

    def create_stats(self) -> None:
        pass


def pstats_dict(traces: "Sequence[_Trace]", clock: str | None = None,
                children: bool = True) -> "_Stats":
    """The sum of ``traces`` as the dict ``pstats`` reads (cProfile's
    ``Profile.stats``): ``{(file, line, name): (cc, nc, tt, ct, callers)}``.
    With ``children``, the traces' child processes and rotated files count
    too, as ``mtanalyze TRACE...`` counts them; without, these traces only
    (a profile's traces in memory), analyzed without the command line.
    ``TraceError`` if they cannot be analyzed."""
    if not traces:
        return {}
    if not children:
        # The extension takes a trace in memory as it is (read in place, no
        # path opened) and a path as `os.fspath` gives it; it builds the
        # dict itself, with no bytes between.
        return _mtrace.pstats(traces, clock)
    from ._report import TraceError

    # The pstats file's bytes in memory (`-o -`): no file to write, read
    # back and remove for each `pstats.Stats(profile)`.
    args = [*(os.fspath(t) for t in traces), "--format", "pstats", "-o", "-"]
    if clock is not None:
        args += ["--clock", clock]
    status, out = _cli.run(args, capture=True)
    if status != 0 or not out:
        raise TraceError(f"mtanalyze could not read {', '.join(map(str, traces))} "
                         f"(exit status {status}; its message is on stderr)")
    return marshal.loads(out)  # type: ignore[no-any-return]


#: How many traces in memory a profile holds: past it, they are summed
#: into its statistics and given back (each holds a descriptor and its
#: pages; a profile enabled and disabled around every request of a long
#: run would otherwise hold them all).
_MEMORY_TRACES_HELD = 16


def _sum_stats(into: "_Stats", stats: "_Stats") -> "_Stats":
    """Adds pstats dict ``stats`` to ``into`` (in place), as
    ``pstats.Stats.add`` sums profiles."""
    import pstats

    for func, row in stats.items():
        into[func] = pstats.add_func_stats(  # type: ignore[attr-defined]
            into[func], row) if func in into else row
    return into


#: The ``Profile`` whose recording runs (a weak reference), which a second
#: profile's ``enable()`` finds as cProfile's finds the profiler active.
_owner: "Callable[[], Profile | None] | None" = None


class Profile:
    """``cProfile.Profile`` with mtrace's recorder.

    ``Profile(timer=None, timeunit=0.0, subcalls=True, builtins=True)``:
    ``enable()`` starts recording every thread, ``disable()`` stops;
    ``runcall(f, ...)``, ``run(cmd)``, ``runctx(cmd, globals, locals)`` and
    ``with Profile() as p:`` record around a call; ``create_stats()`` fills
    ``.stats``; ``print_stats(sort=-1)`` prints mtanalyze's table (with the
    ``paused`` column); ``dump_stats(file)`` writes a pstats file;
    ``pstats.Stats(p)`` works as on cProfile's.

    Beyond cProfile's arguments: ``path``, the trace file of the first
    recording (later ones: ``NAME-2.bin``, ...; kept), child processes
    recorded beside it. By default (no ``path``) each recording is kept in
    memory (``mtrace.enable(memory=True)``: no file, this process only, as
    cProfile's) as long as the profile lives; past 16 of them, they are
    summed into its statistics and given back (after that, ``print_stats``
    prints pstats' table, as cProfile). ``trace_paths`` lists the traces
    held (for one in memory, a ``/proc/self/fd/N`` path that reads while
    the profile lives). ``clock``: the clock of the statistics (default:
    the one the trace asks for). ``tasks``, ``capacity``, ``ring``,
    ``meta_capacity``: as ``mtrace.enable``.

    ``timer``: mtrace's recorder reads its own clock, monotonic wall time,
    so ``time.perf_counter``, ``time.monotonic`` and their ``_ns`` forms
    (which mean that time) record with it, ``timeunit`` unused. Any other
    timer (``time.process_time``, ``time.thread_time``, one of the
    program's) profiles with cProfile's own profiler, ``_lsprof``, behind
    this API: cProfile's numbers for that timer and ``timeunit``, on
    cProfile's one stack of the enabling thread, no trace file.

    Errors are cProfile's on the Python running: one recording runs at a
    time in a process, and on 3.12+ a second ``enable()`` while one records
    (this profile's, another's, or ``mtrace.enable()``'s) raises
    ``ValueError``, as cProfile's does while a profiler is active; on 3.11
    a second profile's ``enable()`` ends the first one's recording there,
    as cProfile's second profiler replaces the first. ``print_stats`` and
    ``pstats.Stats`` of a profile that recorded nothing raise
    ``TypeError``, and a sort pstats refuses its ``KeyError`` or
    ``TypeError``.
    """

    def __init__(self, timer: "Callable[[], float] | None" = None, timeunit: float = 0.0,
                 subcalls: bool = True, builtins: bool | str = True, *,
                 path: str | os.PathLike[str] | None = None, clock: str | None = None,
                 tasks: bool = True, capacity: str | None = None, ring: bool = False,
                 meta_capacity: str | None = None) -> None:
        self.builtins = builtins
        self.clock = clock
        #: The statistics ``create_stats`` made (pstats' dict). An
        #: attribute, not a property: ``pstats.Stats(profile)`` per request
        #: reads it, and a property's frame is instrumented anew after each
        #: ``enable()`` and ``disable()``.
        self.stats: _Stats = {}
        # The traces held: files' paths and traces in memory.
        self._traces: list[str | MemoryTrace] = []
        self._options = dict(tasks=tasks, capacity=capacity, ring=ring,
                             meta_capacity=meta_capacity)
        #: ``_mtrace.start``'s options for a recording into memory, made
        #: once (``enable()`` sets ``builtins``).
        self._memory_options: dict[str, Any] = dict(self._options, memory=True)
        self._path = None if path is None else os.fspath(path)
        # The statistics of traces in memory summed and given back.
        self._summed: _Stats | None = None
        self._recording: str | None = None
        # Whether this profile's enable() set up the hooks (greenlets).
        self._prepared_here = False
        self._previous_owner: Callable[[], Profile | None] | None = None
        self._timed: cProfile.Profile | None = None
        if timer is not None and not any(timer is wall for wall in _WALL_CLOCKS):
            import cProfile

            # (builtins="fast", mtrace's own, goes to cProfile as given.)
            self._timed = cProfile.Profile(timer, timeunit, subcalls,
                                           builtins)  # type: ignore[arg-type]
            # Its own C methods rather than this class's around them: the
            # frame of a Python method would be in its statistics, timed.
            self.enable = self._timed.enable  # type: ignore[method-assign, assignment]
            self.disable = self._timed.disable  # type: ignore[method-assign]

    @property
    def trace_paths(self) -> list[str]:
        """The traces held: files' paths, and for each in memory a
        ``/proc/self/fd/N`` path that reads while the profile holds it."""
        return [os.fspath(t) for t in self._traces]

    def _next_path(self) -> str | None:
        n = len(self._traces) + 1
        if n == 1:
            return self._path
        stem, ext = os.path.splitext(self._path)  # type: ignore[type-var]
        return f"{stem}-{n}{ext or '.bin'}"

    def enable(self, subcalls: bool = True, builtins: bool | str | None = None) -> None:
        """Start recording (every thread). ``builtins`` overrides the
        constructor's; ``subcalls`` is accepted for cProfile's sake (caller
        edges are always recorded). What a second ``enable()`` does is
        cProfile's: see the class."""
        # Short on purpose: this frame is on the stack when the recording
        # starts, and is instrumented then (see `mtrace._prepare`).
        start = self._prepare(builtins)
        if start is not None:
            try:
                _mtrace.start(start[0], **start[1])
            except BaseException as e:
                self._failed(e)

    def _prepare(self, builtins: bool | str | None) -> "tuple[str, dict[str, Any]] | None":
        """What ``enable`` does before the start: cProfile's checks, the
        hooks set up; returns ``_mtrace.start``'s arguments, or None if this
        profile records already (on 3.11)."""
        global _owner
        if self._recording is not None:
            if _EXCLUSIVE:
                raise ValueError(f"{_ANOTHER_TOOL} (mtrace is recording)")
            return None
        owner = None if _owner is None else _owner()
        if not _EXCLUSIVE and owner is not None and owner._recording is not None:
            owner.disable()
        builtins = self.builtins if builtins is None else builtins
        if self._path is None:
            # A profile per request, so a lean path: into memory, no
            # children to arm, and the greenlet hooks only if greenlet is
            # imported (no import watcher: a short recording of this
            # process, as cProfile's).
            path, options = "mtrace-profile", self._memory_options
            options["builtins"] = builtins
            prepared_here = not _mtrace.is_recording()
            if prepared_here and "greenlet" in sys.modules:
                _package._trace_greenlets()
        else:
            path, options, prepared_here = _package._prepare(
                self._next_path(), builtins=builtins, **self._options)
        self._recording = path
        self._prepared_here = prepared_here
        self._previous_owner, _owner = _owner, weakref.ref(self)
        return path, options

    def _failed(self, error: BaseException) -> None:
        """After a start that failed: what ``enable`` set up taken down, and
        cProfile's exception raised."""
        global _owner
        self._recording = None
        _owner = self._previous_owner
        _package._unprepare(self._prepared_here)
        if isinstance(error, RuntimeError) and _package.is_enabled():
            raise ValueError(f"{_ANOTHER_TOOL} (mtrace is recording)") from None
        raise error

    def disable(self) -> None:
        """Stop recording; the trace is kept for ``create_stats``."""
        # Short on purpose, as `enable`.
        if self._recording is not None:
            self._stopped(_mtrace.stop())

    def _stopped(self, summary: "dict[str, Any] | None") -> None:
        """What ``disable`` does after the stop: the trace kept."""
        global _owner
        path, self._recording = self._recording, None
        if _owner is not None and _owner() is self:
            _owner = None
        summary = _package._stopped(summary)
        trace = None if summary is None else summary.get("trace")
        if trace is None and self._path is None:
            # Stopped elsewhere first (`mtrace.disable()`): whoever stopped
            # a recording into memory holds its trace; this profile keeps
            # nothing (its `path` named no file).
            return
        self._traces.append(path if trace is None else trace)  # type: ignore[arg-type]
        if trace is not None and len(self._traces) > _MEMORY_TRACES_HELD:
            self._sum_memory()

    def _sum_memory(self) -> None:
        """Sums the traces held in memory into the profile's statistics
        and gives them back (their paths leave ``trace_paths``)."""
        stats = pstats_dict(self._traces, self.clock, children=False)
        self._summed = _sum_stats({} if self._summed is None else self._summed, stats)
        for trace in self._traces:
            trace.close()  # type: ignore[union-attr]
        self._traces.clear()

    def _stats_of_all(self) -> "_Stats":
        """The pstats dict of everything recorded: what was summed, and the
        traces held."""
        # Traces in memory have no children (a file's may).
        stats = pstats_dict(self._traces, self.clock, children=self._path is not None)
        if self._summed is None:
            return stats
        return _sum_stats(dict(self._summed), stats)

    def create_stats(self) -> None:
        """Stop recording and fill ``self.stats`` as cProfile does."""
        if self._timed is not None:
            self._timed.create_stats()
            self.stats = self._timed.stats
            return
        self.disable()
        if self._path is None and self._summed is None:
            # A profile per request: its traces in memory, read in place
            # (the same as `_stats_of_all`, with two frames fewer).
            self.stats = _mtrace.pstats(self._traces, self.clock) if self._traces else {}
        else:
            self.stats = self._stats_of_all()

    def snapshot_stats(self) -> None:
        """cProfile's name for filling ``self.stats`` from what was recorded."""
        if self._timed is not None:
            self._timed.snapshot_stats()
            self.stats = self._timed.stats
            return
        self.stats = self._stats_of_all()

    def print_stats(self, sort: "_Sort" = -1) -> None:
        """Stop recording and print mtanalyze's table of what was recorded,
        ordered by ``sort`` (what cProfile's takes, see ``sort_name``, or
        ``"paused"``; default: standard name, as cProfile). A sort of
        several keys prints pstats' table, as cProfile does."""
        if self._timed is not None:
            return self._timed.print_stats(sort)  # type: ignore[arg-type]
        self.disable()
        if not self._traces and self._summed is None:
            import pstats

            # pstats' TypeError for a profile with no statistics, which
            # cProfile's print_stats raises.
            pstats.Stats(self)  # type: ignore[arg-type]
            return
        if self._summed is not None:
            # Some traces were summed already: pstats' table of the sums,
            # as cProfile prints it.
            import pstats

            stats = _Snapshot(self._stats_of_all())
            pstats.Stats(stats).strip_dirs().sort_stats(  # type: ignore[arg-type]
                *_sort_fields(sort)).print_stats()
            return
        print_table(self.trace_paths, sort, self.clock)

    def dump_stats(self, file: str | os.PathLike[str]) -> None:
        """Write the statistics as the pstats file ``pstats.Stats(file)``
        reads (snakeviz, gprof2dot...)."""
        self.create_stats()
        with open(file, "wb") as f:
            marshal.dump(self.stats, f)

    def run(self, cmd: str) -> "Self":
        """Record ``exec(cmd)`` in ``__main__``'s namespace."""
        import __main__

        namespace = __main__.__dict__
        return self.runctx(cmd, namespace, namespace)

    def runctx(self, cmd: str, globals: "dict[str, Any]", locals: "Mapping[str, Any]") -> "Self":
        """Record ``exec(cmd, globals, locals)``; returns the profile."""
        self.enable()
        try:
            exec(cmd, globals, locals)
        finally:
            self.disable()
        return self

    def runcall(self, func: "Callable[_P, _T]", /, *args: "_P.args", **kw: "_P.kwargs") -> "_T":
        """Record ``func(*args, **kw)`` and return its result."""
        self.enable()
        try:
            return func(*args, **kw)
        finally:
            self.disable()

    def __enter__(self) -> "Self":
        self.enable()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disable()


def _run(run_profile: "Callable[[Profile], object]", filename: str | None, sort: "_Sort") -> None:
    profile = Profile()
    try:
        run_profile(profile)
    except SystemExit:
        pass
    finally:
        if filename is not None:
            profile.dump_stats(filename)
        else:
            profile.print_stats(sort)


def run(statement: str, filename: str | None = None, sort: "_Sort" = -1) -> None:
    """``cProfile.run``: record ``exec(statement)`` in ``__main__``, then
    write the pstats file ``filename`` or print the table ordered by
    ``sort``."""
    return _run(lambda p: p.run(statement), filename, sort)


def runctx(statement: str, globals: "dict[str, Any]", locals: "Mapping[str, Any]",
           filename: str | None = None, sort: "_Sort" = -1) -> None:
    """``cProfile.runctx``: ``run`` with the given namespaces."""
    return _run(lambda p: p.runctx(statement, globals, locals), filename, sort)
