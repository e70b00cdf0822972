"""Rotation (issue 37): `python -m mtrace --rotate AGE|SIZE` writes a
numbered series of traces, each of which analyzes alone without a
warning, and which `mtanalyze TRACE` reads as one: its counts equal a
single-file recording's of the same program (threads and asyncio tasks
whose frames stay open across the switches)."""

import os
import shutil
import subprocess
import sys

from test_mtrace import Case, mtanalyze_binary

PROGRAM = """
    import asyncio, sys, threading, time

    ROUNDS = int(sys.argv[1])

    def leaf(i):
        return i * 7 % 13

    def handle(i):
        return leaf(i) + leaf(i + 1)

    def serve(rounds):
        for r in range(rounds):
            for i in range(200):
                handle(i)
            time.sleep(0.01)

    async def step(i):
        await asyncio.sleep(0)
        return leaf(i)

    async def task_body(rounds):
        for r in range(rounds):
            await step(r)
            await asyncio.sleep(0.01)

    async def tasks(rounds):
        await asyncio.gather(*(task_body(rounds) for _ in range(3)))

    workers = [threading.Thread(target=serve, args=(ROUNDS,)) for _ in range(2)]
    for w in workers:
        w.start()
    asyncio.run(tasks(ROUNDS))
    for w in workers:
        w.join()
    print("done", flush=True)
"""

COUNTED = ["serve", "handle", "leaf", "task_body", "step", "tasks"]


class Rotation(Case):
    def record(self, name, *options):
        script = self.script("program.py", PROGRAM)
        trace = self.path(name)
        out = subprocess.run(
            [sys.executable, "-m", "mtrace", *options, "-o", trace, script, "40"],
            cwd=self.dir, capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("done", out.stdout)
        return trace, out

    def series(self, stem):
        """The series' files, in series order."""
        members = []
        for name in os.listdir(self.dir):
            if name == f"{stem}.bin":
                members.append((0, name))
            elif name.startswith(f"{stem}.") and name.endswith(".bin"):
                number = name[len(stem) + 1:-len(".bin")]
                if number.isdigit():
                    members.append((int(number), name))
        return [self.path(name) for _, name in sorted(members)]

    def calls(self, report):
        rows = {f["function"]: f["ncalls"] for f in report["functions"]}
        return {name: rows.get(name, 0) for name in COUNTED}

    def alone(self, path):
        """The report of one file of a series read alone (copied where no
        other member lies beside it)."""
        solo = os.path.join(self.dir, "alone")
        shutil.rmtree(solo, True)
        os.mkdir(solo)
        copy = os.path.join(solo, "one.bin")
        shutil.copy(path, copy)
        return self.report(copy, "--no-children")

    def test_a_rotated_series_adds_up_to_one_recording(self):
        single, _ = self.record("single.bin")
        expected = self.calls(self.report(single, "--no-children"))
        self.assertEqual(expected["handle"], 2 * 40 * 200, expected)
        self.assertEqual(expected["task_body"], 3, expected)

        # By age, and by size (64K chunks: a file every four).
        for stem, rotate, at_least in [("age", "100ms", 3), ("size", "256K", 2)]:
            with self.subTest(rotate=rotate):
                trace, out = self.record(f"{stem}.bin", "--rotate", rotate)
                files = self.series(stem)
                self.assertGreaterEqual(len(files), at_least, files)
                self.assertIn(f"{len(files)} files of the series", out.stderr)
                for f in files:
                    report = self.alone(f)
                    self.assertEqual(report["warnings"], [], f)
                merged = self.report(trace, "--no-children")
                self.assertEqual(self.calls(merged), expected)
                self.assertEqual(merged["warnings"], [])

    def test_keep_leaves_the_newest_files(self):
        trace, out = self.record("kept.bin", "--rotate", "100ms", "--keep", "2")
        files = self.series("kept")
        self.assertEqual(len(files), 2, files)
        self.assertFalse(os.path.exists(trace), "the first file was deleted")
        # The series is still read by its name, from what is left.
        report = self.report(trace, "--no-children")
        self.assertGreater(self.calls(report)["handle"], 0)
        self.assertEqual(report["warnings"], [])

    def test_a_bad_rotation_is_refused_before_the_program_runs(self):
        script = self.script("program.py", PROGRAM)
        out = subprocess.run(
            [sys.executable, "-m", "mtrace", "--rotate", "soon", "-o", self.path("x.bin"),
             script, "1"],
            cwd=self.dir, capture_output=True, text=True, timeout=120)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("rotate", out.stderr)
        self.assertNotIn("done", out.stdout)
