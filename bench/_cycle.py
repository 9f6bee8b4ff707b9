"""Instructions per operation, before/after: the shared half of bench/log_cycle.py and
bench/queue_cycle.py. Each script names its modes and the loop to count; this runs the
script under valgrind cachegrind (user-space instructions) at two run lengths per side
and divides the difference by the extra operations, so that start-up, imports and a
fixed prefill cancel.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable


def instructions(script: str, tree: str, n: int, mode: str) -> int:
    """Instructions of one run of ``script --run n mode`` with ``tree`` first on the path."""
    # one hash seed for every run: string hashing decides dict probes, and a random
    # seed per run moved a difference of two runs by a few per cent
    env = dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"))
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                            f"--cachegrind-out-file={d}/cg", sys.executable, os.path.abspath(script),
                            "--run", str(n), mode], env=env, capture_output=True, text=True, check=True)
    return int(re.search(r"I\s+refs:\s+([\d,]+)", p.stderr).group(1).replace(",", ""))


def main(script: str, doc: str, modes: dict, labels: dict, run: Callable[[int, str], None], unit: str) -> None:
    """The command line of a cycle script: ``modes`` maps a mode to (short run, long run,
    operations per iteration); ``run(n, mode)`` is the loop valgrind counts (``--run``)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-tree", help="a checkout of the base commit (PYTHONPATH for the base side)")
    ap.add_argument("--new-tree", default=os.path.dirname(os.path.dirname(os.path.abspath(script))),
                    help="the new side (default: this tree)")
    ap.add_argument("--modes", default=",".join(modes), help="of " + ",".join(modes))
    ap.add_argument("--json", default="", help="write the figures here")
    ap.add_argument("--run", nargs=2, metavar=("N", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.run:
        run(int(a.run[0]), a.run[1])
        return
    sides = {"new": a.new_tree} if not a.base_tree else {"base": a.base_tree, "new": a.new_tree}
    out = {}
    for mode in a.modes.split(","):
        n1, n2, per = modes[mode]
        out[mode] = {s: (instructions(script, t, n2, mode) - instructions(script, t, n1, mode)) / (n2 - n1) / per
                     for s, t in sides.items()}
        print(f"  {mode}: " + ", ".join(f"{s} {v:,.0f}" for s, v in out[mode].items()), file=sys.stderr, flush=True)
    print(f"| operation (instructions per {unit}) | " + " | ".join(sides) + (" | change |" if len(sides) == 2 else " |"))
    print("|---|" + "---:|" * (len(sides) + (len(sides) == 2)))
    for mode, r in out.items():
        cells = [f"{r[s]:,.0f}" for s in sides]
        if len(sides) == 2:
            cells.append(f"{(r['new'] / r['base'] - 1) * 100:+.1f} %")
        print(f"| {labels[mode]} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
