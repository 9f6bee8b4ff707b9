"""A queue keeps no per-message state for messages it deleted: send/receive/delete
cycles with a long visibility timeout leave the lease table (``live``, the
timer heap, the issued-handle cache) bounded, before any lease would have ended
(the soak's RSS growth: a timer per receive kept for the 300 s visibility
timeout, bench/RESULTS.md). Leases still in flight keep their timers through
the tidying and come back when they end."""

from __future__ import annotations

from vqs.broker.queue.leases import LeaseTable

CYCLES = 3_000  # receive calls: each pushes a timer; the heap is tidied past 4,096 stale ones


def _bounded(lt: LeaseTable, tracked: int) -> None:
    assert len(lt.live) == tracked
    # tidied at the receive, while up to 10 more were in flight (then deleted)
    assert len(lt.timers) <= 2 * (tracked + 10) + 4096
    assert len(lt.issued) <= 4 * lt.n_inflight + 65536


def test_standard_cycles_leave_no_state(reg):
    q = reg.create("q", visibility_timeout=300)
    lt = q._leases
    for i in range(CYCLES):
        q.send_batch([b"m%d-%d" % (i, j) for j in range(3)])
        ms = q.receive(10)
        assert len(ms) == 3
        q.delete_batch([m.receipt_handle for m in ms])
        # the single-message paths too: delete, and a change of visibility first
        q.send(b"one")
        (m,) = q.receive(1)
        q.change_visibility(m.receipt_handle, 200)
        q.delete(m.receipt_handle)
        _bounded(lt, 0)
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}


def test_fifo_cycles_leave_no_state(reg):
    q = reg.create("q.fifo", fifo=True, visibility_timeout=300, content_based_deduplication=True)
    lt = q._leases
    for i in range(CYCLES // 2):
        q.send_batch([{"body": b"m%d-%d" % (i, j), "group_id": "g%d" % j} for j in range(3)])
        ms = q.receive(10)
        assert len(ms) == 3
        q.delete_batch([m.receipt_handle for m in ms])
        _bounded(lt, 0)
    assert q.counts()["in_flight"] == 0


def test_tidying_keeps_the_leases_in_flight_and_delays(reg, qclock):
    q = reg.create("q", visibility_timeout=300)
    lt = q._leases
    q.send_batch([b"kept0", b"kept1"])
    kept = q.receive(2)
    q.send(b"late", delay_seconds=900)
    for i in range(CYCLES):
        q.send(b"x%d" % i)
        (m,) = q.receive(1)
        q.delete(m.receipt_handle)
        _bounded(lt, 3)  # the two in flight and the delayed one
    assert q.counts() == {"visible": 0, "in_flight": 2, "delayed": 1}
    qclock.advance(301)
    again = q.receive(10)
    assert sorted(m.body for m in again) == [b"kept0", b"kept1"]
    assert all(m.receive_count == 2 for m in again)
    q.delete_batch([m.receipt_handle for m in again + kept])
    qclock.advance(600)
    (late,) = q.receive(10)
    assert late.body == b"late"
    q.delete(late.receipt_handle)
    _bounded(lt, 0)
    assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
