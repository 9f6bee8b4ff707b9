"""Dead-letter moves on a real full filesystem (a 3 MiB tmpfs: ENOSPC, and a
btrfs subvolume under a quota: EDQUOT; tests/conftest.py ``full_disk``).

A receive that meets messages past ``max_receive_count`` moves them to the
dead-letter queue; on a full disk each message is moved once or not at all
(redrive.py): the DLQ takes what the space it reserved covers, those leave
the source, the rest stay in the source (counted, visible again after that
receive, never delivered past the limit), and the moves go on once space is
freed. Across the source and the DLQ every message is held exactly once, in
memory and after a reopen (on the full disk, and after freeing it)."""

from __future__ import annotations

import collections
import signal
import subprocess

import vqs

N = 120
BODY = b"p" * 2000


def _held(b) -> tuple[collections.Counter, set]:
    """How often each message is held across q and dlq (peeked: nothing
    changes), and which are MOVING in q: taken by a DLQ that could not fsync
    them yet (btrfs: copy-on-write needs space even where the log reserved
    it); those stay in q, not deleted, and are counted where the DLQ holds them."""
    c: collections.Counter = collections.Counter()
    moving = set()
    for name in ("q", "dlq"):
        qq = b.queue(name)
        frm = 0
        while True:
            ps = qq.peek(100, from_offset=frm)
            if not ps:
                break
            for p in ps:
                assert p.state in ("visible", "moving")
                if p.state == "moving":
                    moving.add(p.message.body[:4])
                else:
                    c[p.message.body[:4]] += 1
            frm = ps[-1].message.offset + 1
    return c, moving


def _once(b, ids: set) -> set:
    """Assert each message is held exactly once; return the parked ones (``_held``)."""
    held, moving = _held(b)
    assert held == collections.Counter(dict.fromkeys(ids, 1))
    q, dlq = b.queue("q").counts(), b.queue("dlq").counts()
    assert q["delayed"] == dlq["in_flight"] == dlq["delayed"] == 0 and q["in_flight"] == len(moving)
    assert q["visible"] + dlq["visible"] == len(ids)
    return moving


def _setup(path: str, flush: str = "interval", **kw):
    b = vqs.Broker(path)
    dlq = b.create_queue("dlq", flush=flush, **kw)
    q = b.create_queue("q", max_receive_count=1, dead_letter_queue="dlq", flush=flush, **kw)
    for i in range(N):
        q.send(b"%04d" % i + BODY)
    handles = []  # every message received once
    while len(handles) < N:
        handles += [m.receipt_handle for m in q.receive(10, visibility_timeout=600)]
    return b, q, dlq, handles


def _finish(path: str, ids: set) -> None:
    """Reopen with space: the moves go on; then each message is in the DLQ once."""
    with vqs.Broker(path) as b:
        assert b.queue("q").receive(10, visibility_timeout=0) == []
        assert _once(b, ids) == set() and b.queue("dlq").counts()["visible"] == N
    with vqs.Broker(path) as b:
        assert _once(b, ids) == set() and b.queue("q").counts()["visible"] == 0
        assert {m.source_queue for m in b.queue("dlq").receive(10)} == {"q"}


_CRASH = """
import os, signal, sys
import vqs
b = vqs.Broker(sys.argv[1])
dlq = b.create_queue("dlq", flush_interval_ms=60_000)
q = b.create_queue("q", max_receive_count=1, dead_letter_queue="dlq", flush_interval_ms=60_000)
for i in range(%d):
    q.send(b"%%04d" %% i + b"p" * 2000)
got = 0
while got < %d:
    got += len(q.receive(10, visibility_timeout=0))
b.flush()  # the sends and their first deliveries are on disk
assert q.receive(10) == []  # every message moved: in the DLQ (fsynced), its delete buffered here
assert dlq.counts()["visible"] == %d
os.kill(os.getpid(), signal.SIGKILL)  # before the interval writes the deletes
""" % (N, N, N)


def test_a_move_interrupted_by_sigkill_is_finished_not_repeated(tmp_path, python, child_env):
    # The move intent (fsynced before the DLQ append) survives; the last
    # batch's deletes that followed did not: at the next move each of those is
    # found in the DLQ by its id and only deleted here (before: appended again)
    path = str(tmp_path / "b")
    r = subprocess.run([python, "-c", _CRASH, path], env=child_env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == -signal.SIGKILL, r.stderr
    ids = {b"%04d" % i for i in range(N)}
    with vqs.Broker(path) as b:
        held, moving = _held(b)  # the last batch in both queues now, until the next move
        assert not moving and set(held) == ids and set(held.values()) == {1, 2}
        twice = {int(k) for k, v in held.items() if v == 2}  # (offset = number: sent in order)
        assert twice <= set(b.queue("q")._mover.intents)  # their intents replayed (white box)
    _finish(path, ids)


_REFUSED_THEN_KILLED = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
import vqs
from conftest import SmallDisk
b = vqs.Broker(sys.argv[1])
dlq = b.create_queue("dlq")
q = b.create_queue("q", max_receive_count=1, dead_letter_queue="dlq")
for i in range(%d):
    q.send(b"%%04d" %% i + b"p" * 2000)
handles = []
while len(handles) < %d:
    handles += [m.receipt_handle for m in q.receive(10, visibility_timeout=600)]
b.flush()
SmallDisk(os.path.dirname(sys.argv[1])).fill_rest()
for h in handles:
    q.change_visibility(h, 0)
assert q.receive(10) == []  # every move refused by the DLQ, after its intent was written
assert q.counts()["visible"] == %d and dlq.counts()["visible"] == 0, (q.counts(), dlq.counts())
os.kill(os.getpid(), signal.SIGKILL)
""" % (N, N, N)


