"""HybridQueue: queue.Queue semantics, tiers, persistence, serializers, bad input."""

from __future__ import annotations

import json
import os
import pickle
import queue
import sys
import threading
import time

import pytest

from vqs.errors import (
    ConfigError,
    LogClosedError,
    LogLockedError,
    MessageTooLarge,
    SerializationError,
    VQSError,
)
from vqs.hybrid import HybridQueue
from vqs.hybrid.checkpoint import SLOT_SIZE, Checkpoint


def drain(q, n=10_000):
    out = []
    while True:
        got = q.get_batch(n, block=False)
        if not got:
            return out
        out.extend(got)


# ------------------------------------------------------------------ basics


def test_fifo_memory_tier_keeps_live_objects(tmp_path):
    with HybridQueue(tmp_path / "q") as q:
        obj = {"a": [1, 2]}
        q.put(obj)
        q.put(2)
        assert q.qsize() == 2 and not q.empty() and not q.full()
        assert q.get() is obj  # memory tier: the same object, never serialized
        assert q.get_nowait() == 2
        assert q.empty()
        m = q.metrics
        assert (m.puts, m.gets, m.spilled, m.disk_writes, m.disk_items) == (2, 2, 0, 0, 0)


@pytest.mark.parametrize("durable", [False, True])
def test_spill_keeps_fifo_across_tiers(tmp_path, durable):
    with HybridQueue(tmp_path / "q", memory_items=3, durable=durable) as q:
        for i in range(10):
            q.put(i)
        assert q.qsize() == 10
        m = q.metrics
        if durable:
            assert m.disk_writes == 10 and m.disk_items == 10
        else:
            assert m.spilled >= 7 and m.memory_items <= 3
        assert [q.get() for _ in range(4)] == [0, 1, 2, 3]
        for i in range(10, 20):  # new items queue behind what is on disk
            q.put(i)
        assert q.peek_batch(5) == [4, 5, 6, 7, 8]
        assert q.get_batch(100) == list(range(4, 20))
        assert q.empty()


def test_memory_bytes_budget_spills(tmp_path):
    # sizes are sys.getsizeof (shallow): bytes objects are measured in full
    big = b"x" * 1000
    with HybridQueue(tmp_path / "q", memory_items=None, memory_bytes=3500) as q:
        for i in range(10):
            q.put(bytes([i]) + big)
        m = q.metrics
        assert m.spilled >= 7 and m.memory_bytes <= 3500
        assert [q.get()[0] for _ in range(10)] == list(range(10))
    # a sizeof callable measures deep structures the caller's way
    with HybridQueue(tmp_path / "s", memory_items=None, memory_bytes=3500,
                     sizeof=lambda t: len(t[1])) as q:
        for i in range(10):
            q.put((i, big))
        assert q.metrics.spilled >= 7
        assert [q.get()[0] for _ in range(10)] == list(range(10))


def test_item_larger_than_memory_goes_to_disk_in_order(tmp_path):
    with HybridQueue(tmp_path / "q", memory_items=10, memory_bytes=500) as q:
        q.put("small")
        q.put(b"y" * 5000)  # bigger than the whole memory budget
        q.put("after")
        assert q.get() == "small"
        assert q.get() == b"y" * 5000
        assert q.get() == "after"


def test_memory_items_zero_is_a_disk_queue(tmp_path):
    with HybridQueue(tmp_path / "q", memory_items=0) as q:
        q.put_batch(range(5))
        q.put(5)
        assert q.metrics.spilled == 6 and q.metrics.memory_items == 0
        assert drain(q) == list(range(6))


@pytest.mark.parametrize("durable", [False, True])
def test_close_spills_and_reopen_restores_order(tmp_path, durable):
    p = tmp_path / "q"
    q = HybridQueue(p, memory_items=4, durable=durable)
    q.put_batch(range(10))
    assert q.get_batch(3) == [0, 1, 2]
    q.put_batch(range(10, 13))
    q.close()
    q.close()  # idempotent
    q = HybridQueue(p, memory_items=4, durable=durable)
    assert q.qsize() == 10
    assert q.unfinished_tasks == 10
    assert q.get_batch(2) == [3, 4]
    q.close()
    # reopened in the other mode: same content, no redelivery of consumed items
    q = HybridQueue(p, memory_items=4, durable=not durable)
    assert drain(q) == list(range(5, 13))
    q.put("x")
    q.close()
    with HybridQueue(p) as q:
        assert drain(q) == ["x"]
    with HybridQueue(p) as q:
        assert q.empty()


def test_reopen_counts_backlog_bytes_with_or_without_checkpoint(tmp_path):
    p = tmp_path / "q"
    items = [("item", i, "x" * i) for i in range(20)]
    with HybridQueue(p, memory_items=2) as q:
        q.put_batch(items)
        assert q.get_batch(5) == items[:5]
    want = sum(len(pickle.dumps(x, protocol=5)) for x in items[5:])
    with HybridQueue(p, memory_items=2) as q:  # clean close: the checkpoint is trusted
        m = q.metrics
        assert (m.disk_items, m.disk_bytes) == (15, want)
    # without the checkpoint: the log start (delete_before at close) still
    # marks what was consumed, and the backlog bytes are recounted by a scan
    os.unlink(p / "hybrid.ckpt")
    with HybridQueue(p, memory_items=2) as q:
        m = q.metrics
        assert (m.disk_items, m.disk_bytes) == (15, want)
        assert drain(q) == items[5:]


def test_operations_on_closed_queue_raise(tmp_path):
    q = HybridQueue(tmp_path / "q", memory_items=1)
    q.put(1)
    q.put(2)
    q.close()
    assert q.closed
    for call in (lambda: q.put(3), lambda: q.put_batch([3]), q.get, lambda: q.get_batch(2),
                 lambda: q.peek_batch(1)):
        with pytest.raises(LogClosedError):
            call()
    q2 = HybridQueue(tmp_path / "q", durable=True)
    q2.close()
    with pytest.raises(LogClosedError):
        q2.put(1)


def test_one_owner_per_directory(tmp_path):
    with HybridQueue(tmp_path / "q"):
        with pytest.raises(LogLockedError):
            HybridQueue(tmp_path / "q")
    with HybridQueue(tmp_path / "q"):  # released at close
        pass


# ------------------------------------------------------------ Full / Empty


def test_empty_behaviour(tmp_path):
    with HybridQueue(tmp_path / "q") as q:
        with pytest.raises(queue.Empty):
            q.get_nowait()
        with pytest.raises(queue.Empty):
            q.get(block=False)
        t0 = time.monotonic()
        with pytest.raises(queue.Empty):
            q.get(timeout=0.05)
        assert time.monotonic() - t0 >= 0.045
        assert q.get_batch(5, timeout=0.01) == []
        assert q.get_batch(5, block=False) == []
        assert q.peek_batch(3) == []
        with pytest.raises(ValueError):
            q.get(timeout=-1)
        with pytest.raises(ValueError):
            q.get_batch(0)


@pytest.mark.parametrize("durable", [False, True])
def test_full_when_memory_and_disk_are_full(tmp_path, durable):
    item = b"z" * 100
    with HybridQueue(tmp_path / "q", memory_items=2, max_disk_bytes=1000, durable=durable,
                     serializer="raw") as q:
        n = 0
        with pytest.raises(queue.Full):
            while True:
                q.put_nowait(item)
                n += 1
                assert n < 100
        assert q.full()
        # raw: 100 serialized bytes an item; the disk holds 10 of them
        assert n == (10 if durable else 12)
        t0 = time.monotonic()
        with pytest.raises(queue.Full):
            q.put(item, timeout=0.05)
        assert time.monotonic() - t0 >= 0.045
        with pytest.raises(queue.Full):
            q.put_batch([item], block=False)
        assert q.qsize() == n
        # a consumer frees room: a blocked put goes through
        done = threading.Event()

        def producer():
            q.put(b"last")
            done.set()

        t = threading.Thread(target=producer)
        t.start()
        time.sleep(0.05)
        assert not done.is_set()
        got = q.get_batch(5)
        assert got == [item] * 5
        t.join(5)
        assert done.is_set()
        rest = drain(q)
        assert rest[-1] == b"last" and len(rest) == n - 5 + 1


def test_item_that_can_never_fit_raises(tmp_path):
    with HybridQueue(tmp_path / "q", memory_items=1, memory_bytes=200, max_disk_bytes=50,
                     serializer="raw") as q:
        with pytest.raises(MessageTooLarge, match="max_disk_bytes=50"):
            q.put(b"b" * 300)  # too big for memory, too big for disk
        with pytest.raises(MessageTooLarge, match="max_disk_bytes=50"):
            q.put_batch([b"a", b"b" * 300])
        assert q.empty()
        q.put(b"b" * 100)  # fits in memory: fine
        with pytest.raises(queue.Full):
            q.put(b"c" * 100, timeout=0.01)  # would spill 100 bytes: disk too small, for now
    with HybridQueue(tmp_path / "d", max_disk_bytes=50, serializer="raw", durable=True) as q:
        with pytest.raises(MessageTooLarge, match="max_disk_bytes=50"):
            q.put(b"b" * 100)


def test_put_batch_is_all_or_nothing(tmp_path):
    with HybridQueue(tmp_path / "q", memory_items=2, max_disk_bytes=300, serializer="raw") as q:
        q.put_batch([b"x" * 100] * 4)  # 2 in memory, 2 on disk
        with pytest.raises(queue.Full):
            q.put_batch([b"y" * 100] * 3, block=False)
        assert q.qsize() == 4
        q.put_batch([b"y" * 100])
        assert q.qsize() == 5


# -------------------------------------------------------- join / task_done


def test_join_and_task_done(tmp_path):
    with HybridQueue(tmp_path / "q", memory_items=2) as q:
        q.put_batch(range(6))
        assert q.unfinished_tasks == 6
        seen = []

        def worker():
            while True:
                item = q.get()
                if item is None:
                    q.task_done()
                    return
                seen.append(item)
                q.task_done()

        t = threading.Thread(target=worker)
        t.start()
        q.join()
        assert seen == list(range(6))
        q.put(None)
        t.join(5)
        q.join()
        with pytest.raises(ValueError, match="too many"):
            q.task_done()


# -------------------------------------------------------------- threads


@pytest.mark.parametrize("durable", [False, True])
def test_threads_no_loss_no_duplicates(tmp_path, durable):
    producers, consumers = 4, 3
    per = 300 if durable else 5000
    q = HybridQueue(tmp_path / "q", memory_items=50, durable=durable)
    got: list[list] = [[] for _ in range(consumers)]

    def produce(p):
        for i in range(0, per, 7):
            batch = [(p, j) for j in range(i, min(i + 7, per))]
            if i % 2:
                q.put_batch(batch)
            else:
                for x in batch:
                    q.put(x)

    def consume(c):
        while True:
            items = q.get_batch(16) if c % 2 else [q.get()]
            stops = items.count(None)
            got[c].extend(x for x in items if x is not None)
            if stops:
                # one stop sentinel is ours; hand back the others we took
                for _ in range(stops - 1):
                    q.put(None)
                return

    cs = [threading.Thread(target=consume, args=(c,)) for c in range(consumers)]
    ps = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for t in cs + ps:
        t.start()
    for t in ps:
        t.join(120)
    for _ in range(consumers):
        q.put(None)
    for t in cs:
        t.join(120)
        assert not t.is_alive()
    q.close()
    allgot = [x for g in got for x in g]
    assert len(allgot) == producers * per
    assert len(set(allgot)) == len(allgot)
    # per producer, each consumer saw its items in order (FIFO)
    for g in got:
        for p in range(producers):
            seq = [j for (pp, j) in g if pp == p]
            assert seq == sorted(seq)
    with HybridQueue(tmp_path / "q") as q2:
        assert q2.empty()


def test_blocked_getter_wakes_on_put_and_on_close(tmp_path):
    q = HybridQueue(tmp_path / "q")
    out = []
    t = threading.Thread(target=lambda: out.append(q.get(timeout=5)))
    t.start()
    time.sleep(0.05)
    q.put("hello")
    t.join(5)
    assert out == ["hello"]
    errs = []

    def waiter():
        try:
            q.get()
        except LogClosedError as e:
            errs.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    q.close()
    t.join(5)
    assert len(errs) == 1


# ------------------------------------------------------------ disk reclaim


@pytest.mark.parametrize("durable", [False, True])
def test_disk_reclaimed_as_consumed(tmp_path, durable):
    n = 3000 if not durable else 400
    payload = b"p" * 200
    q = HybridQueue(tmp_path / "q", memory_items=10, segment_bytes=16 << 10, durable=durable,
                    serializer="raw")
    if durable:
        for _i in range(0, n, 50):
            q.put_batch([payload] * 50)
    else:
        for _ in range(n):
            q.put(payload)
    full_size = q.metrics.log_bytes
    assert full_size > n * 200 * 0.9 - 10 * 200
    assert q.metrics.log_segments >= n * 200 // (16 << 10)
    assert len(drain(q)) == n
    m = q.metrics
    assert m.log_segments <= 3 and m.log_bytes < 3 * (16 << 10)
    assert m.disk_items == 0 and m.disk_bytes == 0
    q.close()
    logdir = tmp_path / "q" / "log"
    on_disk = sum(os.path.getsize(logdir / f) for f in os.listdir(logdir) if f.endswith(".log"))
    assert on_disk < 16 << 10


# ------------------------------------------------------------ serializers


@pytest.mark.parametrize(
    "serializer,items",
    [
        ("pickle", [1, "two", (3, 4.0), {"five": [6]}, None, b"\x00raw", {1, 2}]),
        ("json", [1, "two", [3, 4.5], {"five": [6]}, None, True, "ünïcode"]),
        ("raw", [b"one", b"", bytes(range(256))]),
        ("bytes", [b"alias"]),
    ],
)
def test_builtin_serializers_roundtrip_through_disk(tmp_path, serializer, items):
    with HybridQueue(tmp_path / "q", memory_items=0, serializer=serializer) as q:
        q.put_batch(items)
    with HybridQueue(tmp_path / "q", serializer=serializer) as q:
        assert drain(q) == items


def test_raw_serializer_accepts_bytes_like_and_rejects_others(tmp_path):
    with HybridQueue(tmp_path / "q", memory_items=0, serializer="raw") as q:
        q.put(bytearray(b"ba"))
        q.put(memoryview(b"mv"))
        assert drain(q) == [b"ba", b"mv"]
        with pytest.raises(SerializationError, match="raw"):
            q.put("a str")
        assert q.empty()


def test_custom_serializer_object(tmp_path):
    class Upper:
        name = "upper"

        @staticmethod
        def dumps(obj):
            return obj.upper().encode()

        @staticmethod
        def loads(data):
            return data.decode().lower()

    with HybridQueue(tmp_path / "q", memory_items=0, serializer=Upper()) as q:
        q.put("abc")
        assert (tmp_path / "q" / "log").exists()
        assert q.get() == "abc"
    # a module with dumps/loads works too (json.dumps returns str: encoded as UTF-8)
    with HybridQueue(tmp_path / "m", memory_items=0, serializer=json) as q:
        q.put({"k": 1})
        assert q.get() == {"k": 1}


def test_msgpack_serializer(tmp_path, monkeypatch):
    try:
        import msgpack  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match=r"serializer='msgpack'.*pip install msgpack"):
            HybridQueue(tmp_path / "q", serializer="msgpack")
    else:
        with HybridQueue(tmp_path / "q", memory_items=0, serializer="msgpack") as q:
            q.put({"a": b"b", 1: [2]})
            assert q.get() == {"a": b"b", 1: [2]}
        monkeypatch.setitem(sys.modules, "msgpack", None)
        with pytest.raises(ConfigError, match=r"serializer='msgpack'.*pip install msgpack"):
            HybridQueue(tmp_path / "q2", serializer="msgpack")


def test_serializer_mismatch_on_reopen(tmp_path):
    with HybridQueue(tmp_path / "q", serializer="json") as q:
        q.put([1])
    with pytest.raises(ConfigError, match="serializer='json'"):
        HybridQueue(tmp_path / "q", serializer="pickle")
    with HybridQueue(tmp_path / "q", serializer="json") as q:
        assert q.get() == [1]


def test_unserializable_item(tmp_path):
    lam = lambda: None  # noqa: E731  (pickle cannot serialize a lambda)
    with HybridQueue(tmp_path / "q", memory_items=1) as q:
        q.put(lam)  # memory tier: fine
        with pytest.raises(SerializationError, match="serialize"):
            q.put(2)  # has to spill the lambda: refused, nothing changed
        assert q.qsize() == 1
        assert q.get() is lam
        q.put(2)
        q.put(lam)  # spills 2 (picklable), keeps the lambda in memory
        assert q.get() == 2
        assert q.get() is lam
    # close() writes what it can and reports what it could not
    q = HybridQueue(tmp_path / "c", memory_items=10)
    q.put_batch([1, lam, 3])
    with pytest.raises(SerializationError, match="1 item"):
        q.close()
    assert q.closed
    with HybridQueue(tmp_path / "c") as q:
        assert drain(q) == [1, 3]
    with HybridQueue(tmp_path / "d", durable=True) as q:
        with pytest.raises(SerializationError):
            q.put(lam)
        assert q.empty() and q.unfinished_tasks == 0


def test_compression_roundtrip(tmp_path):
    items = [("x" * 500, i) for i in range(200)]
    for codec in ("zstd", "lz4", "gzip"):
        with HybridQueue(tmp_path / codec, memory_items=0, compression=codec) as q:
            q.put_batch(items)
            size = q.metrics.log_bytes
            assert size < 200 * 500 / 4
        with HybridQueue(tmp_path / codec, compression=codec) as q:
            assert drain(q) == items


# ------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs,setting",
    [
        ({"serializer": "yaml"}, "serializer"),
        ({"serializer": 42}, "serializer"),
        ({"memory_items": -1}, "memory_items"),
        ({"memory_items": "10"}, "memory_items"),
        ({"memory_bytes": 1.5}, "memory_bytes"),
        ({"max_disk_bytes": -5}, "max_disk_bytes"),
        ({"durable": "yes"}, "durable"),
        ({"compression": "snappy"}, "compression"),
        ({"segment_bytes": 0}, "segment_bytes"),
        ({"sizeof": 3}, "sizeof"),
    ],
)
def test_bad_settings_raise_config_error_naming_them(tmp_path, kwargs, setting):
    with pytest.raises(ConfigError, match=setting):
        HybridQueue(tmp_path / "q", **kwargs)
    assert isinstance(ConfigError("x"), VQSError)


def test_path_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"")
    with pytest.raises(ConfigError, match="not a directory"):
        HybridQueue(f)


def test_unreadable_meta(tmp_path):
    with HybridQueue(tmp_path / "q"):
        pass
    (tmp_path / "q" / "hybrid.json").write_bytes(b"{not json")
    with pytest.raises(ConfigError, match=r"hybrid\.json"):
        HybridQueue(tmp_path / "q")
    # the failed open released the directory
    (tmp_path / "q" / "hybrid.json").write_bytes(b'{"format": 1, "serializer": "pickle"}')
    HybridQueue(tmp_path / "q").close()


# ------------------------------------------------------------- checkpoint


def test_checkpoint_falls_back_to_the_other_slot(tmp_path):
    p = str(tmp_path / "ck")
    c = Checkpoint(p)
    assert c.state is None
    c.write(5, 10, 100)
    c.write(6, 10, 90, clean=True)
    c.close()
    c = Checkpoint(p)
    assert (c.state.read_off, c.state.clean) == (6, True)
    c.close()
    # tear the newest slot (seq 2 lives in slot 0)
    with open(p, "r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    c = Checkpoint(p)
    assert (c.state.read_off, c.state.end_off, c.state.disk_bytes) == (5, 10, 100)
    c.write(7, 11, 80)  # seq 2 again, into slot 0
    c.close()
    assert Checkpoint(p).state.read_off == 7
    assert os.path.getsize(p) == 2 * SLOT_SIZE


def test_pickle_of_queue_module_objects(tmp_path):
    # queue.Queue-compatible exceptions are the stdlib's
    from vqs import hybrid

    assert hybrid.Empty is queue.Empty and hybrid.Full is queue.Full
    assert pickle.loads(pickle.dumps(hybrid.HybridMetrics(*([0] * 11), durable=False))).puts == 0
