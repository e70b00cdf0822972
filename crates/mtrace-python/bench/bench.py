"""Overhead of mtrace on call-heavy Python, against no profiler, cProfile and
yappi, measured in the same run.

    python crates/mtrace-python/bench/bench.py [--rounds 5] [--fib 25]

Two workloads: recursive ``fib`` on one thread, and four threads each
running ``fib`` and a loop of small builtin calls. Each profiler is enabled
before the workload and disabled after it; only the workload is timed, in
CPU time of the process (``time.process_time``: on a shared machine, time
the process spends descheduled is not counted; the threads run one at a time
under the GIL anyway), the best of ``--rounds`` rounds, profilers
interleaved in every round. cProfile
is made to profile every thread (``threading.setprofile`` enabling the one
profiler in each new thread), otherwise it would not look at the workers.
yappi (``pip install yappi``) is skipped when it is not installed. Prints the
slowdown of each profiler over the unprofiled run, and exits with status 1 if
mtrace's is not below cProfile's.
"""

import argparse
import cProfile
import os
import sys
import tempfile
import threading
import time

import mtrace

try:
    import yappi
except ImportError:  # pragma: no cover - optional
    yappi = None


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def small_calls(n):
    out = []
    for i in range(n):
        out.append(len(str(i)))
    return max(out)


def workload_fib(n):
    fib(n)


def workload_threads(n):
    def work():
        fib(n - 3)
        small_calls(20000)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


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
        threading.setprofile(lambda *a: self.p.enable())
        self.p.enable()

    def stop(self):
        self.p.disable()
        threading.setprofile(None)
        self.p.create_stats()


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

    def __init__(self, directory):
        self.path = os.path.join(directory, "bench.mtrace")

    def start(self):
        mtrace.enable(self.path, capacity="512M")

    def stop(self):
        summary = mtrace.disable()
        assert summary["dropped_events"] == 0, summary


def measure(workload, arg, profilers, rounds):
    best = {p.name: float("inf") for p in profilers}
    for r in range(rounds):
        order = profilers[r % len(profilers):] + profilers[:r % len(profilers)]
        for p in order:
            p.start()
            t0 = time.process_time()
            workload(arg)
            elapsed = time.process_time() - t0
            p.stop()
            best[p.name] = min(best[p.name], elapsed)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fib", type=int, default=25, help="fib(N) on one thread")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        profilers = [NoProfiler(), CProfile(), Mtrace(directory)]
        if yappi is not None:
            profilers.append(Yappi())
        else:
            print("yappi is not installed: skipped (pip install yappi)", file=sys.stderr)
        ok = True
        for label, workload in [(f"fib({args.fib}), 1 thread", workload_fib),
                                (f"4 threads: fib({args.fib - 3}) + 20000 small builtin calls",
                                 workload_threads)]:
            best = measure(workload, args.fib, profilers, args.rounds)
            base = best["none"]
            print(f"{label}: unprofiled {base * 1e3:.1f} ms CPU (best of {args.rounds})")
            for p in profilers[1:]:
                print(f"  {p.name:9} {best[p.name] * 1e3:8.1f} ms  slowdown x{best[p.name] / base:.2f}")
            ratio = best["mtrace"] / best["cProfile"]
            print(f"  mtrace / cProfile time: {ratio:.2f}")
            ok &= best["mtrace"] < best["cProfile"]
        print("mtrace slowdown below cProfile's:", "yes" if ok else "NO")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
