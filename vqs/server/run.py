"""Run the server: ``vqs serve`` and ``python -m vqs.server``.

uvicorn with uvloop and httptools, one worker (one process owns the data
directory). SIGTERM/SIGINT: stop accepting connections, let in-flight requests
finish (long polls are woken within a second), then the app's lifespan
flushes and closes the broker. A second signal forces the exit.
"""

from __future__ import annotations

import logging
import sys

from .settings import Settings

log = logging.getLogger("vqs.server")


def serve(settings: Settings) -> None:
    settings.check()
    import uvicorn

    from .app import create_app
    from .logs import uvicorn_log_config

    app = create_app(settings)
    ctx = app.state.ctx
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    try:
        import httptools  # noqa: F401

        http = "httptools"
    except ImportError:
        http = "h11"
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        loop=loop,
        http=http,
        lifespan="on",
        workers=1,
        limit_concurrency=settings.max_connections,
        timeout_graceful_shutdown=settings.graceful_timeout_s,
        timeout_keep_alive=30,
        log_config=uvicorn_log_config(settings.log_level, settings.log_format),
        access_log=False,
        server_header=False,
        date_header=True,
        h11_max_incomplete_event_size=settings.max_header_bytes,
    )
    server = uvicorn.Server(config)

    original = server.handle_exit

    def handle_exit(sig, frame):
        # wake long polls so draining takes at most ~1 s, then let uvicorn drain
        ctx.stopping = True
        original(sig, frame)
        # a drained, flushed, closed server exits 0 (uvicorn would re-raise the signal)
        server._captured_signals.clear()

    server.handle_exit = handle_exit
    log.info("starting", extra={"vqs": {"host": settings.host, "port": settings.port,
                                        "data_dir": settings.data_dir, "auth": settings.auth_enabled}})
    server.run()
    if not server.started:
        sys.exit(3)
