"""A profile per request, as with cProfile: each request runs under its own
``mtrace.Profile`` (recorded in memory, no file), and the slowest one is kept
as a pstats file to read with ``pstats`` (or snakeviz).

    python crates/mtrace-python/examples/per_request.py
"""

import os
import pstats
import tempfile
import time

import mtrace


def parse(body: str) -> list[int]:
    return [int(word) for word in body.split()]


def render(numbers: list[int]) -> str:
    return ",".join(str(n * n) for n in sorted(numbers))


def handle(body: str) -> str:
    """The request handler being profiled."""
    return render(parse(body))


def main() -> None:
    requests = [" ".join(str(i) for i in range(n)) for n in (10, 2_000, 200)]
    slowest: tuple[float, mtrace.Profile] | None = None
    for body in requests:
        profile = mtrace.Profile()
        started = time.perf_counter()
        response = profile.runcall(handle, body)
        took = time.perf_counter() - started
        print(f"request of {len(body)} bytes: {len(response)} bytes back in {took * 1e3:.2f} ms")
        if slowest is None or took > slowest[0]:
            slowest = (took, profile)
    assert slowest is not None
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "slowest.prof")
        slowest[1].dump_stats(path)
        stats = pstats.Stats(path)
        stats.strip_dirs().sort_stats("cumulative").print_stats(5)


if __name__ == "__main__":
    main()
