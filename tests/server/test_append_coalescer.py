"""Coalesced appends (vqs/server/append_coalescer.py): concurrent produce requests to one
partition are written as one batch, each answered with its own offsets, none failed by another.

In-process against a real Broker (the event loop's rounds decide the groups, so what is
coalesced is exact), then over real HTTP against a real server: many connections producing at
once, every acknowledged record present once at its offset and in order per connection, invalid
requests among them answered on their own.
"""

from __future__ import annotations

import asyncio
import glob
import os
import threading

import httpx
import pytest

import vqs
from vqs.broker.partitioner import partition_for_key
from vqs.record import decode_batch, encode_batch, is_plain
from vqs.server.context import ServerContext
from vqs.server.settings import Settings


def _ctx(tmp_path, flush="interval", **broker_kw):
    broker = vqs.Broker(str(tmp_path / "data"), flush=flush, **broker_kw)
    ctx = ServerContext(Settings(data_dir=str(tmp_path / "data"), flush=flush), broker)
    ctx.ready = True
    return ctx


def _batches(lg) -> list[list[bytes]]:
    out, off = [], 0
    while off < lg.end_offset:
        for bt in lg.read_batches(off):
            if bt.base_offset >= off:
                out.append([bytes(v) for v in bt.values()])
            off = bt.next_offset
    return out


async def _gather(*aws):
    return await asyncio.gather(*aws, return_exceptions=True)


def _send(ctx, t, values, partition=None, keys=None, headers=None):
    return ctx.appends.send(t, partition, values, keys, headers, None, sum(map(len, values)))


def test_requests_of_one_round_share_one_batch_in_join_order(tmp_path):
    ctx = _ctx(tmp_path)
    try:
        t = ctx.broker.create_topic("t")
        reqs = [[f"r{i}-{j}".encode() for j in range(i % 3 + 1)] for i in range(40)]

        async def main():
            first = await _send(ctx, t, [b"alone"])  # nobody else in its round: a batch of its own
            got = await _gather(*[_send(ctx, t, vs) for vs in reqs])
            return first, got

        first, got = asyncio.run(main())
        assert first[0].offset == 0
        off = 1
        for vs, metas in zip(reqs, got):  # each request's records consecutive, in join order
            assert [(m.partition, m.offset) for m in metas] == [(0, off + j) for j in range(len(vs))]
            off += len(vs)
        assert _batches(t.log(0)) == [[b"alone"], [v for vs in reqs for v in vs]]
        assert f'vqs_messages_in_total{{kind="topic",name="t"}} {float(off)}' in ctx.metrics.render().decode()
    finally:
        ctx.broker.close()


def test_one_bad_request_does_not_fail_the_others(tmp_path):
    ctx = _ctx(tmp_path)
    try:
        t = ctx.broker.create_topic("t")

        async def main():
            good = [_send(ctx, t, [f"g{i}".encode()]) for i in range(5)]
            bad = _send(ctx, t, [b"bad"], headers=[[("h", 5)]])  # not bytes: the producer refuses it
            more = [_send(ctx, t, [f"g{i}".encode()]) for i in range(5, 9)]
            return await _gather(*good, bad, *more)

        got = asyncio.run(main())
        assert isinstance(got[5], TypeError)
        ok = [g for i, g in enumerate(got) if i != 5]
        assert [m[0].offset for m in ok] == list(range(9))  # each appended alone, in order
        assert [r.value for r in t.log(0).read(0)] == [f"g{i}".encode() for i in range(9)]
    finally:
        ctx.broker.close()


def test_a_group_stays_within_batch_max_bytes(tmp_path):
    ctx = _ctx(tmp_path, batch_max_bytes=1000)
    try:
        t = ctx.broker.create_topic("t")
        big = [bytes([65 + i]) * 300 for i in range(10)]

        async def main():
            return await _gather(*[_send(ctx, t, [v]) for v in big])

        got = asyncio.run(main())
        assert [m[0].offset for m in got] == list(range(10))
        assert [len(b) for b in _batches(t.log(0))] == [3, 3, 3, 1]
        assert [r.value for r in t.log(0).read(0)] == big
    finally:
        ctx.broker.close()


def test_keys_and_partitions_go_where_the_producer_puts_them(tmp_path):
    ctx = _ctx(tmp_path)
    try:
        t = ctx.broker.create_topic("t", partitions=3)
        keys = [f"k{i}".encode() for i in range(12)]

        async def main():
            keyed = [_send(ctx, t, [b"v-" + k], keys=[k]) for k in keys]
            spread = _send(ctx, t, [b"s0", b"s1", b"s2"], keys=keys[:3])  # several partitions: not grouped
            fixed = [_send(ctx, t, [f"p{i}".encode()], partition=2) for i in range(3)]
            keyless = [_send(ctx, t, [f"n{i}".encode()]) for i in range(4)]
            return await _gather(*keyed, spread, *fixed, *keyless)

        got = asyncio.run(main())
        for k, metas in zip(keys, got[:12]):
            m = metas[0]
            assert m.partition == partition_for_key(k, 3)
            assert t.log(m.partition).read(m.offset, max_records=1)[0].key == k
        assert [m.partition for m in got[12]] == [partition_for_key(k, 3) for k in keys[:3]]
        assert [m.partition for g in got[13:16] for m in g] == [2, 2, 2]
        keyless = [g[0] for g in got[16:]]
        assert len({m.partition for m in keyless}) == 1  # one group: one round-robin partition
        assert [m.offset for m in keyless] == list(range(keyless[0].offset, keyless[0].offset + 4))
    finally:
        ctx.broker.close()


def test_flush_always_groups_append_in_a_thread_after_the_fsync(tmp_path):
    ctx = _ctx(tmp_path, flush="always")
    assert not ctx.inline_writes
    try:
        t = ctx.broker.create_topic("t")
        loop_thread = threading.get_ident()
        calls = []
        run = ctx.run

        async def spy(fn, *a, **kw):  # the context's worker-thread call, noting what it runs where
            calls.append(fn.__name__)
            return await run(lambda: (appended_in.append(threading.get_ident()), fn(*a, **kw))[1])

        appended_in: list = []
        ctx.run = spy

        async def main():
            return await _gather(*[_send(ctx, t, [f"a{i}".encode()]) for i in range(20)])

        got = asyncio.run(main())
        assert calls == ["_append"] and appended_in[0] != loop_thread  # one group, in a worker thread
        assert [m[0].offset for m in got] == list(range(20))
    finally:
        ctx.broker.close()
    # flush=always: acknowledged means fsynced; the reopened log has them all
    with vqs.Broker(str(tmp_path / "data")) as b:
        assert [r.value for r in b.topic("t").log(0).read(0)] == [f"a{i}".encode() for i in range(20)]


class _Sink:
    """A future's stand-in, as the fast paths' requests are (done, set_result, ...)."""

    def __init__(self):
        self.fut = asyncio.get_running_loop().create_future()

    def done(self):
        return self.fut.done()

    def set_result(self, r):
        self.fut.set_result(r)

    def set_exception(self, e):
        self.fut.set_exception(e)

    def cancel(self, msg=None):
        return self.fut.cancel()


def _plain(*values):
    return decode_batch(encode_batch(0, list(values)))


def test_a_lone_plain_batch_is_appended_at_once_and_leads_its_round(tmp_path):
    """No group open for its partition: appended now, as encoded, answered from the next round;
    the requests after it in the round (a plain batch among them) form the group behind it."""
    ctx = _ctx(tmp_path)
    try:
        t = ctx.broker.create_topic("t")

        async def main():
            lead = _Sink()
            assert ctx.appends.send_encoded(t, None, _plain(b"lead"), lead)
            assert t.log(0).end_offset == 1 and not lead.done()  # appended now, answered next round
            behind = [_send(ctx, t, [b"f%d" % i]) for i in range(3)]
            assert not ctx.appends.send_encoded(t, None, _plain(b"late"), _Sink())  # a group is open
            return await lead.fut, await _gather(*behind)

        lead, behind = asyncio.run(main())
        assert [(m.partition, m.offset) for m in lead] == [(0, 0)]
        assert [m[0].offset for m in behind] == [1, 2, 3]
        assert _batches(t.log(0)) == [[b"lead"], [b"f0", b"f1", b"f2"]]
        assert ctx.metrics.messages_in.labels("topic", "t")._cell[0] == 4  # counted as send counts
    finally:
        ctx.broker.close()


def test_what_is_not_appended_at_once(tmp_path):
    """Several partitions and none named (the group's round-robin chooses), a batch the log does
    not take as encoded: False, nothing done; a named partition: at once."""
    ctx = _ctx(tmp_path)
    try:
        t = ctx.broker.create_topic("t", partitions=2)

        async def main():
            assert not ctx.appends.send_encoded(t, None, _plain(b"x"), _Sink())
            assert not ctx.appends.send_encoded(t, 1, decode_batch(encode_batch(0, [b"h"], headers=[[("a", b"")]])),
                                                _Sink())
            named = _Sink()
            assert ctx.appends.send_encoded(t, 1, _plain(b"p1"), named)
            return await named.fut

        assert [(m.partition, m.offset) for m in asyncio.run(main())] == [(1, 0)]
        assert t.log(0).end_offset == 0 and t.log(1).end_offset == 1
    finally:
        ctx.broker.close()
    ctx = _ctx(tmp_path / "always", flush="always")  # an append that waits on an fsync: a thread's
    try:
        t = ctx.broker.create_topic("t")

        async def main():
            return ctx.appends.send_encoded(t, None, _plain(b"x"), _Sink())

        assert asyncio.run(main()) is False and t.log(0).end_offset == 0
    finally:
        ctx.broker.close()


def test_clients_sending_one_message_at_a_time_at_once(server, unique):
    """vqs.Client's one-message sends (native protocol), from threads at once: the lone ones go
    at once, the others in groups; each acknowledged record once, at its offset, in its thread's
    order, and the partition's batches as the log would have written them."""
    with vqs.Client(server.url) as c:
        c.create_topic(unique)
    acked: dict[int, list] = {}
    errors: list = []
    start = threading.Barrier(8)

    def sender(n: int):
        try:
            with vqs.Client(server.url) as c:
                p = c.producer()
                start.wait()
                acked[n] = [(p.send(unique, b"s%d-%d" % (n, i)).offset, b"s%d-%d" % (n, i)) for i in range(40)]
        except Exception as e:  # reported below
            errors.append((n, e))

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors, errors
    with vqs.Client(server.url) as c:
        batches, nxt, _ = c.read_batches(unique, 0, 0, max_records=1000)
        log = {r.offset: r.value for b in batches for r in b.records()}
    everything = [rec for recs in acked.values() for rec in recs]
    assert nxt == len(log) == len(everything) == 320
    assert all(log[off] == v for off, v in everything)
    for recs in acked.values():
        assert [off for off, _ in recs] == sorted(off for off, _ in recs)
    [seg] = glob.glob(os.path.join(server.data_dir, "topics", unique, "0", "*.log"))
    with open(seg, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        b = decode_batch(data, pos, untrusted=True)
        assert is_plain(b) and b.first_timestamp_ms > 0  # stamped by the log when it came without one
        pos += b.size_bytes


# ------------------------------------------------------------------ over HTTP
CONNECTIONS = 12
REQUESTS = 25


def test_many_connections_producing_at_once(base_url, unique):
    """Every acknowledged record is in the log once, at the offset its answer gave, in order per
    connection; invalid requests among them get their own 4xx and fail nothing else."""
    with httpx.Client(base_url=base_url, timeout=30) as c:
        c.post("/topics", json={"name": unique}).raise_for_status()
    acked: dict[int, list[tuple[int, str]]] = {}
    refused: dict[int, list[int]] = {}
    errors: list = []
    start = threading.Barrier(CONNECTIONS)

    def connection(n: int):
        mine, bad = [], []
        try:
            with httpx.Client(base_url=base_url, timeout=30) as c:
                start.wait()
                for i in range(REQUESTS):
                    if i % 7 == 3:  # an invalid request among the valid ones
                        body = [{"value": "x", "partition": 9}, {"value": 5}, {"value_b64": "**"}][n % 3]
                        r = c.post(f"/topics/{unique}/messages", json={"messages": [body]})
                        bad.append(r.status_code)
                        continue
                    vals = [f"c{n}-{i}-{j}" for j in range(1 + (i % 2))]
                    r = c.post(f"/topics/{unique}/messages", json={"messages": [{"value": v} for v in vals]})
                    r.raise_for_status()
                    (rng,) = r.json()["ranges"]
                    assert rng["count"] == len(vals) and rng["partition"] == 0
                    mine += [(rng["base_offset"] + j, v) for j, v in enumerate(vals)]
        except Exception as e:  # reported below, with the connection
            errors.append((n, e))
        acked[n] = mine
        refused[n] = bad

    threads = [threading.Thread(target=connection, args=(n,)) for n in range(CONNECTIONS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors, errors
    assert all(codes and all(code == 400 for code in codes) for codes in refused.values()), refused

    with httpx.Client(base_url=base_url, timeout=30) as c:
        r = c.get(f"/topics/{unique}/messages", params={"offset": 0, "limit": 100_000})
        r.raise_for_status()
        log = {m["offset"]: m["value"] for m in r.json()["messages"]}
    everything = [rec for recs in acked.values() for rec in recs]
    assert len(log) == len(everything) == len({v for _, v in everything})  # each once, nothing else
    for off, v in everything:
        assert log[off] == v
    for recs in acked.values():  # a connection's records in the order it sent them
        assert [off for off, _ in recs] == sorted(off for off, _ in recs)


@pytest.mark.parametrize("n", [1, 2])
def test_produce_answer_bytes_are_json_bytes(n):
    from vqs.server.rest.conventions import json_bytes
    from vqs.server.rest.produce import produce_answer_bytes

    ranges = [{"partition": p, "base_offset": 10**p, "count": 2 + p} for p in range(n)]
    for out in ({"count": 3, "ranges": ranges}, {"count": 3, "ranges": ranges, "extra": True}, {"ready": []}):
        assert produce_answer_bytes(out) == json_bytes(out)
