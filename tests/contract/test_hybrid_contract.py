"""The HybridQueue contract: one set of queue.Queue rules, run against every tier.

Tiers (conftest.py ``HYBRID_TIERS``): ``memory`` (everything fits the memory
budget), ``overflow`` (a 3-item budget: the rest goes to the disk log) and
``durable`` (every put written and fsynced). Where the tiers differ is only
where an item waits; what a caller sees must be the same, and each test names
the rule it checks. ``test_each_tier_is_what_it_claims`` guards the others: a
tier that silently stopped spilling would make them test the memory tier only.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest

from vqs.errors import LogClosedError


def drain(q) -> list:
    out = []
    while got := q.get_batch(1000, block=False):
        out += got
    return out


def test_each_tier_is_what_it_claims(hybrid):
    q = hybrid.open()
    for i in range(10):
        q.put(i)
    m = q.metrics
    if hybrid.tier == "memory":
        assert (m.spilled, m.disk_writes, m.disk_items, m.memory_items) == (0, 0, 0, 10)
    elif hybrid.tier == "overflow":
        assert m.spilled >= 7 and m.memory_items <= 3 and m.disk_items == m.spilled and not m.durable
    else:
        # memory_items here is the read cache of items already on disk
        assert m.durable and m.spilled == 0 and m.disk_writes == 10 and m.disk_items == 10
    assert m.puts == 10 and q.qsize() == 10


def test_items_come_out_in_put_order_across_tiers(hybrid):
    q = hybrid.open()
    for i in range(20):
        q.put(i)
    assert [q.get() for _ in range(5)] == [0, 1, 2, 3, 4]
    for i in range(20, 30):  # new items queue behind everything already waiting
        q.put(i)
    q.put_batch(range(30, 40))
    assert q.get_nowait() == 5
    assert drain(q) == list(range(6, 40))


def test_a_got_item_equals_the_put_item(hybrid):
    q = hybrid.open()
    items = [{"a": [1, 2]}, (1, "x"), b"\x00bytes", "text", None, 3.5, [{"deep": {"n": 1}}]]
    for it in items:
        q.put(it)
    assert [q.get() for _ in items] == items


def test_qsize_and_empty_count_both_tiers(hybrid):
    q = hybrid.open()
    assert q.qsize() == 0 and q.empty() and not q.full()
    q.put_batch(range(8))
    assert q.qsize() == 8 and not q.empty()
    q.get_batch(3)
    assert q.qsize() == 5
    drain(q)
    assert q.qsize() == 0 and q.empty()


def test_an_empty_queue_raises_queue_empty_and_get_batch_returns_nothing(hybrid):
    q = hybrid.open()
    with pytest.raises(queue.Empty):
        q.get_nowait()
    with pytest.raises(queue.Empty):
        q.get(block=False)
    t0 = time.monotonic()
    with pytest.raises(queue.Empty):
        q.get(timeout=0.05)
    assert time.monotonic() - t0 >= 0.045  # it waited the timeout
    assert q.get_batch(5, timeout=0.01) == []
    assert q.get_batch(5, block=False) == []
    assert q.peek_batch(5) == []
    q.put(1)
    q.get()
    with pytest.raises(queue.Empty):  # and again once emptied
        q.get_nowait()


def test_get_batch_returns_up_to_n_in_order_and_peek_batch_removes_nothing(hybrid):
    q = hybrid.open()
    q.put_batch(range(10))
    assert q.peek_batch(4) == [0, 1, 2, 3]
    assert q.peek_batch(4) == [0, 1, 2, 3]
    assert q.qsize() == 10
    assert q.get_batch(4) == [0, 1, 2, 3]
    assert q.peek_batch(100) == list(range(4, 10))
    assert q.get_batch(100) == list(range(4, 10))  # fewer than asked: what there is
    assert q.empty()


def test_a_blocked_get_wakes_when_an_item_is_put(hybrid):
    q = hybrid.open()
    got = []

    def getter():
        got.append(q.get(timeout=15))

    t = threading.Thread(target=getter, daemon=True)
    t.start()
    time.sleep(0.2)
    assert got == []
    put_at = time.monotonic()
    q.put("wake")
    t.join(10)
    assert got == ["wake"]
    assert time.monotonic() - put_at < 5  # woken by the put, not by the 15 s timeout


def test_join_waits_for_a_task_done_per_item(hybrid):
    q = hybrid.open()
    q.put_batch(range(6))
    assert q.unfinished_tasks == 6
    joined = threading.Event()
    t = threading.Thread(target=lambda: (q.join(), joined.set()), daemon=True)
    t.start()
    for _ in range(6):
        q.get()
    time.sleep(0.1)
    assert not joined.is_set()  # got, but not yet done
    for _ in range(5):
        q.task_done()
    time.sleep(0.1)
    assert not joined.is_set() and q.unfinished_tasks == 1
    q.task_done()
    assert joined.wait(10)
    with pytest.raises(ValueError):
        q.task_done()  # more task_done calls than items


def test_close_and_reopen_keep_order_and_content(hybrid):
    """Close spills the memory tier, so every tier reopens with what was left, in order."""
    q = hybrid.open()
    q.put_batch(range(30))
    assert q.get_batch(5) == [0, 1, 2, 3, 4]
    q.put({"last": True})
    q.close()
    q = hybrid.open()
    assert q.qsize() == 26
    assert q.unfinished_tasks == 26  # items found on reopening count as unfinished
    assert q.peek_batch(3) == [5, 6, 7]
    q.put("after")
    assert drain(q) == list(range(5, 30)) + [{"last": True}, "after"]
    q.close()
    q = hybrid.open()  # everything was got: nothing comes back
    assert q.empty() and q.get_batch(10, block=False) == []


def test_a_closed_queue_refuses_every_call(hybrid):
    q = hybrid.open()
    q.put(1)
    q.close()
    q.close()  # idempotent
    for call in (lambda: q.put(2), q.get_nowait, lambda: q.get_batch(1), lambda: q.peek_batch(1)):
        with pytest.raises(LogClosedError):
            call()


@pytest.mark.parametrize("tier", ["overflow", "durable"])
def test_full_when_the_disk_bound_is_reached_and_a_get_makes_room(tier, make_hybrid):
    q = make_hybrid(tier).open(max_disk_bytes=1000, serializer="raw")
    item = b"z" * 99  # + 1 byte: 100 serialized bytes an item (raw)
    n = 0
    with pytest.raises(queue.Full):
        while n < 100:
            q.put_nowait(item + bytes([n]))
            n += 1
    assert n == (10 if tier == "durable" else 10 + 3)  # 1000 bytes of disk (+ the 3-item memory budget)
    assert q.full() and q.qsize() == n
    with pytest.raises(queue.Full):
        q.put(b"late", timeout=0.05)
    with pytest.raises(queue.Full):
        q.put_batch([b"late"], block=False)
    assert q.qsize() == n  # a refused put adds nothing
    assert q.get() == item + bytes([0])
    q.put_nowait(b"fits now")
    assert drain(q) == [item + bytes([i]) for i in range(1, n)] + [b"fits now"]


def test_memory_tier_is_not_bounded_by_max_disk_bytes_and_close_writes_it_all(make_hybrid):
    f = make_hybrid("memory")
    q = f.open(max_disk_bytes=1000, serializer="raw")
    items = [b"m" * 100 + bytes([i]) for i in range(50)]  # 5x the disk bound
    for it in items:
        q.put_nowait(it)
    assert not q.full()
    q.close()  # the memory tier is written even past max_disk_bytes
    q = f.open(max_disk_bytes=1000, serializer="raw")
    assert drain(q) == items
