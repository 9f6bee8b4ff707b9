"""ReadAhead (vqs/spark/read_ahead.py): a second thread runs the scan ahead of the reader.

Its contract: the consumer sees exactly the wrapped iterator's items, in order,
then its end or its exception (after every item before it); the wrapped
iterator runs on that one thread and is closed there; ``close`` returns only
once the thread is gone; the thread is never more than a bounded number of
items ahead.
"""

from __future__ import annotations

import threading

import pytest

from vqs.spark.read_ahead import ReadAhead


def _alive():
    return [t for t in threading.enumerate() if t.name == "vqs-read-ahead"]


def test_items_in_order_then_the_end():
    ra = ReadAhead(iter(range(5000)), depth=3)
    assert list(ra) == list(range(5000))
    assert next(ra, "end") == "end"
    assert not ra._thread.is_alive()


def test_an_error_comes_after_every_item_before_it_and_the_source_is_closed():
    state = {}

    def scan():
        try:
            yield from range(10)
            raise ValueError("batch 10 is corrupt")
        finally:
            state["closed_on"] = threading.get_ident()

    got = []
    ra = ReadAhead(scan(), depth=4)
    with pytest.raises(ValueError, match="batch 10 is corrupt"):
        for x in ra:
            got.append(x)
    assert got == list(range(10))
    assert not ra._thread.is_alive()
    assert state["closed_on"] != threading.get_ident()  # closed on the read-ahead thread


def test_closing_early_stops_the_thread_and_closes_the_source_on_it():
    state = {"threads": set()}

    def endless():
        try:
            i = 0
            while True:
                state["threads"].add(threading.get_ident())
                yield i
                i += 1
        finally:
            state["finally"] = threading.get_ident()

    with ReadAhead(endless(), depth=2) as ra:
        assert [next(ra) for _ in range(5)] == [0, 1, 2, 3, 4]
        thread = ra._thread
    assert not thread.is_alive()
    assert state["threads"] == {state["finally"]} and threading.get_ident() not in state["threads"]
    assert next(ra, "closed") == "closed"
    assert thread not in _alive()


def test_the_producer_stays_a_bounded_distance_ahead():
    produced = {"n": 0}
    depth = 3

    def counting():
        for i in range(2000):
            produced["n"] += 1
            yield i

    consumed = 0
    for x in ReadAhead(counting(), depth=depth):
        consumed += 1
        assert x == consumed - 1
        # at most `depth` verified and waiting, `depth` taken in the consumer's
        # hand, and one being produced
        assert produced["n"] <= consumed + 2 * depth + 1, (produced["n"], consumed)
    assert consumed == 2000


def test_a_consumer_that_drops_a_read_range_generator_stops_the_thread(tmp_path):
    """reader.py holds the ReadAhead in a ``with`` inside a generator: dropping
    the generator mid-way (Spark stops reading a task's iterator after a
    limit) closes it, and with it the thread."""
    from spark_helpers import append, make_topic

    from vqs.spark.datadir import PathSource
    from vqs.spark.options import parse_read_options
    from vqs.spark.reader import plan_ranges, read_range

    make_topic(tmp_path, "t", partitions=1)
    for i in range(20):
        append(tmp_path, "t", 0, [b"%d-%d" % (i, j) + bytes(50) for j in range(4096)])
    opts = parse_read_options({"path": str(tmp_path), "topic": "t"}, streaming=False)
    src = PathSource(str(tmp_path))
    try:
        (r,) = plan_ranges(src, opts)
        before = set(_alive())
        gen = read_range(src, r, opts, ("offset",))
        first = next(gen)
        assert first.column(0).to_pylist()[:3] == [0, 1, 2]
        assert len(set(_alive()) - before) == 1
        gen.close()
        assert set(_alive()) - before == set()
    finally:
        src.close()


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="depth"):
        ReadAhead(iter(()), depth=0)
