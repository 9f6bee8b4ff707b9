"""The Kafka listener: an asyncio TCP server on its own thread, sharing the server's Broker.

Why its own thread and loop: the REST app runs on uvicorn's loop, and the two
share nothing but the Broker (thread-safe); a separate loop keeps a slow
Kafka handler from delaying HTTP and the other way round, and it starts and
stops with the process without touching uvicorn's lifecycle. Broker calls
that may block on I/O (fsync under flush=always, a compressed batch to
inflate) run in one bounded thread pool; nothing that waits for other clients
holds a thread: fetch long polls and the group coordinator's JoinGroup and
SyncGroup waits are awaited on the loop, however many wait. A request waiting
on the coordinator parks (``Connection.park``): its connection goes on
reading and handling the requests after it, and a close of the connection
cancels the wait (a pending group member leaves its group at once).

Framing: a request is an int32 size and that many bytes; a size below 8 or
above ``max_frame_bytes`` closes the connection (logged with the peer), as
does a frame that does not parse (``ProtocolError``): never the server.
Requests of one connection are handled one at a time and answered in
order (as Kafka does), except that a parked request lets the next ones be
handled before its own answer (``Connection.serve``). An ApiVersions request of an unsupported version gets error 35
(UNSUPPORTED_VERSION) and the supported list in a v0 response, as Kafka
does; another API or version not listed by ApiVersions closes the
connection (the response could not be encoded in a version the client
parses).

TLS: with ``--tls-cert``/``--tls-key`` the listener speaks TLS only (Kafka's SSL and SASL_SSL
security protocols), the handshake within ``kafka_frame_timeout_s``; with ``kafka_tls_client_ca``
every client presents a certificate its CAs signed, which authenticates the connection as the
certificate's subject (tls.py).

Auth: with tokens configured, a connection must complete SASL/PLAIN
(SaslHandshake then SaslAuthenticate, or the v0 raw exchange) with a token as
the password before anything but ApiVersions and SaslHandshake. A failed
authentication is answered, counted and logged as every front's (auth_failures.py:
peer and user name, never the password) and the connection closed, as Kafka does:
each guess costs a new connection.

Bounds (docs/security.md), each checked before it costs more than a few bytes:
connections in total (``max_connections``) and per client address
(``max_connections_per_client``), counted at accept (conn_caps.py; over
either: closed at once); before authentication a frame may be at most
``PRE_AUTH_MAX_FRAME`` (Kafka's ``sasl.server.max.receive.size``), read from
its size prefix, and is taken from the server's pre-authentication budget
(``max_pre_auth_bytes``, shared with the HTTP fronts: byte_budget.py) until the
next frame begins (past the budget: the connection is closed); every frame is
held against the server's request budget (``max_request_bytes_in_flight``) from
its size prefix until it is handled (spent: the connection is not read until
bytes come back); a
connection that must authenticate has ``kafka_auth_timeout_s`` to do so; a
request must arrive whole within ``kafka_frame_timeout_s`` of its first byte
(and the first one within that of the connect); a connection idle for
``kafka_idle_timeout_s`` is closed (Kafka's ``connections.max.idle.ms``).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading

from ..auth_failures import AuthFailures
from ..byte_budget import ByteBudget
from ..conn_caps import ConnectionCaps
from . import logins
from .apis import API_TABLE, api_versions_error
from .codec import ProtocolError, Writer, read_header
from .kafka_context import KafkaContext
from .tls import server_context, subject

logger = logging.getLogger("vqs.server.kafka")
_SIZE = struct.Struct(">i")
#: the largest frame of a connection that has not authenticated yet (Kafka: 512 KiB)
PRE_AUTH_MAX_FRAME = 512 << 10
SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
#: the API keys (big-endian int16, a frame's first bytes) a connection whose SASL session ended may send
_REAUTH = frozenset(struct.pack(">h", k) for k in (SASL_HANDSHAKE, SASL_AUTHENTICATE))
#: answers a connection may owe at once (behind a waiting JoinGroup/SyncGroup); more: it is not read
MAX_PIPELINED = 32
_READ_AHEAD = 64 << 10  # what a watch for a close (``unless_closed``) may read ahead of a waiting request
#: the API keys (as a frame's first two bytes) whose handlers may park: JoinGroup, SyncGroup
_MAY_PARK = frozenset(struct.pack(">h", key) for key in (11, 14))


class Connection:
    __slots__ = ("ctx", "reader", "writer", "peer", "authenticated", "mechanism", "scram", "client_id",
                 "failed_user", "principal", "super_user", "topic_view", "session", "session_ms", "session_end",
                 "_parked", "_unanswered", "_unread", "on_close")

    def __init__(self, ctx, reader, writer, peer):
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        self.peer = peer
        self.authenticated = not ctx.auth_required
        self.mechanism = None
        self.scram = None  # a SCRAM exchange under way (scram.ScramExchange)
        self.client_id = None
        self.principal: str | None = None  # User:NAME once logged in (None: User:ANONYMOUS, acls.py)
        self.super_user = False  # logged in with one of the server's tokens: no ACL restricts it
        self.topic_view = None  # acls.DescribableTopics of the principal, made on first use
        self.failed_user: str | None = None  # set by a failed SaslAuthenticate: answer, then close
        self.session: tuple[str, str] | None = None  # (mechanism, principal) of the first SASL login (logins.py)
        self.session_ms = 0  # the SASL session's lifetime (KIP-368; 0: no end), told in SaslAuthenticate v1+
        self.session_end: float | None = None  # the loop's time it ends, unless the client logs in again
        self._parked: asyncio.Event | None = None  # set by ``park`` while the request in hand waits
        self._unanswered = 0  # requests read whose answers are not written yet
        self._unread = b""  # read by unless_closed while a request waited: the next bytes of the stream
        self.on_close = None  # called (no arguments) once the connection is closed: share sessions end

    async def _read(self, n: int) -> bytes:
        """``reader.readexactly(n)``, after what ``unless_closed`` read ahead."""
        if not self._unread:
            return await self.reader.readexactly(n)
        head, self._unread = self._unread[:n], self._unread[n:]
        return head if len(head) == n else head + await self.reader.readexactly(n - len(head))

    async def unless_closed(self, aw):
        """Await ``aw`` unless the client closes the connection first: then ``aw`` is cancelled
        and ConnectionResetError ends the connection. For a handler that holds its connection
        while it waits (a share fetch's long poll; never a parked one, which runs while ``serve``
        reads). Watching reads ahead: bytes that arrive meanwhile are kept for ``_read``, and the
        watch stops (a client that pipelines is alive; its later close is found as any other's)."""
        task = asyncio.ensure_future(aw)
        if self._unread:
            return await task
        watch = asyncio.ensure_future(self.reader.read(_READ_AHEAD))  # b"" at once if closed already
        try:
            await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            watch.cancel()
            raise
        if watch.done():
            try:
                data = watch.result()
            except (ConnectionError, OSError):
                data = b""
            self._unread += data
            if not data and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise ConnectionResetError("the client closed the connection while its request waited")
        else:
            # Cancelled before it consumed anything (the bytes stay in the reader), and awaited:
            # the reader takes one waiting read at a time, and the next frame's read comes next.
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
        return await task

    def park(self) -> None:
        """The request being handled now waits on the group coordinator (a JoinGroup or SyncGroup
        waiting for the other members): the connection goes on reading and handling the
        requests after it meanwhile, one at a time; every answer still goes out in request
        order (``serve``). Only the APIs of ``_MAY_PARK`` are run so; for another one this does
        nothing (its wait holds the connection)."""
        if self._parked is not None:
            self._parked.set()

    async def serve(self) -> None:
        """Read requests and answer them in order until the client closes or breaks a rule.

        A request is handled to its end before the next is read (and answered at once when
        nothing is owed before it), except one that parks (``park``: a JoinGroup or SyncGroup
        waiting on the group coordinator, run as a task): then the next requests are read and
        handled meanwhile, one at a time, and their answers wait for its answer (one writer
        takes them in request order: ``_write_answers``). So a commit a consumer sends while
        its own JoinGroup waits for the other members is checked when it arrives (the
        generation in force: accepted, as Kafka's rule during a rebalance) instead of after
        the join (a stale generation); the answers stay in order, as every client requires.
        At most ``MAX_PIPELINED`` answers are owed at once (then the connection is not read).
        A close while requests wait cancels them: a waiting member leaves its group at once."""
        ctx = self.ctx
        st = ctx.settings
        max_frame = st.kafka_max_frame_bytes
        loop = asyncio.get_running_loop()
        auth_deadline = loop.time() + st.kafka_auth_timeout_s
        first = True
        answers: asyncio.Queue = asyncio.Queue(MAX_PIPELINED)
        writing = asyncio.ensure_future(self._write_answers(answers))
        budget = ctx.pre_auth
        in_flight = ctx.in_flight
        pre_auth = 0  # bytes of the frame in hand taken from the pre-authentication budget
        held = 0  # bytes of the frame in hand taken from the request budget
        try:
            while not ctx.stopping:
                if held:  # the previous frame is handled
                    frame = None
                    in_flight.give(held)
                    held = 0
                if pre_auth:  # (it was read before authentication)
                    budget.give(pre_auth)
                    pre_auth = 0
                # the size prefix: the first request and an unauthenticated connection have a
                # deadline; an authenticated one may idle up to kafka_idle_timeout_s
                if not self.authenticated:
                    wait = min(auth_deadline - loop.time(), st.kafka_frame_timeout_s if first else 1e9)
                elif first:
                    wait = st.kafka_frame_timeout_s
                else:
                    wait = st.kafka_idle_timeout_s
                try:
                    head = await self._next(self._read(4), writing, max(wait, 0.001))
                except asyncio.IncompleteReadError:
                    return
                except TimeoutError:
                    if self._unanswered and self.authenticated:
                        continue  # not idle: a request of its own waits (a rebalance may take long)
                    why = ("did not authenticate in time (kafka_auth_timeout_s)" if not self.authenticated
                           else "sent no request in time (kafka_frame_timeout_s)" if first
                           else "was idle (kafka_idle_timeout_s)")
                    logger.info("kafka: closing %s: it %s", self.peer, why)
                    return
                size = _SIZE.unpack(head)[0]
                cap = max_frame if self.authenticated else min(max_frame, PRE_AUTH_MAX_FRAME)
                if size < 0 or size > cap:
                    logger.warning("kafka: closing %s: frame of %d bytes (max %d%s)", self.peer, size, cap,
                                   ", kafka_max_frame_bytes" if self.authenticated else " before authentication")
                    return
                if not self.authenticated:
                    if not budget.take(size):  # closed: nothing more is read
                        budget.refused("kafka", self.peer, size)
                        return
                    pre_auth = size
                # every frame is held against the server's request budget while it is read and
                # handled; spent, the connection is not read until some comes back (backpressure)
                # (the wait is the frame's time: at most kafka_frame_timeout_s, and before
                # authentication no later than its deadline; then closed, the client retries)
                waiting = in_flight.take_or_wait(size)
                if waiting is not None:
                    until = loop.time() + st.kafka_frame_timeout_s
                    if not self.authenticated:
                        until = min(until, auth_deadline)
                    while waiting is not None:
                        try:
                            await self._next(waiting, writing, max(until - loop.time(), 0.001))
                        except TimeoutError:
                            logger.info("kafka: closing %s: its %d-byte request waited past its time for the "
                                        "server's request budget (max_request_bytes_in_flight)", self.peer, size)
                            return
                        waiting = in_flight.take_or_wait(size)
                held = size
                try:
                    frame = await self._next(self._read(size), writing, st.kafka_frame_timeout_s)
                except TimeoutError:
                    logger.info("kafka: closing %s: a %d-byte request did not arrive in time "
                                "(kafka_frame_timeout_s)", self.peer, size)
                    return
                first = False
                if (self.session_end is not None and loop.time() >= self.session_end
                        and frame[:2] not in _REAUTH and self.mechanism != "PLAIN-v0"):
                    logger.info("kafka: closing %s: its SASL session ended without a new login "
                                "(kafka_connections_max_reauth_ms)", self.peer)
                    return
                if self.mechanism == "PLAIN-v0":  # the v0 handshake: raw SASL bytes, no header
                    self.mechanism = "PLAIN"
                    if logins.plain(self, frame) is not None:
                        _auth_failed(self)
                        return
                    task = loop.create_future()
                    task.set_result(b"")  # an empty frame: the size prefix 0 alone
                elif frame[:2] not in _MAY_PARK:
                    out = await self.handle(frame)  # the common case: no task, written at once
                    if not self._unanswered:
                        if out is not None:
                            self.writer.write(_SIZE.pack(len(out)) + out)
                            await self.writer.drain()
                        if self.failed_user is not None:  # answered; now closed, as Kafka does
                            _auth_failed(self)
                            return
                        continue
                    task = loop.create_future()  # behind a waiting request: its answer waits its turn
                    task.set_result(out)
                else:
                    self._parked = parked = asyncio.Event()
                    task = asyncio.ensure_future(self.handle(frame))
                    parking = asyncio.ensure_future(parked.wait())
                    try:
                        await asyncio.wait((task, parking), return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        parking.cancel()
                        self._parked = None
                    if task.done():
                        task.result()  # a request that does not parse ends the connection here
                self._unanswered += 1
                await self._next(answers.put(task), writing, None)
                if self.failed_user is not None:  # answered; now closed, as Kafka does
                    await self._next(answers.join(), writing, None)
                    _auth_failed(self)
                    return
        except _BeforeSasl as e:  # a client not configured for SASL: a failed authentication, not a bad frame
            self.ctx.auth_failures.failed("kafka", self.peer, f"a request (API key {e.api_key}) before SASL "
                                          "authentication: the client must be configured for SASL (connection closed)")
        except ProtocolError as e:
            logger.warning("kafka: closing %s: malformed request: %s", self.peer, e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            logger.exception("kafka: closing %s after an unexpected error", self.peer)
        finally:
            if pre_auth:
                budget.give(pre_auth)
            if held:
                in_flight.give(held)
            writing.cancel()
            while not answers.empty():  # requests still waiting (a member leaves its group)
                answers.get_nowait().cancel()
            await asyncio.gather(writing, return_exceptions=True)
            self.writer.close()
            if self.on_close is not None:
                try:
                    self.on_close()
                except Exception:
                    logger.exception("kafka: cleaning up after %s", self.peer)

    async def _next(self, aw, writing: asyncio.Future, timeout: float | None):
        """``aw`` within ``timeout`` (TimeoutError), unless the answer writer fails first (its error)."""
        step = asyncio.ensure_future(aw)
        try:
            done, _ = await asyncio.wait((step, writing), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            step.cancel()
            raise
        if step in done:
            return step.result()
        step.cancel()
        await asyncio.gather(step, return_exceptions=True)
        if writing in done:
            writing.result()  # raises what stopped it
            raise ConnectionResetError("the answer writer stopped")
        raise TimeoutError

    async def _write_answers(self, answers: asyncio.Queue) -> None:
        """Write each request's answer, in request order, as soon as it is ready."""
        while True:
            task = await answers.get()
            try:
                out = await task
            finally:
                self._unanswered -= 1
            if out is not None:
                self.writer.write(_SIZE.pack(len(out)) + out)
                await self.writer.drain()
            answers.task_done()

    async def handle(self, frame: bytes) -> bytes | None:
        api_key, version, corr, client_id, r = read_header(frame)
        self.client_id = client_id
        entry = API_TABLE.get(api_key)
        if api_key == API_VERSIONS and (entry is None or not entry[0] <= version <= entry[1]):
            return _SIZE.pack(corr) + api_versions_error()
        if entry is None or not entry[0] <= version <= entry[1]:
            raise ProtocolError(f"API key {api_key} version {version} is not supported (see ApiVersions)")
        lo, hi, flex_from, handler = entry
        flexible = version >= flex_from
        if flexible:
            r.tagged_fields()
        if not self.authenticated and api_key not in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
            raise _BeforeSasl(api_key)
        body = await handler(self.ctx, self, version, r)
        if body is None:
            return None
        head = Writer().int32(corr)
        if flexible and api_key != API_VERSIONS:  # ApiVersions answers with header v0 always
            head.tags()
        return bytes(head.b) + body


class _BeforeSasl(ProtocolError):
    """A request other than ApiVersions and the SASL ones on a connection that must authenticate first."""

    def __init__(self, api_key: int):
        self.api_key = api_key
        super().__init__(f"API key {api_key} before SASL authentication")


def _auth_failed(conn: Connection) -> None:
    conn.ctx.auth_failures.failed("kafka", conn.peer, f"SASL/{conn.mechanism or 'PLAIN'} user "
                                  f"{conn.failed_user or ''!r} (connection closed)")


class KafkaListener:
    """Serves the Kafka protocol on ``sock`` (already bound) until ``stop``."""

    def __init__(self, broker, settings, sock, max_connections: int | None = None,
                 pre_auth: ByteBudget | None = None, in_flight: ByteBudget | None = None,
                 auth_failures: AuthFailures | None = None):
        self.sock = sock
        #: connections open at once (``max_connections``, or less: the open-file limit's share, run.py)
        self.max_connections = max_connections or settings.max_connections
        host, port = sock.getsockname()[:2]
        host = settings.host if settings.host not in ("0.0.0.0", "::") else host
        if settings.kafka_advertised_listener:  # e.g. behind a proxy or NAT
            host, _, adv_port = settings.kafka_advertised_listener.rpartition(":")
            port = int(adv_port)
        self.ctx = KafkaContext(broker, settings, host, port, pre_auth, in_flight, auth_failures)
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._conns: set = set()
        self._caps = ConnectionCaps(self.max_connections, settings.max_connections_per_client, "kafka", logger)

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="vqs-kafka", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            import uvloop

            loop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self.ctx.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        st = self.ctx.settings
        try:
            # the HTTP server's certificate: SSL / SASL_SSL, the handshake within the frame timeout
            tls = (server_context(st.tls_cert, st.tls_key, st.kafka_tls_client_ca, st.kafka_tls_client_auth)
                   if st.tls_cert else None)
            server = await asyncio.start_server(self._accept, sock=self.sock, ssl=tls,
                                                ssl_handshake_timeout=st.kafka_frame_timeout_s if tls else None)
        except BaseException as e:
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for task in list(self._conns):
                task.cancel()
            if self._conns:
                await asyncio.wait(list(self._conns), timeout=2)

    async def _accept(self, reader, writer) -> None:
        peer = writer.get_extra_info("peername")
        addr = peer[0] if isinstance(peer, tuple) else str(peer)
        if not self._caps.admit(addr):  # logged (a line a minute at most)
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            import socket

            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = asyncio.current_task()
        self._conns.add(task)
        try:
            conn = Connection(self.ctx, reader, writer, peer)
            mapper = self.ctx.principal_mapper
            if mapper is not None and (dn := subject(writer.get_extra_info("peercert"))) is not None:
                if (name := mapper.name(dn)) is None:  # (the certificate was verified: tls.py)
                    logger.warning("kafka: closing %s: no kafka_tls_principal_mapping_rules rule applies to its "
                                   "certificate's subject %r", peer, dn[:256])
                    writer.close()
                    return
                conn.principal = "User:" + name
                conn.authenticated = True
            await conn.serve()
        except asyncio.CancelledError:
            # Shutdown cancels open connections. Ending normally: Python 3.11's stream
            # callback calls task.exception() on a cancelled task and logs a traceback.
            pass
        finally:
            self._conns.discard(task)
            self._caps.release(addr)

    def stop(self) -> None:
        """Stop accepting, close connections, join the thread (idempotent)."""
        ctx = self.ctx
        ctx.stopping = True
        if self._thread is None or ctx.loop is None:
            return
        if self._stop is not None and not ctx.loop.is_closed():
            ctx.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)
        ctx.pool.shutdown(wait=False, cancel_futures=True)
        self._thread = None

