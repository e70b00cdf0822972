"""Which stack each frame lands on: threads (also those running before
``enable()``), asyncio tasks, greenlets, generators; and the ``sys.monitoring``
backend living next to cProfile. Through the real ``mtrace`` module, the real
``mtanalyze`` (``--format json``) and, for parity, the real cProfile.

Run with ``crates/mtrace-python/run-tests.sh`` or, with the module installed
and ``MTANALYZE`` naming the analyzer, ``python -m unittest discover -s
crates/mtrace-python/tests -v``.
"""

import importlib
import os
import struct
import subprocess
import sys
import unittest

from test_mtrace import Case, load, metadata_log, run


def function(report, name):
    """The one row of `name` in a report's function table."""
    rows = [f for f in report["functions"] if f["function"] == name]
    if len(rows) != 1:
        raise AssertionError(f"{len(rows)} rows named {name!r}: {report['functions']}")
    return rows[0]


# Event kinds of schemas/trace-format.md ("Events").
ENTER, EXIT, SWITCH, LOST, END = 1, 2, 3, 6, 8


def read_trace(path):
    """The events of a binary trace, read as schemas/trace-format.md says
    (the analyzer reports no single events): ({tid: [(kind, tick, payload),
    ...] in the thread's order}, {stack id: name})."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"MTRACE\0\x01":
        raise AssertionError(f"{path}: not a trace")
    version, = struct.unpack_from("<I", data, 0x08)
    chunk_size, = struct.unpack_from("<I", data, 0x18)
    chunk_count, chunks_offset = struct.unpack_from("<2Q", data, 0x20)
    names = {}
    for kind, payload in metadata_log(data):
        if kind == 2:  # stack: id u64, name str
            stack, size = struct.unpack_from("<QI", payload, 0)
            names[stack] = payload[12:12 + size].decode("utf-8", "replace")
    chunks = {}
    slots = min(chunk_count, -(-(len(data) - chunks_offset) // chunk_size))
    for slot in range(max(slots, 0)):
        base = chunks_offset + slot * chunk_size
        if base + 64 > len(data):
            break
        state, tid, chunk_no = struct.unpack_from("<3Q", data, base)
        # Version 4 counts committed bytes, earlier versions 16-byte units.
        committed = ((state >> 1) & ((1 << 23) - 1)) * (1 if version >= 4 else 16)
        if state >> 24 == 0 or committed == 0:
            continue
        body = base + 64
        own_depth, stack, stack_depth, _flags, tick = struct.unpack_from("<IQIIQ", data, body + 4)
        frames = struct.unpack_from(f"<{own_depth + stack_depth}I", data, body + 32)
        at = body + (32 + 4 * (own_depth + stack_depth) + 15) // 16 * 16
        if version >= 4:
            named = list(frames[own_depth:] if stack else frames[:own_depth])
            events = compact_events(data, at, body + committed, tick, named)
        else:
            events = []
            while at + 16 <= body + committed:
                word, payload = struct.unpack_from("<2Q", data, at)
                events.append((word >> 60, word & ((1 << 60) - 1), payload))
                at += 16
                if word >> 60 == LOST:
                    break
        chunks.setdefault(tid, []).append((chunk_no, events))
    threads = {tid: [e for _, events in sorted(cs) for e in events]
               for tid, cs in chunks.items()}
    return threads, names


def compact_events(data, at, end, tick, named):
    """The (kind, tick, payload) events of a version-4 chunk's bytes
    `at..end` (schemas/trace-format.md, "Events (version 4: compact)"):
    ticks are deltas from the snapshot's `tick`, and an exit of form 3
    is one of the innermost frame the chunk names (`named`)."""
    events = []
    tick &= (1 << 60) - 1
    while at < end:
        tag = data[at]
        form, tick_bytes = tag >> 6, (0, 1, 2, 7)[(tag >> 4) & 3]
        high = int.from_bytes(data[at + 1:at + 1 + tick_bytes], "little")
        tick += (tag & 0xF) | high << 4
        at += 1 + tick_bytes
        if form == 0:
            kind, width = data[at] >> 4, (0, 1, 2, 4, 8)[data[at] & 0xF]
            payload = int.from_bytes(data[at + 1:at + 1 + width], "little")
            at += 1 + width
            if kind == ENTER:
                named.append(payload)
            elif kind in (EXIT, SWITCH):
                named.clear()
        elif form in (1, 2):
            kind, payload = ENTER, int.from_bytes(data[at:at + form], "little")
            at += form
            named.append(payload)
        else:
            kind, payload = EXIT, named.pop()
        events.append((kind, tick, payload))
        if kind == LOST:
            break
    return events


def stack_lives(threads):
    """For each logical stack: the (tick, tid, index) of every switch away
    from it, and of every end of it."""
    away, ends = {}, {}
    for tid, events in threads.items():
        current = 0
        for i, (kind, tick, payload) in enumerate(events):
            if kind == SWITCH:
                if current:
                    away.setdefault(current, []).append((tick, tid, i))
                current = payload
            elif kind == END:
                ends.setdefault(payload, []).append((tick, tid, i))
    return away, ends


class StackCase(Case):
    def record(self, name, text, *args):
        """Runs a script that records itself into the path it gets as argv[1];
        returns the JSON report (with its stacks)."""
        script = self.script(name, text)
        trace = self.path(name + ".bin")
        done = run([sys.executable, script, trace, *args], cwd=self.dir)
        report = self.report(trace)
        self.assertEqual(report["warnings"], [], "the trace needed no repair")
        return report, done


class Threads(StackCase):
    def test_threads_running_before_enable_are_recorded(self):
        report, _ = self.record("early.py", """
            import sys, threading, mtrace

            def work(n):
                return sum(i * i for i in range(n))

            def worker(go, done):
                go.wait()
                work(2000)
                done.wait()

            go, done = threading.Event(), threading.Event()
            threads = [threading.Thread(target=worker, args=(go, done), name=f"early-{i}")
                       for i in range(3)]
            for t in threads:
                t.start()
            mtrace.enable(sys.argv[1])   # the threads are already waiting
            go.set()
            work(10)
            done.set()
            for t in threads:
                t.join()
            mtrace.disable()
        """)
        work = function(report, "work")
        self.assertEqual((work["ncalls"], work["primitive_calls"]), (4, 4), work)
        threads = [s for s in report["stacks"] if s["id"].startswith("thread:")]
        self.assertGreaterEqual(len(threads), 4, report["stacks"])

    def test_threads_started_with__thread_are_recorded(self):
        report, _ = self.record("raw.py", """
            import sys, _thread, threading, mtrace

            def work(n, done):
                sum(i for i in range(n))
                done.release()

            mtrace.enable(sys.argv[1])
            locks = []
            for _ in range(2):
                done = threading.Lock()
                done.acquire()
                locks.append(done)
                _thread.start_new_thread(work, (1000, done))
            for done in locks:
                done.acquire()
            mtrace.disable()
        """)
        work = function(report, "work")
        self.assertEqual(work["ncalls"], 2, work)


ASYNC_FETCH = """
    import asyncio, sys, mtrace
    N, D = int(sys.argv[2]), float(sys.argv[3])

    async def fetch(i):
        await asyncio.sleep(D)
        await asyncio.sleep(0)
        return i

    async def main():
        named = [asyncio.create_task(fetch(i), name=f"fetch-{i}") for i in range(N)]
        unnamed = [asyncio.ensure_future(fetch(i)) for i in range(N)]
        names = [t.get_name() for t in named + unnamed]
        await asyncio.gather(*named, *unnamed)
        return names

    mtrace.enable(sys.argv[1])
    names = asyncio.run(main())
    mtrace.disable()
    print(" ".join(names))
"""


class AsyncioTasks(StackCase):
    def test_each_task_is_one_stack_and_each_coroutine_one_call(self):
        n, d = 6, 0.03
        report, done = self.record("fetch.py", ASYNC_FETCH, str(n), str(d))
        fetch = function(report, "fetch")
        # 2n tasks each call fetch once, however often it is resumed.
        self.assertEqual((fetch["ncalls"], fetch["primitive_calls"]), (2 * n, 2 * n), fetch)
        # Every task sleeps d at least: that is paused time of fetch.
        self.assertGreaterEqual(fetch["paused_ns"], 2 * n * d * 1e9, fetch)
        names = done.stdout.split()
        self.assertEqual(len(names), 2 * n)
        stacks = {s["name"]: s for s in report["stacks"] if s["id"].startswith("stack:")}
        self.assertTrue(any(name.startswith("Task-") for name in names), names)
        # A name the program gave stays; asyncio's own (Task-N) says the
        # coroutine too, as asyncio's repr of a task does.
        names = [f"{name} (fetch)" if name.startswith("Task-") else name for name in names]
        for name in names:
            self.assertIn(name, stacks, f"no stack named {name!r}: {sorted(stacks)}")
        # Each is said to be an asyncio task (reports group stacks by kind).
        self.assertEqual({s.get("kind") for s in stacks.values()}, {"asyncio_task"}, stacks)
        self.assertIn("main", {s["name"].split(" (")[-1].rstrip(")") for s in stacks.values()})
        # Each task's stack holds its own fetch only (depth: fetch, sleep, ...).
        for name in names:
            self.assertGreaterEqual(stacks[name]["switches_in"], 2, stacks[name])
        # The task that ran main() awaited everything: main is one call too.
        main = function(report, "main")
        self.assertEqual(main["ncalls"], 1, main)
        self.assertGreaterEqual(main["paused_ns"], d * 1e9, main)

    @unittest.skipIf(sys.version_info < (3, 12), "eager tasks are 3.12+")
    def test_eager_tasks_get_their_own_stacks_too(self):
        # An eager task runs its first step inside its creator's step (as
        # aiohttp's request handlers do): it must still be one call, on its
        # own stack, paused while it sleeps.
        n, d = 5, 0.02
        report, _ = self.record("eager.py", """
            import asyncio, sys, mtrace
            N, D = int(sys.argv[2]), float(sys.argv[3])

            async def fetch(i):
                await asyncio.sleep(D)
                return i

            async def main():
                asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
                tasks = [asyncio.create_task(fetch(i), name=f"eager-{i}") for i in range(N)]
                await asyncio.gather(*tasks)

            mtrace.enable(sys.argv[1])
            asyncio.run(main())
            mtrace.disable()
        """, str(n), str(d))
        fetch = function(report, "fetch")
        self.assertEqual((fetch["ncalls"], fetch["primitive_calls"]), (n, n), fetch)
        self.assertGreaterEqual(fetch["paused_ns"], n * d * 1e9, fetch)
        # One stack per task (create_task names an eager task only after
        # its first step, so the stacks have the default Task-N names).
        logical = [s for s in report["stacks"] if s["id"].startswith("stack:")]
        self.assertGreaterEqual(len(logical), n + 1, report["stacks"])

    def test_tasks_off_counts_resumptions_as_cprofile_does(self):
        report, _ = self.record("off.py", """
            import asyncio, sys, mtrace

            async def step():
                await asyncio.sleep(0)
                await asyncio.sleep(0)

            async def main():
                await asyncio.gather(*(step() for _ in range(3)))

            mtrace.enable(sys.argv[1], tasks=False)
            asyncio.run(main())
            mtrace.disable()
        """)
        step = function(report, "step")
        # Started, resumed twice: three calls per coroutine.
        self.assertEqual(step["ncalls"], 9, step)
        logical = [s for s in report["stacks"] if s["id"].startswith("stack:")]
        self.assertEqual(logical, [], "no task stacks with tasks=False")

    def test_the_command_line_takes_tasks_on_or_off(self):
        # `python -m mtrace` records tasks as stacks by default; --no-tasks
        # counts resumptions as cProfile does, with no task stacks.
        script = self.script("cli_tasks.py", """
            import asyncio

            async def step():
                await asyncio.sleep(0)
                await asyncio.sleep(0)

            async def main():
                await asyncio.gather(*(step() for _ in range(3)))

            asyncio.run(main())
        """)
        for flags, calls, task_stacks in (([], 3, True), (["--no-tasks"], 9, False)):
            report = self.report(self.mtrace(*flags, script))
            step = function(report, "step")
            self.assertEqual(step["ncalls"], calls, (flags, step))
            logical = [s for s in report["stacks"] if s["id"].startswith("stack:")]
            self.assertEqual(bool(logical), task_stacks, (flags, report["stacks"]))

    def test_cancelled_tasks_and_async_generators_stay_well_nested(self):
        report, _ = self.record("cancel.py", """
            import asyncio, sys, mtrace

            async def ticks(n):
                for i in range(n):
                    await asyncio.sleep(0)
                    yield i

            async def consume():
                total = 0
                async for i in ticks(3):
                    total += i
                return total

            async def waits_forever():
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    await asyncio.sleep(0)
                    raise

            async def main():
                t = asyncio.create_task(waits_forever(), name="victim")
                await asyncio.sleep(0)
                t.cancel()
                try:
                    await t
                except asyncio.CancelledError:
                    pass
                return await asyncio.gather(consume(), consume())

            mtrace.enable(sys.argv[1])
            asyncio.run(main())
            mtrace.disable()
        """)
        self.assertEqual(function(report, "waits_forever")["ncalls"], 1)
        self.assertEqual(function(report, "consume")["ncalls"], 2)
        # An async generator follows the generator convention: a call per
        # resumption (3 yields and the final StopAsyncIteration, plus the
        # resumptions after each sleep), never left open.
        ticks = function(report, "ticks")
        self.assertGreaterEqual(ticks["ncalls"], 2 * 4, ticks)
        victim = [s for s in report["stacks"] if s["name"] == "victim"]
        self.assertEqual(len(victim), 1, report["stacks"])


class StackEnds(StackCase):
    """A task's stack ends (an `end` event) when its coroutine finishes,
    on the thread that ran its last step, after switching away from it."""

    def ends_of(self, trace):
        threads, names = read_trace(trace)
        away, ends = stack_lives(threads)
        for stack, found in ends.items():
            self.assertEqual(len(found), 1, f"stack {stack} ({names.get(stack)}) ends {found}")
            self.assertIn(stack, away, f"stack {stack} ends but never ran")
            (tick, tid, i), = found
            last = max(away[stack])
            self.assertGreaterEqual(tick, last[0], f"stack {stack} ends before it stops")
            self.assertEqual(tid, last[1], f"stack {stack} ends on another thread")
            self.assertGreater(i, last[2], f"stack {stack} ends before its last switch away")
        return names, away, ends

    def test_each_finished_task_ends_once_after_its_last_switch(self):
        n = 12
        report, _ = self.record("ends.py", """
            import asyncio, sys, mtrace
            N = int(sys.argv[2])

            async def work(i):
                await asyncio.sleep(0.001)
                await asyncio.sleep(0)
                return i

            async def main():
                tasks = [asyncio.create_task(work(i), name=f"work-{i}") for i in range(N)]
                return await asyncio.gather(*tasks)

            mtrace.enable(sys.argv[1])
            asyncio.run(main())
            mtrace.disable()
        """, str(n))
        names, away, ends = self.ends_of(self.path("ends.py.bin"))
        work = {stack for stack, name in names.items() if name.startswith("work-")}
        self.assertEqual(len(work), n, names)
        self.assertEqual(work - set(ends), set(), "every work task ends")
        # Every task that ran finished inside the recording (main's, and
        # those asyncio.run makes to shut down): each ran, each ends.
        self.assertEqual(set(ends), set(away), names)
        self.assertEqual(function(report, "work")["ncalls"], n)

    def test_a_task_pending_when_recording_stops_does_not_end(self):
        self.record("pending.py", """
            import asyncio, sys, mtrace

            async def waiter(event):
                await event.wait()

            async def work():
                await asyncio.sleep(0)

            loop = asyncio.new_event_loop()
            mtrace.enable(sys.argv[1])
            event = asyncio.Event()
            pending = loop.create_task(waiter(event), name="pending")
            loop.run_until_complete(loop.create_task(work(), name="done"))
            mtrace.disable()
            # It finishes after the recording: nothing to write anywhere.
            event.set()
            loop.run_until_complete(pending)
            loop.close()
        """)
        names, away, ends = self.ends_of(self.path("pending.py.bin"))
        by_name = {name: stack for stack, name in names.items()}
        self.assertIn(by_name["pending"], away, "the pending task ran its first step")
        self.assertNotIn(by_name["pending"], ends)
        self.assertIn(by_name["done"], ends)

    def test_a_task_of_an_earlier_recording_ends_only_if_it_runs_in_this_one(self):
        # A session is a recording: a task's context kept from the first
        # session writes no end into the second unless it ran there. The
        # task that finishes while nothing records stays in the table; a
        # new task at its address replaces (drops) it in the second session.
        _, done = self.record("sessions.py", """
            import asyncio, sys, mtrace

            async def waiter(event):
                await event.wait()

            async def quick():
                return None

            first, second = sys.argv[1], sys.argv[1] + ".2"
            loop = asyncio.new_event_loop()
            mtrace.enable(first)
            stale_event, resumed_event = asyncio.Event(), asyncio.Event()
            stale = loop.create_task(waiter(stale_event), name="stale")
            resumed = loop.create_task(waiter(resumed_event), name="resumed")
            loop.run_until_complete(asyncio.sleep(0))
            mtrace.disable()
            stale_event.set()
            loop.run_until_complete(stale)
            mtrace.enable(second)
            # Freed, its memory goes to the next task made (nothing else
            # of its size is made in between: the coroutine comes first).
            coroutine = quick()
            address = id(stale)
            del stale
            task = loop.create_task(coroutine, name="new")
            reused = id(task) == address
            loop.run_until_complete(task)
            resumed_event.set()
            loop.run_until_complete(resumed)
            mtrace.disable()
            loop.close()
            print("reused" if reused else "not reused")
        """)
        first, _, first_ends = self.ends_of(self.path("sessions.py.bin"))
        by_first_name = {name: stack for stack, name in first.items()}
        self.assertNotIn(by_first_name["stale"], first_ends, "it finished after the first")
        self.assertNotIn(by_first_name["resumed"], first_ends, "it finished in the second")
        names, away, ends = self.ends_of(self.path("sessions.py.bin.2"))
        self.assertNotIn(by_first_name["stale"], ends)
        # The one that was resumed in the second recording ran there: it ends.
        self.assertIn(by_first_name["resumed"], ends)
        self.assertEqual(set(ends), set(away))
        # CPython's allocators (3.11-3.13, with the GIL) hand the freed
        # task's memory to the next task; another allocator may not, and
        # then the stale context was never dropped: say so.
        if done.stdout.split() != ["reused"]:
            self.skipTest("the new task did not take the stale one's address: "
                          "the stale context was not replaced")


class Generators(StackCase):
    GEN = """
        import sys

        def squares(n):
            for i in range(n):
                yield i * i

        def consume():
            total = 0
            for x in squares(10):
                total += x
            g = squares(5)
            next(g)
            next(g)
            g.close()
            return total

        def main():
            for _ in range(3):
                consume()

        if sys.argv[1:] == ["cprofile"]:
            import cProfile
            cProfile.run("main()", sys.argv[0] + ".prof")
        else:
            import mtrace
            with mtrace.profile(sys.argv[1]):
                main()
    """

    def test_each_resumption_of_a_generator_is_a_call_as_in_cprofile(self):
        report, _ = self.record("gen.py", self.GEN)
        squares = function(report, "squares")
        script = self.path("gen.py")
        run([sys.executable, script, "cprofile"], cwd=self.dir)
        theirs = {k: v for k, v in load(script + ".prof").items() if k[0] == script}
        # Per consume(): 10 yields + the exhausting resumption = 11 calls,
        # then 2 resumptions, and the close, whose events change with the
        # interpreter: a throw into the frame before 3.13, nothing on 3.13
        # (a generator suspended outside any try block is closed without
        # running it), and on 3.14.1+ events cProfile counts as one more
        # call each. mtrace follows the interpreter: its counts are
        # cProfile's on the version running, whatever they are.
        ours = (squares["ncalls"], squares["primitive_calls"])
        self.assertEqual(ours, theirs[(script, 4)][:2], "cProfile counts the same")
        self.assertGreaterEqual(ours[0], 3 * 13, squares)
        self.assertEqual(ours[0], ours[1], "no recursion")


class Greenlets(StackCase):
    @classmethod
    def setUpClass(cls):
        try:
            importlib.import_module("greenlet")
            return
        except ImportError:
            pass
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "greenlet"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise unittest.SkipTest(
                "greenlet is not installed and `pip install greenlet` failed "
                f"(the greenlet test did NOT run): {done.stderr.strip()[-300:]}")
        importlib.invalidate_caches()

    def test_a_profile_in_memory_puts_greenlets_on_stacks_of_their_own(self):
        # A Profile without a path (a profile per request) takes a lean
        # path at enable(): the greenlet hooks must still be installed when
        # greenlet is imported.
        report, _ = self.record("green_profile.py", """
            import shutil, sys, greenlet, mtrace

            def ping(n):
                for i in range(n):
                    pong_g.switch(i)

            def pong(_):
                while True:
                    ping_g.switch()

            ping_g = greenlet.greenlet(ping)
            pong_g = greenlet.greenlet(pong)
            p = mtrace.Profile()
            p.enable()
            ping_g.switch(5)
            p.disable()
            shutil.copyfile(p.trace_paths[0], sys.argv[1])
        """)
        ping = function(report, "ping")
        self.assertEqual(ping["ncalls"], 1, ping)
        greenlets = [s for s in report["stacks"] if s["id"].startswith("stack:")]
        self.assertEqual(sorted(s["name"] for s in greenlets), ["greenlet-1", "greenlet-2"],
                         report["stacks"])

    def test_each_greenlet_runs_on_a_stack_of_its_own(self):
        report, _ = self.record("green.py", """
            import sys, mtrace
            mtrace.enable(sys.argv[1])   # before the import: the tracer waits for it
            import greenlet

            def ping(n):
                for i in range(n):
                    pong_g.switch(i)

            def pong(_):
                while True:
                    answer(ping_g.switch())

            def answer(i):
                return i

            ping_g = greenlet.greenlet(ping)
            pong_g = greenlet.greenlet(pong)
            ping_g.switch(5)
            mtrace.disable()
        """)
        ping, pong = function(report, "ping"), function(report, "pong")
        # Both stay one call however often they switch away and back.
        self.assertEqual(ping["ncalls"], 1, ping)
        self.assertEqual(pong["ncalls"], 1, pong)
        self.assertGreater(pong["paused_ns"], 0, pong)
        greenlets = [s for s in report["stacks"] if s["id"].startswith("stack:")]
        self.assertEqual(sorted(s["name"] for s in greenlets), ["greenlet-1", "greenlet-2"],
                         report["stacks"])
        self.assertEqual({s.get("kind") for s in greenlets}, {"greenlet"}, greenlets)
        # ping -> switch, pong -> answer / switch: nothing of the switching
        # machinery piles up on a greenlet's stack.
        for s in greenlets:
            self.assertLessEqual(s["max_depth"], 2, s)
        # ping's frame stays open on its own stack while pong runs: its
        # paused time covers pong's turns.
        self.assertGreater(ping["paused_ns"], 0, ping)


class FastBuiltins(StackCase):
    def test_the_command_line_takes_fast_builtins(self):
        # One call site calls a Python function first, then a built-in:
        # --fast-builtins (3.12+) stops watching that site for C calls, so
        # len goes unseen there; on 3.11 the flag records everything.
        script = self.script("cli_fast.py", """
            def f(x):
                return 0

            for h in [f, len] * 50:
                h([1, 2])
        """)
        def len_calls(report):
            return sum(r["ncalls"] for r in report["functions"]
                       if r["function"] == "<built-in method builtins.len>")
        default = self.report(self.mtrace(script))
        fast = self.report(self.mtrace("--fast-builtins", script))
        self.assertEqual(function(default, "f")["ncalls"], 50)
        self.assertEqual(function(fast, "f")["ncalls"], 50)
        self.assertEqual(len_calls(default), 50)
        if sys.version_info >= (3, 12):
            self.assertLess(len_calls(fast), 50)
        else:
            self.assertEqual(len_calls(fast), 50)

    @unittest.skipIf(sys.version_info < (3, 12), "builtins='fast' is sys.monitoring's")
    def test_fast_builtins_still_count_every_python_call_and_steady_builtins(self):
        report, _ = self.record("fast.py", """
            import sys, mtrace

            class Box:
                def __init__(self, items):
                    self.items = items

            def size(box):
                return len(box.items)

            def walk(n):
                return 0 if n == 0 else size(Box([n])) + walk(n - 1)

            mtrace.enable(sys.argv[1], builtins="fast")
            for _ in range(10):
                walk(50)
            mtrace.disable()
        """)
        self.assertEqual(function(report, "walk")["ncalls"], 510)
        self.assertEqual(function(report, "size")["ncalls"], 500)
        self.assertEqual(function(report, "Box.__init__")["ncalls"], 500)
        # The site in size() only ever calls len: every call is recorded.
        self.assertEqual(function(report, "<built-in method builtins.len>")["ncalls"], 500)


class NextToCProfile(StackCase):
    @unittest.skipIf(sys.version_info < (3, 12), "sys.monitoring is 3.12+")
    def test_mtrace_and_cprofile_run_in_one_process(self):
        report, done = self.record("both.py", """
            import cProfile, pstats, sys, io, mtrace
            from mtrace import _mtrace

            def fib(n):
                return n if n < 2 else fib(n - 1) + fib(n - 2)

            mtrace.enable(sys.argv[1])
            tool = _mtrace.tool_id()
            p = cProfile.Profile()
            p.enable()
            fib(15)
            p.disable()
            mtrace.disable()
            out = io.StringIO()
            stats = pstats.Stats(p, stream=out).stats
            calls = [v[1] for k, v in stats.items() if k[2] == "fib"]
            print(tool, calls[0])
        """)
        tool, cprofile_calls = done.stdout.split()
        self.assertEqual(report["warnings"], [])
        self.assertNotEqual(int(tool), 2, "mtrace must not take cProfile's tool id")
        self.assertEqual(int(cprofile_calls), 1973)
        self.assertEqual(function(report, "fib")["ncalls"], 1973)

    @unittest.skipIf(sys.version_info < (3, 12), "sys.monitoring is 3.12+")
    def test_no_free_tool_id_is_one_clear_error(self):
        script = self.script("taken.py", """
            import sys, mtrace
            for tool in (0, 1, 3, 4, 5):
                sys.monitoring.use_tool_id(tool, f"other-{tool}")
            try:
                mtrace.enable(sys.argv[1])
            except RuntimeError as e:
                print(e)
            else:
                raise SystemExit("enable() should have failed")
            assert not mtrace.is_enabled()
        """)
        done = run([sys.executable, script, self.path("taken.bin")], cwd=self.dir)
        self.assertIn("every one is taken", done.stdout)
        self.assertIn("other-3", done.stdout)


if __name__ == "__main__":
    unittest.main()
