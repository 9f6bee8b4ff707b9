"""The gRPC server of ``vqs serve --grpc-port``: grpc.aio on its own loop, in its own thread.

Why a thread of its own rather than uvicorn's loop: a gRPC handler that runs
long between awaits (encoding a large response, appending a large batch) then
holds up only gRPC calls; HTTP requests on uvicorn's loop wait at most one
GIL switch interval (5 ms) for it, not the handler's whole run
(bench/grpc_bench.py measures HTTP latency while gRPC streams run). It also
keeps grpc.aio off uvloop.

The port: run.py binds the TCP socket (before the data directory is opened,
as the HTTP port: a port in use changes nothing; SO_REUSEPORT off, so a port
another process serves is refused, not shared) and gives it here; VQS accepts
its connections, capped in total and per client address, and relays each to
the gRPC core, which listens on a Unix socket in a private directory
(relay.py: the core has no per-address cap).

Life, in run.py's order: ``bind()`` starts the thread and binds the core's
Unix socket; ``start(ctx)`` registers the services on the HTTP server's
context (its broker) and serves, the health service saying SERVING;
``stop_soon()`` (on SIGTERM) turns health to NOT_SERVING and stops taking
calls and connections, in-flight calls get ``graceful_timeout_s``
(subscriptions and long polls end within a second, as they watch
``stopping``); ``join()`` waits for the thread, before the broker closes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
import tempfile
import threading

logger = logging.getLogger("vqs.server")

SERVICES = ("vqs.v1.Topics", "vqs.v1.Records", "vqs.v1.Groups", "vqs.v1.Queues", "vqs.v1.ShareGroups")


#: The bounds on a gRPC connection (docs/security.md): the HTTP/2 (and TLS) handshake done
#: within 10 s; a connection with no call for 5 minutes closed (GOAWAY: clients reconnect when
#: they next call); at most 100 calls at once on one connection (more wait, the client's
#: choice); a client's keepalive pings no more often than every 5 minutes without a call
#: (more: GOAWAY too_many_pings, as grpc's default). Calls in progress on the whole server are
#: capped by ``maximum_concurrent_rpcs`` (``max_connections``; past it RESOURCE_EXHAUSTED).
#: Connections are capped at accept, in total and per client address, by relay.py.
CONNECTION_OPTIONS = (("grpc.server_handshake_timeout_ms", 10_000),
                      ("grpc.max_connection_idle_ms", 300_000),
                      ("grpc.max_concurrent_streams", 100),
                      ("grpc.http2.min_ping_interval_without_data_ms", 300_000),
                      ("grpc.keepalive_permit_without_calls", 0))


class GrpcBindError(Exception):
    """The gRPC port could not be bound (the message says why)."""


class GrpcFront:
    def __init__(self, settings, sock, max_connections: int | None = None):
        self.settings = settings
        self.sock = sock  # the TCP port, bound (run.py); closed with the front
        #: connections open at once (``max_connections``, or less: the open-file limit's share, run.py)
        self.max_connections = max_connections or settings.max_connections
        self.port: int = sock.getsockname()[1]
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bound = threading.Event()
        self._started = threading.Event()
        self._bind_error: str | None = None
        self._ctx = None
        self._go: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._relay = None

    @property
    def address(self) -> str:
        host = self.settings.host.strip("[]")
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def bind(self) -> int:
        """Start the thread and bind the core's socket; raises GrpcBindError."""
        self._thread = threading.Thread(target=self._main, name="vqs-grpc", daemon=True)
        self._thread.start()
        self._bound.wait()
        if self._bind_error is not None:
            self._thread.join()
            raise GrpcBindError(self._bind_error)
        return self.port

    def start(self, server_ctx, timeout: float = 30.0) -> None:
        """Serve the services on ``server_ctx``'s broker; returns once the server takes calls."""
        self._ctx = server_ctx
        self._loop.call_soon_threadsafe(self._go.set)
        if not self._started.wait(timeout):
            raise RuntimeError("the gRPC server did not start")

    def stop_soon(self) -> None:
        """Stop taking calls and drain (returns at once; ``join`` waits)."""
        loop = self._loop
        if loop is not None and self._stop is not None:
            try:
                loop.call_soon_threadsafe(self._stop.set)
                loop.call_soon_threadsafe(self._go.set)  # never started: stop all the same
            except RuntimeError:  # already stopped
                pass

    def join(self, timeout: float | None = None) -> None:
        self.stop_soon()
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------------ the thread
    def _main(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        # 0700: only this user reaches the core (a Unix socket's path has at most 107 bytes)
        base = tempfile.gettempdir() if len(tempfile.gettempdir()) < 80 else "/tmp"
        _sweep_stale_socket_dirs(base)
        sockdir = tempfile.mkdtemp(prefix=f"vqs-grpc-{os.getpid()}-", dir=base)
        try:
            loop.run_until_complete(self._serve(os.path.join(sockdir, "core.sock")))
        except Exception:
            logger.exception("the gRPC server failed")
        finally:
            self._bound.set()
            try:
                loop.close()
            finally:  # (a SIGKILL leaves it: the next server's start removes it)
                self.sock.close()
                shutil.rmtree(sockdir, ignore_errors=True)

    async def _serve(self, core_path: str) -> None:
        import grpc

        from .relay import Relay

        s = self.settings
        self._go, self._stop = asyncio.Event(), asyncio.Event()
        from .auth import BearerAuth

        # the token before the request is read (any credential configured: a token is needed,
        # SigV4 keys grant the SQS API only); every request decoded by it
        interceptors = [BearerAuth(s.tokens, required=s.auth_enabled, refused=self._auth_failed)]
        options = [("grpc.max_receive_message_length", s.max_body_bytes),
                   # responses are bounded by the handlers (records.MAX_BYTES plus one record)
                   ("grpc.max_send_message_length", -1),
                   # the relay caps connections (per address too); this holds the core near it (with
                   # room for relayed connections closed by the relay, not yet seen closed by the core)
                   ("grpc.max_allowed_incoming_connections", self.max_connections + 16),
                   *CONNECTION_OPTIONS]
        server = grpc.aio.server(interceptors=interceptors, options=options,
                                 maximum_concurrent_rpcs=s.max_connections)
        addr = "unix:" + core_path
        try:
            if s.tls_cert:
                with open(s.tls_key, "rb") as f:
                    key = f.read()
                with open(s.tls_cert, "rb") as f:
                    cert = f.read()
                server.add_secure_port(addr, grpc.ssl_server_credentials([(key, cert)]))
            else:
                server.add_insecure_port(addr)
        except (RuntimeError, OSError) as e:
            self._bind_error = f"cannot start the gRPC server ({core_path}): {e}"
            self._bound.set()
            return
        relay = self._relay = Relay(self.sock, core_path, self.max_connections, s.max_connections_per_client)
        self._bound.set()
        await self._go.wait()
        if self._stop.is_set():  # stopped before it served (HTTP could not start)
            await server.stop(None)
            return
        gctx = self._register(server)
        health = self._health
        await server.start()
        await relay.start()
        from grpc_health.v1 import health_pb2

        for name in ("", *SERVICES):
            await health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._started.set()
        await self._stop.wait()
        await health.enter_graceful_shutdown()
        relay.stop_accepting()
        stopped = asyncio.ensure_future(server.stop(s.graceful_timeout_s))  # no new calls from here on
        await asyncio.sleep(0)
        gctx.cancel_idle()
        await stopped
        relay.close_all()
        gctx.close()

    def _auth_failed(self, code, method: str, context) -> None:
        """A call refused by its token (auth.py): counted and logged with the client's address."""
        self._ctx.auth_failures.failed("grpc", self._relay.client_of(context.peer()), f"{code.name} ({method})")

    def _register(self, server):
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc
        from grpc_reflection.v1alpha import reflection

        from .admin import GroupsService, TopicsService
        from .context import GrpcContext
        from .gen import vqs_pb2, vqs_pb2_grpc
        from .queues import QueuesService
        from .records import RecordsService
        from .share import ShareGroupsService

        gctx = GrpcContext(self._ctx)
        vqs_pb2_grpc.add_TopicsServicer_to_server(TopicsService(gctx), server)
        vqs_pb2_grpc.add_RecordsServicer_to_server(RecordsService(gctx), server)
        vqs_pb2_grpc.add_GroupsServicer_to_server(GroupsService(gctx), server)
        vqs_pb2_grpc.add_QueuesServicer_to_server(QueuesService(gctx), server)
        vqs_pb2_grpc.add_ShareGroupsServicer_to_server(ShareGroupsService(gctx), server)
        h = self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(h, server)
        names = [vqs_pb2.DESCRIPTOR.services_by_name[n.split(".")[-1]].full_name for n in SERVICES]
        reflection.enable_server_reflection(
            [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME], server)
        return gctx


def _sweep_stale_socket_dirs(base: str) -> None:
    """Remove the core-socket directories of servers that are gone (killed with SIGKILL):
    ``vqs-grpc-<pid>-*`` of this user whose process no longer exists."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    uid = os.getuid()
    for name in names:
        parts = name.split("-")
        if len(parts) < 4 or parts[0] != "vqs" or parts[1] != "grpc" or not parts[2].isdigit():
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
            if st.st_uid != uid or not stat.S_ISDIR(st.st_mode):
                continue
            os.kill(int(parts[2]), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except (OSError, ValueError):
            continue  # alive (or another user's): left alone
