"""bench/kafka_bench.py's share-group section (issue: share-group consume +
acknowledge through confluent-kafka >= 0.5x the classic consumer's rate on
the same topic, and >= the SQS front's receive+delete rate at batch 10).

One server (``kafka_share_auto_offset_reset=earliest``: a new share group
reads the topic from its start), one topic of one partition holding ``n``
100-byte records (produced first, batched), one client each, in turn:

* **classic consumer**: ``assign`` partition 0 from offset 0 in a group,
  ``consume(1000)`` to the end, auto commit on (its default) and a final
  synchronous ``commit()``: consume + acknowledge as a classic consumer does;
* **share consumer**: ``ShareConsumer`` in a new share group, ``subscribe``,
  ``poll()`` to the end in implicit acknowledgement mode (each poll accepts
  what the previous one returned), a final ``commit_sync()``: every record
  acquired, delivered and accepted once (checked: ``n`` distinct offsets);
* **SQS front** (boto3 against the same server's HTTP port): a queue filled
  with ``n_sqs`` 100-byte messages by SendMessageBatch, then ReceiveMessage
  (MaxNumberOfMessages=10) + DeleteMessageBatch until all are gone.

Each Kafka rate counts from the first ``consume``/``poll`` call (after
``assign``/``subscribe``) to the last record acknowledged, as the produce
section's consume row does: the first fetch, and the share group's join (one
heartbeat), are part of it; the time to the first record is reported too.
(From the first record on, the classic consumer would be credited with the
records its first, largest fetch brought before it.) The SQS rate counts
from the first ReceiveMessage.
"""

from __future__ import annotations

import time

import _common as C
import _kafka_common as K

TOPIC = "k-share"


def classic(bootstrap: str, n: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-classic", "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 8 << 20})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    first = None
    while got < n:
        for m in c.consume(1000, timeout=5):
            if not m.error():
                if first is None:
                    first = time.perf_counter()
                m.value()
                got += 1
    c.commit(asynchronous=False)
    end = time.perf_counter()
    c.close()
    return {"records": got, "rate": C.rate(got, end - t0), "first_record_s": first - t0}


def share(bootstrap: str, n: int) -> dict:
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-share"})
    c.subscribe([TOPIC])
    offsets: set[int] = set()
    got = 0
    t0 = time.perf_counter()
    first = None
    deadline = time.monotonic() + 120
    while len(offsets) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"share consumer: {len(offsets):,} of {n:,} records after 120 s")
        for m in c.poll(1.0):
            if m.error():
                continue
            if first is None:
                first = time.perf_counter()
            m.value()
            offsets.add(m.offset())
            got += 1
    errors = [e for e in c.commit_sync(30).values() if e is not None]
    end = time.perf_counter()
    c.close()
    return {"records": len(offsets), "deliveries": got, "commit_errors": len(errors),
            "rate": C.rate(len(offsets), end - t0), "first_record_s": first - t0}


def sqs(url: str, n: int) -> dict:
    import boto3

    client = boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="y")
    q = client.create_queue(QueueName="bench-share-peer")["QueueUrl"]
    body = K.VALUE.decode()
    entries = [{"Id": str(i), "MessageBody": body} for i in range(10)]
    for _ in range(n // 10):
        client.send_message_batch(QueueUrl=q, Entries=entries)
    n = n // 10 * 10
    got = 0
    t0 = time.perf_counter()
    while got < n:
        ms = client.receive_message(QueueUrl=q, MaxNumberOfMessages=10).get("Messages", [])
        if ms:
            client.delete_message_batch(QueueUrl=q, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                             for i, m in enumerate(ms)])
        got += len(ms)
    return {"records": got, "rate": C.rate(got, time.perf_counter() - t0)}


def run(tmp: str, n: int, n_sqs: int) -> dict:
    res: dict = {"n": n, "n_sqs": n_sqs}
    with K.Server(tmp, "vqs-share", env={"VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest"}) as srv:
        K.create_topic(srv.bootstrap, TOPIC, 1)
        C.note(f"share: {n:,} records ...")
        K.produce_all(K.producer(srv.bootstrap), TOPIC, n)
        C.note("share: classic consumer ...")
        res["classic"] = classic(srv.bootstrap, n)
        C.note("share: share consumer ...")
        res["share"] = share(srv.bootstrap, n)
        C.note(f"share: SQS receive+delete of {n_sqs:,} ...")
        res["sqs"] = sqs(srv.url, n_sqs)
    return res


def bars(res: dict) -> list[dict]:
    s, c, q = res["share"]["rate"], res["classic"]["rate"], res["sqs"]["rate"]
    return [
        {"bar": "share group consume+ack / classic consumer", "value": s / c, "target": ">= 0.5x", "ok": s / c >= 0.5},
        {"bar": "share group consume+ack / SQS receive+delete (batch 10)", "value": s / q, "target": ">= 1x",
         "ok": s / q >= 1},
    ]


def table_md(res: dict) -> str:
    c, s, q = res["classic"], res["share"], res["sqs"]
    head = (f"One partition of {res['n']:,} records of 100 bytes (SQS: a queue of {res['n_sqs']:,}), one client "
            "each; rates from the first consume/poll call to the last record acknowledged.\n\n")
    rows = [
        ["classic consumer: consume(1000), auto commit + final commit", C.fmt_num(c["rate"]),
         f"{c['first_record_s'] * 1000:.0f} ms"],
        ["share consumer: poll(), implicit acknowledgement, final commit_sync", C.fmt_num(s["rate"]),
         f"{s['first_record_s'] * 1000:.0f} ms (the join included)"],
        ["SQS front (boto3): ReceiveMessage 10 + DeleteMessageBatch", C.fmt_num(q["rate"]), "-"],
    ]
    table = C.markdown_table(["consumer", "records/s", "to the first record"], rows, right=[1, 2])
    extra = ""
    if s["deliveries"] != s["records"] or s["commit_errors"]:
        extra = (f"\n\nShare consumer: {s['deliveries']:,} deliveries for {s['records']:,} records, "
                 f"{s['commit_errors']} commit errors.")
    return head + table + extra


def figures(res: dict) -> list[dict]:
    return [C.figure("share_consume_ack_c1", res["share"]["rate"], "msg/s"),
            C.figure("classic_consume_commit_c1", res["classic"]["rate"], "msg/s"),
            C.figure("sqs_receive_delete_b10", res["sqs"]["rate"], "msg/s")]
