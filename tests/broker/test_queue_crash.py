"""kill -9 of a process using a durable queue (flush="always"): after reopening, no
acknowledged send is lost, no acknowledged delete comes back, and no message
comes back before the end of an acknowledged lease."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from vqs.broker.queue.registry import QueueRegistry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import os, random, sys, time
from vqs.broker.queue.registry import QueueRegistry
reg = QueueRegistry(sys.argv[1], defaults={"flush": "always"})
if sys.argv[2] == "fifo":
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True)
else:
    q = reg.create("q")
rnd = random.Random(int(sys.argv[3]))
out = sys.stdout
n = 0
fifo = sys.argv[2] == "fifo"
print("READY", flush=True)
while True:
    k = rnd.randint(1, 10)
    bodies = ["%sb%d" % (sys.argv[4], n + i) for i in range(k)]
    n += k
    if fifo:
        q.send_batch([{"body": b, "group_id": "g%d" % (len(b) % 3)} for b in bodies])
    else:
        q.send_batch(bodies)
    out.write("".join("S %s\n" % b for b in bodies)); out.flush()
    vis = rnd.choice([30, 3600] if fifo else [0, 1, 3600])
    ms = q.receive(10, visibility_timeout=vis)
    now_ms = int(time.time() * 1000)
    out.write("".join("L %s %d\n" % (m.text, now_ms + vis * 1000) for m in ms)); out.flush()
    dels = [m for m in ms if rnd.random() < 0.7]
    if dels:
        out.write("".join("X %s\n" % m.text for m in dels)); out.flush()  # about to delete
        q.delete_batch([m.receipt_handle for m in dels])
        out.write("".join("D %s\n" % m.text for m in dels)); out.flush()
"""


def _run_and_kill(data: str, kind: str, seed: int, run_for: float, prefix: str = "") -> list[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, "-c", CHILD, data, kind, str(seed), prefix or "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        first = p.stdout.readline()
        if first != b"READY\n":
            p.wait(10)
            raise AssertionError(f"child failed: {first!r} {p.stderr.read().decode(errors='replace')}")
        time.sleep(run_for)
    finally:
        p.send_signal(signal.SIGKILL)
        # read through the same buffered reader as readline above (communicate()
        # would read the raw pipe and drop what readline already buffered)
        out = p.stdout.read()
        err = p.stderr.read()
        p.wait()
    assert p.returncode == -signal.SIGKILL, err.decode(errors="replace")
    text = out.decode()
    lines = text.split("\n")
    return lines[:-1]  # the last piece may be a partial line (written, not acknowledged)


def _check(data: str, lines: list[str], fifo: bool) -> tuple[int, int]:
    sent, deleted, lease_end, deleting = set(), set(), {}, set()
    for ln in lines:
        parts = ln.split()
        if parts[0] == "S":
            sent.add(parts[1])
        elif parts[0] == "D":
            deleted.add(parts[1])
        elif parts[0] == "X":
            deleting.add(parts[1])  # a delete in progress when killed may have happened
        elif parts[0] == "L":
            lease_end[parts[1]] = int(parts[2])
    assert sent, "the child acknowledged nothing"
    # 1. now: nothing may come back before its acknowledged lease ends
    name = "q.fifo" if fifo else "q"
    reg = QueueRegistry(data)
    q = reg.get(name)
    now_ms = int(time.time() * 1000)
    early = []
    while True:
        ms = q.receive(10, visibility_timeout=43200)
        if not ms:
            break
        for m in ms:
            b = m.text
            assert b not in deleted, f"acknowledged delete of {b} came back"
            if lease_end.get(b, 0) > now_ms + 1000:  # 1 s of slack for the clocks of two processes
                early.append(b)
    assert not early, f"leased messages came back before their lease ended: {early[:5]}"
    reg.close()
    # 2. later (every lease over): every acknowledged send not deleted is there
    reg = QueueRegistry(data, clock=lambda: time.time() + 2 * 86400)
    q = reg.get(name)
    present = []
    while True:
        ms = q.receive(10, visibility_timeout=43200)
        if not ms:
            break
        present += [m.text for m in ms]
        if fifo:
            q.delete_batch([m.receipt_handle for m in ms])  # unlock the groups
    reg.close()
    lost = sent - deleted - deleting - set(present)
    assert not lost, f"{len(lost)} acknowledged sends lost, e.g. {sorted(lost)[:5]}"
    back = deleted & set(present)
    assert not back, f"acknowledged deletes came back: {sorted(back)[:5]}"
    return len(sent), len(deleted)


@pytest.mark.parametrize("kind", ["standard", "fifo"])
def test_kill9_loses_no_acknowledged_send_or_delete(tmp_path, kind):
    rnd = random.Random(7)
    total = 0
    for cycle in range(2):
        data = str(tmp_path / f"{kind}{cycle}")
        lines = _run_and_kill(data, kind, rnd.randrange(1 << 30), rnd.uniform(0.5, 1.5))
        s, d = _check(data, lines, kind == "fifo")
        total += s
    assert total > 0


@pytest.mark.slow
def test_kill9_repeatedly_on_the_same_queue(tmp_path):
    """Kill the same queue's process again and again: each restart recovers torn
    tails of both logs and goes on; the guarantees hold across all runs."""
    data = str(tmp_path / "data")
    lines: list[str] = []
    rnd = random.Random(11)
    for run in range(5):
        lines += _run_and_kill(data, "standard", rnd.randrange(1 << 30), rnd.uniform(0.3, 1.0),
                               prefix=f"r{run}")
    _check(data, lines, False)
