"""Leases that extend themselves on the embedded queue: sync (threads) and async (asyncio)."""

from __future__ import annotations

import asyncio
import time

import pytest

from vqs import Broker
from vqs.broker.lease_keeper import AsyncLeaseKeeper, LeaseKeeper
from vqs.errors import ConfigError, MessageNotAvailable, MessageNotInflight


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


def test_a_message_deleted_meanwhile_ends_the_lease(queue):
    """The queue refuses the extension (MessageNotAvailable): the lease is lost, and the block's
    end raises that error instead of deleting or releasing anything."""
    queue.send(b"job")
    with LeaseKeeper(queue, visibility_timeout=2) as k:
        (m,) = k.receive(1)
        with pytest.raises(MessageNotAvailable), k.lease(m) as lease:
            queue.delete(m.receipt_handle)  # (another worker's delete)
            deadline = time.monotonic() + 5
            while lease.lost is None and time.monotonic() < deadline:
                time.sleep(0.05)  # the keeper extends at 1 s
            assert isinstance(lease.lost, MessageNotAvailable)
        assert k.in_flight == 0


class _SlowQueue:
    """The queue behind a link where an extension takes ``delay`` seconds to arrive."""

    def __init__(self, queue, delay: float):
        self.queue, self.delay = queue, delay

    def receive(self, *a, **kw):
        return self.queue.receive(*a, **kw)

    def change_visibility(self, handle, seconds):
        time.sleep(self.delay)
        self.queue.change_visibility(handle, seconds)

    def delete(self, handle):
        self.queue.delete(handle)


def test_a_lease_whose_time_ran_out_is_lost_and_never_deleted(queue):
    """An extension answered after the lease could have run out does not save it: a standard
    queue takes any of a message's handles, so the keeper's own clock decides. Another
    consumer that received the message meanwhile keeps it: the block's end raises
    MessageNotInflight and deletes nothing."""
    queue.send(b"job")
    with LeaseKeeper(_SlowQueue(queue, 1.5), visibility_timeout=2) as k:
        (m,) = k.receive(1)
        with pytest.raises(MessageNotInflight, match="ran out before it was extended"), k.lease(m) as lease:
            time.sleep(2.3)  # the first extension, sent at 1 s, arrives at 2.5 s: too late
            other = queue.receive(1, visibility_timeout=30)
            assert [x.body for x in other] == [b"job"]
            time.sleep(0.6)
            assert isinstance(lease.lost, MessageNotInflight) and m.id in str(lease.lost)
    assert queue.counts()["in_flight"] == 1  # the other consumer's delivery: untouched


def test_async_a_blocked_loop_loses_the_lease(queue):
    """The event loop blocked past the timeout: the keeper never ran; at the block's end the
    lease is past its time, so the message (received meanwhile by another consumer) is
    neither deleted nor released."""
    queue.send(b"job")

    async def main():
        async with AsyncLeaseKeeper(queue, visibility_timeout=2) as k:
            (m,) = await k.receive(1)
            with pytest.raises(MessageNotInflight):
                async with k.lease(m):
                    time.sleep(2.2)  # blocks the loop
                    assert [x.body for x in queue.receive(1, visibility_timeout=30)] == [b"job"]
            return k.in_flight

    assert asyncio.run(main()) == 0
    assert queue.counts()["in_flight"] == 1
