"""The ``vqs.v1.ShareGroups`` service: share-group members over gRPC (Kafka's KIP-932).

A member is the broker's embedded share consumer (``broker.share_consumer``),
kept by the server between calls in the registry REST's members live in
(vqs/server/share_members.py): Join makes one, Receive acquires records under
a lock (``ShareConsumer.poll``), Acknowledge accepts, releases, rejects or
renews them (``ShareConsumer.acknowledge``, durable on return), Leave releases
what it holds and leaves; ListShareGroups and DescribeShareGroup are REST's
``GET /share-groups`` and ``GET /share-groups/{group}``. So the semantics, the lock, the delivery counts and
the dead-letter archive are the embedded API's, REST's and the Kafka
listener's, and a member joined over REST receives here too.

Bounds, checked before anything is acquired: a group id valid as Kafka's
(``validate_group``), a member id of at most 200 characters, 1-100 topics
(valid names), ``max_records`` 1-10,000 (500 when unset), at most 10,000 acks
a call; a Receive's wait is cut to 20 s (``max_wait_ms``) and the call's
deadline, and at most ``max_long_poll_waiters`` calls wait at once on this
front (Queues' Receive included), the next is RESOURCE_EXHAUSTED. A response
holds at most ``max_bytes`` of values (1 MiB when unset, at most
``records.MAX_BYTES``) plus one step's records: records are acquired in steps
(the first ``FIRST_STEP`` records, then as many as the bytes left hold at the
average size so far), and no step is taken once the bound is reached, so no
record is acquired that the response does not carry.
"""

from __future__ import annotations

import grpc

from ...broker.names import validate_group, validate_name
from ..share_members import acknowledge_each, poll_waiting
from .calls import unary
from .context import GrpcContext
from .errors import RpcError, invalid
from .gen import vqs_pb2 as pb
from .gen import vqs_pb2_grpc as pbg
from .records import DEFAULT_MAX_BYTES, MAX_BYTES, record_batch

DEFAULT_MAX_RECORDS = 500
MAX_RECORDS = 10_000
MAX_ACKS = 10_000
MAX_TOPICS = 100
MAX_MEMBER_ID = 200
FIRST_STEP = 8
_TYPES = {pb.ACCEPT: "accept", pb.RELEASE: "release", pb.REJECT: "reject", pb.RENEW: "renew"}


def _size(recs) -> int:
    return sum(len(r.value) for r in recs if r.value is not None)


class ShareGroupsService(pbg.ShareGroupsServicer):
    def __init__(self, ctx: GrpcContext):
        self.ctx = ctx

    @property
    def members(self):
        return self.ctx.server.share_members

    def _member(self, group: str, member_id: str):
        if len(member_id) > MAX_MEMBER_ID:
            raise invalid(f"member_id is {len(member_id)} characters; at most {MAX_MEMBER_ID}")
        m = self.members.get(group, member_id)
        if m is None:
            raise RpcError(grpc.StatusCode.NOT_FOUND, f"share group {group!r} has no member {member_id!r} here "
                           "(closed, or its session lapsed: join again)", (("vqs-error-type", "MemberNotFound"),))
        return m

    @unary
    async def Join(self, request, context):
        ctx = self.ctx
        b = ctx.broker
        validate_group(request.group)
        topics = list(request.topics)
        if not 1 <= len(topics) <= MAX_TOPICS:
            raise invalid(f"topics has {len(topics)} names; a member reads 1-{MAX_TOPICS} topics")
        for t in topics:
            validate_name(t, "topic")
        m = await ctx.run(self.members.join, b, topics, request.group)
        if m is None:
            raise RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                           f"at most {self.members.max_members} share-group members over HTTP and gRPC")
        c = m.consumer
        return pb.ShareJoinResponse(member_id=c.member_id, assignment=[
            pb.TopicPartition(topic=t, partition=p) for t, p in c.assignment()])

    @unary
    async def Receive(self, request, context):
        ctx = self.ctx
        b = ctx.broker
        n = request.max_records or DEFAULT_MAX_RECORDS
        if not 1 <= n <= MAX_RECORDS:
            raise invalid(f"max_records must be 1-{MAX_RECORDS}, not {request.max_records}")
        if request.wait_ms < 0 or request.max_bytes < 0:
            raise invalid("wait_ms and max_bytes must not be negative")
        max_bytes = min(request.max_bytes or DEFAULT_MAX_BYTES, MAX_BYTES)
        m = self._member(request.group, request.member_id)
        wait = ctx.wait_seconds(context, request.wait_ms / 1000) if request.wait_ms > 0 else 0.0
        first = min(n, FIRST_STEP)
        if wait > 0:
            if ctx.waiters >= ctx.settings.max_long_poll_waiters:
                ctx.metrics.rejected.labels("long_poll_waiters").inc()
                raise RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"{ctx.waiters} long polls are already waiting (max_long_poll_waiters); retry later")
            ctx.waiters += 1
            ctx.metrics.long_polls.inc()
            try:
                recs = await poll_waiting(ctx.run, b, m, first, wait, lambda: ctx.stopping)
            finally:
                ctx.waiters -= 1
                ctx.metrics.long_polls.dec()
        else:
            recs = await ctx.run(m.call, m.consumer.poll, first, 0.0)
        nbytes = _size(recs)
        while recs and len(recs) < n and nbytes < max_bytes:  # more in steps (module doc)
            step = min(n - len(recs), max(1, (max_bytes - nbytes) * len(recs) // max(nbytes, 1)))
            more = await ctx.run(m.call, m.consumer.poll, step, 0.0)
            if not more:
                break
            recs += more
            nbytes += _size(more)
        by_part: dict[tuple[str, int], list] = {}
        for r in recs:
            by_part.setdefault((r.topic, r.partition), []).append(r)
        out = []
        for (t, p), rs in sorted(by_part.items()):
            rs.sort(key=lambda r: r.offset)
            batch = record_batch(t, p, rs, rs[-1].offset + 1, b.topic(t).log(p))
            out.append(pb.ShareRecords(records=batch, delivery_counts=[r.delivery_count for r in rs]))
            ctx.metrics.count_out("topic", t, len(rs), _size(rs))
        return pb.ShareReceiveResponse(batches=out)

    @unary
    async def Acknowledge(self, request, context):
        if len(request.acks) > MAX_ACKS:
            raise invalid(f"acks has {len(request.acks)} entries; at most {MAX_ACKS} a call")
        acks = []
        for a in request.acks:
            kind = _TYPES.get(a.type)
            if kind is None:
                raise invalid(f"unknown acknowledge type {a.type} (ACCEPT, RELEASE, REJECT or RENEW)")
            acks.append(((a.topic, a.partition, a.offset), kind))
        m = self._member(request.group, request.member_id)
        results = await self.ctx.run(m.call, acknowledge_each, m.consumer, acks)
        return pb.ShareAcknowledgeResponse(results=[
            pb.ShareAckResult(ok=e is None, error=e or "") for e in results])

    @unary
    async def ListShareGroups(self, request, context):
        return pb.ListShareGroupsResponse(groups=await self.ctx.run(self.ctx.broker.share_group_names))

    @unary
    async def DescribeShareGroup(self, request, context):
        validate_group(request.group)
        d = await self.ctx.run(self.ctx.broker.describe_share_group, request.group)
        if d is None:
            raise RpcError(grpc.StatusCode.NOT_FOUND, f"share group {request.group!r} has no members or state",
                           (("vqs-error-type", "GroupNotFound"),))
        return pb.ShareGroupInfo(
            group=request.group, state=d["state"], epoch=d["epoch"],
            members=[pb.ShareMemberInfo(member_id=m["member_id"], epoch=m["epoch"], client_id=m["client_id"],
                                        client_host=m["client_host"], topics=m["topics"],
                                        assignment=[pb.TopicPartition(topic=t, partition=p)
                                                    for t, ps in sorted(m["assignment"].items()) for p in ps])
                     for m in d["members"]],
            partitions=[pb.SharePartitionInfo(topic=p["topic"], partition=p["partition"],
                                              start_offset=p["start_offset"], cursor=p["cursor"],
                                              acquired=p["acquired"], available=p["available"],
                                              delivery_counts={int(k): v for k, v in p["delivery_counts"].items()})
                        for p in d["partitions"]])

    @unary
    async def Leave(self, request, context):
        m = self.members.leave(request.group, request.member_id)
        if m is not None:
            await self.ctx.run(m.call, m.consumer.close)
        return pb.ShareLeaveResponse()
