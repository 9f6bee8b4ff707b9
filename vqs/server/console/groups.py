"""The Consumer groups pages: the list with total lag, a group's committed, end
offset and lag per partition with a lag chart, and resetting its offsets.

A group's page also shows its live members and their partitions (the
broker's group coordinator, ``Broker.group_members``).

Invariants: a reset computes the new offsets from the partitions as they are
when the confirmation page is shown and commits exactly those (the
confirmation form carries them), so what the operator confirmed is what is
committed; a reset happens only on a POST with the CSRF token and
``confirm=yes``; an exact offset outside a partition's [start, end] is refused.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from .base import ConsoleRoute, broker, enter, int_arg, posted, state
from .browser import parse_time
from .security import add_headers
from .views import page, redirect

TARGETS = ("earliest", "latest", "timestamp", "exact")


def group_table(b) -> list[dict]:
    rows = []
    for g in b.groups():
        try:
            parts = b.describe_group(g)
        except Exception:  # deleted meanwhile
            continue
        rows.append({"name": g, "topics": sorted({p.topic for p in parts}), "partitions": len(parts),
                     "lag": sum(p.lag for p in parts)})
    return rows


def _new_offsets(b, group: str, topic: str, target: str, value: str) -> list[tuple[str, int, int | None, int]]:
    """(topic, partition, committed now, new offset) for every partition of ``topic``."""
    if target not in TARGETS:
        raise ValueError(f"reset to must be one of {', '.join(TARGETS)}")
    t = b.topic(topic)
    committed = b.group_offsets(group)
    ts = parse_time(value) if target == "timestamp" else None
    exact = int_arg(value, "offset", None) if target == "exact" else None
    if target == "exact" and exact is None:
        raise ValueError("give the offset to reset to")
    out = []
    for p in range(t.partitions):
        lg = t.log(p)
        start, end = lg.start_offset, lg.end_offset
        if target == "earliest":
            new = start
        elif target == "latest":
            new = end
        elif target == "timestamp":
            found = lg.offset_for_time(ts)
            new = end if found is None else found
        else:
            if not start <= exact <= end:
                raise ValueError(f"offset {exact} is outside partition {p} of {topic} ({start}..{end})")
            new = exact
        out.append((topic, p, committed.get((topic, p)), new))
    return out


def group_routes() -> APIRouter:
    r = APIRouter(route_class=ConsoleRoute)

    @r.get("/console/groups")
    async def groups(request: Request):
        session, new = enter(request)
        rows = await state(request).ctx.run(group_table, broker(request))
        return page(request, session, new, "groups.html", groups=rows)

    @r.get("/console/groups/{group:path}")
    async def detail(request: Request, group: str):
        session, new = enter(request)
        b = broker(request)
        if group not in b.groups():
            raise ValueError(f"group {group!r} has no committed offsets")
        parts = b.describe_group(group)
        topics = sorted({p.topic for p in parts})
        return page(request, session, new, "group.html", group=group, parts=parts, topics=topics,
                    all_topics=b.topics(), total_lag=sum(p.lag for p in parts), members=b.group_members(group))

    @r.get("/console/api/groups/{group:path}/lag")
    async def lag(request: Request, group: str):
        enter(request)
        resp = JSONResponse(state(request).sampler.lag_series(group))
        add_headers(resp)
        return resp

    @r.post("/console/groups/{group:path}/reset")
    async def reset(request: Request, group: str):
        session, new, form = await posted(request)
        b = broker(request)
        topic = form.get("topic", "")
        target = form.get("to", "")
        value = form.get("value", "")
        back = f"/console/groups/{quote(group, safe='')}"
        if form.get("confirm") != "yes":
            plan = _new_offsets(b, group, topic, target, value)
            fields = {"topic": topic, "to": target, "value": value,
                      "offsets": ",".join(f"{p}:{n}" for _, p, _, n in plan)}
            return page(request, session, new, "confirm.html", action=f"Reset offsets of {group}",
                        question=f"Commit these offsets for group {group} on topic {topic} ({target}"
                                 f"{' ' + value if value else ''})? Consumers of the group that are running "
                                 "keep their positions until they restart or re-read the committed offsets.",
                        rows_header=["topic", "partition", "committed now", "new committed offset"],
                        rows=[(tp, p, "-" if c is None else c, n) for tp, p, c, n in plan],
                        fields=fields, post_to=f"/console/groups/{quote(group, safe='')}/reset", back=back)
        offsets = {}
        for item in form.get("offsets", "").split(","):
            p, _, o = item.partition(":")
            offsets[(topic, int_arg(p, "partition"))] = int_arg(o, "offset")
        if not offsets:
            raise ValueError("no offsets to commit")
        def outside_commit():  # as Kafka's offset reset: refused while the group has members
            b.coordinator.check_outside_commit(group)
            b.commit_offsets(group, offsets)

        await state(request).ctx.run(outside_commit)
        return redirect(request, session, new, back,
                        ("ok", f"Offsets of {group} on {topic} reset ({len(offsets)} partition(s))."))

    return r
