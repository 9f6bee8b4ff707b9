"""The web console at ``/console``, served by ``vqs serve`` on its own port, offline.

    security.py   sessions, login, CSRF, the Content-Security-Policy
    base.py       the console's state, the guarded route class, recent errors
    sampler.py    the counters of /metrics sampled every second for the charts
    views.py      Jinja2 rendering and formatting (autoescaped: data is text)
    overview.py   Overview (+ the charts' JSON)
    topics.py     Topics, a topic's page;  browser.py  its message browser
    groups.py     Consumer groups, lag, offset resets
    share.py      Share groups: records in flight, delivery-count histograms (read-only)
    queues.py     Queues, a queue's page (peek, send, purge, redrive)
    about.py      About, login, logout
    docs_page.py  /docs with the vendored Swagger UI
    templates/    the pages;  static/  console.css, console.js, vendor/ (htmx, uPlot, Swagger UI)

Server-rendered pages (Jinja2) with a little JavaScript in static files
(htmx for partial updates, uPlot for the charts): no build step, every asset
in the wheel, no CDN. The console calls the broker directly, as the REST
routes do; it adds one thing to the broker, ``Queue.peek`` (a non-consuming
read). Invariants of each part are in its module.
"""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from .about import about_routes
from .base import ConsoleState
from .docs_page import docs_routes
from .groups import group_routes
from .overview import overview_routes
from .queues import queue_routes
from .share import share_routes
from .topics import topic_routes

__all__ = ["mount_console"]

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")


def mount_console(app: FastAPI, ctx) -> None:
    """Add the console (/console, /console/static) and the offline /docs to ``app``,
    and run the console's sampler during the app's lifespan."""
    st = ConsoleState(ctx)
    app.state.console = st
    for routes in (overview_routes, topic_routes, group_routes, share_routes, queue_routes, about_routes):
        app.include_router(routes(), include_in_schema=False)
    app.include_router(docs_routes(app.title))
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a):
        async with inner(a) as value:
            root = logging.getLogger("vqs")
            root.addHandler(st.errors)
            task = asyncio.get_running_loop().create_task(st.sampler.run())
            try:
                yield value
            finally:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                root.removeHandler(st.errors)

    app.router.lifespan_context = lifespan
