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
