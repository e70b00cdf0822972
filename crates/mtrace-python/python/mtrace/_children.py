"""Child processes record too: each into a trace of its own beside the
parent's, which ``mtanalyze PARENT_TRACE`` merges into one report.

* A child made by ``fork`` (``multiprocessing``'s ``fork`` pools, a
  ``forkserver``'s workers, ``os.fork()``) starts its own recording at the
  fork (``os.register_at_fork``): the recording it inherited is the parent's,
  whose file the recorder stops it from touching.
* A new interpreter (``spawn`` pools, the ``forkserver`` itself,
  ``subprocess`` runs of ``sys.executable``) finds ``MTRACE_CHILD`` in its
  environment, set by the recording parent, and starts recording at start-up
  from the ``mtrace-children.pth`` file the wheel installs (as coverage.py
  measures subprocesses).

Names: the first recording's trace ``NAME.EXT`` (``mtrace.bin``), each
descendant's ``NAME.pid<PID>.EXT`` beside it (grandchildren too). The first
recording removes the ``NAME.pid*.EXT`` files of an earlier run. A child
ends its recording at exit; one that ends through ``os._exit`` or a signal
leaves an unfinished trace, which the analyzer reads. A child that cannot
record runs unprofiled and leaves ``NAME.pid<PID>.failed``, a line saying
why, which the parent's report shows as a warning.
"""

from __future__ import annotations

import atexit
import glob
import json
import os
import re
import sys

from . import _mtrace

__all__ = ["ENVIRONMENT", "child_path", "arm", "disarm", "start_from_environment"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The environment variable that tells a new interpreter to record: JSON of
#: the first trace's path and the recording's options.
ENVIRONMENT = "MTRACE_CHILD"

#: The recording this process's children follow: {"root": path, "options":
#: dict}, or None when children are not recorded.
_state: dict[str, Any] = {"armed": None, "environment_before": None, "registered": False,
          "from_environment": False}


def child_path(root: str, pid: int) -> str:
    """The trace of process ``pid`` under the first trace ``root``."""
    stem, ext = os.path.splitext(root)
    return f"{stem}.pid{pid}{ext or '.bin'}"


def children_of(root: str) -> list[str]:
    """The traces (and ``.failed`` notes) of ``root``'s descendants on disk."""
    stem, ext = os.path.splitext(root)
    pattern = re.compile(re.escape(os.path.basename(stem)) + r"\.pid\d+(" + re.escape(ext or ".bin")
                         + r"|\.failed)$")
    folder = os.path.dirname(stem) or "."
    return [p for p in glob.glob(os.path.join(glob.escape(folder), "*"))
            if pattern.match(os.path.basename(p))]


def _note_failure(path: str, error: BaseException) -> None:
    stem, _ext = os.path.splitext(path)
    try:
        with open(stem + ".failed", "w") as f:
            f.write(f"process {os.getpid()} could not record into {path}: {error}\n")
    except OSError:
        pass  # Nowhere to say it: the child still runs, unprofiled.


def _finish_at_exit() -> None:
    from . import disable

    try:
        disable()
    except Exception:  # a child's exit must not fail for the profiler
        pass


def _after_fork_in_child() -> None:
    armed = _state["armed"]
    if armed is None or not _mtrace.is_recording():
        return
    path = child_path(armed["root"], os.getpid())
    try:
        _mtrace.restart_in_child(path)
    except Exception as e:
        _note_failure(path, e)
        return
    atexit.register(_finish_at_exit)
    # multiprocessing's forked workers end through os._exit, after their
    # finalizers: one of those finishes the trace. (It clears the finalizers
    # a fork inherited, then runs the after-fork hooks, which register it.)
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        util.register_after_fork(_AFTER_FORK_TOKEN, _finish_with_multiprocessing)


class _Token:
    """What multiprocessing's after-fork registry holds (weakly) for us."""


_AFTER_FORK_TOKEN = _Token()


def _finish_with_multiprocessing(_token: _Token) -> None:
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        return
    # Last of the finalizers, which multiprocessing runs before os._exit.
    util.Finalize(None, _finish_at_exit, exitpriority=-(1 << 30))
    # Out of the after-fork registry again, which the process's own forks
    # inherit: left there, each generation of forks would hold one more
    # entry (CPython's test_multiprocessing counts them: bpo-17555).
    registry: Any = getattr(util, "_afterfork_registry", None)
    try:
        for key, value in list(registry.items()):
            if value is _AFTER_FORK_TOKEN:
                del registry[key]
    except (AttributeError, KeyError, TypeError):
        pass  # another multiprocessing: an entry too many, nothing worse


def arm(root: str, options: dict[str, Any], first: bool) -> None:
    """While recording into ``root`` (``first``: this is the process tree's
    first recording, not a child's), make children record: the fork hook,
    and ``MTRACE_CHILD`` for new interpreters."""
    root = os.path.abspath(root)
    if first:
        for stale in children_of(root):
            try:
                os.remove(stale)
            except OSError:
                pass
    _state["armed"] = {"root": root, "options": options}
    if not _state["registered"]:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _state["registered"] = True
    _state["environment_before"] = os.environ.get(ENVIRONMENT)
    os.environ[ENVIRONMENT] = json.dumps({"root": root, "options": options})


def disarm() -> None:
    """Children started from now on are not recorded."""
    if _state["armed"] is None:
        return
    _state["armed"] = None
    before = _state["environment_before"]
    if before is None:
        os.environ.pop(ENVIRONMENT, None)
    else:
        os.environ[ENVIRONMENT] = before


def start_from_environment() -> None:
    """At the start of a new interpreter (the ``.pth`` file): record into
    this process's trace if a recording parent asked for it."""
    text = os.environ.get(ENVIRONMENT)
    # `site` may read a .pth file twice (a virtual environment's
    # site-packages is added twice): start once.
    if not text or _state["from_environment"]:
        return
    _state["from_environment"] = True
    from . import enable

    try:
        asked = json.loads(text)
        root, options = asked["root"], asked["options"]
    except (ValueError, KeyError, TypeError):
        return  # not ours to read: run unprofiled
    path = child_path(root, os.getpid())
    try:
        enable(path, _root=root, **options)
    except Exception as e:
        _note_failure(path, e)
        return
    atexit.register(_finish_at_exit)
