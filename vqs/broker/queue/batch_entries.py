"""SQS's batch actions with per-entry results: SendMessageBatch,
DeleteMessageBatch, ChangeMessageVisibilityBatch.

``BatchEntries`` is the part of ``Queue`` (mixed into it) that runs them: a
whole-request problem (no entries, more than 10, repeated or malformed entry
ids; a send batch over 1 MiB; on a FIFO queue, an entry without a group id,
or without a deduplication id when the queue does not deduplicate by
content) raises and nothing is done; otherwise each entry
succeeds or fails on its own, and the result says which, SQS-shaped
(``{"successful": [...], "failed": [{"id", "code", "sender_fault", "message"}]}``).
Entries are applied in order, under one hold of the queue lock.
"""

from __future__ import annotations

from ...errors import InvalidParameterValue, LogClosedError, QueueError, QueueMessageTooLarge
from .validate import (
    check_batch,
    check_batch_size,
    check_entry_ids,
    check_fifo_batch,
    check_visibility,
    failure,
    prepare_entry,
)


class BatchEntries:
    """The ``*_batch_entries`` methods of a ``Queue`` (see module doc)."""

    def send_batch_entries(self, entries: list[dict]) -> dict:
        """SQS SendMessageBatch: each entry a dict with ``id`` and ``body`` (and the
        optional fields of ``send_batch``). Returns ``{"successful": [{"id",
        "message_id", "sequence_number"}], "failed": [{"id", "code",
        "sender_fault", "message"}]}``. Whole-request problems (no entries, more
        than 10, repeated or invalid ids, over 1 MiB) raise."""
        entries = list(entries)
        check_batch_size(len(entries))
        check_entry_ids([e.get("id") if isinstance(e, dict) else None for e in entries])
        preps, failed = [], []
        cfg = self.config
        if self._fifo:
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
            for p, (mid, off) in zip(preps, self._send_prepared(preps)):
                ok.append({"id": p.entry_id, "message_id": mid,
                           "sequence_number": f"{off:020d}" if self._fifo else None})
        return {"successful": ok, "failed": failed}

    def delete_batch_entries(self, entries: list[dict]) -> dict:
        """SQS DeleteMessageBatch: entries ``{"id", "receipt_handle"}``; returns
        ``{"successful": [{"id"}], "failed": [{"id", "code", "sender_fault", "message"}]}``."""
        todo, failed = self._handle_entries(entries)
        ok = []
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            self._state.room_for(16 * len(todo), False)  # (the floor is for deletes: lease_state.py)
            for e, o, nonce in todo:
                err = self._delete_one_locked(o, nonce, e.get("receipt_handle"))
                if err is None:
                    ok.append({"id": e["id"]})
                else:
                    failed.append(failure(e["id"], err))
            if self._dels:
                self._flush_dels_locked()
        if self._sync:
            self._state.flush()
        self._maybe_reclaim()
        return {"successful": ok, "failed": failed}

    def change_visibility_batch_entries(self, entries: list[dict]) -> dict:
        """SQS ChangeMessageVisibilityBatch: entries ``{"id", "receipt_handle",
        "visibility_timeout"}``; returns successful/failed like ``delete_batch_entries``."""
        todo, failed = self._handle_entries(entries, lambda e: check_visibility(e.get("visibility_timeout")))
        ok = []
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            now = self._now_ms()
            for e, o, nonce in todo:
                err = self._change_vis_locked(o, nonce, e["visibility_timeout"], now,
                                              e.get("receipt_handle"))
                if err is None:
                    ok.append({"id": e["id"]})
                else:
                    failed.append(failure(e["id"], err))
        if self._sync:
            self._state.flush()
        return {"successful": ok, "failed": failed}

    def _handle_entries(self, entries: list[dict], check=None) -> tuple[list, list]:
        """The receipt-handle entries of a Delete/ChangeMessageVisibility batch: the batch's
        size and ids are checked (raising), then each entry's handle and ``check(entry)``
        (failing that entry alone). Returns ([(entry, offset, nonce)], [failure])."""
        entries = list(entries)
        check_batch_size(len(entries))
        check_entry_ids([e.get("id") for e in entries])
        todo, failed = [], []
        for e in entries:
            try:
                o, nonce = self._leases.decode(e.get("receipt_handle"))
                if check is not None:
                    check(e)
                todo.append((e, o, nonce))
            except QueueError as err:
                failed.append(failure(e["id"], err))
        return todo, failed
