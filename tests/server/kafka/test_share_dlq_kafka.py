"""A share group's dead-letter topic (``errors.deadletterqueue.topic.name``) with confluent-kafka's
ShareConsumer: each archived record copied once, across a server SIGKILL."""

from __future__ import annotations

import time

import pytest
from kafka_server_proc import KafkaServer

from vqs import Broker

ck = pytest.importorskip("confluent_kafka")
if not hasattr(ck, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)
from confluent_kafka import AcknowledgeType  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

N = 300


def _dead_letters(server) -> list[dict]:
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "dlq-reader",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["dlq.work"])
    out: list = []
    idle = time.monotonic() + 5
    try:
        while time.monotonic() < idle:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append(dict(m.headers() or []) | {"value": m.value(), "key": m.key()})
            idle = time.monotonic() + 3
    finally:
        c.close()
    return out


def test_rejected_records_reach_the_dead_letter_topic_once_across_a_server_sigkill(tmp_path):
    data = tmp_path / "data"
    with Broker(str(data)) as b:  # the group's configs (IncrementalAlterConfigs on a GROUP where served)
        b.create_topic("work", 1)
        b.create_topic("dlq.work", 1)
        b.share_groups.alter_group_configs("workers", {
            "share.auto.offset.reset": "earliest", "errors.deadletterqueue.topic.name": "dlq.work",
            "errors.deadletterqueue.copy.record.enable": "true"})
    server = KafkaServer(data, env={"VQS_KAFKA_SHARE_HEARTBEAT_INTERVAL_MS": "500"}).start()
    try:
        # KIP-1191's opt-in topic config is taken (every topic may be a dead-letter topic here)
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        opt_in = {"errors.deadletterqueue.group.enable": "true"}
        admin.create_topics([NewTopic("dlq.other", 1, 1, config=opt_in)])["dlq.other"].result(10)
        with pytest.raises(ck.KafkaException, match="only true"):
            admin.create_topics([NewTopic("dlq.off", 1, 1, config={"errors.deadletterqueue.group.enable": "false"})]
                                )["dlq.off"].result(10)
        p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
        for i in range(N):
            p.produce("work", value=b"r%05d" % i)
        assert p.flush(20) == 0
        settled: set = set()
        killed = False
        deadline = time.monotonic() + 120
        c = ck.ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": "workers",
                              "share.acknowledgement.mode": "explicit", "max.poll.records": 20,
                              "fetch.wait.max.ms": 200})
        c.subscribe(["work"])
        try:
            while len(settled) < N:
                assert time.monotonic() < deadline, f"{len(settled)} of {N} settled"
                try:
                    msgs = [m for m in c.poll(0.3) if m.error() is None]
                except ck.KafkaException:
                    continue
                for m in msgs:  # odd records rejected (archived: copied), even ones accepted
                    c.acknowledge(m, AcknowledgeType.REJECT if m.offset() % 2 else AcknowledgeType.ACCEPT)
                if not msgs:
                    continue
                try:
                    result = c.commit_sync(10)
                except ck.KafkaException:
                    continue
                if all(err is None for err in result.values()):
                    settled.update(m.offset() for m in msgs)
                if not killed and len(settled) >= N // 3:
                    server.kill9()
                    killed = True
                    server.start()
        finally:
            c.close()
        assert killed
        dead = _dead_letters(server)
        offsets = sorted(int(d["__dlq.errors.offset"]) for d in dead)
        assert offsets == list(range(1, N, 2))  # every rejected record once: none twice, none lost
        d = dead[0]
        assert (d["__dlq.errors.topic"], d["__dlq.errors.group"], d["__dlq.errors.message"]) == (
            b"work", b"workers", b"Offset rejected by client.")
        assert all(x["value"] == b"r%05d" % int(x["__dlq.errors.offset"]) for x in dead)  # copy.record.enable
    finally:
        assert server.stop() == 0, server.log()
