"""A queue closed on a real full filesystem (tests/conftest.py ``full_disk``)
after its lease churn was refused: close() hands the lease-state log the records
it buffered, writes them into the space the log holds for them (Log.hold,
log_reserve.py), so it neither fails nor loses one; only the snapshot and
settings refresh fail (logged). Every file and lock is released, so the same
process opens the broker again at once (no LogLockedError naming itself), with
every acknowledged delete and lease, and once space is freed the queue is
served.

Before the reservation (s13-reserve) the state log buffered records on a full
disk and close() failed to push them; 4bed527 made close() release the log
even then. That case no longer arises from a full disk: a record the log cannot
cover is refused when appended (the churn below), never at close, so this
test no longer exercises that try/finally (it fails instead if the held space
does not back the buffered records: close() raises, or a delete is lost).
Under a spent btrfs quota too: there the writes into the state log's
reserved blocks (the churn's receives and deletes, close's held records)
need the quota headroom (vqs/storage/quota_headroom.py), else close() raises
EDQUOT. It also checks the lease invariant across the reopen: in flight are exactly
the leases acknowledged and not released (a refused receive leases nothing)."""

from __future__ import annotations

import contextlib
import os

import vqs
from vqs import DiskFullError


def _churn_until_refused(q) -> set:
    """Lease churn until the state log cannot hold another record (or 3,000
    rounds: on a full disk its compaction may give the space back, s13-state);
    returns the handles whose lease was acknowledged (receive returned) and not
    released."""
    leased: set = set()
    with contextlib.suppress(DiskFullError):
        for _ in range(3_000):
            ms = q.receive(10, visibility_timeout=30)
            leased.update(m.receipt_handle for m in ms)
            for m in ms:
                q.change_visibility(m.receipt_handle, 0)
                leased.discard(m.receipt_handle)
    return leased


def test_close_on_a_full_disk_writes_the_held_state_records_and_releases_the_state_log(full_disk):
    small_disk = full_disk  # a 3 MiB tmpfs (ENOSPC), and btrfs under a spent 3 MiB quota (EDQUOT)
    n = 1000
    path = os.path.join(small_disk.path, "b")
    b = vqs.Broker(path)
    q = b.create_queue("q")
    for i in range(n):
        q.send(b"m%03d" % (i % 1000))
    b.flush()
    small_disk.fill(1 << 20)
    small_disk.fill_rest()
    # Lease churn until the state log cannot hold another record: its space
    # ahead is spent, and the last records wait in its buffer, in space it holds
    # for them. One delete per receive, so a lost record shows (a message back).
    leased: set = set()
    deleted = 0
    with contextlib.suppress(DiskFullError):  # (or none refused: compaction, s13-state)
        for _ in range(n):
            ms = q.receive(10, visibility_timeout=30)
            leased.update(m.receipt_handle for m in ms)
            for i, m in enumerate(ms):
                if i == 0:
                    q.delete(m.receipt_handle)
                    deleted += 1
                else:
                    q.change_visibility(m.receipt_handle, 0)
                leased.discard(m.receipt_handle)
    assert 0 < deleted <= n
    b.close()  # the held records are written; the snapshot refresh fails (a warning)
    with vqs.Broker(path) as b:  # the same process: every lock was released
        q = b.queue("q")
        c = q.counts()
        # every acknowledged delete is on disk (a lost one brings its message back)
        assert c["visible"] + c["in_flight"] == n - deleted, (c, deleted)
        # Invariant: a message is in flight after the reopen iff a receive that
        # returned leased it and nothing released it since; a refused receive
        # leaves no lease record (it holds the space for its records before it
        # leases: LeaseState.room_for, 874f3c2). Before that, the refused
        # receive's run record reached the buffer ahead of its refused lease
        # record, and its message was in flight here (31 of 40 runs).
        assert c["in_flight"] == len(leased), (c, leased)
    small_disk.free()
    with vqs.Broker(path) as b:
        q = b.queue("q")
        q.send(b"after")
        ms = q.receive(10)
        q.delete(ms[0].receipt_handle)


def test_a_refused_receive_leases_nothing(small_disk):
    path = os.path.join(small_disk.path, "b")
    with vqs.Broker(path) as b:
        q = b.create_queue("q")
        for i in range(100):
            q.send(b"m%03d" % i)
        b.flush()
        small_disk.fill(1 << 20)
        small_disk.fill_rest()
        leased = _churn_until_refused(q)
        c = q.counts()
        assert c["in_flight"] == len(leased), (c, len(leased))
