"""Kafka's group rules against a real server: a group id that is not a VQS name."""

from __future__ import annotations

import time

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def _uid(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"


def _topic(server, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(10)
    return name


class _Consumer(Consumer):
    """A Consumer that keeps the errors it reported (error_cb and polled error events)."""

    errors: list


def _consumer(server, group, **conf):
    errors: list = []
    c = _Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                  "error_cb": errors.append, **conf})
    c.errors = errors
    return c


def _assignment(c) -> set[int]:
    return {p.partition for p in c.assignment()}


def _poll_until(consumers, cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error():
                c.errors.append(m.error())


def test_a_group_id_that_lists_the_assignors_works(kafka_server):
    """librdkafka's 0132_strategy_ordering uses "roundrobin,range" as group id and assignor list."""
    topic = _topic(kafka_server, _uid("strategy-order"), 4)
    cs = [_consumer(kafka_server, "roundrobin,range", **{"partition.assignment.strategy": "roundrobin,range",
                                                        "client.id": f"c{i}"}) for i in range(2)]
    try:
        for c in cs:
            c.subscribe([topic])
        _poll_until(cs, lambda: all(len(_assignment(c)) == 2 for c in cs), 30, "both assigned")
        assert sorted(sorted(_assignment(c)) for c in cs) == [[0, 2], [1, 3]]  # round-robin, the first listed
        cs[0].commit(offsets=[TopicPartition(topic, p, 3) for p in _assignment(cs[0])], asynchronous=False)
        got = cs[0].committed([TopicPartition(topic, p) for p in _assignment(cs[0])], timeout=10)
        assert {tp.offset for tp in got} == {3}
    finally:
        for c in cs:
            c.close()
