"""Many producer and consumer threads on one queue: no loss, no duplicates (the
visibility timeout outlasts the test, so every message is delivered exactly once),
FIFO order per group across consumers."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict

from vqs.broker.queue.registry import QueueRegistry

PRODUCERS = 4
CONSUMERS = 4
PER_PRODUCER = 2500


def _run(q, make_entries, consume):
    sent: list = []
    sent_lock = threading.Lock()
    done_producing = threading.Event()
    errors: list = []

    def producer(p):
        try:
            i = 0
            while i < PER_PRODUCER:
                k = min(1 + (i % 10), PER_PRODUCER - i)
                entries = make_entries(p, i, k)
                q.send_batch(entries)
                with sent_lock:
                    sent.extend(e["body"] if isinstance(e, dict) else e for e in entries)
                i += k
        except BaseException as e:  # surfaced by the main thread
            errors.append(e)

    received: list = []
    recv_lock = threading.Lock()

    def consumer():
        try:
            while True:
                ms = q.receive(10, wait_seconds=0.2)
                if not ms:
                    if done_producing.is_set() and q.counts()["visible"] == 0:
                        return
                    continue
                consume(ms)
                with recv_lock:
                    received.extend(ms)
                q.delete_batch([m.receipt_handle for m in ms])
        except BaseException as e:
            errors.append(e)

    cs = [threading.Thread(target=consumer) for _ in range(CONSUMERS)]
    ps = [threading.Thread(target=producer, args=(p,)) for p in range(PRODUCERS)]
    for t in cs + ps:
        t.start()
    for t in ps:
        t.join(120)
    done_producing.set()
    for t in cs:
        t.join(120)
    assert not errors, errors
    assert not any(t.is_alive() for t in cs + ps)
    return sent, received


def test_threads_standard_no_loss_no_duplicates(tmp_path):
    reg = QueueRegistry(str(tmp_path / "queues"))
    q = reg.create("q", visibility_timeout=600)
    sent, received = _run(
        q, lambda p, i, k: [b"p%d-%d" % (p, i + j) for j in range(k)], lambda ms: None)
    bodies = Counter(m.body for m in received)
    assert len(sent) == PRODUCERS * PER_PRODUCER
    assert set(bodies) == set(sent)
    dups = [b for b, c in bodies.items() if c > 1]
    assert not dups, dups[:5]
    # per producer, messages are delivered in the order sent (oldest first)
    c = q.counts()
    assert c == {"visible": 0, "in_flight": 0, "delayed": 0}
    reg.close()


def test_threads_fifo_order_per_group(tmp_path):
    reg = QueueRegistry(str(tmp_path / "queues"))
    q = reg.create("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=600)
    order_lock = threading.Lock()
    seen = defaultdict(list)  # group -> sequence of message numbers in delivery order

    def consume(ms):
        with order_lock:
            for m in ms:
                seen[m.group_id].append(int(m.text.split("-")[1]))

    sent, received = _run(
        q,
        lambda p, i, k: [{"body": "p%d-%d" % (p, i + j), "group_id": "g%d" % p} for j in range(k)],
        consume,
    )
    assert len(received) == len(sent) == PRODUCERS * PER_PRODUCER
    for g, nums in seen.items():
        assert nums == sorted(nums), f"group {g} delivered out of order"
        assert len(nums) == len(set(nums)) == PER_PRODUCER
    reg.close()


def test_long_poll_many_waiters_each_woken(tmp_path):
    reg = QueueRegistry(str(tmp_path / "queues"))
    q = reg.create("q")
    got: list = []
    lock = threading.Lock()

    def waiter():
        ms = q.receive(1, wait_seconds=10)
        with lock:
            got.extend(ms)

    ts = [threading.Thread(target=waiter) for _ in range(8)]
    for t in ts:
        t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    q.send_batch([b"%d" % i for i in range(8)])
    for t in ts:
        t.join(10)
    assert time.monotonic() - t0 < 5
    assert sorted(m.body for m in got) == sorted(b"%d" % i for i in range(8))
    reg.close()
