"""Atomic (lock-prefixed) instructions per event, from two callgrind runs.

callgrind counts every instruction alike; an atomic read-modify-write (a
``lock``-prefixed instruction, or ``xchg`` with memory) costs many times a
plain one, so instruction counts alone cannot show whether a free-threaded
build's reference counts or locks are on the per-event path. This script
sums callgrind's per-instruction counts over the addresses that
``objdump -d`` shows as atomic, in every object file of the run, for a
``per_event.py`` run of ``fib(18)`` and one of ``fib(21)``, and divides the
difference by the events between them (as the README's instruction counts
are made):

    for n in 18 21; do valgrind --tool=callgrind --dump-instr=yes \\
        --callgrind-out-file=/tmp/cg.$n $PY crates/mtrace-python/bench/per_event.py MODE $n; done
    python3 crates/mtrace-python/bench/atomics.py /tmp/cg.18 /tmp/cg.21

It prints the instructions per event, each object file's (which tells
the interpreter's from the extension's), the atomic instructions per
event, each object file's share of them and the busiest atomic sites (object, address, the
nearest exported symbol before it: a stripped interpreter names only its
API functions). Addresses in callgrind's output are the object file's own
(as objdump prints them). This is a measurement tool, not a test.
"""

import argparse
import collections
import functools
import re
import subprocess


def events(n):
    """Events of ``fib(n)``: a start and a return per call."""
    def calls(k):
        return 1 if k < 2 else 1 + calls(k - 1) + calls(k - 2)
    return 2 * calls(n)


def self_costs(path):
    """Each (object file, address)'s own instruction count in a callgrind
    output written with ``--dump-instr=yes``."""
    names = {}
    cost = collections.Counter()
    ob = None
    pos = 0
    call_cost_next = False

    def name(val):
        # Name compression: "(id) name" the first time, "(id)" after.
        m = re.match(r"\((\d+)\)(?: (.*))?", val)
        if not m:
            return val
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), m.group(1))

    with open(path) as f:
        for line in f:
            if line.startswith("ob="):
                ob = name(line[3:].rstrip("\n"))
            elif line.startswith("cob="):
                name(line[4:].rstrip("\n"))
            elif line.startswith("calls="):
                # The next cost line is the call's inclusive cost.
                call_cost_next = True
            elif line[:1] in "0123456789+-*":
                parts = line.split()
                p = parts[0]
                if p.startswith("0x"):
                    pos = int(p, 16)
                elif p[0] in "+-":
                    step = int(p[1:], 0)
                    pos += step if p[0] == "+" else -step
                elif p != "*":
                    continue
                if call_cost_next:
                    call_cost_next = False
                elif len(parts) >= 2:
                    # Last column: Ir (positions are "instr" or "instr line").
                    cost[(ob, pos)] += int(parts[-1])
    return cost


@functools.lru_cache(None)
def atomic_sites(obj):
    """{address: (nearest symbol, instruction)} of obj's atomic instructions."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj],
                         capture_output=True, text=True, check=False).stdout
    sites = {}
    symbol = "?"
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:", line)
        if m:
            symbol = m.group(2)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if m:
            ins = m.group(2)
            if ins.startswith("lock ") or (ins.startswith("xchg") and "(" in ins):
                sites[int(m.group(1), 16)] = (symbol, ins)
    return sites


def tally(path):
    """(instructions per object, atomic instructions per object, per site)
    of a run."""
    cost = self_costs(path)
    instructions = collections.Counter()
    per_object = collections.Counter()
    per_site = collections.Counter()
    for (ob, address), n in cost.items():
        instructions[(ob or "?").rsplit("/", 1)[-1]] += n
        if ob and ob.startswith("/"):
            site = atomic_sites(ob).get(address)
            if site:
                short = ob.rsplit("/", 1)[-1]
                per_object[short] += n
                per_site[(short, hex(address), *site)] += n
    return instructions, per_object, per_site


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("small", help="callgrind output of per_event.py MODE 18")
    parser.add_argument("large", help="callgrind output of per_event.py MODE 21")
    parser.add_argument("--n", type=int, nargs=2, default=(18, 21))
    args = parser.parse_args()
    e = events(args.n[1]) - events(args.n[0])
    (ir0, obj0, site0), (ir1, obj1, site1) = tally(args.small), tally(args.large)
    print(f"{e} events: {(sum(ir1.values()) - sum(ir0.values())) / e:.1f} instructions per event")
    for k in ir1:
        if abs(ir1[k] - ir0.get(k, 0)) / e >= 0.5:
            print(f"  {(ir1[k] - ir0.get(k, 0)) / e:6.1f}  {k}")
    print(f"{(sum(obj1.values()) - sum(obj0.values())) / e:.2f} atomic instructions per event")
    for k in obj1:
        if abs(obj1[k] - obj0.get(k, 0)) / e >= 0.01:
            print(f"  {(obj1[k] - obj0.get(k, 0)) / e:6.2f}  {k}")
    delta = collections.Counter({k: n - site0.get(k, 0) for k, n in site1.items()})
    for k, n in delta.most_common(10):
        if n / e >= 0.01:
            print(f"  {n / e:6.2f}  " + " ".join(k))


if __name__ == "__main__":
    main()
