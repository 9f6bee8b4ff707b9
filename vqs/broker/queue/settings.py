"""A queue's attributes and tags as a ``Queue`` operation (GetQueueAttributes,
SetQueueAttributes, TagQueue, UntagQueue).

``QueueSettings`` is the part of ``Queue`` that reads and changes its
configuration (what the values are and their limits: config.py; where they are
stored: config_files.py). A change is applied under the queue lock and written
before the call returns.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import (
    DiskFullError,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
)
from .config import (
    DEFAULT_ARN_PREFIX,
    READ_ONLY_SQS,
    SQS_TO_PY,
    STORAGE_SETTINGS,
    check_fifo_change,
    normalize,
    redrive_allows,
    validate_tags,
)
from .config_files import write_files


class QueueSettings:
    """GetQueueAttributes / SetQueueAttributes / tags of a ``Queue`` (mixed into it)."""

    def _apply_config_cache(self) -> None:
        cfg = self.config
        self._ret_ms = cfg.retention_seconds * 1000
        self._vis_default = cfg.visibility_timeout
        self._delay_ms = cfg.delay_seconds * 1000
        self._max_bytes = cfg.max_message_bytes

    def _save_files(self) -> None:
        self._push_locked()
        write_files(
            self.path, name=self.name, config=self.config, created_ms=self.created_ms,
            modified_ms=self.modified_ms, secret=self._secret, id_prefix=self._id_prefix,
            id_base=self._id_base,
            counters=(self._backlog_locked(), self._low, self._log.end_offset),
            fair=self._fair is not None,
            dedup_scope=self._dedup_scope, dedup_from=self._dedup_from,
        )

    def counts(self) -> dict:
        """{"visible", "in_flight", "delayed"}: SQS's approximate counts."""
        with self._lock:
            now = self._now_ms()
            lt = self._leases
            if lt.timers and lt.timers[0][0] <= now:
                self._fire_timers(now)
            moving = lt.moving_count() if len(lt.live) < 100_000 else 0
            visible = self._visible_locked(moving)
            return {"visible": max(0, visible), "in_flight": lt.n_inflight + moving,
                    "delayed": lt.n_delayed}

    def get_attributes(self, names: Iterable[str] | None = None, *,
                       arn_prefix: str = DEFAULT_ARN_PREFIX) -> dict[str, str]:
        """GetQueueAttributes: SQS attribute names -> values formatted as SQS does
        (strings). ``names`` None or containing "All" returns every attribute."""
        c = self.counts()
        cfg = self.config
        out = {
            "QueueArn": f"{arn_prefix}:{self.name}",
            "ApproximateNumberOfMessages": str(c["visible"]),
            "ApproximateNumberOfMessagesNotVisible": str(c["in_flight"]),
            "ApproximateNumberOfMessagesDelayed": str(c["delayed"]),
            "CreatedTimestamp": str(self.created_ms // 1000),
            "LastModifiedTimestamp": str(self.modified_ms // 1000),
        }
        out.update(cfg.sqs_attributes(arn_prefix))
        if names is None:
            return out
        names = list(names)
        if "All" in names:
            return out
        valid = set(READ_ONLY_SQS) | set(SQS_TO_PY) | {"RedrivePolicy"}
        res = {}
        for nm in names:
            if nm not in valid:
                raise InvalidAttributeName(f"Unknown Attribute {nm}.")
            if nm in out:
                res[nm] = out[nm]
        return res

    def set_attributes(self, attrs: dict | None = None, **kw) -> None:
        """SetQueueAttributes: Python or SQS names (config.py)."""
        changes = normalize({**(attrs or {}), **kw}, creating=False)
        check_fifo_change(changes, self.config.fifo)
        changes.pop("fifo", None)
        if "tags" in changes:
            raise InvalidAttributeValue("use tag()/untag() to change tags")
        self._apply_changes(changes)

    def _apply_changes(self, changes: dict) -> None:
        if not changes:
            return
        cfg = self.config
        if "dead_letter_queue" in changes and changes["dead_letter_queue"] is not None:
            self._check_dlq(changes["dead_letter_queue"], cfg.fifo)
        for k in STORAGE_SETTINGS:
            if k in changes and changes[k] != getattr(cfg, k):
                raise InvalidAttributeName(f"{k} can only be set when the queue is created")
        if changes.get("kms_master_key_id") and "sqs_managed_sse_enabled" not in changes:
            changes = {**changes, "sqs_managed_sse_enabled": False}  # SSE-KMS replaces SSE-SQS
        new = cfg.updated(changes)
        with self._lock:
            old = (self.config, self.modified_ms)
            self.config = new
            self.modified_ms = self._now_ms()
            try:
                self._save_files()
            except DiskFullError:
                # Refused (a full disk): the queue keeps its settings, in memory as on disk
                # (queue.json may have been replaced before queue.meta failed: put it back,
                # in the page the replaced file gave back).
                self.config, self.modified_ms = old
                try:
                    self._save_files()
                except DiskFullError:
                    pass
                raise
            self._apply_config_cache()
            if self._waiting:
                self._cond.notify_all()

    def _check_dlq(self, dlq_name: str, fifo: bool) -> None:
        dlq = self._resolver(dlq_name)
        if dlq is None:
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target does "
                "not exist."
            )
        if dlq.config.fifo != fifo:
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target must "
                "be of the same type (standard or FIFO) as the source."
            )
        if not redrive_allows(dlq.config.redrive_allow_policy, self.name):
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: The dead-letter queue's "
                "RedriveAllowPolicy does not allow this source queue."
            )

    # ---------------------------------------------------------------- tags

    def tags(self) -> dict[str, str]:
        return dict(self.config.tags)

    def tag(self, tags: dict[str, str]) -> None:
        new = {**self.config.tags, **tags}
        validate_tags(tags)
        validate_tags(new)
        self._apply_changes({"tags": new})

    def untag(self, keys: Iterable[str]) -> None:
        new = dict(self.config.tags)
        for k in keys:
            new.pop(k, None)
        self._apply_changes({"tags": new})

