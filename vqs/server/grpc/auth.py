"""Bearer tokens on the gRPC front: the HTTP server's tokens, as ``authorization`` metadata.

With tokens configured (``--token`` / ``VQS_TOKENS``), every call but the
health service and server reflection (open, as REST's ``/health`` and
``/docs``) must carry ``authorization: Bearer <token>``: none, or not of that
form, is UNAUTHENTICATED; a token that is not one of the server's is
PERMISSION_DENIED. Tokens are compared in constant time, every one of them.
"""

from __future__ import annotations

import hmac

import grpc

_OPEN = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/",
         "/grpc.reflection.v1.ServerReflection/")


def check_bearer(tokens: list[bytes], metadata) -> tuple[grpc.StatusCode, str] | None:
    """None if the call may go on, else the status to answer."""
    auth = None
    for k, v in metadata or ():
        if k == "authorization":
            auth = v
            break
    if not auth:
        return (grpc.StatusCode.UNAUTHENTICATED,
                "this server requires a bearer token (metadata authorization: Bearer <token>)")
    if isinstance(auth, str):
        auth = auth.encode()
    scheme, _, token = auth.partition(b" ")
    if scheme.lower() != b"bearer" or not token.strip():
        return grpc.StatusCode.UNAUTHENTICATED, "the authorization metadata must be 'Bearer <token>'"
    ok = False
    for t in tokens:
        ok |= hmac.compare_digest(t, token.strip())
    if not ok:
        return grpc.StatusCode.PERMISSION_DENIED, "the bearer token is not valid for this server"
    return None


class BearerAuth(grpc.aio.ServerInterceptor):
    def __init__(self, tokens: list[str]):
        self.tokens = [t.encode() for t in tokens]

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None or details.method.startswith(_OPEN):
            return handler
        refused = check_bearer(self.tokens, details.invocation_metadata)
        if refused is None:
            return handler
        code, message = refused
        return _refusing(handler, code, message)


def _refusing(handler, code: grpc.StatusCode, message: str):
    """A handler of the same shape as ``handler`` that answers ``code`` without reading the request."""

    async def unary_response(request, context):
        await context.abort(code, message)

    async def stream_response(request, context):
        await context.abort(code, message)
        yield  # an async generator, as a streaming handler must be

    kw = dict(request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(stream_response, **kw)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary_response, **kw)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(stream_response, **kw)
    return grpc.unary_unary_rpc_method_handler(unary_response, **kw)
