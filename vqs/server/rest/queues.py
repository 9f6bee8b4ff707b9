"""REST routes for queues: admin, send, receive (long poll), delete, visibility, purge, tags.

Queue semantics (leases, delays, dead letters, FIFO) are the broker's; these
routes move whole requests onto it in SQS-sized pieces (at most 10 messages
per broker call), so a REST batch of 1,000 behaves like 100 SQS batches.
Invariants: a body is text when it is UTF-8, else ``body_b64``; a message
attribute is a plain string (a String attribute) or SQS-shaped
``{"DataType", "StringValue" | "BinaryValue"}``, a binary value as base64 both
ways; a failed delete is reported per receipt handle, never dropped, with its
SQS ``code`` (and, for a one-handle delete, the embedded error's precise ``type``).
"""

from __future__ import annotations

import base64
import binascii

from fastapi import APIRouter, Query, Response

from ...errors import QueueError
from ..context import ServerContext
from ..errors import APIError, client_message, error_type
from .conventions import JSONRoute, check_name, jresp, links, name_param, ready_broker
from .models import (
    QueueCreate,
    QueueDelete,
    QueueReceive,
    QueueSend,
    QueueUpdate,
    Redrive,
    Tags,
    VisibilityChange,
)


def _message_json(m) -> dict:
    d = {"id": m.id, "receipt_handle": m.receipt_handle, "receive_count": m.receive_count,
         "sent_timestamp_ms": m.sent_timestamp_ms,
         "first_receive_timestamp_ms": getattr(m, "first_receive_timestamp_ms", None)}
    try:
        d["body"] = m.body.decode("utf-8")
    except UnicodeDecodeError:
        d["body_b64"] = base64.b64encode(m.body).decode("ascii")
    if getattr(m, "group_id", None) is not None:
        d["group_id"] = m.group_id
    if getattr(m, "dedup_id", None) is not None:
        d["dedup_id"] = m.dedup_id
    seq = getattr(m, "sequence_number", None)
    if seq is not None:
        d["sequence_number"] = seq
    if m.attributes:
        attrs = {}
        for k, a in m.attributes.items():
            if isinstance(a, dict) and "BinaryValue" in a:
                attrs[k] = {"DataType": a["DataType"], "BinaryValue": base64.b64encode(bytes(a["BinaryValue"])).decode()}
            else:
                attrs[k] = a
        d["attributes"] = attrs
    return d


def move_task_json(t) -> dict:
    """A ``MoveTask`` as REST shows it (the client's ``RemoteMoveTask`` reads the same fields)."""
    return {"handle": t.handle, "source": t.source, "destination": t.destination, "status": t.status,
            "moved": t.moved, "to_move": t.to_move, "max_per_second": t.max_per_second,
            "failure_reason": t.failure_reason, "started_ms": t.started_ms}


def _attributes_in(attributes: dict, i: int) -> dict:
    """REST message attributes -> the embedded API's: a plain string stays a String
    attribute, a typed one (a checked ``MessageAttributeIn`` as a dict) keeps its fields
    with ``BinaryValue`` decoded from base64."""
    out = {}
    for name, v in attributes.items():
        if isinstance(v, str):
            out[name] = v
            continue
        a = {"DataType": v["DataType"]}
        if v.get("StringValue") is not None:
            a["StringValue"] = v["StringValue"]
        if v.get("BinaryValue") is not None:
            try:
                a["BinaryValue"] = base64.b64decode(v["BinaryValue"], validate=True)
            except (binascii.Error, ValueError):
                raise APIError(400, "invalid_argument", f"messages[{i}].attributes.{name}.BinaryValue is not base64",
                               field="attributes") from None
        out[name] = a
    return out


def queue_routes(ctx: ServerContext) -> APIRouter:
    r = APIRouter(tags=["queues"], route_class=JSONRoute)

    def broker():
        return ready_broker(ctx)

    def queue(name: str):
        return broker().queue(check_name(name, "queue"))

    def describe(q) -> dict:
        return {"name": q.name, "attributes": q.get_attributes(), "tags": q.tags()}

    @r.get("/queues", summary="List queues")
    async def list_queues(prefix: str | None = Query(None, max_length=200)):
        return jresp({"queues": broker().queues(prefix or None)})

    named = {"queue_name": "$request.body#/name"}
    same = {"queue_name": "$request.path.queue_name"}
    handle = "$response.body#/messages/0/receipt_handle"

    @r.post("/queues", summary="Create a queue", status_code=201, responses=links(
        201, "The queue, created",
        Send=("post", "/queues/{queue_name}/messages", named), Receive=("post", "/queues/{queue_name}/receive", named),
        Describe=("get", "/queues/{queue_name}", named), Update=("patch", "/queues/{queue_name}", named),
        Purge=("post", "/queues/{queue_name}/purge", named), Tag=("put", "/queues/{queue_name}/tags", named),
        Delete=("delete", "/queues/{queue_name}", named)))
    async def create_queue(body: QueueCreate):
        check_name(body.name, "queue")
        kw = body.model_dump(exclude_none=True)
        name = kw.pop("name")
        if not kw.get("tags"):
            kw.pop("tags", None)
        if not kw.get("fifo"):
            kw.pop("content_based_deduplication", None)
        q = await ctx.run(broker().create_queue, name, **kw)
        return jresp(describe(q), 201)

    @r.get("/queues/{queue_name}", summary="Attributes (SQS names, strings) and tags")
    async def describe_queue(queue_name: str = name_param("queue")):
        return jresp(describe(queue(queue_name)))

    @r.patch("/queues/{queue_name}", summary="Change queue attributes")
    async def update_queue(body: QueueUpdate, queue_name: str = name_param("queue")):
        q = queue(queue_name)
        changes = body.model_dump(exclude_unset=True)
        if "dead_letter_queue" in changes or "max_receive_count" in changes:
            if changes.get("dead_letter_queue") is None and changes.get("max_receive_count") is None:
                changes["dead_letter_queue"] = None
                changes["max_receive_count"] = None
        if changes:
            await ctx.run(q.set_attributes, changes)
        return jresp(describe(q))

    @r.delete("/queues/{queue_name}", summary="Delete a queue and its messages", status_code=204)
    async def delete_queue(queue_name: str = name_param("queue")):
        await ctx.run(broker().delete_queue, check_name(queue_name, "queue"))
        return Response(status_code=204)

    @r.post("/queues/{queue_name}/messages", summary="Send messages", responses=links(
        200, "The ids of the messages sent", Receive=("post", "/queues/{queue_name}/receive", same),
        DeleteQueue=("delete", "/queues/{queue_name}", same)))
    async def send(body: QueueSend, queue_name: str = name_param("queue")):
        return jresp(await send_messages(ctx, queue_name, [m.model_dump() for m in body.messages]))

    @r.post("/queues/{queue_name}/receive", summary="Receive messages (long poll with wait_seconds)",
            responses=links(200, "The messages received (leased until their visibility timeout)",
                            Delete=("post", "/queues/{queue_name}/delete", same, {"receipt_handles": [handle]}),
                            Visibility=("post", "/queues/{queue_name}/visibility", same,
                                        {"receipt_handle": handle, "visibility_timeout": 0}),
                            DeleteQueue=("delete", "/queues/{queue_name}", same)))
    async def receive(body: QueueReceive, queue_name: str = name_param("queue")):
        return jresp(await receive_messages(ctx, queue_name, body.max_messages, body.wait_seconds,
                                            body.visibility_timeout))

    @r.post("/queues/{queue_name}/delete", summary="Delete (acknowledge) messages by receipt handle")
    async def delete(body: QueueDelete, queue_name: str = name_param("queue")):
        return jresp(await delete_messages(ctx, queue_name, body.receipt_handles))

    @r.post("/queues/{queue_name}/visibility", summary="Change a message's visibility timeout")
    async def visibility(body: VisibilityChange, queue_name: str = name_param("queue")):
        q = queue(queue_name)
        await ctx.queue_write(q, q.change_visibility, body.receipt_handle, body.visibility_timeout)
        return jresp({"receipt_handle": body.receipt_handle, "visibility_timeout": body.visibility_timeout})

    @r.get("/queues/{queue_name}/peek", summary="Pending messages, read without receiving them")
    async def peek(queue_name: str = name_param("queue"),
                   max_messages: int = Query(10, ge=1, le=100, description="at most this many (1-100)"),
                   from_offset: int = Query(0, ge=0, le=(1 << 63) - 1,
                                            description="from this position on (a peeked message's next_offset)")):
        q = queue(queue_name)
        rows = await ctx.run(q.peek, max_messages, from_offset)
        out = []
        for p in rows:
            d = _message_json(p.message)
            del d["receipt_handle"]  # a peek leases nothing
            d.update(offset=p.message.offset, state=p.state, receive_count=p.receive_count,
                     visible_at_ms=p.visible_at_ms)
            out.append(d)
        nxt = out[-1]["offset"] + 1 if out else from_offset
        return jresp({"messages": out, "next_offset": nxt})

    @r.post("/queues/{queue_name}/redrive", summary="Move a dead-letter queue's messages back (a move task)",
            status_code=202)
    async def redrive(body: Redrive, queue_name: str = name_param("queue")):
        task = await ctx.run(broker().redrive, check_name(queue_name, "queue"), body.destination,
                             max_per_second=body.max_per_second)
        return jresp(move_task_json(task), 202)

    @r.get("/queues/{queue_name}/redrive", summary="The queue's message move tasks, newest first")
    async def redrive_tasks(queue_name: str = name_param("queue"), max_results: int = Query(10, ge=1, le=10)):
        tasks = await ctx.run(broker().redrive_tasks, check_name(queue_name, "queue"), max_results)
        return jresp({"tasks": [move_task_json(t) for t in tasks]})

    @r.post("/queues/{queue_name}/purge", summary="Delete every message", status_code=204)
    async def purge(queue_name: str = name_param("queue")):
        await ctx.run(queue(queue_name).purge)
        return Response(status_code=204)

    @r.get("/queues/{queue_name}/tags", summary="Queue tags")
    async def get_tags(queue_name: str = name_param("queue")):
        return jresp({"tags": queue(queue_name).tags()})

    @r.put("/queues/{queue_name}/tags", summary="Add or change tags")
    async def put_tags(body: Tags, queue_name: str = name_param("queue")):
        q = queue(queue_name)
        await ctx.run(q.tag, body.tags)
        return jresp({"tags": q.tags()})

    @r.delete("/queues/{queue_name}/tags", summary="Remove tags")
    async def delete_tags(queue_name: str = name_param("queue"), keys: list[str] = Query(..., max_length=50)):
        q = queue(queue_name)
        await ctx.run(q.untag, keys)
        return jresp({"tags": q.tags()})

    return r


# ------------------------------------------------------------ the routes' cores
# The FastAPI routes above and the fast path (vqs/server/lean.py) both call these
# with checked values (a message as QueueMessageIn's fields in a dict), so the two
# answer alike by construction.
def _queue(ctx: ServerContext, name: str):
    return ready_broker(ctx).queue(check_name(name, "queue"))


def _send_entries(ctx: ServerContext, queue_name: str, messages: list[dict]) -> tuple:
    """The queue and the checked entries of a send (APIError before anything is sent)."""
    q = _queue(ctx, queue_name)
    entries = []
    nbytes = 0
    for i, m in enumerate(messages):
        body, body_b64 = m.get("body"), m.get("body_b64")
        if (body is None) == (body_b64 is None):
            raise APIError(400, "invalid_argument", f"messages[{i}]: give body or body_b64", field="body")
        if body_b64 is not None:
            try:
                b = base64.b64decode(body_b64, validate=True)
            except (binascii.Error, ValueError):
                raise APIError(400, "invalid_argument", f"messages[{i}].body_b64 is not base64",
                               field="body_b64") from None
        else:
            b = body
        nbytes += len(b)
        e = {"body": b}
        for k in ("delay_seconds", "group_id", "dedup_id"):
            v = m.get(k)
            if v is not None:
                e[k] = v
        attributes = m.get("attributes")
        if attributes is not None:
            e["attributes"] = _attributes_in(attributes, i)
        entries.append(e)
    return q, entries, nbytes


def _send_calls(q, entries: list) -> list:
    """The broker calls of a send, each returning its message ids: ``q.send`` for a lone
    message, ``q.send_batch`` for each 10."""
    calls = []
    for i in range(0, len(entries), 10):
        chunk = entries[i:i + 10]
        if len(chunk) == 1:
            e = dict(chunk[0])
            body = e.pop("body")
            calls.append(lambda body=body, e=e: [q.send(body, **e)])
        else:
            calls.append(lambda chunk=chunk: q.send_batch(chunk))
    return calls


async def send_messages(ctx: ServerContext, queue_name: str, messages: list[dict]) -> dict:
    """``POST /queues/{q}/messages``: sent to the broker at most 10 per call."""
    q, entries, nbytes = _send_entries(ctx, queue_name, messages)
    ids = []
    for call in _send_calls(q, entries):
        ids += await ctx.queue_write(q, call)
    ctx.metrics.count_in("queue", q.name, len(ids), nbytes)
    return {"message_ids": ids}


def send_messages_inline(ctx: ServerContext, queue_name: str, messages: list[dict]) -> dict | None:
    """``send_messages`` answered without a coroutine where the queue's sends run inline
    (``ctx.inline_for``: no fsync on their way): the same checks, sends and answer; None,
    nothing sent, for a queue whose sends may wait on an fsync (``send_messages`` runs them in
    a thread)."""
    q, entries, nbytes = _send_entries(ctx, queue_name, messages)
    if not ctx.inline_for(q):
        return None
    ids = []
    for call in _send_calls(q, entries):
        ids += call()
    ctx.metrics.count_in("queue", q.name, len(ids), nbytes)
    return {"message_ids": ids}


def _receive_wait(ctx: ServerContext, q, wait_seconds: float | None) -> float:
    """How long a receive may wait: the request's, else the queue's, under the REST cap."""
    wait = q.config.receive_wait_seconds if wait_seconds is None else wait_seconds
    return min(wait, ctx.settings.max_wait_ms / 1000)  # the REST long-poll cap (docs/server.md)


def receive_now_inline(ctx: ServerContext, queue_name: str, max_messages: int, wait_seconds: float | None,
                       visibility_timeout: int | None) -> dict | None:
    """``receive_messages`` answered without a coroutine where the queue's receives run inline
    (``ctx.inline_for``) and it would not wait (the request's wait, else the queue's, is 0):
    the same receives and answer. None, nothing done, for a receive that may wait."""
    q = _queue(ctx, queue_name)
    if _receive_wait(ctx, q, wait_seconds) > 0 or not ctx.inline_for(q):
        return None
    out = []
    while len(out) < max_messages:
        n = min(10, max_messages - len(out))
        got = q.receive(n, 0, visibility_timeout)
        out += got
        if len(got) < n:
            break
    return _received(ctx, q, out)


def _received(ctx: ServerContext, q, out: list) -> dict:
    """A receive's answer, its messages counted."""
    ctx.metrics.count_out("queue", q.name, len(out), sum(len(m.body) for m in out))
    return {"messages": [_message_json(m) for m in out]}


async def receive_messages(ctx: ServerContext, queue_name: str, max_messages: int, wait_seconds: float | None,
                           visibility_timeout: int | None) -> dict:
    """``POST /queues/{q}/receive``: up to ``max_messages``, 10 per broker call; only the first waits."""
    q = _queue(ctx, queue_name)
    wait = _receive_wait(ctx, q, wait_seconds)
    out = []
    while len(out) < max_messages:
        n = min(10, max_messages - len(out))
        if not out and wait > 0:
            got = await ctx.long_poll_receive(q, n, wait, visibility_timeout)
        else:
            got = await ctx.queue_write(q, q.receive, n, 0, visibility_timeout)
        out += got
        if len(got) < n:
            break
    return _received(ctx, q, out)


def _delete_failure(handle: str, err) -> dict:
    return {"receipt_handle": handle, "code": err.code, "type": error_type(err), "message": client_message(err)}


def delete_one_inline(ctx: ServerContext, queue_name: str, handle: str) -> dict | None:
    """``delete_messages`` of one handle answered without a coroutine where the queue's deletes
    run inline (``ctx.inline_for``): the same delete and answer; None, nothing done, for a queue
    whose deletes may wait on an fsync."""
    q = _queue(ctx, queue_name)
    if not ctx.inline_for(q):
        return None
    try:
        q.delete(handle)
    except QueueError as err:
        return {"deleted": 0, "failed": [_delete_failure(handle, err)]}
    return {"deleted": 1, "failed": []}


async def delete_messages(ctx: ServerContext, queue_name: str, handles: list[str]) -> dict:
    """``POST /queues/{q}/delete``: every handle deleted or reported in ``failed``."""
    q = _queue(ctx, queue_name)
    ok, failed = 0, []
    if len(handles) == 1:
        # one handle (vqs.Client's RemoteQueue.delete): the embedded delete, whose error is
        # precise (a batch entry's result names only the SQS code)
        try:
            await ctx.queue_write(q, q.delete, handles[0])
        except QueueError as err:
            failed.append(_delete_failure(handles[0], err))
        return {"deleted": 1 - len(failed), "failed": failed}
    for i in range(0, len(handles), 10):
        chunk = handles[i:i + 10]
        res = await ctx.queue_write(q, q.delete_batch_entries,
                              [{"id": f"e{j}", "receipt_handle": h} for j, h in enumerate(chunk)])
        ok += len(res["successful"])
        for f in res["failed"]:
            failed.append({"receipt_handle": chunk[int(f["id"][1:])], "code": f["code"], "message": f.get("message", "")})
    return {"deleted": ok, "failed": failed}
