"""The Queues pages: the table (visible, in flight, delayed, dead-letter depth, age of
the oldest message, send and receive rates) and a queue's page: attributes and
tags, messages peeked without receiving them, send, purge, and redrive out of a
dead-letter queue as a message move task with its progress.

Invariants: peeking never changes the queue (Queue.peek: no lease, no receive
count); purge and redrive happen only on a POST with the CSRF token and
``confirm=yes`` (sent by their confirmation pages); a send is counted in the
server's metrics as the REST and SQS sends are.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from .base import ConsoleRoute, broker, enter, int_arg, posted, state
from .views import iso_ms, page, redirect, safe, show_value

MAX_PEEK = 100


def _row(b, sampler, name: str, now_ms: int) -> dict | None:
    try:
        q = b.queue(name)
        c = q.counts()
        oldest = q.oldest_sent_ms() if c["visible"] + c["in_flight"] + c["delayed"] else None
        dlq_name = q.config.dead_letter_queue
        dlq_depth = None
        if dlq_name:
            try:
                dc = b.queue(dlq_name).counts()
                dlq_depth = dc["visible"] + dc["in_flight"] + dc["delayed"]
            except Exception:
                dlq_depth = None
    except Exception:  # deleted meanwhile
        return None
    spark, rin, rout = sampler.rates("queue", name)
    return {"name": name, "fifo": q.config.fifo, **c, "dlq": dlq_name, "dlq_depth": dlq_depth,
            "age_s": None if oldest is None else max(0, now_ms - oldest) / 1000,
            "spark": spark, "rate_in": rin, "rate_out": rout}


def queue_table(b, sampler) -> list[dict]:
    now_ms = int(time.time() * 1000)
    return [row for row in (_row(b, sampler, n, now_ms) for n in b.queues()) if row is not None]


_TIME_ATTRIBUTES = ("CreatedTimestamp", "LastModifiedTimestamp")  # SQS: epoch seconds


def _shown_attributes(attrs: dict) -> list[tuple[str, str]]:
    """A queue's SQS attributes for people: times as ISO-8601 (SQS gives epoch seconds)."""
    out = []
    for k, v in sorted(attrs.items()):
        if k in _TIME_ATTRIBUTES and str(v).isdigit():
            v = f"{iso_ms(int(v) * 1000)} ({v})"
        out.append((k, v))
    return out


def _peeked(q, n: int, start: int, fmt: str) -> list[dict]:
    out = []
    for p in q.peek(n, start):
        m = p.message
        attrs = []
        for k, a in sorted(m.attributes.items()):
            v = a.get("StringValue")
            attrs.append((k, a.get("DataType", ""), v if v is not None else show_value(bytes(a["BinaryValue"]), "hex")["text"]))
        out.append({"id": m.id, "offset": m.offset, "state": p.state, "receive_count": p.receive_count,
                    "visible_at_ms": p.visible_at_ms, "sent_ms": m.sent_timestamp_ms, "group_id": m.group_id,
                    "body": show_value(m.body, fmt), "attributes": attrs})
    return out


def _tasks(b, name: str) -> list[dict]:
    try:
        tasks = b.queue_registry.list_message_move_tasks(name, 10)
    except Exception:
        return []
    return [{"status": t.status, "moved": t.moved, "to_move": t.to_move,
             "destination": t.destination or "source queues", "started_ms": t.started_ms,
             "failure": safe(t.failure_reason) if t.failure_reason else "",
             "pct": 100 if not t.to_move else min(100, int(100 * t.moved / t.to_move))} for t in tasks]


def queue_routes() -> APIRouter:
    r = APIRouter(route_class=ConsoleRoute)

    @r.get("/console/queues")
    async def queues(request: Request):
        session, new = enter(request)
        st = state(request)
        rows = await st.ctx.run(queue_table, broker(request), st.sampler)
        return page(request, session, new, "queues.html", queues=rows)

    @r.get("/console/queues/{name}")
    async def detail(request: Request, name: str):
        session, new = enter(request)
        st = state(request)
        b = broker(request)
        q = b.queue(name)
        qp = request.query_params
        fmt = qp.get("format") or "text"
        if fmt not in ("text", "json", "hex"):
            raise ValueError("format must be text, json or hex")
        n = int_arg(qp.get("peek"), "peek", 10, 1, MAX_PEEK)
        start = int_arg(qp.get("from"), "from", 0)
        msgs = await st.ctx.run(_peeked, q, n, start, fmt)
        sources = q.dead_letter_source_queues()
        tasks = _tasks(b, name)
        if request.headers.get("hx-request") and qp.get("part") == "tasks":
            return page(request, session, new, "move_tasks.html", queue=name, tasks=tasks)
        _, rin, rout = st.sampler.rates("queue", name)
        return page(request, session, new, "queue.html", queue=name, fifo=q.config.fifo,
                    attributes=_shown_attributes(q.get_attributes()), tags=sorted(q.tags().items()),
                    counts=q.counts(), msgs=msgs, fmt=fmt, peek=n, start=start,
                    next_from=(msgs[-1]["offset"] + 1) if len(msgs) == n else None, sources=sources,
                    tasks=tasks, rate_in=rin, rate_out=rout, now_ms=int(time.time() * 1000))

    @r.post("/console/queues/{name}/send")
    async def send(request: Request, name: str):
        session, new, form = await posted(request)
        st = state(request)
        q = broker(request).queue(name)
        body = form.get("body", "")
        kw = {}
        delay = int_arg(form.get("delay_seconds"), "delay seconds", None, 0, 900)
        if delay is not None:
            kw["delay_seconds"] = delay
        for k in ("group_id", "dedup_id"):
            if form.get(k):
                kw[k] = form[k]
        mid = await st.ctx.run(q.send, body, **kw)
        st.ctx.metrics.count_in("queue", q.name, 1, len(body.encode()))
        return redirect(request, session, new, f"/console/queues/{name}", ("ok", f"Sent message {mid}."))

    @r.post("/console/queues/{name}/purge")
    async def purge(request: Request, name: str):
        session, new, form = await posted(request)
        q = broker(request).queue(name)
        if form.get("confirm") != "yes":
            c = q.counts()
            return page(request, session, new, "confirm.html", action=f"Purge queue {name}",
                        question=f"Delete every message of {name} ({c['visible']} visible, {c['in_flight']} in flight, "
                                 f"{c['delayed']} delayed)? This cannot be undone; one purge per 60 seconds.",
                        rows=None, fields={}, post_to=f"/console/queues/{name}/purge", back=f"/console/queues/{name}")
        await state(request).ctx.run(q.purge)
        return redirect(request, session, new, f"/console/queues/{name}", ("ok", f"Queue {name} purged."))

    @r.post("/console/queues/{name}/redrive")
    async def redrive(request: Request, name: str):
        session, new, form = await posted(request)
        b = broker(request)
        q = b.queue(name)
        sources = q.dead_letter_source_queues()
        if form.get("confirm") != "yes":
            c = q.counts()
            return page(request, session, new, "confirm.html", action=f"Redrive {name}",
                        question=f"Move the {c['visible']} visible message(s) of dead-letter queue {name} back to "
                                 f"their source queue(s) ({', '.join(sources) or 'none configured'})?",
                        rows=None, fields={}, post_to=f"/console/queues/{name}/redrive", back=f"/console/queues/{name}")
        await state(request).ctx.run(b.queue_registry.start_message_move_task, name)
        return redirect(request, session, new, f"/console/queues/{name}", ("ok", f"Redrive of {name} started."))

    return r
