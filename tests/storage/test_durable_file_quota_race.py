"""``atomic_write_reserved`` (vqs/storage/durable_file.py: a group commit's
replace of offsets.json) on a real spent btrfs quota (tests/conftest.py
``quota_disk``) when a concurrent step deletes the quota headroom's ballast
while the commit waits for it.

Found by the issue-13 judge (D8: `vqs serve --flush interval`, a topic filled
the quota, a group commit answered 507 in 1 of 3 runs): the server's log shows
the lease-state log's flusher deleting the only ballast ("so that writes into
reserved blocks go on") at 46.557 and the commit, which took 87 ms, refused at
46.640: it had met EDQUOT, waited for the headroom's lock while the other
thread deleted the ballast and committed (syncfs), then found none and gave up,
with the ballast's 256 KiB free. The interleaving is forced here (the other
step runs just before the commit looks for a ballast); now the commit sees a
ballast was spent meanwhile (``spends``) and tries again."""

from __future__ import annotations

import os

import vqs
from vqs.storage import durable_file
from vqs.storage.durable_file import atomic_write_reserved
from vqs.storage.quota_headroom import spend


def _spend_first(monkeypatch, logdir: str) -> list:
    """Force the race: the first time a step under test meets EDQUOT and asks for
    the headroom (``release_for``), a concurrent write of the log in ``logdir``
    spends the ballast just before. The list gets that spend's result."""
    real = durable_file.release_for
    raced: list = []

    def other_step_first(fd, nbytes, pos=None):
        if not raced:
            sfd = os.open(os.path.join(logdir, "00000000000000000000.log"), os.O_RDONLY)
            try:
                raced.append(spend(logdir, sfd, "a concurrent write goes on"))
            finally:
                os.close(sfd)
        return real(fd, nbytes, pos)

    monkeypatch.setattr(durable_file, "release_for", other_step_first)
    return raced


def test_a_commit_goes_on_when_a_concurrent_step_spent_the_ballast(quota_disk, monkeypatch):
    logdir = os.path.join(quota_disk.path, "log")
    log = vqs.Log.open(logdir, flush="interval")
    try:
        log.append(b"x" * 100)
        log.flush()  # its first reservation makes the ballasts
        group = os.path.join(quota_disk.path, "g")
        os.makedirs(group)
        target = os.path.join(group, "offsets.json")
        atomic_write_reserved(target, b'{"t": {"0": 0}}\n')  # the first commit, while there is room
        quota_disk.fill_rest()
        assert quota_disk.is_full()

        # the commit meets EDQUOT; meanwhile another thread's write spends the ballast
        raced = _spend_first(monkeypatch, logdir)
        atomic_write_reserved(target, b'{"t": {"0": 5}}\n')  # before: DiskFullError (no ballast left)
        assert raced == [True]
        with open(target, "rb") as f:
            assert f.read() == b'{"t": {"0": 5}}\n'
    finally:
        log.close()


def test_a_log_write_goes_on_when_a_concurrent_step_spent_the_ballast(quota_disk, monkeypatch):
    """The same race on a log's write into its reserved blocks (``write_all``):
    before, the acknowledged records' write raised (the log's write failed)."""
    a, b = os.path.join(quota_disk.path, "a"), os.path.join(quota_disk.path, "b")
    la = vqs.Log.open(a, flush="interval", flush_interval_ms=600_000)
    lb = vqs.Log.open(b, flush="interval", flush_interval_ms=600_000)
    try:
        la.append(b"a" * 100)
        lb.append(b"b" * 100)
        la.flush()
        lb.flush()
        quota_disk.fill_rest()
        assert quota_disk.is_full()
        for i in range(200):  # acknowledged: buffered, into blocks reserved before
            la.append(b"a%03d" % i + b"a" * 200)

        raced = _spend_first(monkeypatch, b)  # la's write meets EDQUOT; meanwhile lb's spends the ballast
        la.flush()  # before: DiskFullError, the write found no ballast left
        assert raced == [True]
    finally:
        lb.close()
        la.close()
    with vqs.Log.open(a) as la:
        assert [r.value[:4] for r in la.read(1, max_records=300)] == [b"a%03d" % i for i in range(200)]
