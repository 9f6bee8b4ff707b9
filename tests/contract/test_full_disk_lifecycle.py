"""The full-disk contract, stated once for every writer.

Fill until refused (DiskFullError), read and delete to drain, writes resume,
reopen: nothing acknowledged is lost, nothing refused is written later. Run
over {Log, topic, standard queue, FIFO queue, HybridQueue} x {always,
interval} x {ENOSPC, EDQUOT, EIO}, through the filesystem seam
(vqs.disk.fs; tests/fs_fault.py): a space fault gives the writer's directory a byte budget
that writes spend and unlinks give back (and that the space governor reads),
a failure fault fails a chosen write with EIO. Then a few runs on real small
filesystems (tmpfs; btrfs under a quota; xfs) and a SIGKILL.

What each phase checks:
- fill: the governor refuses data writes under ``min_free_bytes`` with
  DiskFullError (soft: the writer is not failed);
- drain: every acknowledged record is read back and deleted on the full
  disk (receives, deletes, commits are control writes), which gives the
  space back, and data writes resume by themselves;
- the kernel's ENOSPC/EDQUOT (another program took the room the governor
  counted on) is soft too: refused, then resumed once space is back;
- EIO latches (LogFailedError), and a reopen recovers what was durable;
- reopen: exactly the acknowledged records that were not deleted.
"""

from __future__ import annotations

import errno
import os
import queue
import signal
import subprocess
import textwrap

import fs_fault
import pytest

import vqs
from vqs import DiskFullError, HybridQueue, Log
from vqs.disk import default_min_free, space
from vqs.errors import LogFailedError, VQSError

FLOOR = 256 << 10     # min_free_bytes of every writer here
BUDGET = 1536 << 10   # what a space fault leaves for the writer's directory
BODY = b"v" * 1000


def _val(tag: str, i: int) -> bytes:
    return b"%s-%06d-" % (tag.encode(), i) + BODY


# ----------------------------------------------------------------- writers


class LogWriter:
    """A bare Log: append, read, delete_before."""

    def __init__(self, path, flush):
        self.path, self.flush = os.path.join(path, "log"), flush
        self.deleted = 0

    def open(self):
        self.lg = Log.open(self.path, flush=self.flush, min_free_bytes=FLOOR, segment_bytes=256 << 10)

    def write(self, v):
        self.lg.append(v)
        if self.flush == "always":
            return
        # interval: acknowledged once buffered (the governor counted its room)

    def sync(self):
        self.lg.flush()

    def drain(self) -> list:
        got = [r.value for r in self.lg.read(self.lg.start_offset, max_records=100_000, max_bytes=64 << 20)]
        self.lg.delete_before(self.lg.end_offset)
        return got

    def read_all(self) -> list:
        return [r.value for r in self.lg.read(self.lg.start_offset, max_records=100_000, max_bytes=64 << 20)]

    def close(self):
        self.lg.close()


class _BrokerWriter:
    def __init__(self, path, flush):
        self.path, self.flush = os.path.join(path, "b"), flush
        self.now = [1_800_000_000.0]

    def _broker(self):
        return vqs.Broker(self.path, flush=self.flush, min_free_bytes=FLOOR, segment_bytes=256 << 10,
                          clock=lambda: self.now[0])

    def sync(self):
        self.b.flush()

    def close(self):
        self.b.close()


class TopicWriter(_BrokerWriter):
    """A topic: produce; a consumer group reads and commits; retention deletes."""

    def open(self):
        self.b = self._broker()
        if "t" not in self.b.topics():
            self.b.create_topic("t", partitions=1, retention_ms=60_000)
        self.p = self.b.producer()
        self.c = self.b.consumer(["t"], group="g")

    def write(self, v):
        self.p.send("t", v)

    def read_all(self) -> list:
        out = [r.value for r in self.c.poll(10_000, timeout=2.0)]  # (the group's member: self.c)
        while recs := self.c.poll(10_000):
            out += [r.value for r in recs]
        return out

    def drain(self) -> list:
        out = []
        while recs := self.c.poll(10_000):
            out += [r.value for r in recs]
        self.c.commit()  # a control write, on the full disk
        self.now[0] += 120  # past retention: the space comes back by deleting segments
        self.b.apply_retention()
        return out

    def close(self):
        self.c.close()
        self.b.close()


class QueueWriter(_BrokerWriter):
    """A standard queue (FIFO: ``fifo=True``): send; receive and delete drain it."""

    fifo = False

    def open(self):
        self.b = self._broker()
        name = "q.fifo" if self.fifo else "q"
        try:
            self.q = self.b.queue(name)
        except VQSError:
            self.q = self.b.create_queue(name, **({"fifo": True, "content_based_deduplication": True}
                                                  if self.fifo else {}))

    def write(self, v):
        if self.fifo:
            self.q.send(v, group_id="g")
        else:
            self.q.send(v)

    def drain(self) -> list:
        got = []
        while ms := self.q.receive(10):
            got += [m.body for m in ms]
            for m in ms:
                self.q.delete(m.receipt_handle)  # one by one: each delete's room is what is checked
        self.now[0] += 600  # (FIFO: past the deduplication window, whose messages the log keeps)
        self.q.reclaim()
        return got

    def read_all(self) -> list:
        return self.drain()  # (FIFO: a group's next messages come once its received ones are deleted)


class FifoWriter(QueueWriter):
    fifo = True


class HybridWriter:
    """A HybridQueue spilling to disk (``always``: durable=True)."""

    def __init__(self, path, flush):
        self.path, self.durable = os.path.join(path, "h"), flush == "always"

    def open(self):
        self.h = HybridQueue(self.path, memory_items=4, durable=self.durable, serializer="raw",
                             min_free_bytes=FLOOR, segment_bytes=256 << 10)

    def write(self, v):
        try:
            self.h.put(v, block=False)
        except queue.Full as e:
            raise (e.__cause__ or e) from None

    def sync(self):
        pass  # (durable puts are fsynced; a spill is written at once)

    def drain(self) -> list:
        out = []
        while got := self.h.get_batch(1000, block=False):
            out += got
        return out

    read_all = drain

    def close(self):
        self.h.close()


WRITERS = {"log": LogWriter, "topic": TopicWriter, "queue": QueueWriter, "fifo": FifoWriter,
           "hybrid": HybridWriter}


@pytest.fixture
def seam(monkeypatch):
    # a governor of its own: what other tests' live logs and queues hold on this
    # filesystem does not count against the fault's budget
    monkeypatch.setattr(space, "_registry", {})
    yield fs_fault
    fs_fault.uninstall()


def _fill(w, tag: str, limit: int = 20_000, refused: list | None = None) -> list:
    """Write until refused: the refusal is DiskFullError; the acknowledged values
    (the refused one goes to ``refused``)."""
    acked = []
    with pytest.raises(DiskFullError):
        for i in range(limit):
            v = _val(tag, i)
            if refused is not None:
                refused.append(v)
            w.write(v)
            acked.append(v)
            if refused is not None:
                refused.pop()
    return acked


def _check(w, got: list, acked: list, refused: list) -> None:
    """``got`` is ``acked``, in order. A Log and a HybridQueue never write a
    refused record later; a topic or a queue (at least once, as Kafka and SQS)
    may: a write that raised DiskFullError can still be there, once, in its place."""
    if isinstance(w, (LogWriter, HybridWriter)):
        assert got == acked
        return
    assert [g for g in got if g not in refused] == acked
    assert len(got) == len(set(got))


def _reopen(w):
    try:
        w.close()
    except VQSError:
        pass  # (a close on a failed or full disk raises after releasing everything)
    w.open()


@pytest.mark.parametrize("flush", ["always", "interval"])
@pytest.mark.parametrize("kind", sorted(WRITERS))
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EDQUOT], ids=["ENOSPC", "EDQUOT"])
def test_fill_refuse_drain_resume_reopen(tmp_path, seam, kind, flush, err):
    d = str(tmp_path / "data")
    os.makedirs(d)
    w = WRITERS[kind](d, flush)
    # (before the open: the governor reads free space at most every 100 ms, and a
    # filesystem that shrinks at once would be seen that much later)
    fault = seam.install(seam.Fault.space(d, BUDGET, err))
    w.open()
    refused: list = []
    try:
        # fill: the governor refuses under min_free_bytes, softly
        acked = _fill(w, "a", refused=refused)
        assert len(acked) > 100
        # drain on the full disk: every acknowledged record, once, in order
        _check(w, w.drain(), acked, refused)
        # the space came back by unlinks: writes resume by themselves
        after = [_val("b", i) for i in range(50)]
        for v in after:
            w.write(v)
        w.sync()
        # the kernel finds no space (another program took it): soft, then resumed
        fault.free = 0
        with pytest.raises(DiskFullError):
            for i in range(200):
                v = _val("c", i)
                refused.append(v)
                w.write(v)
                after.append(v)  # acknowledged (interval: buffered, its room counted)
                refused.pop()
                w.sync()
        fault.give(BUDGET)
        v = _val("d", 0)
        w.write(v)
        after.append(v)
        w.sync()
    finally:
        seam.uninstall()
    # reopen: exactly what was acknowledged and not deleted
    _reopen(w)
    try:
        _check(w, w.read_all(), after, refused)
    finally:
        w.close()


@pytest.mark.parametrize("flush", ["always", "interval"])
@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_eio_latches_and_a_reopen_recovers(tmp_path, seam, kind, flush):
    d = str(tmp_path / "data")
    os.makedirs(d)
    w = WRITERS[kind](d, flush)
    w.open()
    durable = [_val("a", i) for i in range(30)]
    for v in durable:
        w.write(v)
    w.sync()
    seam.install(seam.Fault.fail(d, at=1, errno=errno.EIO))
    acked: list = []
    raised = None
    try:
        with pytest.raises(VQSError) as ei:
            for i in range(5_000):
                raised = v = _val("b", i)
                w.write(v)
                acked.append(v)
                raised = None
                w.sync()
        assert not isinstance(ei.value, DiskFullError)
        # latched: a failing device is not retried on every write
        with pytest.raises(VQSError):
            w.write(_val("c", 0))
            w.sync()
    finally:
        seam.uninstall()
    _reopen(w)
    try:
        got = w.read_all()
        # in order, no duplicates, nothing unknown: what was durable, then what was
        # acknowledged (and the write that raised: a failed fsync leaves its bytes)
        allowed = durable + acked + ([raised] if raised else [])
        assert len(got) == len(set(got))
        it = iter(allowed)
        assert all(g in it for g in got), "a record out of order or never written"
        if not (kind == "hybrid" and flush == "interval"):  # (its memory tier is written at close)
            assert got[:len(durable)] == durable
        if flush == "always" and kind != "hybrid":
            assert set(acked) <= set(got)
    finally:
        w.close()


def test_an_eio_log_reports_failed_and_an_enospc_one_does_not(tmp_path, seam):
    d = str(tmp_path / "log")
    lg = Log.open(d, flush="always", min_free_bytes=0)
    lg.append(b"x")
    seam.install(seam.Fault.space(d, 0))
    with pytest.raises(DiskFullError):
        lg.append(b"y")
    assert lg.failed is None and lg.disk_full
    seam.uninstall()
    assert lg.append(b"z") == 1 and not lg.disk_full
    seam.install(seam.Fault.fail(d))
    with pytest.raises(LogFailedError):
        lg.append(b"w")
    assert lg.failed is not None
    seam.uninstall()
    with pytest.raises(LogFailedError):
        lg.append(b"v")
    lg.close()


# ------------------------------------------------------- real filesystems


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_real_full_tmpfs(small_disk, kind):
    """A 3 MiB tmpfs, the governor's default floor (5 % of it): fill, drain, resume, reopen."""
    w = WRITERS[kind](small_disk.path, "always")
    if kind == "log":
        w.open = lambda: setattr(w, "lg", Log.open(w.path, flush="always", segment_bytes=256 << 10))
    w.open()
    try:
        acked = _fill(w, "a")
        assert w.drain() == acked
        after = [_val("b", i) for i in range(100)]
        for v in after:
            w.write(v)
    finally:
        _reopen(w)
    try:
        assert w.read_all() == after
    finally:
        w.close()


def test_a_real_spent_btrfs_quota(quota_disk):
    """EDQUOT from a real btrfs quota group: the governor reads the quota's room."""
    path = os.path.join(quota_disk.path, "q")
    w = LogWriter(path, "interval")
    w.open()
    try:
        acked = _fill(w, "a")
        assert w.drain() == acked
        for i in range(100):
            w.write(_val("b", i))
    finally:
        _reopen(w)
    try:
        assert w.read_all() == [_val("b", i) for i in range(100)]
    finally:
        w.close()


def test_a_real_full_xfs(xfs_disk):
    path = os.path.join(xfs_disk.path, "log")
    lg = Log.open(path, flush="interval", segment_bytes=256 << 10, min_free_bytes=FLOOR)
    try:
        acked = _fill(type("W", (), {"write": lambda self, v: lg.append(v)})(), "a")
        assert [r.value for r in lg.read(0, max_records=100_000, max_bytes=64 << 20)] == acked
        lg.delete_before(lg.end_offset)
        for i in range(100):
            lg.append(_val("b", i))
    finally:
        lg.close()
    with Log.open(path) as lg:
        assert [r.value for r in lg.read(lg.start_offset, max_records=1000)] == [_val("b", i) for i in range(100)]


def test_a_sigkill_on_a_full_disk_loses_nothing_acknowledged(small_disk, python, child_env):
    """A queue filled until refused, then SIGKILLed: every acknowledged send is
    there after the restart, and the queue drains and takes sends again."""
    path = os.path.join(small_disk.path, "b")
    script = textwrap.dedent(f"""
        import os, signal, sys, vqs
        b = vqs.Broker({path!r}, flush="always")
        q = b.create_queue("q")
        n = 0
        try:
            while True:
                q.send(b"%06d" % n + b"v" * 1000)
                n += 1
        except vqs.DiskFullError:
            pass
        print(n, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run([python, "-c", script], env=child_env, capture_output=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr.decode()[-2000:]
    n = int(r.stdout.split()[0])
    assert n > 100
    with vqs.Broker(path, flush="always") as b:
        q = b.queue("q")
        w = QueueWriter.__new__(QueueWriter)
        w.q, w.fifo, w.now = q, False, [0.0]
        got = w.drain()
        assert [g[:6] for g in got] == [b"%06d" % i for i in range(n)]
        for i in range(100):
            q.send(b"again %d" % i)


def test_files_earlier_versions_kept_for_a_full_disk_are_removed_at_open(tmp_path):
    d = str(tmp_path / "log")
    with Log.open(d) as lg:
        lg.append(b"x")
    for name in (".segment-spare", "quota-headroom", "quota-headroom.reclaim"):
        open(os.path.join(d, name), "wb").close()
    with Log.open(d) as lg:
        assert lg.read(0)[0].value == b"x"
    assert sorted(n for n in os.listdir(d) if not n.startswith("0000")) == [".clean-shutdown", ".lock",
                                                                           "log.checkpoint"]


def test_the_default_floor_scales_with_the_filesystem():
    assert default_min_free(3 << 20) == (3 << 20) // 20  # a small disk keeps most of itself
    assert default_min_free(1 << 40) == 64 << 20  # a large one: 64 MiB
