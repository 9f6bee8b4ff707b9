"""Reading one segment for the log: the batches from an offset on (decoded at once, or
lazily from one mapping), the first offset at a time, the largest timestamp.

Invariant: every batch returned was CRC-verified and continues the offset expected
(``Segment.continues``); otherwise CorruptRecordError naming file and position, or with
``skip`` the damage is stepped over and the caller told.
"""

from __future__ import annotations

from ..errors import CorruptRecordError
from ..record import RecordBatch, decode_batch, peek_header, scan_batches
from .segment import Segment


def batches_at(
    seg: Segment, offset: int, max_bytes: int, hint: tuple[int, int] | None = None, *, skip: bool = False,
    mapped: bool = False,
) -> tuple[list[RecordBatch], int | None, bool]:
    """(batches, next position, stepped over damage) from the batch holding ``offset`` (or
    the first after it), about ``max_bytes``; ``hint``: (position, base offset) to start at."""
    stepped = False
    found = hint if hint is not None else seg.find_batch(offset, skip=skip)
    while found is not None:
        pos, expected = found
        try:
            batches, next_pos = _read_run(seg, pos, max_bytes, mapped)
        except CorruptRecordError:
            if not skip or stepped:
                raise
        else:
            if not batches or seg.continues(expected, batches[0].base_offset, batches[0].attributes):
                return batches, next_pos, stepped
            if not skip or stepped:
                raise CorruptRecordError(
                    f"{seg.log_path}: batch at position {pos} has base offset "
                    f"{batches[0].base_offset}, expected {expected}", path=seg.log_path, position=pos,
                )
            # else a damaged base offset (outside the CRC): stepped over like other damage
        stepped = True
        found = seg.find_batch(offset, skip=True)
    return [], None, stepped


def _read_run(seg: Segment, position: int, max_bytes: int, mapped: bool) -> tuple[list[RecordBatch], int]:
    """(batches, next position): whole batches from ``position``, at least one, about
    ``max_bytes``, views of a mapping with ``mapped``. The first batch damaged raises; later
    damage or a discontinuity ends the run (reported when it is reached)."""
    where = seg.log_path
    size = seg.size
    if position >= size:
        return [], position
    want = min(max(max_bytes, 4096), size - position)
    buf = seg.map(position, want, populate=True) if mapped else seg.pread(position, want)
    h = peek_header(buf, 0)
    if h is None:
        raise CorruptRecordError(f"{where}: invalid batch header at position {position}", path=where,
                                 position=position)
    if h[1] > len(buf):
        if position + h[1] > size:
            raise CorruptRecordError(f"{where}: batch at position {position} runs past the segment end",
                                     path=where, position=position)
        buf = seg.map(position, h[1], populate=True) if mapped else seg.pread(position, h[1])
    out: list[RecordBatch] = []
    p = 0
    n = len(buf)
    while p < n:
        h = peek_header(buf, p)
        if h is None or p + h[1] > n:
            break
        try:
            b = decode_batch(buf, p, where=where, at=position)
        except CorruptRecordError as e:
            if out:
                break
            raise CorruptRecordError(str(e), path=where, position=position + p) from None
        if out and not seg.continues(out[-1].next_offset, b.base_offset, b.attributes):
            break
        out.append(b)
        p += h[1]
    return out, position + p


def mapped_batches(seg: Segment, position: int, expected: int, maps=None):
    """The batches of ``seg`` from ``position`` (based at ``expected``) to its end, from one
    mapping (FileNotFoundError at once if the file is gone), each verified only when asked
    for (a consumer that copies it at once finds it still in the CPU cache). Stops quietly
    at damage or a discontinuity: the caller reads that offset with ``batches_at``."""
    size = seg.size
    if position >= size:
        return iter(())
    buf = seg.map(position, size - position, maps)
    return _decode_lazily(buf, seg, expected)


def _decode_lazily(buf, seg: Segment, expected: int):
    for p, _, _ in scan_batches(buf):
        try:
            b = decode_batch(buf, p, where=seg.log_path)
        except CorruptRecordError:
            return
        if not seg.continues(expected, b.base_offset, b.attributes):
            return
        yield b
        expected = b.next_offset


def first_offset_at_time(seg: Segment, timestamp_ms: int, start_offset: int) -> int | None:
    """The first offset >= ``start_offset`` in ``seg`` stamped >= ``timestamp_ms``, or None."""
    if segment_max_timestamp(seg) < timestamp_ms:
        return None
    ti = seg.checked_timeindex()
    e = ti.lower(timestamp_ms) if ti is not None else None
    found = None if e is None else seg.find_batch(seg.base_offset + e[1])
    pos, expected = found if found is not None else (0, seg.base_offset)
    for info in seg.iter_valid(pos, seg.size, expected=expected):
        if info.max_timestamp_ms < timestamp_ms:
            continue
        b = decode_batch(seg.pread(info.position, info.size), 0, where=seg.log_path)
        for k in range(max(0, start_offset - b.base_offset), b.count):
            if b.timestamp(k) >= timestamp_ms:
                return b.base_offset + k
    return None


def segment_max_timestamp(seg: Segment) -> int:
    """The largest record timestamp in ``seg`` (exact), kept in ``seg.max_timestamp_ms``."""
    ti = seg.checked_timeindex()
    m = max(seg.max_timestamp_ms, ti.last()[0] if ti is not None and ti.entries else -1)
    if m < 0:
        for info in seg.iter_valid(0, seg.size, expected=seg.base_offset):
            m = max(m, info.max_timestamp_ms)
    seg.max_timestamp_ms = max(seg.max_timestamp_ms, m)
    return seg.max_timestamp_ms


def segment_batches(seg: Segment, on_read=None, chunk_bytes: int = 1 << 20):
    """Every batch of a sealed segment in order, CRC-verified and continuing the offsets
    (CorruptRecordError otherwise), read ``chunk_bytes`` at a time; ``on_read(n)`` after
    each ``n`` bytes read (a reader's rate bound)."""
    pos, expected = 0, seg.base_offset
    while pos < seg.size:
        batches, nxt, _ = batches_at(seg, expected, chunk_bytes, (pos, expected))
        if not batches or nxt is None or nxt <= pos:
            raise CorruptRecordError(f"{seg.log_path}: no valid batch at position {pos}",
                                     path=seg.log_path, position=pos)
        if on_read is not None:
            on_read(nxt - pos)
        yield from batches
        pos, expected = nxt, batches[-1].next_offset
