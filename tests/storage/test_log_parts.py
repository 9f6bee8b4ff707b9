"""``Log`` is a facade over parts that each own their state (log.py): no
mixins, every part with its own slots, and no part holding the log strongly
(a dropped log is freed at once, its grant given back)."""

from __future__ import annotations

import gc
import weakref

import pytest

from vqs.storage import Log
from vqs.storage.group_commit import GroupCommit
from vqs.storage.log_buffer import WriteBuffer
from vqs.storage.log_durability import Checkpoint, Durability
from vqs.storage.log_reads import Reads
from vqs.storage.log_space import Grant, SpaceGate
from vqs.storage.segments import Segments

PARTS = (Segments, WriteBuffer, Grant, SpaceGate, Durability, Checkpoint, Reads, GroupCommit)


def test_log_and_its_parts_have_no_mixins():
    for cls in (Log, *PARTS):
        assert cls.__mro__ == (cls, object), cls
        assert cls.__slots__, cls


def test_each_part_of_an_open_log_is_its_own_object(tmp_path):
    with Log.open(tmp_path / "log") as lg:
        parts = (lg._segs, lg._buf, lg._grant, lg._space, lg._sync, lg._sync.checkpoint, lg._reads, lg._group)
        assert [type(p) for p in parts] == list(PARTS)
        assert not any(hasattr(p, "__dict__") for p in (lg, *parts))  # no state added from outside
        assert lg._buf.grant is lg._grant is lg._space.grant  # bound once, one owner


@pytest.mark.parametrize("flush", ["always", "interval", "never"])
def test_a_dropped_log_is_freed_without_the_cycle_collector(tmp_path, flush):
    gc.disable()
    try:
        # (no roll: the flusher thread holds a log while it fsyncs a sealed segment)
        lg = Log.open(tmp_path / "log", flush=flush, flush_interval_ms=600_000)
        lg.append_batch([b"y"] * 10)
        for i in range(200):
            lg.append(b"x" * 64, key=b"k%d" % i)
        assert len(lg.read(0, max_records=5)) == 5
        grant = lg._grant
        assert grant.buffer > 0  # buffered records (or, under always, the rest kept between writes)
        ref = weakref.ref(lg)
        del lg  # never closed: a part that held the log would keep it (and its grant) alive
        assert ref() is None
        assert grant.buffer == grant.indexes == 0  # given back when it was freed
    finally:
        gc.enable()


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize("room", [0, 1, 95, 96, 97, 143, 144, 1000, 50_000, 1 << 20, 3 << 20])
def test_settle_sets_the_thresholds_set_thresholds_would(codec, room):
    """WriteBuffer.settle computes the empty buffer's thresholds inline (after every
    write): the same as set_thresholds, for any grant left."""
    grant = Grant(None, 0, False)  # (no governor: nothing written, the rest kept)
    buf = WriteBuffer(grant, codec, 1 << 20, 10_000)
    grant.buffer = room
    buf.settle(keep=True)
    inline = (buf.flush_bytes, buf.flush_records)
    buf.set_thresholds()
    computed = (buf.flush_bytes, buf.flush_records)
    if room:
        assert inline == computed
    else:  # no grant: both send the next append to the slow path
        assert computed[0] <= 0 and computed[1] == 0 and inline == (0, 0)
