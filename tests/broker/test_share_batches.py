"""Batch-aligned acquisition of a share partition (``SharePartition.acquire(whole_batches=...)``):
fresh records are acquired to the end of the stored batch that holds the last one asked for,
and such records are acknowledged, released, redelivered and recovered like any others."""

from __future__ import annotations

import pytest

from vqs.broker.share.partition import ACCEPT, RELEASE, SharePartition
from vqs.errors import InvalidRecordState
from vqs.storage import Log

LOCK = 1000
LIMIT = 3
NOW = 1_000_000


@pytest.fixture
def log(tmp_path):
    log = Log.open(str(tmp_path / "topic"), flush="never")
    for b in range(3):  # three stored batches of 10 records: offsets 0-9, 10-19, 20-29
        log.append_batch([b"b%d-%d" % (b, i) for i in range(10)])
    yield log
    log.close()


def _open(tmp_path, log):
    return SharePartition(str(tmp_path / "state"), log, flush="interval", flush_interval_ms=60_000,
                          auto_offset_reset="earliest")


def _bounds(log) -> list:
    out, o = [], 0
    while o < log.end_offset:
        for b in log.read_batches(o):
            out.append((b.base_offset, b.next_offset))
            o = b.next_offset
    return out


def test_the_fresh_run_ends_with_the_stored_batch_holding_its_last_record(tmp_path, log):
    assert _bounds(log) == [(0, 10), (10, 20), (20, 30)]
    sp = _open(tmp_path, log)
    try:
        assert sp.acquire("a", 3, NOW, LOCK, LIMIT, whole_batches=100) == [(0, 9, 1)]
        assert sp.acquire("b", 11, NOW, LOCK, LIMIT, whole_batches=100) == [(10, 29, 1)]
        assert sp.acquire("b", 5, NOW, LOCK, LIMIT, whole_batches=100) == []  # the log's end
    finally:
        sp.close()


def test_off_or_a_batch_past_the_bound_acquires_only_what_the_bound_allows(tmp_path, log):
    sp = _open(tmp_path, log)
    try:
        assert sp.acquire("a", 3, NOW, LOCK, LIMIT) == [(0, 2, 1)]  # off: exactly max_records
        assert sp.acquire("a", 2, NOW, LOCK, LIMIT, whole_batches=5) == [(3, 7, 1)]  # 5 at most
        assert sp.acquire("a", 1, NOW, LOCK, LIMIT, whole_batches=5) == [(8, 9, 1)]  # to the batch's end
    finally:
        sp.close()


def test_the_lock_limit_is_passed_by_less_than_a_batch_and_then_stops_acquisition(tmp_path, log):
    sp = _open(tmp_path, log)
    try:
        assert sp.acquire("a", 500, NOW, LOCK, LIMIT, max_locks=4, whole_batches=100) == [(0, 9, 1)]
        assert sp.acquire("b", 500, NOW, LOCK, LIMIT, max_locks=4, whole_batches=100) == []
        sp.acknowledge("a", 0, 9, [ACCEPT], NOW, LOCK, LIMIT)
        assert sp.acquire("b", 500, NOW, LOCK, LIMIT, max_locks=4, whole_batches=100) == [(10, 19, 1)]
    finally:
        sp.close()


def test_records_past_max_records_are_acknowledged_released_and_redelivered(tmp_path, log):
    sp = _open(tmp_path, log)
    try:
        assert sp.acquire("a", 2, NOW, LOCK, LIMIT, whole_batches=100) == [(0, 9, 1)]
        with pytest.raises(InvalidRecordState):  # acquired by a, not by b
            sp.acknowledge("b", 5, 9, [ACCEPT], NOW, LOCK, LIMIT)
        sp.acknowledge("a", 0, 9, [ACCEPT] * 4 + [RELEASE] * 6, NOW, LOCK, LIMIT)
        # the released ones come back first (those of the batch), with their next delivery
        # count; then a fresh batch
        assert sp.acquire("b", 2, NOW, LOCK, LIMIT, whole_batches=100) == [(4, 9, 2)]
        assert sp.acquire("b", 5, NOW, LOCK, LIMIT, whole_batches=100) == [(10, 19, 1)]
        # a lock that ends makes the whole run available again
        later = NOW + LOCK + 1
        assert sp.acquire("c", 100, later, LOCK, LIMIT, whole_batches=100) == [
            (4, 9, 3), (10, 19, 2), (20, 29, 1)]
        assert sp.describe()["start_offset"] == 4
    finally:
        sp.close()


def test_a_crash_after_a_batch_aligned_acquisition_makes_the_whole_run_available(tmp_path, log):
    sp = _open(tmp_path, log)
    assert sp.acquire("a", 2, NOW, LOCK, LIMIT, whole_batches=100) == [(0, 9, 1)]
    sp.acknowledge("a", 0, 2, [ACCEPT], NOW, LOCK, LIMIT)
    sp.store.close()  # a crash: no snapshot at close, only what the state log holds
    sp = _open(tmp_path, log)
    try:
        assert sp.describe()["start_offset"] == 3
        assert sp.acquire("b", 100, NOW, LOCK, LIMIT, whole_batches=100) == [(3, 9, 2), (10, 29, 1)]
    finally:
        sp.close()


def test_an_acknowledgement_over_a_record_another_member_holds_changes_nothing(tmp_path, log):
    sp = _open(tmp_path, log)
    try:
        assert sp.acquire("a", 1, NOW, LOCK, LIMIT, whole_batches=100) == [(0, 9, 1)]
        assert sp.acquire("b", 1, NOW, LOCK, LIMIT, whole_batches=100) == [(10, 19, 1)]
        for types in ([ACCEPT], [ACCEPT] * 13):  # one type for the range, or one per record
            with pytest.raises(InvalidRecordState, match="record 10 "):
                sp.acknowledge("a", 5, 17, types, NOW, LOCK, LIMIT)
        assert sp.describe()["acquired"] == 20
        sp.acknowledge("a", 0, 9, [ACCEPT], NOW, LOCK, LIMIT)
        sp.acknowledge("b", 10, 19, [RELEASE], NOW, LOCK, LIMIT)
        assert sp.describe() == {"start_offset": 10, "cursor": 20, "acquired": 0, "available": 10,
                                 "delivery_counts": {1: 10}}
        assert sp.acquire("a", 100, NOW, LOCK, LIMIT, whole_batches=100) == [(10, 19, 2), (20, 29, 1)]
    finally:
        sp.close()


def test_available_records_of_the_batch_holding_the_last_one_asked_for_come_along(tmp_path, log):
    sp = _open(tmp_path, log)
    try:
        assert sp.acquire("a", 30, NOW, LOCK, LIMIT) == [(0, 29, 1)]
        sp.acknowledge("a", 0, 29, [RELEASE] * 3 + [ACCEPT] * 9 + [RELEASE] * 18, NOW, LOCK, LIMIT)
        # available: 0-2 (batch 0-9), 12-19 (batch 10-19), 20-29
        assert sp.acquire("b", 4, NOW, LOCK, LIMIT, whole_batches=100) == [(0, 2, 2), (12, 19, 2)]
        assert sp.acquire("b", 4, NOW, LOCK, LIMIT, whole_batches=6) == [(20, 25, 2)]  # 6 at most
        assert sp.acquire("c", 1, NOW, LOCK, LIMIT) == [(26, 26, 2)]  # off: exactly max_records
    finally:
        sp.close()


def test_max_bytes_bounds_the_fresh_run_to_the_batches_within_it_at_least_one(tmp_path, log):
    size = log.read_batches(0, max_bytes=1)[0].size_bytes  # each of the three batches' size
    sp = _open(tmp_path, log)
    try:
        assert sp.acquire("a", 25, NOW, LOCK, LIMIT, max_bytes=1) == [(0, 9, 1)]  # one batch, at least
        assert sp.acquire("a", 5, NOW, LOCK, LIMIT, max_bytes=1) == [(10, 14, 1)]  # within it: max_records
        assert sp.acquire("a", 5, NOW, LOCK, LIMIT, whole_batches=100, max_bytes=1) == [(15, 19, 1)]
        assert sp.acquire("a", 1, NOW, LOCK, LIMIT, whole_batches=100, max_bytes=size - 1) == [(20, 29, 1)]
    finally:
        sp.close()
    sp = _open(tmp_path / "other", log)
    try:
        assert sp.acquire("b", 25, NOW, LOCK, LIMIT, max_bytes=2 * size) == [(0, 19, 1)]
        assert sp.acquire("b", 25, NOW, LOCK, LIMIT, whole_batches=100, max_bytes=3 * size) == [(20, 29, 1)]
    finally:
        sp.close()
