"""A share group's start offsets as the admin sees them: read, set (``alter_start_offset``), deleted."""

from __future__ import annotations

import pytest

from vqs import Broker, GroupNotEmpty


def _setup(b, n=10):
    b.create_topic("t", 1)
    p = b.producer()
    for i in range(n):
        p.send("t", b"v%d" % i)
    p.flush()
    b.share_groups.configure(auto_offset_reset="earliest")


def test_alter_moves_the_start_forgets_what_is_in_flight_and_survives_a_reopen(data_dir):
    with Broker(data_dir) as b:
        _setup(b)
        sg = b.share_groups
        assert sg.start_offset("g", "t", 0) == -1  # no state yet
        c = b.share_consumer("t", "g")
        recs = c.poll(max_records=4)
        for r in recs[:2]:
            c.acknowledge(r)
        assert sg.start_offset("g", "t", 0) == 2
        with pytest.raises(GroupNotEmpty, match="'g'"):
            sg.alter_start_offset("g", "t", 0, 7)
        c.close()
        assert sg.alter_start_offset("g", "t", 0, 99) == 10  # clamped to the log's end
        assert sg.alter_start_offset("g", "t", 0, 7) == 7
    with Broker(data_dir) as b:
        b.share_groups.configure(auto_offset_reset="earliest")
        assert b.share_groups.start_offset("g", "t", 0) == 7
        assert [r.value for r in b.share_consumer("t", "g").poll()] == [b"v7", b"v8", b"v9"]


def test_delete_offsets_starts_the_group_afresh(broker):
    _setup(broker, n=3)
    sg = broker.share_groups
    c = broker.share_consumer("t", "g")
    for r in c.poll():
        c.acknowledge(r)
    with pytest.raises(GroupNotEmpty):
        sg.delete_offsets("g", "t")
    c.close()
    assert sg.delete_offsets("g", "t") == [0]
    assert sg.start_offset("g", "t", 0) == -1 and sg.stored_partitions("g") == []
    assert len(broker.share_consumer("t", "g").poll()) == 3
