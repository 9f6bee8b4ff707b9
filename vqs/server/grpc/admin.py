"""The ``vqs.v1.Topics`` and ``vqs.v1.Groups`` services: topics as resources, committed offsets, lag.

Invariants (as REST's): creating a topic never takes the server past
``max_partitions_per_topic`` or ``max_total_partitions``; a commit names only
partitions that exist and is checked in full before any offset is written
(``Broker.commit_offsets``), and is fsynced before it is acknowledged.
"""

from __future__ import annotations

import grpc

from ...broker.names import is_internal
from ...errors import TopicDoesNotExist
from .calls import unary
from .context import GrpcContext
from .errors import RpcError, invalid
from .gen import vqs_pb2 as pb
from .gen import vqs_pb2_grpc as pbg


def topic_info(t) -> pb.TopicInfo:
    d = t.describe()
    return pb.TopicInfo(
        name=d["name"], partitions=d["partitions"],
        config={k: str(v) for k, v in d["config"].items() if v is not None},
        partition_info=[pb.PartitionInfo(**p) for p in d["partition_info"]])


class TopicsService(pbg.TopicsServicer):
    def __init__(self, ctx: GrpcContext):
        self.ctx = ctx

    @unary
    async def CreateTopic(self, request, context):
        s = self.ctx.settings
        b = self.ctx.broker
        n = request.partitions or 1
        if n < 0 or n > s.max_partitions_per_topic:
            raise invalid(f"partitions must be 1..{s.max_partitions_per_topic} (max_partitions_per_topic)")
        total = 0
        for tn in b.topics():
            try:
                total += b.topic(tn).partitions
            except TopicDoesNotExist:  # deleted since topics() listed it
                pass
        if total + n > s.max_total_partitions:
            raise RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                           f"the server holds {total} partitions; {n} more would pass max_total_partitions "
                           f"({s.max_total_partitions})")

        def opt(field):
            return getattr(request, field) if request.HasField(field) else None

        t = await self.ctx.run(b.create_topic, request.name, partitions=n, retention_ms=opt("retention_ms"),
                               retention_bytes=opt("retention_bytes"), segment_bytes=opt("segment_bytes"),
                               compression=request.compression or None,
                               cleanup_policy=request.cleanup_policy or None,
                               delete_retention_ms=opt("delete_retention_ms"),
                               min_cleanable_dirty_ratio=opt("min_cleanable_dirty_ratio"),
                               min_compaction_lag_ms=opt("min_compaction_lag_ms"),
                               max_compaction_lag_ms=opt("max_compaction_lag_ms"),
                               flush=request.flush or None, flush_interval_ms=opt("flush_interval_ms"))
        return topic_info(t)

    @unary
    async def ListTopics(self, request, context):
        names = self.ctx.broker.topics()
        if not request.include_internal:
            names = [n for n in names if not is_internal(n)]
        return pb.ListTopicsResponse(names=names)

    @unary
    async def DescribeTopic(self, request, context):
        return topic_info(self.ctx.broker.topic(request.name))

    @unary
    async def DeleteTopic(self, request, context):
        await self.ctx.run(self.ctx.broker.delete_topic, request.name)
        return pb.DeleteTopicResponse()


class GroupsService(pbg.GroupsServicer):
    def __init__(self, ctx: GrpcContext):
        self.ctx = ctx

    @unary
    async def Commit(self, request, context):
        if not request.offsets:
            raise invalid("offsets is empty: name at least one partition")
        offs = {}
        for o in request.offsets:
            if o.offset < 0:
                raise invalid(f"offset {o.offset} of {o.topic}[{o.partition}] is negative")
            offs[(o.topic, o.partition)] = o.offset
        b = self.ctx.broker

        def outside_commit():  # a gRPC commit names no member: refused while the group has members
            b.coordinator.check_outside_commit(request.group)
            b.commit_offsets(request.group, offs)

        await self.ctx.run(outside_commit)
        return pb.CommitResponse(committed=len(offs))

    @unary
    async def Committed(self, request, context):
        offs = self.ctx.broker.group_offsets(request.group)
        return pb.CommittedResponse(offsets=[pb.PartitionOffset(topic=tp, partition=p, offset=o)
                                             for (tp, p), o in sorted(offs.items())])

    @unary
    async def Lag(self, request, context):
        rows = self.ctx.broker.describe_group(request.group)
        return pb.LagResponse(partitions=[pb.PartitionLag(**r._asdict()) for r in rows],
                              total_lag=sum(r.lag for r in rows))
