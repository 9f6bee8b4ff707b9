"""The Topics pages: the table (partitions, offsets, size, retention, rate sparkline),
create, delete (confirmed), and a topic's detail page with its own settings' form, its message browser
(browser.py), its consumer groups and its share groups' records in flight (share.py).

Invariants: creating a topic keeps the server's partition limits
(``max_partitions_per_topic``, ``max_total_partitions``) as the REST API does;
a delete happens only on a POST carrying the CSRF token and ``confirm=yes``,
which only the confirmation page (showing what will be deleted) sends.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from ...broker.names import is_internal
from ...errors import TopicDoesNotExist, shown
from .base import ConsoleRoute, broker, enter, int_arg, posted, state
from .browser import browser_values
from .share import share_table
from .views import duration, nbytes, page, redirect


def _row(b, sampler, name: str) -> dict | None:
    try:
        t = b.topic(name)
        parts = [t.log(p) for p in range(t.partitions)]
        start = sum(lg.start_offset for lg in parts)
        end = sum(lg.end_offset for lg in parts)
        size = sum(lg.size_bytes for lg in parts)
    except Exception:  # deleted meanwhile
        return None
    spark, rin, rout = sampler.rates("topic", name)
    cfg = t.config
    return {"name": name, "partitions": t.partitions, "start": start, "end": end, "messages": end - start,
            "size": size, "retention_ms": cfg.get("retention_ms"), "retention_bytes": cfg.get("retention_bytes"),
            "spark": spark, "rate_in": rin, "rate_out": rout}


#: the settings form of a topic's page: (name, kind), kind "int", "ratio" or a tuple of the
#: choices a select offers (every field empty or "" is the server's default)
SETTINGS_FORM = (
    ("retention_ms", "int"), ("retention_bytes", "int"), ("segment_bytes", "int"), ("segment_ms", "int"),
    ("compression", ("zstd", "lz4", "gzip")), ("max_message_bytes", "int"),
    ("cleanup_policy", ("delete", "compact", "compact,delete")), ("delete_retention_ms", "int"),
    ("min_cleanable_dirty_ratio", "ratio"), ("min_compaction_lag_ms", "int"), ("max_compaction_lag_ms", "int"),
    ("flush", ("always", "interval", "never")), ("flush_interval_ms", "int"),
)


def settings_from_form(form: dict) -> dict:
    """The settings form's values as ``Broker.alter_topic`` takes them (None: the server's
    default); ValueError naming a field that is not a number where one is needed."""
    out: dict = {}
    for name, kind in SETTINGS_FORM:
        text = (form.get(name) or "").strip()
        if not text:
            out[name] = None
        elif kind == "int":
            out[name] = int_arg(text, name, None, -1)
        elif kind == "ratio":
            try:
                out[name] = float(text)
            except ValueError:
                raise ValueError(f"{name} must be a number between 0 and 1, not {shown(text)}") from None
        else:
            if text not in kind:
                raise ValueError(f"{name} must be one of {', '.join(kind)}, not {shown(text)}")
            out[name] = text
    return out


def config_rows(config: dict, server_max_message_bytes: int) -> list[tuple[str, str]]:
    """A topic's settings in words, sorted by name: what a null means (no limit of the topic's
    own, no compression), byte counts and durations readable beside the number as set."""
    rows = []
    for k, v in sorted(config.items()):
        if k in ("retention_ms", "retention_bytes") and (v is None or v == -1):
            text = "unlimited (kept until deleted)"
        elif k == "retention_ms" or k == "segment_ms":
            text = "-" if v is None else f"{v} ({duration(v / 1000)})"
        elif k == "max_message_bytes" and v is None:
            text = f"server limit: {server_max_message_bytes} ({nbytes(server_max_message_bytes)})"
        elif k == "compression" and v is None:
            text = "none"
        elif k.endswith("_bytes") and isinstance(v, int) and not isinstance(v, bool):
            text = f"{v} ({nbytes(v)})"
        elif isinstance(v, bool):
            text = "yes" if v else "no"
        else:
            text = "-" if v is None or v == "" else str(v)
        rows.append((k, text))
    return rows


def topic_table(b, sampler, include_internal: bool = False) -> list[dict]:
    rows = []
    for n in b.topics():
        if include_internal or not is_internal(n):
            row = _row(b, sampler, n)
            if row is not None:
                rows.append(row)
    return rows


def topic_routes() -> APIRouter:
    r = APIRouter(route_class=ConsoleRoute)

    @r.get("/console/topics")
    async def topics(request: Request, internal: bool = False):
        session, new = enter(request)
        st = state(request)
        rows = await st.ctx.run(topic_table, broker(request), st.sampler, internal)
        return page(request, session, new, "topics.html", topics=rows, internal=internal,
                    max_partitions=st.ctx.settings.max_partitions_per_topic)

    @r.post("/console/topics")
    async def create(request: Request):
        session, new, form = await posted(request)
        st = state(request)
        s = st.ctx.settings
        b = broker(request)
        name = form.get("name", "").strip()
        partitions = int_arg(form.get("partitions"), "partitions", 1, 1, s.max_partitions_per_topic)
        retention_h = int_arg(form.get("retention_hours"), "retention (hours)", None, 1, 1 << 40)
        total = 0
        for tn in b.topics():
            try:
                total += b.topic(tn).partitions
            except TopicDoesNotExist:
                pass
        if total + partitions > s.max_total_partitions:
            raise ValueError(f"the server holds {total} partitions; {partitions} more would pass "
                             f"max_total_partitions ({s.max_total_partitions})")
        await st.ctx.run(b.create_topic, name, partitions=partitions,
                         retention_ms=None if retention_h is None else retention_h * 3_600_000,
                         cleanup_policy=form.get("cleanup_policy") or None)  # (the catalog validates it)
        return redirect(request, session, new, f"/console/topics/{name}",
                        ("ok", f"Topic {name} created with {partitions} partition(s)."))

    @r.post("/console/topics/{topic}/settings")
    async def settings(request: Request, topic: str):
        """The topic's own settings become the form's (an empty field: the server's default), as
        the REST API's PATCH with replace: checked first, nothing changed when one is refused."""
        session, new, form = await posted(request)
        b = broker(request)
        b.topic(topic)  # (an unknown topic: 404 before anything is read)
        changes = settings_from_form(form)
        await state(request).ctx.run(lambda: b.alter_topic(topic, changes, replace=True))
        return redirect(request, session, new, f"/console/topics/{topic}",
                        ("ok", f"The settings of topic {topic} changed."))

    @r.post("/console/topics/{topic}/delete")
    async def delete(request: Request, topic: str):
        session, new, form = await posted(request)
        b = broker(request)
        t = b.topic(topic)
        if form.get("confirm") != "yes":
            row = _row(b, state(request).sampler, topic) or {}
            return page(request, session, new, "confirm.html", action=f"Delete topic {topic}",
                        question=f"Delete topic {topic} and all its data ({row.get('messages', 0)} messages in "
                                 f"{t.partitions} partition(s))? Consumer groups forget their offsets on it. "
                                 "This cannot be undone.",
                        rows=None, fields={}, post_to=f"/console/topics/{topic}/delete",
                        back=f"/console/topics/{topic}")
        await state(request).ctx.run(b.delete_topic, topic)
        return redirect(request, session, new, "/console/topics", ("ok", f"Topic {topic} deleted."))

    @r.get("/console/topics/{topic}")
    async def detail(request: Request, topic: str):
        session, new = enter(request)
        st = state(request)
        b = broker(request)
        t = b.topic(topic)
        parts = [{"partition": p, "start": t.log(p).start_offset, "end": t.log(p).end_offset,
                  "size": t.log(p).size_bytes, "segments": t.log(p).segment_count} for p in range(t.partitions)]
        groups = []
        for g in b.groups():
            offs = b.group_offsets(g)
            if any(tp[0] == topic for tp in offs):
                groups.append(g)
        values = await st.ctx.run(browser_values, t, request.query_params)
        shares = [] if request.headers.get("hx-request") else await st.ctx.run(share_table, b, t.name)
        tmpl = "browser.html" if request.headers.get("hx-request") else "topic.html"
        config = config_rows(t.config, st.ctx.settings.max_message_bytes)
        return page(request, session, new, tmpl, topic=t.name, partitions=parts, config=config,
                    overrides=t.overrides, groups=groups, shares=shares, settings_form=SETTINGS_FORM, **values)

    return r
