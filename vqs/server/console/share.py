"""The Share groups pages: the list (overall, or of one topic: ``?topic=``) with each
group's records in flight, acquired and available, and their delivery-count histogram;
a group's page with its members, settings and each share partition's state.

The numbers are ``Broker.describe_share_group``'s, the same REST's
``GET /share-groups/{group}`` and ``vqs share describe`` show: a share
partition's start offset (every record below it is settled), its cursor (the
first offset never acquired), and its records in flight, acquired (locked by a
member) or available (released, or their lock ended), counted by delivery
count. The histogram runs from 1 to the group's delivery limit (a record past
it is archived, so none is shown there).

Read-only: nothing here changes a share group (its offsets are altered with
Kafka's admin API or REST), so there is no form and no CSRF token to check;
the pages are behind the console's login as every other. A group id may hold
any character (as Kafka's): it is shown as text (autoescaped) and put in a
link percent-encoded as one path segment (``pathseg``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from ...broker.names import validate_group
from ...errors import VQSError
from ..errors import APIError
from .base import ConsoleRoute, broker, enter, state
from .views import page

#: a histogram's drawing (the sparklines' size)
HIST_W, HIST_H = 120, 24


def histogram(counts: dict, limit: int) -> dict:
    """``counts`` ({delivery count (text or int): records}) as bars from 1 to ``limit`` (or the
    highest count, if higher): ``{"bars": [{"count", "records", "x", "y", "w", "h"}], "total"}``."""
    by = {int(k): int(v) for k, v in counts.items()}
    n = max([limit, *by]) if by else limit
    n = max(n, 1)
    hi = max(by.values(), default=0) or 1
    slot = HIST_W / n
    bars = []
    for k in range(1, n + 1):
        v = by.get(k, 0)
        h = 0.0 if v == 0 else max(1.0, (HIST_H - 2) * v / hi)
        bars.append({"count": k, "records": v, "x": round((k - 1) * slot + 1, 1), "w": round(max(slot - 2, 1), 1),
                     "y": round(HIST_H - h, 1), "h": round(h, 1)})
    return {"bars": bars, "total": sum(by.values())}


def _merge(rows: list[dict]) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in rows:
        for k, v in r["delivery_counts"].items():
            out[int(k)] = out.get(int(k), 0) + v
    return out


def share_table(b, topic: str | None = None) -> list[dict]:
    """A row per share group (of ``topic``'s readers only, when given): its state, members,
    topics, records acquired and available and their delivery counts (of ``topic`` only)."""
    rows = []
    sg = b.share_groups
    for g in b.share_group_names():
        try:
            d = b.describe_share_group(g)
        except VQSError:  # its topic deleted meanwhile
            continue
        if d is None:
            continue
        topics = sorted({p["topic"] for p in d["partitions"]} | {t for m in d["members"] for t in m["topics"]})
        if topic is not None and topic not in topics:
            continue
        parts = [p for p in d["partitions"] if topic is None or p["topic"] == topic]
        acquired = sum(p["acquired"] for p in parts)
        available = sum(p["available"] for p in parts)
        rows.append({"name": g, "state": d["state"], "members": len(d["members"]), "topics": topics,
                     "acquired": acquired, "available": available, "in_flight": acquired + available,
                     "histogram": histogram(_merge(parts), sg.settings_for(g).delivery_limit)})
    return rows


def share_group_view(b, group: str) -> dict | None:
    """A group's page: its description, each partition with its histogram, its settings;
    None for a group with neither members nor stored state (InvalidName for no group id)."""
    validate_group(group)
    d = b.describe_share_group(group)
    if d is None:
        return None
    st = b.share_groups.settings_for(group)
    for p in d["partitions"]:
        p["in_flight"] = p["acquired"] + p["available"]
        p["histogram"] = histogram(p["delivery_counts"], st.delivery_limit)
    d["histogram"] = histogram(_merge(d["partitions"]), st.delivery_limit)
    d["acquired"] = sum(p["acquired"] for p in d["partitions"])
    d["available"] = sum(p["available"] for p in d["partitions"])
    d["settings"] = [("delivery limit", st.delivery_limit), ("record lock", f"{st.record_lock_ms} ms"),
                     ("session timeout", f"{st.session_timeout_ms} ms"),
                     ("auto offset reset", st.auto_offset_reset),
                     ("dead-letter topic", st.dlq_topic or "none (archived records are dropped)")]
    return d


def share_routes() -> APIRouter:
    r = APIRouter(route_class=ConsoleRoute)

    @r.get("/console/share-groups")
    async def groups(request: Request, topic: str | None = None):
        session, new = enter(request)
        if topic is not None and len(topic) > 255:
            raise ValueError("topic: at most 255 characters")
        rows = await state(request).ctx.run(share_table, broker(request), topic or None)
        return page(request, session, new, "share_groups.html", groups=rows, topic=topic or None)

    @r.get("/console/share-groups/{group:path}")
    async def detail(request: Request, group: str):
        session, new = enter(request)
        d = await state(request).ctx.run(share_group_view, broker(request), group)
        if d is None:
            raise APIError(404, "group_not_found", f"share group {group!r} has no members or stored state")
        return page(request, session, new, "share_group.html", group=group, d=d)

    return r
