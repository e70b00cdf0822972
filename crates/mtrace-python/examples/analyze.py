"""Record a run into a trace file, then read its report as Python objects:
``mtrace.analyze`` returns a ``Report`` whose rows are the JSON report's
(``mtanalyze TRACE --format json``), times in integer nanoseconds.

    python crates/mtrace-python/examples/analyze.py
"""

import os
import tempfile
import threading

import mtrace


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work() -> None:
    for _ in range(3):
        fib(15)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        trace = os.path.join(folder, "trace.bin")
        mtrace.enable(trace, children=False)
        mtrace.mark("workers start")
        threads = [threading.Thread(target=work, name=f"worker-{i}") for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        mtrace.mark("workers done")
        summary = mtrace.disable()
        assert summary is not None
        print(f"{summary['events']} events from {summary['threads']} threads")

        report = mtrace.analyze(trace)
        print(report)
        row = report.function("fib")
        print(f"fib: {row.ncalls} calls ({row.primitive_calls} primitive), "
              f"{row.cumtime_ns / 1e6:.2f} ms cumulative")
        for stack in report.stacks:
            print(f"  {stack.id}: ran {stack.running_ns / 1e6:.2f} ms, "
                  f"paused {stack.paused_ns / 1e6:.2f} ms")
        for mark in report.marks:
            print(f"  mark {mark.name!r} at {mark.time_ns / 1e6:.2f} ms")
        # Only the time between the two marks.
        workers = mtrace.analyze(trace, start="mark:workers start", end="mark:workers done")
        print(f"between the marks: {workers.trace.duration_ns / 1e6:.2f} ms, "
              f"fib {workers.function('fib').ncalls} calls")


if __name__ == "__main__":
    main()
