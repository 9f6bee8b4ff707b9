"""``Queue`` is a facade over parts that each own their state (core.py): no
mixins, every part with its own slots, the queue types subclassing ``Queue``
alone, and no part's state kept again on the queue."""

from __future__ import annotations

import pytest

from vqs.broker.queue import FifoQueue, Queue, StandardQueue
from vqs.broker.queue.dedup import DedupWindow
from vqs.broker.queue.fair import FairShare
from vqs.broker.queue.lease_state import COMPACT_BYTES, LeaseStateStore
from vqs.broker.queue.leases import LeaseTable
from vqs.broker.queue.maintenance import Maintenance
from vqs.broker.queue.receipt import ReceiptCodec
from vqs.broker.queue.redrive import Mover
from vqs.broker.queue.send_buffer import SendBuffer, Tail
from vqs.broker.queue.settings import QueueSettings

PARTS = (QueueSettings, LeaseTable, ReceiptCodec, LeaseStateStore, SendBuffer, Mover, Maintenance)
#: what the mixins kept on the queue, now each part's own
FORMER = ("_state_bytes", "_compact_at", "_compact_tried_end", "_reclaim_low", "_reclaim_next",
          "_drain_reclaim", "_bytes_per_offset", "_sent_n", "_sent_b", "_last_purge_ms")


def _parts(q):
    return (q._settings, q._leases, q._leases.codec, q._state, q._sends, q._mover, q._maint)


def test_queue_and_its_parts_have_no_mixins():
    assert Queue.__bases__ == (object,)
    assert StandardQueue.__mro__ == (StandardQueue, Queue, object)
    assert FifoQueue.__mro__ == (FifoQueue, Queue, object)
    for cls in (*PARTS, Tail, FairShare, DedupWindow):
        assert cls.__mro__ == (cls, object), cls
        assert cls.__slots__, cls


@pytest.mark.parametrize("fifo", [False, True])
def test_each_part_of_an_open_queue_is_its_own_object(reg, fifo):
    q = reg.create("q.fifo" if fifo else "q", **({"fifo": True} if fifo else {}))
    parts = _parts(q)
    assert [type(p) for p in parts] == list(PARTS)
    assert not any(hasattr(p, "__dict__") for p in parts)  # no state added from outside
    assert len({id(p) for p in parts}) == len(parts)
    assert not set(vars(q)) & set(FORMER)  # the mixins' shared state is gone from the queue
    assert q._log.on_disk_short == q._maint.disk_short  # bound once, to its owner


def test_the_parts_keep_the_bookkeeping_the_mixins_shared(reg):
    q = reg.create("q")
    st, m = q._state, q._maint
    assert (st.grown, st.compact_at, m.sent_n) == (0, COMPACT_BYTES, 0)
    q.send_batch([b"a", b"bb"])
    assert (m.sent_n, m.sent_b) == (2, 3)
    got = q.receive(2)
    assert st.grown > 0  # the lease records, counted by the store that appends them
    q.delete_batch([g.receipt_handle for g in got])
    assert q._low == 2 and m.reclaim_next > 0
    q.compact()
    assert st.grown == 0
    q.purge()
    assert m.last_purge_ms is not None
