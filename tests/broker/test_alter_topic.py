"""Changing an open topic's settings (Broker.alter_topic): validated before anything changes,
persisted, and in force for the open partitions at once."""

from __future__ import annotations

import fs_fault
import pytest

from vqs.broker import Broker
from vqs.errors import ConfigError, DiskFullError, TopicDoesNotExist


def test_alter_is_in_force_at_once_and_persisted(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t", partitions=2, retention_ms=60_000)
        t = b.alter_topic("t", {"retention_bytes": 4096, "compression": "zstd", "max_message_bytes": 100})
        assert t.overrides == {"retention_ms": 60_000, "retention_bytes": 4096, "compression": "zstd",
                               "max_message_bytes": 100}
        assert t.config["compression"] == "zstd" and t.message_limit(1 << 20) == 100
        for p in range(2):
            log = t.log(p)
            assert (log.retention_bytes, log.compression, log.retention_ms) == (4096, "zstd", 60_000)
        b.alter_topic("t", {"retention_ms": -1, "compression": None})  # unlimited; back to the default
        assert t.log(0).retention_ms is None and t.log(1).compression is None
        assert t.config["retention_ms"] is None and t.overrides["retention_ms"] == -1
    with Broker(data_dir) as b:
        t = b.topic("t")
        assert t.overrides == {"retention_ms": -1, "retention_bytes": 4096, "max_message_bytes": 100}
        assert t.log(1).retention_bytes == 4096 and t.log(0).retention_ms is None


def test_replace_returns_every_unnamed_setting_to_its_default(data_dir):
    with Broker(data_dir, segment_bytes=1 << 20) as b:
        b.create_topic("t", retention_ms=60_000, segment_bytes=4096, max_message_bytes=100)
        t = b.alter_topic("t", {"retention_bytes": 8192}, replace=True)
        assert t.overrides == {"retention_bytes": 8192}
        assert t.log(0).segment_bytes == 1 << 20  # the broker's default, not the Log's
        assert t.message_limit(1 << 20) == 1 << 20 and t.log(0).retention_ms is None
        assert b.topic_defaults()["segment_bytes"] == 1 << 20


def test_a_lowered_retention_deletes_segments_at_the_next_pass(data_dir):
    with Broker(data_dir, flush="always") as b:  # (a batch per send: segments roll between them)
        t = b.create_topic("t", segment_bytes=1024)
        p = b.producer()
        for _ in range(40):
            p.send("t", b"x" * 200, partition=0)
        b.flush()
        assert t.start_offset(0) == 0
        b.alter_topic("t", {"retention_bytes": 1024})
        b.apply_retention()
        assert t.start_offset(0) > 0 and t.log(0).size_bytes <= 2048 + 1024


@pytest.mark.parametrize("settings", [{"retention_ms": -2}, {"segment_bytes": 100}, {"compression": "snappy"},
                                      {"max_message_bytes": 0}, {"nope": 1}])
@pytest.mark.parametrize("validate_only", [False, True])
def test_an_invalid_alteration_changes_nothing(data_dir, settings, validate_only):
    with Broker(data_dir) as b:
        b.create_topic("t", retention_ms=60_000)
        with pytest.raises(ConfigError):
            b.alter_topic("t", {"retention_bytes": 10, **settings}, validate_only=validate_only)
        assert b.topic("t").overrides == {"retention_ms": 60_000}
        assert b.alter_topic("t", {"retention_bytes": 10}, validate_only=True).overrides == {"retention_ms": 60_000}
        with pytest.raises(TopicDoesNotExist):
            b.alter_topic("nope", {"retention_ms": 1})
    with Broker(data_dir) as b:
        assert b.topic("t").overrides == {"retention_ms": 60_000} and b.topic("t").log(0).retention_bytes is None


def test_partitions_added_after_an_alteration_take_the_topics_settings(data_dir):
    with Broker(data_dir) as b:  # (max_message_bytes and unlimited retention are not Log.open arguments as such)
        b.create_topic("t", max_message_bytes=100, retention_ms=-1)
        b.alter_topic("t", {"retention_bytes": 4096})
        t = b.create_partitions("t", 3)
        assert t.log(2).retention_bytes == 4096 and t.log(2).retention_ms is None


def test_a_topics_own_flush_over_the_brokers(data_dir):
    """``flush`` and ``flush_interval_ms`` per topic: over the broker's at creation, altered in
    force for the open partitions, kept across a reopen, and back to the broker's when dropped."""
    with Broker(data_dir, flush="interval", flush_interval_ms=100) as b:
        t = b.create_topic("durable", partitions=2, flush="always")
        assert t.flush_always and t.config["flush"] == "always"
        assert [t.log(p).flush_policy for p in range(2)] == ["always", "always"]
        plain = b.create_topic("plain")
        assert not plain.flush_always and plain.log(0).flush_policy == "interval"
        b.alter_topic("plain", {"flush_interval_ms": 5000})
        assert plain.log(0).flush_interval_ms == 5000 and plain.log(0).flush_policy == "interval"
        b.alter_topic("plain", {"flush": "always"})
        assert plain.flush_always and plain.log(0).flush_policy == "always"
        assert plain.log(0).flush_interval_ms == 5000  # (the other setting stays)
        with pytest.raises(ConfigError, match="flush"):
            b.alter_topic("plain", {"flush": "sometimes"})
        with pytest.raises(ConfigError, match="flush_interval_ms"):
            b.create_topic("bad", flush_interval_ms=0)
        assert plain.flush_always  # refused: nothing changed
    with Broker(data_dir, flush="interval", flush_interval_ms=100) as b:
        t, plain = b.topic("durable"), b.topic("plain")
        assert t.log(1).flush_policy == "always" and plain.log(0).flush_interval_ms == 5000
        b.alter_topic("durable", {"flush": None})  # the broker's again
        assert not t.flush_always and [t.log(p).flush_policy for p in range(2)] == ["interval", "interval"]


def test_a_flush_change_that_finds_the_disk_full_rolls_forward(data_dir):
    """Partition 1's buffered records (acknowledged under ``interval``) cannot be written:
    it keeps ``interval`` (its records stay readable, none dropped), every other partition
    and setting takes the change, the topic reports the saved settings, and DiskFullError
    names the partition; the same change again, with room, completes it."""
    with Broker(data_dir, flush="interval", flush_interval_ms=600_000) as b:
        t = b.create_topic("t", partitions=2)
        p = b.producer()
        for i in range(3):
            p.send("t", b"v%d" % i, partition=1)
        fault = fs_fault.install(fs_fault.Fault.space(t.log(1).path, free=0))
        try:
            with pytest.raises(DiskFullError, match=r"partition\(s\) 1 keep their flush policy"):
                b.alter_topic("t", {"flush": "always", "retention_ms": 60_000})
            assert fault.failures >= 1
            assert t.config["flush"] == "always" and t.flush_always
            assert t.log(0).flush_policy == "always"
            assert (t.log(1).flush_policy, t.log(1).retention_ms) == ("interval", 60_000)
            assert [r.value for r in t.log(1).read(0, max_records=10)] == [b"v0", b"v1", b"v2"]
        finally:
            fs_fault.uninstall()
        b.alter_topic("t", {"flush": "always", "retention_ms": 60_000})
        assert t.log(1).flush_policy == "always"
    with Broker(data_dir) as b:
        t = b.topic("t")
        assert t.log(1).flush_policy == "always"
        assert [r.value for r in t.log(1).read(0, max_records=10)] == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("settings", [{"flush_interval_ms": 10**400}, {"retention_ms": 1 << 63},
                                      {"segment_bytes": 1 << 40}, {"delete_retention_ms": 10**30}])
def test_integer_settings_are_bounded_before_anything_is_written(data_dir, settings):
    """Every integer setting is at most a signed 64-bit value (segment_bytes a 32-bit one, as
    Kafka's): a larger one is refused with a short message and topic.json is unchanged (a
    10**400 flush interval was written, then failed the partitions, and the reopened topic
    took no writes)."""
    with Broker(data_dir) as b:
        b.create_topic("t")
        with pytest.raises(ConfigError) as ei:
            b.alter_topic("t", settings)
        assert len(str(ei.value)) < 200
    with Broker(data_dir) as b:
        assert b.topic("t").overrides == {}
        b.producer().send("t", b"x")
