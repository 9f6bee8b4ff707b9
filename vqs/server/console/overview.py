"""The Overview page (health, version, uptime, disk, totals, live charts, listeners,
recent errors) and the JSON its charts poll.

Invariants: the data directory is shown by its name only (the last component
of its path): an operator recognises it, and the page names no server path
(the full path is in ``vqs serve``'s start-up line and the server log). Chart
data are the sampler's (the counters of /metrics), never a second count.
"""

from __future__ import annotations

import os
import shutil
import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from ...broker.names import is_internal
from .base import ConsoleRoute, broker, enter, state
from .sampler import WINDOW_S
from .security import add_headers
from .views import page


def totals(b) -> dict:
    topics = [n for n in b.topics() if not is_internal(n)]
    out = {"topics": len(topics), "partitions": 0, "groups": len(b.groups()), "queues": 0,
           "topic_messages": 0, "queue_messages": 0, "bytes": 0}
    for n in topics:
        try:
            t = b.topic(n)
            out["partitions"] += t.partitions
            for p in range(t.partitions):
                lg = t.log(p)
                out["topic_messages"] += lg.end_offset - lg.start_offset
                out["bytes"] += lg.size_bytes
        except Exception:  # deleted meanwhile
            continue
    queues = b.queues()
    out["queues"] = len(queues)
    for qn in queues:
        try:
            q = b.queue(qn)
            c = q.counts()
            out["queue_messages"] += c["visible"] + c["in_flight"] + c["delayed"]
            size = getattr(q, "size_bytes", None)
            if isinstance(size, int):
                out["bytes"] += size
        except Exception:
            continue
    return out


def listeners(request: Request) -> list[dict]:
    s = state(request).ctx.settings
    host = request.url.hostname or s.host
    port = request.url.port or s.port
    base = f"{request.url.scheme}://{host}:{port}"
    rows = [
        {"name": "HTTP REST API", "address": base + "/", "note": "topics, groups, queues; OpenAPI at /docs"},
        {"name": "SQS API", "address": base + "/", "note": "AWS JSON 1.0 and query protocol (POST /)"},
        {"name": "Prometheus", "address": base + "/metrics", "note": ""},
    ]
    # The other listeners as configured (a front that is off is said to be off, with its option).
    for name, port, option, note in (
            ("Kafka protocol", s.kafka_port, "--kafka-port", "Kafka clients: bootstrap.servers"),
            ("gRPC", s.grpc_port, "--grpc-port", "vqs.v1 services; TLS as HTTP" if s.tls_cert else "vqs.v1 services")):
        if port:
            rows.append({"name": name, "address": f"{host}:{port}", "note": note})
        else:
            rows.append({"name": name, "address": "-", "note": f"off (start the server with {option} PORT)"})
    return rows


def overview_routes() -> APIRouter:
    r = APIRouter(route_class=ConsoleRoute)

    @r.get("/console")
    async def overview(request: Request):
        session, new = enter(request)
        st = state(request)
        ctx = st.ctx
        b = broker(request)
        tot = await ctx.run(totals, b)
        try:
            du = shutil.disk_usage(b.path)
            disk = {"total": du.total, "used": du.used, "free": du.free}
        except OSError:
            disk = None
        return page(request, session, new, "overview.html", version=request.app.version,
                    uptime=time.time() - ctx.started, ready=ctx.ready and not ctx.stopping,
                    data_dir=os.path.basename(b.path.rstrip(os.sep)) or "-", disk=disk, totals=tot,
                    flush=ctx.settings.flush, listeners=listeners(request), errors=list(st.errors.rows),
                    error_counts=_error_counts(ctx.metrics))

    @r.get("/console/api/overview")
    async def series(request: Request, seconds: int = WINDOW_S):
        enter(request)
        resp = JSONResponse(state(request).sampler.overview_series(max(10, min(seconds, WINDOW_S))))
        add_headers(resp)
        return resp

    return r


def _error_counts(metrics) -> list[tuple[str, str, int]]:
    rows = []
    for fam in metrics.errors.collect():
        for s in fam.samples:
            if s.name.endswith("_total") and s.value:
                rows.append((s.labels["api"], s.labels["code"], int(s.value)))
    return sorted(rows, key=lambda x: -x[2])[:20]
