"""Run the server: the ``serve`` command (``vqs serve`` and ``python -m vqs.server``) and the process.

``serve_command`` is the one definition of serve's options: the ``vqs`` CLI
registers it as ``vqs serve`` and ``python -m vqs.server`` runs it alone, so
the server never imports the CLI. Options override ``VQS_*`` variables, which
override the TOML file (settings.load_settings); a setting that cannot work
exits 2 before anything is opened.

uvicorn with uvloop and httptools, one worker (one process owns the data
directory). SIGTERM/SIGINT: stop accepting connections, let in-flight requests
finish (long polls are woken within a second), then the app's lifespan
flushes and closes the broker. A second signal forces the exit.
"""

from __future__ import annotations

import logging
import os
import sys

import typer

from ..errors import ConfigError
from .settings import Settings, load_settings

logger = logging.getLogger("vqs.server")


def serve_command(
    data_dir: str | None = typer.Option(None, "--data-dir", help="data directory (VQS_DATA_DIR; default ./vqs-data)"),
    host: str | None = typer.Option(None, "--host", help="address to bind (default 127.0.0.1)"),
    port: int | None = typer.Option(None, "--port", help="port (default 8642)"),
    config: str | None = typer.Option(None, "--config", help="TOML settings file (VQS_CONFIG)"),
    token: list[str] = typer.Option([], "--token", help="bearer token accepted for REST (repeat; VQS_TOKENS=a,b)"),
    sigv4_key: list[str] = typer.Option([], "--sigv4-key", help="AKID:SECRET accepted for SQS SigV4 (repeat; VQS_SIGV4_KEYS)"),
    insecure: bool | None = typer.Option(None, "--insecure", help="allow a non-loopback address without credentials"),
    flush: str | None = typer.Option(None, "--flush", help="always | interval | never"),
    flush_interval_ms: int | None = typer.Option(None, "--flush-interval-ms"),
    account_id: str | None = typer.Option(None, "--account-id", help="SQS account id in queue URLs (123456789012)"),
    region: str | None = typer.Option(None, "--region", help="region for unsigned SQS requests (us-east-1)"),
    max_body_bytes: int | None = typer.Option(None, "--max-body-bytes"),
    max_message_bytes: int | None = typer.Option(None, "--max-message-bytes"),
    max_header_bytes: int | None = typer.Option(None, "--max-header-bytes"),
    max_connections: int | None = typer.Option(None, "--max-connections"),
    max_long_poll_waiters: int | None = typer.Option(None, "--max-long-poll-waiters"),
    max_partitions_per_topic: int | None = typer.Option(None, "--max-partitions-per-topic"),
    max_total_partitions: int | None = typer.Option(None, "--max-total-partitions"),
    log_level: str | None = typer.Option(None, "--log-level"),
    log_format: str | None = typer.Option(None, "--log-format", help="json | text"),
    access_log: bool | None = typer.Option(None, "--access-log", help="log every request"),
):
    """Run the server on a data directory.

    REST API, SQS-compatible API, OpenAPI docs and Prometheus metrics on one port.
    """
    overrides = dict(data_dir=data_dir or os.environ.get("VQS_DATA_DIR"), host=host, port=port, tokens=token,
                     sigv4_keys=sigv4_key, insecure=insecure, flush=flush, flush_interval_ms=flush_interval_ms,
                     account_id=account_id, region=region, max_body_bytes=max_body_bytes,
                     max_message_bytes=max_message_bytes, max_header_bytes=max_header_bytes,
                     max_connections=max_connections, max_long_poll_waiters=max_long_poll_waiters,
                     max_partitions_per_topic=max_partitions_per_topic, max_total_partitions=max_total_partitions,
                     log_level=log_level, log_format=log_format, access_log=access_log)
    try:
        settings = load_settings(overrides, config_file=config)
        settings.check()
    except ConfigError as e:
        from rich.console import Console

        Console(stderr=True).print(f"[red]error:[/red] {e}", highlight=False)
        raise typer.Exit(2) from None
    serve(settings)


def main(argv: list[str] | None = None) -> None:
    """``python -m vqs.server [options]``: the serve command on its own."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(serve_command)
    app(argv, prog_name="python -m vqs.server")


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
    logger.info("starting", extra={"vqs": {"host": settings.host, "port": settings.port,
                                           "data_dir": settings.data_dir, "auth": settings.auth_enabled}})
    server.run()
    if not server.started:
        sys.exit(3)
