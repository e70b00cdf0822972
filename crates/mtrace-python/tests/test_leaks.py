"""Nothing leaked (issue 47): what the program lets go of while mtrace
records is freed as without mtrace, and a recording gives back what it
took once it is finished.

Each check runs in a fresh interpreter: mtrace names a C function the
first time any thread calls it, and a leak of that naming (an exception
raised and cleared there, which took the exception being handled as its
`__context__`) only shows on that first call."""

import json
import subprocess
import sys
import textwrap

from test_mtrace import Case

# Prints one JSON object: whether each weak reference is dead.
THREAD = """
    import contextlib, gc, io, json, os, sys, threading, weakref
    import mtrace

    class Held:
        pass

    class Boom(Exception):
        pass

    def failing_thread(hook):
        def run():
            held = Held()
            refs.append(weakref.ref(held))
            raise Boom("from the thread")
        refs = []
        t = threading.Thread(target=run)
        err = io.StringIO()
        saved = threading.excepthook
        if hook is not None:
            threading.excepthook = hook
        try:
            with contextlib.redirect_stderr(err):
                t.start()
                t.join()
        finally:
            threading.excepthook = saved
        if hook is None:
            assert "Boom: from the thread" in err.getvalue(), err.getvalue()
        refs.append(weakref.ref(t))
        return refs

    def dead(refs):
        gc.collect()
        return all(r() is None for r in refs)

    mtrace.enable(sys.argv[1], children=False)
    during = failing_thread(None)
    during_dead = dead(during)
    quiet = failing_thread(lambda args: None)
    quiet_dead = dead(quiet)
    before_disable = failing_thread(None)
    mtrace.disable()
    print(json.dumps({"default hook": during_dead, "replaced hook": quiet_dead,
                      "after disable": dead(before_disable)}))
"""

FRAMES = """
    import asyncio, gc, json, math, sys, weakref
    import mtrace

    class Held:
        pass

    def numbers(held):
        try:
            yield 1
            yield 2
        except GeneratorExit:
            # A built-in called for the first time while the exception is handled.
            math.gcd(12, 8)
            raise

    def closed_generator():
        held = Held()
        g = numbers(held)
        next(g)
        g.close()
        refs = [weakref.ref(held), weakref.ref(g)]
        del g, held
        return refs

    async def waiter(held, event):
        try:
            await event.wait()
        except asyncio.CancelledError:
            math.lcm(4, 6)
            raise

    async def cancel_a_task():
        event = asyncio.Event()
        held = Held()
        task = asyncio.create_task(waiter(held, event))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        refs = [weakref.ref(held), weakref.ref(task)]
        del task, held
        return refs

    def dead(refs):
        gc.collect()
        return all(r() is None for r in refs)

    mtrace.enable(sys.argv[1], children=False)
    generator = dead(closed_generator())
    task = dead(asyncio.run(cancel_a_task()))
    mtrace.disable()
    print(json.dumps({"generator": generator, "task": task}))
"""

PROFILES = """
    import gc, json, os, pstats, sys
    import mtrace

    COUNT, WARM_UP = int(sys.argv[1]), int(sys.argv[2])

    def rss_kib():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    def mappings():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)

    def threads():
        return len(os.listdir("/proc/self/task"))

    def work():
        return sorted(str(i) for i in range(50))

    def one():
        p = mtrace.Profile()
        p.enable()
        work()
        p.disable()
        pstats.Stats(p)

    for _ in range(WARM_UP):
        one()
    gc.collect()
    before = rss_kib(), mappings(), threads()
    for _ in range(COUNT):
        one()
    gc.collect()
    after = rss_kib(), mappings(), threads()
    print(json.dumps({"rss_kib": [before[0], after[0]], "mappings": [before[1], after[1]],
                      "threads": [before[2], after[2]]}))
"""


class Leaks(Case):
    def run_program(self, name, program, *args, timeout=300):
        script = self.script(name, textwrap.dedent(program))
        out = subprocess.run([sys.executable, script, *map(str, args)], capture_output=True,
                             text=True, timeout=timeout, cwd=self.dir)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout.strip().splitlines()[-1])


class ThreadLeaks(Leaks):
    def test_a_thread_whose_run_raises_is_freed(self):
        freed = self.run_program("thread.py", THREAD, self.path("thread.bin"))
        self.assertEqual(freed, {"default hook": True, "replaced hook": True,
                                 "after disable": True})


class FrameLeaks(Leaks):
    def test_a_closed_generator_and_a_cancelled_task_are_freed(self):
        freed = self.run_program("frames.py", FRAMES, self.path("frames.bin"))
        self.assertEqual(freed, {"generator": True, "task": True})


class ProfileLeaks(Leaks):
    # Profiles measured, after a warm-up that lets the allocator, the
    # interpreter's caches and mtrace's function registry reach their size.
    COUNT = 10000
    WARM_UP = 500

    def test_profiles_give_back_their_threads_mappings_and_memory(self):
        m = self.run_program("profiles.py", PROFILES, self.COUNT, self.WARM_UP, timeout=600)
        self.assertEqual(m["threads"][1], m["threads"][0], m)
        # A few mappings of slack: the allocators may map more room as
        # the heap's layout shifts. A thread kept per recording would add
        # two or more (its stack, its allocator arena) for every few dozen
        # profiles, a trace's range one each.
        self.assertLessEqual(m["mappings"][1] - m["mappings"][0], self.MAPPINGS_SLACK, m)
        growth = m["rss_kib"][1] - m["rss_kib"][0]
        self.assertLessEqual(growth * 1024 / self.COUNT, self.BYTES_PER_PROFILE, m)

    # Issue 47's bound: 1 MB of RSS per 10,000 profiles. Each recording's
    # state is freed once no thread refers to it; before that, each kept
    # about 770 bytes.
    BYTES_PER_PROFILE = (1 << 20) / 10000
    MAPPINGS_SLACK = 8
