"""The camera feed: appends frame events to its topic, and refuses a topic that holds
something else (the job would count those records as frames)."""

from __future__ import annotations

import pytest

from vqs import Broker, ConfigError
from vqs.pipelines.camera import feed


def test_the_feed_refuses_an_unrelated_topic_and_appends_to_its_own(tmp_path):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("orders", partitions=2)
        b.producer().send("orders", b'{"order": 1}', partition=1)
    with pytest.raises(ConfigError, match="not camera frame events"):
        feed(path=d, topic="orders", cameras=1, seconds=1)
    first = feed(path=d, topic="frames", cameras=2, seconds=1)
    again = feed(path=d, topic="frames", cameras=2, seconds=1)  # its own topic: appended to
    assert first.frames_sent > 0 and again.frames_sent > 0
    with Broker(d) as b:
        assert sum(r["end_offset"] for r in b.offsets("orders")) == 1  # nothing appended to it
