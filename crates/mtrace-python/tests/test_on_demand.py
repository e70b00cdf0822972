"""Recording on demand (issue 37): a Python server started with
`python -m mtrace --armed --signal USR2` records nothing until
`kill -USR2`, and exactly the work done between two signals."""

import os
import signal
import subprocess
import sys
import time

from test_mtrace import Case

SERVER = """
    import queue, sys, threading
    import mtrace

    WORKERS = 3
    counts = {"handled": 0, "recorded": 0}
    lock = threading.Lock()

    def checksum(seed):
        acc = seed
        for i in range(50):
            acc = (acc * 31 + i) & 0xFFFF
        return acc

    def handle(request):
        with lock:
            counts["handled"] += 1
            if not mtrace.is_paused():
                counts["recorded"] += 1
        return checksum(request) ^ checksum(request + 1)

    def serve(requests, done):
        while True:
            request = requests.get()
            if request is None:
                return
            done.put(handle(request))

    requests, done = queue.Queue(), queue.Queue()
    workers = [threading.Thread(target=serve, args=(requests, done)) for _ in range(WORKERS)]
    for w in workers:
        w.start()
    next_request = 0
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["work"]:
            n = int(words[1])
            for _ in range(n):
                next_request += 1
                requests.put(next_request)
            for _ in range(n):
                done.get()
            print(f"done {n}", flush=True)
        elif words == ["paused?"]:
            print(f"paused {mtrace.is_paused()}", flush=True)
        elif words == ["quit"]:
            break
    for w in workers:
        requests.put(None)
    for w in workers:
        w.join()
    print(f"handled {counts['handled']} recorded {counts['recorded']}", flush=True)
"""


class OnDemand(Case):
    def ask(self, server, command):
        server.stdin.write(command + "\n")
        server.stdin.flush()
        return server.stdout.readline().strip()

    def wait_paused(self, server, paused):
        # The signal is acted on by the recorder's thread a moment after
        # kill returns: a liveness bound, not a timing.
        deadline = time.monotonic() + 30
        want = f"paused {paused}"
        while self.ask(server, "paused?") != want:
            self.assertLess(time.monotonic(), deadline, f"the server never became {want}")
            time.sleep(0.005)

    def test_two_signals_record_exactly_the_work_between_them(self):
        script = self.script("server.py", SERVER)
        trace = self.path("trace.bin")
        server = subprocess.Popen(
            [sys.executable, "-m", "mtrace", "--armed", "--signal", "USR2", "-o", trace,
             script],
            cwd=self.dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            self.wait_paused(server, True)
            self.assertEqual(self.ask(server, "work 200"), "done 200")
            os.kill(server.pid, signal.SIGUSR2)
            self.wait_paused(server, False)
            self.assertEqual(self.ask(server, "work 300"), "done 300")
            self.assertEqual(self.ask(server, "work 33"), "done 33")
            os.kill(server.pid, signal.SIGUSR2)
            self.wait_paused(server, True)
            self.assertEqual(self.ask(server, "work 100"), "done 100")
            out, _ = server.communicate("quit\n", timeout=120)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        self.assertEqual(server.returncode, 0)
        self.assertIn("handled 633 recorded 333", out)

        report = self.report(trace)
        calls = {f["function"]: f["ncalls"] for f in report["functions"]}
        self.assertEqual(calls.get("handle"), 333, calls)
        self.assertEqual(calls.get("checksum"), 2 * 333, calls)
        marks = [m["name"] for m in report["marks"]]
        self.assertEqual(marks, ["mtrace:resume:1", "mtrace:pause:1"])
        kinds = {w["kind"] for w in report["warnings"]}
        self.assertLessEqual(kinds, {"frames_from_snapshot"}, report["warnings"])
        stretch = self.report(trace, "--from", "mark:mtrace:resume:1",
                              "--to", "mark:mtrace:pause:1")
        calls = {f["function"]: f["ncalls"] for f in stretch["functions"]}
        self.assertEqual(calls.get("handle"), 333, calls)
