#!/usr/bin/env python3
"""Logic levels at every endpoint of a flattened Yosys netlist (JSON), counted as `ltp` counts
them: every cell that is not a flip-flop, shift register, block RAM or clock buffer is one
level. Yosys' `ltp` names only the single longest path; this lists every register (grouped by
name) and output port whose input is deeper than a limit, each with one of its paths.

Usage: deep_paths.py NETLIST.json TOP [LIMIT]   (LIMIT: list endpoints deeper than this; 12)
hw/scripts/synth.sh runs it when SYNTH_DEEP=LIMIT is set. Paths longer than 8 cells are shown
cut in the middle; DEEP_FULL=1 shows them whole (one cell a line).
"""
import os
import json
import sys
from collections import defaultdict

SEQUENTIAL = ("FD", "SRL", "RAMB", "BUFG")


def bits_of(cell, direction):
    return [b for port, bits in cell["connections"].items()
            if cell["port_directions"].get(port) == direction
            for b in bits if isinstance(b, int)]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    netlist, top = sys.argv[1], sys.argv[2]
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    modules = json.load(open(netlist))["modules"]
    # With parameters set on it (chparam), Yosys may name the top `$paramod\<top>\...`: then
    # the module marked top.
    module = modules.get(top) or next(
        (m for m in modules.values() if m.get("attributes", {}).get("top")), None)
    if module is None:
        sys.exit(f"deep_paths.py: no module {top} (nor one marked top) in {netlist}")
    cells = module["cells"]

    # A readable name per net bit: a source name (no '$') when there is one.
    names = {}
    for name, info in module["netnames"].items():
        for b in info["bits"]:
            if isinstance(b, int):
                old = names.get(b)
                if old is None or (old.startswith("$") and not name.startswith("$")):
                    names[b] = f"{name} [{info['bits'].index(b)}]" if len(info["bits"]) > 1 \
                        else name

    comb = {n: c for n, c in cells.items() if not c["type"].startswith(SEQUENTIAL)}
    driver = {b: n for n, c in comb.items() for b in bits_of(c, "output")}

    # Depth of every combinational cell (iterative, the netlists are deep), and the input
    # that gave it.
    depth, pred = {}, {}
    for start in comb:
        stack = [(start, False)]
        while stack:
            name, expanded = stack.pop()
            if name in depth:
                continue
            ins = bits_of(comb[name], "input")
            if not expanded:
                stack.append((name, True))
                stack.extend((driver[b], False) for b in ins
                             if b in driver and driver[b] not in depth)
                continue
            best, via = 0, ("source", ins[0] if ins else None)
            for b in ins:
                d = driver.get(b)
                if d is not None and depth[d] > best:
                    best, via = depth[d], ("cell", d)
                elif d is None and best == 0:
                    via = ("source", b)
            depth[name], pred[name] = best + 1, via

    def path(name):
        steps = []
        while True:
            out = bits_of(comb[name], "output")
            steps.append(f"{comb[name]['type']} {names.get(out[0], '?') if out else '?'}")
            kind, x = pred[name]
            if kind == "source":
                steps.append(names.get(x, "?") if x is not None else "(constant)")
                break
            name = x
        return list(reversed(steps))

    # Endpoints: inputs of sequential cells (named by their output net), output ports.
    worst = defaultdict(lambda: (0, None, None))
    for name, c in cells.items():
        if name in comb:
            continue
        out = bits_of(c, "output")
        label = names.get(out[0], name) if out else name
        group = label.split(" [")[0]
        for b in bits_of(c, "input"):
            d = driver.get(b)
            if d is not None and depth[d] > worst[group][0]:
                worst[group] = (depth[d], label, d)
    for pname, p in module["ports"].items():
        if p["direction"] == "output":
            for b in p["bits"]:
                d = driver.get(b) if isinstance(b, int) else None
                if d is not None and depth[d] > worst["port " + pname][0]:
                    worst["port " + pname] = (depth[d], "port " + pname, d)

    rows = sorted(((lv, g, label, cell) for g, (lv, label, cell) in worst.items()),
                  key=lambda r: (-r[0], r[1]))
    deepest = rows[0][0] if rows else 0
    over = [r for r in rows if r[0] > limit]
    print(f"{top}: deepest endpoint {deepest} levels; {len(over)} endpoint groups above {limit}")
    for lv, group, label, cell in over:
        steps = path(cell)
        print(f"  {lv:3d}  {label}")
        if os.environ.get("DEEP_FULL"):
            for step in steps:
                print(f"         {step}")
            continue
        shown = steps if len(steps) <= 8 else steps[:4] + ["..."] + steps[-3:]
        print("       " + " -> ".join(shown))


main()
