"""A queue drained on a full disk gives its space back and takes sends again on
its own: no restart, no space freed by hand, no quota raised (a 3 MiB tmpfs,
and a btrfs subvolume under a spent 3 MiB quota: tests/conftest.py). The
queue's reclaim deletes the consumed messages log through ``delete_before``,
whose roll of the wholly consumed active segment first frees what it lets go
when even an empty new file is refused (vqs.storage.log_space). Deletes go in
batches here: one lease-state record per receive. (Not covered: one delete at
a time under ``interval`` on btrfs, where the lease-state log's full-disk
compaction can leave receives refused, its new segment finding no room for
the quota headroom's ballast and its reserve both; a separate defect.)"""

from __future__ import annotations

import os

import pytest
from disk_fill import drain_queue, fill_queue

import vqs
from vqs.storage.log_dir import list_segment_bases


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_a_drained_queue_takes_sends_again_with_no_space_freed_by_hand(full_disk, flush):
    path = os.path.join(full_disk.path, "b")
    body = b"x" * (2000 if flush == "always" else 400)  # (always: an fsync per send, fewer)
    with vqs.Broker(path, flush=flush) as b:
        q = b.create_queue("q")
        sent = fill_queue(q, b, body)
        assert sent * len(body) > 1 << 20, sent
        got = drain_queue(q, batch=True)
        assert sorted(got) == [body + b"%06d" % i for i in range(sent)]
        assert q.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}
        # the consumed messages log went (the reclaim rolled its active segment)
        messages = os.path.join(path, "queues", "q", "messages")
        assert list_segment_bases(messages) == [sent], os.listdir(messages)
        # and its space is back: 1 MB of sends, a third of the disk, more than
        # any space the full disk had left over
        after = [b"%04d" % i + b"y" * 2000 for i in range(500)]
        for v in after:
            q.send(v)
        assert sorted(drain_queue(q, batch=True)) == after
    with vqs.Broker(path, flush=flush) as b:  # and it reopens with nothing left to receive
        assert b.queue("q").receive(10) == []
