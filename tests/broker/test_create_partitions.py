"""Growing a topic's partition count (Broker.create_partitions): persistence, refusals, and
a process SIGKILLed while growing leaves every topic openable with its old or new count."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from vqs.broker import Broker
from vqs.errors import ConfigError, OffsetOutOfRange, TopicDoesNotExist


def test_grow_keeps_records_and_persists(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t", partitions=2, retention_ms=60_000)
        p = b.producer()
        for i in range(5):
            p.send("t", b"v%d" % i, partition=1)
        t = b.create_partitions("t", 4)
        assert t.partitions == 4 and t.end_offsets() == [0, 5, 0, 0]
        p.send("t", b"new", partition=3)
        assert [r.value for r in t.read(3, 0)] == [b"new"]
        assert t.config["retention_ms"] == 60_000
        for bad in (4, 3, 0, 10_001, "5"):
            with pytest.raises(ConfigError):
                b.create_partitions("t", bad)
        with pytest.raises(TopicDoesNotExist):
            b.create_partitions("nope", 3)
    with Broker(data_dir) as b:
        t = b.topic("t")
        assert t.partitions == 4 and t.end_offsets() == [0, 5, 0, 1]
        assert t.overrides == {"retention_ms": 60_000}


def test_leftover_of_an_interrupted_grow_is_ignored_then_replaced(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t", partitions=1)
    # what a crash before topic.json's replace leaves: a partition directory topic.json does not name
    stale = os.path.join(data_dir, "topics", "t", "1")
    os.mkdir(stale)
    with open(os.path.join(stale, "junk"), "wb") as f:
        f.write(b"x" * 100)
    with Broker(data_dir) as b:
        assert b.topic("t").partitions == 1
        t = b.create_partitions("t", 2)
        assert t.end_offsets() == [0, 0] and not os.path.exists(os.path.join(stale, "junk"))


def test_delete_records(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t")
        p = b.producer()
        for i in range(10):
            p.send("t", b"v%d" % i)
        assert b.delete_records("t", 0, 4) == 4
        assert b.delete_records("t", 0, 2) == 4  # never backwards
        assert [r.offset for r in b.topic("t").read(0, 4, max_records=2)] == [4, 5]
        with pytest.raises(OffsetOutOfRange):
            b.delete_records("t", 0, 11)
        assert b.delete_records("t", 0, -1) == 10
    with Broker(data_dir) as b:
        assert b.topic("t").start_offset(0) == 10


CHILD = r"""
import sys
from vqs.broker import Broker
b = Broker(sys.argv[1], flush="always")
n = 0
while True:
    name = f"t{n}"
    b.create_topic(name, partitions=1)
    b.producer().send(name, b"first", partition=0)
    for count in range(2, 6):
        b.create_partitions(name, count)
        print(name, count, flush=True)
    n += 1
"""


@pytest.mark.parametrize("lines", [1, 3, 7, 12])
def test_sigkill_while_growing_leaves_old_or_new_count(data_dir, lines):
    p = subprocess.Popen([sys.executable, "-c", CHILD, data_dir], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    done = {}
    try:
        for _ in range(lines):
            name, count = p.stdout.readline().split()
            done[name.decode()] = int(count)
    finally:
        p.send_signal(signal.SIGKILL)
        _, err = p.communicate()
    assert p.returncode == -signal.SIGKILL, err.decode(errors="replace")
    with Broker(data_dir) as b:
        for name in b.topics():
            t = b.topic(name)
            acked = done.get(name, 1)
            assert acked <= t.partitions <= acked + 1  # acknowledged growth kept; at most one more
            first = [r.value for r in t.read(0, 0)]
            assert first == [b"first"] if name in done else first in ([], [b"first"])
            b.create_partitions(name, t.partitions + 1)  # and it grows on


def test_grow_a_topic_with_settings_that_are_not_log_settings(data_dir):
    """New partitions open with the same Log settings as the first ones: the topic's own
    max_message_bytes, cleanup_policy or an unlimited retention are not Log.open arguments."""
    with Broker(data_dir) as b:
        b.create_topic("t", max_message_bytes=1000, retention_ms=-1, cleanup_policy="compact,delete")
        t = b.create_partitions("t", 3)
        assert [t.log(p).retention_ms for p in range(3)] == [None, None, None]
        assert t.config["cleanup_policy"] == "compact,delete"
