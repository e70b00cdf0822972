"""A small threaded program for the README: four threads run the same
recursive function at once, which is where cProfile's counts go wrong.

    .venv/bin/python -m mtrace -o trace.bin crates/mtrace-python/examples/threads.py
"""

import threading


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work() -> None:
    for _ in range(3):
        fib(18)


threads = [threading.Thread(target=work, name=f"worker-{i}") for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
