"""``python -m mtrace [-o trace.bin] script.py args...`` or ``-m module args...``:
run a program under the recorder, as ``python -m cProfile`` does."""

import argparse
import importlib.machinery
import importlib.util
import io
import os
import runpy
import sys

import mtrace

PROG = "python -m mtrace"
#: The exit status of a usage error (a bad option, an unwritable trace file,
#: a missing script), as Python's own command line and argparse use.
USAGE_ERROR = 2


def fail(message):
    """A usage error: one line on stderr and exit status 2, no traceback."""
    print(f"{PROG}: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        fail(f"{message} (see {PROG} --help)")


def main(argv=None):
    parser = Parser(
        prog=PROG,
        usage="%(prog)s [-o trace.bin] [--capacity 64G] [--ring] [--meta-capacity 16M] "
        "[--no-builtins | --fast-builtins] [--no-tasks] "
        "(script.py | -m module) [args ...]",
        description="Record every thread of a Python program into an mtrace trace "
        "(read it with `mtanalyze TRACE`, or `mtanalyze TRACE --format pstats -o out.prof`).",
    )
    parser.add_argument("-o", "--outfile", default=mtrace.DEFAULT_OUTPUT,
                        help="trace file to write (default: %(default)s)")
    parser.add_argument("-m", dest="module", action="store_true",
                        help="run a library module as a script, like python -m")
    parser.add_argument("--capacity", default=None,
                        help="the most bytes of events, e.g. 64M or 1G (default: the file grows "
                        "up to half the free disk space; with --ring, 256M)")
    parser.add_argument("--meta-capacity", default=None,
                        help="bytes for the names of functions, threads and asyncio tasks "
                        "(default: 16M, some half a million task names)")
    parser.add_argument("--ring", action="store_true",
                        help="keep the end of the run when the file is full (default: the beginning)")
    builtins = parser.add_mutually_exclusive_group()
    builtins.add_argument("--no-builtins", dest="builtins", action="store_false",
                          help="do not record C functions")
    builtins.add_argument("--fast-builtins", dest="builtins", action="store_const",
                          const="fast",
                          help="3.12+: stop watching a call site for C functions once it "
                          "calls a Python function (fewer callbacks; may miss built-ins)")
    parser.add_argument("--no-tasks", dest="tasks", action="store_false",
                        help="asyncio coroutines counted as cProfile counts them "
                        "(each resumption a call), no stack per task")
    parser.add_argument("target", help="the script (or, with -m, the module)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    options = parser.parse_args(argv)

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
        code = "run_module(modname, run_name='__main__', alter_sys=True)"
        globs = {"run_module": runpy.run_module, "modname": options.target}
    else:
        progname = options.target
        try:
            with io.open_code(progname) as fp:
                source = fp.read()
        except OSError as e:
            fail(f"can't open file {progname!r}: [Errno {e.errno}] {e.strerror}")
        # A syntax error is the script's own: it reports as under plain python.
        code = compile(source, progname, "exec")
        sys.path.insert(0, os.path.dirname(progname))
        spec = importlib.machinery.ModuleSpec(name="__main__", loader=None, origin=progname)
        globs = {
            "__spec__": spec,
            "__file__": spec.origin,
            "__name__": spec.name,
            "__package__": None,
            "__cached__": None,
        }
    try:
        mtrace.enable(options.outfile, capacity=options.capacity, ring=options.ring,
                      builtins=options.builtins, tasks=options.tasks,
                      meta_capacity=options.meta_capacity)
    except (ValueError, OSError, RuntimeError) as e:
        # The recording could not start (bad --capacity, unwritable -o):
        # the program has not run yet.
        fail(e)
    sys.argv[:] = [options.target] + options.args
    try:
        exec(code, globs, None)
    finally:
        summary = mtrace.disable()
        if summary is not None:
            dropped = summary["dropped_events"]
            why = summary.get("growth_failure")
            why = f"the file could not grow: {why}" if why else "the file was full; see --capacity"
            note = f" ({dropped} dropped: {why})" if dropped else ""
            print(f"mtrace: {summary['events']} events from {summary['threads']} threads "
                  f"in {summary['path']}{note}", file=sys.stderr)


if __name__ == "__main__":
    main()
