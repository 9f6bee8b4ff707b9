"""REST routes for operators: liveness, readiness and Prometheus metrics.

Invariants: these routes never need the broker (they answer while the server
starts and stops) and are open without a bearer token (app.py); ``ready`` is
true only between the broker opening and the first stop signal.

``/health`` answers 200 while the server is ready, also when storage is
degraded (``status: "degraded"``, ``storage.reasons``: ``disk_full`` and/or
``log_failed``, ``storage.problems`` per topic partition or queue log; see
vqs/server/health.py): the process is alive and serves what it can, so a
liveness probe must not restart it (a restart would not free the disk);
alert on ``status`` or on the ``vqs_log_*`` gauges instead. 503 still means
not ready (starting or stopping). A failed or full log shows at once; a new
topic or queue and a filling filesystem within ``health_cache_ms``
(``StorageHealth``).
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Response

from ..context import ServerContext
from ..health import StorageHealth
from .conventions import jresp


def ops_routes(ctx: ServerContext) -> APIRouter:
    r = APIRouter(tags=["ops"])
    cached: list[StorageHealth | None] = [None]  # made once the broker is open (vqs/server/health.py)

    @r.get("/health", summary="Liveness, readiness and storage health")
    async def health():
        ready = ctx.ready and not ctx.stopping
        body = {"status": "ok" if ready else "unavailable", "live": True, "ready": ready,
                "uptime_s": round(time.time() - ctx.started, 3), "flush": ctx.settings.flush}
        if ctx.settings.native_port:  # where vqs.Client sends its requests without HTTP (docs/native.md)
            body["native_port"] = ctx.settings.native_port
        broker = ctx.broker
        if ready and broker is not None:
            # Degraded is still 200: the server answers and serves every topic
            # and queue it can (reads, receives, deletes; writes elsewhere).
            if cached[0] is None or cached[0].broker is not broker:
                cached[0] = StorageHealth(broker, ctx.settings.data_dir, ctx.settings.min_free_bytes,
                                          ctx.settings.health_cache_ms / 1000)
            storage = cached[0].answer()
            if storage["reasons"]:
                body["status"] = "degraded"
            if ctx.settings.tokens:
                # /health is open without a token: no topic or queue names then
                # (GET /metrics, behind the token, has them per topic and queue)
                storage["problem_count"] = len(storage.pop("problems"))
            body["storage"] = storage
        return jresp(body, 200 if ready else 503)

    @r.get("/health/live", summary="Liveness: the process answers")
    async def live():
        return jresp({"live": True})

    @r.get("/health/ready", summary="Readiness: the data directory is open")
    async def ready():
        ok = ctx.ready and not ctx.stopping
        return jresp({"ready": ok}, 200 if ok else 503)

    @r.get("/metrics", summary="Prometheus metrics",
           responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def prom():
        data = await ctx.run(ctx.metrics.render)
        return Response(data, media_type="text/plain; version=0.0.4; charset=utf-8")

    return r
