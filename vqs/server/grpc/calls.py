"""How every gRPC handler answers an error: one wrapper for unary and one for streaming calls.

Invariant: whatever a handler raises leaves as a gRPC status (errors.py's
table), never as grpc's generic "Unexpected error" with a Python traceback; a
cancelled call (the client left, or its deadline passed) is let go quietly.
"""

from __future__ import annotations

import asyncio
import functools

import grpc

from .errors import status_of


async def _abort(context, exc: BaseException):
    code, message, metadata = status_of(exc)
    await context.abort(code, message, trailing_metadata=metadata)


def unary(fn):
    """For handlers that return one response (unary and client-streaming calls)."""

    @functools.wraps(fn)
    async def call(self, request, context):
        try:
            return await fn(self, request, context)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as e:
            await _abort(context, e)

    return call


def streaming(fn):
    """For async-generator handlers (server- and bidirectional-streaming calls)."""

    @functools.wraps(fn)
    async def call(self, request, context):
        try:
            async for response in fn(self, request, context):
                yield response
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as e:
            await _abort(context, e)

    return call
