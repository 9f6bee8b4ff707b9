"""REST routes for topics as resources: list, create, alter, grow, describe, delete, offsets.

Invariants: creating or growing a topic never takes the server past
``max_partitions_per_topic`` or ``max_total_partitions`` (checked before the
broker creates anything); the messages of a topic are served by messages.py.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Response

from ...broker.names import is_internal
from ...errors import TopicDoesNotExist
from ..context import ServerContext
from ..errors import APIError
from .conventions import JSONRoute, check_name, jresp, links, name_param, ready_broker
from .models import PartitionsCreate, TopicCreate, TopicSettings


def topic_routes(ctx: ServerContext) -> APIRouter:
    r = APIRouter(tags=["topics"], route_class=JSONRoute)
    s = ctx.settings

    @r.get("/topics", summary="List topics")
    async def list_topics(include_all: bool = Query(False, alias="all", description="include internal topics "
                                                    "(names starting with '__', e.g. the Spark sink's staging topics)")):
        names = ready_broker(ctx).topics()
        return jresp({"topics": names if include_all else [n for n in names if not is_internal(n)]})

    def check_total(more: int) -> None:
        b = ready_broker(ctx)
        total = 0
        for tn in b.topics():
            try:
                total += b.topic(tn).partitions
            except TopicDoesNotExist:  # deleted since topics() listed it: holds no partitions
                pass
        if total + more > s.max_total_partitions:
            raise APIError(409, "partition_limit", f"the server holds {total} partitions; {more} more "
                           f"would pass max_total_partitions ({s.max_total_partitions})", field="partitions")

    topic = {"topic": "$request.body#/name"}

    @r.post("/topics", summary="Create a topic", status_code=201, responses=links(
        201, "The topic, created",
        Produce=("post", "/topics/{topic}/messages", topic), Consume=("get", "/topics/{topic}/messages", topic),
        Describe=("get", "/topics/{topic}", topic), Offsets=("get", "/topics/{topic}/offsets", topic),
        Delete=("delete", "/topics/{topic}", topic)))
    async def create_topic(body: TopicCreate):
        check_name(body.name, "topic")
        if body.partitions > s.max_partitions_per_topic:
            raise APIError(400, "invalid_argument", f"partitions: at most {s.max_partitions_per_topic} per topic "
                           "(max_partitions_per_topic)", field="partitions")
        check_total(body.partitions)
        settings = body.model_dump(exclude={"name", "partitions"})  # (create_topic's keywords)
        t = await ctx.run(ready_broker(ctx).create_topic, body.name, partitions=body.partitions, **settings)
        return jresp(t.describe(), 201)

    @r.get("/topics/{topic}", summary="Describe a topic (partitions, offsets, sizes)")
    async def describe_topic(topic: str = name_param("topic")):
        return jresp(ready_broker(ctx).topic(check_name(topic, "topic")).describe())

    @r.patch("/topics/{topic}", summary="Change a topic's own settings (Kafka's IncrementalAlterConfigs)")
    async def alter_topic(body: TopicSettings, topic: str = name_param("topic"),
                          replace: bool = Query(False, description="every setting not in the body returns to "
                                                                   "the server's default (Kafka's AlterConfigs)"),
                          validate_only: bool = Query(False, description="check the settings, change nothing")):
        """The settings in the body become the topic's own (a null one returns to the server's
        default; one not named stays, unless ``replace``): checked as creation checks them (400,
        nothing changed), durable when answered, in force for every front's next request
        (``Broker.alter_topic``). Returns the topic's description."""
        changes = {k: getattr(body, k) for k in body.model_fields_set}
        t = await ctx.run(ready_broker(ctx).alter_topic, check_name(topic, "topic"), changes, replace=replace,
                          validate_only=validate_only)
        return jresp(t.describe())

    @r.post("/topics/{topic}/partitions", summary="Grow a topic to more partitions (Kafka's CreatePartitions)")
    async def create_partitions(body: PartitionsCreate, topic: str = name_param("topic")):
        name = check_name(topic, "topic")
        if body.partitions > s.max_partitions_per_topic:
            raise APIError(400, "invalid_argument", f"partitions: at most {s.max_partitions_per_topic} per topic "
                           "(max_partitions_per_topic)", field="partitions")
        current = ready_broker(ctx).topic(name).partitions
        check_total(body.partitions - current)  # (not growing: ConfigError, 400, from the broker)
        t = await ctx.run(ready_broker(ctx).create_partitions, name, body.partitions)
        return jresp(t.describe())

    @r.delete("/topics/{topic}", summary="Delete a topic and its data", status_code=204)
    async def delete_topic(topic: str = name_param("topic")):
        await ctx.run(ready_broker(ctx).delete_topic, check_name(topic, "topic"))
        return Response(status_code=204)

    @r.get("/topics/{topic}/offsets", summary="Start and end offset of every partition")
    async def offsets(topic: str = name_param("topic"),
                      timestamp_ms: int | None = Query(None, ge=0, le=(1 << 63) - 1,
                                                          description="also give the first offset at or after this time")):
        name = check_name(topic, "topic")
        return jresp({"topic": name, "partitions": ready_broker(ctx).offsets(name, timestamp_ms)})

    return r
