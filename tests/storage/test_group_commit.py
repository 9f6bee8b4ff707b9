"""flush="always" with many threads: group commit.

Each test wraps ``os.fsync`` only to *observe* it (the real fsync still runs):
what we check is that an append never returns before an fsync that started
after its bytes were written, that threads really share fsyncs, and that a
failed fsync or a close wakes every waiting thread instead of hanging it.
"""
from __future__ import annotations

import os
import threading
import time

import pytest

from vqs import Log, LogClosedError, VQSError
from vqs.record import HEADER
from vqs.storage.segment import LOG_SUFFIX

THREADS = 8
PER_THREAD = 150


def batch_ends(seg_path: str) -> list[tuple[int, int, int]]:
    """(base_offset, record_count, end_position) of every batch in a segment file."""
    out = []
    with open(seg_path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + HEADER.size <= len(data):
        h = HEADER.unpack_from(data, pos)
        end = pos + h[1] + 12
        out.append((h[0], h[6], end))
        pos = end
    return out


def only_segment(d: str) -> str:
    (name,) = [n for n in os.listdir(d) if n.endswith(LOG_SUFFIX)]
    return os.path.join(d, name)


def test_every_append_returns_after_an_fsync_that_covers_it(tmp_path, fsyncs):
    d = str(tmp_path / "log")
    acks: list[tuple[int, int]] = []  # (offset, bytes covered by fsync when append returned)
    acks_lock = threading.Lock()
    with Log.open(d, flush="always", segment_bytes=1 << 30) as lg:
        ino = os.stat(only_segment(d)).st_ino
        start = threading.Barrier(THREADS)

        def worker(t: int) -> None:
            start.wait()
            for i in range(PER_THREAD):
                if i % 10 == 9:
                    off = lg.append_batch([b"b%d-%d" % (t, i), b"c%d-%d" % (t, i)])
                else:
                    off = lg.append(b"v%d-%d" % (t, i))
                covered = fsyncs.covered(ino)
                with acks_lock:
                    acks.append((off, covered))

        ts = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
            assert not t.is_alive(), "an appender hung"
        end = lg.end_offset
        calls = fsyncs.calls
    assert end == THREADS * PER_THREAD + THREADS * (PER_THREAD // 10)
    end_of = {}
    for base, count, pos_end in batch_ends(only_segment(d)):
        for o in range(base, base + count):
            end_of[o] = pos_end
    assert sorted(end_of) == list(range(end))
    for off, covered in acks:
        assert end_of[off] <= covered, f"append of offset {off} returned before an fsync covered it"
    # Group commit: the threads shared fsyncs (one per append would be
    # THREADS * PER_THREAD calls; on any machine some must overlap).
    assert calls < len(acks), (calls, len(acks))


def test_a_single_thread_never_waits_for_company(tmp_path, fsyncs):
    d = str(tmp_path / "log")
    with Log.open(d, flush="always") as lg:
        before = fsyncs.calls
        for i in range(50):
            lg.append(b"x%d" % i)
        # one fsync per append: nobody else could have joined its group
        assert fsyncs.calls - before == 50


def test_a_failed_fsync_wakes_every_waiting_thread_with_an_error(tmp_path, fsyncs):
    d = str(tmp_path / "log")
    lg = Log.open(d, flush="always")
    fsyncs.fail_after = fsyncs.calls + 20
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            for i in range(10_000):
                lg.append(b"v%d" % i)
        except VQSError as e:
            with lock:
                errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
        assert not t.is_alive(), "a thread waiting for the failed group hung"
    assert len(errors) == THREADS
    assert any("fsync" in str(e) and "injected" in str(e) for e in errors)
    with pytest.raises(VQSError, match="failed earlier"):
        lg.append(b"after")
    lg.close()


def test_close_releases_threads_waiting_for_their_group(tmp_path):
    d = str(tmp_path / "log")
    lg = Log.open(d, flush="always")
    acked: list[list[int]] = [[] for _ in range(THREADS)]
    outcome: list[str] = []
    going = threading.Event()

    def worker(t: int) -> None:
        try:
            while True:
                acked[t].append(lg.append(b"t%d-%d" % (t, len(acked[t]))))
                going.set()
        except LogClosedError:
            outcome.append("closed")

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in ts:
        t.start()
    assert going.wait(30)
    lg.close()
    for t in ts:
        t.join(30)
        assert not t.is_alive(), "an appender hung across close()"
    assert outcome == ["closed"] * THREADS
    with Log.open(d) as again:
        for t in range(THREADS):
            for i, off in enumerate(acked[t]):
                (r,) = again.read(off, max_records=1)
                assert bytes(r.value) == b"t%d-%d" % (t, i)


def test_flush_between_hand_over_and_wake_up_never_strands_the_next_leader(tmp_path, monkeypatch):
    """A flush() may make a waiter's records durable after the group's leader
    handed it the leadership but before it woke; it must still lead, or every
    later appender waits forever. Each waiter here runs flush() the moment it
    wakes, so that interleaving happens on every hand-over."""
    import vqs.storage.group_commit as group_commit_mod

    d = str(tmp_path / "log")
    lg = Log.open(d, flush="always")
    real_allocate = group_commit_mod._allocate_lock

    class FlushOnWake:
        def __init__(self):
            self.lock = real_allocate()
            self.held = False

        def acquire(self, *args):
            got = self.lock.acquire(*args)
            if not self.held:
                self.held = True  # taken at registration, under the log's lock
            elif got and not lg.closed:
                lg.flush()  # woken: the waiter's thread flushes first
            return got

        def release(self):
            self.lock.release()

    monkeypatch.setattr(group_commit_mod, "_allocate_lock", FlushOnWake)

    def worker(t: int) -> None:
        for i in range(PER_THREAD):
            lg.append(b"%d-%d" % (t, i))

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in ts:
        t.start()
    deadline = time.monotonic() + 30
    for t in ts:
        t.join(max(0.0, deadline - time.monotonic()))
    stranded = sum(t.is_alive() for t in ts)
    lg.close()  # releases stranded waiters, if any, so the test ends
    assert stranded == 0, f"{stranded} appenders stranded without a leader"
    assert lg.end_offset == THREADS * PER_THREAD
