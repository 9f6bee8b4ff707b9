"""REST routes for consumer groups: list, describe (committed offsets and lag), commit, delete.

Invariants: a group exists while it has committed offsets (describe and
delete answer 404 ``group_not_found`` otherwise); a commit names only
partitions that exist, and is checked in full before any offset is written.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from ..context import ServerContext
from ..errors import APIError
from .conventions import check_name, jresp, name_param, ready_broker
from .models import GroupCommit


def group_routes(ctx: ServerContext) -> APIRouter:
    r = APIRouter(tags=["groups"])

    @r.get("/groups", summary="List consumer groups")
    async def list_groups():
        return jresp({"groups": ready_broker(ctx).groups()})

    @r.get("/groups/{group}", summary="Committed offsets and lag per partition")
    async def describe_group(group: str = name_param("group")):
        b = ready_broker(ctx)
        check_name(group, "group")
        if group not in b.groups():
            raise APIError(404, "group_not_found", f"group {group!r} has no committed offsets", field="group")
        rows = [row._asdict() for row in b.describe_group(group)]
        return jresp({"group": group, "partitions": rows, "total_lag": sum(x["lag"] for x in rows)})

    @r.post("/groups/{group}/offsets", summary="Commit offsets for a group")
    async def commit(body: GroupCommit, group: str = name_param("group")):
        b = ready_broker(ctx)
        check_name(group, "group")
        offs = {(o.topic, o.partition): o.offset for o in body.offsets}
        for (tn, p) in offs:
            t = b.topic(tn)
            if p >= t.partitions:
                raise APIError(400, "invalid_argument", f"topic {tn!r} has no partition {p}", field="partition")
        await ctx.run(b.commit_offsets, group, offs)
        return jresp({"group": group, "committed": len(offs)})

    @r.delete("/groups/{group}", summary="Forget a group's offsets", status_code=204)
    async def delete_group(group: str = name_param("group")):
        if not await ctx.run(ready_broker(ctx).delete_group, check_name(group, "group")):
            raise APIError(404, "group_not_found", f"group {group!r} has no committed offsets", field="group")
        return Response(status_code=204)

    return r
