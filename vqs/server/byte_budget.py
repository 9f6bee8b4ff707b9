"""The server's byte budgets: bytes of requests held at once, server-wide, across every front.

Each front bounds what one request may make the server hold (a frame's size, a
body's ``Content-Length``), and the connection caps bound how many connections
may do so; a budget bounds their sum across every front and every client
address, so no number of clients can make the server hold more than it plus
each connection's fixed part (its read buffers and request head,
docs/security.md). The server has two, one instance each shared by every front:

* ``max_pre_auth_bytes`` (256 MiB): requests whose credentials are not checked
  yet (a Kafka frame before SASL, an SQS body before its signature, a console
  login form before its token). Only those come here: with no credential
  configured nothing is authenticated and nothing is taken. A refused take
  refuses the request: HTTP 503 with ``Retry-After``, a Kafka connection closed.
* ``max_request_bytes_in_flight`` (1 GiB; Kafka's ``queued.max.request.bytes``):
  every request's bytes while they are read and handled, authenticated or
  not (REST and SQS bodies, native and Kafka frames). A refused HTTP request
  is answered 503 with ``Retry-After`` before its body is read; a native or
  Kafka connection is simply not read until bytes come back (``take_or_wait``): TCP
  backpressure, as Kafka mutes a channel when its memory pool is spent. It is
  at least the largest single request a front takes, so a request alone is
  never refused.

A front ``take``s the bytes it is about to hold (from a size it was told)
before reading them and ``give``s them back once they are no longer held; a
refused ``take`` holds nothing. ``refused`` logs a refusal: the first at once,
then at most a line a minute with the count left out (a client keeping a budget
spent cannot flood the log). Thread-safe (the HTTP, Kafka and gRPC loops run on
their own threads): one lock around an add; waiters are woken on their own
loop (``call_soon_threadsafe``).

A waiter whose connection goes away leaves its future behind until the next
``give`` (then dropped): at most one a waiting connection.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from ..log_throttle import Throttle

logger = logging.getLogger("vqs.server")
_lines = Throttle(logger)


class ByteBudget:
    """``limit`` bytes held at once (module docstring); ``name`` and ``setting`` name it in log
    lines and refusals, ``held_for`` says what it holds ("requests not authenticated yet")."""

    __slots__ = ("limit", "name", "setting", "held_for", "held", "_lock", "_waiters")

    def __init__(self, limit: int, name: str, setting: str, held_for: str):
        self.limit = limit
        self.name = name
        self.setting = setting
        self.held_for = held_for
        self.held = 0
        self._lock = threading.Lock()
        self._waiters: list = []  # (loop, future): woken at the next give

    def take(self, nbytes: int) -> bool:
        """Hold ``nbytes`` more, or False (nothing held) when that would pass the limit."""
        with self._lock:
            return self._take_locked(nbytes)

    def _take_locked(self, nbytes: int) -> bool:
        held = self.held + nbytes
        if held > self.limit:
            return False
        self.held = held
        return True

    def give(self, nbytes: int) -> None:
        """``nbytes`` taken earlier are no longer held; whoever waits tries again."""
        with self._lock:
            self.held -= nbytes
            if not self._waiters:  # (the common case: every request's end comes here)
                return
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_wake, fut)
            except RuntimeError:  # that loop is closed: its connection is gone
                pass

    def take_or_wait(self, nbytes: int) -> asyncio.Future | None:
        """``take``, or (refused: nothing held) a future of the running loop that is done at the
        next ``give``, when the caller tries again (another waiter may take the bytes first).
        One lock around both, so no give between the refusal and the wait goes unseen."""
        with self._lock:
            if self._take_locked(nbytes):
                return None
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append((fut.get_loop(), fut))
            return fut

    def refused(self, front: str, client, nbytes: int) -> None:
        """A ``take`` of ``nbytes`` for ``client`` of ``front`` was refused: logged, rate-bounded."""
        _lines.warn(self.setting,
                    "%s spent: refused %d bytes of a %s request from %s (the server holds %d bytes for %s; %s %d)",
                    self.name, nbytes, front, client, self.held, self.held_for, self.setting, self.limit)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def pre_auth_budget(limit: int) -> ByteBudget:
    """The budget of bytes held for requests not authenticated yet (``max_pre_auth_bytes``)."""
    return ByteBudget(limit, "pre-authentication budget", "max_pre_auth_bytes", "requests not authenticated yet")


def in_flight_budget(limit: int) -> ByteBudget:
    """The budget of every request's bytes being read or handled (``max_request_bytes_in_flight``)."""
    return ByteBudget(limit, "request budget", "max_request_bytes_in_flight", "requests being read or handled")
