"""What mtrace costs, against no profiler and cProfile (and yappi when it
is installed), measured in one run of this script.

    python crates/mtrace-python/bench/bench.py [--rounds 7] [--fib 25] [--tasks 10000]

Workloads: recursive ``fib`` on one thread; a stdlib-heavy one (json, re,
difflib, ast); four threads each running ``fib`` and small builtin calls;
``--tasks`` asyncio tasks that each await ``sleep(0)`` twice (mtrace with a
stack per task, its default). Each profiler is enabled before the workload
and disabled after it; only the workload is timed, in wall time
(``time.perf_counter``), and each number is the median of ``--rounds``
rounds, the profilers taking turns within every round. The same runs are
also printed in CPU time of the process (``time.process_time``), which a
busy machine disturbs less.

The overhead of a profiler is its time minus the unprofiled time; the
script prints mtrace's overhead as a ratio of its peers'. cProfile is made to
profile every thread: on 3.12+ its ``sys.monitoring`` tool is process-wide
already, on 3.11 ``threading.setprofile`` enables it in each new thread.

On 3.12+ a second mtrace column runs with ``builtins="fast"``.

``mtrace/cP`` and ``mtrace/yappi`` are mtrace's overhead as a share of
cProfile's and of yappi's (``pip install yappi``; wall clock, builtins on,
every thread). The last lines check, on wall time, the targets: at most
0.8 of cProfile's overhead on 3.12+ and 1.0 on 3.11, at most yappi's, and
at most 1.5 times the floor's, on every workload.

``floor`` installs hooks that do nothing on the same events as mtrace
(``sys.monitoring`` C callbacks on 3.12+, a C profile function on 3.11):
what the interpreter's dispatch of the events costs with no profiler work
at all. ``floor/cP`` is its overhead over cProfile's: no profiler hooked
this way can cost less, so a target below it cannot be met.
``mtrace/floor`` is mtrace's overhead over the floor's.

Last, ``enable()`` + ``disable()`` of an empty region, median of the rounds,
once always into the same file (the file of the last recording is truncated
at each start) and once into a new file each time.

This is a benchmark, not a test: it prints numbers and exits 0.
"""

import argparse
import asyncio
import ast
import cProfile
import difflib
import gc
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time

import mtrace

try:
    import yappi
except ImportError:  # pragma: no cover - optional
    yappi = None

MONITORING = sys.version_info >= (3, 12)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def small_calls(n):
    out = []
    for i in range(n):
        out.append(len(str(i)))
    return max(out)


def workload_fib(args):
    fib(args.fib)


def workload_threads(args):
    def work():
        fib(args.fib - 3)
        small_calls(20000)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# Read once, outside the timed region.
SOURCE = open(difflib.__file__, encoding="utf-8").read()
DOC = {"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b", str(i % 7)],
                  "score": i * 0.5} for i in range(400)]}


def workload_stdlib(args):
    for _ in range(5):
        stdlib_once()


def stdlib_once():
    text = json.dumps(DOC)
    for _ in range(3):
        json.loads(text)
    words = re.findall(r"[A-Za-z_]+", SOURCE[:20000])
    pattern = re.compile(r"def (\w+)\(")
    pattern.findall(SOURCE)
    a = SOURCE.splitlines()[:300]
    b = [line.replace("self", "this") for line in a]
    list(difflib.unified_diff(a, b, lineterm=""))
    difflib.SequenceMatcher(None, words[:500], words[100:600]).ratio()
    tree = ast.parse(SOURCE[:30000].rsplit("\ndef ", 1)[0])
    sum(1 for _ in ast.walk(tree))


def workload_tasks(args):
    async def fetch(i):
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return i * 2

    async def main():
        return await asyncio.gather(*(fetch(i) for i in range(args.tasks)))

    asyncio.run(main())


class NoProfiler:
    name = "none"

    def start(self):
        pass

    def stop(self):
        pass


class CProfile:
    name = "cProfile"

    def start(self):
        self.p = cProfile.Profile()
        if not MONITORING:
            threading.setprofile(lambda *a: self.p.enable())
        self.p.enable()

    def stop(self):
        self.p.disable()
        if not MONITORING:
            threading.setprofile(None)
        self.p.create_stats()


class Floor:
    """Hooks that do nothing, on every thread (see the module doc)."""

    name = "floor"

    def start(self):
        if not MONITORING:
            threading.setprofile(lambda *a: mtrace._mtrace.floor_start(True))
        mtrace._mtrace.floor_start(True)

    def stop(self):
        mtrace._mtrace.floor_stop()
        if not MONITORING:
            threading.setprofile(None)


class Yappi:
    name = "yappi"

    def start(self):
        yappi.set_clock_type("wall")
        yappi.start(builtins=True)

    def stop(self):
        yappi.stop()
        yappi.get_func_stats()
        yappi.clear_stats()
        # yappi keeps a reference to every coroutine and generator it saw
        # (the asyncio workload's tens of thousands, each round), even
        # after clear_stats: every later garbage collection would scan
        # them, slowing every later run in this process, unprofiled ones
        # too. Frozen, the collector skips them.
        gc.freeze()


class Mtrace:
    name = "mtrace"
    builtins = True

    def __init__(self, path):
        self.path = path

    def start(self):
        mtrace.enable(self.path, capacity="512M", builtins=self.builtins)

    def stop(self):
        summary = mtrace.disable()
        if summary["dropped_events"]:
            print(f"  (mtrace dropped {summary['dropped_events']} events)", file=sys.stderr)


class MtraceFast(Mtrace):
    """``builtins="fast"`` (3.12+): call sites of Python functions stop
    reporting calls after the first."""

    name = "mtrace fast"
    builtins = "fast"


def measure(workload, args, profilers, rounds):
    """Medians of wall time and of the process's CPU time, per profiler."""
    wall = {p.name: [] for p in profilers}
    cpu = {p.name: [] for p in profilers}
    for r in range(rounds):
        order = profilers[r % len(profilers):] + profilers[:r % len(profilers)]
        for p in order:
            p.start()
            t0, c0 = time.perf_counter(), time.process_time()
            workload(args)
            c1, t1 = time.process_time(), time.perf_counter()
            p.stop()
            wall[p.name].append(t1 - t0)
            cpu[p.name].append(c1 - c0)
    return ({name: statistics.median(ts) for name, ts in wall.items()},
            {name: statistics.median(ts) for name, ts in cpu.items()})


def ratios(t, mtraces):
    """{column: ratio of overheads} for one workload's medians `t`: each
    mtrace's over cProfile's (``mtrace/cP``) and yappi's (``mtrace/yappi``,
    when yappi ran), the floor's over cProfile's, mtrace's over the
    floor's. NaN where the divisor's overhead is not positive (noise)."""
    base = t["none"]
    over = {name: t[name] - base for name in t}

    def ratio(a, b):
        return over[a] / over[b] if over[b] > 0 else float("nan")

    out = {}
    for name in mtraces:
        out[name + "/cP"] = ratio(name, "cProfile")
        if "yappi" in t:
            out[name + "/yappi"] = ratio(name, "yappi")
    out["floor/cP"] = ratio("floor", "cProfile")
    out["mtrace/floor"] = ratio("mtrace", "floor")
    return out


def ratio_columns(mtraces, with_yappi):
    cols = []
    for name in mtraces:
        cols.append(name + "/cP")
        if with_yappi:
            cols.append(name + "/yappi")
    return cols + ["floor/cP", "mtrace/floor"]


def row(label, t, profilers, mtraces):
    base = t["none"]
    line = f"{label:42} {base * 1e3:7.1f}" + "".join(
        f" {(t[p.name] - base) * 1e3:13.1f}" for p in profilers[1:])
    r = ratios(t, mtraces)
    for col in ratio_columns(mtraces, "yappi" in t):
        line += f" {r[col]:>{max(len(col), 6)}.2f}"
    return line


# The targets the summary checks, on wall time: mtrace's overhead at most
# this share of cProfile's (3.12+ and 3.11), at most yappi's, and at most
# this multiple of the floor's.
TARGET_CP = 0.8 if MONITORING else 1.0
TARGET_YAPPI = 1.0
TARGET_FLOOR = 1.5


def summary(rows, mtraces):
    """One line per target: met or missed, with the workloads that miss
    it and their ratio (``mtrace``, the default; ``mtrace fast`` too on
    3.12+)."""
    checks = [(name + "/cP", TARGET_CP) for name in mtraces]
    checks += [(name + "/yappi", TARGET_YAPPI) for name in mtraces]
    checks.append(("mtrace/floor", TARGET_FLOOR))
    lines = []
    for col, target in checks:
        got = [(label, r[col]) for label, r in rows if col in r]
        if not got:
            lines.append(f"  {col} <= {target}: not measured (pip install yappi)")
            continue
        missed = [(label, v) for label, v in got if not v <= target]
        verdict = "met" if not missed else "MISSED on " + "; ".join(
            f"{label} ({v:.2f})" for label, v in missed)
        worst = max(v for _, v in got)
        lines.append(f"  {col} <= {target}: {verdict} (worst {worst:.2f})")
    return lines


def empty_region(directory, rounds):
    same, fresh = [], []
    for r in range(rounds):
        path = os.path.join(directory, "empty.mtrace")
        t0 = time.perf_counter()
        mtrace.enable(path)
        mtrace.disable()
        same.append(time.perf_counter() - t0)
        path = os.path.join(directory, f"empty-{r}.mtrace")
        t0 = time.perf_counter()
        mtrace.enable(path)
        mtrace.disable()
        fresh.append(time.perf_counter() - t0)
    return statistics.median(same), statistics.median(fresh)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--fib", type=int, default=25, help="fib(N) on one thread")
    parser.add_argument("--tasks", type=int, default=10000, help="asyncio tasks")
    parser.add_argument("--only", metavar="TEXT",
                        help="only the workloads whose label contains TEXT (e.g. asyncio)")
    args = parser.parse_args()
    print(f"CPython {sys.version.split()[0]}, mtrace backend: {mtrace._mtrace.BACKEND}, "
          f"{os.cpu_count()} CPUs, median of {args.rounds} rounds, wall time")
    with tempfile.TemporaryDirectory() as directory:
        profilers = [NoProfiler(), CProfile(), Floor(),
                     Mtrace(os.path.join(directory, "bench.mtrace"))]
        if MONITORING:
            profilers.append(MtraceFast(os.path.join(directory, "fast.mtrace")))
        if yappi is not None:
            profilers.append(Yappi())
        workloads = [
            (f"fib({args.fib})", workload_fib),
            ("stdlib: json, re, difflib, ast", workload_stdlib),
            (f"4 threads: fib({args.fib - 3}) + 20000 builtin calls", workload_threads),
            (f"{args.tasks} asyncio tasks", workload_tasks),
        ]
        if args.only:
            workloads = [w for w in workloads if args.only in w[0]]
        mtraces = [p.name for p in profilers if p.name.startswith("mtrace")]
        header = f"{'workload':42} {'none':>7}" + "".join(
            f" {'+' + p.name:>13}" for p in profilers[1:])
        header += "".join(f" {col:>{max(len(col), 6)}}"
                          for col in ratio_columns(mtraces, yappi is not None))
        print("overhead = profiled - unprofiled (ms); a/b = a's overhead / b's "
              "(cP: cProfile; floor: hooks that do nothing)")
        print(header)
        rows = []
        for label, workload in workloads:
            wall, cpu = measure(workload, args, profilers, args.rounds)
            rows.append((label, wall, cpu))
            print(row(label, wall, profilers, mtraces), flush=True)
        print("the same runs in CPU time of the process (less disturbed by other load):")
        for label, _, cpu in rows:
            print(row(label, cpu, profilers, mtraces))
        print("targets, wall time:")
        for line in summary([(label, ratios(wall, mtraces)) for label, wall, _ in rows],
                            mtraces):
            print(line)
        same, fresh = empty_region(directory, args.rounds)
        print(f"enable()+disable() of an empty region: {same * 1e3:.2f} ms (same file each time), "
              f"{fresh * 1e3:.2f} ms (a new file each time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
