"""confluent-kafka helpers the Kafka tests share."""

from __future__ import annotations

import time

#: Producer settings for records that must reach the broker as one batch: flush() sends what is
#: queued at once, overriding linger.ms (librdkafka), so the batch is exactly what was produced
#: before flush(), however long a busy machine pauses the producing loop.
ONE_BATCH = {"linger.ms": 60_000, "batch.size": 1 << 20}


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
