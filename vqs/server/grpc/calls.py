"""How every gRPC handler answers: one wrapper for unary and one for streaming calls.

Invariant: whatever a handler raises leaves as a gRPC status (errors.py's
table), never as grpc's generic "Unexpected error" with a Python traceback; a
cancelled call (the client left, or its deadline passed) is let go quietly.
Each call is counted once in the server's metrics (``vqs_http_requests`` with
``api="grpc"``, the RPC's name as route and its status code; a refusal also in
``vqs_errors``), per call, not per message of a stream.
"""

from __future__ import annotations

import asyncio
import functools

import grpc

from .errors import status_of


def _count(service, rpc: str, code: str) -> None:
    service.ctx.metrics.requests.labels("grpc", rpc, "RPC", code).inc()


async def _abort(service, rpc: str, context, exc: BaseException):
    code, message, metadata = status_of(exc)
    name = code.name
    _count(service, rpc, name)
    service.ctx.metrics.errors.labels("grpc", name.lower()).inc()
    await context.abort(code, message, trailing_metadata=metadata)


def unary(fn):
    """For handlers that return one response (unary and client-streaming calls)."""
    rpc = fn.__name__

    @functools.wraps(fn)
    async def call(self, request, context):
        try:
            response = await fn(self, request, context)
        except asyncio.CancelledError:
            _count(self, rpc, "CANCELLED")
            raise
        except grpc.aio.AbortError:
            raise
        except Exception as e:
            await _abort(self, rpc, context, e)
        _count(self, rpc, "OK")
        return response

    return call


def streaming(fn):
    """For async-generator handlers (server- and bidirectional-streaming calls)."""
    rpc = fn.__name__

    @functools.wraps(fn)
    async def call(self, request, context):
        try:
            async for response in fn(self, request, context):
                yield response
        except asyncio.CancelledError:
            _count(self, rpc, "CANCELLED")
            raise
        except grpc.aio.AbortError:
            raise
        except Exception as e:
            await _abort(self, rpc, context, e)
        _count(self, rpc, "OK")

    return call
