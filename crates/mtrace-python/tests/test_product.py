"""The Python product as a cProfile user meets it, from the installed wheel
alone: ``python -m mtrace`` printing the table, ``-s``, ``-o out.prof``,
``mtrace.Profile`` with ``pstats``, ``mtrace.run``, ``mtrace.analyze`` and
the ``mtanalyze`` command of the virtual environment.

``run-tests.sh`` runs these with a ``PATH`` that holds no Rust toolchain
(``MTRACE_NO_TOOLCHAIN=1``): everything here works from the wheel.
"""

import contextlib
import io
import json
import os
import pstats
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import unittest

import mtrace

from test_mtrace import PREFERRED_CLOCK, SINGLE, Case, load, mtanalyze_binary, run

#: A table row: ncalls, four times, paused, then `function (file:line)`.
ROW = re.compile(r"^\s*(?P<ncalls>\d+(?:/\d+)?)\s+(?:\S+\s+){5}(?P<function>.+) \((?P<place>.*)\)$")
UNITS = {"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}

WORK = textwrap.dedent("""
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def work():
        return fib(15), sorted(range(50), key=lambda x: -x)[:2]
""")


def table_rows(text):
    """The function rows of mtanalyze's table in `text`: (ncalls, function,
    file, line), in the order printed."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    rows = []
    for line in lines[header + 2:]:
        m = ROW.match(line)
        if not m:
            break
        file, _, lineno = m["place"].rpartition(":")
        rows.append((m["ncalls"], m["function"], file, int(lineno)))
    return rows


def cprofile_ncalls(nc, cc):
    """cProfile's ncalls column: `nc`, or `nc/cc` under recursion."""
    return str(nc) if nc == cc else f"{nc}/{cc}"


def stats_under_script(theirs, script):
    """cProfile's keys that are the script's functions or called by them
    (its own `disable` left out)."""
    theirs = {k: v for k, v in theirs.items() if "_lsprof.Profiler" not in str(k[-1])}
    return [k for k in theirs if k[0] == script or any(c[0] == script for c in theirs[k][4])]


class Toolchain(unittest.TestCase):
    def test_no_rust_toolchain_is_needed(self):
        if os.environ.get("MTRACE_NO_TOOLCHAIN") != "1":
            self.skipTest("run-tests.sh runs this with no Rust toolchain on PATH "
                          "(MTRACE_NO_TOOLCHAIN=1)")
        for tool in ("cargo", "rustc", "maturin", "pyenv"):
            self.assertIsNone(shutil.which(tool), f"{tool} is on PATH")
        here = os.path.dirname(sys.executable)
        self.assertEqual(os.path.dirname(shutil.which("mtanalyze")), here)
        done = run(["mtanalyze", "--version"])
        self.assertTrue(done.stdout.startswith("mtanalyze "), done.stdout)


class PrintedTable(Case):
    """`python -m mtrace script.py`: the program's output, then the table."""

    def run_both(self, *mtrace_args):
        script = self.script("single.py", SINGLE)
        cprof = self.path("cprofile.prof")
        run([sys.executable, "-m", "cProfile", "-o", cprof, script], cwd=self.dir)
        done = run([sys.executable, "-m", "mtrace", *mtrace_args, script], cwd=self.dir)
        return script, pstats.Stats(cprof).stats, done

    def test_the_table_has_cprofiles_ncalls_for_every_function(self):
        script, theirs, done = self.run_both()
        self.assertTrue(done.stdout.startswith("7661\n"), done.stdout[:200])
        trace = self.path("mtrace.bin")
        self.assertTrue(os.path.exists(trace), "the trace is kept as mtrace.bin")
        self.assertIn("mtrace.bin", done.stderr)
        rows = table_rows(done.stdout)
        by_place = {(file, line): ncalls for ncalls, _f, file, line in rows}
        by_name = {function: ncalls for ncalls, function, file, _l in rows if file == "~"}
        compared = stats_under_script(theirs, script)
        self.assertGreater(len(compared), 15, compared)
        for key in compared:
            cc, nc = theirs[key][:2]
            file, line, name = key
            shown = by_name.get(name) if file == "~" else by_place.get((file, line))
            self.assertEqual(shown, cprofile_ncalls(nc, cc), f"{key} in\n{done.stdout}")
        self.assertEqual(by_place[(script, 4)], "8361/1")

    def test_default_order_is_cprofiles_standard_name(self):
        _script, _theirs, done = self.run_both()
        rows = table_rows(done.stdout)
        names = [f"{file}:{line}({function})" for _n, function, file, line in rows]
        self.assertEqual(names, sorted(names))

    def test_sort_cumtime_orders_by_cumulative_time(self):
        _script, _theirs, done = self.run_both("-s", "cumtime")
        rows = table_rows(done.stdout)
        report = mtrace.analyze(self.path("mtrace.bin"))
        cumtime = {(f.function, f.file, f.line): f.cumtime_ns for f in report.functions}
        shown = [cumtime[(function, file, line)] for _n, function, file, line in rows]
        self.assertEqual(len(rows), len(report.functions))
        self.assertEqual(shown, sorted(shown, reverse=True))
        self.assertNotEqual(shown, sorted(shown), "a table of one time is no test")

    def test_every_cprofile_sort_name_is_accepted(self):
        script = self.script("tiny.py", "def f():\n    return 1\nf()\n")
        for sort in mtrace._profiler.SORT_KEYS:
            done = run([sys.executable, "-m", "mtrace", "-s", sort, script], cwd=self.dir)
            self.assertTrue(any(r[1] == "f" for r in table_rows(done.stdout)), sort)

    def test_an_unknown_sort_is_one_line_and_status_2(self):
        script = self.script("tiny.py", "print('ran')\n")
        done = subprocess.run([sys.executable, "-m", "mtrace", "-s", "bogus", script],
                              capture_output=True, text=True, cwd=self.dir)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
        self.assertIn("bogus", done.stderr)
        self.assertNotIn("ran", done.stdout)

    def test_the_table_is_printed_after_sys_exit_and_the_status_kept(self):
        script = self.script("exits.py", "import sys\ndef f():\n    sys.exit(3)\nf()\n")
        done = subprocess.run([sys.executable, "-m", "mtrace", script],
                              capture_output=True, text=True, cwd=self.dir)
        self.assertEqual(done.returncode, 3, done.stderr)
        self.assertTrue(any(r[1] == "f" for r in table_rows(done.stdout)), done.stdout)

    def test_the_table_is_printed_after_an_uncaught_exception(self):
        script = self.script("raises.py", "def boom():\n    raise ValueError('boom')\nboom()\n")
        done = subprocess.run([sys.executable, "-m", "mtrace", script],
                              capture_output=True, text=True, cwd=self.dir)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertTrue(done.stderr.rstrip().endswith("ValueError: boom"), done.stderr)
        self.assertTrue(any(r[1] == "boom" for r in table_rows(done.stdout)), done.stdout)

    def test_a_full_file_still_prints_what_was_recorded_and_says_so(self):
        script = self.script("busy.py", WORK + "for _ in range(200):\n    work()\n")
        done = run([sys.executable, "-m", "mtrace", "--capacity", "64K", script], cwd=self.dir)
        rows = table_rows(done.stdout)
        self.assertTrue(any(r[1] == "fib" for r in rows), done.stdout)
        self.assertIn("dropped", done.stderr)
        self.assertIn("dropped_events", done.stderr + done.stdout)

    def test_a_disk_that_refuses_to_grow_the_file_still_prints_the_table(self):
        # RLIMIT_FSIZE (past the 16 MiB name region and the first MiB of
        # chunks the file starts with, short of its first growth) makes
        # the file's growth fail as a full disk does (EFBIG instead of
        # ENOSPC); SIGXFSZ ignored so the write fails rather than killing
        # the process.
        script = self.script("busy.py", WORK + "for _ in range(300):\n    work()\n")
        code = ("import resource, runpy, signal, sys\n"
                "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
                "resource.setrlimit(resource.RLIMIT_FSIZE, (18 << 20, 18 << 20))\n"
                "sys.argv = ['mtrace', sys.argv[1]]\n"
                "runpy.run_module('mtrace', run_name='__main__')\n")
        # 16-byte events, which reach the limit in a short run (a file's
        # growth is the same code for compact events, a sixth the size).
        env = dict(os.environ, MTRACE_FORMAT="3")
        done = run([sys.executable, "-c", code, script], cwd=self.dir, env=env)
        self.assertTrue(any(r[1] == "fib" for r in table_rows(done.stdout)), done.stdout)
        self.assertIn("could not grow", done.stderr)


class HtmlOutput(Case):
    def test_html_writes_the_page_beside_the_table(self):
        script = self.script("tiny.py", "def f():\n    return 1\nf()\n")
        page = self.path("report.html")
        done = run([sys.executable, "-m", "mtrace", "--html", page, script], cwd=self.dir)
        self.assertTrue(any(r[1] == "f" for r in table_rows(done.stdout)), done.stdout)
        self.assertIn(page, done.stderr)
        with open(page, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("<html", text.lower())
        self.assertIn("tiny.py", text)


class PstatsOutput(Case):
    def test_o_writes_what_pstats_reads_with_cprofiles_calls(self):
        script = self.script("single.py", SINGLE)
        cprof = self.path("cprofile.prof")
        run([sys.executable, "-m", "cProfile", "-o", cprof, script], cwd=self.dir)
        out = self.path("out.prof")
        done = run([sys.executable, "-m", "mtrace", "-o", out, script], cwd=self.dir)
        self.assertEqual(done.stdout, "7661\n", "no table with -o, as cProfile")
        self.assertIn(out + ".bin", done.stderr, "the trace's place is said")
        self.assertGreater(mtrace.analyze(out + ".bin").trace.events, 0)
        theirs = pstats.Stats(cprof).stats
        ours = pstats.Stats(out).stats
        compared = stats_under_script(theirs, script)
        self.assertGreater(len(compared), 15)
        for key in compared:
            self.assertIn(key, ours)
            self.assertEqual(ours[key][:2], theirs[key][:2], key)

    def test_o_with_bin_writes_the_trace_only(self):
        script = self.script("tiny.py", "def f():\n    return 1\nf()\n")
        out = self.path("t.bin")
        done = run([sys.executable, "-m", "mtrace", "-o", out, script], cwd=self.dir)
        self.assertEqual(done.stdout, "")
        self.assertFalse(os.path.exists(out + ".bin"))
        self.assertEqual(mtrace.analyze(out).function("f").ncalls, 1)


class ProfileApi(Case):
    """`mtrace.Profile` where code uses `cProfile.Profile`."""

    def setUp(self):
        super().setUp()
        self.namespace = {}
        exec(compile(textwrap.dedent(WORK), self.path("work.py"), "exec"), self.namespace)
        self.work = self.namespace["work"]
        self.fib_key = (self.path("work.py"), 2, "fib")

    def test_enable_disable_and_pstats_stats_as_cprofiles(self):
        import cProfile

        theirs = cProfile.Profile()
        theirs.enable()
        self.work()
        theirs.disable()
        ours = mtrace.Profile()
        ours.enable()
        self.work()
        ours.disable()
        their_stats = pstats.Stats(theirs).stats
        our_stats = pstats.Stats(ours).stats
        self.assertEqual(our_stats[self.fib_key][:2], (1, 1973))
        work = (self.path("work.py"), 5, "work")
        for key in their_stats:
            if key == work or work in their_stats[key][4]:
                self.assertEqual(our_stats[key][:2], their_stats[key][:2], key)
        # pstats' own printing works on it.
        text = io.StringIO()
        pstats.Stats(ours, stream=text).sort_stats("cumulative").print_stats()
        self.assertIn("1973/1", text.getvalue())

    def test_print_stats_prints_the_table_to_sys_stdout(self):
        p = mtrace.Profile()
        self.assertEqual(p.runcall(self.work), (610, [49, 48]))
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            p.print_stats("cumtime")
        rows = table_rows(shown.getvalue())
        self.assertIn(("1973/1", "fib", self.path("work.py"), 2), rows)

    def test_context_manager_runs_and_recordings_add_up(self):
        with mtrace.Profile() as p:
            self.work()
        p.runcall(self.work)
        p.runctx("work()", self.namespace, {})
        self.assertEqual(len(p.trace_paths), 3)
        p.create_stats()
        self.assertEqual(p.stats[self.fib_key][:2], (3, 3 * 1973))

    def test_dump_stats_writes_a_pstats_file(self):
        p = mtrace.Profile()
        p.runcall(self.work)
        out = self.path("p.prof")
        p.dump_stats(out)
        self.assertEqual(pstats.Stats(out).stats[self.fib_key][:2], (1, 1973))

    def test_a_named_trace_is_kept_and_analyzed(self):
        p = mtrace.Profile(path=self.path("mine.bin"), builtins=False)
        p.runcall(self.work)
        p.runcall(self.work)
        self.assertEqual(p.trace_paths, [self.path("mine.bin"), self.path("mine-2.bin")])
        report = mtrace.analyze(self.path("mine-2.bin"))
        self.assertEqual(report.function("fib").ncalls, 1973)
        self.assertFalse(any(f.file == "~" for f in report.functions), "builtins=False")

    @unittest.skipUnless(os.path.exists("/proc/self/maps"), "needs /proc/self/maps (Linux)")
    def test_a_profile_per_request_leaves_no_mapping_behind(self):
        # A recording's file range used to stay mapped until the process
        # exited: a server profiling each request reached the system's
        # limit of mappings (vm.max_map_count) and every mmap failed.
        def mappings():
            with open("/proc/self/maps") as maps:
                return sum(1 for _ in maps)

        for i in range(200):
            with mtrace.Profile():
                self.work()
            if i == 9:
                after_ten = mappings()
        self.assertLess(mappings(), after_ten + 20, "one mapping kept per profile")

    def test_module_run_prints_or_writes_as_cprofiles(self):
        script = self.script("runs.py", WORK + textwrap.dedent("""
            import sys, mtrace
            if sys.argv[1:]:
                mtrace.run("work()", sys.argv[1])
            else:
                mtrace.run("work()", sort="calls")
            mtrace.runctx("fib(3)", globals(), {}, sort=2)
        """))
        done = run([sys.executable, script], cwd=self.dir)
        rows = table_rows(done.stdout)
        self.assertIn(("1973/1", "fib", script, 2), rows)
        out = self.path("run.prof")
        run([sys.executable, script, out], cwd=self.dir)
        self.assertEqual(pstats.Stats(out).stats[(script, 2, "fib")][:2], (1, 1973))


class Analyze(Case):
    def trace(self):
        script = self.script("single.py", SINGLE)
        return self.mtrace(script), script

    def test_analyze_equals_the_json_report(self):
        trace, _script = self.trace()
        for clock in (None, "wall", "stack"):
            args = [] if clock is None else ["--clock", clock]
            expected = json.loads(run([mtanalyze_binary(), trace, "--format", "json", *args]).stdout)
            self.assertEqual(mtrace.analyze(trace, clock).to_dict(), expected, clock)

    def test_rows_read_as_attributes(self):
        trace, script = self.trace()
        report = mtrace.analyze(trace)
        fib = report.function("fib")
        self.assertEqual((fib.ncalls, fib.primitive_calls, fib.file), (8361, 1, script))
        self.assertEqual(fib["paused_ns"], fib.paused_ns)
        self.assertEqual(report.clock, PREFERRED_CLOCK)
        self.assertEqual(report.trace.producer, "python")
        self.assertEqual(len(report.stacks), 1)
        self.assertIsInstance(report.trace.threads[0]["tid"], int)
        with self.assertRaises(AttributeError):
            fib.no_such_field
        with self.assertRaises(KeyError):
            report.function("no_such_function")

    def test_a_window_and_a_stack_filter(self):
        trace, _script = self.trace()
        whole = mtrace.analyze(trace)
        empty = mtrace.analyze(trace, start="0", end="0")
        self.assertEqual(sum(f.ncalls for f in empty.functions), 0)
        self.assertEqual(mtrace.analyze(trace, stacks=["thread:1"]).to_dict()["functions"],
                         whole.to_dict()["functions"])
        with self.assertRaises(ValueError):
            mtrace.analyze(trace, clock="sundial")

    def test_a_damaged_trace_raises_trace_error_with_the_cli_message(self):
        trace, _script = self.trace()
        with open(trace, "rb") as f:
            head = f.read(40)
        bad = self.path("bad.bin")
        for content in (head, b"not a trace at all\n" * 4):
            with open(bad, "wb") as f:
                f.write(content)
            with self.assertRaises(mtrace.TraceError) as caught:
                mtrace.analyze(bad)
            self.assertIsInstance(caught.exception, ValueError)
            cli = subprocess.run([mtanalyze_binary(), bad], capture_output=True, text=True)
            self.assertEqual(cli.returncode, 2)
            self.assertEqual(f"mtanalyze: {caught.exception}", cli.stderr.strip())
        with self.assertRaises(OSError):
            mtrace.analyze(self.path("missing.bin"))

    def test_a_truncated_trace_gives_the_intact_events(self):
        trace, _script = self.trace()
        with open(trace, "rb") as f:
            data = f.read()
        cut = self.path("cut.bin")
        with open(cut, "wb") as f:
            # The events are the file's last bytes (after the name region,
            # from `chunks_offset`): cut them in the middle, inside a
            # chunk, whatever their size.
            chunks_offset, = struct.unpack_from("<Q", data, 0x28)
            f.write(data[: chunks_offset + (len(data) - chunks_offset) // 2 + 7])
        report = mtrace.analyze(cut)
        self.assertGreater(sum(f.ncalls for f in report.functions), 0)
        self.assertTrue(report.warnings, "a truncated trace warns")


class MtanalyzeCommand(Case):
    """The venv's `mtanalyze`: the Rust command line, every subcommand."""

    def traces(self):
        fast = self.script("fast.py", WORK + "work()\n")
        slow = self.script("slow.py", WORK + "for _ in range(3):\n    work()\n")
        return self.mtrace(fast), self.path("slow.bin"), slow

    def test_diff_check_export_and_help(self):
        base, new, slow = self.traces()
        run([sys.executable, "-m", "mtrace", "-o", new, slow], cwd=self.dir)
        done = run([mtanalyze_binary(), "diff", base, new])
        self.assertIn("fib", done.stdout)
        gate = subprocess.run([mtanalyze_binary(), "diff", base, new, "--fail-if",
                               "ncalls > 0%"], capture_output=True, text=True)
        self.assertEqual(gate.returncode, 1, gate.stderr)
        self.assertIn("events", run([mtanalyze_binary(), "check", base]).stdout)
        out = self.path("t.speedscope.json")
        run([mtanalyze_binary(), "export", "--format", "speedscope", base, "-o", out])
        with open(out) as f:
            self.assertIn("$schema", f.read())
        self.assertIn("diff", run([mtanalyze_binary(), "--help"]).stdout)

    def test_usage_errors_exit_2_in_one_line(self):
        done = subprocess.run([mtanalyze_binary(), self.path("missing.bin")],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)


if __name__ == "__main__":
    unittest.main()
