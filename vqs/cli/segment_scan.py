"""A full, read-only scan of one segment file for ``vqs inspect`` (Kafka's DumpLogSegments):
every batch verified, every damaged region reported, going on past damage where the batch
bounds allow. It reads the file's bytes as the format defines them (vqs.record), not through
a log: a damaged segment that recovery would refuse or cut is shown as it is.

What it reports, in file order (``ScanItem.kind``):

- ``batch``: a valid batch (``batch``, views into the buffer read);
- ``gap``: a valid batch starts above ``expected`` (not before a batch the cleaner wrote);
- ``offset_goes_back``: a valid batch starts below ``expected`` (corrupt);
- ``below_segment_base``: a valid batch starts below the file name's base (corrupt);
- ``invalid_batch``: in bounds but failing its CRC or structure checks (``detail``;
  ``at_end`` when last in the file: a torn write if unflushed); corrupt;
- ``zero_tail`` / ``incomplete_tail``: after the last batch (a torn tail recovery cuts);
- ``bad_header``: an impossible header; the scan stops.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..errors import CorruptRecordError
from ..record import ATTR_COMPACTED, HEADER_SIZE, RecordBatch, decode_batch, peek_header

LOG_SUFFIX = ".log"  # a segment file: ``{base:020d}.log`` (docs/FORMAT.md)
CORRUPT_KINDS = frozenset({"offset_goes_back", "below_segment_base", "invalid_batch", "bad_header"})


class ScanItem:
    __slots__ = ("kind", "position", "size", "batch", "expected", "detail", "at_end")

    def __init__(self, kind: str, position: int, size: int, *, batch: RecordBatch | None = None,
                 expected: int | None = None, detail: str = "", at_end: bool = False) -> None:
        self.kind = kind
        self.position = position
        self.size = size
        self.batch = batch
        self.expected = expected
        self.detail = detail
        self.at_end = at_end

    @property
    def corrupt(self) -> bool:
        return self.kind in CORRUPT_KINDS

    def __repr__(self) -> str:
        return f"ScanItem({self.kind!r}, position={self.position}, size={self.size})"


def segment_base_from_name(path: str) -> int | None:
    """The base offset a segment file's name declares, or None."""
    try:
        return int(os.path.basename(path)[: -len(LOG_SUFFIX)])
    except ValueError:
        return None


def scan_segment_file(path: str) -> Iterator[ScanItem]:
    """Scan the segment file at ``path``, read whole (bounded by ``segment_bytes``)."""
    with open(path, "rb") as f:
        buf = f.read()
    yield from scan_segment_buffer(buf, where=path, base_offset=segment_base_from_name(path))


def scan_segment_buffer(buf: bytes, *, where: str = "buffer", base_offset: int | None = None) -> Iterator[ScanItem]:
    """Scan a segment's bytes; ``base_offset``: its declared base (None: not checked)."""
    size = len(buf)
    pos = 0
    expected = None
    while pos < size:
        rest = size - pos
        h = peek_header(buf, pos)
        if h is None or pos + h[1] > size:
            if not buf[pos:size].strip(b"\0"):
                yield ScanItem("zero_tail", pos, rest)
            elif rest < HEADER_SIZE or (h is not None and pos + h[1] > size):
                yield ScanItem("incomplete_tail", pos, rest)
            else:
                yield ScanItem("bad_header", pos, rest)
            return
        try:
            b = decode_batch(buf, pos, where=where)
        except CorruptRecordError as e:
            yield ScanItem("invalid_batch", pos, h[1], detail=str(e), at_end=pos + h[1] >= size)
            pos += h[1]  # (its length was bounds-checked)
            continue
        if base_offset is not None and b.base_offset < base_offset:
            yield ScanItem("below_segment_base", pos, b.size_bytes, batch=b, expected=base_offset)
        if expected is not None and b.base_offset < expected:
            yield ScanItem("offset_goes_back", pos, b.size_bytes, batch=b, expected=expected)
        elif expected is not None and b.base_offset > expected and not b.attributes & ATTR_COMPACTED:
            yield ScanItem("gap", pos, b.size_bytes, batch=b, expected=expected)
        expected = b.next_offset
        yield ScanItem("batch", pos, b.size_bytes, batch=b)
        pos += b.size_bytes
