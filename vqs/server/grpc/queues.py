"""The ``vqs.v1.Queues`` service: the broker's SQS-style queues over gRPC.

Every call is the embedded ``Queue`` method the SQS and REST fronts call
(``send``/``send_batch``, ``receive``, ``delete``, ``change_visibility``), so
the semantics (leases, delays, dead letters, FIFO groups, deduplication) and
the receipt handles are the same on every front: a handle from one front
deletes on another.

Invariants: a send of 1-10 entries is all or nothing (``send_batch``); a
receive waits at most its ``wait_seconds`` (the queue's default when unset),
cut to the call's deadline, and a queue deleted under a waiting receive
answers NOT_FOUND; a message attribute keeps its DataType and its string or
binary value both ways.
"""

from __future__ import annotations

from .calls import unary
from .context import GrpcContext
from .errors import invalid
from .gen import vqs_pb2 as pb
from .gen import vqs_pb2_grpc as pbg


def _attributes_in(attrs) -> dict:
    out = {}
    for name, a in attrs.items():
        which = a.WhichOneof("value")
        if which is None:
            raise invalid(f"attribute {name!r} has no string_value or binary_value")
        if which == "string_value":
            out[name] = {"DataType": a.data_type, "StringValue": a.string_value}
        else:
            out[name] = {"DataType": a.data_type, "BinaryValue": a.binary_value}
    return out


def _attribute_out(a: dict) -> pb.MessageAttribute:
    if "BinaryValue" in a:
        return pb.MessageAttribute(data_type=a["DataType"], binary_value=bytes(a["BinaryValue"]))
    return pb.MessageAttribute(data_type=a["DataType"], string_value=a["StringValue"])


def _message(m) -> pb.QueueMessage:
    return pb.QueueMessage(
        id=m.id, receipt_handle=m.receipt_handle, body=m.body, receive_count=m.receive_count,
        sent_timestamp_ms=m.sent_timestamp_ms, first_receive_timestamp_ms=m.first_receive_timestamp_ms or 0,
        group_id=m.group_id or "", dedup_id=m.dedup_id or "", sequence_number=m.sequence_number or "",
        attributes={k: _attribute_out(a) for k, a in m.attributes.items()} if m.attributes else None)


class QueuesService(pbg.QueuesServicer):
    def __init__(self, ctx: GrpcContext):
        self.ctx = ctx

    def _queue(self, name: str):
        return self.ctx.broker.queue(name)

    @unary
    async def CreateQueue(self, request, context):
        q = await self.ctx.run(self.ctx.broker.create_queue, request.name, **dict(request.attributes))
        return pb.QueueInfo(name=q.name, attributes=q.get_attributes())

    @unary
    async def ListQueues(self, request, context):
        return pb.ListQueuesResponse(names=self.ctx.broker.queues(request.prefix or None))

    @unary
    async def DeleteQueue(self, request, context):
        await self.ctx.run(self.ctx.broker.delete_queue, request.name)
        return pb.DeleteQueueResponse()

    @unary
    async def Send(self, request, context):
        q = self._queue(request.queue)
        entries = []
        nbytes = 0
        for e in request.entries:
            d = {"body": e.body}
            nbytes += len(e.body)
            if e.HasField("delay_seconds"):
                d["delay_seconds"] = e.delay_seconds
            if e.attributes:
                d["attributes"] = _attributes_in(e.attributes)
            if e.group_id:
                d["group_id"] = e.group_id
            if e.dedup_id:
                d["dedup_id"] = e.dedup_id
            entries.append(d)
        if len(entries) == 1:
            e = entries[0]
            ids = [await self.ctx.queue_write(q, q.send, e.pop("body"), **e)]
        else:
            ids = await self.ctx.queue_write(q, q.send_batch, entries)  # 0 or > 10: the queue's own error
        self.ctx.metrics.count_in("queue", q.name, len(ids), nbytes)
        return pb.SendResponse(message_ids=ids)

    @unary
    async def Receive(self, request, context):
        ctx = self.ctx
        q = self._queue(request.queue)
        n = request.max_messages or 1
        vis = request.visibility_timeout if request.HasField("visibility_timeout") else None
        wanted = request.wait_seconds if request.HasField("wait_seconds") else q.config.receive_wait_seconds
        if not 0 <= wanted <= 20:
            raise invalid(f"wait_seconds must be 0-20, not {wanted}")
        wait = ctx.wait_seconds(context, wanted)
        if wait > 0:
            msgs = await ctx.receive_waiting(q, n, wait, vis)
        else:
            msgs = await ctx.queue_write(q, q.receive, n, 0, vis)
        ctx.metrics.count_out("queue", q.name, len(msgs), sum(len(m.body) for m in msgs))
        return pb.ReceiveResponse(messages=[_message(m) for m in msgs])

    @unary
    async def Delete(self, request, context):
        q = self._queue(request.queue)
        await self.ctx.queue_write(q, q.delete, request.receipt_handle)
        return pb.DeleteResponse()

    @unary
    async def ChangeVisibility(self, request, context):
        q = self._queue(request.queue)
        await self.ctx.queue_write(q, q.change_visibility, request.receipt_handle, request.visibility_timeout)
        return pb.ChangeVisibilityResponse()
