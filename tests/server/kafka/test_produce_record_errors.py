"""Produce v8's record errors: a batch refused for some of its records (keyless records on a
compacted topic) names them, so the client fails those with INVALID_RECORD and the others
with _INVALID_DIFFERENT_RECORD (it may resend those), as Kafka answers (librdkafka's test
0011_produce_batch)."""

from __future__ import annotations

import uuid

import pytest
from kafka_clients import one_batch_producer

pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic


def test_a_refused_batch_names_its_keyless_records(kafka_server):
    topic = f"recerr-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(10)
    errors: dict[int, int] = {}
    p = one_batch_producer(kafka_server.bootstrap, topic, retries=0)
    keyless = {3, 7}
    for i in range(10):
        p.produce(topic, b"v%d" % i, key=None if i in keyless else b"k%d" % i,
                  on_delivery=lambda err, msg, i=i: errors.__setitem__(i, err.code() if err else None))
    assert p.flush(30) == 0
    assert {i for i, c in errors.items() if c == KafkaError.INVALID_RECORD} == keyless
    assert all(errors[i] == KafkaError._INVALID_DIFFERENT_RECORD for i in range(10) if i not in keyless), errors
