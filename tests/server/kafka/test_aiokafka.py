"""aiokafka (asyncio, pure Python; what Faust runs on) against a real ``vqs serve --kafka-port``:
producer (plain, idempotent, every codec it has; a transactional one refused), consumer groups
sharing partitions and committing, static membership, offsets by time and seeks, and the admin
client."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import vqs

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete  # noqa: E402
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # noqa: E402


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def _admin(server) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=server.bootstrap)
    await admin.start()
    return admin


async def _create(server, topic: str, partitions: int, config: dict | None = None) -> None:
    admin = await _admin(server)
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=config or {})])
    finally:
        await admin.close()


async def _consume(consumer, n: int, timeout: float = 20) -> list:
    got: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(got) < n:
        assert loop.time() < deadline, f"{len(got)} of {n} records"
        for records in (await consumer.getmany(timeout_ms=500)).values():
            got.extend(records)
    return got


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_keys_headers_nulls_and_every_codec(kafka_server, codec):
    topic = _name("aio")

    async def main():
        await _create(kafka_server, topic, 1)
        p = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap, compression_type=codec, linger_ms=5)
        await p.start()
        try:
            sent = [await p.send(topic, value=b"v%d" % i, key=b"k%d" % i, headers=[("n", b"%d" % i)])
                    for i in range(20)]
            tomb = await p.send_and_wait(topic, value=None, key=b"gone")  # a tombstone: a null value
            await asyncio.gather(*sent)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=kafka_server.bootstrap, auto_offset_reset="earliest")
        await c.start()
        try:
            return tomb, await _consume(c, 21)
        finally:
            await c.stop()

    tomb, got = run(main())
    assert [r.value for r in got[:20]] == [b"v%d" % i for i in range(20)]
    assert [r.key for r in got[:3]] == [b"k0", b"k1", b"k2"] and list(got[5].headers) == [("n", b"5")]
    assert got[20].value is None and got[20].key == b"gone" and got[20].offset == tomb.offset == 20
    with vqs.Client(kafka_server.url) as client:  # what REST reads is what aiokafka wrote
        assert client.topic(topic).end_offsets() == [21]


def test_idempotent_producer_and_group_commits(kafka_server):
    topic, group = _name("aio-idem"), _name("aio-g")

    async def main():
        await _create(kafka_server, topic, 2)
        p = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap, enable_idempotence=True, acks="all")
        await p.start()
        try:
            for i in range(30):
                await p.send(topic, value=b"%d" % i, partition=i % 2)
            await p.flush()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=kafka_server.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            got = await _consume(c, 30)
            await c.commit()
            committed = {p: await c.committed(TopicPartition(topic, p)) for p in (0, 1)}
        finally:
            await c.stop()
        return got, committed

    got, committed = run(main())
    assert sorted(int(r.value) for r in got) == list(range(30))
    assert committed == {0: 15, 1: 15}
    with vqs.Client(kafka_server.url) as client:
        assert sum(client.group_offsets(group).values()) == 30


def test_two_group_members_share_the_partitions_and_read_each_record_once(kafka_server):
    topic, group = _name("aio-grp"), _name("aio-g")

    async def main():
        await _create(kafka_server, topic, 4)
        conf = dict(bootstrap_servers=kafka_server.bootstrap, group_id=group, auto_offset_reset="earliest",
                    session_timeout_ms=6000, heartbeat_interval_ms=300)
        a, b = AIOKafkaConsumer(topic, **conf), AIOKafkaConsumer(topic, **conf)
        await a.start()
        await b.start()
        p = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap)
        await p.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not (len(a.assignment()) == len(b.assignment()) == 2):
                assert loop.time() < deadline, (a.assignment(), b.assignment())
                await asyncio.gather(a.getmany(timeout_ms=200), b.getmany(timeout_ms=200))
            assert {tp.partition for tp in a.assignment() | b.assignment()} == {0, 1, 2, 3}
            for i in range(40):
                await p.send(topic, value=b"%d" % i, partition=i % 4)
            await p.flush()
            seen: list = []
            while len(seen) < 40:
                assert loop.time() < deadline + 20, len(seen)
                for batch in await asyncio.gather(a.getmany(timeout_ms=200), b.getmany(timeout_ms=200)):
                    for records in batch.values():
                        seen.extend(int(r.value) for r in records)
            await asyncio.gather(a.commit(), b.commit())
            return seen
        finally:
            await p.stop()
            await a.stop()
            await b.stop()

    seen = run(main(), 90)
    assert sorted(seen) == list(range(40))


def test_admin_client(kafka_server):
    topic, group = _name("aio-admin"), _name("aio-g")

    async def main():
        admin = await _admin(kafka_server)
        try:
            await admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "60000"})])
            assert topic in await admin.list_topics()
            cluster = await admin.describe_cluster()
            assert [b["node_id"] for b in cluster["brokers"]] == [0]
            described = await admin.describe_topics([topic])
            assert described[0]["error_code"] == 0 and len(described[0]["partitions"]) == 2
            await admin.create_partitions({topic: NewPartitions(3)})
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                      {"retention.ms": "120000"})])
            res = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            configs = {c[0]: c[1] for r in res for c in r.resources[0][4]}
            assert configs["retention.ms"] == "120000"
            p = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap)
            await p.start()
            for i in range(5):
                await p.send_and_wait(topic, b"%d" % i, partition=0)
            await p.stop()
            c = AIOKafkaConsumer(topic, bootstrap_servers=kafka_server.bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
            await c.start()
            await _consume(c, 5)
            await c.commit()
            await c.stop()
            assert (group, "consumer") in {(g[0], g[1]) for g in await admin.list_consumer_groups()}
            offsets = await admin.list_consumer_group_offsets(group)
            assert offsets[TopicPartition(topic, 0)].offset == 5
            groups = await admin.describe_consumer_groups([group])
            assert groups[0].groups[0][0] == 0  # no error
            low = await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(3)})
            assert low[TopicPartition(topic, 0)] == 3
            await admin.delete_topics([topic])
            assert topic not in await admin.list_topics()
        finally:
            await admin.close()

    run(main())


def test_offsets_by_time_seeks_and_a_refused_transactional_producer(kafka_server):
    topic = _name("aio-offsets")

    async def main():
        tx = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap, transactional_id=_name("tx"))
        with pytest.raises(aiokafka.errors.InvalidRequestError):  # no transactions: refused, not hung
            await tx.start()
        await tx.stop()
        await _create(kafka_server, topic, 1)
        p = AIOKafkaProducer(bootstrap_servers=kafka_server.bootstrap)
        await p.start()
        for i in range(10):
            await p.send_and_wait(topic, b"%d" % i, timestamp_ms=1_700_000_000_000 + i * 1000)
        await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=kafka_server.bootstrap)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            assert await c.beginning_offsets([tp]) == {tp: 0} and await c.end_offsets([tp]) == {tp: 10}
            found = (await c.offsets_for_times({tp: 1_700_000_004_500}))[tp]
            assert (found.offset, found.timestamp) == (5, 1_700_000_005_000)
            await c.seek_to_end(tp)
            assert await c.position(tp) == 10
            c.seek(tp, 3)
            rec = await c.getone()
            assert (rec.offset, rec.timestamp, rec.value) == (3, 1_700_000_003_000, b"3")
        finally:
            await c.stop()

    run(main())


def test_a_restarted_static_member_gets_its_partition_back_without_a_rebalance(kafka_server):
    topic, group = _name("aio-static"), _name("aio-g")
    from aiokafka import ConsumerRebalanceListener

    class Events(ConsumerRebalanceListener):
        def __init__(self):
            self.revoked: list = []

        async def on_partitions_revoked(self, revoked):
            if revoked:
                self.revoked.append(set(revoked))

        async def on_partitions_assigned(self, assigned):
            pass

    async def main():
        await _create(kafka_server, topic, 2)

        def member(instance: str, events) -> AIOKafkaConsumer:
            c = AIOKafkaConsumer(bootstrap_servers=kafka_server.bootstrap, group_id=group,
                                 group_instance_id=instance, session_timeout_ms=10_000, heartbeat_interval_ms=300)
            c.subscribe([topic], listener=events)
            return c

        async def until(cond, *cs):
            deadline = asyncio.get_running_loop().time() + 30
            while not cond():
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.gather(*(c.getmany(timeout_ms=200) for c in cs))

        other = Events()
        a, b = member("a", Events()), member("b", other)
        await a.start()
        await b.start()
        try:
            await until(lambda: len(a.assignment()) == len(b.assignment()) == 1, a, b)
            mine, before = a.assignment(), len(other.revoked)
            await a.stop()  # a static member leaves no LeaveGroup: its slot waits for it
            a = member("a", Events())
            await a.start()
            await until(lambda: a.assignment() == mine, a, b)
            for _ in range(3):
                await asyncio.gather(a.getmany(timeout_ms=200), b.getmany(timeout_ms=200))
            assert len(other.revoked) == before  # the other member saw no rebalance
        finally:
            await a.stop()
            await b.stop()

    run(main())
