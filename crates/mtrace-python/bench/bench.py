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
script prints mtrace's overhead as a ratio of cProfile's. cProfile is made to
profile every thread: on 3.12+ its ``sys.monitoring`` tool is process-wide
already, on 3.11 ``threading.setprofile`` enables it in each new thread.

On 3.12+ a second mtrace column runs with ``builtins="fast"``.

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


def row(label, t, profilers, mtraces):
    base = t["none"]
    over = {name: t[name] - base for name in t}
    line = f"{label:42} {base * 1e3:7.1f}" + "".join(
        f" {over[p.name] * 1e3:13.1f}" for p in profilers[1:])
    def ratio(a, b):
        return over[a] / over[b] if over[b] > 0 else float("nan")

    for name in mtraces:
        line += f" {ratio(name, 'cProfile'):11.2f}"
    line += f" {ratio('floor', 'cProfile'):9.2f} {ratio('mtrace', 'floor'):12.2f}"
    return line


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
        mtraces = [p.name for p in profilers if p.name.startswith("mtrace")]
        header = f"{'workload':42} {'none':>7}" + "".join(
            f" {'+' + p.name:>13}" for p in profilers[1:])
        header += "".join(f" {'ratio ' + name[7:] if name != 'mtrace' else 'ratio':>11}"
                          for name in mtraces)
        header += f" {'floor/cP':>9} {'mtrace/floor':>12}"
        print("overhead = profiled - unprofiled (ms); ratio = mtrace's overhead / cProfile's; "
              "floor/cP = hooks that do nothing / cProfile")
        print(header)
        rows = []
        for label, workload in workloads:
            wall, cpu = measure(workload, args, profilers, args.rounds)
            rows.append((label, cpu))
            print(row(label, wall, profilers, mtraces), flush=True)
        print("the same runs in CPU time of the process (less disturbed by other load):")
        for label, cpu in rows:
            print(row(label, cpu, profilers, mtraces))
        same, fresh = empty_region(directory, args.rounds)
        print(f"enable()+disable() of an empty region: {same * 1e3:.2f} ms (same file each time), "
              f"{fresh * 1e3:.2f} ms (a new file each time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
