"""SQS's batch actions with per-entry results: SendMessageBatch,
DeleteMessageBatch, ChangeMessageVisibilityBatch.

Functions over a ``Queue`` (its ``*_batch_entries`` methods call them; they
hold no state of their own): a whole-request problem (no entries, more than 10, repeated or malformed entry
ids; a send batch over 1 MiB; on a FIFO queue, an entry without a group id,
or without a deduplication id when the queue does not deduplicate by
content) raises and nothing is done; otherwise each entry
succeeds or fails on its own, and the result says which, SQS-shaped
(``{"successful": [...], "failed": [{"id", "code", "sender_fault", "message"}]}``).
Entries are applied in order, under one hold of the queue lock.
"""

from __future__ import annotations

from ...errors import InvalidParameterValue, LogClosedError, QueueError, QueueMessageTooLarge
from .lease_records import DELETE_ROOM
from .validate import (
    check_batch,
    check_batch_size,
    check_entry_ids,
    check_fifo_batch,
    check_visibility,
    failure,
    prepare_entry,
)


def send_entries(q, entries: list[dict]) -> dict:
    entries = list(entries)
    check_batch_size(len(entries))
    check_entry_ids([e.get("id") if isinstance(e, dict) else None for e in entries])
    preps, failed = [], []
    cfg = q.config
    if q._fifo:
        check_fifo_batch(cfg, [(e.get("group_id"), e.get("dedup_id")) if isinstance(e, dict) else (None, None)
                               for e in entries])
    for e in entries:
        try:
            preps.append(prepare_entry(cfg, e))
        except QueueMessageTooLarge:  # SQS words it so in a batch entry
            failed.append({"id": e["id"], "code": InvalidParameterValue.code, "sender_fault": True,
                           "message": "One or more parameters cannot be validated. Reason: Message must be "
                                      f"shorter than {cfg.max_message_bytes} bytes."})
        except QueueError as err:
            failed.append(failure(e["id"], err))
    check_batch(preps)
    ok = []
    if preps:
        for p, (mid, off) in zip(preps, q._send_prepared(preps)):
            ok.append({"id": p.entry_id, "message_id": mid,
                       "sequence_number": f"{off:020d}" if q._fifo else None})
    return {"successful": ok, "failed": failed}


def delete_entries(q, entries: list[dict]) -> dict:
    todo, failed = _handle_entries(q, entries)
    ok = []
    with q._lock:
        if q._closed:
            raise LogClosedError(f"queue {q.name} is closed")
        q._state.room_for(DELETE_ROOM * len(todo), False)  # (the floor is for deletes: lease_state.py)
        for e, o, nonce in todo:
            err = q._delete_one_locked(o, nonce, e.get("receipt_handle"))
            if err is None:
                ok.append({"id": e["id"]})
            else:
                failed.append(failure(e["id"], err))
        if q._dels:
            q._flush_dels_locked()
    if q._sync:
        q._state.flush()
    q._maint.maybe_reclaim()
    return {"successful": ok, "failed": failed}


def change_visibility_entries(q, entries: list[dict]) -> dict:
    todo, failed = _handle_entries(q, entries, lambda e: check_visibility(e.get("visibility_timeout")))
    ok = []
    with q._lock:
        if q._closed:
            raise LogClosedError(f"queue {q.name} is closed")
        now = q._now_ms()
        for e, o, nonce in todo:
            err = q._change_vis_locked(o, nonce, e["visibility_timeout"], now, e.get("receipt_handle"))
            if err is None:
                ok.append({"id": e["id"]})
            else:
                failed.append(failure(e["id"], err))
    if q._sync:
        q._state.flush()
    return {"successful": ok, "failed": failed}


def _handle_entries(q, entries: list[dict], check=None) -> tuple[list, list]:
    """The receipt-handle entries of a Delete/ChangeMessageVisibility batch: the batch's
    size and ids are checked (raising), then each entry's handle and ``check(entry)``
    (failing that entry alone). Returns ([(entry, offset, nonce)], [failure])."""
    entries = list(entries)
    check_batch_size(len(entries))
    check_entry_ids([e.get("id") for e in entries])
    todo, failed = [], []
    for e in entries:
        try:
            o, nonce = q._leases.decode(e.get("receipt_handle"))
            if check is not None:
                check(e)
            todo.append((e, o, nonce))
        except QueueError as err:
            failed.append(failure(e["id"], err))
    return todo, failed
