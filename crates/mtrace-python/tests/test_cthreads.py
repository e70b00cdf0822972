"""Threads a C library starts (``pthread_create``) whose callbacks enter
Python, as database drivers, gRPC, audio and GUI toolkits do: each is
recorded from its first call, on its own stack, on every version (3.11's
frame evaluator, 3.12+'s process-wide ``sys.monitoring``).

The C library is built when the tests start, with the system's C compiler
(``$CC`` or ``cc``; without one the tests are skipped and say so). Python
hands it a ctypes ``CFUNCTYPE`` callback: ctypes calls
``PyGILState_Ensure`` when a thread Python did not start calls one, so the
library needs nothing of Python's; every such call gets a new thread state,
released when the callback returns.

Run as the rest of the suite (``run-tests.sh``, or ``python -m unittest``
from outside the sources with the wheel installed).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

from test_mtrace import Case, mtanalyze_binary, run

LIBRARY = r"""
#include <pthread.h>

typedef void (*callback)(int);

enum { MOST = 16 };
struct job { callback cb; int index; int times; pthread_t thread; };
static struct job jobs[MOST];
static int started;
static int released;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;

static void *body(void *arg) {
    struct job *job = arg;
    pthread_mutex_lock(&lock);
    while (!released)
        pthread_cond_wait(&go, &lock);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < job->times; i++)
        job->cb(job->index);
    return 0;
}

/* Starts n threads (at most MOST), each calling cb(its index) `times`
   times: at once, or with `wait` once ct_release() is called. Returns how
   many started. */
int ct_start(callback cb, int n, int times, int wait) {
    released = !wait;
    for (started = 0; started < n && started < MOST; started++) {
        jobs[started] = (struct job){cb, started, times};
        if (pthread_create(&jobs[started].thread, 0, body, &jobs[started]) != 0)
            break;
    }
    return started;
}

void ct_release(void) {
    pthread_mutex_lock(&lock);
    released = 1;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&lock);
}

/* Waits for the threads ct_start() started to end. */
void ct_join(void) {
    for (int i = 0; i < started; i++)
        pthread_join(jobs[i].thread, 0);
}

/* ct_start() then ct_join(): the caller waits in C, without the GIL, the
   whole time, so no thread that Python started runs Python meanwhile. */
int ct_run(callback cb, int n, int times) {
    int n_started = ct_start(cb, n, times, 0);
    ct_join();
    return n_started;
}
"""

# Every script: the library (its path is the script's first argument) and
# a recursive function. fib(15) is 1973 calls, one of them primitive.
PRELUDE = """
    import ctypes, sys

    lib = ctypes.CDLL(sys.argv[1])
    CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int)
    lib.ct_start.argtypes = [CALLBACK, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.ct_run.argtypes = [CALLBACK, ctypes.c_int, ctypes.c_int]

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)
"""

FIB15 = 1973


def setUpModule():
    global LIB
    mtanalyze_binary()  # the wheel's analyzer: fails here, once, if it is missing
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        raise unittest.SkipTest(
            "no C compiler ($CC or cc on PATH) to build the pthread library these tests need")
    folder = tempfile.mkdtemp(prefix="mtrace-cthreads-")
    unittest.addModuleCleanup(shutil.rmtree, folder, True)
    source = os.path.join(folder, "cthreads.c")
    with open(source, "w") as f:
        f.write(LIBRARY)
    LIB = os.path.join(folder, "libcthreads.so")
    done = subprocess.run([cc, "-shared", "-fPIC", "-pthread", "-O1", "-o", LIB, source],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{cc} could not build the test library:\n{done.stderr}")


class CThreads(Case):
    def record(self, name, text, *, under_mtrace):
        """Runs the script (PRELUDE first) with the library's path, under
        ``python -m mtrace`` or (it records itself) with the trace's path
        second; returns the JSON report of a trace that needed no repair."""
        script = self.script(name, textwrap.dedent(PRELUDE) + textwrap.dedent(text))
        if under_mtrace:
            trace = self.mtrace(script, LIB)
        else:
            trace = self.path("trace.bin")
            run([sys.executable, script, LIB, trace], cwd=self.dir)
        report = self.report(trace)
        self.assertEqual(report["warnings"], [], "the trace needed no repair")
        return report

    def function(self, report, name):
        rows = [f for f in report["functions"] if f["function"] == name]
        self.assertEqual(len(rows), 1, f"{name}: {len(rows)} rows in the report's functions")
        return rows[0]

    def assert_own_stacks(self, report, n):
        """n threads, each on a stack of its own named as every thread's is."""
        threads = report["trace"]["threads"]
        self.assertEqual(len(threads), n, threads)
        self.assertEqual(len({t["os_tid"] for t in threads}), n, threads)
        stacks = {s["id"]: s["threads"] for s in report["stacks"]}
        self.assertEqual(stacks, {f"thread:{t['tid']}": [t["tid"]] for t in threads},
                         report["stacks"])

    def test_c_threads_started_while_recording_are_recorded_from_their_first_call(self):
        report = self.record("started.py", """
            def work(index):
                fib(15)

            callback = CALLBACK(work)
            assert lib.ct_run(callback, 4, 1) == 4
            work(-1)
        """, under_mtrace=True)
        fib = self.function(report, "fib")
        self.assertEqual((fib["ncalls"], fib["primitive_calls"]), (5 * FIB15, 5), fib)
        work = self.function(report, "work")
        self.assertEqual((work["ncalls"], work["primitive_calls"]), (5, 5), work)
        self.assert_own_stacks(report, 5)

    def test_c_threads_started_before_enable_are_recorded(self):
        report = self.record("early.py", """
            import mtrace

            def work(index):
                fib(15)

            callback = CALLBACK(work)
            # The threads exist, and wait in C until ct_release().
            assert lib.ct_start(callback, 4, 1, 1) == 4
            mtrace.enable(sys.argv[2])
            lib.ct_release()
            lib.ct_join()
            work(-1)
            mtrace.disable()
        """, under_mtrace=False)
        fib = self.function(report, "fib")
        self.assertEqual((fib["ncalls"], fib["primitive_calls"]), (5 * FIB15, 5), fib)
        self.assert_own_stacks(report, 5)

    def test_c_threads_calling_back_many_times_and_ending_while_recording(self):
        # Each callback is a new thread state on the same OS thread: one
        # stack for all of them. Both threads end before the recording does,
        # the second after the first has gone.
        report = self.record("many.py", """
            def tick(index):
                fib(5)

            callback = CALLBACK(tick)
            assert lib.ct_run(callback, 1, 300) == 1
            assert lib.ct_run(callback, 1, 200) == 1
            fib(10)
        """, under_mtrace=True)
        tick = self.function(report, "tick")
        self.assertEqual((tick["ncalls"], tick["primitive_calls"]), (500, 500), tick)
        fib = self.function(report, "fib")
        # fib(5) is 15 calls, fib(10) 177.
        self.assertEqual((fib["ncalls"], fib["primitive_calls"]), (500 * 15 + 177, 501), fib)
        self.assert_own_stacks(report, 3)


if __name__ == "__main__":
    unittest.main()
