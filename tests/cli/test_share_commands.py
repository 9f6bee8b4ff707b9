"""``vqs share list`` and ``vqs share describe`` on a data directory (in-process: cli_helpers.run_vqs);
tests/server/kafka/test_share_groups.py describes a share group of Kafka consumers over REST."""

from __future__ import annotations

import json

from cli_helpers import run_vqs

from vqs import Broker


def test_share_describe_shows_members_records_in_flight_and_delivery_counts(tmp_path):
    data = str(tmp_path / "data")
    with Broker(data) as b:
        b.create_topic("jobs", 1)
        p = b.producer()
        for i in range(5):
            p.send("jobs", b"j%d" % i)
        p.flush()
        b.share_groups.configure(auto_offset_reset="earliest")
        c = b.share_consumer("jobs", "workers")
        r0, r1, r2, *_ = c.poll()
        c.acknowledge(r0)
        c.acknowledge(r1, "release")
        c.acknowledge(r2, "reject")
    listed = run_vqs("share", "list", "--data-dir", data)
    assert listed.returncode == 0 and listed.stdout.split() == [b"workers"]
    r = run_vqs("share", "describe", "workers", "--data-dir", data, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["group"] == "workers" and d["state"] == "Empty" and d["members"] == []  # membership: in memory
    (part,) = d["partitions"]
    # reopened: the two records acquired and never settled, and the released one, are available
    assert part == {"topic": "jobs", "partition": 0, "start_offset": 1, "cursor": 5, "acquired": 0,
                    "available": 3, "delivery_counts": {"1": 3}}
    text = run_vqs("share", "describe", "workers", "--data-dir", data)
    assert text.returncode == 0 and b"1:3" in text.stdout and b"share group workers: Empty" in text.stdout
    missing = run_vqs("share", "describe", "nobody", "--data-dir", data)
    assert missing.returncode != 0 and b"nobody" in missing.stderr
