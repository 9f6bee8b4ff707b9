"""Idempotent producer state: sequences checked, kept in the log, recovered on reopen."""

from __future__ import annotations

import os

import pytest

from vqs.broker import Broker
from vqs.broker.layout import producer_snapshot_file


def _send(broker, pid, epoch, seq, n):
    t = broker.topic("t")
    return broker.producer_states.append(t, 0, pid, epoch, seq, [b"v%d" % (seq + i) for i in range(n)],
                                         None, None, 1000)


@pytest.mark.parametrize("snapshot", ["kept", "corrupt", "removed"])
def test_duplicates_are_recognised_after_reopen(tmp_path, snapshot):
    with Broker(tmp_path / "d") as b:
        b.create_topic("t")
        pid, epoch = b.producer_states.new_producer()
        assert _send(b, pid, epoch, 0, 2) == ("append", 0)
        assert _send(b, pid, epoch, 2, 3) == ("append", 2)
        assert _send(b, pid, epoch, 0, 2) == ("duplicate", 0)
        assert _send(b, pid, epoch, 9, 1)[0] == "out_of_order"
        log_path = b.topic("t").log(0).path
    snap = producer_snapshot_file(log_path)
    assert os.path.exists(snap)  # written at close, after the log was flushed
    if snapshot == "corrupt":
        with open(snap, "wb") as f:
            f.write(b"{not json")
    elif snapshot == "removed":
        os.remove(snap)  # as after a crash: the state comes from the log's batch headers alone
    with Broker(tmp_path / "d") as b:
        assert _send(b, pid, epoch, 2, 3) == ("duplicate", 2)
        assert _send(b, pid, epoch, 5, 1) == ("append", 5)
        assert _send(b, pid, epoch - 1, 6, 1)[0] == "fenced"
        assert b.producer_states.new_producer()[0] > pid
        assert [r.value for r in b.topic("t").read(0, 0)] == [b"v0", b"v1", b"v2", b"v3", b"v4", b"v5"]


@pytest.mark.parametrize("snapshot", ["kept", "removed"])
def test_a_batch_split_on_append_stays_one_batch_after_reopen(tmp_path, snapshot):
    with Broker(tmp_path / "d", batch_max_bytes=100) as b:
        b.create_topic("t")
        pid, epoch = b.producer_states.new_producer()
        t = b.topic("t")
        big = [b"x" * 40] * 5  # 200 bytes: stored as pieces of 2, 2 and 1 records
        assert b.producer_states.append(t, 0, pid, epoch, 0, big, None, None, 1000) == ("append", 0)
        assert len(t.log(0).read_batches(0)) == 3
        log_path = t.log(0).path
    if snapshot == "removed":
        os.remove(producer_snapshot_file(log_path))  # as after a crash
    with Broker(tmp_path / "d", batch_max_bytes=100) as b:
        t = b.topic("t")
        assert b.producer_states.append(t, 0, pid, epoch, 0, big, None, None, 1000) == ("duplicate", 0)
        assert _send(b, pid, epoch, 5, 1) == ("append", 5)
        assert _send(b, pid, epoch, 7, 1)[0] == "out_of_order"


def test_pieces_with_consecutive_sequences_written_by_older_versions_cover_a_retry(tmp_path):
    with Broker(tmp_path / "d") as b:
        b.create_topic("t")
        pid, epoch = b.producer_states.new_producer()
        log = b.topic("t").log(0)
        log.append_batch([b"a", b"b"], producer=(pid, epoch, 0))  # how a split was stored before
        log.append_batch([b"c"], producer=(pid, epoch, 2))
        log.flush()
    with Broker(tmp_path / "d") as b:
        t = b.topic("t")
        assert b.producer_states.append(t, 0, pid, epoch, 0, [b"a", b"b", b"c"], None, None, 1) == ("duplicate", 0)
        assert b.producer_states.append(t, 0, pid, epoch, 2, [b"c"], None, None, 1) == ("duplicate", 2)
        assert b.producer_states.append(t, 0, pid, epoch, 0, [b"a", b"b", b"c", b"d"], None, None, 1)[0] \
            == "out_of_order"
