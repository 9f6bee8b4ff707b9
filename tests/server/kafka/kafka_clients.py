"""confluent-kafka helpers the Kafka tests share."""

from __future__ import annotations

import time


def one_batch_producer(bootstrap: str, topic: str, **conf):
    """A confluent-kafka Producer whose records for ``topic``, produced before ``flush()``, reach
    the broker as one batch per partition, however long a busy machine pauses the producing loop.

    Two rules make it so. linger.ms is far longer than any test, so nothing leaves before
    ``flush()``, which sends what is queued at once (librdkafka's ``rk_flushing`` overrides
    linger). And the producer knows the topic's partitions and their leader before the first
    record: records produced before that wait on librdkafka's unassigned queue, which the
    metadata's arrival moves onto the partition while a ``flush()`` already under way sends what
    has arrived, so the records leave as two batches."""
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 60_000, "batch.size": 1 << 20, **conf})
    md = p.list_topics(topic, timeout=10).topics[topic]
    assert md.error is None and md.partitions, f"{topic}: {md.error}"
    return p


def delivery_codes(conf: dict, topic: str, values) -> list:
    """The delivery error code of each of ``values`` produced to ``topic`` with ``conf`` (None:
    delivered), waited for (``message.timeout.ms`` 10 s unless ``conf`` sets it)."""
    import confluent_kafka as ck

    codes: list = []
    p = ck.Producer({"message.timeout.ms": 10_000, **conf})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _m: codes.append(err.code() if err else None))
    p.flush(30)
    return codes


def admin_results(futures: dict) -> dict:
    """An AdminClient call's futures, resolved: each key's result, or its error code."""
    import confluent_kafka as ck

    out = {}
    for key, fut in futures.items():
        try:
            out[key] = fut.result(15)
        except ck.KafkaException as e:
            out[key] = e.args[0].code()
    return out


def fails_to_log_in(conf: dict) -> bool:
    """The client reports an authentication error (within 10 s: its first login's answer)."""
    import confluent_kafka as ck

    errors = []
    p = ck.Producer({**conf, "error_cb": errors.append})
    p.produce("login-probe", b"x")
    deadline = time.monotonic() + 10
    while not any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        p.poll(0.05)
    p.purge()
    return any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors)
