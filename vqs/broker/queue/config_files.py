"""A queue's configuration files: ``queue.meta`` and ``queue.json`` (docs/FORMAT.md).

Both live in ``DATA/queues/{name}/`` and each is replaced atomically.
``queue.meta`` is the VQS v1 header page (below): the five SQS limits, the
tags and the counters. ``queue.json`` holds the rest of the configuration
(config.py's ``QueueConfig`` less the fields of the page), creation and
modification times, the receipt-handle secret and the message-id prefix and
base, plus a fair queue's flag and a FIFO queue's deduplication scope and
start. The secret and the id prefix and base never change after creation
(receipt handles and message ids stay valid across restarts).

``queue.meta``: one 16 KiB page, little-endian::

    0   u32  magic 0x01535156 ("VQS" + version 1)
    4   u32  capacity left          (0xFFFFFFFF: unbounded, SQS queues have no capacity)
    8   u32  item count             (messages not yet deleted, checkpoint)
    12  u32  next read offset       (lowest offset not yet deleted, checkpoint)
    16  u32  next write offset      (the message log's end offset, checkpoint)
    20  u32  max message size       (MaximumMessageSize, bytes)
    24  u32  retention period       (MessageRetentionPeriod, seconds)
    28  u16  receive wait seconds   (ReceiveMessageWaitTimeSeconds)
    30  u16  delay seconds          (DelaySeconds)
    32  u16  visibility timeout     (VisibilityTimeout, seconds)
    34  tags: UTF-8 name NUL value NUL, repeated; an empty name (a lone NUL) ends
        the list; zero bytes fill the rest of the page.

The five configuration fields here are authoritative (queue.json does not hold
them). The counters are a checkpoint written at close and compaction; the logs
are the truth (counters saturate at 0xFFFFFFFF). Tags that do not fit the page
are kept in queue.json (``tags_overflow``). The file is replaced atomically.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
from dataclasses import dataclass, field

from ...errors import CorruptRecordError
from ...storage import atomic_write
from .config import QueueConfig

MAGIC = 0x01535156
PAGE_SIZE = 16384
HEADER = struct.Struct("<IIIIIIIHHH")
HEADER_SIZE = HEADER.size  # 34
TAGS_SPACE = PAGE_SIZE - HEADER_SIZE - 1  # room for name/value pairs plus the end marker
U32_MAX = 0xFFFFFFFF


def _sat32(v: int) -> int:
    return U32_MAX if v > U32_MAX else max(0, v)


@dataclass
class QueueMeta:
    capacity_left: int = U32_MAX
    item_count: int = 0
    next_read_offset: int = 0
    next_write_offset: int = 0
    max_message_size: int = 1048576
    retention_period: int = 345600
    receive_wait_seconds: int = 0
    delay_seconds: int = 0
    visibility_timeout: int = 30
    tags: dict = field(default_factory=dict)


def encode(meta: QueueMeta) -> tuple[bytes, dict]:
    """The page for ``meta``, and the tags that did not fit (for queue.json)."""
    head = HEADER.pack(
        MAGIC, _sat32(meta.capacity_left), _sat32(meta.item_count),
        _sat32(meta.next_read_offset), _sat32(meta.next_write_offset),
        _sat32(meta.max_message_size), _sat32(meta.retention_period),
        meta.receive_wait_seconds, meta.delay_seconds, meta.visibility_timeout,
    )
    parts = []
    used = 0
    overflow = {}
    for k, v in meta.tags.items():
        entry = k.encode("utf-8") + b"\0" + v.encode("utf-8") + b"\0"
        if overflow or used + len(entry) > TAGS_SPACE:
            overflow[k] = v  # keep order: once one overflows, the rest follow it
            continue
        parts.append(entry)
        used += len(entry)
    body = head + b"".join(parts) + b"\0"
    return body + bytes(PAGE_SIZE - len(body)), overflow


def decode(page: bytes, where: str = "queue.meta") -> QueueMeta:
    if len(page) != PAGE_SIZE:
        raise CorruptRecordError(f"{where}: {len(page)} bytes, a VQS v1 header page is {PAGE_SIZE}")
    (magic, cap, count, rd, wr, maxsz, ret, wait, delay, vis) = HEADER.unpack_from(page, 0)
    if magic != MAGIC:
        raise CorruptRecordError(f"{where}: bad magic {magic:#010x} (expected {MAGIC:#010x})")
    tags = {}
    pos = HEADER_SIZE
    try:
        while True:
            end = page.index(b"\0", pos)
            if end == pos:
                break  # empty name: end of the list
            vend = page.index(b"\0", end + 1)
            tags[page[pos:end].decode("utf-8")] = page[end + 1 : vend].decode("utf-8")
            pos = vend + 1
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"{where}: malformed tag list at byte {pos}: {e}") from None
    return QueueMeta(cap, count, rd, wr, maxsz, ret, wait, delay, vis, tags)


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
    meta = QueueMeta(
        item_count=counters[0], next_read_offset=counters[1], next_write_offset=counters[2],
        max_message_size=config.max_message_bytes, retention_period=config.retention_seconds,
        receive_wait_seconds=config.receive_wait_seconds, delay_seconds=config.delay_seconds,
        visibility_timeout=config.visibility_timeout, tags=dict(config.tags),
    )
    page, overflow = encode(meta)
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
        meta = decode(f.read(), os.path.join(path, "queue.meta"))
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
