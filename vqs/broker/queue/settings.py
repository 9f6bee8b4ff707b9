"""A queue's configuration on disk and as SQS attributes and tags.

Files (``DATA/queues/{name}/``): ``queue.meta`` (the VQS v1 header page,
vqs.broker.queue.meta: the SQS limits, tags and counters) and ``queue.json``
(the rest of the configuration, creation/modification times, the
receipt-handle secret and the message-id prefix). Each is replaced atomically;
the secret and id prefix never change after creation (receipt handles and
message ids stay valid across restarts).

``QueueSettings`` is the part of ``Queue`` that reads and changes them
(GetQueueAttributes, SetQueueAttributes, tags); a change is applied under the
queue lock and written before the call returns.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable

from ...errors import (
    CorruptRecordError,
    DiskFullError,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
)
from ...storage.durable_file import atomic_write
from . import meta as queue_meta
from .config import (
    DEFAULT_ARN_PREFIX,
    READ_ONLY_SQS,
    SQS_TO_PY,
    STORAGE_SETTINGS,
    QueueConfig,
    check_fifo_change,
    normalize,
    redrive_allows,
    validate_tags,
)


class StoredQueue:
    """What ``queue.json`` + ``queue.meta`` hold."""

    __slots__ = ("config", "created_ms", "modified_ms", "secret", "id_prefix", "id_base", "fair",
                 "dedup_scope", "dedup_from")

    def __init__(self, config: QueueConfig, created_ms: int, modified_ms: int, secret: bytes,
                 id_prefix: str, id_base: int = 0, fair: bool = False, dedup_scope: str | None = None,
                 dedup_from: int = 0):
        self.config = config
        self.created_ms = created_ms
        self.modified_ms = modified_ms
        self.secret = secret
        self.id_prefix = id_prefix
        self.id_base = id_base
        self.fair = fair  # a standard queue that was sent a message group id (fair.py)
        # FIFO: the deduplication scope in force (SQS keeps the one the queue was
        # created with; a later DeduplicationScope change is reported, not applied)
        # and the offset the window starts at (a purge clears the window).
        self.dedup_scope = dedup_scope or config.deduplication_scope
        self.dedup_from = dedup_from


def new_identity() -> tuple[bytes, str, int]:
    """A new queue's receipt-handle secret, message-id prefix (UUID v4 shaped) and
    message-id base.

    A message id is ``{id_prefix}{offset + id_base:012x}``. The base is random in
    [2**46, 2**47) with its low byte zero: ids look random, like SQS's, rather than
    counting up from ``...000000000000``; the low byte still equals the offset's
    (the 256-id block cache in ``standard.py`` relies on it); and 2**47 offsets
    fit before the 12 hex digits overflow. Queues made before the base existed
    have base 0 (their ids are unchanged)."""
    r = secrets.token_bytes(45)
    h = r[32:40].hex()
    id_prefix = f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[r[31] & 3]}{r[30]:02x}{h[0]}-"
    id_base = ((int.from_bytes(r[40:45], "big") >> 2) | (1 << 38)) << 8
    return r[:32], id_prefix, id_base


def write_files(path: str, *, name: str, config: QueueConfig, created_ms: int,
                modified_ms: int, secret: bytes, id_prefix: str, id_base: int = 0,
                counters: tuple[int, int, int] = (0, 0, 0), fair: bool = False,
                dedup_scope: str | None = None, dedup_from: int = 0) -> None:
    """Write queue.json and queue.meta (each replaced atomically). ``fair``: the
    queue was sent a message group id (written only when true)."""
    meta = queue_meta.QueueMeta(
        item_count=counters[0], next_read_offset=counters[1], next_write_offset=counters[2],
        max_message_size=config.max_message_bytes, retention_period=config.retention_seconds,
        receive_wait_seconds=config.receive_wait_seconds, delay_seconds=config.delay_seconds,
        visibility_timeout=config.visibility_timeout, tags=dict(config.tags),
    )
    page, overflow = queue_meta.encode(meta)
    cfgd = config.to_json()
    for k in ("visibility_timeout", "delay_seconds", "receive_wait_seconds",
              "retention_seconds", "max_message_bytes", "tags"):
        del cfgd[k]  # the header page is their home
    info = {
        "version": 1, "name": name, "created_ms": created_ms, "modified_ms": modified_ms,
        "secret": secret.hex(), "id_prefix": id_prefix, "id_base": id_base,
        "config": cfgd,
        "tags_overflow": overflow,
    }
    if fair:
        info["fair"] = True
    if config.fifo:
        info["dedup_scope"] = dedup_scope or config.deduplication_scope
        info["dedup_from"] = dedup_from
    atomic_write(os.path.join(path, "queue.json"), json.dumps(info, indent=1).encode())
    atomic_write(os.path.join(path, "queue.meta"), page)


def read_files(path: str) -> StoredQueue:
    """Read queue.json and queue.meta (damaged: CorruptRecordError naming the file)."""
    p = os.path.join(path, "queue.json")
    with open(p, "rb") as f:
        try:
            info = json.loads(f.read())
        except ValueError as e:  # (a failed disk's leftovers: not JSON, not UTF-8)
            raise CorruptRecordError(f"{p}: not a queue settings file ({e})", path=p) from e
    with open(os.path.join(path, "queue.meta"), "rb") as f:
        meta = queue_meta.decode(f.read(), os.path.join(path, "queue.meta"))
    cfgd = dict(info["config"])
    cfgd.update(
        visibility_timeout=meta.visibility_timeout,
        delay_seconds=meta.delay_seconds,
        receive_wait_seconds=meta.receive_wait_seconds,
        retention_seconds=meta.retention_period,
        max_message_bytes=meta.max_message_size,
        tags={**meta.tags, **info.get("tags_overflow", {})},
    )
    created = info["created_ms"]
    return StoredQueue(QueueConfig.from_json(cfgd), created, info.get("modified_ms", created),
                       bytes.fromhex(info["secret"]), info["id_prefix"],
                       info.get("id_base", 0), bool(info.get("fair")), info.get("dedup_scope"),
                       info.get("dedup_from", 0))


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
        """SetQueueAttributes: Python or SQS names (module queue_config)."""
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

