"""The queue metadata file ``queue.meta``: the VQS v1 header page (docs/FORMAT.md).

One 16 KiB page, little-endian::

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

import struct
from dataclasses import dataclass, field

from ...errors import CorruptRecordError

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
