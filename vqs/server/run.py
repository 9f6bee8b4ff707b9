"""Run the server: the ``serve`` command (``vqs serve`` and ``python -m vqs.server``) and the process.

``serve_command`` is the one definition of serve's options: the ``vqs`` CLI
registers it as ``vqs serve`` and ``python -m vqs.server`` runs it alone, so
the server never imports the CLI. Options override ``VQS_*`` variables, which
override the TOML file (settings.load_settings); a setting that cannot work
exits 2 before anything is opened.

Start-up, in this order, each failure one line (``error: ...`` on a terminal,
a JSON record otherwise) and an exit code of the ``vqs`` scheme: settings
checked (2); the port bound (3 if another process has it; nothing else was
touched); the Kafka and native ports bound likewise; with ``--grpc-port``, the gRPC port bound too (2 without the grpc
extra, 3 if in use; vqs/server/grpc/front.py); the data directory opened and locked (3 if another process holds
it, naming its pid; 1 if it cannot be opened or holds files but no VQS data; 4 if recovery finds
corruption); then uvicorn serves on the bound socket and, once it listens,
one ``ready`` line gives the URLs (API, console, docs, metrics; gRPC's address once it
serves). No "ready" is ever logged before the sockets listen.

uvicorn with uvloop and httptools, one worker (one process owns the data
directory). SIGTERM/SIGINT/SIGHUP: stop accepting connections, let in-flight requests
finish (long polls are woken within a second), the app's lifespan closes the
SQS service, then the broker is flushed and closed and the process exits 0.
A second signal forces the exit. The native listener (native.py) stops first: its
requests in progress end before HTTP drains and the broker closes.

Why over 500 lines: the start-up and shutdown order of every front and the broker is one
sequence (every port bound before the data directory opens; the broker closed after every
front has stopped), kept in one place so that it can be read, and checked, as one.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import signal
import socket
import sys
from typing import NoReturn

import typer

from ..errors import ConfigError, DiskFullError, LogFailedError
from .settings import Settings, environment_warnings, load_settings

logger = logging.getLogger("vqs.server")

# The exit codes of `vqs serve`: the vqs command's scheme (vqs/cli/failures.py, docs/cli.md).
EXIT_ERROR = 1        # the data directory cannot be opened (permissions, not a directory, ...)
EXIT_SETTINGS = 2     # settings that cannot work: refused before anything is opened
EXIT_UNAVAILABLE = 3  # the port or the data directory is held by another process
EXIT_CORRUPT = 4      # recovery found corruption in the data directory
EXIT_CODES_HELP = ("Exit status: 0 after a clean stop (SIGTERM, Ctrl-C); 1 the data directory cannot be "
                   "opened; 2 settings refused; 3 the port is in use or the data directory is locked by "
                   "another process; 4 recovery found corruption.")


def serve_command(
    data_dir: str | None = typer.Option(None, "--data-dir", help="data directory (VQS_DATA_DIR; default ./vqs-data)"),
    host: str | None = typer.Option(None, "--host", help="address to bind (default 127.0.0.1)"),
    port: int | None = typer.Option(None, "--port", help="port (default 8642)"),
    config: str | None = typer.Option(None, "--config", help="TOML settings file (VQS_CONFIG)"),
    token: list[str] = typer.Option([], "--token", help="bearer token accepted for REST (repeat; VQS_TOKENS=a,b)"),
    sigv4_key: list[str] = typer.Option([], "--sigv4-key", help="AKID:SECRET accepted for SQS SigV4 (repeat; VQS_SIGV4_KEYS)"),
    insecure: bool | None = typer.Option(None, "--insecure", help="allow a non-loopback address without credentials"),
    allowed_host: list[str] = typer.Option([], "--allowed-host",
                                           help="a Host name answered besides localhost and IP addresses "
                                                "(repeat; VQS_ALLOWED_HOSTS=a,b; see docs/security.md)"),
    flush: str | None = typer.Option(None, "--flush", help="always | interval | never"),
    flush_interval_ms: int | None = typer.Option(None, "--flush-interval-ms"),
    min_free_bytes: int | None = typer.Option(
        None, "--min-free-bytes",
        help="refuse topic and queue writes (507) once the data dir's filesystem has less free space "
             "(receives, deletes and checkpoints go on); 0 = off"),
    account_id: str | None = typer.Option(None, "--account-id", help="SQS account id in queue URLs (123456789012)"),
    region: str | None = typer.Option(None, "--region", help="region for unsigned SQS requests (us-east-1)"),
    max_body_bytes: int | None = typer.Option(None, "--max-body-bytes"),
    max_message_bytes: int | None = typer.Option(None, "--max-message-bytes"),
    max_header_bytes: int | None = typer.Option(None, "--max-header-bytes"),
    max_connections: int | None = typer.Option(None, "--max-connections",
                                               help="HTTP connections open at once; more get 503 (1024)"),
    max_connections_per_client: int | None = typer.Option(
        None, "--max-connections-per-client", help="HTTP connections open at once from one address (256)"),
    http_header_timeout_s: float | None = typer.Option(
        None, "--http-header-timeout-s", help="seconds to finish a request's headers, else 408 and closed (10)"),
    max_long_poll_waiters: int | None = typer.Option(None, "--max-long-poll-waiters"),
    max_partitions_per_topic: int | None = typer.Option(None, "--max-partitions-per-topic"),
    max_total_partitions: int | None = typer.Option(None, "--max-total-partitions"),
    max_open_files: int | None = typer.Option(
        None, "--max-open-files",
        help="segment files kept open, least recently used closed first (VQS_MAX_OPEN_FILES; "
             "default 0: half the open-file limit, which the server raises to its hard limit)"),
    log_level: str | None = typer.Option(None, "--log-level"),
    log_format: str | None = typer.Option(None, "--log-format",
                                          help="auto (text on a terminal, else json) | json | text"),
    access_log: bool | None = typer.Option(None, "--access-log", help="log every request"),
    grpc_port: int | None = typer.Option(None, "--grpc-port",
                                         help="also serve gRPC (vqs.v1) on this port (the grpc extra; default off)"),
    tls_cert: str | None = typer.Option(None, "--tls-cert", help="PEM certificate: HTTPS and gRPC over TLS"),
    tls_key: str | None = typer.Option(None, "--tls-key", help="PEM private key of --tls-cert"),
    kafka_tls_client_ca: str | None = typer.Option(
        None, "--kafka-tls-client-ca",
        help="PEM CA certificates: Kafka clients must present a certificate they signed, which "
             "authenticates them as User:<its subject> (with --tls-cert)"),
    kafka_port: int | None = typer.Option(None, "--kafka-port",
                                          help="also serve the Kafka protocol on this port (off unless given)"),
    native_port: int | None = typer.Option(None, "--native-port",
                                           help="also serve the REST API over the native protocol (persistent "
                                                "TCP frames, no HTTP; vqs.Client uses it) on this port "
                                                "(VQS_NATIVE_PORT; off unless given)"),
    kafka_user: list[str] = typer.Option([], "--kafka-user",
                                         help="NAME:PASSWORD for Kafka's SASL/PLAIN instead of the tokens (repeat; "
                                              "VQS_KAFKA_USERS)"),
    kafka_super_user: list[str] = typer.Option([], "--kafka-super-user",
                                               help="User:NAME whom no Kafka ACL restricts (repeat; "
                                                    "VQS_KAFKA_SUPER_USERS)"),
):
    """Run the server on a data directory.

    REST API, SQS-compatible API, OpenAPI docs and Prometheus metrics on one port.
    """
    overrides = dict(data_dir=data_dir or os.environ.get("VQS_DATA_DIR"), host=host, port=port, tokens=token,
                     sigv4_keys=sigv4_key, insecure=insecure, flush=flush, flush_interval_ms=flush_interval_ms,
                     min_free_bytes=min_free_bytes,
                     account_id=account_id, region=region, max_body_bytes=max_body_bytes,
                     max_message_bytes=max_message_bytes, max_header_bytes=max_header_bytes,
                     max_connections=max_connections, max_long_poll_waiters=max_long_poll_waiters,
                     max_partitions_per_topic=max_partitions_per_topic, max_total_partitions=max_total_partitions,
                     max_open_files=max_open_files, log_level=log_level, log_format=log_format, access_log=access_log,
                     grpc_port=grpc_port, tls_cert=tls_cert, tls_key=tls_key)
    overrides["kafka_port"] = kafka_port
    overrides["native_port"] = native_port
    overrides["kafka_tls_client_ca"] = kafka_tls_client_ca
    overrides["kafka_users"] = kafka_user or None
    overrides["kafka_super_users"] = kafka_super_user or None
    overrides.update(max_connections_per_client=max_connections_per_client,
                     http_header_timeout_s=http_header_timeout_s)
    overrides["allowed_hosts"] = allowed_host
    try:
        settings = load_settings(overrides, config_file=config)
        settings.check()
    except ConfigError as e:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True).print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_SETTINGS) from None
    serve(settings)


def main(argv: list[str] | None = None) -> None:
    """``python -m vqs.server [options]``: the serve command on its own."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(epilog=EXIT_CODES_HELP)(serve_command)
    app(argv, prog_name="python -m vqs.server")


def serve(settings: Settings) -> None:
    """Run the server until SIGTERM/SIGINT; exits the process with EXIT_* when it cannot start."""
    settings.check()
    import faulthandler

    from . import logs
    from .allocator import keep_large_buffers

    # a fatal signal (a crash in a C extension; SIGBUS past a file truncated under a mapping)
    # writes every thread's Python stack to stderr, the server's log, before the process dies
    faulthandler.enable()
    keep_large_buffers()  # multi-MiB fetch answers reuse heap pages (allocator.py)

    fmt = logs.configure(settings.log_level, settings.log_format)
    _require_server_extra(fmt)
    for warning in environment_warnings(settings):
        logger.warning(warning)
    conn_cap = _open_file_limit(settings, fmt)
    from .byte_budget import in_flight_budget, pre_auth_budget

    # one of each for every front (byte_budget.py)
    pre_auth = pre_auth_budget(settings.max_pre_auth_bytes)
    in_flight = in_flight_budget(settings.max_request_bytes_in_flight)
    from .auth_failures import AuthFailures

    auth_failures = AuthFailures()  # every front's, counted and logged alike
    sock = _listen(settings, fmt)
    grpc_front = None
    kafka_sock = None
    native_sock = None
    try:
        if settings.kafka_port:
            kafka_sock = _listen(settings, fmt, settings.kafka_port, option="--kafka-port")
        if settings.native_port:
            native_sock = _listen(settings, fmt, settings.native_port, option="--native-port")
        grpc_front = _listen_grpc(settings, fmt, conn_cap) if settings.grpc_port else None
        broker = _open_broker(settings, fmt)
    except BaseException:
        sock.close()
        for s in (kafka_sock, native_sock):
            if s is not None:
                s.close()
        if grpc_front is not None:
            grpc_front.join()
        raise
    kafka = None
    close_failed = False
    try:
        if kafka_sock is not None:
            from .kafka import KafkaListener

            kafka = KafkaListener(broker, settings, kafka_sock, max_connections=conn_cap, pre_auth=pre_auth,
                                  in_flight=in_flight, auth_failures=auth_failures)
            kafka.start()
        _run(settings, sock, broker, grpc_front, conn_cap, pre_auth, native_sock, in_flight, auth_failures)
    finally:
        if kafka is not None:
            kafka.stop()
        if grpc_front is not None:  # its calls end before the broker closes
            grpc_front.join()
        try:
            broker.close()  # always releases the data directory, then raises what it could not write
        except (DiskFullError, LogFailedError) as e:
            # (a log whose last write or fsync failed at close, EIO: what it had
            # accepted since its last fsync may be lost; said like the full disk,
            # one line in the log's format, not the command's generic error)
            what = ("writes it had accepted found the disk full" if isinstance(e, DiskFullError)
                    else "a log's last writes failed (a disk I/O error)")
            logger.error("closed %s, but %s: %s", broker.path, what, e,
                         extra={"vqs": {"data_dir": broker.path, "exit_code": 1}})
            close_failed = True
        else:
            logger.info("closed", extra={"vqs": {"data_dir": broker.path}})
    if close_failed:
        raise SystemExit(1)  # one line above, not a traceback


def _cannot_start(fmt: str, message: str, code: int) -> NoReturn:
    """One line and the exit: ``error: ...`` on a terminal, a JSON error record otherwise."""
    if fmt == "json":
        logger.error(message, extra={"vqs": {"exit_code": code}})
    else:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


# The modules `vqs serve` needs beyond the core library: the server extra (pyproject.toml).
SERVER_MODULES = ("fastapi", "uvicorn", "prometheus_client", "jinja2", "cramjam")


def _require_server_extra(fmt: str) -> None:
    """Exit 2 with what to install when the server extra is missing (never an ImportError traceback)."""
    import importlib

    missing = []
    for m in SERVER_MODULES:
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        _cannot_start(fmt, f"the server needs the server extra (missing: {', '.join(missing)}): "
                           "pip install 'vqs[server]'", EXIT_SETTINGS)


#: Descriptors the server holds besides its connections and segment files: the
#: listening sockets, the event loop's, the log, the data directory's lock, the
#: group offsets being replaced, worker threads' (about 25 at start-up).
OTHER_FDS = 64


def _open_file_limit(settings: Settings, fmt: str) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (logged), as servers do, and
    cap the segment files kept open (storage/file_cache.py); return each
    listener's connection cap. Connections need descriptors too, and one the
    event loop cannot accept (EMFILE) is closed unanswered with nothing logged.
    ``max_connections`` applies per listener (HTTP, and Kafka and gRPC when
    they run), so the budget is that times the descriptors a connection of
    each costs (two for HTTP: its socket and the mapping a stored-batch answer
    holds until it is sent, rest/messages.py; one for Kafka; three for gRPC: the
    client's socket and both ends of its relay to the core, grpc/relay.py),
    plus ``max_open_files`` files and
    OTHER_FDS. When the limit cannot hold it, a
    warning at start-up names the limit and the settings to change (``ulimit
    -n 1024`` with the defaults cannot hold 800 idle connections), and every
    listener's cap is held to its share of what the limit leaves (at least
    16): a connection past it is answered (503, or closed by the Kafka and
    gRPC listeners at accept) rather than starving the others of descriptors."""
    from ..disk import open_file_limits, raise_open_file_limit
    from ..storage import FILE_CACHE, set_max_open_files

    raise_open_file_limit(quiet=True)  # said in the ready line (a failed start writes one line)
    FILE_CACHE.limits_changed()
    try:
        set_max_open_files(settings.max_open_files or None)
    except ConfigError as e:
        _cannot_start(fmt, str(e), EXIT_SETTINGS)
    soft, _ = open_file_limits()
    listeners = 1 + bool(settings.kafka_port) + bool(settings.grpc_port) + bool(settings.native_port)
    per_connection = (2 + bool(settings.kafka_port) + 3 * bool(settings.grpc_port)  # descriptors, all listeners
                      + bool(settings.native_port))
    room = soft - FILE_CACHE.max_open_files - OTHER_FDS
    if soft > 0 and settings.max_connections * per_connection > room:
        cap = max(room // per_connection, 16)
        logger.warning("the open-file limit (RLIMIT_NOFILE) %d cannot hold max_connections (%d) connections on "
                       "each of %d listeners, max_open_files (%d) segment files and %d other descriptors: while "
                       "the files are open, requests that open a file may get 503 too_many_open_files; raise the "
                       "limit (ulimit -n, LimitNOFILE=) or lower max_connections or max_open_files; connections "
                       "are capped at %d per listener", soft, settings.max_connections, listeners,
                       FILE_CACHE.max_open_files, OTHER_FDS, cap)
        return cap
    return settings.max_connections


LISTEN_BACKLOG = 2048  # connections the kernel queues before they are accepted (uvicorn's default too)


def _listen(settings: Settings, fmt: str, port: int | None = None, option: str = "--port") -> socket.socket:
    """The listening socket, bound and listening before anything else is opened (a busy port
    changes nothing); ``option`` names the setting of that port in the error.

    It listens at once: SO_REUSEADDR lets a second socket bind an address no socket listens on
    yet, so a port bound now and listened on later could be bound meanwhile by another server,
    and whichever listened second would fail after its start was said. Listening holds the port
    from here on; connections wait in the backlog until the server accepts them."""
    host, port = settings.host, port or settings.port
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            _cannot_start(fmt, f"port {port} on {host} is in use (another server? choose a free one with {option})",
                          EXIT_UNAVAILABLE)
        if e.errno == errno.EACCES:
            _cannot_start(fmt, f"cannot listen on port {port} of {host}: permission denied (ports below 1024 "
                               "need privileges)", EXIT_SETTINGS)
        _cannot_start(fmt, f"cannot listen on {host} port {port}: {e.strerror or e}", EXIT_SETTINGS)
    return sock


def _listen_grpc(settings: Settings, fmt: str, conn_cap: int | None = None):
    """The gRPC front with its port bound (vqs/server/grpc/front.py), or the exit saying why not."""
    # The gRPC C core logs at INFO what a peer sends in a GOAWAY frame's debug data, raw, on
    # stderr (a forged log line, terminal escape codes): it logs errors at most (read at its
    # start), whatever the environment asked for.
    if os.environ.get("GRPC_VERBOSITY", "").upper() not in ("ERROR", "NONE"):
        os.environ["GRPC_VERBOSITY"] = "ERROR"
    try:
        from .grpc import require_grpc

        require_grpc()
    except ImportError as e:
        _cannot_start(fmt, str(e), EXIT_SETTINGS)
    # the TCP port is ours (its connections are capped per address, then relayed to the core:
    # grpc/relay.py); a busy one said in our one line
    sock = _listen(settings, fmt, settings.grpc_port, option="--grpc-port")
    from .grpc.front import GrpcBindError, GrpcFront

    front = GrpcFront(settings, sock, max_connections=conn_cap)
    try:
        front.bind()
    except GrpcBindError as e:
        _cannot_start(fmt, str(e), EXIT_UNAVAILABLE)
    return front


def _open_broker(settings: Settings, fmt: str):
    """The data directory's Broker (its lock taken), or the exit with one line saying why not."""
    from .. import errors as E
    from ..broker import Broker, layout

    if os.path.exists(settings.data_dir) and not os.path.isdir(settings.data_dir):
        _cannot_start(fmt, f"data dir {settings.data_dir} is a file, not a directory", EXIT_ERROR)
    try:
        entries = os.listdir(settings.data_dir)
    except OSError:
        entries = []  # missing (the Broker makes it) or unreadable (the Broker says why)
    if layout.someone_elses(entries):
        # another program's directory (a mistyped --data-dir): never adopted, nothing made in it
        _cannot_start(fmt, f"data dir {settings.data_dir} holds files but no VQS data (no topics/, queues/, groups/, "
                           ".lock or another file of a data dir), so it was not opened; give an empty or new directory, or the data dir you "
                           "meant (check --data-dir / VQS_DATA_DIR / data_dir)", EXIT_ERROR)
    try:
        return Broker(settings.data_dir, flush=settings.flush, flush_interval_ms=settings.flush_interval_ms,
                      min_free_bytes=settings.min_free_bytes, cleaner_interval_ms=settings.cleaner_interval_ms,
                      cleaner_io_max_bytes_per_second=settings.cleaner_io_max_bytes_per_second)
    except E.LogLockedError as e:
        who = f"pid {e.holder_pid}" if e.holder_pid else "another process"
        _cannot_start(fmt, f"data dir {settings.data_dir} is locked by {who} (another server? one process "
                           "owns a data dir)", EXIT_UNAVAILABLE)
    except E.CorruptRecordError as e:
        _cannot_start(fmt, f"data dir {settings.data_dir}: {e} (check it with `vqs inspect`)", EXIT_CORRUPT)
    except E.VQSError as e:
        _cannot_start(fmt, f"data dir {settings.data_dir}: {e}", EXIT_ERROR)
    except OSError as e:
        _cannot_start(fmt, f"cannot open data dir {settings.data_dir}: {e.strerror or e}", EXIT_ERROR)


def _run(settings: Settings, sock: socket.socket, broker, grpc_front=None, conn_cap: int | None = None,
         pre_auth=None, native_sock: socket.socket | None = None, in_flight=None, auth_failures=None) -> None:
    import uvicorn

    from .app import create_app

    app = create_app(settings, broker=broker, pre_auth=pre_auth, in_flight=in_flight, auth_failures=auth_failures)
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
        # connections are capped when accepted (http_bounds.py; one closed to make room is
        # counted here until it is lost): idle ones never make uvicorn refuse a request; this
        # bounds requests in progress, also those whose client left
        limit_concurrency=2 * (conn_cap or settings.max_connections),
        timeout_graceful_shutdown=settings.graceful_timeout_s,
        timeout_keep_alive=30,
        log_config=None,  # logs.configure did it
        access_log=False,
        server_header=False,
        date_header=True,
        h11_max_incomplete_event_size=settings.max_header_bytes,
        ssl_certfile=settings.tls_cert or None,
        ssl_keyfile=settings.tls_key or None,
    )

    fast = None
    if http == "httptools":  # plain produce requests answered below ASGI (fast_http.py), if uvicorn allows
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        from .fast_http import fast_protocol
        from .http_bounds import bounded_protocol

        bounded = bounded_protocol(HttpToolsProtocol, settings, conn_cap or settings.max_connections, ctx.metrics)
        config.http = bounded
        fast = fast_protocol(getattr(app.state, "front", None), config, bounded)
        if fast is not None:
            config.http = fast

    native = None
    if native_sock is not None:
        from .native import NativeListener

        native = NativeListener(app.state.front, settings, native_sock, conn_cap or settings.max_connections)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets=None):
            if native is not None:  # its requests in progress end before HTTP drains and the broker closes
                await native.stop(settings.graceful_timeout_s)
            await super().shutdown(sockets=sockets)

        async def startup(self, sockets=None):
            if settings.tls_cert:  # the TLS handshake within the header deadline (asyncio's default: 60 s)
                import asyncio
                import functools

                loop = asyncio.get_running_loop()
                loop.create_server = functools.partial(loop.create_server,
                                                       ssl_handshake_timeout=settings.http_header_timeout_s)
            await super().startup(sockets=sockets)
            if self.started and native is not None:
                await native.start()
            if self.started:  # the socket listens: say so, with where to go
                # Everything made so far (modules, the app, the open broker) lives as long as the
                # process: out of the collector's sight, so a full collection walks only what
                # requests made since. Without it a full collection paused the event loop
                # ~40 ms every few seconds under load (produce p99 42 ms -> 5 ms, bench/RESULTS.md).
                gc.collect()
                gc.freeze()
                if grpc_front is not None:
                    grpc_front.start(ctx)
                _announce(settings, sock, broker.path, grpc_front, fast_http=fast is not None)

    server = Server(config)
    original = server.handle_exit

    def handle_exit(sig, frame):
        # wake long polls so draining takes at most ~1 s, then let uvicorn drain
        if not ctx.stopping:
            logger.info("stopping", extra={"vqs": {"signal": signal.Signals(sig).name}})
        ctx.stopping = True
        if grpc_front is not None:
            grpc_front.stop_soon()
        original(sig, frame)
        # a drained, flushed, closed server exits 0 (uvicorn would re-raise the signal)
        server._captured_signals.clear()

    server.handle_exit = handle_exit
    # SIGHUP (the terminal or SSH session that started the server closed) stops it as SIGTERM
    # does: drained, flushed and closed, never killed with what `interval` buffered unwritten
    signal.signal(signal.SIGHUP, lambda sig, frame: server.handle_exit(sig, frame))
    server.run(sockets=[sock])
    if not server.started:
        sys.exit(EXIT_UNAVAILABLE)


def _announce(settings: Settings, sock: socket.socket, data_dir: str, grpc_front=None, fast_http: bool = False) -> None:
    """The start-up line: the URLs of the API, its docs and metrics (the SQS endpoint is the API's)."""
    from ..disk import limit_raised_from, open_file_limits
    from ..storage import FILE_CACHE
    from .app import _version

    host = settings.host
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"{'https' if settings.tls_cert else 'http'}://{shown}:{sock.getsockname()[1]}"
    fields = {"url": url, "console": url + "/console", "docs": url + "/docs", "metrics": url + "/metrics",
              "data_dir": data_dir,
              "flush": settings.flush, "auth": settings.auth_enabled, "pid": os.getpid(), "version": _version(),
              "fast_http": fast_http}
    grpc_text = ""
    if grpc_front is not None:
        fields["grpc"] = grpc_front.address
        grpc_text = f"  gRPC {grpc_front.address}{' (TLS)' if settings.tls_cert else ''}"
    kafka = f"  kafka {shown}:{settings.kafka_port}" if settings.kafka_port else ""
    if kafka:
        fields["kafka"] = f"{shown}:{settings.kafka_port}"
    if settings.native_port:
        fields["native"] = f"{shown}:{settings.native_port}"
        kafka += f"  native {shown}:{settings.native_port}"
    soft, _ = open_file_limits()
    raised_from = limit_raised_from()
    fields.update(open_file_limit=soft, open_file_limit_raised_from=raised_from,
                  max_open_files=FILE_CACHE.max_open_files)
    raised = f" (raised from {raised_from})" if raised_from is not None else ""
    text = (f"VQS {fields['version']} ready: API {url}  console {url}/console  docs {url}/docs  metrics {url}/metrics"
            f"{grpc_text}{kafka}  "
            f"(data dir {data_dir}, flush {settings.flush}, "
            f"auth {'on' if settings.auth_enabled else 'off (no credentials)'}, "
            f"pid {fields['pid']}, open-file limit {soft}{raised}, "
            f"max_open_files {FILE_CACHE.max_open_files}; Ctrl-C stops)")
    logger.info("ready", extra={"vqs": fields, "text": text})
