"""Instructions per queue operation, before/after: valgrind cachegrind on N queue
cycles (send, receive, delete), the difference between two run lengths so that
start-up and imports cancel. Wall time on a shared VM moves +-20 %; instruction
counts settle a few-percent question.

    python bench/queue_cycle.py --base-tree /tmp/base      # a worktree of the base commit
    python bench/queue_cycle.py --run 1000 b10             # one run (what valgrind executes)

Prints a Markdown table; --json writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

MODES = {  # mode: (short run, long run, messages per cycle)
    "b1": (1000, 3000, 1),
    "b10": (200, 600, 10),
    "fifo10": (100, 300, 10),
}
LABELS = {
    "b1": "standard queue cycle, batch 1 (send, receive, delete), interval",
    "b10": "standard queue cycle, batch 10, per message",
    "fifo10": "FIFO cycle, batch 10 in 3 groups, per message",
}


def run_cycles(n: int, mode: str) -> None:
    from vqs.broker import Broker  # (the public surface: the same call on any revision compared)

    # background rounds (the interval flusher, queue maintenance) held off: their number under
    # valgrind depends on the run's slowed wall time, not on the operations counted
    reg = Broker(tempfile.mkdtemp(), queue_maintenance_interval_ms=3_600_000, flush_interval_ms=3_600_000)
    if mode == "fifo10":
        q = reg.create_queue("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=60)
    else:
        q = reg.create_queue("q", visibility_timeout=60)
    for i in range(n):
        if mode == "b1":
            q.send(b"x" * 100)
            (m,) = q.receive(1)
            q.delete(m.receipt_handle)
        elif mode == "b10":
            q.send_batch([b"x" * 100] * 10)
            q.delete_batch([m.receipt_handle for m in q.receive(10)])
        else:
            q.send_batch([{"body": f"{i}-{k}", "group_id": f"g{k % 3}"} for k in range(10)])
            got = 0
            while got < 10:
                ms = q.receive(10)
                got += len(ms)
                q.delete_batch([m.receipt_handle for m in ms])
    reg.close()


def instructions(tree: str, n: int, mode: str) -> int:
    # one hash seed for every run: string hashing decides dict probes, and a random
    # seed per run moved a difference of two runs by a few per cent
    env = dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"))
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                            f"--cachegrind-out-file={d}/cg", sys.executable, os.path.abspath(__file__),
                            "--run", str(n), mode], env=env, capture_output=True, text=True, check=True)
    return int(re.search(r"I\s+refs:\s+([\d,]+)", p.stderr).group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-tree", help="a checkout of the base commit (PYTHONPATH for the base side)")
    ap.add_argument("--new-tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the new side (default: this tree)")
    ap.add_argument("--modes", default=",".join(MODES), help="of " + ",".join(MODES))
    ap.add_argument("--json", default="", help="write the figures here")
    ap.add_argument("--run", nargs=2, metavar=("N", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.run:
        run_cycles(int(a.run[0]), a.run[1])
        return
    sides = {"new": a.new_tree} if not a.base_tree else {"base": a.base_tree, "new": a.new_tree}
    out = {}
    for mode in a.modes.split(","):
        n1, n2, per = MODES[mode]
        out[mode] = {s: (instructions(t, n2, mode) - instructions(t, n1, mode)) / (n2 - n1) / per
                     for s, t in sides.items()}
    print("| operation | " + " | ".join(sides) + (" | change |" if len(sides) == 2 else " |"))
    print("|---|" + "---:|" * (len(sides) + (len(sides) == 2)))
    for mode, r in out.items():
        cells = [f"{r[s]:,.0f}" for s in sides]
        if len(sides) == 2:
            cells.append(f"{(r['new'] / r['base'] - 1) * 100:+.1f} %")
        print(f"| {LABELS[mode]} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
