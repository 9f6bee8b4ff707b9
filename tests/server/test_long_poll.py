"""Long polls hold no thread each (vqs/server/long_poll.py): a topic wait is woken by the topic's
hook, waiters on one queue share a watcher; woken by appends and sends, answered at their deadline, failed when their queue goes
(the server then answers 404, as for a queue that does not exist).

The first tests drive ``wait_topics`` and ``LongPolls`` on a real Broker in-process; the last one counts the threads
of a real server holding 300 long polls."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time

import httpx
import pytest
from vqs_server_proc import ServerProcess

import vqs
from vqs.errors import LogClosedError
from vqs.server.long_poll import LongPolls, wait_topics


@pytest.fixture
def broker(tmp_path):
    with vqs.Broker(str(tmp_path / "data")) as b:
        yield b


def _run(coro):
    return asyncio.run(coro)


def test_topic_waits_hold_no_thread_and_wake_on_append(broker):
    t = broker.create_topic("t")
    lg = t.log(0)

    async def go():
        threads = len(os.listdir("/proc/self/task"))
        waits = [asyncio.create_task(wait_topics((t,), lambda o=off: lg.end_offset > o, 10, lambda: False))
                 for off in (0, 0, 1)]
        await asyncio.sleep(0)
        assert len(os.listdir("/proc/self/task")) == threads
        t0 = time.monotonic()
        await asyncio.to_thread(broker.producer().send, "t", b"a")
        first = await asyncio.gather(waits[0], waits[1])
        assert first == [True, True] and time.monotonic() - t0 < 2
        assert not waits[2].done()  # offset 1 is not there yet
        await asyncio.to_thread(broker.producer().send, "t", b"b")
        assert await waits[2] is True
        assert t._waiters == ()  # every wait let go of the hook

    _run(go())


def test_topic_waits_answer_false_at_their_deadline_and_when_stopping(broker):
    t = broker.create_topic("t")
    lg = t.log(0)
    stopping = [False]

    def ready():
        return lg.end_offset > 0

    async def go():
        t0 = time.monotonic()
        assert await wait_topics((t,), ready, 0.3, lambda: stopping[0]) is False
        assert 0.25 < time.monotonic() - t0 < 1.5
        long = asyncio.create_task(wait_topics((t,), ready, 20, lambda: stopping[0]))
        await asyncio.sleep(0.1)
        stopping[0] = True
        t0 = time.monotonic()
        assert await long is False
        assert time.monotonic() - t0 < 2  # within a slice

    _run(go())


def test_queue_waiters_are_served_in_arrival_order_with_their_own_count(broker):
    q = broker.create_queue("q")
    polls = LongPolls(lambda: False)

    async def go():
        a = asyncio.create_task(polls.receive(q, 2, 10, 60))
        await asyncio.sleep(0.05)
        b = asyncio.create_task(polls.receive(q, 1, 10, 60))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(q.send_batch, [{"body": b"1"}, {"body": b"2"}, {"body": b"3"}])
        got_a = await a
        got_b = await b
        return sorted(m.body for m in got_a), [m.body for m in got_b]

    got_a, got_b = _run(go())
    assert len(got_a) == 2 and len(got_b) == 1
    assert sorted(got_a + got_b) == [b"1", b"2", b"3"]


def test_queue_waiters_get_nothing_at_the_deadline_and_fail_when_the_queue_is_deleted(broker):
    q = broker.create_queue("q")
    polls = LongPolls(lambda: False)

    async def go():
        t0 = time.monotonic()
        assert await polls.receive(q, 1, 0.3, None) == []
        assert time.monotonic() - t0 < 1.5
        waits = [asyncio.create_task(polls.receive(q, 1, 20, None)) for _ in range(3)]
        await asyncio.sleep(0.1)
        await asyncio.to_thread(broker.delete_queue, "q")
        for w in waits:
            with pytest.raises(LogClosedError):
                await asyncio.wait_for(w, 5)

    _run(go())


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))


def _waiting(url: str) -> int:
    m = re.search(r"^vqs_long_poll_waiters (\S+)$", httpx.get(url + "/metrics").text, re.M)
    return int(float(m.group(1))) if m else 0


async def _raw(port: int, request: bytes) -> tuple[float, int, dict]:
    """One request on its own connection (raw asyncio streams: 300 at once stay cheap on the client)."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(request)
        head = await r.readuntil(b"\r\n\r\n")
        n = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
        body = await r.readexactly(n)
        return time.monotonic(), int(head.split(b" ")[1]), json.loads(body)
    finally:
        w.close()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="counts threads in /proc")
def test_a_server_holding_300_long_polls_runs_a_handful_of_threads(tmp_path):
    s = ServerProcess(tmp_path / "data", "--max-long-poll-waiters", "400",
                      "--max-connections-per-client", "400").start()  # 300 from 127.0.0.1
    body = b'{"wait_seconds":20}'
    receive = (b"POST /queues/q/receive HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    consume = b"GET /topics/t/messages?wait_ms=20000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    try:
        with httpx.Client(base_url=s.url, timeout=30) as h:
            assert h.post("/topics", json={"name": "t"}).status_code == 201
            assert h.post("/queues", json={"name": "q"}).status_code == 201

            async def go():
                topic = [asyncio.create_task(_raw(s.port, consume)) for _ in range(150)]
                queue = [asyncio.create_task(_raw(s.port, receive)) for _ in range(150)]
                deadline = time.monotonic() + 20
                while await asyncio.to_thread(_waiting, s.url) < 300:
                    assert time.monotonic() < deadline, "the long polls never all waited"
                    await asyncio.sleep(0.1)
                threads = _threads(s.proc.pid)
                t0 = time.monotonic()
                await asyncio.to_thread(h.post, "/topics/t/messages", json={"messages": [{"value": "x"}]})
                await asyncio.to_thread(h.post, "/queues/q/messages", json={"messages": [{"body": "m"}]})
                got = await asyncio.gather(*topic)
                done, _ = await asyncio.wait(queue, return_when=asyncio.FIRST_COMPLETED)
                # the others keep waiting until their queue goes: then they answer as for a missing queue
                assert len(done) == 1 and time.monotonic() - t0 < 5
                await asyncio.to_thread(h.delete, "/queues/q")
                answers = await asyncio.gather(*queue)
                return threads, t0, got, answers

            threads, t0, got, answers = asyncio.run(go())
        assert threads < 40, f"{threads} threads for 300 waiting long polls"
        assert all(st == 200 and [m["value"] for m in d["messages"]] == ["x"] for _, st, d in got)
        assert max(t for t, _, _ in got) - t0 < 3  # woken by the produce, not by their 20 s deadline
        statuses = sorted(st for _, st, _ in answers)
        assert statuses == [200] + [404] * 149, statuses
        (one,) = [d for _, st, d in answers if st == 200]
        assert [m["body"] for m in one["messages"]] == ["m"]
        assert max(t for t, _, _ in answers) - t0 < 10
    finally:
        assert s.stop() == 0, s.log()
