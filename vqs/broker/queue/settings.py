"""A queue's settings as they stand, owned by one part of the queue.

``QueueSettings`` holds a queue's configuration (config.py: the attributes,
their limits), the identity made when the queue was created (the
receipt-handle secret, the message-id prefix and base: they never change, so
receipt handles and message ids stay valid across restarts), its creation and
modification times, a FIFO queue's deduplication scope and the offset its
window's rebuild starts at, and writes them (config_files.py).

The ``Queue`` facade owns one (``Queue._settings``) and answers
GetQueueAttributes, SetQueueAttributes and the tag actions through it; its hot
paths read their own copies of the few values they need, which
``Queue._configured`` refreshes after each change.

Invariants: a change is checked in full here before anything changes (a
refused change changes nothing); it is applied under the queue lock and
written before the call returns; refused for space (DiskFullError), the old
settings stay, in memory as on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...errors import (
    DiskFullError,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
)
from .config import (
    READ_ONLY_SQS,
    SQS_TO_PY,
    STORAGE_SETTINGS,
    QueueConfig,
    check_fifo_change,
    normalize,
    redrive_allows,
    validate_tags,
)
from .config_files import StoredQueue, write_files


class QueueSettings:
    """One queue's settings and their files (see module doc)."""

    __slots__ = ("config", "created_ms", "dedup_from", "dedup_scope", "id_base", "id_prefix",
                 "modified_ms", "name", "path", "secret")

    def __init__(self, path: str, name: str, stored: StoredQueue):
        self.path = path
        self.name = name
        self.config = stored.config
        self.created_ms = stored.created_ms
        self.modified_ms = stored.modified_ms
        self.secret = stored.secret
        self.id_prefix, self.id_base = stored.id_prefix, stored.id_base
        self.dedup_scope = stored.dedup_scope
        self.dedup_from = stored.dedup_from

    def save(self, counters: tuple[int, int, int], fair: bool) -> None:
        """Write ``queue.json`` and ``queue.meta`` (each replaced atomically);
        ``counters`` (backlog, low, end) are the page's checkpoint."""
        write_files(
            self.path, name=self.name, config=self.config, created_ms=self.created_ms,
            modified_ms=self.modified_ms, secret=self.secret, id_prefix=self.id_prefix,
            id_base=self.id_base, counters=counters, fair=fair,
            dedup_scope=self.dedup_scope, dedup_from=self.dedup_from,
        )

    # ------------------------------------------------------------ attributes

    def attributes(self, counts: dict, names: Iterable[str] | None, arn_prefix: str) -> dict[str, str]:
        """GetQueueAttributes from the queue's ``counts``: SQS attribute names ->
        values formatted as SQS does (strings); ``names`` None or containing
        "All": every attribute."""
        cfg = self.config
        out = {
            "QueueArn": f"{arn_prefix}:{self.name}",
            "ApproximateNumberOfMessages": str(counts["visible"]),
            "ApproximateNumberOfMessagesNotVisible": str(counts["in_flight"]),
            "ApproximateNumberOfMessagesDelayed": str(counts["delayed"]),
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

    def attribute_changes(self, attrs: dict) -> dict:
        """SetQueueAttributes' changes (Python or SQS names: config.py), normalized."""
        changes = normalize(attrs, creating=False)
        check_fifo_change(changes, self.config.fifo)
        changes.pop("fifo", None)
        if "tags" in changes:
            raise InvalidAttributeValue("use tag()/untag() to change tags")
        return changes

    def tagged(self, tags: dict[str, str]) -> dict:
        new = {**self.config.tags, **tags}
        validate_tags(tags)
        validate_tags(new)
        return {"tags": new}

    def untagged(self, keys: Iterable[str]) -> dict:
        new = dict(self.config.tags)
        for k in keys:
            new.pop(k, None)
        return {"tags": new}

    def checked(self, changes: dict, resolver: Callable[[str], object]) -> QueueConfig | None:
        """The configuration ``changes`` make, checked in full (None: no change);
        ``resolver`` names a dead-letter target's queue."""
        if not changes:
            return None
        cfg = self.config
        if "dead_letter_queue" in changes and changes["dead_letter_queue"] is not None:
            self._check_dlq(changes["dead_letter_queue"], cfg.fifo, resolver)
        for k in STORAGE_SETTINGS:
            if k in changes and changes[k] != getattr(cfg, k):
                raise InvalidAttributeName(f"{k} can only be set when the queue is created")
        if changes.get("kms_master_key_id") and "sqs_managed_sse_enabled" not in changes:
            changes = {**changes, "sqs_managed_sse_enabled": False}  # SSE-KMS replaces SSE-SQS
        return cfg.updated(changes)

    def replace(self, new: QueueConfig, now_ms: int, save: Callable[[], None]) -> None:
        """Make ``new`` the configuration and ``save`` it (under the queue lock).
        Refused for space: the old one stays, in memory as on disk (queue.json may
        have been replaced before queue.meta failed: it is put back, in the page
        the replaced file gave back)."""
        old = (self.config, self.modified_ms)
        self.config = new
        self.modified_ms = now_ms
        try:
            save()
        except DiskFullError:
            self.config, self.modified_ms = old
            try:
                save()
            except DiskFullError:
                pass
            raise

    def _check_dlq(self, dlq_name: str, fifo: bool, resolver: Callable[[str], object]) -> None:
        dlq = resolver(dlq_name)
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

