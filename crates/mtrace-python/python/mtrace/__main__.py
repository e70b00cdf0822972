"""``python -m mtrace [-o OUT] [-s SORT] (script.py | -m module) [args...]``:
run a program under the recorder, as ``python -m cProfile`` does;
``python -m mtrace attach PID`` records a running one (``_attach.py``).

Without ``-o``, the table is printed when the program ends (normally, by
``sys.exit`` or by an uncaught exception), ordered by ``-s`` (cProfile's
sort names and ``paused``; default: standard name, the default of
``cProfile.run``; ``python -m cProfile`` sorts by cumulative time since
3.11), and the trace is kept as ``mtrace.bin`` in the
current directory. ``-o FILE`` writes the pstats file ``pstats.Stats(FILE)``
reads, with the trace beside it as ``FILE.bin``; ``-o FILE.bin`` (or
``.mtrace``) writes only the trace. The script runs as the real
``__main__`` module, as under ``python script.py``.
"""

import argparse
import builtins
import importlib.machinery
import importlib.util
import io
import os
import runpy
import sys
import types

import mtrace
from mtrace import _children, _cli
from mtrace._profiler import SORT_KEYS, print_table

# No ``from __future__ import annotations`` in this module: the script's ``compile`` would
# inherit it, and the profiled code must compile as under plain python.
# What only a type checker imports is named in quoted annotations.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

PROG = "python -m mtrace"
#: The exit status of a usage error (a bad option, an unwritable trace file,
#: a missing script), as Python's own command line and argparse use.
USAGE_ERROR = 2
#: Output names that mean "the trace itself", not a pstats file.
TRACE_SUFFIXES = (".bin", ".mtrace")
#: The ``__main__`` modules the script's module replaced.
_REPLACED: list[types.ModuleType] = []


def fail(message: object) -> "NoReturn":
    """A usage error: one line on stderr and exit status 2, no traceback."""
    print(f"{PROG}: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


def say(message: str) -> None:
    print(f"mtrace: {message}", file=sys.stderr, flush=True)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> "NoReturn":
        fail(f"{message} (see {PROG} --help)")


def outputs(outfile: str | None) -> tuple[str, str | None, bool]:
    """``(trace, pstats file or None, print the table)`` for ``-o``."""
    if outfile is None:
        return mtrace.DEFAULT_OUTPUT, None, True
    if outfile.endswith(TRACE_SUFFIXES):
        return outfile, None, False
    return outfile + ".bin", outfile, False


def script_module(progname: str) -> types.ModuleType:
    """A fresh ``__main__`` module for the script, as ``python script.py``
    makes it (so its functions pickle, and ``multiprocessing`` finds them)."""
    module = types.ModuleType("__main__")
    path = os.path.abspath(progname)
    module.__dict__.update(
        __file__=path,
        __cached__=None,
        __package__=None,
        __spec__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", path),
        __builtins__=builtins,
    )
    return module


def _children_recorded(trace: str) -> tuple[int, int, int] | None:
    """``(processes, events, threads)`` of the child processes' traces
    beside ``trace`` (``mtanalyze check`` of each: no analysis), or None if
    none recorded."""
    import json

    count = events = threads = 0
    for child in _children.children_of(trace):
        if child.endswith(".failed"):
            continue
        status, out = _cli.run(["check", child, "--format", "json"], capture=True)
        if status != 0:
            continue
        checked = json.loads(out)
        count += 1
        events += checked.get("events", 0)
        threads += len(checked.get("threads", []))
    return (count, events, threads) if count else None


def finish(summary: "dict[str, Any] | None", trace: str, pstats_file: str | None, table: bool,
           sort: str, children: bool, html: str | None) -> None:
    """After the program: say what was recorded, write the pstats file or
    print the table. Never raises: the program's own outcome stands."""
    if summary is not None:
        dropped = summary["dropped_events"]
        why = summary.get("growth_failure")
        why = f"the file could not grow: {why}" if why else "the file was full; see --capacity"
        note = f" ({dropped} dropped: {why})" if dropped else ""
        files = summary.get("files", 1)
        where = f"{files} files of the series {summary['path']}" if files > 1 else summary["path"]
        tree = _children_recorded(trace) if children else None
        if tree:
            count, events, threads = tree
            more = "process" if count == 1 else "processes"
            say(f"{summary['events'] + events} events from {summary['threads'] + threads} threads "
                f"of {count + 1} processes: {summary['events']} in {where}{note}, "
                f"{events} in the traces of {count} child {more} beside it")
        else:
            say(f"{summary['events']} events from {summary['threads']} threads "
                f"in {where}{note}")
    only = [] if children else ["--no-children"]
    try:
        if pstats_file is not None:
            if _cli.run([trace, "--format", "pstats", "-o", pstats_file, *only]) == 0:
                say(f"pstats file {pstats_file} (the trace is {trace})")
        elif table:
            sys.stdout.flush()
            print_table([trace, *only], sort)
        if html is not None:
            if _cli.run([trace, "--format", "html", "-o", html, *only]) == 0:
                say(f"HTML report {html}")
    except Exception as e:  # the analysis of a trace this run wrote
        say(f"could not analyze {trace}: {e}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["attach"]:
        # `python -m mtrace attach PID`: a running process (a script named
        # `attach` runs as `./attach`).
        from mtrace import _attach

        return _attach.main(args[1:])  # type: ignore[return-value]  # it never returns
    parser = Parser(
        prog=PROG,
        usage="%(prog)s [-o OUT] [-s SORT] [--html FILE] [--capacity 64G] [--ring] [--meta-capacity 64K] "
        "[--armed] [--signal SIG] [--rotate SIZE|AGE] [--keep N] "
        "[--no-builtins | --fast-builtins] [--no-tasks] "
        "(script.py | -m module) [args ...]",
        description="Run a Python program under mtrace, recording every thread, and print "
        "cProfile's table with mtrace's paused column when it ends. The trace is kept "
        "(mtrace.bin); read it again with `mtanalyze TRACE`.",
    )
    parser.add_argument("-o", "--outfile", default=None,
                        help="write a pstats file (pstats.Stats, snakeviz) instead of printing "
                        "the table, with the trace beside it as OUT.bin; a name ending in .bin "
                        "or .mtrace: only the trace (default: print the table, trace in "
                        f"{mtrace.DEFAULT_OUTPUT})")
    # cProfile's names exactly (its command line takes no abbreviation), and paused.
    parser.add_argument("-s", "--sort", default="stdname", choices=SORT_KEYS, metavar="SORT",
                        help="order of the table: " + ", ".join(SORT_KEYS)
                        + " (default: %(default)s)")
    parser.add_argument("--html", default=None, metavar="FILE",
                        help="also write the report as one self-contained HTML page "
                        "(mtanalyze --format html), to open in a browser")
    parser.add_argument("-m", dest="module", action="store_true",
                        help="run a library module as a script, like python -m")
    parser.add_argument("--capacity", default=None,
                        help="the most bytes of events, e.g. 64M or 1G (default: the file grows "
                        "up to half the free disk space; with --ring, 256M)")
    parser.add_argument("--meta-capacity", default=None,
                        help="bytes of the first region for the names of functions, threads "
                        "and asyncio tasks (default: 32K); names past it go on in the file's "
                        "chunk slots, so it is no limit")
    parser.add_argument("--armed", action="store_true",
                        help="start paused: record nothing until resumed "
                             "(mtrace.resume(), or the --signal)")
    parser.add_argument("--signal", default=None, metavar="SIG",
                        help="a signal (USR2) that switches recording on and off: "
                             "kill -USR2 PID")
    parser.add_argument("--rotate", default=None, metavar="SIZE|AGE",
                        help="move on to the next file of a series (OUT.1.bin, OUT.2.bin, ...) "
                        "when the file reaches a size (256M) or an age (60s, 5min); the table "
                        "reads the series as one")
    parser.add_argument("--keep", default=None, type=int, metavar="N",
                        help="with --rotate: keep only the newest N files")
    parser.add_argument("--ring", action="store_true",
                        help="keep the end of the run when the file is full (default: the beginning)")
    builtins_group = parser.add_mutually_exclusive_group()
    builtins_group.add_argument("--no-builtins", dest="builtins", action="store_false",
                                help="do not record C functions")
    builtins_group.add_argument("--fast-builtins", dest="builtins", action="store_const",
                                const="fast",
                                help="3.12+: stop watching a call site for C functions once it "
                                "calls a Python function (fewer callbacks; may miss built-ins)")
    parser.add_argument("--no-tasks", dest="tasks", action="store_false",
                        help="asyncio coroutines counted as cProfile counts them "
                        "(each resumption a call), no stack per task")
    parser.add_argument("--no-children", dest="children", action="store_false",
                        help="record this process only (default: child processes record "
                        "too, into OUT.pid<PID>.bin beside the trace, and the table sums "
                        "the process tree)")
    parser.add_argument("target", help="the script (or, with -m, the module)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    options = parser.parse_args(argv)
    trace, pstats_file, table = outputs(options.outfile)
    if options.html is not None and os.path.isdir(options.html):
        fail(f"cannot write the HTML report {options.html}: it is a directory")
    if pstats_file is not None and os.path.isdir(pstats_file):
        fail(f"cannot write the pstats file {pstats_file}: it is a directory")

    if options.module:
        # Only the top-level package is looked up here: finding a submodule
        # would import its parents, which belongs to the profiled run.
        top = options.target.partition(".")[0]
        try:
            found = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            fail(f"no module named {top!r}")

        def prepare() -> None:
            pass

        def run_program() -> None:
            runpy.run_module(options.target, run_name="__main__", alter_sys=True)
    else:
        progname = options.target
        try:
            with io.open_code(progname) as fp:
                source = fp.read()
        except OSError as e:
            fail(f"can't open file {progname!r}: [Errno {e.errno}] {e.strerror}")
        # A syntax error is the script's own: it reports as under plain
        # python. The code is named by the absolute path, as python names
        # it (cProfile keeps the path as typed), so the script's functions
        # have the same file in the parent and in spawned children.
        module = script_module(progname)
        code = compile(source, module.__file__, "exec")  # type: ignore[arg-type]  # set by script_module

        def prepare() -> None:
            sys.path[0] = os.path.dirname(module.__file__)  # type: ignore[type-var, assignment]
            # The module this code runs in stays referenced (its globals
            # are this function's) once the script's takes its place.
            _REPLACED.append(sys.modules["__main__"])
            sys.modules["__main__"] = module

        def run_program() -> None:
            exec(code, module.__dict__)
    # Only the program runs while recording, as under cProfile.
    sys.argv[:] = [options.target] + options.args
    prepare()
    try:
        mtrace.enable(trace, capacity=options.capacity, ring=options.ring,
                      builtins=options.builtins, tasks=options.tasks,
                      meta_capacity=options.meta_capacity, children=options.children,
                      armed=options.armed, signal=options.signal,
                      rotate=options.rotate, keep=options.keep)
    except (ValueError, OSError, RuntimeError) as e:
        # The recording could not start (bad --capacity, unwritable -o):
        # the program has not run yet.
        fail(e)
    pid = os.getpid()
    try:
        run_program()
    finally:
        summary = mtrace.disable()
        # A child made by os.fork() that returns here ends its own
        # recording; the report is the parent's to make.
        if os.getpid() == pid:
            finish(summary, trace, pstats_file, table, options.sort, options.children,
                   options.html)


if __name__ == "__main__":
    main()
