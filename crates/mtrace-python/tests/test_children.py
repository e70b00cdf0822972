"""Child processes record too (issue 33): each into NAME.pid<PID>.bin beside
the parent's trace, and `mtanalyze NAME.bin` reports the process tree.
Through the real `python -m mtrace` and the wheel's `mtanalyze`."""

import glob
import json
import os
import subprocess
import sys

from test_mtrace import Case, calls, fib, mtanalyze_binary, run

POOL = """
    import json, multiprocessing, os, sys

    def child_work(n):
        return n if n < 2 else child_work(n - 1) + child_work(n - 2)

    def task(n):
        return os.getpid(), child_work(n)

    def parent_only():
        return child_work(10)

    if __name__ == "__main__":
        context = multiprocessing.get_context(sys.argv[1])
        parent_only()
        with context.Pool(4) as pool:
            done = pool.map(task, [i % 15 for i in range(40)])
        print(json.dumps({"sum": sum(value for _, value in done),
                          "workers": sorted({pid for pid, _ in done})}))
"""

FORK_FROM_A_THREAD = """
    import os, threading

    def spin(n):
        return n if n < 2 else spin(n - 1) + spin(n - 2)

    def busy(stop):
        while not stop.is_set():
            spin(12)

    def child_only():
        return spin(15)

    def forker(result):
        pid = os.fork()
        if pid == 0:
            child_only()
            os._exit(0)
        result.append(os.waitpid(pid, 0)[1])

    stop = threading.Event()
    spinner = threading.Thread(target=busy, args=(stop,))
    spinner.start()
    result = []
    thread = threading.Thread(target=forker, args=(result,))
    thread.start()
    thread.join()
    stop.set()
    spinner.join()
    print(result[0])
"""

# Forks of forks through multiprocessing (CPython's bpo-17555 test): the
# after-fork registry a generation inherits must not grow by mtrace's hook.
FORK_GENERATIONS = """
    import multiprocessing
    from multiprocessing import util

    def spin(n):
        return n if n < 2 else spin(n - 1) + spin(n - 2)

    def child(n, conn):
        spin(10)
        if n > 1:
            p = multiprocessing.Process(target=child, args=(n - 1, conn))
            p.start()
            conn.close()
            p.join()
        else:
            conn.send(len(util._afterfork_registry))
        conn.close()

    if __name__ == "__main__":
        multiprocessing.set_start_method("fork")
        r, w = multiprocessing.Pipe(False)
        lock = util.ForkAwareThreadLock()
        p = multiprocessing.Process(target=child, args=(4, w))
        p.start()
        w.close()
        print(len(util._afterfork_registry), r.recv())
        p.join()
"""

KILLED = """
    import os, signal, subprocess, sys

    def spin(n):
        return n if n < 2 else spin(n - 1) + spin(n - 2)

    if sys.argv[1:] == ["child"]:
        spin(15)
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        done = subprocess.run([sys.executable, __file__, "child"])
        print(done.returncode)
"""


class Children(Case):
    def report(self, trace, *args):
        return json.loads(run([mtanalyze_binary(), trace, "--format", "json", *args]).stdout)

    def function(self, report, name):
        rows = [f for f in report["functions"] if f["function"] == name]
        self.assertLessEqual(len(rows), 1, rows)
        return rows[0] if rows else None

    def assert_intact(self, report):
        broken = {"damaged_chunk", "damaged_event", "truncated_chunk", "damaged_metadata"}
        self.assertFalse([w for w in report["warnings"] if w["kind"] in broken], report["warnings"])

    def children(self):
        return sorted(glob.glob(self.path("mtrace.pid*.bin")))

    def check(self, trace):
        """`mtanalyze check` of `trace` as JSON, or None if it has no trace."""
        done = subprocess.run([mtanalyze_binary(), "check", trace, "--format", "json"],
                              capture_output=True, text=True)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def test_a_pool_records_its_workers_with_every_start_method(self):
        script = self.script("pool.py", POOL)
        expected = sum(calls(i % 15) for i in range(40))
        for method in ("fork", "spawn", "forkserver"):
            with self.subTest(method=method):
                done = run([sys.executable, "-m", "mtrace", "-o", self.path("mtrace.bin"),
                            script, method], cwd=self.dir)
                printed = json.loads(done.stdout)
                self.assertEqual(printed["sum"], sum(fib(i % 15) for i in range(40)))
                children = self.children()
                # Every worker that did work has its trace. `with Pool` ends by
                # terminating the pool, so a spawned worker still starting up
                # then (it did no work) may be killed before it records.
                for pid in printed["workers"]:
                    self.assertIn(self.path(f"mtrace.pid{pid}.bin"), children)
                parent = self.report(self.path("mtrace.bin"), "--no-children")
                self.assertEqual(self.function(parent, "child_work")["ncalls"], calls(10))
                # The exit summary counts the whole tree, each trace's events.
                line = next(l for l in done.stderr.splitlines() if " events from " in l)
                checked = [c for c in map(self.check, [self.path("mtrace.bin"), *children]) if c]
                # A helper process (spawn's resource tracker, the fork
                # server) may still record after the parent's summary, or
                # not have made its trace yet: the traces hold as much by
                # now, or more, never less. With fork, nothing outlives it.
                said = int(line.split()[1])
                processes = int(line.split(" processes: ")[0].rsplit(" ", 1)[1])
                total = sum(c["events"] for c in checked)
                self.assertLessEqual(said, total)
                self.assertLessEqual(processes, len(checked))
                if method == "fork":
                    self.assertEqual((said, processes), (total, len(checked)))
                self.assertEqual(self.function(parent, "parent_only")["ncalls"], 1)
                in_children = 0
                # A worker killed while it started may leave a file with no
                # trace in it yet: the tree's report leaves it out with a
                # warning (below); the workers' own traces are whole.
                for child in (self.path(f"mtrace.pid{pid}.bin") for pid in printed["workers"]):
                    alone = self.report(child)
                    self.assert_intact(alone)
                    self.assertIsNone(self.function(alone, "parent_only"), child)
                    row = self.function(alone, "child_work")
                    in_children += row["ncalls"] if row else 0
                self.assertEqual(in_children, expected)
                tree = self.report(self.path("mtrace.bin"))
                self.assert_intact(tree)
                self.assertEqual(self.function(tree, "child_work")["ncalls"],
                                 expected + calls(10))
                self.assertEqual(self.function(tree, "child_work")["primitive_calls"], 40 + 1)
                self.assertEqual(self.function(tree, "parent_only")["ncalls"], 1)
                # What a worker killed as it started leaves: a warning.
                with open(self.path("mtrace.pid1.bin"), "wb"):
                    pass
                tree = self.report(self.path("mtrace.bin"))
                self.assertEqual(self.function(tree, "child_work")["ncalls"],
                                 expected + calls(10))
                self.assertIn("child_not_recorded", [w["kind"] for w in tree["warnings"]])

    def test_the_next_run_replaces_the_children_of_the_last(self):
        script = self.script("pool.py", POOL)
        stale = self.path("mtrace.pid1.bin")
        with open(stale, "wb") as f:
            f.write(b"an earlier run's child")
        run([sys.executable, "-m", "mtrace", "-o", self.path("mtrace.bin"), script, "fork"],
            cwd=self.dir)
        self.assertFalse(os.path.exists(stale))

    def test_by_trace_shows_each_process_and_no_children_only_this_one(self):
        script = self.script("pool.py", POOL)
        out = self.path("mtrace.bin")
        run([sys.executable, "-m", "mtrace", "-o", out, script, "fork"], cwd=self.dir)
        table = run([mtanalyze_binary(), out, "--by-trace"]).stdout
        for child in self.children():
            self.assertIn(os.path.basename(child), table)
        for opt_out in ("--no-children",):
            self.assertFalse(run([sys.executable, "-m", "mtrace", opt_out, "-o",
                                  self.path("alone.bin"), script, "fork"], cwd=self.dir).stderr
                             .count("Traceback"))
        self.assertEqual(glob.glob(self.path("alone.pid*")), [])

    def test_a_fork_from_a_thread_while_another_records(self):
        script = self.script("forks.py", FORK_FROM_A_THREAD)
        out = self.path("mtrace.bin")
        done = run([sys.executable, "-m", "mtrace", "-o", out, script], cwd=self.dir)
        self.assertEqual(done.stdout.strip(), "0")
        children = self.children()
        self.assertEqual(len(children), 1, children)
        child = self.report(children[0])
        self.assert_intact(child)
        self.assertEqual(self.function(child, "child_only")["ncalls"], 1)
        self.assertEqual(self.function(child, "spin")["ncalls"], calls(15))
        parent = self.report(out, "--no-children")
        self.assert_intact(parent)
        self.assertIsNone(self.function(parent, "child_only"))
        self.assertEqual(len(parent["trace"]["threads"]), 3)

    def test_generations_of_forks_inherit_no_hook_of_mtrace(self):
        script = self.script("generations.py", FORK_GENERATIONS)
        plain = run([sys.executable, script], cwd=self.dir).stdout.split()
        out = self.path("mtrace.bin")
        recorded = run([sys.executable, "-m", "mtrace", "-o", out, script],
                       cwd=self.dir).stdout.split()
        self.assertEqual(recorded, plain, "after-fork registry: parent's, 4th generation's")
        children = self.children()
        self.assertEqual(len(children), 4, children)
        for child in children:
            report = self.report(child)
            self.assert_intact(report)
            self.assertEqual(self.function(report, "spin")["ncalls"], calls(10))

    def test_a_killed_subprocess_leaves_a_trace_that_analyzes(self):
        script = self.script("killed.py", KILLED)
        out = self.path("mtrace.bin")
        done = run([sys.executable, "-m", "mtrace", "-o", out, script], cwd=self.dir)
        self.assertEqual(done.stdout.strip(), "-9")
        children = self.children()
        self.assertEqual(len(children), 1, children)
        child = self.report(children[0])
        self.assert_intact(child)
        self.assertIn("unfinished_trace", {w["kind"] for w in child["warnings"]})
        self.assertEqual(self.function(child, "spin")["ncalls"], calls(15))
        self.assertEqual(self.function(self.report(out), "spin")["ncalls"], calls(15))

    def test_a_child_that_cannot_record_is_a_warning_not_a_failure(self):
        script = self.script("bad.py", """
            import json, os, subprocess, sys
            env = dict(os.environ)
            asked = json.loads(env["MTRACE_CHILD"])
            asked["options"]["capacity"] = "banana"
            env["MTRACE_CHILD"] = json.dumps(asked)
            done = subprocess.run([sys.executable, "-c", "print('child ran')"], env=env,
                                  capture_output=True, text=True)
            print(done.returncode, done.stdout.strip())
        """)
        out = self.path("mtrace.bin")
        done = run([sys.executable, "-m", "mtrace", "-o", out, script], cwd=self.dir)
        self.assertEqual(done.stdout.strip(), "0 child ran")
        warnings = {w["kind"]: w for w in self.report(out)["warnings"]}
        self.assertIn("child_not_recorded", warnings)
        self.assertIn("banana", warnings["child_not_recorded"]["first"])
        table = subprocess.run([mtanalyze_binary(), out], capture_output=True, text=True)
        self.assertIn("child_not_recorded", table.stderr + table.stdout)
