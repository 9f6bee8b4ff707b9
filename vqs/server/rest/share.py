"""REST routes for share groups (Kafka's KIP-932; vqs.broker.share): list and describe.

A share group exists while it has members or stored delivery state (describe
answers 404 ``group_not_found`` otherwise). The description is
``Broker.describe_share_group``'s: members with their epochs, topics and
partitions, and per share partition its start offset, records acquired and
available, and the delivery-count histogram of the records in flight.
"""

from __future__ import annotations

from fastapi import APIRouter

from ..context import ServerContext
from ..errors import APIError
from .conventions import JSONRoute, check_name, jresp, name_param, ready_broker


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

    return r
