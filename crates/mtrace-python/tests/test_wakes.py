"""Wakes of asyncio tasks (issue 33): when a suspended task is made
runnable (a future it awaits completes, a timer fires, it yields with
``sleep(0)``), mtrace records a ``wake`` of its stack, and ``mtanalyze``
splits the task's paused time into *waiting* (not yet woken) and
*scheduled* (woken, waiting for the loop's thread), as it does for tokio
(``schemas/semantics.md``, "Wakes").

Through the real ``python -m mtrace -o trace.bin script.py`` and the
environment's ``mtanalyze trace.bin --format json --stacks``. No test asserts
how long anything took beyond what the program's own order guarantees: the
split the analyzer reports is checked against the one the trace's own
events give (read with `test_stacks.read_trace`), and its size only against
what the script measured around the moments that bound it (a
``time.sleep(B)`` between the wake and the task's resumption makes at least
B scheduled, whatever the machine's load).
"""

import json
import sys
import unittest

from test_mtrace import Case, mtanalyze_binary, run  # noqa: F401 (mtanalyze_binary: Case.report)
from test_stacks import SWITCH, read_trace

WAKE = 7
MS = 1_000_000


def pauses(threads, stack):
    """The pauses of logical stack `stack` from the trace's events, in
    ticks: [(away, back, first wake at or after the stretch's start, or
    None)], with every wake of the stack and the thread that recorded it."""
    stretches, wakes = [], []
    for tid, events in threads.items():
        running = None
        for kind, tick, payload in events:
            if kind == SWITCH:
                if running is not None:
                    stretches.append((running, tick))
                running = tick if payload == stack else None
            elif kind == WAKE and payload == stack:
                wakes.append((tick, tid))
    stretches.sort()
    out = []
    for (start, away), (back, _) in zip(stretches, stretches[1:]):
        w = min((t for t, _ in wakes if t >= start), default=None)
        out.append((away, back, w))
    return out, wakes


def split_of_events(found):
    """(paused, scheduled) ticks of the pauses `pauses` found, as
    schemas/semantics.md defines the split."""
    paused = scheduled = 0
    for away, back, w in found:
        paused += back - away
        if w is not None and w <= back:
            scheduled += back - max(w, away)
    return paused, scheduled


class Wakes(Case):
    def record(self, text, *options):
        """Runs `text` under ``python -m mtrace``; it writes the times it
        measured (``time.perf_counter_ns``) as JSON to argv[1]. Returns
        (report with stacks, times, events by thread, stack names)."""
        script = self.script("wakes.py", text)
        times = self.path("times.json")
        trace = self.mtrace(*options, script, times)
        report = self.report(trace, "--stacks")
        self.assertEqual(report["warnings"], [], "the trace needed no repair")
        with open(times) as f:
            measured = json.load(f)
        threads, names = read_trace(trace)
        return report, measured, threads, names

    def stack(self, report, names, name):
        rows = [s for s in report["stacks"] if s["name"] == name]
        self.assertEqual(len(rows), 1, f"one stack named {name}: {report['stacks']}")
        ids = [i for i, n in names.items() if n == name]
        self.assertEqual(len(ids), 1, names)
        row = rows[0]
        self.assertEqual(row["scheduled_ns"] + row["waiting_ns"], row["paused_ns"], row)
        return row, ids[0]

    def assert_split_is_the_events(self, row, found):
        """The analyzer's share of scheduled time is the events' own (ticks
        and ns differ by a constant factor; 1% covers its rounding)."""
        paused, scheduled = split_of_events(found)
        self.assertGreater(paused, 0, found)
        self.assertGreater(row["paused_ns"], 0, row)
        self.assertAlmostEqual(row["scheduled_ns"] / row["paused_ns"], scheduled / paused,
                               delta=0.01, msg=f"{row} vs events {found}")

    def test_a_task_woken_by_an_event_while_another_task_holds_the_loop_is_scheduled(self):
        # On 3.12+ the wake is found one way with built-ins recorded (the
        # default, and "fast") and another without (see src/monitoring.rs).
        options = [(), ("--no-builtins",)]
        if sys.version_info >= (3, 12):
            options.append(("--fast-builtins",))
        for opts in options:
            with self.subTest(options=opts):
                self.check_event_wake(*opts)

    def check_event_wake(self, *options):
        # The setter sleeps D, sets the event (the waiter's wakeup goes on
        # the loop), then holds the loop for B with a blocking sleep: the
        # waiter, woken, waits those B for the thread.
        D, B = 0.05, 0.04
        report, t, threads, names = self.record(f"""
            import asyncio, json, sys, time

            T = {{}}

            async def waiter(event):
                T["a_away"] = time.perf_counter_ns()
                await event.wait()
                T["a_back"] = time.perf_counter_ns()

            async def setter(event):
                T["b_sleep"] = time.perf_counter_ns()
                await asyncio.sleep({D})
                T["b_set"] = time.perf_counter_ns()
                event.set()
                T["b_woke"] = time.perf_counter_ns()
                time.sleep({B})

            async def main():
                event = asyncio.Event()
                a = asyncio.create_task(waiter(event), name="waiter")
                b = asyncio.create_task(setter(event), name="setter")
                await asyncio.gather(a, b)

            asyncio.run(main())
            with open(sys.argv[1], "w") as f:
                json.dump(T, f)
        """, *options)
        row, stack = self.stack(report, names, "waiter")
        found, wakes = pauses(threads, stack)
        self.assertEqual(len(found), 1, f"one pause (the wait): {found}")
        away, back, w = found[0]
        self.assertIsNotNone(w, f"the waiter was woken: {wakes}")
        self.assertTrue(away < w < back, found)
        self.assertEqual(len(wakes), 1, wakes)
        self.assert_split_is_the_events(row, found)
        # Scheduled: from the wake (after b_set) to the resumption (before
        # a_back), which the setter's sleep(B) after b_woke delays.
        self.assertGreaterEqual(row["scheduled_ns"], 0.8 * B * 1e9, row)
        self.assertLessEqual(row["scheduled_ns"], t["a_back"] - t["b_set"] + MS, (row, t))
        # Waiting: from the suspension (after a_away, before b_sleep) to
        # the wake (after the setter's sleep(D), before b_woke).
        self.assertGreaterEqual(row["waiting_ns"], 0.8 * D * 1e9, row)
        self.assertGreaterEqual(row["waiting_ns"], t["b_set"] - t["b_sleep"] - MS, (row, t))
        self.assertLessEqual(row["waiting_ns"], t["b_woke"] - t["a_away"] + MS, (row, t))
        # The function that awaited it has the same split.
        f = [f for f in report["functions"] if f["function"] == "waiter"]
        self.assertEqual(len(f), 1, report["functions"])
        self.assertEqual((f[0]["scheduled_ns"], f[0]["waiting_ns"]),
                         (row["scheduled_ns"], row["waiting_ns"]))

    def test_a_task_never_woken_has_no_scheduled_time(self):
        # The task awaits an event nobody sets and is still pending when
        # the program ends (the loop is not closed, so nothing cancels it:
        # a cancellation would wake it).
        report, _, threads, names = self.record("""
            import asyncio, json, sys

            async def forgotten(event):
                await event.wait()

            async def main():
                global task
                task = asyncio.create_task(forgotten(asyncio.Event()), name="forgotten")
                await asyncio.sleep(0.02)

            loop = asyncio.new_event_loop()
            loop.run_until_complete(main())
            with open(sys.argv[1], "w") as f:
                json.dump({}, f)
        """)
        row, stack = self.stack(report, names, "forgotten")
        _, wakes = pauses(threads, stack)
        self.assertEqual(wakes, [])
        self.assertEqual(row["scheduled_ns"], 0, row)
        self.assertGreater(row["waiting_ns"], 0, row)

    def test_a_task_that_yields_is_scheduled_for_its_whole_pause(self):
        # sleep(0): the task's step, once its coroutine has yielded, puts
        # the task's next step on the loop (a wake right after the switch
        # away), then the busy task, already ready, holds the loop for B.
        B = 0.03
        report, t, threads, names = self.record(f"""
            import asyncio, json, sys, time

            T = {{}}

            async def yielder():
                T["away"] = time.perf_counter_ns()
                await asyncio.sleep(0)

            async def busy():
                T["busy"] = time.perf_counter_ns()
                time.sleep({B})

            async def main():
                await asyncio.gather(asyncio.create_task(yielder(), name="yielder"),
                                     asyncio.create_task(busy(), name="busy"))

            asyncio.run(main())
            with open(sys.argv[1], "w") as f:
                json.dump(T, f)
        """)
        row, stack = self.stack(report, names, "yielder")
        found, wakes = pauses(threads, stack)
        self.assertEqual(len(found), 1, found)
        away, back, w = found[0]
        self.assertIsNotNone(w, wakes)
        self.assertTrue(w < back, found)
        self.assert_split_is_the_events(row, found)
        # Woken before the busy task started: what waiting there is lies
        # between the yielder's last line and the busy task's first.
        self.assertLessEqual(row["waiting_ns"], t["busy"] - t["away"], (row, t))
        self.assertGreaterEqual(row["scheduled_ns"], 0.8 * B * 1e9, row)

    def test_a_timer_wakes_a_sleeping_task(self):
        # asyncio.sleep(D): the loop runs the timer's handle, which
        # completes the task's future, which schedules the task's wakeup.
        D = 0.03
        report, t, threads, names = self.record(f"""
            import asyncio, json, sys, time

            T = {{}}

            async def sleeper():
                T["away"] = time.perf_counter_ns()
                await asyncio.sleep({D})
                T["back"] = time.perf_counter_ns()

            async def main():
                await asyncio.create_task(sleeper(), name="sleeper")

            asyncio.run(main())
            with open(sys.argv[1], "w") as f:
                json.dump(T, f)
        """)
        row, stack = self.stack(report, names, "sleeper")
        found, wakes = pauses(threads, stack)
        self.assertEqual(len(found), 1, found)
        away, back, w = found[0]
        self.assertIsNotNone(w, wakes)
        self.assertTrue(away < w < back, found)
        self.assert_split_is_the_events(row, found)
        # Woken after the timer's delay; scheduled from the wake to the
        # next step (the loop's next round), so more than nothing.
        self.assertGreaterEqual(row["waiting_ns"], 0.8 * D * 1e9, row)
        self.assertGreater(row["scheduled_ns"], 0, row)
        self.assertLessEqual(row["paused_ns"], t["back"] - t["away"], (row, t))

    def test_the_mtanalyze_table_shows_scheduled_time(self):
        # The same split in the text report's stacks table (`--scheduled`).
        script = self.script("table.py", """
            import asyncio, time

            async def waiter(event):
                await event.wait()

            async def setter(event):
                await asyncio.sleep(0.01)
                event.set()
                time.sleep(0.02)

            async def main():
                event = asyncio.Event()
                await asyncio.gather(asyncio.create_task(waiter(event), name="waiter"),
                                     asyncio.create_task(setter(event), name="setter"))

            asyncio.run(main())
        """)
        trace = self.mtrace(script)
        text = run([mtanalyze_binary(), trace, "--stacks", "--scheduled"]).stdout
        self.assertIn("scheduled", text)
        self.assertIn("waiter", text)


if __name__ == "__main__":
    unittest.main(verbosity=2, argv=sys.argv)
