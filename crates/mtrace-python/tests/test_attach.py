"""`python -m mtrace attach PID` (CPython 3.14+, `sys.remote_exec`): a
running server is recorded for a while and goes on as before; and the
errors, each a message and exit status 2. Also: mtrace's own frames never
appear in a table."""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

import mtrace

from test_mtrace import Case, calls, mtanalyze_binary, run

ATTACH = sys.version_info >= (3, 14) and hasattr(sys, "remote_exec")

# A server: a reader thread takes requests from stdin, two workers handle
# them and say "done"; the main thread polls (so it runs Python often).
# It counts the requests handled while mtrace recorded (asked at each
# request's start), and at the end says what it left: the sys.monitoring
# tools in use and its threads.
SERVER = """
    import os, queue, sys, threading, time
    requests = queue.Queue()
    lock = threading.Lock()
    counts = {"handled": 0, "recorded": 0}
    stop = threading.Event()

    def recording():
        is_enabled = getattr(sys.modules.get("mtrace"), "is_enabled", None)
        return is_enabled is not None and is_enabled()

    def work(n):
        return n if n < 2 else work(n - 1) + work(n - 2)

    def handle(n):
        seen = recording()
        work(n)
        with lock:
            counts["handled"] += 1
            counts["recorded"] += seen

    def worker():
        while (n := requests.get()) is not None:
            handle(n)
            with lock:
                sys.stdout.write("done\\n")
                sys.stdout.flush()

    def reader():
        for line in sys.stdin:
            if line.strip() == "quit":
                break
            requests.put(int(line))
        for _ in workers:
            requests.put(None)
        stop.set()

    def tasks():
        return len(os.listdir("/proc/self/task"))

    workers = [threading.Thread(target=worker) for _ in range(2)]
    for t in workers:
        t.start()
    threading.Thread(target=reader, daemon=True).start()
    print("ready", tasks(), flush=True)
    while not stop.is_set():
        time.sleep(0.01)
    for t in workers:
        t.join()
    tools = [sys.monitoring.get_tool(i) for i in range(6)]
    print("handled", counts["handled"], "recorded", counts["recorded"], "tasks", tasks(),
          "tools", *[t or "-" for t in tools], flush=True)
"""

# A worker blocked in C (`queue.get`) until a job comes from stdin; the
# main thread polls (so the attach's code runs soon).
WAITING = """
    import queue, sys, threading, time
    jobs = queue.Queue()

    def job():
        return sum(range(1000))

    def take():
        return jobs.get()

    def worker():
        while take() is not None:
            job()
            print("done", flush=True)

    def reader():
        for line in sys.stdin:
            jobs.put(None if line.strip() == "quit" else 1)

    threading.Thread(target=worker).start()
    threading.Thread(target=reader, daemon=True).start()
    print("ready", flush=True)
    while threading.active_count() > 2:
        time.sleep(0.01)
"""

# Two threads blocked in C for as long as the process lives, a `sleep` and
# an event's wait, each inside a function of its own; the main thread
# polls (so the attach's code runs soon) until it is killed.
IDLE = """
    import threading, time

    def sleeper():
        time.sleep(600)

    def waiter(event):
        event.wait()

    started = threading.Barrier(3)

    def blocked(then, *args):
        started.wait()
        then(*args)

    threading.Thread(target=blocked, args=(sleeper,), name="sleeper-1", daemon=True).start()
    threading.Thread(target=blocked, args=(waiter, threading.Event()), name="waiter-2",
                     daemon=True).start()
    started.wait()
    print("ready", flush=True)
    while True:
        time.sleep(0.01)
"""

# A main thread blocked in C (a lock's wait) that never runs Python again
# until it is killed.
BLOCKED = """
    import threading
    print("ready", flush=True)
    threading.Event().wait()
"""


class Attach(Case):
    def start(self, script, *python_options, python=sys.executable, env=None):
        target = subprocess.Popen([python, *python_options, script], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=self.dir, env=env)
        self.addCleanup(self.end, target)
        ready = target.stdout.readline().split()
        self.assertEqual(ready[:1], ["ready"], ready)
        return target, ready[1:]

    def end(self, target):
        if target.poll() is None:
            target.kill()
        target.wait()
        for stream in (target.stdin, target.stdout):
            if stream is not None:
                stream.close()

    def requests(self, target, count):
        for _ in range(count):
            target.stdin.write("12\n")
        target.stdin.flush()
        for _ in range(count):
            self.assertEqual(target.stdout.readline().strip(), "done")

    def attach(self, pid, *args, timeout=60):
        return subprocess.run([sys.executable, "-m", "mtrace", "attach", str(pid), *args],
                              capture_output=True, text=True, cwd=self.dir, timeout=timeout)

    def attach_until_interrupted(self, pid, trace):
        """``attach PID -o TRACE`` running in the background, once it says
        it records (the caller ends it with SIGINT)."""
        attach = subprocess.Popen(
            [sys.executable, "-m", "mtrace", "attach", str(pid), "-o", trace,
             "--timeout", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=self.dir)
        try:
            said = attach.stderr.readline()
            self.assertIn(f"recording process {pid}", said)
        except BaseException:
            attach.kill()
            attach.communicate()
            raise
        return attach

    @unittest.skipUnless(ATTACH, "attach needs CPython 3.14+: the attach test did NOT run")
    def test_a_running_server_is_recorded_for_a_while_and_goes_on_as_before(self):
        server, _ = self.start(self.script("server.py", SERVER))
        self.requests(server, 20)
        trace = self.path("attached.bin")
        attach = self.attach_until_interrupted(server.pid, trace)
        try:
            # Only while it records: 30 requests, then Ctrl-C.
            self.requests(server, 30)
            # `mtanalyze top` follows the attached recording as any other:
            # the 30 requests handled so far are in its table.
            top = run([mtanalyze_binary(), "top", "--once", trace]).stdout
            self.assertRegex(top, r"\n\s*30\s.*\bhandle \(")
            attach.send_signal(signal.SIGINT)
            out, err = attach.communicate(timeout=60)
        finally:
            if attach.poll() is None:
                attach.kill()
                attach.communicate()
        self.assertEqual(attach.returncode, 0, err)
        self.assertIn("detached from process", err)
        self.assertRegex(out, r"\n\s*30\s.*\bhandle \(")
        report = json.loads(run([mtanalyze_binary(), trace, "--format", "json"]).stdout)
        rows = {f["function"]: f for f in report["functions"]}
        self.assertEqual(rows["handle"]["ncalls"], 30)
        self.assertEqual(rows["work"]["ncalls"], 30 * calls(12))
        self.assertFalse([f for f in rows if "mtrace" in f or "attach" in f], sorted(rows))
        # The functions running when it attached (each worker waiting in its
        # loop, the reader in its, the main thread in the module) are open
        # from the file's start: their time counts, their calls (begun
        # before it) do not; a mark at each thread's first event says so.
        for name in ("worker", "reader", "<module>"):
            self.assertEqual(rows[name]["ncalls"], 0, name)
            self.assertGreater(rows[name]["cumtime_ns"], 0, name)
        self.assertGreaterEqual(rows["worker"]["cumtime_ns"], rows["handle"]["cumtime_ns"])
        marked = {m["thread"] for m in report["marks"] if m["name"] == "mtrace:open-frames"}
        self.assertEqual(len(marked), 4, report["marks"])
        self.assertFalse(report["warnings"], report["warnings"])
        # The server goes on, and a second attach works.
        self.requests(server, 10)
        again = self.attach(server.pid, "-o", self.path("again.bin"), "--duration", "0.2",
                            "--timeout", "30")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.requests(server, 5)
        server.stdin.write("quit\n")
        server.stdin.flush()
        said = server.stdout.readline().split()
        self.assertEqual(server.wait(timeout=30), 0)
        # It counted as many requests recorded as the table shows; nothing
        # of mtrace's is left: no sys.monitoring tool, no thread.
        self.assertEqual(said[:4], ["handled", "65", "recorded", "30"], said)
        # Its workers and reader have ended: the main thread is left alone.
        self.assertEqual(said[4:6], ["tasks", "1"], said)
        self.assertEqual(said[6:], ["tools"] + ["-"] * 6, said)

    @unittest.skipUnless(ATTACH, "attach needs CPython 3.14+: the attach test did NOT run")
    def test_a_thread_blocked_in_c_at_the_attach_has_its_frames_open_from_the_start(self):
        target, _ = self.start(self.script("waiting.py", WAITING))
        trace = self.path("waiting.bin")
        attach = self.attach_until_interrupted(target.pid, trace)
        try:
            # The worker stays blocked in `queue.get` for most of the
            # recording; then it takes one job and waits again.
            time.sleep(0.6)
            target.stdin.write("job\n")
            target.stdin.flush()
            self.assertEqual(target.stdout.readline().strip(), "done")
            attach.send_signal(signal.SIGINT)
            out, err = attach.communicate(timeout=60)
        finally:
            if attach.poll() is None:
                attach.kill()
                attach.communicate()
        self.assertEqual(attach.returncode, 0, err)
        report = json.loads(run([mtanalyze_binary(), trace, "--format", "json",
                                 "--clock", "stack"]).stdout)
        self.assertFalse(report["warnings"], report["warnings"])
        rows = {f["function"]: f for f in report["functions"]}
        self.assertEqual(rows["job"]["ncalls"], 1)
        # The call of `take` it was blocked in began before the recording:
        # not counted; the one it made after the job is.
        self.assertEqual((rows["worker"]["ncalls"], rows["take"]["ncalls"]), (0, 1))
        # Open from the file's start, not from its first event after the
        # wait: about the whole recording (entered when it woke, its time
        # would be the little left after the job).
        duration = report["trace"]["duration_ns"]
        self.assertGreaterEqual(rows["worker"]["cumtime_ns"], 0.8 * duration,
                                (rows["worker"], duration))
        target.stdin.write("quit\n")
        target.stdin.flush()
        self.assertEqual(target.wait(timeout=30), 0)

    @unittest.skipUnless(ATTACH, "attach needs CPython 3.14+: the attach test did NOT run")
    def test_a_thread_that_runs_no_python_while_attached_is_in_the_table(self):
        target, _ = self.start(self.script("idle.py", IDLE))
        trace = self.path("idle.bin")
        done = self.attach(target.pid, "-o", trace, "--duration", "1", "--timeout", "30")
        self.assertEqual(done.returncode, 0, done.stderr)
        # In the table, the functions each idle thread sat in.
        self.assertRegex(done.stdout, r"\n\s*0\s.*\bsleeper\b")
        self.assertRegex(done.stdout, r"\n\s*0\s.*\bwaiter\b")
        report = json.loads(run([mtanalyze_binary(), trace, "--format", "json",
                                 "--clock", "stack"]).stdout)
        # Nothing alarming: their frames were open before the recording.
        self.assertFalse(report["warnings"], report["warnings"])
        rows = {f["function"]: f for f in report["functions"]}
        end = report["trace"]["end_ns"]
        self.assertGreater(end, 0.9e9, report["trace"])
        threads = {t["name"]: t["tid"] for t in report["trace"]["threads"]}
        for thread, function in (("sleeper-1", "sleeper"), ("waiter-2", "waiter")):
            self.assertIn(thread, threads)
            row = rows[function]
            # Their calls began before the recording; their time is all
            # of it: open from the file's start to its end.
            self.assertEqual((row["ncalls"], row["open_at_end"], row["cut_short"]), (0, 0, 0),
                             row)
            self.assertEqual(row["cumtime_ns"], end, (row, end))
            self.assertEqual(rows["blocked"]["ncalls"], 0)
            # Its own stack in --stacks: running the whole time.
            stack = [st for st in report["stacks"] if st["threads"] == [threads[thread]]]
            self.assertEqual(len(stack), 1, report["stacks"])
            self.assertEqual(stack[0]["running_ns"], end, stack[0])
        # The frames beneath each: the thread's start, its `blocked`;
        # `sleep` itself, a C call begun before the recording, is not a frame.
        self.assertGreaterEqual(rows["blocked"]["cumtime_ns"], 2 * end)
        self.assertNotIn("time.sleep", rows)
        listed = run([mtanalyze_binary(), trace, "--stacks", "--clock", "stack"]).stdout
        for thread in ("sleeper-1", "waiter-2"):
            self.assertIn(thread, listed)
        # The process goes on.
        self.assertIsNone(target.poll())

    @unittest.skipUnless(ATTACH, "attach needs CPython 3.14+: the attach test did NOT run")
    def test_a_main_thread_blocked_in_c_is_a_bounded_wait_and_a_message(self):
        target, _ = self.start(self.script("blocked.py", BLOCKED))
        started = time.monotonic()
        done = self.attach(target.pid, "--timeout", "1")
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("main thread did not run", done.stderr)
        self.assertIn("blocked in C", done.stderr)

    @unittest.skipUnless(ATTACH, "attach needs CPython 3.14+: the attach test did NOT run")
    def test_the_errors_say_what_is_wrong(self):
        blocked = self.script("blocked.py", BLOCKED)
        with self.subTest("no such process"):
            done = self.attach(2 ** 22 + 12345)
            self.assertEqual(done.returncode, 2)
            self.assertIn("no such process", done.stderr)
        with self.subTest("remote debugging disabled"):
            # (3.14.7 ignores `-X disable_remote_debug` here: the variable works.)
            target, _ = self.start(blocked, env=dict(os.environ, PYTHON_DISABLE_REMOTE_DEBUG="1"))
            done = self.attach(target.pid, "--timeout", "5")
            self.assertEqual(done.returncode, 2)
            self.assertIn(f"cannot run code in process {target.pid}", done.stderr)
        with self.subTest("no permission"):
            # Another user than the target's: the attaching command drops
            # from root to nobody before it attaches.
            if os.geteuid() != 0:
                self.skipTest("the permission case needs root, to run as another user")
            target, _ = self.start(blocked)
            # (The standard library is under root's folder here: the
            # arguments are parsed, with the modules that needs, first.)
            as_nobody = ("import os, sys\n"
                         "from mtrace import _attach\n"
                         "options = _attach.parser().parse_args(sys.argv[1:])\n"
                         "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
                         "try:\n"
                         "    _attach.record(options)\n"
                         "except _attach.AttachError as e:\n"
                         "    _attach.fail(e)\n")
            done = subprocess.run([sys.executable, "-c", as_nobody, str(target.pid),
                                   "--timeout", "5"], capture_output=True, text=True,
                                  cwd=self.dir, timeout=60)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(f"no permission to attach to process {target.pid}", done.stderr)
            self.assertIn("ptrace", done.stderr)
        with self.subTest("mtrace not importable in the target"):
            # The interpreter this environment was made from has no mtrace.
            base = getattr(sys, "_base_executable", None)
            if not base or base == sys.executable:
                self.skipTest("no base interpreter without mtrace")
            server, _ = self.start(self.script("server.py", SERVER), "-I", python=base)
            done = self.attach(server.pid, "--timeout", "30")
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn("mtrace is not importable in the target", done.stderr)

    @unittest.skipIf(ATTACH, "the Python running has sys.remote_exec")
    def test_before_3_14_attach_says_it_needs_3_14(self):
        done = self.attach(os.getpid())
        self.assertEqual(done.returncode, 2)
        self.assertIn("attach needs CPython 3.14+", done.stderr)


class OwnFrames(Case):
    def own_rows(self, functions):
        """The rows of ``functions`` that are mtrace's own code."""
        folder = os.path.dirname(os.path.abspath(mtrace.__file__))
        return [f"{name} ({file})" for name, file in functions
                if file.startswith(folder) or "mtrace._mtrace" in name]

    def test_no_table_shows_mtraces_own_frames(self):
        work = """
            import sys, threading, mtrace

            def work():
                return sum(range(100))

            def main():
                work()
                t = threading.Thread(target=work)
                t.start()
                t.join()
        """
        # Under python -m mtrace, with enable()/disable() and a Profile.
        script = self.script("own.py", work + """
            if sys.argv[1:2] == ["api"]:
                with mtrace.profile(sys.argv[2]):
                    main()
                p = mtrace.Profile()
                p.enable()
                main()
                p.disable()
                p.dump_stats(sys.argv[3])
            else:
                main()
        """)
        traces = [self.path("cli.bin"), self.path("api.bin")]
        run([sys.executable, "-m", "mtrace", "-o", traces[0], script], cwd=self.dir)
        prof = self.path("api.prof")
        run([sys.executable, script, "api", traces[1], prof], cwd=self.dir)
        for path in traces:
            report = json.loads(run([mtanalyze_binary(), path, "--format", "json"]).stdout)
            rows = [(f["function"], f["file"]) for f in report["functions"]]
            self.assertEqual(self.own_rows(rows), [], path)
            self.assertIn("work", {name for name, _ in rows})
        import pstats
        keys = [(name, file) for file, _line, name in pstats.Stats(prof).stats]
        self.assertEqual(self.own_rows(keys), [])
        self.assertIn("work", {name for name, _ in keys})


if __name__ == "__main__":
    unittest.main()
