"""The SQS endpoint: decode a request, verify it, dispatch it to its action, encode the answer.

Requests arrive as AWS JSON 1.0 (``X-Amz-Target: AmazonSQS.<Action>``, what
boto3 speaks) or the query protocol (``Action=...``, form body or query
string, XML responses); both are decoded to the JSON shapes (protocol.py),
verified with SigV4 when keys are configured (sigv4.py), run by the actions
(queue_actions.py, message_actions.py; parameter readers in params.py), and
encoded back. Queue semantics (leases, delays, DLQ, FIFO, dedup) live in
vqs.broker.queue; the action layer checks SQS's request rules, computes the
MD5s and formats attributes the way AWS does.

``answer`` is the endpoint: the ASGI app (``asgi``, behind VQSMiddleware)
and the HTTP fast path (vqs/server/fast_http.py) both call it with a scope
and the whole body and write what it returns, so both give the same answer.

Invariants:
* Every request gets exactly one response: any error becomes an SQS error
  document in the request's protocol (SQSError as is, queue errors mapped by
  errors.py, anything unexpected as InternalFailure, logged).
* Only actions named in protocol.ACTIONS reach ``dispatch``; each is the
  method ``a_<Action>``. ReceiveMessage runs on the event loop (it may long
  poll); the others run in the worker pool unless writes are inline.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from urllib.parse import unquote

from ...errors import InvalidName, QueueError, VQSError
from ..context import ServerContext
from ..errors import APIError, client_message, deleted_under
from .errors import SQSError, from_queue_error
from .message_actions import MessageActions
from .params import Req, queue_name_of
from .protocol import (
    JSON_CONTENT_TYPE,
    MAX_PARAMETERS,
    parse_form,
    parse_json,
    parse_query,
    render_json,
    render_json_error,
    render_query_json,
    render_query_json_error,
    render_xml,
    render_xml_error,
)
from .queue_actions import QueueActions
from .sigv4 import SigV4Error, region_from_authorization, verify

logger = logging.getLogger("vqs.server.sqs")

#: The actions that change nothing: without credentials, the only ones a request a web page
#: can send cross-site (a GET, or a POST without ``Authorization`` or ``X-Amz-Target``) may run.
READ_ONLY_ACTIONS = frozenset(("GetQueueUrl", "GetQueueAttributes", "ListQueues", "ListQueueTags",
                               "ListDeadLetterSourceQueues", "ListMessageMoveTasks"))
_CROSS_SITE = ("this server has no credentials, so an action that changes something must be a POST with an "
               "Authorization header (any AWS SigV4 signature: boto3 and the AWS CLI always send one) or "
               "X-Amz-Target, which a web page cannot send to another site; a GET changes nothing")



_ID_HIGH = os.urandom(8).hex()
_ID_PREFIX = f"{_ID_HIGH[:8]}-{_ID_HIGH[8:12]}-{_ID_HIGH[12:]}-"
_ID_COUNT = itertools.count(int.from_bytes(os.urandom(8), "big"))
_LOW_48 = (1 << 48) - 1


def _request_id() -> str:
    """A request id in a UUID's form, unique to a request: a random 64-bit high half per process,
    a low half counted from a random start (a request id is an identifier, not a secret; a uuid4
    costs ~3 us more; 2**64 requests before the low half repeats)."""
    n = next(_ID_COUNT)
    return f"{_ID_PREFIX}{(n >> 48) & 0xFFFF:04x}-{n & _LOW_48:012x}"


class SQSService(QueueActions, MessageActions):
    def __init__(self, ctx: ServerContext):
        self.ctx = ctx
        self.settings = ctx.settings
        self.broker = ctx.broker
        self.metrics = ctx.metrics
        self._tasks: list = []  # the message move tasks started here (stopped at close)
        self._keys = dict(self.settings.sigv4_keys)
        self._auth_required = self.settings.auth_enabled
        self._deleted_at: dict[str, float] = {}  # queue name -> monotonic time of its DeleteQueue
        self._latency: dict = {}  # action -> its child of the latency histogram

    def _auth_failed(self, scope, code: str) -> None:
        """A failed SigV4 check, with AWS's code (auth_failures.py: never the Authorization
        header, a signature or a secret). Both HTTP paths (the ASGI app, the fast path) answer
        through ``answer``, so every failure passes here."""
        self.ctx.auth_failures.failed("sqs", scope.get("client"), code)

    def close(self) -> None:
        for t in self._tasks:
            t.stop()
        for t in self._tasks:
            t.stop(5)

    # ====================================================================== ASGI
    async def asgi(self, scope, receive, send) -> None:
        """The endpoint as an ASGI app: read the body, ``answer``, send the answer."""
        t0 = time.perf_counter()
        chunks = []
        while True:
            m = await receive()
            if m["type"] == "http.disconnect":
                return
            chunks.append(m.get("body", b""))
            if not m.get("more_body"):
                break
        status, hs, out = await self.answer(scope, b"".join(chunks), t0)
        await send({"type": "http.response.start", "status": status, "headers": hs})
        await send({"type": "http.response.body", "body": out})

    async def answer(self, scope, body: bytes, t0: float) -> tuple[int, list, bytes]:
        """(status, headers, body) of the answer to a request (an ASGI ``scope``: method, path,
        raw_path, query_string, headers, scheme) whose whole body is ``body``, received from
        ``t0`` (``perf_counter``; the action's latency is observed from it). Never raises an
        ``Exception``: every error is an answer. The ASGI app above and the HTTP fast path
        (vqs/server/fast_http.py) both answer with this, so their answers are the same."""
        headers: dict[str, str] = {}
        for k, v in scope["headers"]:
            k = k.decode("latin-1")
            v = v.decode("latin-1")
            headers[k] = headers[k] + "," + v if k in headers else v
        request_id = _request_id()
        raw_query = scope.get("query_string", b"").decode("latin-1")
        target = headers.get("x-amz-target")
        is_json = target is not None or headers.get("content-type", "").startswith("application/x-amz-json")
        # a query request asking for JSON gets the query response's JSON form (AWS negotiates it)
        query_json = not is_json and headers.get("accept", "").startswith("application/json")
        action = "unknown"
        params: dict = {}
        try:
            region = region_from_authorization(headers) or self.settings.region
            if self._auth_required:
                if not self._keys:
                    self._auth_failed(scope, "InvalidClientTokenId")
                    raise SQSError("InvalidClientTokenId",
                                   "This server accepts no SQS credentials (start it with --sigv4-key AKID:SECRET).")
                raw_path = scope.get("raw_path") or scope["path"].encode()
                try:
                    ident = verify(method=scope["method"], raw_path=raw_path.decode("latin-1").split("?", 1)[0],
                                   raw_query=raw_query, headers=headers, body=body, secrets=self._keys,
                                   max_skew_s=self.settings.sigv4_max_skew_s)
                except SigV4Error as e:
                    self.metrics.rejected.labels("sigv4").inc()
                    self._auth_failed(scope, e.code)
                    raise SQSError(e.code, str(e), status=e.status) from None
                region = ident.region
            path_queue = None
            parts = scope["path"].strip("/").split("/")
            if len(parts) == 2:
                path_queue = unquote(parts[1])
            if is_json:
                if target is None:
                    raise SQSError("InvalidAction", "X-Amz-Target is required with application/x-amz-json-1.0.")
                action, params = parse_json(target, body)
            else:
                pairs = parse_form(raw_query.encode()) if raw_query else []
                if scope["method"] == "POST" and body:
                    pairs += parse_form(body, MAX_PARAMETERS - len(pairs))
                if path_queue and not any(k == "Action" for k, _ in pairs):
                    # SQS: a request to a queue URL without an Action is an unknown operation (404)
                    out = b'<?xml version="1.0"?><UnknownOperationException/>'
                    return 404, [(b"content-type", b"text/xml"), (b"content-length", str(len(out)).encode()),
                                 (b"x-amzn-requestid", request_id.encode())], out
                action, params = parse_query(pairs)
                if path_queue and action in ("CreateQueue", "ListQueues"):
                    raise SQSError("InvalidAction", f"The action {action} is not valid for this endpoint.")
            if not self._auth_required and action not in READ_ONLY_ACTIONS and (
                    scope["method"] != "POST" or ("authorization" not in headers and target is None)):
                raise SQSError("AccessDenied", _CROSS_SITE, status=403)
            host = headers.get("host") or f"127.0.0.1:{self.settings.port}"
            scheme = headers.get("x-forwarded-proto") or scope.get("scheme", "http")
            req = Req(host, scheme, region, self.settings.account_id, path_queue, headers.get("x-amzn-trace-id"))
            if path_queue and "QueueUrl" not in params and action not in ("CreateQueue", "GetQueueUrl", "ListQueues"):
                params["QueueUrl"] = req.url(path_queue)
            output = await self.dispatch(action, params, req)
            status = 200
            if is_json:
                out = render_json(output)
                ctype = JSON_CONTENT_TYPE
            elif query_json:
                out = render_query_json(action, output, request_id)
                ctype = "application/json"
            else:
                out = render_xml(action, output, request_id)
                ctype = "text/xml"
            hs = [(b"content-type", ctype.encode()), (b"content-length", str(len(out)).encode()),
                  (b"x-amzn-requestid", request_id.encode())]
        except SQSError as e:
            status, out, hs = self._error(e, is_json, request_id, query_json)
        except QueueError as e:
            status, out, hs = self._error(from_queue_error(e), is_json, request_id, query_json)
        except InvalidName as e:
            status, out, hs = self._error(SQSError("InvalidParameterValue", str(e)), is_json, request_id, query_json)
        except APIError as e:  # a server limit (max_long_poll_waiters): 503 ServiceUnavailable, not a failure
            err = SQSError("ServiceUnavailable" if e.status >= 500 else "InvalidParameterValue", e.message,
                           status=e.status)
            status, out, hs = self._error(err, is_json, request_id, query_json)
        except VQSError as e:
            if type(e).__name__ == "LogClosedError":
                # the queue deleted under the request answers as a missing one, as a moment later
                gone = deleted_under(e, self.ctx, "/queues/" + self._gone_name(params))
                err = SQSError("QueueDoesNotExist") if gone is not None else \
                    SQSError("ServiceUnavailable", "the server is shutting down")
            elif type(e).__name__ == "DiskFullError":
                client_message(e)  # the details (the file) go to the server log only
                err = SQSError("ServiceUnavailable", "the server's disk is full; retry later")
            elif type(e).__name__ == "TooManyOpenFiles":
                client_message(e)  # the details (the file, the limit, the settings) go to the server log only
                err = SQSError("ServiceUnavailable", "the server has no file descriptor left; retry later")
            elif type(e).__name__ == "LogFailedError":
                client_message(e)  # the details (the file, the errno) go to the server log only
                err = SQSError("ServiceUnavailable", "this queue had a disk I/O error and accepts no "
                                                     "writes until the server restarts")
            elif type(e).__name__ == "CorruptRecordError":  # the server's stored data: its fault, not the client's
                err = SQSError("InternalFailure", client_message(e))
            else:
                err = SQSError("InvalidParameterValue", client_message(e))
            status, out, hs = self._error(err, is_json, request_id, query_json)
        except Exception:
            logger.exception("SQS %s failed", action)
            status, out, hs = self._error(SQSError("InternalFailure"), is_json, request_id, query_json)
        lat = self._latency.get(action)
        if lat is None:  # labels() costs more than the observation; action is one of ACTIONS or "unknown"
            lat = self._latency[action] = self.metrics.latency.labels("sqs", action)
        lat.observe(time.perf_counter() - t0)
        return status, hs, out

    @staticmethod
    def _gone_name(params) -> str:
        """The queue name of a request's ``QueueUrl`` ("" without one)."""
        url = params.get("QueueUrl") if isinstance(params, dict) else None
        return queue_name_of(url) if isinstance(url, str) else ""

    def _error(self, e: SQSError, is_json: bool, request_id: str, query_json: bool = False):
        self.metrics.errors.labels("sqs", e.name).inc()
        if is_json:
            out = render_json_error(e)
            ctype = JSON_CONTENT_TYPE
        elif query_json:
            out = render_query_json_error(e, request_id)
            ctype = "application/json"
        else:
            out = render_xml_error(e, request_id)
            ctype = "text/xml"
        hs = [(b"content-type", ctype.encode()), (b"content-length", str(len(out)).encode()),
              (b"x-amzn-requestid", request_id.encode()),
              (b"x-amzn-query-error", e.query_error_header.encode())]
        if e.status == 503:
            hs.append((b"retry-after", b"1"))
        return e.status, out, hs

    # ================================================================== dispatch
    async def dispatch(self, action: str, params: dict, req: Req):
        fn = getattr(self, "a_" + action)
        if action == "ReceiveMessage":
            return await fn(params, req)
        if self.ctx.inline_writes and self._inline_target(params):
            return fn(params, req)
        return await self.ctx.run(fn, params, req)

    def _inline_target(self, params) -> bool:
        """An action may run on the event loop unless its queue's writes wait on an fsync (the
        queue's own ``flush``: ServerContext.inline_for). A name that is no queue's: the action
        answers it."""
        name = self._gone_name(params)
        if not name:
            return True
        try:
            q = self.broker.queue(name)
        except Exception:  # (no such queue, a bad name, a failed open: the action's to answer)
            return True
        return self.ctx.inline_for(q)
