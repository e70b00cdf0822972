"""``python -m mtrace attach PID``: record a running CPython 3.14+ process.

CPython 3.14's ``sys.remote_exec`` (PEP 768) runs a file of Python code in
another process, in its main thread, the next time that thread runs Python
(as a signal handler runs). ``attach`` uses it twice: once to start a
recording there (``mtrace.enable``: every thread, those already running
included, without recording child processes, so that nothing stays set in
the target's environment), and once, after ``--duration`` seconds or at
Ctrl-C, to stop it (``mtrace.disable``: the ``sys.monitoring`` tool id is
free again and no thread of mtrace's is left). Then it prints the table, as
``python -m mtrace`` does when a program ends.

Each injected file writes a one-line JSON status beside itself, which
``attach`` waits for: that is how it knows the code ran, and what went
wrong in the target (mtrace not importable there, the recording refused).
A target whose main thread is blocked in C (a ``join``, a ``select``, a
long ``sleep``) runs nothing until it returns to Python: ``attach`` waits
``--timeout`` seconds, then says so and exits with status 2; the start
file it left checks a deadline first, so if the main thread runs it later
it does nothing.

The frames each thread had open when the recording started are taken as
open since the recording began: their time counts from the start of the
file and their calls, which began before it, do not. The start adopts
every other thread's frames at once (the binding's
``adopt_other_threads``, the recorder's ``adopt_thread_frames``), so a
thread blocked in C for the whole recording is in it too; a thread that
runs Python continues what was written for it, and the one running the
start (or any that recorded first) adopts its own at its first event
(``adopt_open_frames``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import types
    from collections.abc import Callable
    from typing import Any, NoReturn

PROG = "python -m mtrace attach"
#: The exit status of a usage error or of an attach that could not start.
USAGE_ERROR = 2

# The files run in the target, and each function in them, start with the
# docstring the recorder knows as mtrace's own code (`registry.rs`), so
# none of their frames is recorded.
# The file run in the target to start the recording. Formatted with the
# status file, the trace path, the options and the deadline (time.time())
# after which it must do nothing: the attacher gave up on it.
_START = """\
"mtrace: code injected by python -m mtrace attach"
def _mtrace_attach_start():
    "mtrace: code injected by python -m mtrace attach"
    import json, os, time
    status = {status!r}
    if time.time() > {deadline!r}:
        return
    def say(**what):
        "mtrace: code injected by python -m mtrace attach"
        with open(status + ".tmp", "w") as f:
            json.dump(what, f)
        os.replace(status + ".tmp", status)
    try:
        import mtrace
    except BaseException as e:
        say(ok=False, error="mtrace is not importable in the target: %s: %s"
            % (type(e).__name__, e))
        return
    if mtrace.is_enabled():
        say(ok=False, error="the target is recording already")
        return
    try:
        mtrace.enable({trace!r}, children=False, **{options!r})
    except BaseException as e:
        say(ok=False, error="the recording did not start: %s: %s" % (type(e).__name__, e))
        return
    say(ok=True, pid=os.getpid())
_mtrace_attach_start()
del _mtrace_attach_start
"""

# The file run in the target to stop the recording it started.
_STOP = """\
"mtrace: code injected by python -m mtrace attach"
def _mtrace_attach_stop():
    "mtrace: code injected by python -m mtrace attach"
    import json, os, sys
    status = {status!r}
    mtrace = sys.modules.get("mtrace")
    summary = mtrace.disable() if mtrace is not None else None
    with open(status + ".tmp", "w") as f:
        json.dump(dict(ok=summary is not None, summary=summary), f)
    os.replace(status + ".tmp", status)
_mtrace_attach_stop()
del _mtrace_attach_stop
"""


class AttachError(Exception):
    """Why the attach could not go on: one line for the user."""


def fail(message: object) -> NoReturn:
    print(f"{PROG}: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


def say(message: str) -> None:
    print(f"mtrace: {message}", file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    from mtrace._profiler import SORT_KEYS

    p = argparse.ArgumentParser(
        prog=PROG,
        description="Record a running CPython 3.14+ process (every thread) for a while, "
        "then print the table. The target needs mtrace importable in its environment.")
    p.error = lambda message: fail(  # type: ignore[method-assign]
        f"{message} (see {PROG} --help)")
    p.add_argument("pid", type=int, help="the process to record")
    p.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                   help="stop after this many seconds (default: at Ctrl-C)")
    p.add_argument("-o", "--outfile", default=None, metavar="TRACE",
                   help="the trace file (default: mtrace-PID.bin in the current directory)")
    p.add_argument("-s", "--sort", default="stdname", choices=SORT_KEYS, metavar="SORT",
                   help="order of the table: " + ", ".join(SORT_KEYS) + " (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for the target's main thread to run the "
                   "injected code, at the start and at the stop (default: %(default)s)")
    p.add_argument("--no-builtins", dest="builtins", action="store_false",
                   help="do not record C functions")
    p.add_argument("--no-tasks", dest="tasks", action="store_false",
                   help="asyncio coroutines counted as cProfile counts them")
    return p


class NotRunYet(AttachError):
    """The target's main thread did not run an injected file in time; it
    may still run it later, so the file must stay where it is."""


def in_target(pid: int, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` on process ``pid`` (``os.kill``, ``sys.remote_exec``),
    its errors as the user's reasons."""
    try:
        return call(*args)
    except ProcessLookupError:
        raise AttachError(f"no such process: {pid}") from None
    except PermissionError:
        raise AttachError(
            f"no permission to attach to process {pid}: attaching needs the right to "
            "trace it (ptrace): the same user with kernel.yama.ptrace_scope 0 or a "
            "parent process, or root / CAP_SYS_PTRACE") from None
    except (RuntimeError, OSError, ValueError) as e:
        # Remote debugging disabled in the target (PYTHON_DISABLE_REMOTE_DEBUG,
        # -X disable_remote_debug), another Python version, not Python at all.
        raise AttachError(f"cannot run code in process {pid}: {e}") from None


def check_target(pid: int) -> None:
    """Refuse, with the reason, what ``sys.remote_exec`` cannot attach to."""
    if not hasattr(sys, "remote_exec"):
        raise AttachError("attach needs CPython 3.14+ (sys.remote_exec); this is "
                          + sys.version.split()[0])
    if pid <= 0:
        raise AttachError(f"no such process: {pid}")
    in_target(pid, os.kill, pid, 0)


def run_in_target(pid: int, folder: str, name: str, template: str, timeout: float, what: str,
                  **fields: Any) -> dict[str, Any]:
    """Runs ``template`` (formatted with ``fields`` and ``status``, the file
    it writes its JSON status to) in the target as ``folder/NAME.py``, and
    returns that status; NotRunYet once ``timeout`` seconds passed without
    it."""
    status = os.path.join(folder, f"{name}.json")
    script = os.path.join(folder, f"{name}.py")
    with open(script, "w") as f:
        f.write(template.format(status=status, **fields))
    os.chmod(script, 0o644)
    in_target(pid, sys.remote_exec, pid, script)  # type: ignore[attr-defined, unused-ignore]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(status) as f:
                return json.load(f)  # type: ignore[no-any-return]
        except FileNotFoundError:
            time.sleep(0.01)
    raise NotRunYet(
        f"the target's main thread did not run the code to {what} within {timeout:g} s: "
        "CPython runs it only when the main thread next runs Python, and it may be "
        "blocked in C (a join, a select, a long sleep); try again, or a larger --timeout")


def record(options: argparse.Namespace) -> str:
    """Starts the recording in the target, waits, stops it: the trace path."""
    pid = options.pid
    check_target(pid)
    trace = os.path.abspath(options.outfile or f"mtrace-{pid}.bin")
    folder = tempfile.mkdtemp(prefix="mtrace-attach-")
    # The target may run as another user (attached by root): it reads the
    # files and writes the statuses here.
    os.chmod(folder, 0o777)
    keep_folder = False
    try:
        started = run_in_target(
            pid, folder, "start", _START, options.timeout, "start recording", trace=trace,
            options=dict(builtins=options.builtins, tasks=options.tasks, _open_frames=True),
            # A late run, after the attach gave up, does nothing.
            deadline=time.time() + options.timeout)
        if not started.get("ok"):
            raise AttachError(started.get("error", "the recording did not start"))
        until = "for %g s" % options.duration if options.duration is not None else "until Ctrl-C"
        say(f"recording process {pid} into {trace} {until}")
        interrupted = wait_duration(options.duration)
        try:
            stopped = run_in_target(pid, folder, "stop", _STOP, options.timeout,
                                    "stop recording")
        except NotRunYet as e:
            raise NotRunYet(f"{e}; the target records until it does") from None
        summary = stopped.get("summary") or {}
        say(f"detached from process {pid}"
            + (" (interrupted)" if interrupted else "")
            + f": {summary.get('events', 0)} events from {summary.get('threads', 0)} threads")
        return trace
    except NotRunYet:
        keep_folder = True
        raise
    finally:
        if not keep_folder:
            shutil.rmtree(folder, ignore_errors=True)


class _Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: types.FrameType | None) -> NoReturn:
    raise _Interrupted


def wait_duration(duration: float | None) -> bool:
    """Sleeps ``duration`` seconds (None: until Ctrl-C); whether Ctrl-C (or
    SIGTERM) ended it. The handlers are set here, whatever this process
    inherited: a shell's background job starts with SIGINT ignored, and the
    recording in the target must be stopped however the wait ends."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if duration is None:
            while True:
                signal.pause()
        time.sleep(max(duration, 0))
        return False
    except (_Interrupted, KeyboardInterrupt):
        return True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str]) -> NoReturn:
    options = parser().parse_args(argv)
    try:
        trace = record(options)
    except AttachError as e:
        fail(e)
    from mtrace._profiler import print_table

    sys.exit(print_table([trace], options.sort))
