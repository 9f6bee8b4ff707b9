"""The in-memory tail of a standard queue: what this process sent and nobody has
received yet, kept as one entry per send call so that receive needn't read it
back from the log. Receives that take part of a send, span several sends, meet
messages with headers, expired ones, or sends that did not fit in the tail must
give what a log read gives."""

from __future__ import annotations

import pytest

from vqs.broker.queue import send_buffer as queue_mod
from vqs.broker.queue.message import message_ids as _message_ids
from vqs.broker.queue.registry import QueueRegistry


def _bodies(ms):
    return [m.body for m in ms]


def test_receives_take_parts_of_sends_and_span_them(reg):
    q = reg.create("q", visibility_timeout=60)
    ids = q.send_batch([b"a%d" % i for i in range(7)]) + q.send_batch([b"b%d" % i for i in range(7)])
    got = []
    for k in (3, 3, 5, 10):
        got += q.receive(k)
    assert _bodies(got) == [b"a%d" % i for i in range(7)] + [b"b%d" % i for i in range(7)]
    assert [m.id for m in got] == ids
    assert [m.offset for m in got] == list(range(14))
    assert all(m.receive_count == 1 for m in got)
    assert q.receive(10) == []
    q.delete_batch([m.receipt_handle for m in got[:10]])
    q.delete_batch([m.receipt_handle for m in got[10:]])
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}


def test_sends_with_headers_in_the_tail(reg):
    q = reg.create("q", visibility_timeout=60)
    entries = [b"p0", {"body": b"h1", "attributes": {"k": {"DataType": "String", "StringValue": "v"}}},
               b"p2", {"body": b"d3", "delay_seconds": 5}, b"p4"]
    q.send_batch(entries)
    q.send_batch([b"p5", b"p6"])
    first = q.receive(2)
    assert _bodies(first) == [b"p0", b"h1"]
    assert first[1].attributes == {"k": {"DataType": "String", "StringValue": "v"}}
    assert first[0].attributes == {}
    rest = q.receive(10)
    assert _bodies(rest) == [b"p2", b"p4", b"p5", b"p6"]  # d3 is delayed
    assert q.counts()["delayed"] == 1


def test_tail_messages_past_retention_are_deleted_not_delivered(reg, qclock):
    q = reg.create("q", retention_seconds=60)
    q.send_batch([b"old0", b"old1", b"old2"])
    q.receive(1)
    qclock.advance(61)
    q.send_batch([b"new0", b"new1"])
    ms = q.receive(10)
    assert _bodies(ms) == [b"new0", b"new1"]
    assert q.counts()["visible"] == 0


def test_leases_of_tail_messages_end_and_they_come_back(reg, qclock):
    q = reg.create("q", visibility_timeout=5)
    q.send_batch([b"x%d" % i for i in range(10)])
    first = q.receive(10)
    assert q.receive(10) == []
    qclock.advance(6)
    again = q.receive(10)
    assert _bodies(again) == _bodies(first)
    assert [m.receive_count for m in again] == [2] * 10
    q.delete_batch([m.receipt_handle for m in first[:5]])  # earlier handles delete too (SQS)
    assert q.counts()["in_flight"] == 5
    q.delete_batch([m.receipt_handle for m in again])
    assert q.counts()["in_flight"] == 0


def test_sends_beyond_the_tail_budget_are_read_from_the_log(reg, monkeypatch):
    monkeypatch.setattr(queue_mod, "TAIL_BYTES", 25)
    q = reg.create("q", visibility_timeout=60)
    for r in range(6):
        q.send_batch([b"m%d-%d" % (r, i) for i in range(5)])  # 20 bytes a send
    got = []
    while len(got) < 30:
        ms = q.receive(7)
        assert ms
        got += ms
    assert _bodies(got) == [b"m%d-%d" % (r, i) for r in range(6) for i in range(5)]
    assert [m.offset for m in got] == list(range(30))
    for i in range(0, 30, 10):
        q.delete_batch([m.receipt_handle for m in got[i:i + 10]])
    # once drained, the tail takes new sends again
    q.send_batch([b"z0", b"z1"])
    assert q._tail.entries
    assert _bodies(q.receive(10)) == [b"z0", b"z1"]


def test_reopen_forgets_the_tail_and_reads_the_log(tmp_path, qclock):
    reg = QueueRegistry(str(tmp_path / "queues"), clock=qclock)
    q = reg.create("q", visibility_timeout=60)
    q.send_batch([b"a", b"b", b"c"])
    assert _bodies(q.receive(1)) == [b"a"]
    reg.close()
    reg = QueueRegistry(str(tmp_path / "queues"), clock=qclock)
    try:
        q = reg.get("q")
        assert _bodies(q.receive(10)) == [b"b", b"c"]
    finally:
        reg.close()


@pytest.mark.parametrize("first,n", [(0, 10), (250, 10), (255, 1), (256, 10), (1000, 10),
                                     (100, 300), (2**40 - 3, 7), (2**52 - 5, 10)])
@pytest.mark.parametrize("base", [0, 0x5A3C_1F2E_7700])
def test_message_ids(first, n, base):
    p = "01234567-89ab-4cde-8f01-"
    assert _message_ids(p, base, first, n) == [f"{p}{o + base:012x}" for o in range(first, first + n)]


def test_message_ids_are_not_a_counter_from_zero_and_stay_stable(tmp_path, qclock):
    """A new queue's first message id does not end in ...000000000000 (ids look
    random, like SQS's), ids of a batch are distinct, and a message keeps its id
    across receives and a reopen."""
    reg = QueueRegistry(str(tmp_path / "queues"), clock=qclock)
    q = reg.create("q", visibility_timeout=0)
    ids = q.send_batch([b"a", b"b", b"c"])
    assert len(set(ids)) == 3 and not ids[0].endswith("000000000000")
    assert [m.id for m in q.receive(10)] == ids
    reg.close()
    reg = QueueRegistry(str(tmp_path / "queues"), clock=qclock)
    try:
        assert [m.id for m in reg.get("q").receive(10)] == ids
    finally:
        reg.close()


# ------------------------------------------------ pushing pending sends to the log


def _sent_stamps_after_reopen(path, clock, n_expected):
    reg = QueueRegistry(path, clock=clock)
    try:
        q = reg.get("q")
        got = []
        while True:
            ms = q.receive(10)
            if not ms:
                break
            got += ms
        assert len(got) == n_expected
        return [(m.body, m.sent_timestamp_ms) for m in got]
    finally:
        reg.close()


@pytest.mark.parametrize("per_ms", [1, 3, 40, 200])
def test_pending_sends_keep_their_timestamps_in_the_log(tmp_path, qclock, per_ms):
    """Sends in the same ms form a run; a push writes long runs as one batch each
    (one timestamp, no per-record column), short ones as one batch with a
    timestamp per record. Either way each record keeps its send time."""
    path = str(tmp_path / "queues")
    reg = QueueRegistry(path, clock=qclock, defaults={"flush": "never"})
    q = reg.create("q")
    expected = []
    for i in range(600):
        if i and i % per_ms == 0:
            qclock.advance(0.001)
        body = b"m%d" % i
        q.send(body)
        expected.append((body, int(qclock.now * 1000)))
    assert q._sends.values  # still pending
    reg.close()  # pushes them
    assert _sent_stamps_after_reopen(path, qclock, 600) == expected


def test_a_failed_run_push_keeps_the_rest_pending(tmp_path, qclock, monkeypatch):
    path = str(tmp_path / "queues")
    reg = QueueRegistry(path, clock=qclock, defaults={"flush": "never"})
    q = reg.create("q")
    expected = []
    for i in range(400):
        if i and i % 100 == 0:
            qclock.advance(0.005)
        q.send(b"m%d" % i)
        expected.append((b"m%d" % i, int(qclock.now * 1000)))
    log = q._log
    real = type(log).append_batch  # Log has __slots__: patch the class, act on this log only
    calls = []

    def flaky(self, values, **kw):
        if self is log:
            calls.append(len(values))
            if len(calls) == 3:
                raise OSError("disk full (injected)")
        return real(self, values, **kw)

    monkeypatch.setattr(type(log), "append_batch", flaky)
    with pytest.raises(OSError):
        with q._lock:
            q._push_locked()
    assert calls == [100, 100, 100]
    assert len(q._sends.values) == 200 and q._log.end_offset == 200  # two runs written, two pending
    assert q._sends.error is not None
    monkeypatch.setattr(type(log), "append_batch", real)
    q.send(b"late")  # retries the push first
    assert q._sends.error is None and q._log.end_offset == 400 and len(q._sends.values) == 1
    expected.append((b"late", int(qclock.now * 1000)))
    reg.close()
    assert _sent_stamps_after_reopen(path, qclock, 401) == expected


@pytest.mark.parametrize("flush", ["interval", "always"])
def test_the_tail_is_out_of_the_collectors_sight(tmp_path, flush):
    """The tail holds every unreceived message this process sent: as tracked
    containers (a list per send) a full collection walked them all, and in the
    server each one paused the event loop (170,000 queued sends: up to ~130 ms,
    the queue and SQS sends' p99). Its entries are all tuples, ints and bytes,
    which the collector stops tracking: sending adds no tracked object."""
    import gc

    import vqs

    b = vqs.Broker(str(tmp_path), flush=flush)
    try:
        q = b.create_queue("q")
        q.send(b"warm")
        def containers():  # what the tail's entries were made of (a cache of Records is not the tail)
            gc.collect()
            return sum(type(o) in (list, tuple) for o in gc.get_objects())

        before = containers()
        for i in range(3000):
            q.send(b"m%d" % i)
        for i in range(300):
            q.send_batch([b"b%d-%d" % (i, k) for k in range(5)])
        assert containers() - before < 1000  # (3,300 send calls: 6,600 before)
        got = []
        while len(got) < 4501:
            ms = q.receive(10)
            assert ms
            got += ms
        assert _bodies(got) == ([b"warm"] + [b"m%d" % i for i in range(3000)]
                                + [b"b%d-%d" % (i, k) for i in range(300) for k in range(5)])
    finally:
        b.close()
