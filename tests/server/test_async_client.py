"""vqs.AsyncClient against a real server: producer, consumer, queues, leases, errors; real asyncio."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

import vqs
from vqs.errors import InvalidName, QueueDoesNotExist, ServerUnreachable, TopicDoesNotExist


def run(coro):
    return asyncio.run(coro)


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
                assert cons.position(unique, 0) == 2
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
            await asyncio.sleep(2.2)
            assert await q.receive(1) == []  # deleted on success

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
