"""A queue's lease-state log on a real full filesystem (a 3 MiB tmpfs, and a
btrfs subvolume under a spent quota: tests/conftest.py): deletes always have
room, whatever lease churn came first (vqs.broker.queue.lease_state: the deletes'
floor of the state log's reserve, and a full disk's compaction through
``snapshot.spare``), and a queue that crashed opens on a disk where neither its
snapshot nor its receipt-epoch record fits (it warns, naming the file)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess

import pytest
from disk_fill import drain_queue

import vqs
from vqs import DiskFullError
from vqs.record import decode_batch


def _sends_resume(q) -> None:
    """After space is freed: a send, its receive and its delete all work."""
    q.send(b"after")
    (m,) = q.receive(10)
    assert m.body == b"after"
    q.delete(m.receipt_handle)


CRASH = r"""
import os, signal, sys
import vqs
b = vqs.Broker(sys.argv[1])
q = b.create_queue("q")
q.send_batch([b"m%02d" % i for i in range(10)])
q.send_batch([b"m%02d" % i for i in range(10, 20)])
b.flush()
ms = q.receive(int(sys.argv[2]), visibility_timeout=600) if sys.argv[2] != "0" else []
q.flush()
print(len(ms), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _crash(python, env, path: str, receives: int) -> None:
    """A child makes the queue (20 messages, ``receives`` of them leased), then SIGKILLs itself."""
    p = subprocess.run([python, "-c", CRASH, path, str(receives)], env=env, capture_output=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode(errors="replace")[-2000:]
    assert p.stdout.strip() == str(receives).encode()


def _without_preallocation(state: str) -> None:
    """The state dir as a copy that keeps no preallocated blocks leaves it (a
    backup restored, or a data dir from before ``snapshot.spare``): the state
    log's segments are rewritten byte for byte and the spare is gone."""
    log = os.path.join(state, "log")
    for name in os.listdir(log):
        if name.endswith(".log"):
            p = os.path.join(log, name)
            with open(p, "rb") as f:
                data = f.read()
            os.unlink(p)
            with open(p, "wb") as f:
                f.write(data)
    spare = os.path.join(state, "snapshot.spare")
    if os.path.exists(spare):
        os.unlink(spare)


def test_a_crashed_queue_opens_when_neither_snapshot_nor_epoch_fits(small_disk, child_env, python, caplog):
    path = os.path.join(small_disk.path, "b")
    _crash(python, child_env, path, 5)
    state = os.path.join(path, "queues", "q", "state")
    _without_preallocation(state)
    small_disk.fill(1 << 20)
    small_disk.fill_rest()
    assert small_disk.is_full()
    with caplog.at_level(logging.WARNING, logger="vqs.broker.queue"):
        b = vqs.Broker(path)  # opens: the snapshot and the epoch record wait
    try:
        q = b.queue("q")
        assert q.counts() == {"visible": 15, "in_flight": 5, "delayed": 0}
        # Where not even the epoch record fitted, the open says so, naming the file.
        # (Not asserted that it happens: tmpfs takes the record in the state log's
        # last page, btrfs in the slack of its quota accounting.)
        waited = [r for r in caplog.records if "receipt epoch" in r.getMessage()]
        assert all(state in r.getMessage() for r in waited)
        small_disk.free()
        q.send(b"new")  # the epoch is written first (if it waited), then the message
        got = set(drain_queue(q, visibility_timeout=30))
        assert got == {b"m%02d" % i for i in range(5, 20)} | {b"new"}
    finally:
        b.close()
    with vqs.Broker(path) as b:
        q = b.queue("q")
        assert q.counts() == {"visible": 0, "in_flight": 5, "delayed": 0}


def test_sends_wait_for_the_epoch_an_open_on_a_full_disk_could_not_write(small_disk, child_env, python, caplog):
    """Deterministic on tmpfs: the crashed queue's state log is empty (no
    receive), so its epoch record needs a page the full disk does not have, and
    without a spare the snapshot cannot be written either. The queue opens
    (a warning names the file), refuses sends until the epoch is durable (a
    message must not reuse a lost offset before it is) and receives (no room
    for their leases: nothing is leased); once space is freed the epoch is
    written before the first send, and everything drains."""
    path = os.path.join(small_disk.path, "b")
    _crash(python, child_env, path, 0)
    state = os.path.join(path, "queues", "q", "state")
    _without_preallocation(state)
    small_disk.fill(1 << 20)
    small_disk.fill_rest()
    with caplog.at_level(logging.WARNING, logger="vqs.broker.queue"):
        b = vqs.Broker(path)
    try:
        q = b.queue("q")
        waited = [r.getMessage() for r in caplog.records if "receipt epoch" in r.getMessage()]
        assert len(waited) == 1 and state in waited[0], caplog.text
        assert q.counts() == {"visible": 20, "in_flight": 0, "delayed": 0}
        with pytest.raises(DiskFullError):
            q.send(b"new")
        with pytest.raises(DiskFullError):
            q.receive(10)
        assert q.counts() == {"visible": 20, "in_flight": 0, "delayed": 0}
        small_disk.free()
        q.send(b"new")
        got = drain_queue(q, batch=True)
        assert sorted(got) == sorted([b"m%02d" % i for i in range(20)] + [b"new"])
    finally:
        b.close()
    with open(os.path.join(state, "snapshot"), "rb") as f:
        meta = json.loads(decode_batch(f.read(), 0).value(0))
    assert meta["epochs"], meta  # the epoch is durable
    with vqs.Broker(path) as b:
        assert b.queue("q").counts() == {"visible": 0, "in_flight": 0, "delayed": 0}


CHURN_KILL = r"""
import os, random, signal, sys, threading
import vqs
path, filler, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
b = vqs.Broker(path)
q = b.create_queue("q", flush="always")
for i in range(150):
    q.send_batch([b"m%04d" % (i * 10 + k) for k in range(10)])
try:
    with open(filler, "wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()
except OSError:
    pass
print("full", flush=True)
threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
while True:
    ms = q.receive(10, visibility_timeout=600)
    if not ms:
        break
    for m in ms[:5]:
        for _ in range(20):
            try:
                q.change_visibility(m.receipt_handle, 600)
            except vqs.DiskFullError:
                break
    for m in ms:
        q.delete(m.receipt_handle)  # flush="always": fsynced when it returns
        print(m.body.decode(), flush=True)
print("drained", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


