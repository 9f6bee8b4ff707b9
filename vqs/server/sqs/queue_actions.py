"""SQS queue administration actions, as a mixin of SQSService.

CreateQueue, GetQueueUrl, ListQueues, DeleteQueue, Get/SetQueueAttributes,
PurgeQueue, Tag/Untag/ListQueueTags, ListDeadLetterSourceQueues,
Add/RemovePermission and the message-move-task actions.

Invariants:
* Each ``a_<Action>(params, req)`` checks SQS's request rules and returns the
  JSON-shape result (None for an empty one); the queue semantics (attribute
  validation, idempotent create, redrive) are the broker's, whose errors the
  service maps (errors.py).
* Pagination tokens are the url-safe base64 of the last name returned; a
  page holds the names sorted and strictly after the token.
* A queue's permissions are its Policy attribute (a JSON document): labels
  are statement Sids, unique within it; removing the last one clears Policy.
* Move tasks started here are recorded in ``self._tasks`` so the service
  stops them at close (they resume when the server starts again); the tasks
  and their rules are the broker's (vqs.broker.queue.move_tasks).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time

from ...errors import InvalidName, QueueDoesNotExist
from .errors import SQSError
from .params import ActionBase, Req, _int, _str, _str_list, _str_map

_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
_FIFO_NAME = re.compile(r"[A-Za-z0-9_-]{1,75}\.fifo")
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
_TAG_KEYS_MAX = 50
_ACTIONS_MAX = 7  # AddPermission: actions per statement


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



class QueueActions(ActionBase):
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
        if not fifo:  # SQS: a standard queue is made without FifoQueue and the FIFO-only attributes
            for a in ("FifoQueue", "ContentBasedDeduplication"):
                if a in attrs:
                    raise SQSError("InvalidAttributeName", f"Unknown Attribute {a}.")
            for a in ("DeduplicationScope", "FifoThroughputLimit"):
                if a in attrs:
                    raise SQSError("InvalidAttributeName",
                                   f"You can specify the {a} only when FifoQueue is set to true.")
        kw = dict(attrs)
        if tags:
            kw["tags"] = tags
        self._check_recently_deleted(name)
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
        page, out = _page(p, sorted(self.broker.queues(prefix or None)), default_limit=1000)
        if page:
            out["QueueUrls"] = [req.url(n) for n in page]
        return out

    def a_DeleteQueue(self, p: dict, req: Req):
        name = self._queue_name(p, req)
        try:
            self.broker.delete_queue(name)
        except (QueueDoesNotExist, InvalidName):
            raise SQSError("QueueDoesNotExist") from None
        if self.settings.sqs_recreate_wait_s > 0:
            self._deleted_at[name] = time.monotonic()
        return None

    def _check_recently_deleted(self, name: str) -> None:
        """SQS refuses to create a queue under a name deleted less than 60 s ago
        (setting ``sqs_recreate_wait_s``; remembered by this server process only)."""
        deleted = self._deleted_at
        if not deleted:
            return
        wait = self.settings.sqs_recreate_wait_s
        now = time.monotonic()
        for k in [k for k, t in deleted.items() if now - t >= wait]:
            del deleted[k]
        if name in deleted:
            raise SQSError("QueueDeletedRecently")

    def a_GetQueueAttributes(self, p: dict, req: Req):
        q = self._queue(p, req)
        names = _str_list(p, "AttributeNames")
        if not names:
            return {}
        attrs = q.get_attributes(names, arn_prefix=req.arn_prefix)
        return {"Attributes": attrs} if attrs else {}

    def a_SetQueueAttributes(self, p: dict, req: Req):
        q = self._queue(p, req)
        attrs = dict(_str_map(p, "Attributes"))
        if q.config.fifo and "FifoQueue" in attrs:  # SQS: FifoQueue=true on a FIFO queue changes nothing
            if attrs.pop("FifoQueue").lower() != "true":
                raise SQSError("InvalidAttributeValue", "Invalid value for the parameter FifoQueue. "
                                                        "Reason: Modifying queue type is not supported.")
        if attrs:
            q.set_attributes(attrs)
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
        page, out = _page(p, sorted(q.dead_letter_source_queues()), default_limit=None)
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
        return {"Version": "2008-10-17", "Id": "", "Statement": []}

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
        if len(actions) > _ACTIONS_MAX:
            raise SQSError("OverLimit", f"{len(actions)} Actions were found, maximum allowed is {_ACTIONS_MAX}.")
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
                           f"Value {label} for parameter Label is invalid. Reason: can't find label.")
        doc["Statement"] = stmts
        q.set_attributes({"Policy": json.dumps(doc, separators=(",", ":")) if stmts else ""})
        return None

    # ======================================================== message move tasks
    # (the tasks are the broker's: vqs.broker.queue.move_tasks has the rules)
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


def _page(p: dict, names: list, *, default_limit: int | None) -> tuple[list, dict]:
    """One page of sorted queue names (MaxResults 1-1000, NextToken = the last name
    of the previous page, base64), and the output holding the next token if any."""
    limit = _int(p, "MaxResults", 1, 1000)
    token = _str(p, "NextToken")
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise SQSError("InvalidParameterValue", "Invalid NextToken value.") from None
        names = [n for n in names if n > after]
    out: dict = {}
    if limit is None:
        return (names if default_limit is None else names[:default_limit]), out
    page = names[:limit]
    if len(names) > limit:
        out["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode()
    return page, out
