"""Group commits on a spent btrfs quota (``quota_disk``) when every log is
``flush="always"``.

Found by the issue-13 judge: a broker with a topic under ``flush="always"``
filled a btrfs subvolume's 3 MiB quota; every group commit after that raised
DiskFullError (EDQUOT at the rename of ``offsets.json.spare``), so a consumer
could read but not commit. The rename needs metadata room, which the quota
headroom's ballast provides (vqs/storage/quota_headroom.py); but only logs
that reserve space (``interval``) made one, so under ``always`` none stood.
Now a commit makes sure one stands (``stand``), and a commit on the spent
quota spends it. Root only (a loop mount); skipped with the reason elsewhere."""

from __future__ import annotations

import os

import pytest

import vqs
from vqs import DiskFullError


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_group_commits_go_on_under_a_spent_quota(quota_disk, flush):
    b = vqs.Broker(os.path.join(quota_disk.path, "data"), flush=flush)
    try:
        b.create_topic("t")
        b.commit_offsets("g", {("t", 0): 0})  # the group's first commit, while there is room
        producer = b.producer()
        n = 0
        with pytest.raises(DiskFullError):
            while n < 10_000:
                producer.send("t", b"%08d" % n + b"v" * 3000)
                n += 1
        consumer = b.consumer("t", group="g")
        got = 0
        while records := consumer.poll(max_records=500, timeout=0.2):
            got += len(records)
            consumer.commit()  # each one on the spent quota
        assert got >= n
        for k in range(3):
            b.commit_offsets("g", {("t", 0): k + 1})
        assert b.group_offsets("g") == {vqs.TopicPartition("t", 0): 3}
        consumer.close()
    finally:
        try:
            b.close()
        except DiskFullError:
            pass  # (the refused send: nothing acknowledged is at stake)
    with vqs.Broker(os.path.join(quota_disk.path, "data"), flush=flush) as b:
        assert b.group_offsets("g") == {vqs.TopicPartition("t", 0): 3}
