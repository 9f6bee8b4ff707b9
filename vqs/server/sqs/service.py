"""SQS actions on the embedded queues, and the ASGI endpoint that serves them.

Requests arrive as AWS JSON 1.0 (``X-Amz-Target: AmazonSQS.<Action>``, what
boto3 speaks) or the query protocol (``Action=...``, form body or query
string, XML responses); both are decoded to the JSON shapes (protocol.py),
verified with SigV4 when keys are configured (sigv4.py), run here, and encoded
back. Queue semantics (leases, delays, DLQ, FIFO, dedup) live in
vqs.broker.queue; this layer checks SQS's request rules, computes the MD5s
and formats attributes the way AWS does.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import time
import uuid
from urllib.parse import unquote

from ...errors import InvalidName, QueueDoesNotExist, QueueError, VQSError
from ..context import ServerContext
from ..errors import client_message
from .errors import SQSError, from_queue_error
from .md5 import md5_hex, md5_of_attributes
from .protocol import (
    JSON_CONTENT_TYPE,
    parse_form,
    parse_json,
    parse_query,
    render_json,
    render_json_error,
    render_xml,
    render_xml_error,
)
from .sigv4 import SigV4Error, region_from_authorization, verify

logger = logging.getLogger("vqs.server.sqs")

_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
_FIFO_NAME = re.compile(r"[A-Za-z0-9_-]{1,75}\.fifo")
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
_SYSTEM_ATTRS = ("SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
                 "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
                 "DeadLetterQueueSourceArn")
_TAG_KEYS_MAX = 50


class Req:
    """Per-request facts the actions need."""

    __slots__ = ("host", "scheme", "region", "account", "path_queue")

    def __init__(self, host, scheme, region, account, path_queue):
        self.host = host
        self.scheme = scheme
        self.region = region
        self.account = account
        self.path_queue = path_queue

    @property
    def arn_prefix(self) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account}"

    def url(self, name: str) -> str:
        return f"{self.scheme}://{self.host}/{self.account}/{name}"


def _int(params: dict, key: str, lo: int, hi: int, reason: str | None = None):
    v = params.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, str) and re.fullmatch(r"-?\d{1,12}", v):
            v = int(v)
        else:
            raise SQSError("InvalidParameterValue", f"Value {v} for parameter {key} is invalid. Reason: must be an integer.")
    if not lo <= v <= hi:
        raise SQSError("InvalidParameterValue",
                       f"Value {v} for parameter {key} is invalid. Reason: {reason or f'Must be between {lo} and {hi}'}.")
    return v


def _str(params: dict, key: str, required: bool = False):
    v = params.get(key)
    if v is None:
        if required:
            raise SQSError("MissingParameter", f"The request must contain the parameter {key}.")
        return None
    if not isinstance(v, str):
        raise SQSError("InvalidParameterValue", f"Value for parameter {key} is invalid. Reason: must be a string.")
    return v


def _str_map(params: dict, key: str) -> dict:
    v = params.get(key) or {}
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise SQSError("InvalidParameterValue", f"{key} must be a map of strings to strings.")
    return v


def _str_list(params: dict, key: str) -> list:
    v = params.get(key) or []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise SQSError("InvalidParameterValue", f"{key} must be a list of strings.")
    return v


def _decode_message_attributes(raw, what="MessageAttributes") -> dict | None:
    """JSON-shape message attributes -> the queue's shape (BinaryValue as bytes)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SQSError("InvalidParameterValue", f"{what} must be a map.")
    out = {}
    for name, v in raw.items():
        if not isinstance(v, dict):
            raise SQSError("InvalidParameterValue", f"The message attribute '{name}' must be a structure.")
        dt = v.get("DataType")
        if not isinstance(dt, str) or not dt:
            raise SQSError("InvalidParameterValue", f"The message attribute '{name}' must contain a non-empty attribute type.")
        a = {"DataType": dt}
        if v.get("StringListValues") or v.get("BinaryListValues"):
            raise SQSError("InvalidParameterValue", f"Message attribute list values in MessageAttribute '{name}' are not supported.")
        if dt.split(".", 1)[0] == "Binary":
            b = v.get("BinaryValue")
            if not isinstance(b, str):
                raise SQSError("InvalidParameterValue", f"The message attribute '{name}' with type 'Binary' must use field 'Binary'.")
            try:
                a["BinaryValue"] = base64.b64decode(b, validate=True)
            except (binascii.Error, ValueError):
                raise SQSError("InvalidParameterValue", f"The message attribute '{name}' has an invalid base64 BinaryValue.") from None
        else:
            s = v.get("StringValue")
            if not isinstance(s, str):
                raise SQSError("InvalidParameterValue",
                               f"The message attribute '{name}' with type '{dt.split('.', 1)[0]}' must use field 'String'.")
            a["StringValue"] = s
        out[name] = a
    return out


def _encode_message_attributes(attrs: dict) -> dict:
    out = {}
    for name, a in attrs.items():
        d = {"DataType": a["DataType"]}
        if "BinaryValue" in a:
            d["BinaryValue"] = base64.b64encode(bytes(a["BinaryValue"])).decode("ascii")
        else:
            d["StringValue"] = a["StringValue"]
        out[name] = d
    return out


def _select_attributes(attrs: dict, names: list) -> dict:
    if not names or not attrs:
        return {}
    if "All" in names or ".*" in names:
        return attrs
    out = {}
    prefixes = [n[:-2] for n in names if n.endswith(".*")]
    for k, v in attrs.items():
        if k in names or any(k.startswith(p + ".") or (k.startswith(p) and p.endswith(".")) for p in prefixes):
            out[k] = v
    return out


def _system_attributes(raw) -> tuple[dict | None, str | None]:
    """MessageSystemAttributes on send: only AWSTraceHeader (String) exists."""
    if not raw:
        return None, None
    attrs = _decode_message_attributes(raw, "MessageSystemAttributes")
    for name, a in attrs.items():
        if name != "AWSTraceHeader":
            raise SQSError("InvalidParameterValue",
                           f"Message system attribute name '{name}' is invalid. Valid names: AWSTraceHeader.")
        if a["DataType"] != "String":
            raise SQSError("InvalidParameterValue", "Message system attribute AWSTraceHeader must be of type String.")
    return attrs, md5_of_attributes(attrs)


def _move_task_entry(task) -> dict:
    """A vqs.broker.queue.MoveTask as a ListMessageMoveTasks result entry."""
    d = {"Status": task.status, "SourceArn": task.source_arn,
         "ApproximateNumberOfMessagesMoved": task.moved,
         "ApproximateNumberOfMessagesToMove": task.to_move, "StartedTimestamp": task.started_ms}
    if task.status == "RUNNING":
        d["TaskHandle"] = task.handle
    if task.destination_arn:
        d["DestinationArn"] = task.destination_arn
    if task.max_per_second is not None:
        d["MaxNumberOfMessagesPerSecond"] = task.max_per_second
    if task.failure_reason:
        d["FailureReason"] = task.failure_reason
    return d


class SQSService:
    def __init__(self, ctx: ServerContext):
        self.ctx = ctx
        self.settings = ctx.settings
        self.broker = ctx.broker
        self.metrics = ctx.metrics
        self._tasks: list = []  # the message move tasks started here (stopped at close)
        self._keys = dict(self.settings.sigv4_keys)
        self._auth_required = self.settings.auth_enabled

    def close(self) -> None:
        for t in self._tasks:
            t.stop()
        for t in self._tasks:
            t.stop(5)

    # ====================================================================== ASGI
    async def asgi(self, scope, receive, send) -> None:
        t0 = time.perf_counter()
        chunks = []
        while True:
            m = await receive()
            if m["type"] == "http.disconnect":
                return
            chunks.append(m.get("body", b""))
            if not m.get("more_body"):
                break
        body = b"".join(chunks)
        headers: dict[str, str] = {}
        for k, v in scope["headers"]:
            k = k.decode("latin-1")
            v = v.decode("latin-1")
            headers[k] = headers[k] + "," + v if k in headers else v
        request_id = str(uuid.uuid4())
        raw_query = scope.get("query_string", b"").decode("latin-1")
        target = headers.get("x-amz-target")
        is_json = target is not None or headers.get("content-type", "").startswith("application/x-amz-json")
        action = "unknown"
        try:
            region = region_from_authorization(headers) or self.settings.region
            if self._auth_required:
                if not self._keys:
                    raise SQSError("InvalidClientTokenId",
                                   "This server accepts no SQS credentials (start it with --sigv4-key AKID:SECRET).")
                raw_path = scope.get("raw_path") or scope["path"].encode()
                try:
                    ident = verify(method=scope["method"], raw_path=raw_path.decode("latin-1").split("?", 1)[0],
                                   raw_query=raw_query, headers=headers, body=body, secrets=self._keys,
                                   max_skew_s=self.settings.sigv4_max_skew_s)
                except SigV4Error as e:
                    self.metrics.rejected.labels("sigv4").inc()
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
                    pairs += parse_form(body)
                action, params = parse_query(pairs)
            host = headers.get("host") or f"127.0.0.1:{self.settings.port}"
            scheme = headers.get("x-forwarded-proto") or scope.get("scheme", "http")
            req = Req(host, scheme, region, self.settings.account_id, path_queue)
            if path_queue and "QueueUrl" not in params and action not in ("CreateQueue", "GetQueueUrl", "ListQueues"):
                params["QueueUrl"] = req.url(path_queue)
            output = await self.dispatch(action, params, req)
            status = 200
            if is_json:
                out = render_json(output)
                ctype = JSON_CONTENT_TYPE
            else:
                out = render_xml(action, output, request_id)
                ctype = "text/xml"
            hs = [(b"content-type", ctype.encode()), (b"content-length", str(len(out)).encode()),
                  (b"x-amzn-requestid", request_id.encode())]
        except SQSError as e:
            status, out, hs = self._error(e, is_json, request_id)
        except QueueError as e:
            status, out, hs = self._error(from_queue_error(e), is_json, request_id)
        except InvalidName as e:
            status, out, hs = self._error(SQSError("InvalidParameterValue", str(e)), is_json, request_id)
        except VQSError as e:
            if type(e).__name__ == "LogClosedError":
                err = SQSError("ServiceUnavailable", "the server is shutting down")
            else:
                err = SQSError("InvalidParameterValue", client_message(e))
            status, out, hs = self._error(err, is_json, request_id)
        except Exception:
            logger.exception("SQS %s failed", action)
            status, out, hs = self._error(SQSError("InternalFailure"), is_json, request_id)
        await send({"type": "http.response.start", "status": status, "headers": hs})
        await send({"type": "http.response.body", "body": out})
        self.metrics.latency.labels("sqs", action).observe(time.perf_counter() - t0)

    def _error(self, e: SQSError, is_json: bool, request_id: str):
        self.metrics.errors.labels("sqs", e.name).inc()
        if is_json:
            out = render_json_error(e)
            ctype = JSON_CONTENT_TYPE
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
        if self.ctx.inline_writes:
            return fn(params, req)
        return await self.ctx.run(fn, params, req)

    # ------------------------------------------------------------------ helpers
    def _queue_name(self, params: dict, req: Req, key: str = "QueueUrl") -> str:
        url = _str(params, key, required=True)
        name = url.rstrip("/").rsplit("/", 1)[-1] if "/" in url else url
        if not name:
            raise SQSError("QueueDoesNotExist")
        return name

    def _queue(self, params: dict, req: Req, key: str = "QueueUrl"):
        name = self._queue_name(params, req, key)
        try:
            return self.broker.queue(name)
        except (QueueDoesNotExist, InvalidName):
            raise SQSError("QueueDoesNotExist") from None

    def _name_from_arn(self, arn: str, what: str) -> str:
        if not isinstance(arn, str) or not arn.startswith("arn:") or arn.count(":") != 5:
            raise SQSError("InvalidParameterValue", f"Value {arn} for parameter {what} is invalid. Reason: not a queue ARN.")
        return arn.rsplit(":", 1)[1]

    # =================================================================== queues
    def a_CreateQueue(self, p: dict, req: Req):
        name = _str(p, "QueueName", required=True)
        attrs = dict(_str_map(p, "Attributes"))
        tags = _str_map(p, "tags") or _str_map(p, "Tags")  # JSON says "tags", query Tag.N
        fifo = str(attrs.get("FifoQueue", "false")).lower() == "true"
        if fifo:
            if not _FIFO_NAME.fullmatch(name):
                raise SQSError("InvalidParameterValue",
                               "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
                               "underscores, must end with .fifo suffix and be 1 to 80 in length.")
        elif not _QUEUE_NAME.fullmatch(name):
            raise SQSError("InvalidParameterValue",
                           "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
        if "FifoQueue" in attrs and not fifo:
            if str(attrs["FifoQueue"]).lower() != "false":
                raise SQSError("InvalidAttributeValue", "Invalid value for the parameter FifoQueue.")
            del attrs["FifoQueue"]
        kw = dict(attrs)
        if tags:
            kw["tags"] = tags
        self.broker.create_queue(name, **kw)  # idempotent with the same attributes, else QueueNameExists
        return {"QueueUrl": req.url(name)}

    def a_GetQueueUrl(self, p: dict, req: Req):
        name = _str(p, "QueueName", required=True)
        try:
            self.broker.queue(name)
        except (QueueDoesNotExist, InvalidName):
            raise SQSError("QueueDoesNotExist") from None
        return {"QueueUrl": req.url(name)}

    def a_ListQueues(self, p: dict, req: Req):
        prefix = _str(p, "QueueNamePrefix") or ""
        limit = _int(p, "MaxResults", 1, 1000)
        token = _str(p, "NextToken")
        names = sorted(self.broker.queues(prefix or None))
        if token:
            try:
                after = base64.urlsafe_b64decode(token.encode()).decode()
            except (binascii.Error, UnicodeDecodeError, ValueError):
                raise SQSError("InvalidParameterValue", "Invalid NextToken value.") from None
            names = [n for n in names if n > after]
        out: dict = {}
        if limit is None:
            page = names[:1000]
        else:
            page = names[:limit]
            if len(names) > limit:
                out["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode()
        if page:
            out["QueueUrls"] = [req.url(n) for n in page]
        return out

    def a_DeleteQueue(self, p: dict, req: Req):
        name = self._queue_name(p, req)
        try:
            self.broker.delete_queue(name)
        except (QueueDoesNotExist, InvalidName):
            raise SQSError("QueueDoesNotExist") from None
        return None

    def a_GetQueueAttributes(self, p: dict, req: Req):
        q = self._queue(p, req)
        names = _str_list(p, "AttributeNames")
        if not names:
            return {}
        attrs = q.get_attributes(names, arn_prefix=req.arn_prefix)
        return {"Attributes": attrs} if attrs else {}

    def a_SetQueueAttributes(self, p: dict, req: Req):
        q = self._queue(p, req)
        attrs = _str_map(p, "Attributes")
        if attrs:
            q.set_attributes(dict(attrs))
        return None

    def a_PurgeQueue(self, p: dict, req: Req):
        self._queue(p, req).purge()
        return None

    def a_TagQueue(self, p: dict, req: Req):
        q = self._queue(p, req)
        tags = _str_map(p, "Tags")
        if not tags:
            raise SQSError("MissingParameter", "The request must contain the parameter Tags.")
        q.tag(dict(tags))
        return None

    def a_UntagQueue(self, p: dict, req: Req):
        q = self._queue(p, req)
        keys = _str_list(p, "TagKeys")
        if not keys:
            raise SQSError("MissingParameter", "The request must contain the parameter TagKeys.")
        q.untag(keys)
        return None

    def a_ListQueueTags(self, p: dict, req: Req):
        tags = self._queue(p, req).tags()
        return {"Tags": tags} if tags else {}

    def a_ListDeadLetterSourceQueues(self, p: dict, req: Req):
        q = self._queue(p, req)
        limit = _int(p, "MaxResults", 1, 1000)
        token = _str(p, "NextToken")
        names = sorted(q.dead_letter_source_queues())
        if token:
            try:
                after = base64.urlsafe_b64decode(token.encode()).decode()
            except (binascii.Error, UnicodeDecodeError, ValueError):
                raise SQSError("InvalidParameterValue", "Invalid NextToken value.") from None
            names = [n for n in names if n > after]
        out: dict = {}
        page = names if limit is None else names[:limit]
        if limit is not None and len(names) > limit:
            out["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode()
        out["queueUrls"] = [req.url(n) for n in page]
        return out

    # ------------------------------------------------------------- permissions
    def _policy(self, q) -> dict:
        raw = q.get_attributes(["Policy"]).get("Policy")
        if raw:
            try:
                doc = json.loads(raw)
                if isinstance(doc, dict):
                    return doc
            except ValueError:
                pass
        return {"Version": "2012-10-17", "Id": "", "Statement": []}

    def a_AddPermission(self, p: dict, req: Req):
        q = self._queue(p, req)
        label = _str(p, "Label", required=True)
        if not _LABEL.fullmatch(label):
            raise SQSError("InvalidParameterValue", f"Value {label} for parameter Label is invalid. Reason: "
                                                    "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length.")
        accounts = _str_list(p, "AWSAccountIds")
        actions = _str_list(p, "Actions")
        if not accounts:
            raise SQSError("MissingParameter", "The request must contain the parameter AWSAccountIds.")
        if not actions:
            raise SQSError("MissingParameter", "The request must contain the parameter Actions.")
        valid = {"*", "SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
                 "GetQueueAttributes", "GetQueueUrl", "ListDeadLetterSourceQueues", "PurgeQueue",
                 "ListQueueTags"}
        for a in actions:
            if a not in valid:
                raise SQSError("InvalidParameterValue", f"Value SQS:{a} for parameter ActionName is invalid. "
                                                        "Reason: Only the queue owner is allowed to invoke this action.")
        doc = self._policy(q)
        arn = f"{req.arn_prefix}:{q.name}"
        doc["Id"] = doc.get("Id") or f"{arn}/SQSDefaultPolicy"
        if any(s.get("Sid") == label for s in doc.get("Statement", [])):
            raise SQSError("InvalidParameterValue",
                           f"Value {label} for parameter Label is invalid. Reason: Already exists.")
        principals = [f"arn:aws:iam::{a}:root" for a in accounts]
        doc.setdefault("Statement", []).append({
            "Sid": label, "Effect": "Allow",
            "Principal": {"AWS": principals[0] if len(principals) == 1 else principals},
            "Action": [f"SQS:{a}" for a in actions] if len(actions) > 1 else f"SQS:{actions[0]}",
            "Resource": arn,
        })
        q.set_attributes({"Policy": json.dumps(doc, separators=(",", ":"))})
        return None

    def a_RemovePermission(self, p: dict, req: Req):
        q = self._queue(p, req)
        label = _str(p, "Label", required=True)
        doc = self._policy(q)
        stmts = [s for s in doc.get("Statement", []) if s.get("Sid") != label]
        if len(stmts) == len(doc.get("Statement", [])):
            raise SQSError("InvalidParameterValue",
                           f"Value {label} for parameter Label is invalid. Reason: can't find label on existing policy.")
        doc["Statement"] = stmts
        q.set_attributes({"Policy": json.dumps(doc, separators=(",", ":")) if stmts else ""})
        return None

    # ================================================================= messages
    def _send_args(self, p: dict, q, where: str = ""):
        body = p.get("MessageBody")
        if body is None or body == "":
            raise SQSError("MissingParameter", "The request must contain the parameter MessageBody.")
        if not isinstance(body, str):
            raise SQSError("InvalidParameterValue", "MessageBody must be a string.")
        delay = _int(p, "DelaySeconds", 0, 900, "DelaySeconds must be >= 0 and <= 900")
        attrs = _decode_message_attributes(p.get("MessageAttributes"))
        _, sys_md5 = _system_attributes(p.get("MessageSystemAttributes"))
        group = _str(p, "MessageGroupId")
        dedup = _str(p, "MessageDeduplicationId")
        return body, delay, attrs or None, group, dedup, sys_md5

    def a_SendMessage(self, p: dict, req: Req):
        q = self._queue(p, req)
        body, delay, attrs, group, dedup, sys_md5 = self._send_args(p, q)
        if group is not None and not q.config.fifo:
            group = None  # standard queues accept MessageGroupId (fair queues) and ignore it here
        r = q.send_message(body, delay_seconds=delay, attributes=attrs, group_id=group, dedup_id=dedup)
        out = {"MD5OfMessageBody": md5_hex(body), "MessageId": r["message_id"]}
        am = md5_of_attributes(attrs) if attrs else None
        if am:
            out["MD5OfMessageAttributes"] = am
        if sys_md5:
            out["MD5OfMessageSystemAttributes"] = sys_md5
        if r.get("sequence_number"):
            out["SequenceNumber"] = r["sequence_number"]
        self.metrics.count_in("queue", q.name, 1, len(body))
        return out

    def _entries(self, p: dict) -> list:
        entries = p.get("Entries")
        if not entries:
            raise SQSError("EmptyBatchRequest")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise SQSError("InvalidParameterValue", "Entries must be a list of structures.")
        if len(entries) > 10:
            raise SQSError("TooManyEntriesInBatchRequest", f"Maximum number of entries per request are 10. You have sent {len(entries)}.")
        ids = []
        for e in entries:
            i = e.get("Id")
            if not isinstance(i, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,80}", i):
                raise SQSError("InvalidBatchEntryId")
            ids.append(i)
        if len(set(ids)) != len(ids):
            raise SQSError("BatchEntryIdsNotDistinct", f"Id {next(i for i in ids if ids.count(i) > 1)} repeated.")
        return entries

    def a_SendMessageBatch(self, p: dict, req: Req):
        q = self._queue(p, req)
        entries = self._entries(p)
        failed, todo, extra = [], [], {}
        total = 0
        for e in entries:
            try:
                body, delay, attrs, group, dedup, sys_md5 = self._send_args(e, q)
                if group is not None and not q.config.fifo:
                    group = None
                total += len(body.encode("utf-8"))
                todo.append({"id": e["Id"], "body": body, "delay_seconds": delay, "attributes": attrs,
                             "group_id": group, "dedup_id": dedup})
                extra[e["Id"]] = (md5_hex(body), md5_of_attributes(attrs) if attrs else None, sys_md5)
            except SQSError as err:
                failed.append({"Id": e["Id"], "SenderFault": err.fault == "Sender", "Code": err.name,
                               "Message": err.message})
        if total > 1048576:
            raise SQSError("BatchRequestTooLong",
                           f"Batch requests cannot be longer than 1048576 bytes. You have sent {total} bytes.")
        ok = []
        if todo:
            res = q.send_batch_entries([{k: v for k, v in t.items() if v is not None} for t in todo])
            for s in res["successful"]:
                mb, ma, ms = extra[s["id"]]
                d = {"Id": s["id"], "MessageId": s["message_id"], "MD5OfMessageBody": mb}
                if ma:
                    d["MD5OfMessageAttributes"] = ma
                if ms:
                    d["MD5OfMessageSystemAttributes"] = ms
                if s.get("sequence_number"):
                    d["SequenceNumber"] = s["sequence_number"]
                ok.append(d)
            for f in res["failed"]:
                failed.append({"Id": f["id"], "SenderFault": bool(f.get("sender_fault", True)), "Code": f["code"],
                               "Message": f.get("message", "")})
            self.metrics.count_in("queue", q.name, len(res["successful"]), total)
        return {"Successful": ok, "Failed": failed}

    async def a_ReceiveMessage(self, p: dict, req: Req):
        q = self._queue(p, req)
        n = _int(p, "MaxNumberOfMessages", 1, 10, "Must be between 1 and 10, if provided") or 1
        wait = _int(p, "WaitTimeSeconds", 0, 20, "Must be >= 0 and <= 20, if provided")
        vis = _int(p, "VisibilityTimeout", 0, 43200, "Must be >= 0 and <= 43200, if provided")
        sys_names = _str_list(p, "AttributeNames") + _str_list(p, "MessageSystemAttributeNames")
        for a in sys_names:
            if a != "All" and a not in _SYSTEM_ATTRS and a not in ("Policy", "VisibilityTimeout", "MaximumMessageSize",
                                                                    "MessageRetentionPeriod", "QueueArn",
                                                                    "ApproximateNumberOfMessages", "CreatedTimestamp"):
                raise SQSError("InvalidAttributeName", f"Unknown Attribute {a}.")
        msg_attr_names = _str_list(p, "MessageAttributeNames")
        if wait is None:
            wait = q.config.receive_wait_seconds
        if wait > 0:
            msgs = await self.ctx.long_poll_receive(q, n, wait, vis)
        elif self.ctx.inline_writes:
            msgs = q.receive(n, 0, vis)
        else:
            msgs = await self.ctx.run(q.receive, n, 0, vis)
        out = []
        nbytes = 0
        for m in msgs:
            body = m.body.decode("utf-8", "replace")
            nbytes += len(m.body)
            d = {"MessageId": m.id, "ReceiptHandle": m.receipt_handle, "MD5OfBody": md5_hex(m.body), "Body": body}
            if sys_names:
                sa = m.system_attributes(req.arn_prefix)
                if "All" not in sys_names:
                    sa = {k: v for k, v in sa.items() if k in sys_names}
                if sa:
                    d["Attributes"] = sa
            if m.attributes:
                sel = _select_attributes(m.attributes, msg_attr_names)
                if sel:
                    d["MD5OfMessageAttributes"] = md5_of_attributes(sel)
                    d["MessageAttributes"] = _encode_message_attributes(sel)
            out.append(d)
        self.metrics.count_out("queue", q.name, len(out), nbytes)
        return {"Messages": out} if out else {}

    def a_DeleteMessage(self, p: dict, req: Req):
        q = self._queue(p, req)
        rh = _str(p, "ReceiptHandle", required=True)
        q.delete(rh)
        return None

    def a_DeleteMessageBatch(self, p: dict, req: Req):
        q = self._queue(p, req)
        entries = self._entries(p)
        res = q.delete_batch_entries([{"id": e["Id"], "receipt_handle": e.get("ReceiptHandle")} for e in entries])
        return {"Successful": [{"Id": s["id"]} for s in res["successful"]],
                "Failed": [{"Id": f["id"], "SenderFault": bool(f.get("sender_fault", True)), "Code": f["code"],
                            "Message": f.get("message", "")} for f in res["failed"]]}

    def a_ChangeMessageVisibility(self, p: dict, req: Req):
        q = self._queue(p, req)
        rh = _str(p, "ReceiptHandle", required=True)
        vis = _int(p, "VisibilityTimeout", 0, 43200, "Must be >= 0 and <= 43200")
        if vis is None:
            raise SQSError("MissingParameter", "The request must contain the parameter VisibilityTimeout.")
        q.change_visibility(rh, vis)
        return None

    def a_ChangeMessageVisibilityBatch(self, p: dict, req: Req):
        q = self._queue(p, req)
        entries = self._entries(p)
        todo, failed = [], []
        for e in entries:
            try:
                vis = _int(e, "VisibilityTimeout", 0, 43200, "Must be >= 0 and <= 43200")
                if vis is None:
                    raise SQSError("MissingParameter", "The request must contain the parameter VisibilityTimeout.")
                todo.append({"id": e["Id"], "receipt_handle": e.get("ReceiptHandle"), "visibility_timeout": vis})
            except SQSError as err:
                failed.append({"Id": e["Id"], "SenderFault": True, "Code": err.name, "Message": err.message})
        ok = []
        if todo:
            res = q.change_visibility_batch_entries(todo)
            ok = [{"Id": s["id"]} for s in res["successful"]]
            failed += [{"Id": f["id"], "SenderFault": bool(f.get("sender_fault", True)), "Code": f["code"],
                        "Message": f.get("message", "")} for f in res["failed"]]
        return {"Successful": ok, "Failed": failed}

    # ======================================================== message move tasks
    # (the tasks are the broker's: vqs.broker.queue.redrive.MoveTasks has the rules)
    def a_StartMessageMoveTask(self, p: dict, req: Req):
        src_arn = _str(p, "SourceArn", required=True)
        src_name = self._name_from_arn(src_arn, "SourceArn")
        try:
            self.broker.queue(src_name)
        except (QueueDoesNotExist, InvalidName):
            raise SQSError("ResourceNotFoundException", "The resource that you specified for the SourceArn parameter doesn't exist.") from None
        dest_arn = _str(p, "DestinationArn")
        dest = None
        if dest_arn:
            dest = self._name_from_arn(dest_arn, "DestinationArn")
            try:
                self.broker.queue(dest)
            except (QueueDoesNotExist, InvalidName):
                raise SQSError("ResourceNotFoundException", "The resource that you specified for the DestinationArn parameter doesn't exist.") from None
        rate = _int(p, "MaxNumberOfMessagesPerSecond", 1, 500, "Must be between 1 and 500")
        task = self.broker.queue_registry.start_message_move_task(
            src_name, dest, max_per_second=rate, arn_prefix=req.arn_prefix, source_arn=src_arn,
            destination_arn=dest_arn or None)
        self._tasks = [t for t in self._tasks if t.active] + [task]
        return {"TaskHandle": task.handle}

    def a_CancelMessageMoveTask(self, p: dict, req: Req):
        handle = _str(p, "TaskHandle", required=True)
        task = self.broker.queue_registry.cancel_message_move_task(handle)
        return {"ApproximateNumberOfMessagesMoved": task.moved}

    def a_ListMessageMoveTasks(self, p: dict, req: Req):
        src_arn = _str(p, "SourceArn", required=True)
        src_name = self._name_from_arn(src_arn, "SourceArn")
        limit = _int(p, "MaxResults", 1, 10) or 1
        try:
            tasks = self.broker.queue_registry.list_message_move_tasks(src_name, limit)
        except (QueueDoesNotExist, InvalidName):
            raise SQSError("ResourceNotFoundException", "The resource that you specified for the SourceArn parameter doesn't exist.") from None
        return {"Results": [_move_task_entry(t) for t in tasks]}
