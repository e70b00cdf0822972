"""Tests of the Python binding against cProfile, through the real
``python -m mtrace``, ``mtanalyze`` and ``pstats``.

Run with ``crates/mtrace-python/run-tests.sh`` (builds the wheel into a
virtual environment), or, with the wheel installed, ``python -m unittest
discover -s crates/mtrace-python/tests -v`` from outside the sources. The
analyzer is the environment's ``mtanalyze`` command, which the wheel installs.
"""

import json
import os
import pstats
import re
import struct
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
#: The clock a trace of this interpreter asks for: `gil` where one thread
#: runs Python at a time, `stack` on a free-threaded build (3.13t, 3.14t).
PREFERRED_CLOCK = "stack" if sysconfig.get_config_var("Py_GIL_DISABLED") else "gil"
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def mtanalyze_binary():
    """The analyzer: the ``mtanalyze`` console script of the environment
    running the tests (the wheel's, never a cargo build)."""
    path = os.path.join(os.path.dirname(sys.executable), "mtanalyze")
    if not os.path.exists(path):
        raise AssertionError(f"{path} is missing: the wheel installs it")
    return path


def run(args, **kw):
    done = subprocess.run(args, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} exited {done.returncode}\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done


def norm(key):
    """pstats keys from both profilers made comparable: Python functions by
    (file, line), C functions by cProfile's name. (The names of Python
    functions agree too, which `PstatsKeys` checks; comparing by position
    keeps this test about call counts.)"""
    file, line, name = key
    return ("~", name) if file == "~" else (file, line)


def load(path):
    """{key: (cc, nc, {caller: (nc, cc)})} of a pstats file, keys normalized."""
    stats = pstats.Stats(path).stats
    return {norm(f): (cc, nc, {norm(c): tuple(v[:2]) for c, v in callers.items()})
            for f, (cc, nc, _tt, _ct, callers) in stats.items()}


def calls(n):
    """Calls of a naive recursive fib(n): one per node of its call tree."""
    return 2 * fib(n + 1) - 1


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mtrace-py-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def script(self, name, text):
        p = self.path(name)
        with open(p, "w") as f:
            f.write(textwrap.dedent(text))
        return p

    def mtrace(self, *args):
        out = self.path("trace.bin")
        run([sys.executable, "-m", "mtrace", "-o", out, *args], cwd=self.dir)
        return out

    def report(self, trace, *args):
        return json.loads(run([mtanalyze_binary(), trace, "--format", "json", *args]).stdout)

    def pstats_of(self, trace, *args):
        out = self.path("mtrace.prof")
        run([mtanalyze_binary(), trace, "--format", "pstats", "-o", out, *args])
        return out


SINGLE = """
    import functools

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def even(n):
        return True if n == 0 else odd(n - 1)

    def odd(n):
        return False if n == 0 else even(n - 1)

    class Tree:
        def __init__(self, depth):
            self.kids = [Tree(depth - 1) for _ in range(2)] if depth else []

        def size(self):
            return 1 + sum(k.size() for k in self.kids)

    def gen(n):
        for i in range(n):
            yield i * i

    def collect():
        out = []
        for x in gen(50):
            out.append(x)
        return len(out), sorted(out, reverse=True)[:3], max(out)

    def fails():
        raise ValueError("boom")

    def main():
        total = fib(18)
        for n in range(30):
            even(n)
        total += Tree(6).size()
        for _ in range(3):
            collect()
        try:
            fails()
        except ValueError:
            pass
        total += functools.reduce(lambda a, b: a + b, range(100))
        print(total)

    main()
"""


class SingleThread(Case):
    def test_calls_primitive_calls_and_callers_equal_cprofiles(self):
        script = self.script("single.py", SINGLE)
        cprof = self.path("cprofile.prof")
        run([sys.executable, "-m", "cProfile", "-o", cprof, script], cwd=self.dir)
        trace = self.mtrace(script)
        ours = load(self.pstats_of(trace))
        theirs = load(cprof)
        # What each profiler adds to the program: cProfile's disable(), mtrace's.
        theirs = {k: v for k, v in theirs.items() if "_lsprof.Profiler" not in str(k[-1])}
        compared = [k for k in theirs if k[0] == script or any(c[0] == script for c in theirs[k][2])]
        self.assertGreater(len(compared), 15, compared)
        for key in compared:
            self.assertIn(key, ours, f"{key} is missing from mtrace's stats")
            cc, nc, callers = theirs[key]
            mcc, mnc, mcallers = ours[key]
            self.assertEqual((mnc, mcc), (nc, cc),
                             f"{key}: mtrace ncalls {mnc}/{mcc}, cProfile {nc}/{cc}")
            self.assertEqual(mcallers, callers, f"{key}: callers (nc, cc) differ")
        fib = ours[(script, 4)]
        self.assertEqual(fib[:2], (1, 8361))


THREADS = """
    import sys, threading
    THREADS, CALLS, DEPTH = 4, 5, 12
    # Every thread waits at the bottom of its recursion until all are there:
    # the four recursions are open at once, whatever the scheduler does.
    bottom = threading.Barrier(THREADS)

    def rec(n):
        if n:
            rec(n - 1)
        else:
            bottom.wait(timeout=60)

    def worker(start):
        start.wait()
        for _ in range(CALLS):
            rec(DEPTH)

    def main(profiler=None):
        start = threading.Event()
        if profiler is not None:
            # cProfile's one stack, shared by every thread (its only way to see them).
            if sys.version_info >= (3, 12):
                # cProfile runs on sys.monitoring, which is per interpreter:
                # one enable() records every thread, and enabling it again
                # from another thread raises "Another profiling tool is
                # already active", so it cannot be enabled per thread.
                profiler.enable()
            else:
                # 3.11: a profile function is per thread; each new thread
                # enables the one profiler on its first event.
                threading.setprofile(lambda *a: profiler.enable())
        threads = [threading.Thread(target=worker, args=(start,)) for _ in range(THREADS)]
        for t in threads:
            t.start()
        start.set()
        for t in threads:
            t.join()

    if __name__ == "__main__":
        if sys.argv[1:] == ["cprofile"]:
            import cProfile
            p = cProfile.Profile()
            main(p)
            p.disable()
            p.dump_stats(sys.argv[0] + ".cprofile")
        else:
            main()
"""


class Threads(Case):
    def test_recursion_in_threads_at_once_is_exact_where_cprofile_is_not(self):
        script = self.script("threads.py", THREADS)
        run([sys.executable, script, "cprofile"], cwd=self.dir)
        rec = (script, 8)
        theirs = load(script + ".cprofile").get(rec)
        self.assertIsNotNone(theirs, "cProfile recorded no call of rec: its baseline broke")
        trace = self.mtrace(script)
        ours = load(self.pstats_of(trace))[rec]
        want = (4 * 5, 4 * 5 * 13)  # primitive calls, calls
        how = ("one enable(): sys.monitoring" if sys.version_info >= (3, 12)
               else "enabled in each thread")
        message = (f"rec: primitive/total calls: exact {want[0]}/{want[1]}, "
                   f"mtrace {ours[0]}/{ours[1]}, cProfile ({how}) {theirs[0]}/{theirs[1]}")
        print("\n" + message, file=sys.stderr)
        self.assertEqual(ours[:2], want, message)
        # Its one stack sees the four open recursions as one: a call is
        # primitive only when no thread has rec open, at most once a round.
        self.assertLessEqual(theirs[0], 5, "cProfile was expected to be wrong: " + message)

    def test_threads_started_after_profiling_began_are_recorded(self):
        script = self.script("late.py", """
            import threading, mtrace, sys

            def late_work(n):
                return sum(i * i for i in range(n))

            def main():
                with mtrace.profile(sys.argv[1]):
                    ts = [threading.Thread(target=late_work, args=(1000,), name=f"late-{i}")
                          for i in range(3)]
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()

            main()
        """)
        trace = self.path("late.bin")
        run([sys.executable, script, trace], cwd=self.dir)
        report = self.report(trace)
        self.assertEqual(report["clock"], PREFERRED_CLOCK, "the trace asks for its clock")
        late = [f for f in report["functions"] if f["function"] == "late_work"]
        self.assertEqual(len(late), 1, report["functions"])
        self.assertEqual((late[0]["ncalls"], late[0]["primitive_calls"]), (3, 3))
        stacks_running_late = {
            s["id"] for s in report["stacks"] if s["id"].startswith("thread:")}
        self.assertGreaterEqual(len(stacks_running_late), 4, report["stacks"])
        genexpr = [f for f in report["functions"] if f["function"].endswith("<genexpr>")]
        self.assertEqual(sum(f["ncalls"] for f in genexpr), 3 * 1001)

    def test_enable_disable_and_asyncio_tasks_on_their_own_stacks(self):
        script = self.script("tasks.py", """
            import asyncio, sys, mtrace

            async def step(n):
                await asyncio.sleep(0)
                return n

            async def task(n):
                total = 0
                for i in range(n):
                    total += await step(i)
                return total

            async def main():
                await asyncio.gather(*(task(5) for _ in range(3)))

            def current_task_id():
                try:
                    t = asyncio.current_task()
                except RuntimeError:
                    return None
                return id(t) if t is not None else None

            mtrace.set_context_id_callback(current_task_id)
            mtrace.enable(sys.argv[1])
            asyncio.run(main())
            summary = mtrace.disable()
            mtrace.set_context_id_callback(None)
            assert summary["events"] > 0, summary
        """)
        trace = self.path("tasks.bin")
        run([sys.executable, script, trace], cwd=self.dir)
        report = self.report(trace)
        logical = [s for s in report["stacks"] if s["id"].startswith("stack:")]
        self.assertGreaterEqual(len(logical), 3, report["stacks"])
        task = [f for f in report["functions"] if f["function"] == "task"]
        self.assertEqual(len(task), 1)
        # Each resumption of the coroutine is a call, as in cProfile; each
        # task's first one is primitive on its own stack.
        self.assertEqual((task[0]["ncalls"], task[0]["primitive_calls"]), (18, 18))


KEYS = """
    import cProfile, functools, sys, mtrace

    class Tree:
        def __init__(self, depth):
            self.kids = [Tree(depth - 1) for _ in range(2)] if depth else []

        def size(self):
            return 1 + sum(k.size() for k in self.kids)

        @staticmethod
        def leaf():
            return Tree(0)

        @classmethod
        def pair(cls):
            return cls(1)

    def outer(n):
        def inner(k):
            return k * 2
        return [inner(i) for i in range(n)]

    def squares(n):
        for i in range(n):
            yield i * i

    def main():
        total = Tree(5).size() + Tree.leaf().size() + Tree.pair().size()
        total += sum(outer(10)) + sum(squares(20))
        total += functools.reduce(lambda a, b: a + b, range(50))
        by_length = lambda s: -len(s)
        words = sorted(["a", "bbb", "cc"], key=by_length)

        class Local:
            def method(self):
                return len(words)

        total += Local().method()
        total += max(x % 7 for x in range(30))
        # Two code objects with one key (file, line, name): 1000 and 1010 calls.
        plus, times = (lambda x: x + 1), (lambda x: x * 2)
        for i in range(1000):
            plus(i)
        for i in range(1010):
            times(i)
        # Two code objects with one key but two qualified names: 20 calls each.
        nested = lambda: (lambda: 0)
        for _ in range(20):
            nested()()
        return total

    if sys.argv[1] == "cprofile":
        profiler = cProfile.Profile()
        profiler.enable()
        main()
        profiler.disable()
        profiler.dump_stats(sys.argv[2])
    else:
        mtrace.enable(sys.argv[2])
        main()
        mtrace.disable()
"""


def line_of(text, needle):
    """The 1-based line of `text` (dedented, as `Case.script` writes it) holding `needle`."""
    for number, line in enumerate(textwrap.dedent(text).splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} is not in the script")


def under(stats, root):
    """The keys of `root` and of every function called (directly or not) under it."""
    callees = {}
    for key, (_cc, _nc, _tt, _ct, callers) in stats.items():
        for caller in callers:
            callees.setdefault(caller, set()).add(key)
    seen, todo = set(), [root]
    while todo:
        key = todo.pop()
        if key not in seen:
            seen.add(key)
            todo.extend(callees.get(key, ()))
    return seen


class PstatsKeys(Case):
    """`--format pstats` of a Python trace keys functions as cProfile does:
    (co_filename, co_firstlineno, co_name)."""

    def stats_of_both(self):
        script = self.script("keys.py", KEYS)
        cprof = self.path("cprofile.prof")
        run([sys.executable, script, "cprofile", cprof], cwd=self.dir)
        trace = self.path("keys.bin")
        run([sys.executable, script, "mtrace", trace], cwd=self.dir)
        ours = pstats.Stats(self.pstats_of(trace)).stats
        theirs = pstats.Stats(cprof).stats
        return script, trace, ours, theirs

    def test_keys_and_call_counts_under_main_equal_cprofiles(self):
        script, trace, ours, theirs = self.stats_of_both()
        main = (script, line_of(KEYS, "def main"), "main")
        self.assertIn(main, theirs)
        shared = (script, line_of(KEYS, "plus, times ="), "<lambda>")
        nested = (script, line_of(KEYS, "nested = lambda"), "<lambda>")
        theirs_under = under(theirs, main)
        ours_under = under(ours, main)
        # A method and a nested function: co_name, not Tree.size or outer.<locals>.inner.
        self.assertIn((script, line_of(KEYS, "def size"), "size"), theirs_under)
        self.assertIn((script, line_of(KEYS, "def inner"), "inner"), theirs_under)
        self.assertIn(("~", 0, "<built-in method builtins.sorted>"), theirs_under)
        self.assertGreater(len(theirs_under), 15, sorted(theirs_under))
        self.assertEqual(sorted(ours_under), sorted(theirs_under), "keys under main()")
        for key in theirs_under - {shared, nested}:
            cc, nc = theirs[key][:2]
            self.assertEqual(ours[key][:2], (cc, nc),
                             f"{key}: mtrace primitive/total calls {ours[key][:2]}, "
                             f"cProfile {(cc, nc)}")
        # mtrace's own report keeps the qualified names.
        names = {f["function"] for f in self.report(trace)["functions"]}
        for qualname in ("Tree.size", "outer.<locals>.inner", "main.<locals>.Local.method",
                         "main.<locals>.<lambda>", "Tree.size.<locals>.<genexpr>"):
            self.assertIn(qualname, names)

    def test_code_objects_sharing_a_key_are_summed_where_cprofile_keeps_one(self):
        script, _trace, ours, theirs = self.stats_of_both()
        shared = (script, line_of(KEYS, "plus, times ="), "<lambda>")
        # cProfile writes one entry per code object under the same key, so the
        # last one written wins; mtrace counts both.
        self.assertIn(theirs[shared][1], (1000, 1010))
        self.assertEqual(ours[shared][1], 2010)
        # The trace names these two apart (main.<locals>.<lambda> and
        # main.<locals>.<lambda>.<locals>.<lambda>); the pstats file sums them.
        nested = (script, line_of(KEYS, "nested = lambda"), "<lambda>")
        main = (script, line_of(KEYS, "def main"), "main")
        self.assertEqual(theirs[nested][1], 20)
        self.assertEqual(ours[nested][1], 40)
        self.assertEqual(ours[nested][4][main][0], 40, "calls from main, summed")


MANY_TASKS = """
    import asyncio

    async def handle(i):
        await asyncio.sleep(0)
        return i

    async def main():
        # Long names: 3,000 of them are some 1.3 MB, more than the
        # recorder's own default of 1 MiB.
        tasks = [asyncio.create_task(handle(i), name=f"request-{i:06d}-" + "x" * 400)
                 for i in range(3000)]
        await asyncio.gather(*tasks)

    asyncio.run(main())
"""


class TaskNames(Case):
    """Every asyncio task's name is a metadata record: a service with tens
    of thousands of tasks used to fill the name region, and the names (and
    functions) recorded after that were lost. The region is now small and
    names past it go on in the file's chunk slots, so none runs out,
    whatever --meta-capacity says."""

    def dropped_names(self, report):
        return sum(w["count"] for w in report["warnings"] if w["kind"] == "dropped_metadata")

    def test_the_default_keeps_every_task_name(self):
        trace = self.mtrace(self.script("tasks.py", MANY_TASKS))
        report = self.report(trace)
        self.assertEqual(self.dropped_names(report), 0, report["warnings"])
        names = {s["name"] for s in report["stacks"] if s["id"].startswith("stack:")}
        wanted = {f"request-{i:06d}-" + "x" * 400 for i in range(3000)}
        self.assertEqual(names & wanted, wanted)

    def test_a_small_meta_capacity_keeps_every_task_name_too(self):
        trace = self.mtrace("--meta-capacity", "4K", self.script("tasks.py", MANY_TASKS))
        report = self.report(trace)
        self.assertEqual(self.dropped_names(report), 0, report["warnings"])
        names = {s["name"] for s in report["stacks"] if s["id"].startswith("stack:")}
        wanted = {f"request-{i:06d}-" + "x" * 400 for i in range(3000)}
        self.assertEqual(names & wanted, wanted)

    def test_a_million_task_names_are_all_in_the_report(self):
        script = self.script("million.py", """
            import asyncio

            async def handle():
                return None

            async def main():
                for batch in range(100):
                    await asyncio.gather(*(
                        asyncio.create_task(handle(), name=f"t-{batch * 10_000 + i}")
                        for i in range(10_000)))

            asyncio.run(main())
        """)
        trace = self.mtrace(script)
        table = run([mtanalyze_binary(), trace, "--stacks"]).stdout
        named = set(re.findall(r"\bt-\d+\b", table))
        self.assertEqual(len(named), 1_000_000, table[-2000:])
        self.assertNotIn("dropped_metadata", table)
        # An independent reader of the format follows the segments too.
        names = read_stack_names(trace)
        self.assertEqual(sum(1 for n in names.values() if n.startswith("t-")), 1_000_000)

    def test_a_child_s_trace_is_no_larger_than_twice_what_it_holds(self):
        script = self.script("parent.py", """
            import subprocess, sys

            def fib(n):
                return n if n < 2 else fib(n - 1) + fib(n - 2)

            if sys.argv[1:] == ["child"]:
                fib(20)
            else:
                subprocess.run([sys.executable, __file__, "child"], check=True)
        """)
        self.mtrace(script)
        children = [f for f in os.listdir(self.dir) if f.startswith("trace.pid")]
        self.assertEqual(len(children), 1, os.listdir(self.dir))
        child = os.path.join(self.dir, children[0])
        held = trace_contents(child)
        apparent = os.path.getsize(child)
        on_disk = os.stat(child).st_blocks * 512
        self.assertGreater(held, 100_000)
        self.assertLessEqual(apparent, 2 * held, (apparent, held))
        self.assertLessEqual(on_disk, 2 * held, (on_disk, held))


def metadata_log(data):
    """The records of a trace's metadata log, as (kind, payload bytes),
    following next-segment records (kind 7) from the first region through
    the segments, as schemas/trace-format.md ("Metadata segments") says."""
    meta_offset, meta_capacity = struct.unpack_from("<2Q", data, 0x30)
    meta_len, = struct.unpack_from("<Q", data, 0xD0)
    at, end = meta_offset, meta_offset + min(meta_len, meta_capacity)
    records = []
    while at + 8 <= end:
        length, kind = struct.unpack_from("<IH", data, at)
        if length == 0 and kind == 0:
            break
        if kind == 7:  # next segment: offset u64, size u64
            offset, size = struct.unpack_from("<2Q", data, at + 8)
            if data[offset + 8:offset + 16] != b"MTMETASG":
                raise AssertionError(f"no segment at {offset}")
            committed, = struct.unpack_from("<Q", data, offset + 16)
            at, end = offset + 64, offset + 64 + min(committed, size - 64)
            continue
        records.append((kind, data[at + 8:at + 8 + length]))
        at += 8 + (length + 7) // 8 * 8
    return records


def read_stack_names(path):
    """{stack id: name} of the trace at `path`."""
    with open(path, "rb") as f:
        data = f.read()
    names = {}
    for kind, payload in metadata_log(data):
        if kind == 2:  # stack: id u64, name str
            stack, size = struct.unpack_from("<QI", payload, 0)
            names[stack] = payload[12:12 + size].decode("utf-8", "replace")
    return names


def trace_contents(path):
    """Bytes a trace holds: its header, its chunks' headers and committed
    bytes, and its metadata records."""
    with open(path, "rb") as f:
        data = f.read()
    version, = struct.unpack_from("<I", data, 0x08)
    chunk_size, = struct.unpack_from("<I", data, 0x18)
    chunk_count, chunks_offset = struct.unpack_from("<2Q", data, 0x20)
    held = 4096
    for slot in range(chunk_count):
        base = chunks_offset + slot * chunk_size
        if base + 8 > len(data):
            break
        state, = struct.unpack_from("<Q", data, base)
        committed = ((state >> 1) & ((1 << 23) - 1)) * (1 if version >= 4 else 16)
        if state >> 24 and committed:
            held += 64 + committed
    return held + sum(8 + (len(p) + 7) // 8 * 8 for _, p in metadata_log(data))


class Errors(Case):
    """A bad option, an unwritable -o or a missing script: one line on stderr
    and status 2, no traceback, the program not run. The program's own exit
    status and exceptions pass through."""

    def mtrace_fails(self, *args, output=None):
        script = self.script("hello.py", "print('the script ran')\n")
        out = output or self.path("trace.bin")
        args = [a.replace("SCRIPT", script) for a in args] or [script]
        done = subprocess.run([sys.executable, "-m", "mtrace", "-o", out, *args],
                              capture_output=True, text=True, cwd=self.dir)
        shown = f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        self.assertEqual(done.returncode, 2, shown)
        self.assertNotIn("Traceback", done.stderr, shown)
        lines = done.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, shown)
        self.assertTrue(lines[0].startswith("python -m mtrace: "), shown)
        self.assertNotIn("the script ran", done.stdout, shown)
        return lines[0]

    def test_capacity_that_is_not_a_byte_count(self):
        line = self.mtrace_fails("--capacity", "banana", "SCRIPT")
        self.assertIn("banana", line)
        self.assertFalse(os.path.exists(self.path("trace.bin")))

    def test_meta_capacity_that_is_not_a_byte_count(self):
        line = self.mtrace_fails("--meta-capacity", "lots", "SCRIPT")
        self.assertIn("lots", line)
        self.assertIn("meta_capacity", self.mtrace_fails("--meta-capacity", "0", "SCRIPT"))

    def test_capacity_too_small_for_one_chunk(self):
        self.assertIn("capacity 0", self.mtrace_fails("--capacity", "0", "SCRIPT"))

    def test_unknown_option(self):
        self.assertIn("--bogus", self.mtrace_fails("--bogus", "SCRIPT"))

    def test_output_in_a_missing_folder(self):
        out = os.path.join(self.dir, "no", "such", "dir", "x.bin")
        self.assertIn(out, self.mtrace_fails(output=out))

    def test_output_is_a_folder(self):
        self.assertIn(self.dir, self.mtrace_fails(output=self.dir))

    def test_missing_script(self):
        missing = self.path("missing.py")
        self.assertIn(missing, self.mtrace_fails(missing))

    def test_missing_module(self):
        self.assertIn("no_such_module_here", self.mtrace_fails("-m", "no_such_module_here"))

    def test_the_scripts_exit_status_passes_through(self):
        script = self.script("exits.py", "import sys\nprint('ran')\nsys.exit(3)\n")
        out = self.path("trace.bin")
        done = subprocess.run([sys.executable, "-m", "mtrace", "-o", out, script],
                              capture_output=True, text=True, cwd=self.dir)
        self.assertEqual((done.returncode, done.stdout), (3, "ran\n"), done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        self.assertGreater(self.report(out)["trace"]["events"], 0)

    def test_the_scripts_exception_is_reported_as_by_python(self):
        script = self.script("raises.py", "def boom():\n    raise ValueError('boom')\nboom()\n")
        out = self.path("trace.bin")
        done = subprocess.run([sys.executable, "-m", "mtrace", "-o", out, script],
                              capture_output=True, text=True, cwd=self.dir)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("Traceback", done.stderr)
        self.assertTrue(done.stderr.rstrip().endswith("ValueError: boom"), done.stderr)
        self.assertGreater(self.report(out)["trace"]["events"], 0)


class Marks(Case):
    def test_marks_are_in_the_report_and_check_with_their_threads(self):
        script = self.script("marks.py", """
            import sys, threading, mtrace

            def work(n):
                return sum(i * i for i in range(n))

            mtrace.mark("before enable")          # not recording: nothing
            mtrace.enable(sys.argv[1])
            work(1000)
            mtrace.mark("warm-up done")
            work(1000)
            t = threading.Thread(target=lambda: (work(10), mtrace.mark("from worker")),
                                 name="worker")
            t.start()
            t.join()
            mtrace.mark("warm-up done")           # names may repeat
            try:
                mtrace.mark(7)
            except TypeError:
                pass
            else:
                raise AssertionError("mark(7) did not raise TypeError")
            mtrace.disable()
            mtrace.mark("after disable")          # nothing either
        """)
        trace = self.path("marks.bin")
        run([sys.executable, script, trace], cwd=self.dir)
        report = self.report(trace)
        marks = report["marks"]
        self.assertEqual([m["name"] for m in marks],
                         ["warm-up done", "from worker", "warm-up done"], marks)
        # Each mark names the trace thread that made it: the main thread's
        # two, the worker's one (a thread of the trace, not the main one).
        tids = {t["tid"] for t in report["trace"]["threads"]}
        self.assertIn(marks[0]["thread"], tids, report["trace"]["threads"])
        self.assertIn(marks[1]["thread"], tids, report["trace"]["threads"])
        self.assertEqual(marks[0]["thread"], marks[2]["thread"])
        self.assertNotEqual(marks[0]["thread"], marks[1]["thread"])
        times = [m["time_ns"] for m in marks]
        self.assertEqual(times, sorted(times))
        trace_summary = report["trace"]
        self.assertLessEqual(trace_summary["first_event_ns"], times[0])
        self.assertLessEqual(times[-1], trace_summary["end_ns"])
        check = run([mtanalyze_binary(), "check", trace]).stdout
        self.assertIn("marks:              3", check)
        self.assertIn('"from worker"', check)


class SamePathTwice(Case):
    def test_recording_twice_to_one_path_keeps_only_the_second_recording(self):
        script = self.script("twice.py", """
            import json, sys, threading, mtrace

            def f(n):
                return n and f(n - 1)

            def work():
                for _ in range(100):
                    f(10)

            summaries = []
            for _ in range(2):
                mtrace.enable(sys.argv[1])
                work()
                t = threading.Thread(target=work)
                t.start()
                t.join()
                summaries.append(mtrace.disable())
            print(json.dumps(summaries))
        """)
        trace = self.path("twice.bin")
        summaries = json.loads(run([sys.executable, script, trace], cwd=self.dir).stdout)
        check = json.loads(run([mtanalyze_binary(), "check", trace, "--format", "json"]).stdout)
        self.assertEqual(check["chunks_damaged"], [], "damaged chunks")
        self.assertEqual(check["dropped_chunks"], 0)
        # The recorder's count is the file's: nothing of the first recording.
        self.assertEqual(summaries[1]["events"], check["events"])
        f = [x for x in self.report(trace)["functions"] if x["function"] == "f"]
        self.assertEqual(f[0]["ncalls"], 2 * 100 * 11)


class ReadmeFromCleanCheckout(Case):
    """The README's Python section, run as written in a fresh clone (slow:
    a full build; only when MTRACE_TEST_README=1)."""

    @unittest.skipUnless(os.environ.get("MTRACE_TEST_README") == "1",
                         "set MTRACE_TEST_README=1 to build a clean clone as the README says")
    def test_readme_python_section_works_from_a_clean_checkout(self):
        with open(os.path.join(REPO, "README.md")) as f:
            readme = f.read()
        section = readme.split("\n## Python", 1)[1].split("\n## ", 1)[0]
        block = section.split("```sh\n", 1)[1].split("```", 1)[0]
        clone = self.path("clone")
        run(["git", "clone", "-q", REPO, clone])
        env = dict(os.environ)
        for var in ("VIRTUAL_ENV", "CARGO_TARGET_DIR", "PYTHONPATH"):
            env.pop(var, None)
        # Building the wheel is the one step that needs the Rust toolchain:
        # the PATH run-tests.sh was started with.
        env["PATH"] = os.environ.get("MTRACE_BUILD_PATH", env["PATH"])
        env["CARGO_TARGET_DIR"] = self.path("target")
        done = run(["bash", "-euxo", "pipefail", "-c", block], cwd=clone, env=env)
        # The README records its threads example: its recursive fib, on the
        # gil clock the trace asks for.
        shown = done.stdout + done.stderr
        self.assertRegex(done.stdout, r"fib \(\S*/crates/mtrace-python/examples/threads\.py:", shown)
        self.assertIn(f"clock: {PREFERRED_CLOCK}", done.stdout, shown)


if __name__ == "__main__":
    unittest.main()
