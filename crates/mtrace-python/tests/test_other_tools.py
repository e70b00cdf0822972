"""Other tools beside mtrace (issue 48): coverage.py measuring a program
that mtrace records gives both the same results as each alone. On 3.12+
both use `sys.monitoring`, each with a tool id of its own (coverage's
`sysmon` core takes COVERAGE_ID, mtrace the first free of 3, 4, 5, 1, 0);
its C tracer (`ctrace`, every version) sits on `sys.settrace`. Skipped,
saying so, where coverage cannot be installed."""

import json
import os
import subprocess
import sys
import unittest

from test_mtrace import Case, mtanalyze_binary, run

PROGRAM = """
    import contextlib, sys, threading
    import mtrace

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def branchy(n):
        if n % 2:
            return "odd"
        return "even"

    def main():
        fib(15)
        for i in range(3):
            branchy(i)
        t = threading.Thread(target=fib, args=(10,))
        t.start()
        t.join()

    # The same lines run with and without mtrace ("-"), for coverage.
    with mtrace.profile(sys.argv[1]) if sys.argv[1] != "-" else contextlib.nullcontext():
        main()
"""


def coverage_available():
    try:
        import coverage  # noqa: F401
        return True
    except ImportError:
        pass
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "coverage"],
                          capture_output=True, text=True)
    return done.returncode == 0


class Coverage(Case):
    @classmethod
    def setUpClass(cls):
        if not coverage_available():
            raise unittest.SkipTest("coverage is not installed and `pip install coverage` "
                                    "failed: the coverage test did NOT run")

    def measure(self, core, *program_args):
        """coverage.py's JSON report of the program, with `core`."""
        script = self.script("program.py", PROGRAM)
        name = f"cov-{core}-{'mtrace' if program_args != ('-',) else 'alone'}"
        data = self.path(name)
        env = {"COVERAGE_CORE": core, "COVERAGE_FILE": data}
        run([sys.executable, "-m", "coverage", "run", "--branch", script, *program_args],
            cwd=self.dir, env=dict(os.environ, **env))
        out = self.path(name + ".json")
        run([sys.executable, "-m", "coverage", "json", "-o", out, "--include", script],
            cwd=self.dir, env=dict(os.environ, **env))
        with open(out) as f:
            files = json.load(f)["files"]
        (only,) = files.values()
        return {k: only[k] for k in ("executed_lines", "missing_lines", "executed_branches",
                                     "missing_branches")}

    def counts(self, trace):
        report = json.loads(run([mtanalyze_binary(), trace, "--format", "json"]).stdout)
        return {f["function"]: f["ncalls"] for f in report["functions"]
                if f["function"] in ("fib", "branchy", "main")}

    def test_coverage_and_mtrace_together_give_what_each_gives_alone(self):
        cores = ["ctrace"] + (["sysmon"] if sys.version_info >= (3, 12) else [])
        script = self.script("program.py", PROGRAM)
        alone = self.path("alone.bin")
        run([sys.executable, script, alone], cwd=self.dir)
        expected_counts = self.counts(alone)
        self.assertEqual(expected_counts["fib"], 1973 + 177)
        for core in cores:
            with self.subTest(core=core):
                coverage_alone = self.measure(core, "-")
                together = self.path(f"together-{core}.bin")
                coverage_with_mtrace = self.measure(core, together)
                self.assertEqual(coverage_with_mtrace, coverage_alone)
                self.assertEqual(self.counts(together), expected_counts)


if __name__ == "__main__":
    unittest.main()
