"""REST routes for consumer groups: list, describe (committed offsets, lag, members), commit,
delete, a group id's configs; and membership of VQS consumers (join, heartbeat, leave:
vqs/broker/assigned_groups.py).

Invariants: a group exists while it has committed offsets or members
(describe answers 404 ``group_not_found`` otherwise; delete forgets offsets
only); a commit names only partitions that exist, and is checked in full
before any offset is written: a member's against its generation and its
partitions, anyone else's against the group having no members (409
``fenced_member`` otherwise). Membership answers are JSON
(``Assignment.to_json``): member id, generation, the partitions it may read
now, ``pending`` and the heartbeat interval.
"""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Path, Query, Request, Response

from ..context import ServerContext
from ..errors import APIError
from .conventions import MEMBER_PATTERN, JSONRoute, check_name, jresp, name_param, ready_broker
from .models import GroupCommit, GroupConfigChanges, MemberHeartbeat, MemberJoin


async def _wait_for_change(ctx: ServerContext, ag, group: str, member_id: str, generation: int, owned: list,
                           wait_s: float):
    """A heartbeat's wait (``wait_ms``) for an answer other than ``owned``, holding no thread:
    woken by the group's changes (``AssignedGroups.watch``), sliced at a second to notice a
    lapsed session or the server stopping; the last answer."""
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()

    def wake() -> None:
        try:
            loop.call_soon_threadsafe(changed.set)
        except RuntimeError:  # the loop closed: nobody waits
            pass

    wait_s = ag.watch(group, member_id, wake, wait_s)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            changed.clear()  # before the heartbeat: a change after it wakes the wait below
            a = await ctx.run(ag.heartbeat, group, member_id, generation, owned)
            left = deadline - time.monotonic()
            if set(a.partitions) != set(owned) or left <= 0 or ctx.stopping:
                return a
            try:
                await asyncio.wait_for(changed.wait(), min(left, 1.0))
            except TimeoutError:
                pass
    finally:
        ag.unwatch(group, member_id, wake)


def _member_param():
    return Path(..., pattern=MEMBER_PATTERN, description="the member id its join answered")


def _config_answer(group: str, values: dict) -> dict:
    """``Broker.group_config_values`` as JSON: every config in force, and the group's own."""
    return {"group": group, "config": {k: v for k, (v, _) in values.items()},
            "own": {k: v for k, (v, own) in values.items() if own}}


def group_routes(ctx: ServerContext) -> APIRouter:
    r = APIRouter(tags=["groups"], route_class=JSONRoute)

    @r.get("/groups", summary="List consumer groups")
    async def list_groups():
        return jresp({"groups": ready_broker(ctx).groups()})

    @r.get("/groups/{group}", summary="Committed offsets and lag per partition; members")
    async def describe_group(group: str = name_param("group")):
        b = ready_broker(ctx)
        check_name(group, "group")
        members = await ctx.run(b.group_members, group)
        if group not in b.groups() and not members["members"]:
            raise APIError(404, "group_not_found", f"group {group!r} has no committed offsets or members",
                           field="group")
        rows = [row._asdict() for row in b.describe_group(group)]
        return jresp({"group": group, "partitions": rows, "total_lag": sum(x["lag"] for x in rows), **members})

    @r.get("/groups/{group}/config", summary="A group id's configs: each in force, and its own")
    async def group_config(group: str = name_param("group")):
        b = ready_broker(ctx)
        return jresp(_config_answer(group, await ctx.run(b.group_config_values, check_name(group, "group"))))

    @r.patch("/groups/{group}/config", summary="Set (a value) or reset (null) a group id's own configs")
    async def alter_group_config(body: GroupConfigChanges, group: str = name_param("group"),
                                 validate_only: bool = Query(False, description="check them, change nothing")):
        """Kafka's group configs by their names (a consumer-protocol group's ``consumer.*``, a share
        group's ``share.*`` and dead-letter ones: ``Broker.alter_group_configs``), checked before
        anything changes (400 naming the bad one), durable when answered, in force for the group's
        next heartbeat, fetch or acknowledgement on every front. Answers as GET."""
        b = ready_broker(ctx)
        name = check_name(group, "group")
        await ctx.run(b.alter_group_configs, name, body.root, validate_only=validate_only)
        return jresp(_config_answer(name, await ctx.run(b.group_config_values, name)))

    @r.post("/groups/{group}/offsets", summary="Commit offsets for a group")
    async def commit(body: GroupCommit, group: str = name_param("group")):
        b = ready_broker(ctx)
        check_name(group, "group")
        offs = {(o.topic, o.partition): o.offset for o in body.offsets}
        for (tn, p) in offs:
            t = b.topic(tn)
            if p >= t.partitions:
                raise APIError(400, "invalid_argument", f"topic {tn!r} has no partition {p}", field="partition")

        def checked_commit():
            if body.member_id is None:
                b.coordinator.check_outside_commit(group)
            else:
                gen = -1 if body.generation is None else body.generation
                b.coordinator.assigned.check_commit(group, body.member_id, gen, offs)
            b.commit_offsets(group, offs)

        await ctx.run(checked_commit)
        return jresp({"group": group, "committed": len(offs)})

    @r.post("/groups/{group}/members", summary="Join a group as a VQS consumer", status_code=201)
    async def join(body: MemberJoin, request: Request, group: str = name_param("group")):
        b = ready_broker(ctx)
        check_name(group, "group")
        host = request.client.host if request.client else ""
        a = await ctx.run(b.coordinator.assigned.join, group, body.topics, client_id=body.client_id,
                          client_host=host, session_timeout_ms=body.session_timeout_ms)
        return jresp(a.to_json(), status=201)

    @r.post("/groups/{group}/members/{member_id}/heartbeat", summary="A member's heartbeat: its assignment now")
    async def heartbeat(body: MemberHeartbeat, group: str = name_param("group"),
                        member_id: str = _member_param()):
        b = ready_broker(ctx)
        check_name(group, "group")
        wait_s = min(body.wait_ms, ctx.settings.max_wait_ms) / 1000
        owned = [(o.topic, o.partition) for o in body.owned]
        ag = b.coordinator.assigned
        a = await ctx.run(ag.heartbeat, group, member_id, body.generation, owned)
        if wait_s > 0 and set(a.partitions) == set(owned):
            a = await _wait_for_change(ctx, ag, group, member_id, body.generation, owned, wait_s)
        return jresp(a.to_json())

    @r.delete("/groups/{group}/members/{member_id}", summary="Leave a group (partitions move at once)",
              status_code=204)
    async def leave(group: str = name_param("group"), member_id: str = _member_param()):
        b = ready_broker(ctx)
        check_name(group, "group")
        await ctx.run(b.coordinator.assigned.leave, group, member_id)
        return Response(status_code=204)

    @r.delete("/groups/{group}", summary="Forget a group's offsets", status_code=204)
    async def delete_group(group: str = name_param("group")):
        if not await ctx.run(ready_broker(ctx).delete_group, check_name(group, "group")):
            raise APIError(404, "group_not_found", f"group {group!r} has no committed offsets", field="group")
        return Response(status_code=204)

    return r
