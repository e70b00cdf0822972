"""Two threads, each with its own asyncio event loop and a few tasks: mtrace
records every thread, and each task on a stack of its own, named by the
task's name, where cProfile sees only the enabling thread.

    python crates/mtrace-python/examples/asyncio_threads.py
"""

import asyncio
import os
import tempfile
import threading

import mtrace


async def fetch(i: int) -> int:
    await asyncio.sleep(0.001 * (i % 3))
    return sum(range(1_000 * (i + 1)))


async def serve(loop_name: str) -> list[int]:
    tasks = [asyncio.create_task(fetch(i), name=f"{loop_name}-fetch-{i}") for i in range(3)]
    return await asyncio.gather(*tasks)


def run_loop(loop_name: str, results: dict[str, list[int]]) -> None:
    results[loop_name] = asyncio.run(serve(loop_name))


def main() -> None:
    results: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        trace = os.path.join(folder, "trace.bin")
        with mtrace.profile(trace, children=False):
            threads = [threading.Thread(target=run_loop, args=(name, results), name=name)
                       for name in ("loop-a", "loop-b")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        print({name: len(values) for name, values in sorted(results.items())})
        report = mtrace.analyze(trace)
        for stack in sorted(report.stacks, key=lambda s: str(s.name)):
            if "fetch" in stack.name:
                print(f"task {stack.name}: ran {stack.running_ns / 1e6:.2f} ms "
                      f"in {stack.switches_in} stretches")
        fetch = report.function("fetch")
        print(f"fetch: {fetch.ncalls} calls (one per task)")


if __name__ == "__main__":
    main()
