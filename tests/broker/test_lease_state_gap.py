"""A state log that ends below its snapshot's ``state_offset`` (a data dir of
VQS before 2026-11-25 that crashed after a snapshot named records still in
the log's buffer: test_queue_snapshot_crash.py) is filled up to it at
recovery, so a record appended after the open is replayed at the next one."""

from __future__ import annotations

import json
import os

from vqs.broker.queue import lease_records, lease_state
from vqs.record import decode_batch, encode_batch
from vqs.storage.durable_file import atomic_write


def _lease(o: int, nonce: int) -> bytes:
    return lease_records.encode_leases([o, nonce, 10**13, 1, 1, 1], 1)


def _move_snapshot_offset(path: str, by: int) -> int:
    snap = os.path.join(path, lease_state.SNAPSHOT)
    with open(snap, "rb") as f:
        b = decode_batch(f.read(), 0)
    meta = json.loads(b.value(0))
    meta["state_offset"] += by
    atomic_write(snap, encode_batch(0, [json.dumps(meta).encode(), b.value(1), b.value(2)], timestamps=1))
    return meta["state_offset"]


def test_a_record_after_a_snapshot_past_the_log_end_is_replayed(tmp_path):
    path = str(tmp_path / "state")
    store = lease_state.LeaseStateStore(path, flush="always")
    store.recover()
    store.append(_lease(1, 5))
    store.write_snapshot(low=0, cursor=2, live={}, deleted_ahead=(), now_ms=1)
    store.close()
    s = _move_snapshot_offset(path, 3)  # the log lost the 3 records the snapshot names

    store = lease_state.LeaseStateStore(path, flush="always")
    try:
        st = store.recover()
        assert st.live == {}
        assert store.log.end_offset == s
        store.append(_lease(7, 9))  # after the open: lands at s, not below it
    finally:
        store.close()
    store = lease_state.LeaseStateStore(path, flush="always")
    try:
        st = store.recover()
        assert list(st.live) == [7] and st.live[7][0] == 9
        assert store.log.end_offset == s + 1  # filled once
    finally:
        store.close()
