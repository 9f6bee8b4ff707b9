"""Subscribe's flow control (a slow subscriber keeps the server's memory bounded) and
ProduceStream's acknowledgements surviving kill -9 of the server (flush=always)."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from grpc_server_proc import GrpcServer, Stubs


def _rss_anon_kib(pid: int) -> int:
    """The process's anonymous resident memory (heap; leaves out mapped log files)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc status")


def test_a_slow_subscriber_keeps_the_server_memory_bounded(tmp_path, pb):
    s = GrpcServer(tmp_path / "data").start()
    try:
        ch = grpc.insecure_channel(s.target)
        st = Stubs(ch)
        st.topics.CreateTopic(pb.CreateTopicRequest(name="big"))
        value = b"v" * (256 << 10)
        batch = pb.ProduceRequest(topic="big", values=[value] * 4)  # 1 MiB a batch

        def produce(n):
            list(st.records.ProduceStream(iter([batch] * n)))

        produce(8)  # warm the paths up, then measure from here
        base = _rss_anon_kib(s.proc.pid)
        stream = st.records.Subscribe(pb.SubscribeRequest(topic="big", max_records=1), timeout=60)
        got = 0
        peak = base
        stop = threading.Event()

        def fast_producer():
            while not stop.is_set() and produce_count[0] < 96:
                produce(8)
                produce_count[0] += 8

        produce_count = [0]
        t = threading.Thread(target=fast_producer)
        t.start()
        for msg in stream:  # slow: a few records a second while ~100 MiB arrive
            got += len(msg.values)
            peak = max(peak, _rss_anon_kib(s.proc.pid))
            if got >= 12:
                break
            time.sleep(0.1)
        t.join(60)
        stop.set()
        peak = max(peak, _rss_anon_kib(s.proc.pid))
        stream.cancel()
        produced_mib = 8 + produce_count[0]
        assert produced_mib >= 64, produced_mib
        # without flow control the server would hold what the subscriber has not read
        # (about produced_mib: a read-ahead of 300 records measured 89 MiB); with it, about one
        # response and the transport's window (measured: 9 MiB, most of it the producer's)
        grew_mib = (peak - base) / 1024
        assert grew_mib < 24, f"server grew {grew_mib:.1f} MiB while {produced_mib} MiB were produced"
        ch.close()
    finally:
        assert s.stop() == 0, s.log()


def test_kill_9_during_produce_stream_keeps_every_acknowledged_batch(tmp_path, pb):
    s = GrpcServer(tmp_path / "data", "--flush", "always").start()
    ch = grpc.insecure_channel(s.target)
    st = Stubs(ch)
    st.topics.CreateTopic(pb.CreateTopicRequest(name="t", partitions=2))
    acked: list = []
    enough = threading.Event()

    def requests():
        i = 0
        while True:
            yield pb.ProduceRequest(topic="t", values=[b"%d-%d" % (i, j) for j in range(10)], batch_id=i)
            i += 1

    def stream(k):
        try:
            for ack in st.records.ProduceStream(requests(), metadata=(("k", str(k)),)):
                acked.append(ack)
                if len(acked) >= 300:
                    enough.set()
        except grpc.RpcError:
            pass  # the server died: what was not acknowledged may or may not be there

    ts = [threading.Thread(target=stream, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    assert enough.wait(30)
    s.kill9()
    for t in ts:
        t.join(10)
    ch.close()
    s2 = GrpcServer(tmp_path / "data", port=s.port, grpc_port=s.grpc_port).start()
    try:
        ch = grpc.insecure_channel(s2.target)
        st = Stubs(ch)
        stored = {}
        for p in (0, 1):
            off = 0
            while True:
                b = st.records.Fetch(pb.FetchRequest(topic="t", partition=p, offset=off, max_records=10_000))
                if not b.offsets:
                    break
                stored.update({(p, o): v for o, v in zip(b.offsets, b.values)})
                off = b.next_offset
        missing = [(r.partition, r.base_offset + j) for a in acked for r in a.ranges for j in range(r.count)
                   if (r.partition, r.base_offset + j) not in stored]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
        assert len(acked) >= 300
        ch.close()
    finally:
        assert s2.stop() == 0, s2.log()


def test_sigterm_ends_idle_streams_and_exits_promptly(tmp_path, pb):
    import queue

    s = GrpcServer(tmp_path / "data").start()
    ch = grpc.insecure_channel(s.target)
    st = Stubs(ch)
    st.topics.CreateTopic(pb.CreateTopicRequest(name="t"))
    todo: queue.Queue = queue.Queue()

    def reqs():
        while (r := todo.get()) is not None:
            yield r

    produce = st.records.ProduceStream(reqs())
    todo.put(pb.ProduceRequest(topic="t", values=[b"x"]))
    assert next(produce).count == 1  # now idle: the client sends nothing more
    sub = st.records.Subscribe(pb.SubscribeRequest(topic="t"))
    assert list(next(sub).values) == [b"x"]  # now waiting for records
    t0 = time.monotonic()
    rc = s.stop()
    assert rc == 0 and time.monotonic() - t0 < 10, s.log()  # not the 25 s grace period
    for stream in (produce, sub):
        with pytest.raises(grpc.RpcError) as ei:
            next(stream)
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
    todo.put(None)
    ch.close()


def test_subscriptions_share_a_server_wide_budget(tmp_path):
    """Subscribe streams take shares of one budget (SUBSCRIBE_BUDGET, 128 MiB; a stream at most
    a sixteenth): sixteen streams asking 32 MiB a message get 8 MiB each, a seventeenth is
    RESOURCE_EXHAUSTED, and a share comes back when its stream ends. Before, each stream that
    did not read held about four messages of what it asked (40 streams: +4.5 GB)."""
    from vqs.server.grpc.gen import vqs_pb2 as pb
    from vqs.server.grpc.gen import vqs_pb2_grpc as pbg
    from vqs.server.grpc.records import SUBSCRIBE_SHARE_MAX

    s = GrpcServer(tmp_path / "data").start()
    try:
        with grpc.insecure_channel(s.target, options=[("grpc.max_receive_message_length", -1)]) as ch:
            pbg.TopicsStub(ch).CreateTopic(pb.CreateTopicRequest(name="budget", partitions=1))
            pbg.RecordsStub(ch).Produce(pb.ProduceRequest(topic="budget", values=[b"x" * 1000] * 20_000))
            rec = pbg.RecordsStub(ch)
            req = pb.SubscribeRequest(topic="budget", offset=0, max_records=100_000, max_bytes=32 << 20)
            streams = [rec.Subscribe(req, timeout=60) for _ in range(16)]
            for st in streams:
                first = next(st)
                assert sum(map(len, first.values)) <= SUBSCRIBE_SHARE_MAX + 1000
            with pytest.raises(grpc.RpcError) as e:
                next(rec.Subscribe(req, timeout=60))
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            streams.pop().cancel()
            deadline = time.monotonic() + 10
            while True:  # the cancelled stream's share comes back once the server has ended it
                try:
                    assert next(rec.Subscribe(req, timeout=60)).values
                    break
                except grpc.RpcError as e:
                    assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and time.monotonic() < deadline
                    time.sleep(0.1)
            for st in streams:
                st.cancel()
    finally:
        assert s.stop() == 0, s.log()
