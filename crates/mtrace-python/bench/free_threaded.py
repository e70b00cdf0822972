"""Parallel speedup kept under a profiler, on a free-threaded CPython
(3.14t): threads that compute at once should still run at once while
recorded.

    python crates/mtrace-python/bench/free_threaded.py [--threads 2] [--fib 24] [--rounds 5]

Each round times (wall clock, ``time.perf_counter``) one thread computing
``fib(N)`` and then ``--threads`` threads each computing ``fib(N)`` at once
(a barrier starts them together), unprofiled, under mtrace
(``mtrace.profile``: every thread recorded) and under cProfile (its
``sys.monitoring`` tool is process-wide on 3.12+). The speedup is
``threads * T1 / Tn`` (``--threads`` on as many idle cores is ideal); the
kept share is a profiler's speedup over the unprofiled one. Medians of
``--rounds``; the profilers take turns within each round. On a build with
the GIL the speedup is about 1 for all three: the script says which build
it is. It also says whether the GIL stayed off.

This is a benchmark, not a test: it prints numbers and exits 0.
"""

import argparse
import cProfile
import os
import statistics
import sys
import sysconfig
import tempfile
import threading
import time

import mtrace


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def run_threads(count, n):
    barrier = threading.Barrier(count + 1)

    def work():
        barrier.wait()
        fib(n)

    threads = [threading.Thread(target=work) for _ in range(count)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def timed(profiler, count, n, folder):
    if profiler == "none":
        return run_threads(count, n)
    if profiler == "mtrace":
        with mtrace.profile(os.path.join(folder, "bench.bin"), children=False):
            return run_threads(count, n)
    profile = cProfile.Profile()
    profile.enable()
    try:
        return run_threads(count, n)
    finally:
        profile.disable()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fib", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    print(f"CPython {sys.version.split()[0]}{' free-threaded' if free_threaded else ''}, "
          f"{os.cpu_count()} CPUs, {options.threads} threads of fib({options.fib}), "
          f"{options.rounds} rounds")
    profilers = ("none", "mtrace", "cprofile")
    times = {(p, k): [] for p in profilers for k in (1, options.threads)}
    with tempfile.TemporaryDirectory(prefix="mtrace-ft-bench-") as folder:
        for _ in range(options.rounds):
            for p in profilers:
                for k in (1, options.threads):
                    times[p, k].append(timed(p, k, options.fib, folder))
    plain = None
    print(f"{'':10} {'1 thread':>10} {f'{options.threads} threads':>11} {'speedup':>8} {'kept':>6}")
    for p in profilers:
        one = statistics.median(times[p, 1])
        many = statistics.median(times[p, options.threads])
        speedup = options.threads * one / many
        plain = speedup if p == "none" else plain
        print(f"{p:10} {one * 1e3:8.1f}ms {many * 1e3:9.1f}ms {speedup:8.2f} "
              f"{speedup / plain:6.2f}")
    if hasattr(sys, "_is_gil_enabled"):
        print(f"GIL enabled at the end: {sys._is_gil_enabled()}")


if __name__ == "__main__":
    main()
