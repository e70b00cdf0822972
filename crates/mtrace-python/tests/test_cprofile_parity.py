"""mtrace behaves as cProfile where it says it does: the errors, the sorts
and the timers, each compared with ``cProfile`` itself in the same run, on
the Python running the tests (cProfile's answers differ between versions:
3.12+ refuses a second profiler, 3.13+ takes a tuple of sort keys), never
with answers written down per version.

Run by ``run-tests.sh`` with the rest of the suite.
"""

import contextlib
import cProfile
import functools
import io
import itertools
import pstats
import subprocess
import sys
import time
import unittest

import mtrace

from test_mtrace import Case


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def work():
    return fib(12), sorted(range(30), key=lambda x: -x)[:2], len(str(fib(8)))


def outcome(call):
    """``(exception type or None, its message)`` of ``call()``, its
    printing kept out of the test's output."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            call()
        except Exception as e:  # what cProfile raises is the point
            return type(e), str(e)
    return None, ""


def sort_candidates():
    """Sorts to try: every name and abbreviation pstats knows, its numbers
    and keys, tuples (several keys on 3.13+), and sorts it refuses."""
    names = sorted(pstats.Stats.sort_arg_dict_default)
    # pstats' unique prefixes of its names ("tot", "cumu", "file"...).
    abbreviations = sorted(set(pstats.Stats().get_sort_arg_defs()) - set(names))
    refused = ["nope", "", "cum", "c", "t", "STDNAME", "paused "]
    numbers = [-1, 0, 1, 2, 3, -2, True, False, 1.0, None]
    keys = list(pstats.SortKey)
    tuples = [("tottime", "stdname"), ("calls",), (), (1,), (2, 1), ("cu", "nfl"),
              ("tottime", pstats.SortKey.TIME), (pstats.SortKey.CUMULATIVE, pstats.SortKey.NAME),
              ("nope", "time"), ["tottime"]]
    return names + abbreviations + refused + numbers + keys + tuples


class CProfileErrors(Case):
    """Each misuse raises in mtrace what it raises in cProfile (or nothing
    where cProfile raises nothing)."""

    def assertSameOutcome(self, theirs, mine, what):
        self.assertEqual(mine[0], theirs[0], f"{what}: cProfile {theirs}, mtrace {mine}")
        if theirs[0] is not None:
            # The same kind of message: cProfile's own wording changes
            # between versions ("Another profiling tool is already active",
            # "tool 2 is already in use").
            if "already" in theirs[1]:
                self.assertIn("already", mine[1], what)
            if "Cannot create or construct" in theirs[1]:
                self.assertIn("Cannot create or construct", mine[1], what)

    def both(self, case, what):
        theirs = case(cProfile.Profile)
        mine = case(mtrace.Profile)
        self.assertSameOutcome(theirs, mine, what)
        return theirs, mine

    def test_enable_twice(self):
        def case(make):
            p = make()
            p.enable()
            try:
                return outcome(p.enable)
            finally:
                p.disable()

        self.both(case, "enable() twice")
        self.assertFalse(mtrace.is_enabled())

    def test_a_second_profiler_while_one_records(self):
        def case(make):
            first, second = make(), make()
            first.enable()
            try:
                return outcome(second.enable)
            finally:
                second.disable()
                first.disable()

        self.both(case, "a second profiler")
        self.assertFalse(mtrace.is_enabled())

    def test_a_second_profiler_while_mtrace_enable_records(self):
        # mtrace.enable() is the other profiling tool here; what cProfile
        # says of another one on 3.12+ (3.11 lets it replace the profile
        # function, which mtrace cannot take from its own recording).
        mtrace.enable(self.path("raw.bin"))
        try:
            kind, message = outcome(mtrace.Profile().enable)
        finally:
            mtrace.disable()
        self.assertIs(kind, ValueError)
        self.assertIn("already", message)

    def test_the_one_message_of_an_mtrace_recording_already_running(self):
        mtrace.enable(self.path("one.bin"))
        try:
            with self.assertRaises(RuntimeError) as raised:
                mtrace.enable(self.path("two.bin"))
        finally:
            mtrace.disable()
        self.assertIn("already recording to", str(raised.exception))
        self.assertIn("one.bin", str(raised.exception))

    def test_a_profile_never_enabled(self):
        self.both(lambda make: outcome(make().disable), "disable() without enable()")
        self.both(lambda make: outcome(lambda: pstats.Stats(make())), "pstats.Stats(never enabled)")
        self.both(lambda make: outcome(make().print_stats), "print_stats() of a profile never enabled")

    def test_print_stats_with_a_bad_sort(self):
        def case(make):
            p = make()
            p.runcall(work)
            return outcome(lambda: p.print_stats("nope"))

        theirs, _ = self.both(case, "print_stats('nope')")
        self.assertIsNotNone(theirs[0])


class CProfileSorts(Case):
    """Every sort cProfile takes, mtrace takes; every one it refuses, mtrace
    refuses with the same exception."""

    def test_print_stats_takes_what_cprofile_takes(self):
        theirs = cProfile.Profile()
        theirs.runcall(work)
        mine = mtrace.Profile()
        mine.runcall(work)
        for sort in sort_candidates():
            out = io.StringIO()
            expected = outcome(lambda: theirs.print_stats(sort))
            with contextlib.redirect_stdout(out):
                try:
                    mine.print_stats(sort)
                    got = None, ""
                except Exception as e:
                    got = type(e), str(e)
            self.assertEqual(got[0], expected[0], f"sort={sort!r}: cProfile {expected}, mtrace {got}")
            if got[0] is None:
                self.assertIn("fib", out.getvalue(), f"sort={sort!r}")

    def test_a_sort_of_one_known_key_prints_mtanalyzes_table(self):
        mine = mtrace.Profile()
        mine.runcall(work)
        for sort in ("tot", pstats.SortKey.CUMULATIVE, 2):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                mine.print_stats(sort)
            self.assertIn("paused", out.getvalue(), f"sort={sort!r}")

    @unittest.skipIf(sys.version_info < (3, 13), "cProfile takes a tuple of sorts on 3.13+")
    def test_a_sort_of_several_keys_is_pstats_order(self):
        mine = mtrace.Profile()
        mine.runcall(work)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            mine.print_stats(("ncalls", "stdname"))
        expected = io.StringIO()
        pstats.Stats(mine, stream=expected).strip_dirs().sort_stats("ncalls", "stdname").print_stats()
        rows = lambda text: [line for line in text.splitlines() if "(" in line and ":" in line]
        self.assertEqual(rows(out.getvalue()), rows(expected.getvalue()))
        self.assertTrue(rows(out.getvalue()))

    def test_run_takes_what_cprofile_takes(self):
        namespace = {"work": work}
        for sort in sort_candidates():
            expected = outcome(lambda: cProfile.runctx("work()", namespace, namespace, sort=sort))
            got = outcome(lambda: mtrace.runctx("work()", namespace, namespace, sort=sort))
            self.assertEqual(got[0], expected[0], f"sort={sort!r}: cProfile {expected}, mtrace {got}")
        self.assertFalse(mtrace.is_enabled())

    def test_the_command_line_takes_what_cprofile_takes(self):
        script = self.script("x.py", "def f():\n    return 1\nf()\nprint('ran')\n")
        names = sorted(pstats.Stats.sort_arg_dict_default)
        for sort in names + ["tot", "cumu", "file", "s", "nope", "cum", "-1", "2"]:
            accepted = {}
            for tool in ("cProfile", "mtrace"):
                done = subprocess.run([sys.executable, "-m", tool, "-s", sort, script],
                                      capture_output=True, text=True, cwd=self.dir)
                accepted[tool] = done.returncode == 0
                if not accepted[tool]:
                    # A usage error: status 2, before the script runs.
                    self.assertEqual(done.returncode, 2, (tool, sort, done.stderr))
                    self.assertIn(f"invalid choice: '{sort}'", done.stderr, (tool, sort))
                    self.assertNotIn("ran", done.stdout, (tool, sort))
            self.assertEqual(accepted["mtrace"], accepted["cProfile"], f"-s {sort}")


def counter():
    """A deterministic timer: 1, 2, 3... one a call, with no Python frame of
    its own (which a profiler would see)."""
    return functools.partial(next, itertools.count(1))


class CProfileTimers(Case):
    """``Profile(timer, timeunit)``: wall clocks record with mtrace, any
    other timer gives cProfile's own numbers."""

    def test_a_custom_timer_gives_cprofiles_exact_stats(self):
        for unit in (0.0, 0.001):
            theirs = cProfile.Profile(counter(), unit)
            theirs.runcall(work)
            theirs.create_stats()
            mine = mtrace.Profile(counter(), unit)
            mine.runcall(work)
            mine.create_stats()
            self.assertTrue(theirs.stats)
            self.assertEqual(mine.stats, theirs.stats, f"timeunit={unit}")
            self.assertEqual(mine.trace_paths, [])

    def test_a_custom_timer_with_enable_and_disable(self):
        profiles = []
        for make in (cProfile.Profile, mtrace.Profile):
            p = make(counter(), subcalls=False, builtins=False)
            p.enable()
            work()
            p.disable()
            profiles.append(pstats.Stats(p).stats)
        self.assertEqual(profiles[1], profiles[0])

    def test_process_time_is_read_by_pstats(self):
        for timer in (time.process_time, time.thread_time):
            p = mtrace.Profile(timer)
            p.runcall(work)
            stats = pstats.Stats(p).stats
            self.assertTrue(any(name == "fib" for _f, _l, name in stats), timer)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                p.print_stats("tottime")
            self.assertIn("fib", out.getvalue())

    def test_wall_clocks_record_with_mtrace(self):
        for timer in (time.perf_counter, time.perf_counter_ns, time.monotonic, time.monotonic_ns):
            p = mtrace.Profile(timer)
            p.runcall(work)
            self.assertTrue(p.trace_paths, timer)
            stats = pstats.Stats(p).stats
            self.assertTrue(any(name == "fib" for _f, _l, name in stats), timer)


if __name__ == "__main__":
    unittest.main()
