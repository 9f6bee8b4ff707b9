"""SQS message actions, as a mixin of SQSService.

SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch),
ChangeMessageVisibility(Batch).

Invariants:
* The MD5s returned (of the body, of the message attributes, of the system
  attributes) are computed over exactly what was stored/returned, so SDKs'
  checksum validation passes.
* A batch has 1..10 entries with distinct Ids matching [A-Za-z0-9_-]{1,80}
  (else the whole request fails, naming the action's entry type or the first
  repeated id); a bad entry fails alone, in ``Failed``, while the others
  proceed; a send batch over 1 MiB (bodies and message attributes) fails
  whole, and so does a FIFO send batch with an entry lacking its group id (or
  its dedup id without content-based deduplication).
* AWSTraceHeader comes from MessageSystemAttributes, else from the request's
  X-Amzn-Trace-Id header, and is stored with the message (vqs.broker.queue).
* ReceiveMessage is the one async action: a long poll waits on the event
  loop (ctx.long_poll_receive), never holding a worker thread.
* MessageGroupId is passed to the broker on both queue types: a standard
  queue stores and returns it and uses it as the tenant of a fair queue
  (vqs.broker.queue.fair); FIFO rules (group, dedup) are the broker's.
"""

from __future__ import annotations

import re

from ...broker.queue.validate import MAX_BATCH_BYTES, check_fifo_batch
from .errors import SQSError
from .md5 import md5_hex, md5_of_attributes
from .params import (
    _SYSTEM_ATTRS,
    ActionBase,
    Req,
    _decode_message_attributes,
    _encode_message_attributes,
    _int,
    _select_attributes,
    _str,
    _str_list,
    _system_attributes,
)

_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")


def _entry_size(e: dict) -> int:
    """A send batch entry's size as SQS counts it toward the batch's 1 MiB: the
    body and each message attribute's name, type and value (UTF-8 bytes; a
    binary value as sent, base64 decoded). Malformed parts count as 0 (the
    entry then fails on its own)."""
    body = e.get("MessageBody")
    n = len(body.encode("utf-8")) if isinstance(body, str) else 0
    attrs = e.get("MessageAttributes")
    if isinstance(attrs, dict):
        for name, a in attrs.items():
            if not isinstance(a, dict):
                continue
            n += len(str(name).encode("utf-8")) + len(str(a.get("DataType", "")).encode("utf-8"))
            v = a.get("StringValue")
            if isinstance(v, str):
                n += len(v.encode("utf-8"))
            b = a.get("BinaryValue")
            if isinstance(b, str):
                n += len(b) * 3 // 4 - b.endswith("=") - b.endswith("==")
    return n


def _batch_result(ok: list, failed: list) -> dict:
    """A batch action's result: AWS leaves out an empty ``Successful`` or ``Failed``."""
    out = {}
    if ok:
        out["Successful"] = ok
    if failed:
        out["Failed"] = failed
    return out


class MessageActions(ActionBase):
    def _send_args(self, p: dict, q, req: Req):
        body = p.get("MessageBody")
        if body is None or body == "":
            raise SQSError("MissingParameter", "The request must contain the parameter MessageBody.")
        if not isinstance(body, str):
            raise SQSError("InvalidParameterValue", "MessageBody must be a string.")
        delay = _int(p, "DelaySeconds", 0, 900, "DelaySeconds must be >= 0 and <= 900")
        attrs = _decode_message_attributes(p.get("MessageAttributes"))
        sys_attrs, sys_md5 = _system_attributes(p.get("MessageSystemAttributes"))
        # AWSTraceHeader: the system attribute, else the request's X-Amzn-Trace-Id header
        trace = sys_attrs["AWSTraceHeader"]["StringValue"] if sys_attrs else req.trace_id
        group = _str(p, "MessageGroupId")
        dedup = _str(p, "MessageDeduplicationId")
        return body, delay, attrs or None, group, dedup, sys_md5, trace

    def a_SendMessage(self, p: dict, req: Req):
        q = self._queue(p, req)
        body, delay, attrs, group, dedup, sys_md5, trace = self._send_args(p, q, req)
        r = q.send_message(body, delay_seconds=delay, attributes=attrs, group_id=group, dedup_id=dedup,
                           trace_header=trace)
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

    def _entries(self, p: dict, action: str) -> list:
        """A batch request's entries, checked as a whole (AWS's order: none, too many, ids)."""
        entries = p.get("Entries")
        if not entries:
            raise SQSError("EmptyBatchRequest", f"There should be at least one {action}RequestEntry in the request.")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise SQSError("InvalidParameterValue", "Entries must be a list of structures.")
        if len(entries) > 10:
            raise SQSError("TooManyEntriesInBatchRequest", f"Maximum number of entries per request are 10. You have sent {len(entries)}.")
        seen = set()
        for e in entries:
            i = e.get("Id")
            if not isinstance(i, str) or not _ENTRY_ID.fullmatch(i):
                raise SQSError("InvalidBatchEntryId")
            if i in seen:  # the first id that repeats ("Id id_2 repeated." for id_1, id_2, id_2, id_1)
                raise SQSError("BatchEntryIdsNotDistinct", f"Id {i} repeated.")
            seen.add(i)
        return entries

    def a_SendMessageBatch(self, p: dict, req: Req):
        q = self._queue(p, req)
        entries = self._entries(p, "SendMessageBatch")
        total = sum(map(_entry_size, entries))
        if total > MAX_BATCH_BYTES:
            raise SQSError("BatchRequestTooLong", f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. "
                                                  f"You have sent {total} bytes.")
        if q.config.fifo:
            check_fifo_batch(q.config, [(e.get("MessageGroupId"), e.get("MessageDeduplicationId")) for e in entries])
        failed, todo, extra = [], [], {}
        for e in entries:
            try:
                body, delay, attrs, group, dedup, sys_md5, trace = self._send_args(e, q, req)
                todo.append({"id": e["Id"], "body": body, "delay_seconds": delay, "attributes": attrs,
                             "group_id": group, "dedup_id": dedup, "trace_header": trace})
                extra[e["Id"]] = (md5_hex(body), md5_of_attributes(attrs) if attrs else None, sys_md5)
            except SQSError as err:
                failed.append({"Id": e["Id"], "SenderFault": err.fault == "Sender", "Code": err.name,
                               "Message": err.message})
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
        return _batch_result(ok, failed)

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
        attempt = p.get("ReceiveRequestAttemptId")  # (FIFO: a retry returns the same messages; checked there)
        if attempt is not None and not isinstance(attempt, str):
            raise SQSError("InvalidParameterValue", "Value for parameter ReceiveRequestAttemptId is invalid.")
        if wait is None:
            wait = q.config.receive_wait_seconds
        if wait > 0:
            msgs = await self.ctx.long_poll_receive(q, n, wait, vis, attempt)
        elif self.ctx.inline_for(q):
            msgs = q.receive(n, 0, vis, attempt)
        else:
            msgs = await self.ctx.run(q.receive, n, 0, vis, attempt)
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
        entries = self._entries(p, "DeleteMessageBatch")
        res = q.delete_batch_entries([{"id": e["Id"], "receipt_handle": e.get("ReceiptHandle")} for e in entries])
        return _batch_result([{"Id": s["id"]} for s in res["successful"]],
                             [{"Id": f["id"], "SenderFault": bool(f.get("sender_fault", True)), "Code": f["code"],
                               "Message": f.get("message", "")} for f in res["failed"]])

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
        entries = self._entries(p, "ChangeMessageVisibilityBatch")
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
        return _batch_result(ok, failed)
