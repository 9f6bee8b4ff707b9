"""REST routes for operators: liveness, readiness and Prometheus metrics.

Invariants: these routes never need the broker (they answer while the server
starts and stops) and are open without a bearer token (app.py); ``ready`` is
true only between the broker opening and the first stop signal.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Response

from ..context import ServerContext
from .conventions import jresp


def ops_routes(ctx: ServerContext) -> APIRouter:
    r = APIRouter(tags=["ops"])

    @r.get("/health", summary="Liveness and readiness")
    async def health():
        ready = ctx.ready and not ctx.stopping
        body = {"status": "ok" if ready else "unavailable", "live": True, "ready": ready,
                "uptime_s": round(time.time() - ctx.started, 3), "flush": ctx.settings.flush}
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
