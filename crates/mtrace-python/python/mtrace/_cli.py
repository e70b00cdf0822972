"""The ``mtanalyze`` command of the wheel: the Rust ``mtanalyze`` command
line, linked into the extension, with every subcommand and flag of the
binary (``mtanalyze --help``)."""

from __future__ import annotations

import os
import signal
import sys

from . import _mtrace

__all__ = ["main", "run"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Literal, overload
else:
    # `typing` is not imported at run time (its import would cost every
    # recorded program's start-up): the overloads are for type checkers.
    def overload(f):
        return f


@overload
def run(args: Iterable[str | os.PathLike[str]], capture: Literal[False] = False) -> int: ...
@overload
def run(args: Iterable[str | os.PathLike[str]], capture: Literal[True]) -> tuple[int, bytes]: ...


def run(args: Iterable[str | os.PathLike[str]], capture: bool = False) -> int | tuple[int, bytes]:
    """Run ``mtanalyze ARGS...`` in this process. Returns the exit status
    (0 done, 1 a ``diff --fail-if`` rule holds, 2 a failure, said on
    stderr); with ``capture``, ``(status, bytes written to stdout)``."""
    argv = ["mtanalyze", *(os.fspath(a) for a in args)]
    if capture:
        return _mtrace.mtanalyze_captured(argv)
    # The Rust side writes to the process's stdout: what Python buffered
    # goes first.
    sys.stdout.flush()
    return _mtrace.mtanalyze(argv)


def main() -> int:
    """The console script: ``sys.exit(main())``."""
    # Ctrl-C ends the analysis as it ends the binary (Python's handler would
    # only raise once the analysis returned).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return run(sys.argv[1:])
