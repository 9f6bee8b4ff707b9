"""Leases that extend themselves on the embedded queue: sync (threads) and async (asyncio)."""

from __future__ import annotations

import asyncio
import time

import pytest

from vqs import Broker
from vqs.broker.lease_keeper import AsyncLeaseKeeper, LeaseKeeper
from vqs.errors import ConfigError


@pytest.fixture
def queue(tmp_path):
    with Broker(tmp_path / "d") as b:
        yield b.create_queue("jobs")


def test_work_longer_than_the_timeout_is_not_redelivered_then_deleted(queue):
    queue.send(b"job")
    with LeaseKeeper(queue, visibility_timeout=2, max_in_flight=4) as k:
        (m,) = k.receive(1)
        with k.lease(m) as lease:
            time.sleep(3.2)  # the work: longer than the 2 s timeout; the keeper extends it at 1 s, 2 s, 3 s
            assert queue.receive(10) == []
            assert lease.lost is None
        assert k.in_flight == 0
    # deleted, not released: neither visible nor leased nor delayed (no lease left to run out)
    assert queue.counts() == {"visible": 0, "in_flight": 0, "delayed": 0}


def test_error_releases_at_once(queue):
    queue.send(b"job")
    with LeaseKeeper(queue, visibility_timeout=30) as k:
        (m,) = k.receive(1)
        with pytest.raises(RuntimeError), k.lease(m):
            raise RuntimeError("work failed")
        again = queue.receive(1)
        assert [x.body for x in again] == [b"job"] and again[0].receive_count == 2


def test_max_in_flight_bounds_receive(queue):
    queue.send_batch([b"a", b"b", b"c"])
    with LeaseKeeper(queue, visibility_timeout=30, max_in_flight=2) as k:
        got = k.receive(10)
        assert len(got) == 2 and k.in_flight == 2
        assert k.receive(10, wait_seconds=0.2) == []  # full: waits for a place, gets none
        with k.lease(got[0]):
            pass
        assert len(k.receive(10, wait_seconds=0)) == 1


def test_message_received_elsewhere(queue):
    queue.send(b"x")
    (m,) = queue.receive(1, visibility_timeout=2)
    with LeaseKeeper(queue, visibility_timeout=2) as k, k.lease(m):
        time.sleep(2.5)
        assert queue.receive(1) == []
    assert queue.receive(1) == []


@pytest.mark.parametrize("kw", [{"visibility_timeout": 1}, {"visibility_timeout": 2.5}, {"max_in_flight": 0}])
def test_bad_settings(queue, kw):
    with pytest.raises(ConfigError):
        LeaseKeeper(queue, **kw)


def test_async_keeper_embedded(queue):
    queue.send_batch([b"a", b"b"])

    async def main():
        async with AsyncLeaseKeeper(queue, visibility_timeout=2, max_in_flight=1) as k:
            (m,) = await k.receive(5)
            assert k.in_flight == 1
            async with k.lease(m):
                await asyncio.sleep(3.2)
                assert [x.body for x in queue.receive(10)] == [b"b"]  # only the one not leased
            with pytest.raises(ValueError):
                async with k.lease(m):  # a lease of a message already deleted: released on error
                    raise ValueError
            return k.in_flight

    assert asyncio.run(main()) == 0


def test_async_max_in_flight(queue):
    queue.send_batch([b"a", b"b", b"c"])

    async def main():
        async with AsyncLeaseKeeper(queue, visibility_timeout=30, max_in_flight=2) as k:
            got = await k.receive(10)
            assert len(got) == 2 and k.in_flight == 2
            assert await k.receive(10, wait_seconds=0.2) == []  # full: no place frees in time
            async with k.lease(got[0]):
                pass
            assert len(await k.receive(10, wait_seconds=0)) == 1
            return k.in_flight

    assert asyncio.run(main()) == 2
