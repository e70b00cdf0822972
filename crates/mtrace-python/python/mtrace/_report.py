"""``mtrace.analyze``: a trace's report as Python objects.

The analysis is the Rust analyzer linked into the extension (the same code
as ``mtanalyze``), run with the GIL released; the report comes back as the
value the JSON report is written from, so every name and unit is that of
``mtanalyze TRACE --format json`` (times in integer nanoseconds) and
``Report.to_dict()`` equals ``json.load`` of that output.
"""

from __future__ import annotations

import os

from . import _mtrace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    _RowBase = dict[str, Any]
else:
    _RowBase = dict

__all__ = ["analyze", "Report", "Row", "TraceError"]

#: A trace that cannot be read or analyzed: the message is the analyzer's
#: (the file, what is wrong, the byte offset). A ``ValueError``.
TraceError = _mtrace.TraceError


class Row(_RowBase):
    """One row of a report (a function, an edge, a stack, a warning...):
    the JSON report's object, readable as a dict (``row["ncalls"]``) or by
    attribute (``row.ncalls``). A nested object reads as a ``Row`` too."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(f"this row has no field {name!r} (it has {', '.join(self)})") from None
        return Row(value) if type(value) is dict else value

    def __dir__(self) -> list[str]:
        return list(self)


def _rows(values: Iterable[dict[str, Any]]) -> list[Row]:
    return [Row(v) for v in values]


class Report:
    """What ``mtrace.analyze`` returns: the trace's report.

    ``trace`` (what the trace holds: ``source``, ``duration_ns``,
    ``threads``...), ``clock`` (``"stack"``, ``"gil"`` or ``"wall"``),
    ``functions``, ``edges`` (caller to callee), ``stacks`` (one per thread,
    fiber or task), ``warnings``, ``marks`` and ``paths`` (call paths, when
    asked for) are lists of ``Row`` with the fields of
    ``schemas/report.schema.json``. ``function(name)`` finds a function's
    row by name.
    """

    __slots__ = ("_value", "trace", "clock", "functions", "edges", "stacks", "warnings",
                 "marks", "paths")

    trace: Row
    clock: str
    functions: list[Row]
    edges: list[Row]
    stacks: list[Row]
    warnings: list[Row]
    marks: list[Row]
    paths: list[Row]

    def __init__(self, value: dict[str, Any]) -> None:
        self._value = value
        self.trace = Row(value["trace"])
        self.clock = value["clock"]
        self.functions = _rows(value["functions"])
        self.edges = _rows(value["edges"])
        self.stacks = _rows(value["stacks"])
        self.warnings = _rows(value["warnings"])
        self.marks = _rows(value["marks"])
        self.paths = _rows(value.get("paths", ()))

    def function(self, name: str, file: str | None = None) -> Row:
        """The row of the function called ``name`` (its qualified name for
        Python code, ``<built-in method ...>`` for C functions), in ``file``
        if given. ``KeyError`` if there is none; ``LookupError`` naming the
        candidates if several match (give ``file``)."""
        found = [f for f in self.functions
                 if f["function"] == name and (file is None or f["file"] == file)]
        if not found:
            raise KeyError(name)
        if len(found) > 1:
            places = ", ".join(f"{f['file']}:{f['line']}" for f in found)
            raise LookupError(f"{len(found)} functions are called {name!r} ({places}): give file=")
        return found[0]

    def to_dict(self) -> dict[str, Any]:
        """The report as plain dicts and lists: equal to ``json.load`` of
        ``mtanalyze TRACE --format json`` with the same options."""
        return self._value

    def __repr__(self) -> str:
        return (f"<mtrace.Report {self.trace['source']!r}: clock {self.clock}, "
                f"{len(self.functions)} functions, {len(self.stacks)} stacks, "
                f"{len(self.warnings)} warnings>")


def analyze(path: str | os.PathLike[str], clock: str | None = None, *, start: str | None = None,
            end: str | None = None, threads: Iterable[int] | None = None,
            stacks: Iterable[str] | None = None) -> Report:
    """Analyze the trace at ``path`` and return its ``Report``.

    ``clock``: ``"stack"``, ``"gil"`` or ``"wall"`` (default: the one the
    trace asks for; Python traces ask for ``gil``, free-threaded ones for
    ``stack``). ``start``/``end``: count only the time in that window, as
    ``mtanalyze --from/--to``: a duration from the start of the recording
    (``"150ms"``, ``"2s"``) or ``"mark:NAME"``. ``threads``: only stacks
    that ran on these thread ids; ``stacks``: only these stacks (ids such
    as ``"thread:3"`` or names). A damaged or truncated trace gives the
    report of every intact event, with warnings; one that cannot be read
    raises ``TraceError`` (``OSError`` if the file cannot be opened).
    Example::

        report = mtrace.analyze("mtrace.bin")
        fib = report.function("fib")
        print(fib.ncalls, fib.primitive_calls, fib.paused_ns)
    """
    value = _mtrace.analyze(os.fspath(path), clock=clock, start=start, end=end,
                            threads=None if threads is None else list(threads),
                            stacks=None if stacks is None else list(stacks))
    return Report(value)
