"""Free-threaded CPython (3.13t, 3.14t; issue 48): threads run Python code
at the same time, and mtrace records each exactly, on its own stack, with
its own time, without turning the GIL back on. Skipped, saying so, on an
interpreter with a GIL."""

import json
import sys
import sysconfig
import unittest

from test_mtrace import Case, calls, mtanalyze_binary, run

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

# N threads each run a different amount of recursive work at once (a
# barrier starts them together), each in a function of its own so the
# per-thread rows can be told apart. The script prints what it knows: the
# GIL's state before and after, and the wall span of the recording.
PARALLEL = """
    import json, sys, threading, time
    import mtrace

    def spin(n):
        return n if n < 2 else spin(n - 1) + spin(n - 2)

    # A code object per worker (`worker_0`, ...), so each has its own row.
    for k in range(8):
        exec(f"def worker_{k}(barrier, out):\\n"
             f"    barrier.wait()\\n"
             f"    out[{k}] = spin({16 + k})\\n", globals())

    threads = int(sys.argv[2])
    gil_before = sys._is_gil_enabled()
    barrier = threading.Barrier(threads)
    out = [None] * threads
    started = time.perf_counter_ns()
    with mtrace.profile(sys.argv[1]):
        ts = [threading.Thread(target=globals()[f"worker_{k}"], args=(barrier, out))
              for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    span = time.perf_counter_ns() - started
    print(json.dumps({"gil_before": gil_before, "gil_after": sys._is_gil_enabled(),
                      "span_ns": span, "out": out}))
"""


@unittest.skipUnless(FREE_THREADED, "not a free-threaded build (Py_GIL_DISABLED unset): "
                     "the free-threaded tests did NOT run")
class FreeThreaded(Case):
    THREADS = 4

    def test_threads_in_parallel_are_exact_each_on_its_own_stack_and_the_gil_stays_off(self):
        script = self.script("parallel.py", PARALLEL)
        trace = self.path("parallel.bin")
        said = json.loads(run([sys.executable, script, trace, str(self.THREADS)],
                              cwd=self.dir).stdout)
        self.assertEqual((said["gil_before"], said["gil_after"]), (False, False),
                         "importing or recording mtrace turned the GIL on")
        report = json.loads(run([mtanalyze_binary(), trace, "--format", "json"]).stdout)
        self.assertEqual(report["clock"], "stack", "a free-threaded trace asks for stack")
        self.assertFalse(report["warnings"], report["warnings"])
        spin = [f for f in report["functions"] if f["function"] == "spin"]
        self.assertEqual(len(spin), 1, spin)
        expected = sum(calls(16 + k) for k in range(self.THREADS))
        self.assertEqual(spin[0]["ncalls"], expected)
        # One stack per thread, each with its own worker and exactly its
        # own share of spin's calls.
        per_stack = {
            s["id"]: (s, json.loads(run([mtanalyze_binary(), trace, "--format", "json",
                                         "--stack", s["id"]]).stdout))
            for s in report["stacks"] if s["id"].startswith("thread:")}
        for k in range(self.THREADS):
            with self.subTest(worker=k):
                rows = [f for f in report["functions"] if f["function"] == f"worker_{k}"]
                self.assertEqual([r["ncalls"] for r in rows], [1], rows)
                mine = [(s, per) for s, per in per_stack.values()
                        if any(f["function"] == f"worker_{k}" for f in per["functions"])]
                self.assertEqual(len(mine), 1, [s["id"] for s, _ in mine])
                stack, per = mine[0]
                spin_here = [f for f in per["functions"] if f["function"] == "spin"]
                self.assertEqual(spin_here[0]["ncalls"], calls(16 + k))
                # Its own time: never more than the recording's wall span
                # (a clock that charged one thread with the others' time
                # would give each thread the sum).
                self.assertLessEqual(stack["running_ns"], said["span_ns"], stack)
                self.assertGreater(stack["running_ns"], 0, stack)


if __name__ == "__main__":
    unittest.main()
