"""A program cannot tell that it is recorded (issue 47): mtrace starts no
thread of its own in a Python process, so `os.fork()` does not warn about
threads and a child forked from a thread exits as it would without mtrace.
Each case runs the same script without and with `python -m mtrace`, with
warnings turned into errors and a timeout that fails the test (a hang must
not hang the suite)."""

import contextlib
import glob
import io
import json
import os
import re
import subprocess
import sys

from test_mtrace import Case, calls, mtanalyze_binary, run

def spin(n):
    """The recursion the tests that record in this process profile."""
    return n if n < 2 else spin(n - 1) + spin(n - 2)


# How long a script may take before the test calls it hung: each runs in
# well under a second.
TIMEOUT = 60

# The threads of the process (native ones included), before and while
# recording; then a fork from the main thread, which CPython 3.12+ warns
# about when the process has more than one thread.
THREADS_AND_FORK = """
    import os, sys, threading

    def tasks():
        return len(os.listdir("/proc/self/task"))

    def spin(n):
        return n if n < 2 else spin(n - 1) + spin(n - 2)

    before = tasks()
    if sys.argv[1:] == ["enable"]:
        import mtrace
        mtrace.enable(sys.argv[0] + ".bin")
    spin(20)
    during = tasks()
    pid = os.fork()
    if pid == 0:
        spin(10)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if sys.argv[1:] == ["enable"]:
        mtrace.disable()
    print(before, during, threading.active_count(), os.waitstatus_to_exitcode(status))
"""

# The threads of the process after each analysis a program can ask for in
# the middle of its run: a Profile's statistics, `mtrace.analyze`, the
# table, the `mtanalyze` command line.
THREADS_AFTER_ANALYSES = """
    import os, pstats, sys, io, contextlib
    import mtrace
    from mtrace import _cli

    def tasks():
        return len(os.listdir("/proc/self/task"))

    def spin(n):
        return n if n < 2 else spin(n - 1) + spin(n - 2)

    before = tasks()
    p = mtrace.Profile()
    p.runcall(spin, 15)
    stats = pstats.Stats(p)
    after_stats = tasks()
    with contextlib.redirect_stdout(io.StringIO()):
        p.print_stats()
    mtrace.analyze(p.trace_paths[0])
    _cli.run([p.trace_paths[0], "--format", "json"], capture=True)
    print(before, after_stats, tasks(), stats.stats[next(k for k in stats.stats if k[2] == "spin")][1])
"""

# Profiles as a web framework's middleware makes them, one per request,
# with TMPDIR and the working directory an empty folder: no file is made
# anywhere, each profile's traces live (in memory) as long as it does,
# and the recording's descriptors are given back.
PROFILES_IN_MEMORY = """
    import gc, os, pstats, sys
    import mtrace

    def spin(n):
        return n if n < 2 else spin(n - 1) + spin(n - 2)

    def descriptors():
        return set(map(int, os.listdir("/proc/self/fd")))

    def request():
        p = mtrace.Profile()
        p.enable()
        spin(12)
        p.disable()
        return p

    before = descriptors()
    kept = request()
    calls = pstats.Stats(kept).stats
    paths = kept.trace_paths
    readable = all(os.path.exists(p) for p in paths)
    for _ in range(50):
        pstats.Stats(request())
    # The summary of a recording into memory holds its trace.
    mtrace.enable("named-only", memory=True)
    spin(5)
    summary = mtrace.disable()
    report = mtrace.analyze(summary["trace"])
    memory_calls = report.function("spin").ncalls
    summary["trace"].close()
    del kept
    gc.collect()
    print(readable, all(p.startswith("/proc/self/fd/") for p in paths),
          calls[next(k for k in calls if k[2] == "spin")][1], memory_calls,
          ",".join(map(str, sorted(descriptors() - before))) or "-",
          sorted(os.listdir(".")), sorted(os.listdir(os.environ["TMPDIR"])))
"""

# A fork from a thread that is not the main one, while another thread
# records; the child ends as a thread ends: by returning (argv "return"),
# or by `sys.exit()` ("exit"). Without mtrace the child then exits, its
# status 0. The parent waits for it with a deadline and kills it if it
# lives on, printing "hung".
FORK_FROM_A_THREAD = """
    import os, sys, threading, time

    def spin(n):
        return n if n < 2 else spin(n - 1) + spin(n - 2)

    def busy(stop):
        while not stop.is_set():
            spin(10)

    def child_only():
        return spin(15)

    def forker(result, how):
        pid = os.fork()
        if pid == 0:
            child_only()
            if how == "exit":
                sys.exit()
            return
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                result.append(os.waitstatus_to_exitcode(status))
                return
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                result.append("hung")
                return
            time.sleep(0.01)

    stop = threading.Event()
    spinner = threading.Thread(target=busy, args=(stop,))
    spinner.start()
    result = []
    thread = threading.Thread(target=forker, args=(result, sys.argv[1]))
    thread.start()
    thread.join()
    stop.set()
    spinner.join()
    print(result[0])
"""


# Code run in subinterpreters, an isolated one and a legacy one where the
# version has them; each prints what it did, as does the main interpreter.
SUBINTERPRETERS = """
    import sys

    def main_work():
        return sum(range(10))

    if sys.version_info >= (3, 13):
        import _interpreters as interpreters
        legacy = lambda: interpreters.create("legacy")
    else:
        import _xxsubinterpreters as interpreters
        legacy = lambda: interpreters.create(isolated=False)
    for make in (interpreters.create, legacy):
        try:
            sub = make()
        except Exception as e:
            print("cannot create:", type(e).__name__)
            continue
        interpreters.run_string(sub, "print('subinterpreter ran', 1 + 1)")
        interpreters.destroy(sub)
    print(main_work())
"""


# The descriptor numbers the program gets, in itself and in a child that
# lists its own (as CPython's close_fds/pass_fds tests do).
DESCRIPTORS = """
    import os, subprocess, sys

    first = os.open(os.devnull, os.O_RDONLY)
    keep = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(keep, True)
    listed = subprocess.run(
        [sys.executable, "-c", "import os; print(*sorted(map(int, os.listdir('/proc/self/fd'))))"],
        capture_output=True, text=True, close_fds=True, pass_fds=[keep]).stdout.split()
    print(first, keep, *listed)
"""


def warning_lines(stderr):
    """The categories of the warnings `stderr` shows (their texts hold pids)."""
    return sorted(re.findall(r"\b(\w+Warning): ", stderr))


class Invisible(Case):
    def run_script(self, args, warnings="error"):
        """`args` run with a deadline (a hang fails), and warnings as errors
        unless `warnings` says otherwise."""
        try:
            return run([sys.executable, "-W", warnings, *args], cwd=self.dir, timeout=TIMEOUT)
        except subprocess.TimeoutExpired as e:
            self.fail(f"{' '.join(args)} did not end in {TIMEOUT} s (stderr: {e.stderr!r})")

    def test_recording_starts_no_thread_and_a_fork_does_not_warn(self):
        script = self.script("threads.py", THREADS_AND_FORK)
        plain = self.run_script([script, "plain"]).stdout.split()
        enabled = self.run_script([script, "enable"])
        before, during, active, status = enabled.stdout.split()
        self.assertEqual(plain[0], plain[1])
        self.assertEqual(during, before, "mtrace.enable() started a thread")
        self.assertEqual((active, status), ("1", "0"))
        self.assertNotIn("Warning", enabled.stderr)
        for extra in ([], ["--no-children"]):
            with self.subTest(extra=extra):
                done = self.run_script(["-m", "mtrace", *extra, "-o", self.path("t.bin"),
                                        script, "plain"])
                before, during, active, status = done.stdout.split()
                self.assertEqual(during, before, "python -m mtrace started a thread")
                self.assertEqual((active, status), ("1", "0"))
                self.assertNotIn("DeprecationWarning", done.stderr)

    def test_analyses_leave_no_thread_behind(self):
        # The analyzer's threads (rayon's) live only as long as the call.
        script = self.script("analyses.py", THREADS_AFTER_ANALYSES)
        before, after_stats, after_all, spin_calls = self.run_script([script]).stdout.split()
        self.assertEqual(after_stats, before, "pstats.Stats(profile) left a thread")
        self.assertEqual(after_all, before, "an analysis left a thread")
        self.assertEqual(spin_calls, str(calls(15)), "spin(15)'s calls, from the in-memory pstats")

    def test_profiles_record_into_memory_and_leave_no_file(self):
        script = self.script("profiles.py", PROFILES_IN_MEMORY)
        work = os.path.join(self.dir, "work")
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(work)
        os.mkdir(tmp)
        done = run([sys.executable, "-W", "error", script], cwd=work, timeout=TIMEOUT,
                   env={**os.environ, "TMPDIR": tmp})
        readable, in_memory, spin_calls, memory_calls, fds, files = done.stdout.split(maxsplit=5)
        self.assertEqual((readable, in_memory), ("True", "True"), "the traces are in memory")
        self.assertEqual((spin_calls, memory_calls), (str(calls(12)), str(calls(5))),
                         "spin(12) and spin(5)")
        # What outlives the profiles is the recorder's, not theirs: the
        # memory it keeps for the next profile, at most a few descriptors
        # at 512 or above (see `kept.rs`), not one per profile.
        kept = [] if fds == "-" else [int(fd) for fd in fds.split(",")]
        self.assertLessEqual(len(kept), 3, f"descriptors left by 51 profiles: {kept}")
        self.assertTrue(all(fd >= 512 for fd in kept), f"descriptors left: {kept}")
        self.assertEqual(files.strip(), "[] []", "a profile made a file (cwd, TMPDIR)")

    def test_a_profile_names_only_the_functions_it_saw(self):
        # A profile (a recording into memory) names the functions it saw,
        # not every function the process ever ran: a per-request profile
        # in a large program would otherwise write and read them all.
        import pstats

        import mtrace
        from mtrace import _mtrace

        namespace: dict = {}
        exec("\n".join(f"def seen_before_{i}(): pass" for i in range(3000)), namespace)
        before = mtrace.Profile()
        before.enable()
        for i in range(3000):
            namespace[f"seen_before_{i}"]()
        before.disable()
        del before

        p = mtrace.Profile()
        p.enable()
        spin(5)
        p.disable()
        status, out = _mtrace.mtanalyze_captured(
            ["mtanalyze", "check", "--format", "json", p.trace_paths[0]])
        self.assertEqual(status, 0)
        records = json.loads(out)["metadata_records"]
        # spin, the profile's own frames' functions and a host record.
        self.assertLess(records, 20, "the functions of an earlier profile are named")
        stats = pstats.Stats(p).stats
        (row,) = [v for k, v in stats.items() if k[2] == "spin"]
        self.assertEqual(row[1], calls(5))

    def test_a_profile_s_statistics_read_its_trace_in_place(self):
        # pstats.Stats(profile) reads a trace in memory where the recorder
        # wrote it: no descriptor is made for it (nor a mapping of one),
        # unless its path is asked for; then the path reads the same trace.
        import pstats

        import mtrace

        p = mtrace.Profile()
        p.enable()
        spin(7)
        p.disable()
        (trace,) = p._traces
        stats = pstats.Stats(p).stats
        self.assertNotIn("/proc/self/fd", repr(trace), "a descriptor was made")
        (row,) = [v for k, v in stats.items() if k[2] == "spin"]
        self.assertEqual(row[1], calls(7))
        self.assertTrue(p.trace_paths[0].startswith("/proc/self/fd/"))
        self.assertIn(p.trace_paths[0], repr(trace))
        self.assertEqual(mtrace.analyze(p.trace_paths[0]).function("spin").ncalls, calls(7))
        trace.close()
        self.assertIn("closed", repr(trace))
        with self.assertRaises(ValueError):
            pstats.Stats(p)

    def test_a_profile_per_request_reuses_the_memory_of_those_before(self):
        # A profile's trace, given back when the profile goes, lends its
        # memory file to a later profile: no new file per request.
        import pstats

        import mtrace

        def spin(n):
            return n if n < 2 else spin(n - 1) + spin(n - 2)

        files = []
        for _ in range(8):
            p = mtrace.Profile()
            p.enable()
            spin(8)
            p.disable()
            files.append(os.stat(p.trace_paths[0]).st_ino)
            self.assertEqual(pstats.Stats(p).stats[next(k for k in pstats.Stats(p).stats
                                                         if k[2] == "spin")][1], calls(8))
            del p
        self.assertLessEqual(len(set(files)), 3, f"memory files of 8 profiles: {files}")

    def test_a_profile_enabled_many_times_holds_a_bounded_number_of_traces(self):
        # As cProfile's, one profile may be enabled and disabled around
        # every request of a long run: it sums what it no longer holds.
        import pstats

        import mtrace

        fds = len(os.listdir("/proc/self/fd"))
        p = mtrace.Profile()
        for _ in range(40):
            p.enable()
            spin(6)
            p.disable()
        self.assertLessEqual(len(p.trace_paths), 16)
        self.assertLessEqual(len(os.listdir("/proc/self/fd")) - fds, 16)
        stats = pstats.Stats(p).stats
        (row,) = [v for k, v in stats.items() if k[2] == "spin"]
        self.assertEqual(row[1], 40 * calls(6), "every recording's calls, summed")
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            p.print_stats("calls")
        self.assertIn("spin", buffer.getvalue())

    def test_a_profile_stopped_by_mtrace_disable_holds_no_trace(self):
        # `mtrace.disable()` while a profile records into memory: the
        # trace is the caller's; the profile holds none (not a path that
        # names no file), and its statistics are an unused profile's.
        import pstats

        import mtrace

        p = mtrace.Profile()
        p.enable()
        spin(5)
        summary = mtrace.disable()
        p.disable()
        self.assertIsInstance(summary["trace"], mtrace.MemoryTrace)
        self.assertEqual(p.trace_paths, [])
        with self.assertRaises(TypeError):
            pstats.Stats(p)
        summary["trace"].close()
        p.enable()
        spin(6)
        p.disable()
        (row,) = [v for k, v in pstats.Stats(p).stats.items() if k[2] == "spin"]
        self.assertEqual(row[1], calls(6), "the profile records again")

    def test_a_profile_s_statistics_are_the_command_line_s(self):
        # A profile's traces in memory are analyzed without the command
        # line (no children, no series to look for): the same statistics.
        import mtrace
        from mtrace import _profiler

        p = mtrace.Profile()
        for n in (8, 9):
            p.enable()
            spin(n)
            p.disable()
        direct = _profiler.pstats_dict(p.trace_paths, children=False)
        through_the_command_line = _profiler.pstats_dict(p.trace_paths)
        self.assertEqual(direct, through_the_command_line)
        (row,) = [v for k, v in direct.items() if k[2] == "spin"]
        self.assertEqual(row[1], calls(8) + calls(9))
        # One trace in memory, read through its handle (the dict built by
        # the extension): the command line's statistics of its file.
        first = p._traces[0]
        self.assertIsInstance(first, mtrace.MemoryTrace)
        in_place = _profiler.pstats_dict([first], children=False)
        self.assertEqual(in_place, _profiler.pstats_dict([os.fspath(first)]))
        (row,) = [v for k, v in in_place.items() if k[2] == "spin"]
        self.assertEqual(row[1], calls(8))
        self.assertTrue(all(callers for (_, _, name), (*_, callers) in in_place.items()
                            if name == "spin"), "spin's callers are kept")

    def test_a_profile_s_table_holds_the_program_s_functions_only(self):
        # As cProfile's, without its own row ({method 'disable' of
        # '_lsprof.Profiler' objects}): nothing mtrace's own code calls
        # while it records (importlib's `_handle_fromlist` of a `from .
        # import`, the built-ins of its greenlet hooks) is in the table.
        import cProfile
        import pstats

        import mtrace

        def functions(profile_class):
            p = profile_class()
            p.enable()
            sorted(str(i) for i in range(5))
            p.disable()
            return {k for k in pstats.Stats(p).stats
                    if "_lsprof.Profiler" not in k[2]}

        self.assertEqual(functions(mtrace.Profile), functions(cProfile.Profile))

    def test_a_failed_second_enable_leaves_the_running_recording_as_it_was(self):
        # Its children stay armed (the environment a child reads), its
        # greenlet hooks stay in.
        import mtrace
        from mtrace import _children

        mtrace.enable(self.path("first.bin"))
        try:
            armed = os.environ.get(_children.ENVIRONMENT)
            hooks = dict(mtrace._greenlet_state)
            self.assertIsNotNone(armed)
            with self.assertRaises(RuntimeError):
                mtrace.enable(self.path("second.bin"))
            self.assertEqual(os.environ.get(_children.ENVIRONMENT), armed)
            self.assertEqual(mtrace._greenlet_state, hooks)
            self.assertTrue(mtrace.is_enabled())
        finally:
            mtrace.disable()

    def test_memory_recordings_record_this_process_only(self):
        import mtrace

        with self.assertRaisesRegex(ValueError, "this process only"):
            mtrace.enable("x", memory=True, children=True)
        self.assertFalse(mtrace.is_enabled())

    def test_a_child_forked_from_a_thread_exits_when_its_thread_ends(self):
        script = self.script("forks.py", FORK_FROM_A_THREAD)
        # The program's own fork from a thread warns on 3.12+ (its threads
        # are there): mtrace must add no warning of its own, so both runs
        # are compared, with warnings shown.
        for how in ("return", "exit"):
            with self.subTest(how=how):
                plain = self.run_script([script, how], warnings="default")
                self.assertEqual(plain.stdout.strip(), "0")
                for old in glob.glob(self.path("t*.bin")):
                    os.remove(old)
                out = self.path("t.bin")
                done = self.run_script(["-m", "mtrace", "-o", out, script, how],
                                       warnings="default")
                self.assertEqual(done.stdout.strip(), "0", done.stderr)
                self.assertEqual(warning_lines(done.stderr), warning_lines(plain.stderr))
                # The child recorded, and its trace is whole.
                children = glob.glob(self.path("t.pid*.bin"))
                self.assertEqual(len(children), 1, children)
                report = run([mtanalyze_binary(), children[0], "--format", "json"]).stdout
                self.assertIn('"child_only"', report)

    def test_descriptors_are_numbered_as_without_mtrace_in_the_program_and_its_children(self):
        script = self.script("descriptors.py", DESCRIPTORS)
        plain = self.run_script([script]).stdout.strip()
        done = self.run_script(["-m", "mtrace", "-o", self.path("d.bin"), script])
        # A recorded child holds no descriptor of its trace (it opens the
        # file by its path to grow it): the child lists exactly what it
        # lists without mtrace, as CPython's test_pass_fds_redirected needs.
        ours = done.stdout.splitlines()[0]
        self.assertEqual(ours.split(), plain.split())
        # The child was recorded (while it listed its descriptors).
        self.assertEqual(len(glob.glob(self.path("d.pid*.bin"))), 1)

    def test_subinterpreters_run_as_without_mtrace(self):
        # The child-process hook (a .pth file, run at every interpreter's
        # start) must not try to load the extension in a subinterpreter:
        # it would print an ImportError and leave a false `.failed` note.
        script = self.script("subinterpreters.py", SUBINTERPRETERS)
        plain = self.run_script([script])
        out = self.path("s.bin")
        done = self.run_script(["-m", "mtrace", "-o", out, script])
        self.assertIn("subinterpreter ran 2", plain.stdout)
        self.assertEqual(done.stdout.splitlines()[:len(plain.stdout.splitlines())],
                         plain.stdout.splitlines())
        self.assertNotIn("Error", done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        self.assertEqual(glob.glob(self.path("s.pid*")), [])
        report = run([mtanalyze_binary(), out, "--format", "json"]).stdout
        self.assertIn('"main_work"', report)
        self.assertNotIn("child_not_recorded", report)
        # The report says, once, that code ran where it was not recorded:
        # one count a subinterpreter made.
        made = plain.stdout.count("subinterpreter ran")
        warnings = {w["kind"]: w for w in json.loads(report)["warnings"]}
        self.assertEqual(warnings["subinterpreter_not_recorded"]["count"], made, warnings)


if __name__ == "__main__":
    import unittest

    unittest.main()
