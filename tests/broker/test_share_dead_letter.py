"""Archived share-group records copied to a dead-letter topic (``errors.deadletterqueue.topic.name``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from vqs import Broker
from vqs.errors import ConfigError


def _setup(broker, n=6, dlq_partitions=1, **configs):
    broker.create_topic("t", 2)
    broker.create_topic("dlq.t", dlq_partitions)
    p = broker.producer()
    for i in range(n):
        p.send("t", b"v%03d" % i, key=b"k%d" % i, partition=i % 2)
    p.flush()
    broker.share_groups.alter_group_configs("g", {"share.auto.offset.reset": "earliest",
                                                  "share.delivery.count.limit": "2",
                                                  "errors.deadletterqueue.topic.name": "dlq.t", **configs})


def _dead(broker, partitions=1):
    t = broker.topic("dlq.t")
    return [r for p in range(partitions) for r in t.read(p, 0, max_records=1000)]


def test_rejected_and_exhausted_records_are_copied_once_with_kafkas_headers(broker):
    _setup(broker)
    c = broker.share_consumer("t", "g")
    recs = {r.value: r for r in c.poll(max_records=100)}
    c.acknowledge(recs[b"v000"], "reject")
    c.acknowledge(recs[b"v001"], "release")
    for v in (b"v002", b"v003", b"v004", b"v005"):
        c.acknowledge(recs[v])
    (again,) = c.poll()
    assert again.value == b"v001" and again.delivery_count == 2
    c.acknowledge(again, "release")  # at the limit: archived
    assert c.poll() == []
    dead = _dead(broker)
    assert len(dead) == 2
    h = [dict(r.headers) for r in dead]
    assert h[0] == {"__dlq.errors.topic": b"t", "__dlq.errors.partition": b"0", "__dlq.errors.offset": b"0",
                    "__dlq.errors.group": b"g", "__dlq.errors.delivery.count": b"1",
                    "__dlq.errors.message": b"Offset rejected by client."}
    assert (h[1]["__dlq.errors.partition"], h[1]["__dlq.errors.offset"], h[1]["__dlq.errors.delivery.count"],
            h[1]["__dlq.errors.message"]) == (b"1", b"0", b"2", b"Offset delivery count exceeded the threshold.")
    assert all(r.value is None and r.key is None for r in dead)  # copy.record.enable: false by default


def test_copy_record_enable_copies_key_and_value_to_partition_source_mod_n(broker):
    _setup(broker, n=2, dlq_partitions=2, **{"errors.deadletterqueue.copy.record.enable": "true"})
    c = broker.share_consumer("t", "g")
    for r in c.poll(max_records=10):
        c.acknowledge(r, "reject")
    t = broker.topic("dlq.t")
    for p in (0, 1):
        (r,) = t.read(p, 0)
        assert (r.key, r.value, dict(r.headers)["__dlq.errors.partition"]) == (b"k%d" % p, b"v%03d" % p,
                                                                               str(p).encode())


def test_the_dead_letter_topic_must_exist_and_blank_means_none(broker):
    broker.create_topic("t", 1)
    sg = broker.share_groups
    with pytest.raises(ConfigError, match="does not exist"):
        sg.alter_group_configs("g", {"errors.deadletterqueue.topic.name": "nowhere"})
    with pytest.raises(ConfigError, match="true or false"):
        sg.alter_group_configs("g", {"errors.deadletterqueue.copy.record.enable": "maybe"})
    sg.alter_group_configs("g", {"errors.deadletterqueue.topic.name": "", "share.auto.offset.reset": "earliest"})
    broker.producer().send("t", b"x")
    c = broker.share_consumer("t", "g")
    (r,) = c.poll()
    c.acknowledge(r, "reject")  # archived, copied nowhere
    assert c.poll() == []


# Killed between the dead-letter copy and the state record that settles the archived records.
_CRASH = """
import os, signal, sys
from vqs import Broker
from vqs.broker.share import dead_letter
b = Broker(sys.argv[1], flush="interval", flush_interval_ms=60_000)
c = b.share_consumer("t", "g")
recs = c.poll(max_records=100)
send = dead_letter.DeadLetters.send
def send_then_die(self, log, items):
    send(self, log, items)
    os.kill(os.getpid(), signal.SIGKILL)
for r in recs:
    if r.value != b"v000":
        c.acknowledge(r)
dead_letter.DeadLetters.send = send_then_die
c.acknowledge([r for r in recs if r.value == b"v000"][0], "reject")
"""


def test_a_sigkill_between_the_copy_and_the_settlement_copies_once(data_dir, child_env):
    with Broker(data_dir) as b:
        _setup(b)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_CRASH), data_dir], env=child_env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    with Broker(data_dir) as b:
        assert len(_dead(b)) == 1
        c = b.share_consumer("t", "g")
        assert c.poll() == []  # the copied record is settled: neither delivered nor copied again
        assert len(_dead(b)) == 1
    with Broker(data_dir) as b:  # and it stays so after a clean restart
        assert b.share_consumer("t", "g").poll() == [] and len(_dead(b)) == 1
