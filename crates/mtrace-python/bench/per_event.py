"""What one event costs: recursive ``fib(N)`` (one PY_START and one
PY_RETURN per call, no built-ins) unprofiled, under the floor's hooks that
do nothing, under mtrace, under mtrace into a 1 MiB ring (``mtrace-ring``:
the same work per event, but into memory that is mapped once and stays in
the caches) and under cProfile; on 3.11 also the floor plus the frame
evaluator a recording installs there (``floor+eval``).

    python crates/mtrace-python/bench/per_event.py MODE N
        one run of one mode (none, floor, floor+eval, mtrace, mtrace-ring,
        cprofile), for
        callgrind: the instructions of fib(21) minus those of fib(18),
        divided by the events between them, are each mode's instructions
        per event, immune to the machine's load (see the README)
    python crates/mtrace-python/bench/per_event.py rounds N [--rounds R]
        R interleaved rounds of every mode, medians, in wall ns per event

This is a benchmark, not a test: it prints numbers and exits 0.
"""

import argparse
import cProfile
import os
import statistics
import sys
import tempfile
import time

import mtrace

MONITORING = sys.version_info >= (3, 12)
MODES = (["none", "floor", "mtrace", "mtrace-ring", "cprofile"]
         + ([] if MONITORING else ["floor+eval"]))


RING = "1M"


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def calls(n):
    """How many calls ``fib(n)`` makes."""
    return 1 if n < 2 else 1 + calls(n - 1) + calls(n - 2)


def run(mode, n, path):
    """One ``fib(n)`` under `mode`, its wall time."""
    profile = None
    if mode == "floor":
        mtrace._mtrace.floor_start(True)
    elif mode == "floor+eval":
        mtrace._mtrace.floor_start(True, True)
    elif mode == "mtrace":
        mtrace.enable(path, capacity="512M", builtins=True)
    elif mode == "mtrace-ring":
        # A ring small enough to stay in the caches, mapped once: what an
        # event costs without fresh pages and memory traffic.
        mtrace.enable(path, capacity=RING, ring=True, builtins=True)
    elif mode == "cprofile":
        profile = cProfile.Profile()
        profile.enable()
    t0 = time.perf_counter()
    fib(n)
    t1 = time.perf_counter()
    if mode in ("floor", "floor+eval"):
        mtrace._mtrace.floor_stop()
    elif mode in ("mtrace", "mtrace-ring"):
        mtrace.disable()
    elif profile is not None:
        profile.disable()
    return t1 - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=MODES + ["rounds"])
    parser.add_argument("n", type=int)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mtrace-per-event-") as directory:
        path = os.path.join(directory, "trace.bin")
        if args.mode == "rounds":
            rounds(args, path)
        else:
            run(args.mode, args.n, path)


def rounds(args, path):
    """Interleaved rounds of every mode; prints medians per event."""
    events = 2 * calls(args.n)
    times = {m: [] for m in MODES}
    for r in range(args.rounds):
        for m in MODES[r % len(MODES):] + MODES[:r % len(MODES)]:
            times[m].append(run(m, args.n, path))
    med = {m: statistics.median(ts) for m, ts in times.items()}
    base = med["none"]
    print(f"CPython {sys.version.split()[0]}, fib({args.n}): {events} events, "
          f"unprofiled {base * 1e3:.1f} ms, medians of {args.rounds} rounds")
    for m in MODES[1:]:
        print(f"  {m:10s} {(med[m] - base) * 1e9 / events:6.1f} ns per event over unprofiled")
    print(f"  mtrace/floor {(med['mtrace'] - base) / (med['floor'] - base):.2f}")


if __name__ == "__main__":
    main()
