"""cProfile's API on mtrace: ``Profile``, ``run`` and ``runctx``.

Code written against ``cProfile.Profile`` switches by its import: the same
methods, ``pstats.Stats(profile)`` (which reads ``create_stats()`` and
``.stats``), ``dump_stats`` writing what ``pstats``, snakeviz and every
cProfile tool read. The numbers are mtrace's: every thread is recorded, each
thread, asyncio task and greenlet on a stack of its own, and the time other
stacks ran is cut out of each frame (the ``gil`` clock).

Each ``enable()``/``disable()`` records one trace file; ``create_stats``
sums them, through the Rust analyzer's pstats output (``mtanalyze TRACE...
--format pstats``), so the table and the file agree with ``mtanalyze``.
"""

import marshal
import os
import shutil
import sys
import tempfile
import weakref

from . import _cli

__all__ = ["Profile", "run", "runctx", "SORT_KEYS", "sort_name"]

#: The sort names ``print_stats`` and ``python -m mtrace -s`` take:
#: cProfile's (``pstats``) and mtrace's ``paused``.
SORT_KEYS = ("calls", "cumtime", "cumulative", "file", "filename", "line", "module", "name",
             "ncalls", "nfl", "paused", "pcalls", "stdname", "time", "tottime")
#: pstats' numbered sorts (``print_stats(sort=-1)``, the default).
_NUMBERED = {-1: "stdname", 0: "calls", 1: "time", 2: "cumulative"}


def sort_name(sort):
    """The ``mtanalyze --sort`` value of a cProfile sort: a name of
    ``SORT_KEYS``, one of pstats' numbers (-1 standard name, 0 calls, 1
    time, 2 cumulative) or a ``pstats.SortKey``."""
    value = getattr(sort, "value", sort)  # pstats.SortKey is a str enum
    if isinstance(value, int) and not isinstance(value, bool) and value in _NUMBERED:
        return _NUMBERED[value]
    if isinstance(value, str) and value in SORT_KEYS:
        return value
    raise ValueError(f"unknown sort {sort!r}: expected one of {', '.join(SORT_KEYS)} "
                     f"or -1, 0, 1, 2")


def print_table(traces, sort=-1, clock=None, file=None):
    """Print the report of ``traces`` (their sum) as ``mtanalyze``'s table,
    ordered by ``sort`` (see ``sort_name``), to ``file`` (``sys.stdout``)."""
    args = [*traces, "--sort", sort_name(sort)]
    if clock is not None:
        args += ["--clock", clock]
    status, out = _cli.run(args, capture=True)
    stream = sys.stdout if file is None else file
    stream.write(out.decode("utf-8", "replace"))
    stream.flush()
    return status


def pstats_dict(traces, clock=None):
    """The sum of ``traces`` as the dict ``pstats`` reads (cProfile's
    ``Profile.stats``): ``{(file, line, name): (cc, nc, tt, ct, callers)}``.
    ``TraceError`` if they cannot be analyzed."""
    from ._report import TraceError

    if not traces:
        return {}
    folder = tempfile.mkdtemp(prefix="mtrace-pstats-")
    try:
        out = os.path.join(folder, "stats.prof")
        args = [*traces, "--format", "pstats", "-o", out]
        if clock is not None:
            args += ["--clock", clock]
        status, _ = _cli.run(args, capture=True)
        if status != 0 or not os.path.exists(out):
            raise TraceError(f"mtanalyze could not read {', '.join(map(str, traces))} "
                             f"(exit status {status}; its message is on stderr)")
        with open(out, "rb") as f:
            return marshal.load(f)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Profile:
    """``cProfile.Profile`` with mtrace's recorder.

    ``Profile(builtins=True)``: ``enable()`` starts recording every thread,
    ``disable()`` stops; ``runcall(f, ...)``, ``run(cmd)``, ``runctx(cmd,
    globals, locals)`` and ``with Profile() as p:`` record around a call;
    ``create_stats()`` fills ``.stats``; ``print_stats(sort=-1)`` prints
    mtanalyze's table (with the ``paused`` column); ``dump_stats(file)``
    writes a pstats file; ``pstats.Stats(p)`` works as on cProfile's.

    Beyond cProfile's arguments: ``path``, the trace file of the first
    recording (later ones: ``NAME-2.bin``, ...; kept); by default the traces
    go to a temporary folder removed with the profile. ``trace_paths``
    lists them. ``clock``: the clock of the statistics (default: the one
    the trace asks for). ``tasks``, ``capacity``, ``ring``,
    ``meta_capacity``: as ``mtrace.enable``.

    One recording runs at a time in a process: enabling a second profile
    while one records raises ``RuntimeError``, as cProfile does when
    another profiler is active. ``timer`` and ``timeunit`` are not
    supported (mtrace reads its own clock): giving them raises ``TypeError``.
    """

    def __init__(self, timer=None, timeunit=0.0, subcalls=True, builtins=True, *, path=None,
                 clock=None, tasks=True, capacity=None, ring=False, meta_capacity=None):
        if timer is not None or timeunit:
            raise TypeError("mtrace.Profile reads its own clock: timer and timeunit are "
                            "not supported")
        self.builtins = builtins
        self.clock = clock
        self.stats = {}
        self.trace_paths = []
        self._options = dict(tasks=tasks, capacity=capacity, ring=ring,
                             meta_capacity=meta_capacity)
        self._path = None if path is None else os.fspath(path)
        self._folder = None
        self._recording = None

    def _next_path(self):
        n = len(self.trace_paths) + 1
        if self._path is not None:
            if n == 1:
                return self._path
            stem, ext = os.path.splitext(self._path)
            return f"{stem}-{n}{ext or '.bin'}"
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="mtrace-profile-")
            # The traces live as long as the profile.
            weakref.finalize(self, shutil.rmtree, self._folder, True)
        return os.path.join(self._folder, f"trace-{n}.bin")

    def enable(self, subcalls=True, builtins=None):
        """Start recording (every thread). ``builtins`` overrides the
        constructor's; ``subcalls`` is accepted for cProfile's sake (caller
        edges are always recorded)."""
        from . import enable

        if self._recording is not None:
            return
        path = self._next_path()
        enable(path, builtins=self.builtins if builtins is None else builtins, **self._options)
        self._recording = path

    def disable(self):
        """Stop recording; the trace is kept for ``create_stats``."""
        from . import disable

        if self._recording is None:
            return
        path, self._recording = self._recording, None
        disable()
        self.trace_paths.append(path)

    def create_stats(self):
        """Stop recording and fill ``self.stats`` as cProfile does."""
        self.disable()
        self.stats = pstats_dict(self.trace_paths, self.clock)

    def snapshot_stats(self):
        """cProfile's name for filling ``self.stats`` from what was recorded."""
        self.stats = pstats_dict(self.trace_paths, self.clock)

    def print_stats(self, sort=-1):
        """Stop recording and print mtanalyze's table of what was recorded,
        ordered by ``sort`` (cProfile's sort names or numbers, or
        ``"paused"``; default: standard name, as cProfile)."""
        self.disable()
        if not self.trace_paths:
            sort_name(sort)
            print("mtrace: nothing was recorded")
            return
        print_table(self.trace_paths, sort, self.clock)

    def dump_stats(self, file):
        """Write the statistics as the pstats file ``pstats.Stats(file)``
        reads (snakeviz, gprof2dot...)."""
        self.create_stats()
        with open(file, "wb") as f:
            marshal.dump(self.stats, f)

    def run(self, cmd):
        """Record ``exec(cmd)`` in ``__main__``'s namespace."""
        import __main__

        namespace = __main__.__dict__
        return self.runctx(cmd, namespace, namespace)

    def runctx(self, cmd, globals, locals):
        """Record ``exec(cmd, globals, locals)``; returns the profile."""
        self.enable()
        try:
            exec(cmd, globals, locals)
        finally:
            self.disable()
        return self

    def runcall(self, func, /, *args, **kw):
        """Record ``func(*args, **kw)`` and return its result."""
        self.enable()
        try:
            return func(*args, **kw)
        finally:
            self.disable()

    def __enter__(self):
        self.enable()
        return self

    def __exit__(self, *exc_info):
        self.disable()


def _run(run_profile, filename, sort):
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


def run(statement, filename=None, sort=-1):
    """``cProfile.run``: record ``exec(statement)`` in ``__main__``, then
    write the pstats file ``filename`` or print the table ordered by
    ``sort``."""
    return _run(lambda p: p.run(statement), filename, sort)


def runctx(statement, globals, locals, filename=None, sort=-1):
    """``cProfile.runctx``: ``run`` with the given namespaces."""
    return _run(lambda p: p.runctx(statement, globals, locals), filename, sort)
