"""A queue keeps the ``flush`` it was created with; its writes run on the event loop only when they
cannot wait on an fsync (``ServerContext.inline_for``), whatever the server's own ``flush``.

A queue made with ``flush="always"`` (embedded, or by a server once run with ``--flush always``)
and served by an ``interval`` server fsyncs each send: in-process, every REST core sends to it
from a worker thread, never on the loop's, and the synchronous cores of the native port's direct
path leave it to them; over a real server, every front's sends to it work and are on disk.
"""

from __future__ import annotations

import asyncio
import threading

import boto3
import httpx

import vqs
from vqs.server.context import ServerContext
from vqs.server.rest.queues import (
    delete_messages,
    delete_one_inline,
    receive_messages,
    receive_now_inline,
    send_messages,
    send_messages_inline,
)
from vqs.server.settings import Settings


def _ctx(data):
    broker = vqs.Broker(str(data), flush="interval")
    ctx = ServerContext(Settings(data_dir=str(data), flush="interval"), broker)
    ctx.ready = True
    return ctx


def test_an_always_queues_writes_leave_the_loop(tmp_path, fsynced_in):
    data = tmp_path / "data"
    with vqs.Broker(str(data), flush="always") as b:
        b.create_queue("durable")
    ctx = _ctx(data)
    try:
        ctx.broker.create_queue("relaxed")
        durable, relaxed = ctx.broker.queue("durable"), ctx.broker.queue("relaxed")
        assert ctx.inline_writes and not ctx.inline_for(durable) and ctx.inline_for(relaxed)
        # the native port's synchronous cores leave the always queue to the routes' async ones
        assert send_messages_inline(ctx, "durable", [{"body": "a"}]) is None
        assert receive_now_inline(ctx, "durable", 1, None, None) is None
        assert delete_one_inline(ctx, "durable", "x") is None
        assert send_messages_inline(ctx, "relaxed", [{"body": "r"}])["message_ids"]

        async def main():
            loop_thread = threading.get_ident()
            fsynced_in.clear()
            ids = (await send_messages(ctx, "durable", [{"body": "a"}, {"body": "b"}]))["message_ids"]
            got = (await receive_messages(ctx, "durable", 2, 0, None))["messages"]
            out = await delete_messages(ctx, "durable", [m["receipt_handle"] for m in got])
            return loop_thread, ids, got, out

        loop_thread, ids, got, out = asyncio.run(main())
        assert len(ids) == 2 and len(got) == 2 and out["deleted"] == 2
        assert fsynced_in and loop_thread not in fsynced_in  # every fsync in a worker thread
    finally:
        ctx.broker.close()


def test_every_front_sends_to_an_always_queue_of_an_interval_server(tmp_path):
    from vqs_server_proc import ServerProcess, free_port

    data = tmp_path / "data"
    with vqs.Broker(str(data), flush="always") as b:
        b.create_queue("durable")
    srv = ServerProcess(data, "--native-port", str(free_port())).start()
    try:
        with vqs.Client(srv.url) as c:  # the native port
            q = c.queue("durable")
            q.send(b"native")
            [m] = q.receive(1)
            q.delete(m.receipt_handle)
        with vqs.Client(srv.url, native=False) as c:
            c.queue("durable").send(b"http")
        sqs = boto3.client("sqs", endpoint_url=srv.url, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x")
        url = sqs.get_queue_url(QueueName="durable")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="sqs")
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert sorted(m["Body"] for m in got) == ["http", "sqs"]
        assert httpx.get(srv.url + "/health").status_code == 200
    finally:
        assert srv.stop() == 0, srv.log()
