"""A queue's ``send_batch`` is all or nothing on a full disk (a 3 MiB tmpfs, a
spent btrfs quota, a full xfs: tests/conftest.py ``small_disk``) under
``flush="always"``, and for plain bodies under ``interval`` (the send buffer):
a batch refused with DiskFullError leaves none of its messages to be delivered
later, so a client that retries it gets no duplicates; every acknowledged one is
delivered. Before, under ``always``, the log's buffer wrote a batch's first
messages as it filled and refused the rest at the flush: about half of a refused
batch of 10 was delivered after the drain. Not covered (still so): a batch with
attributes under ``interval``, whose records join the log's buffer one by one
(vqs.broker.queue.core ``_append_locked``)."""

from __future__ import annotations

import os

import pytest
from disk_fill import drain_queue

import vqs
from vqs import DiskFullError


@pytest.mark.parametrize(("flush", "attributes"), [("always", False), ("always", True), ("interval", False)],
                         ids=["always-plain", "always-attributes", "interval-plain"])
def test_a_refused_batch_leaves_none_of_its_messages(small_disk, flush, attributes):
    with vqs.Broker(os.path.join(small_disk.path, "b"), flush=flush) as b:
        q = b.create_queue("q")
        acked: list = []
        refused: list = []
        k = 0
        while len(refused) < 30 and k < 20_000:
            bodies = [b"b%05d-%d" % (k, i) + b"x" * 900 for i in range(10)]
            entries = [{"body": x, "attributes": {"n": str(k)}} for x in bodies] if attributes else bodies
            k += 1
            try:
                q.send_batch(entries)
                acked += bodies
            except DiskFullError:
                refused += bodies
        assert len(refused) == 30 and len(acked) > 500
        got = drain_queue(q, batch=True)
        assert sorted(got) == sorted(acked)  # none refused, each acknowledged one once
