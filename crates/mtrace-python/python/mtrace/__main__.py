"""``python -m mtrace [-o trace.bin] script.py args...`` or ``-m module args...``:
run a program under the recorder, as ``python -m cProfile`` does."""

import argparse
import importlib.machinery
import io
import os
import runpy
import sys

import mtrace


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m mtrace",
        usage="%(prog)s [-o trace.bin] [--capacity 256M] [--ring] [--no-builtins] "
        "(script.py | -m module) [args ...]",
        description="Record every thread of a Python program into an mtrace trace "
        "(read it with `mtanalyze TRACE`, or `mtanalyze TRACE --format pstats -o out.prof`).",
    )
    parser.add_argument("-o", "--outfile", default=mtrace.DEFAULT_OUTPUT,
                        help="trace file to write (default: %(default)s)")
    parser.add_argument("-m", dest="module", action="store_true",
                        help="run a library module as a script, like python -m")
    parser.add_argument("--capacity", default=None,
                        help="bytes of events, e.g. 64M or 1G (default 256M)")
    parser.add_argument("--ring", action="store_true",
                        help="keep the end of the run when the file is full (default: the beginning)")
    parser.add_argument("--no-builtins", dest="builtins", action="store_false",
                        help="do not record C functions")
    parser.add_argument("target", help="the script (or, with -m, the module)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    options = parser.parse_args(argv)

    sys.argv[:] = [options.target] + options.args
    if options.module:
        code = "run_module(modname, run_name='__main__', alter_sys=True)"
        globs = {"run_module": runpy.run_module, "modname": options.target}
    else:
        progname = options.target
        sys.path.insert(0, os.path.dirname(progname))
        with io.open_code(progname) as fp:
            code = compile(fp.read(), progname, "exec")
        spec = importlib.machinery.ModuleSpec(name="__main__", loader=None, origin=progname)
        globs = {
            "__spec__": spec,
            "__file__": spec.origin,
            "__name__": spec.name,
            "__package__": None,
            "__cached__": None,
        }
    mtrace.enable(options.outfile, capacity=options.capacity, ring=options.ring,
                  builtins=options.builtins)
    try:
        exec(code, globs, None)
    finally:
        summary = mtrace.disable()
        if summary is not None:
            dropped = summary["dropped_events"]
            note = f" ({dropped} dropped: the file was full; see --capacity)" if dropped else ""
            print(f"mtrace: {summary['events']} events from {summary['threads']} threads "
                  f"in {summary['path']}{note}", file=sys.stderr)


if __name__ == "__main__":
    main()
