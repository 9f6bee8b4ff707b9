"""Bearer tokens on the gRPC front: the HTTP server's tokens, as ``authorization`` metadata.

With tokens configured (``--token`` / ``VQS_TOKENS``), every call but the
health service and server reflection (open, as REST's ``/health`` and
``/docs``) must carry ``authorization: Bearer <token>``: none, or not of that
form, is UNAUTHENTICATED; a token that is not one of the server's is
PERMISSION_DENIED, each counted and logged as every front's failed authentication
(auth_failures.py). Tokens are compared in constant time, every one of them.
"""

from __future__ import annotations

import grpc

from .. import bearer

_OPEN = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/",
         "/grpc.reflection.v1.ServerReflection/")


def check_bearer(tokens: list[bytes], metadata) -> tuple[grpc.StatusCode, str] | None:
    """None if the call may go on, else the status to answer (the check: vqs/server/bearer.py)."""
    auth = None
    for k, v in metadata or ():
        if k == "authorization":
            auth = v
            break
    why = bearer.check(tokens, auth)
    if why is None:
        return None
    if why == bearer.MISSING:
        return (grpc.StatusCode.UNAUTHENTICATED,
                "this server requires a bearer token (metadata authorization: Bearer <token>)")
    if why == bearer.MALFORMED:
        return grpc.StatusCode.UNAUTHENTICATED, "the authorization metadata must be 'Bearer <token>'"
    return grpc.StatusCode.PERMISSION_DENIED, "the bearer token is not valid for this server"


class BearerAuth(grpc.aio.ServerInterceptor):
    """Every call: the token checked before a byte of the request is read (unless not
    ``required``), and the request decoded by ``_decoding`` (a malformed one is
    INVALID_ARGUMENT with a plain message, not protobuf's error naming our classes)."""

    def __init__(self, tokens: list[str], required: bool | None = None, refused=None):
        self.tokens = [t.encode() for t in tokens]
        self.required = bool(tokens) if required is None else required  # no token at all: every call refused
        self.refused = refused  # refused(code, method, context): told of each call refused

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None:
            return handler
        if self.required and not details.method.startswith(_OPEN):
            refused = check_bearer(self.tokens, details.invocation_metadata)
            if refused is not None:
                return _refusing(handler, *refused, details.method, self.refused)
        return _decoding(handler)


#: What a client is told of a request that is not a valid message of its method.
MALFORMED = "the request is not a valid protobuf message of this method"


class _Malformed(Exception):
    pass


def _decoding(handler):
    """``handler`` taking the request's raw bytes and decoding them itself: a malformed
    request is answered INVALID_ARGUMENT, ``MALFORMED``."""
    decode = handler.request_deserializer
    if decode is None:
        return handler

    def parse(raw):
        try:
            return decode(raw)
        except Exception:
            raise _Malformed() from None

    if not handler.request_streaming:
        behavior = handler.unary_unary or handler.unary_stream

        if handler.response_streaming:
            async def unary_stream(raw, context):
                try:
                    request = parse(raw)
                except _Malformed:
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, MALFORMED)
                async for item in behavior(request, context):
                    yield item

            return handler._replace(request_deserializer=None, unary_stream=unary_stream)

        async def unary_unary(raw, context):
            try:
                request = parse(raw)
            except _Malformed:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, MALFORMED)
            return await behavior(request, context)

        return handler._replace(request_deserializer=None, unary_unary=unary_unary)

    # a request stream: each message decoded as the handler reads it; a malformed one ends
    # the call with INVALID_ARGUMENT (the handler's own error mapping sees an RpcError)
    from .errors import RpcError

    async def messages(raw_iterator):
        async for raw in raw_iterator:
            try:
                yield parse(raw)
            except _Malformed:
                raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, MALFORMED) from None

    if handler.response_streaming:
        behavior = handler.stream_stream

        async def stream_stream(raw_iterator, context):
            async for item in behavior(messages(raw_iterator), context):
                yield item

        return handler._replace(request_deserializer=None, stream_stream=stream_stream)
    behavior = handler.stream_unary

    async def stream_unary(raw_iterator, context):
        return await behavior(messages(raw_iterator), context)

    return handler._replace(request_deserializer=None, stream_unary=stream_unary)


def _refusing(handler, code: grpc.StatusCode, message: str, method: str = "", told=None):
    """A handler that answers ``code`` without reading the request: of a request-streaming
    shape whatever the method's (the server then reads no message; only what HTTP/2's flow
    control window lets the client send arrives) and with no deserializer; ``told(code,
    method, context)`` first, if given."""

    async def unary_response(requests, context):
        if told is not None:
            told(code, method, context)
        await context.abort(code, message)

    async def stream_response(requests, context):
        if told is not None:
            told(code, method, context)
        await context.abort(code, message)
        yield  # an async generator, as a streaming handler must be

    kw = dict(request_deserializer=None, response_serializer=handler.response_serializer)
    if handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(stream_response, **kw)
    return grpc.stream_unary_rpc_method_handler(unary_response, **kw)
