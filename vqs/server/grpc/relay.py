"""The gRPC port: connections accepted by VQS, capped per client address, relayed to the gRPC core.

Why a relay: grpc's C core accepts its own connections and caps only their
total (``grpc.max_allowed_incoming_connections``); it has no per-address cap,
an interceptor sees calls, never connections, and grpcio offers no way to hand
the core a socket accepted elsewhere. So the core listens on a Unix socket in
a private directory (mode 0700: only this user may connect to it) and VQS
owns the TCP port: each connection accepted there is counted (conn_caps.py:
``max_connections`` in total, ``max_connections_per_client`` per address;
over either it is closed at once, before anything of it is read) and joined
to a new connection to the core; bytes pass both ways unchanged (TLS too: the
core still does it, and its handshake deadline, idle timeout and stream caps
hold as before), and the close of either side closes the other.

Bounded: a direction holds at most its write buffer's high-water mark
(asyncio's 64 KiB) and one read (256 KiB): past the mark the other side is
not read until the buffer drains, so a client that does not read its answers,
or a core that does not read a client's bytes, backs up into TCP's own flow
control. A side closed with bytes still to write gets ``CLOSE_GRACE_S`` to
write them, then is aborted. Cost: per chunk of a connection's bytes one
callback and one ``send``, on the gRPC front's own loop (no thread handoff).

Who is calling: the core sees every connection come from the relay, so each
connection to the core is bound to an abstract Unix socket name of its own
(Linux; elsewhere unbound) and ``Relay.client_of`` maps the peer the core
reports for a call (``unix-abstract:<name>``) back to the client's address,
for as long as the connection is open.

Invariants: a connection is counted from its accept until it closes (exactly
one ``release``); every relayed connection is in ``Relay.conns`` until it is
closed (``close_all`` at shutdown ends what the core's drain left).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket

from ..conn_caps import ConnectionCaps

logger = logging.getLogger("vqs.server")

#: how long a side closed by the other may take to write what it still holds (seconds)
CLOSE_GRACE_S = 10.0


class _Side(asyncio.Protocol):
    """One socket of a relayed connection: what it reads is written to the other's."""

    def __init__(self, relay: Relay):
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.other: _Side | None = None
        self.out: asyncio.Transport | None = None  # the other side's transport, once joined

    def connection_made(self, transport) -> None:  # the core's side: nothing to check
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.out.write(data)

    def eof_received(self):
        return False  # HTTP/2 has no half-close: the transport closes, and connection_lost the other

    def pause_writing(self) -> None:
        # this side's buffer passed its high-water mark: stop reading what fills it
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()

    def connection_lost(self, exc) -> None:
        other = self.other
        if other is not None and other.transport is not None:
            _close(other.transport, self.relay.loop)


class _Client(_Side):
    """The client's TCP connection: counted, then joined to a new connection to the core."""

    addr = None
    peer = None
    core_name = None  # the abstract name of its connection to the core (Relay.client_of)
    admitted = False
    joining = None  # the task connecting to the core

    def connection_made(self, transport) -> None:
        self.transport = transport
        relay = self.relay
        self.peer = peer = transport.get_extra_info("peername")
        self.addr = peer[0] if isinstance(peer, tuple) and peer else None
        if relay.stopping or not relay.caps.admit(self.addr):  # refused (logged by the caps)
            transport.abort()
            return
        self.admitted = True
        relay.conns.add(self)
        transport.pause_reading()  # until joined to the core
        self.joining = relay.loop.create_task(self._join())

    async def _join(self) -> None:
        core = _Side(self.relay)
        core.other, core.out = self, self.transport  # what the core says goes to the client at once
        relay = self.relay
        sock = relay.core_socket(self)
        try:
            await relay.loop.sock_connect(sock, relay.path)
            await relay.loop.create_unix_connection(lambda: core, sock=sock)
        except OSError:
            sock.close()
            self.transport.close()  # the core stopped
            return
        if self.transport.is_closing():  # the client left meanwhile
            core.transport.close()
            return
        self.other, self.out = core, core.transport
        self.joining = None
        self.transport.resume_reading()

    def connection_lost(self, exc) -> None:
        if self.admitted:
            self.admitted = False
            self.relay.conns.discard(self)
            self.relay.caps.release(self.addr)
            self.relay.peers.pop(self.core_name, None)
        super().connection_lost(exc)


def _close(transport: asyncio.Transport, loop) -> None:
    """Close ``transport`` after what it holds is written, within CLOSE_GRACE_S."""
    if transport.is_closing():
        return
    pending = transport.get_write_buffer_size()
    transport.close()
    if pending:
        loop.call_later(CLOSE_GRACE_S, transport.abort)


class Relay:
    """Serves the TCP socket ``sock`` by relaying each accepted connection to the core at ``path``."""

    def __init__(self, sock, path: str, total: int, per_client: int):
        self.sock = sock
        self.path = path  # the core's Unix socket
        self.caps = ConnectionCaps(total, per_client, "grpc", logger)
        self.conns: set = set()
        self.peers: dict = {}  # the abstract name of a connection to the core -> its client's address
        self._prefix = f"vqs-grpc-{os.getpid()}-{secrets.token_hex(4)}-"
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping = False
        self._server = None

    def core_socket(self, client: _Client) -> socket.socket:
        """A socket for ``client``'s connection to the core, bound to a name of its own when the
        system has abstract Unix socket names (then ``client_of`` knows it)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        # each name unguessable (any local user sees the bound ones in /proc/net/unix): a
        # process that binds names ahead cannot take the next one
        name = self._prefix + secrets.token_hex(8)
        try:
            sock.bind("\0" + name)
        except OSError:  # no abstract names here: the core sees the relay alone
            return sock
        client.core_name = name
        self.peers[name] = client.peer
        return sock

    def client_of(self, core_peer: str):
        """The client's address (host, port) of a call whose peer the core reports as
        ``core_peer``, or None when unknown."""
        if core_peer and core_peer.startswith("unix-abstract:"):
            return self.peers.get(core_peer[len("unix-abstract:"):])
        return None

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(lambda: _Client(self), sock=self.sock, backlog=2048)

    def stop_accepting(self) -> None:
        self.stopping = True
        if self._server is not None:
            self._server.close()

    def close_all(self) -> None:
        """Close what is still relayed (the core's drain is over)."""
        self.stop_accepting()
        for c in list(self.conns):
            c.transport.abort()
