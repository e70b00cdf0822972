"""What a profile per request costs: a WSGI app behind werkzeug's
``ProfilerMiddleware`` (a ``Profile`` per request, its ``pstats.Stats``
sorted and printed), driven in-process by werkzeug's test client, with no
profiler, with cProfile and with mtrace, in one run of this script.

    python crates/mtrace-python/bench/per_request.py [--requests 500] [--rounds 5]

Needs werkzeug (``pip install werkzeug``); without it, the same cycle
(``Profile()``, ``enable``, the request's work, ``disable``,
``pstats.Stats``) runs without the WSGI layer. Prints requests/s, each the
median of ``--rounds`` rounds in which the three take turns, and what each
profiler adds to a request, in wall and CPU time (``time.process_time``,
all threads of the process).
"""

import argparse
import io
import json
import pstats
import statistics
import sys
import time

import mtrace


def app(environ, start_response):
    """A small page: some data, serialized, and a template filled."""
    rows = [{"id": i, "name": f"item-{i}", "tags": ["a", "b"][: i % 3]} for i in range(20)]
    body = json.dumps({"path": environ.get("PATH_INFO", "/"), "rows": rows}).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


def with_werkzeug(profile_class):
    """A request function through werkzeug's test client and middleware, or
    None without werkzeug."""
    try:
        from werkzeug.middleware import profiler
        from werkzeug.test import Client
    except ImportError:
        return None
    wrapped = app
    if profile_class is not None:
        stream = io.StringIO()

        class Middleware(profiler.ProfilerMiddleware):
            def __call__(self, environ, start_response):
                # The middleware names its profiler class at import time.
                saved, profiler.Profile = profiler.Profile, profile_class
                try:
                    return super().__call__(environ, start_response)
                finally:
                    profiler.Profile = saved
                    stream.seek(0)
                    stream.truncate()

        wrapped = Middleware(app, stream=stream, sort_by=("cumulative",), restrictions=(10,))
    client = Client(wrapped)
    return lambda: client.get("/items").close()


def without_werkzeug(profile_class):
    """The middleware's cycle without the WSGI layer."""
    environ = {"PATH_INFO": "/items"}

    def request():
        if profile_class is None:
            return app(environ, lambda *a: None)
        p = profile_class()
        p.enable()
        app(environ, lambda *a: None)
        p.disable()
        pstats.Stats(p, stream=io.StringIO()).sort_stats("cumulative").print_stats(10)

    return request


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import cProfile

    kinds = {"none": None, "cProfile": cProfile.Profile, "mtrace": mtrace.Profile}
    requests = {k: with_werkzeug(p) or without_werkzeug(p) for k, p in kinds.items()}
    layer = "werkzeug test client + ProfilerMiddleware" if with_werkzeug(None) else "no WSGI layer"
    wall = {k: [] for k in kinds}
    cpu = {k: [] for k in kinds}
    for request in requests.values():
        for _ in range(20):
            request()
    for _ in range(args.rounds):
        for kind, request in requests.items():
            w, c = time.perf_counter(), time.process_time()
            for _ in range(args.requests):
                request()
            wall[kind].append((time.perf_counter() - w) / args.requests)
            cpu[kind].append((time.process_time() - c) / args.requests)
    print(f"Python {sys.version.split()[0]}, {layer}, {args.requests} requests x "
          f"{args.rounds} rounds (medians)")
    print(f"{'profiler':<10} {'requests/s':>11} {'us/request':>11} {'added wall':>11} "
          f"{'added cpu':>10}")
    base_wall, base_cpu = statistics.median(wall["none"]), statistics.median(cpu["none"])
    for kind in kinds:
        w, c = statistics.median(wall[kind]), statistics.median(cpu[kind])
        print(f"{kind:<10} {1 / w:>11.0f} {w * 1e6:>11.0f} {(w - base_wall) * 1e6:>10.0f}u "
              f"{(c - base_cpu) * 1e6:>9.0f}u")


if __name__ == "__main__":
    main()
