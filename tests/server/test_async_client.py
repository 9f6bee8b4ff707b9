"""vqs.AsyncClient against a real server: producer, consumer, queues, leases, errors; real asyncio."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

import vqs
from vqs.broker.topic import TopicPartition
from vqs.errors import (
    ConfigError,
    InvalidName,
    InvalidRecordState,
    OffsetOutOfRange,
    PartitionDoesNotExist,
    QueueDoesNotExist,
    ServerUnreachable,
    TopicDoesNotExist,
)


def run(coro):
    return asyncio.run(coro)


def test_alter_topic(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.create_topic(unique, flush="always")
            t = await c.alter_topic(unique, {"retention_ms": 60_000, "flush": None})
            assert t.config["retention_ms"] == 60_000 and t.config["flush"] == (await c.health())["flush"]
            checked = await c.alter_topic(unique, {"retention_ms": 1}, validate_only=True)
            assert checked.config["retention_ms"] == 60_000
            with pytest.raises(TopicDoesNotExist):
                await c.alter_topic(unique + "-none", {"retention_ms": 1})

    run(main())


def test_group_configs(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.alter_group_configs(unique, {"consumer.session.timeout.ms": "20000"})
            assert (await c.group_config_values(unique))["consumer.session.timeout.ms"] == ("20000", True)
            await c.alter_group_configs(unique, {"consumer.session.timeout.ms": "9000"}, validate_only=True)
            assert (await c.group_config_values(unique))["consumer.session.timeout.ms"] == ("20000", True)

    run(main())


def test_produce_consume_commit(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.create_topic(unique, partitions=2)
            async with c.producer() as p:
                md = await p.send_and_wait(unique, b"v0", partition=0)
                assert md.offset == 0 and md.partition == 0
                mds = await p.send_batch(unique, [b"a", b"b"], partition=1)
                assert [m.offset for m in mds] == [0, 1]
                await asyncio.gather(*(p.send(unique, b"x%d" % i, partition=0) for i in range(20)))
            async with c.consumer(unique, group="g1") as cons:
                got = await cons.getmany(timeout_ms=100)
                assert sum(len(v) for v in got.values()) == 23
                await cons.commit()
            assert await c.group_offsets("g1") == {(unique, 0): 21, (unique, 1): 2}
            async with c.consumer(unique, group="g1") as cons:  # resumes from the commit
                assert await cons.getmany(timeout_ms=0) == {}
                await p.send(unique, b"late", partition=1)
                rec = await cons.__anext__()
                assert rec.value == b"late" and rec.offset == 2

    run(main())


def test_group_members_share_partitions_and_rebalance(base_url, unique):
    """Two members split a topic's partitions; when one stops, the other gets
    them all and resumes from what the first committed: every record is
    delivered once across the group."""
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.create_topic(unique, partitions=4)
            everything = {(unique, i) for i in range(4)}
            a = c.consumer(unique, group=unique, session_timeout_ms=10_000)
            b = c.consumer(unique, group=unique, session_timeout_ms=10_000)
            await a.start()
            await b.start()
            seen: list = []

            async def read(cons):
                for recs in (await cons.getmany(timeout_ms=100)).values():
                    seen.extend(r.value for r in recs)
                await cons.commit()

            async def settled():  # heartbeats (in getmany) until the group has split the partitions
                while not (a.assignment() and b.assignment() and a.assignment() | b.assignment() == everything):
                    await asyncio.gather(read(a), read(b))

            await asyncio.wait_for(settled(), 30)
            assert not a.assignment() & b.assignment()
            async with c.producer() as p:
                for part in range(4):
                    await p.send_batch(unique, [b"%d-%d" % (part, i) for i in range(5)], partition=part)

            async def drain(members, n):
                while len(seen) < n:
                    await asyncio.gather(*(read(m) for m in members))

            await asyncio.wait_for(drain([a, b], 20), 30)
            await a.stop()
            async with c.producer() as p:
                for part in range(4):
                    await p.send(unique, b"late-%d" % part, partition=part)
            await asyncio.wait_for(drain([b], 24), 30)
            assert b.assignment() == everything
            assert sorted(seen) == sorted([b"%d-%d" % (q, i) for q in range(4) for i in range(5)]
                                          + [b"late-%d" % q for q in range(4)])
            await b.stop()

    run(main())


def test_getone_commits_only_what_it_handed_out(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.create_topic(unique)
            async with c.producer() as p:
                await p.send_batch(unique, [b"%d" % i for i in range(10)])
            async with c.consumer(unique, group=unique) as cons:
                assert (await cons.getone()).value == b"0"
                assert (await cons.getone()).value == b"1"
                await cons.commit()  # the other eight were fetched, not handed out
                assert await cons.position(unique, 0) == 2
            assert await c.group_offsets(unique) == {(unique, 0): 2}
            async with c.consumer(unique, group=unique) as cons:
                assert (await cons.getone()).value == b"2"

    run(main())


def test_long_poll_is_awaited_not_a_thread(base_url, unique):
    import threading

    async def main():
        async with vqs.AsyncClient(base_url) as c:
            q = await c.create_queue(unique)
            before = threading.active_count()
            polls = [asyncio.ensure_future(q.receive(1, wait_seconds=5)) for _ in range(10)]
            await asyncio.sleep(0.3)
            assert threading.active_count() == before  # ten long polls in flight, no thread added
            await q.send_batch([f"m{i}" for i in range(10)])
            got = [m for r in await asyncio.gather(*polls) for m in r]
            assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(10))
            r = await q.delete_batch([m.receipt_handle for m in got])
            assert not r.get("failed")

    run(main())


def test_errors_are_vqs_errors(base_url):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"

    async def main():
        async with vqs.AsyncClient(base_url) as c:
            with pytest.raises(TopicDoesNotExist):
                await c.producer().send("no-such-topic-x", b"x")
            with pytest.raises(QueueDoesNotExist):
                await c.queue("no-such-queue-x")
            with pytest.raises(InvalidName):
                await c.queue("../x")
        async with vqs.AsyncClient(dead, timeout=2) as c:
            with pytest.raises(ServerUnreachable):
                await c.topics()

    run(main())


def test_async_lease_keeper_remote(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            q = await c.create_queue(unique)
            await q.send("job")
            async with q.lease_keeper(visibility_timeout=2, max_in_flight=2) as k:
                (m,) = await k.receive(5, wait_seconds=1)
                async with k.lease(m) as lease:
                    await asyncio.sleep(3.2)  # the work outlives the 2 s timeout
                    assert await q.receive(1) == [] and lease.lost is None
            attrs = await q.get_attributes()  # deleted on success: neither visible nor leased
            assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0")

    run(main())


def test_sync_lease_keeper_remote(base_url, unique):
    with vqs.Client(base_url) as c:
        q = c.create_queue(unique)
        q.send("job")
        with q.lease_keeper(visibility_timeout=2) as k:
            (m,) = k.receive(1, wait_seconds=1)
            with k.lease(m):
                time.sleep(3.2)
                assert q.receive(1) == []
            q.send("second")
            (m2,) = k.receive(1, wait_seconds=1)
            with pytest.raises(KeyError), k.lease(m2):
                raise KeyError
        assert [m.body for m in q.receive(1)] == [b"second"]  # released at once on error


def test_topics_reads_and_metrics(base_url, unique):
    """create_topic takes every setting Client's does and answers an AsyncTopic; read_batches,
    read_stored_batches and the topic's offsets answer as Client's do."""
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            other = await c.create_topic("o-" + unique, segment_bytes=1 << 20, max_message_bytes=4096)
            assert (await other.describe())["config"]["max_message_bytes"] == 4096
            compacted = await c.create_topic("c-" + unique, cleanup_policy="compact", delete_retention_ms=5000)
            assert compacted.config["cleanup_policy"] == "compact"
            t = await c.create_topic(unique, partitions=1, segment_bytes=1 << 20)
            assert (t.name, t.partitions) == (unique, 1)
            assert (await c.create_partitions(unique, 2)).partitions == 2
            assert (await c.topic(unique)).partitions == 2
            async with c.producer() as p:
                await p.send_batch(unique, [b"a%d" % i for i in range(5)], partition=0)
                await p.send_batch(unique, [b"b%d" % i for i in range(5)], partition=0)
                await p.flush()
            assert await t.start_offsets() == [0, 0] and await t.end_offset(0) == 10
            batches, nxt, end = await c.read_batches(unique, 0, 3, max_records=4)
            assert [(b.base_offset, b.count) for b in batches] == [(3, 4)] and (nxt, end) == (7, 10)
            batches, nxt, end = await c.read_stored_batches(unique, 0, 3)
            assert [(b.base_offset, b.count) for b in batches] == [(0, 5), (5, 5)] and (nxt, end) == (10, 10)
            assert [r.value for r in await t.read(0, 8)] == [b"b3", b"b4"]
            assert "vqs_" in await c.metrics()
            with pytest.raises(OffsetOutOfRange):
                await c.read_batches(unique, 0, 99)

    run(main())


def test_consumer_seeks_offsets_lag_committed(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.create_topic(unique)
            tp = TopicPartition(unique, 0)
            async with c.producer() as p:
                await p.send_batch(unique, [b"%d" % i for i in range(6)], timestamps_ms=[1000 * (i + 1) for i in range(6)])
            async with c.consumer(unique, group=unique) as cons:
                await cons.getmany(timeout_ms=100)
                assert await cons.beginning_offsets() == {tp: 0} and await cons.end_offsets(tp) == {tp: 6}
                assert await cons.lag() == {tp: 0}
                await cons.seek_to_beginning()
                assert await cons.lag([tp]) == {tp: 6} and await cons.position(tp) == 0
                assert [r.value for r in (await cons.getmany(max_records=2))[tp]] == [b"0", b"1"]
                await cons.seek_to_timestamp(3500)
                assert (await cons.getone()).value == b"3"
                await cons.commit()
                assert await cons.committed(tp) == 4 == await cons.committed(unique, 0)
                await cons.seek_to_end(tp)
                assert await cons.position(unique, 0) == 6
                with pytest.raises(PartitionDoesNotExist):
                    await cons.seek_to_end((unique, 5))

    run(main())


def test_groups_describe_and_members(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            assert await c.describe_group(unique) == []
            assert (await c.group_members(unique))["members"] == []
            await c.create_topic(unique)
            async with c.producer() as p:
                await p.send_batch(unique, [b"x"] * 3)
            async with c.consumer(unique, group=unique) as cons:
                await cons.getmany(timeout_ms=100)
                await cons.commit()
                m = await c.group_members(unique)
                assert [x["member_id"] for x in m["members"]] == [cons.member_id] and m["generation"] >= 1
            (row,) = await c.describe_group(unique)
            assert (row.topic, row.partition, row.committed, row.lag) == (unique, 0, 3, 0)
            assert await c.commit_offsets(unique, {(unique, 0): 1}) is None
            assert await c.group_offsets(unique) == {(unique, 0): 1}

    run(main())


def test_share_consumer(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.create_topic(unique)
            g = "workers-" + unique
            async with c.share_consumer(unique, g) as a, c.share_consumer(unique, g) as b:
                assert await a.poll() == []  # a new group starts at the end
                async with c.producer() as p:
                    await p.send_batch(unique, [b"j0", b"j1", b"j2"])
                got = await a.poll(max_records=2, timeout=5)
                assert [(r.value, r.delivery_count) for r in got] == [(b"j0", 1), (b"j1", 1)]
                (other,) = await b.poll(timeout=5)
                with pytest.raises(InvalidRecordState):
                    await a.acknowledge(other)
                with pytest.raises(ConfigError):
                    await a.acknowledge(got[0], "maybe")
                await a.acknowledge(got[0])
                await a.acknowledge(got[1], "release")
                assert [(r.value, r.delivery_count) for r in await a.poll(timeout=5)] == [(b"j1", 2)]
                assert g in await c.share_group_names()
                assert len((await c.describe_share_group(g))["members"]) == 2
            assert await c.describe_share_group("none-" + unique) is None

    run(main())


def test_queue_peek_attributes_tags_redrive(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            dlq = await c.create_queue("dlq-" + unique)
            q = await c.create_queue(unique, dead_letter_queue=dlq.name, max_receive_count=1)
            await q.send_batch(["x", "y"])
            assert [(m.message.body, m.state) for m in await q.peek()] == [(b"x", "visible"), (b"y", "visible")]
            await q.set_attributes(visibility_timeout=7)
            assert (await q.get_attributes())["VisibilityTimeout"] == "7"
            await q.tag({"team": "a", "env": "b"})
            await q.untag(["env"])
            assert await q.tags() == {"team": "a"}
            for _ in range(2):  # received once, released: the next receive moves them to the DLQ
                await q.receive(10, visibility_timeout=0)
            assert sorted(m.message.body for m in await dlq.peek()) == [b"x", b"y"]
            task = await c.redrive(dlq.name)
            assert task.source.endswith(dlq.name)
            tasks = await c.redrive_tasks(dlq.name)
            assert tasks and tasks[0].handle == task.handle

    run(main())


def test_idempotent_producer_retries_a_dropped_answer_once(base_url, unique):
    """The answer to the first numbered produce is dropped (appended, never heard of): the
    producer sends it again and the server answers the duplicate with its offsets."""
    from test_idempotent_produce import _DropOneProduceAnswer

    proxy = _DropOneProduceAnswer(int(base_url.rsplit(":", 1)[1]))

    async def main():
        async with vqs.AsyncClient(f"http://127.0.0.1:{proxy.port}") as c:
            await c.create_topic(unique, partitions=2)
            async with c.producer(idempotent=True, retry_timeout=30) as p:
                sent = [(await p.send(unique, b"m%d" % i, partition=0)).offset for i in range(5)]
                assert proxy.dropped.is_set() and p.retries >= 1 and sent == list(range(5))
                mds = await p.send_batch(unique, [b"a", b"b", b"c", b"d"], keys=[b"1", b"2", b"3", b"4"])
                assert {m.partition for m in mds} == {0, 1}
                assert p.sequence(unique, 0) == 5 + sum(m.partition == 0 for m in mds)
                with pytest.raises(TopicDoesNotExist):
                    await p.send(unique + "-none", b"x")
            recs, _ = await c.read(unique, 0, 0, max_records=100)
            assert [r.value for r in recs][:5] == [b"m%d" % i for i in range(5)] and len(recs) == p.sequence(unique, 0)

    try:
        run(main())
    finally:
        proxy.close()


def test_consumer_assign_and_subscribe(base_url, unique):
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.create_topic(unique, partitions=2)
            await c.create_topic("b-" + unique)
            async with c.producer() as p:
                for part in (0, 1):
                    await p.send_batch(unique, [b"%d-%d" % (part, i) for i in range(3)], partition=part)
                await p.send("b-" + unique, b"other")
            async with c.consumer(unique, group=unique) as cons:
                assert cons.member_id is not None
                await cons.assign([(unique, 1)])
                assert cons.member_id is None and cons.assignment() == {TopicPartition(unique, 1)}
                got = await cons.getmany(timeout_ms=100)
                assert [r.value for r in got[TopicPartition(unique, 1)]] == [b"1-0", b"1-1", b"1-2"] and len(got) == 1
                with pytest.raises(PartitionDoesNotExist):
                    await cons.assign([(unique, 2)])
                with pytest.raises(TopicDoesNotExist):
                    await cons.assign([("none-" + unique, 0)])
                assert cons.assignment() == {TopicPartition(unique, 1)}  # unchanged by a refusal
                await cons.subscribe("b-" + unique)
                assert (await cons.getone()).value == b"other" and cons.member_id is not None
            assert cons.closed

    run(main())


def test_async_for_ends_when_stopped_and_position_is_awaited(base_url, unique):
    """aiokafka's shapes: ``position`` is a coroutine (the committed offset before anything was
    read), ``async for`` ends once ``stop`` ran (also while it waited), ``getmany`` refuses a
    partition filter it would not honour."""
    async def main():
        async with vqs.AsyncClient(base_url) as c:
            await c.create_topic(unique)
            async with c.producer() as p:
                await p.send_batch(unique, [b"a", b"b"])
            await c.commit_offsets(unique, {(unique, 0): 1})
            cons = c.consumer(unique, group=unique)
            await cons.start()
            assert await cons.position(unique, 0) == 1
            with pytest.raises(ConfigError, match="getmany"):
                await cons.getmany(TopicPartition(unique, 0), timeout_ms=10)
            got = []
            first = asyncio.Event()

            async def read():
                async for r in cons:
                    got.append(r.value)
                    first.set()

            reader = asyncio.ensure_future(read())
            await asyncio.wait_for(first.wait(), 10)
            await cons.stop()  # the reader waits for a third record: its loop ends
            await asyncio.wait_for(reader, 10)
            return got

    assert run(main()) == [b"b"]
