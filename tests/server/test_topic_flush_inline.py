"""A topic's own ``flush`` (``create_topic(flush=...)``, Kafka's ``flush.messages=1``): its appends
run on the event loop only when they cannot wait on an fsync (``ServerContext.inline_for_topic``),
whatever the server's own ``flush``.

In-process: on an ``interval`` server a topic with ``flush="always"`` has every produce path's
appends (the coalescer's groups, the lone encoded batch, an idempotent producer's) fsync in worker
threads, never the loop's; its neighbour with the server's policy stays inline. Over a real server:
Kafka's CreateTopics, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs take and show
``flush.messages`` and ``flush.ms`` (any other count refused with INVALID_CONFIG), and every
front produces to such a topic.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

import vqs
from vqs.record import encode_batch
from vqs.server.context import ServerContext
from vqs.server.rest.produce import BATCH_CONTENT_TYPE, produce_messages
from vqs.server.settings import Settings


def test_an_always_topics_appends_leave_the_loop(tmp_path, fsynced_in):
    data = str(tmp_path / "data")
    broker = vqs.Broker(data, flush="interval", flush_interval_ms=3_600_000)
    ctx = ServerContext(Settings(data_dir=data, flush="interval"), broker)
    ctx.ready = True
    try:
        durable = broker.create_topic("durable", flush="always")
        relaxed = broker.create_topic("relaxed")
        binary = bytes(encode_batch(0, [b"b1", b"b2"]))

        async def main():
            loop_thread = threading.get_ident()
            fsynced_in.clear()
            outs = await asyncio.gather(  # one round: a group of two, then a lone encoded batch
                produce_messages(ctx, "durable", "application/json", None, b'{"messages": [{"value": "a"}]}'),
                produce_messages(ctx, "durable", "application/json", None, b'{"messages": [{"value": "b"}]}'))
            outs.append(await produce_messages(ctx, "durable", BATCH_CONTENT_TYPE, None, binary))
            durable_fsyncs = list(fsynced_in)
            fsynced_in.clear()
            await produce_messages(ctx, "relaxed", "application/json", None, b'{"messages": [{"value": "r"}]}')
            return loop_thread, outs, durable_fsyncs

        loop_thread, outs, durable_fsyncs = asyncio.run(main())
        assert [o["ranges"][0]["base_offset"] for o in outs] == [0, 1, 2]
        assert durable_fsyncs and loop_thread not in durable_fsyncs  # every fsync in a worker thread
        assert durable.log(0)._sync.durable_end == 4  # answered once on disk
        assert fsynced_in == [] and relaxed.log(0)._sync.durable_end == 0  # inline, by the hour's interval
        assert ctx.inline_writes and not ctx.inline_for_topic(durable) and ctx.inline_for_topic(relaxed)
        broker.alter_topic("relaxed", {"flush": "always"})  # altered: in force for the next request
        assert not ctx.inline_for_topic(relaxed)
    finally:
        broker.close()


def _admin(bootstrap):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _described(admin, name: str) -> dict:
    from confluent_kafka.admin import ConfigResource

    [fut] = admin.describe_configs([ConfigResource("topic", name)]).values()
    return {k: e.value for k, e in fut.result(20).items() if k.startswith("flush.")}


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # (librdkafka's 0081 uses it)
def test_kafka_configs_set_a_topics_flush(tmp_path):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
    from vqs_server_proc import ServerProcess, free_port

    long_max = str((1 << 63) - 1)
    kport, nport = free_port(), free_port()
    srv = ServerProcess(tmp_path / "data", "--kafka-port", str(kport), "--native-port", str(nport),
                        "--flush", "interval").start()
    bootstrap = f"127.0.0.1:{kport}"
    try:
        admin = _admin(bootstrap)
        futs = admin.create_topics([NewTopic("synced", 1, config={"flush.messages": "1", "flush.ms": "250"}),
                                    NewTopic("timed", 1, config={"flush.ms": "12345678"}),
                                    NewTopic("counted", 1, config={"flush.messages": "1000"})])
        futs["synced"].result(20)
        futs["timed"].result(20)
        with pytest.raises(KafkaException) as e:
            futs["counted"].result(20)
        assert e.value.args[0].name() == "INVALID_CONFIG" and "flush.messages" in e.value.args[0].str()
        assert _described(admin, "synced") == {"flush.messages": "1", "flush.ms": "250"}
        assert _described(admin, "timed") == {"flush.messages": long_max, "flush.ms": "12345678"}
        # AlterConfigs: the configs given, the others back to the broker's
        [f] = admin.alter_configs([ConfigResource("topic", "timed", set_config={
            "flush.messages": "1", "flush.ms": "12345678"})]).values()
        f.result(20)
        assert _described(admin, "timed")["flush.messages"] == "1"
        [f] = admin.incremental_alter_configs([ConfigResource("topic", "synced", incremental_configs=[
            ConfigEntry("flush.messages", None, incremental_operation=AlterConfigOpType.DELETE)])]).values()
        f.result(20)
        assert _described(admin, "synced") == {"flush.messages": long_max, "flush.ms": "250"}
        # every front produces to the always topic
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        p.produce("timed", b"kafka")
        assert p.flush(20) == 0
        with vqs.Client(srv.url) as c:  # the native port
            c.producer().send("timed", b"native")
        with vqs.Client(srv.url, native=False) as c:
            c.producer().send("timed", b"http")
            t = c.create_topic("rest", flush="always", flush_interval_ms=1000)
            assert t.config["flush"] == "always" and t.config["flush_interval_ms"] == 1000
        assert _described(admin, "rest") == {"flush.messages": "1", "flush.ms": "1000"}
    finally:
        assert srv.stop() == 0, srv.log()
    with vqs.Broker(str(tmp_path / "data")) as b:  # what every front appended is there
        t = b.topic("timed")
        assert sorted(r.value for r in t.log(0).read(0)) == [b"http", b"kafka", b"native"]
        assert t.log(0).flush_policy == "always" and t.log(0).flush_interval_ms == 12345678

