"""One profile's fixed cost, for instruction counts: ``N`` cycles of
``Profile()``, ``enable()``, ``fib(9)`` (109 calls), ``disable()``,
``pstats.Stats(p)`` and a sorted ``print_stats`` into a buffer, after
three cycles of warm-up, with mtrace's or cProfile's ``Profile``.

    python crates/mtrace-python/bench/per_cycle.py mtrace|cprofile N

Under callgrind, the instructions of ``N = 100`` minus those of ``N = 0``,
over 100, are what one cycle costs (see the README, "A profile per
request").
"""

import cProfile
import io
import pstats
import sys

import mtrace


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def cycle(profile_class: type) -> None:
    profile = profile_class()
    profile.enable()
    fib(9)
    profile.disable()
    stats = pstats.Stats(profile, stream=io.StringIO())
    stats.sort_stats("cumulative").print_stats(10)


def main() -> None:
    profile_class = {"mtrace": mtrace.Profile, "cprofile": cProfile.Profile}[sys.argv[1]]
    for _ in range(3):
        cycle(profile_class)
    for _ in range(int(sys.argv[2])):
        cycle(profile_class)


if __name__ == "__main__":
    main()
