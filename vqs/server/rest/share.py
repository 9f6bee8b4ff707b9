"""REST routes for share groups (Kafka's KIP-932; vqs.broker.share): list, describe, and
members that receive and acknowledge records over HTTP.

A share group exists while it has members or stored delivery state (describe
answers 404 ``group_not_found`` otherwise). The description is
``Broker.describe_share_group``'s: members with their epochs, topics and
partitions, and per share partition its start offset, records acquired and
available, and the delivery-count histogram of the records in flight.

Members over HTTP are the broker's embedded share consumers
(``broker.share_consumer``), one per ``POST /share-groups/{g}/members``,
kept here by member id: ``poll`` acquires (long-polling up to ``wait_ms``,
at most ``max_wait_ms`` as every REST long poll, on the topics' append hook,
no thread held while it waits), ``acks``
accepts, releases, rejects or renews, ``DELETE`` releases what the member
holds and leaves. A member not heard from for its group's session timeout is
closed (its records released) at the next join; at most ``share_members.MAX_MEMBERS`` live
at once (then 429). The members are the server's (vqs/server/share_members.py),
shared with the gRPC front: a member joined here receives there too.
"""

from __future__ import annotations

import base64

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, Field

from ..context import ServerContext
from ..errors import APIError
from ..share_members import acknowledge_each, poll_waiting
from .conventions import JSONRoute, check_name, jresp, name_param, ready_broker


class ShareJoin(BaseModel):
    topics: list[str] = Field(min_length=1, max_length=100)


class SharePoll(BaseModel):
    max_records: int = Field(500, ge=1, le=10_000)
    wait_ms: int = Field(0, ge=0, le=30_000)


class ShareAck(BaseModel):
    topic: str = Field(min_length=1, max_length=200)
    partition: int = Field(ge=0, le=1_000_000)
    offset: int = Field(ge=0)
    type: str = Field("accept", pattern="^(accept|release|reject|renew)$")


class ShareAcks(BaseModel):
    acks: list[ShareAck] = Field(max_length=10_000)


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


def _record(r) -> dict:
    return {"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp_ms": r.timestamp_ms,
            "key_b64": _b64(r.key), "value_b64": _b64(r.value), "delivery_count": r.delivery_count,
            "headers": [[n, _b64(v)] for n, v in r.headers]}


def share_routes(ctx: ServerContext) -> APIRouter:
    r = APIRouter(tags=["share groups"], route_class=JSONRoute)

    @r.get("/share-groups", summary="List share groups")
    async def list_share_groups():
        b = ready_broker(ctx)
        return jresp({"groups": await ctx.run(b.share_group_names)})

    @r.get("/share-groups/{group}", summary="Members, share partitions, records in flight")
    async def describe_share_group(group: str = name_param("group")):
        b = ready_broker(ctx)
        check_name(group, "group")
        d = await ctx.run(b.describe_share_group, group)
        if d is None:
            raise APIError(404, "group_not_found", f"share group {group!r} has no members or state", field="group")
        return jresp(d)

    members = ctx.share_members  # shared with the gRPC front (vqs/server/share_members.py)

    def _member(group: str, member: str):
        m = members.get(group, member)
        if m is None:
            raise APIError(404, "member_not_found", f"share group {group!r} has no member {member!r} here "
                           "(closed, or its session lapsed: join again)", field="member")
        return m

    @r.post("/share-groups/{group}/members", summary="Join a share group", status_code=201)
    async def join(body: ShareJoin, group: str = name_param("group")):
        b = ready_broker(ctx)
        check_name(group, "group")
        for t in body.topics:
            check_name(t, "topic")
        m = await ctx.run(members.join, b, body.topics, group)
        if m is None:
            raise APIError(429, "too_many_members", f"at most {members.max_members} share-group members "
                           "over HTTP and gRPC")
        c = m.consumer
        return jresp({"group": group, "member_id": c.member_id, "assignment": c.assignment()}, status=201)

    @r.post("/share-groups/{group}/members/{member}/poll", summary="Acquire records")
    async def poll(body: SharePoll, group: str = name_param("group"), member: str = Path(..., max_length=200)):
        b = ready_broker(ctx)
        m = _member(group, member)
        recs = await poll_waiting(ctx.run, b, m, body.max_records, min(body.wait_ms, ctx.settings.max_wait_ms) / 1000,
                                  lambda: ctx.stopping)
        return jresp({"records": [_record(x) for x in recs]})

    @r.post("/share-groups/{group}/members/{member}/acks", summary="Accept, release, reject or renew records")
    async def acks(body: ShareAcks, group: str = name_param("group"), member: str = Path(..., max_length=200)):
        m = _member(group, member)
        results = await ctx.run(m.call, acknowledge_each, m.consumer,
                                [((a.topic, a.partition, a.offset), a.type) for a in body.acks])
        return jresp({"results": [{"ok": e is None, **({"error": e} if e else {})} for e in results]})

    @r.delete("/share-groups/{group}/members/{member}", summary="Release what the member holds and leave",
              status_code=204)
    async def leave(group: str = name_param("group"), member: str = Path(..., max_length=200)):
        m = members.leave(group, member)
        if m is not None:
            await ctx.run(m.call, m.consumer.close)
        return Response(status_code=204)

    return r
