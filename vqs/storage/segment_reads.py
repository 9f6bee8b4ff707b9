"""Reading one segment on behalf of the log: the batches from an offset on
(decoded at once, or lazily from one mapping), the first offset at a time,
the segment's largest timestamp. (Where an offset lies, ``Segment.find_batch``,
is the segment's: its index and the scans recovery shares.)

Invariants:
- every batch returned was CRC-verified and continues the offset expected
  (``Segment.continues``: contiguous, or across a recorded gap); otherwise
  CorruptRecordError naming file and position, or with ``skip`` the damage
  is stepped over (as recovery would quarantine it) and the caller told;
- ``mapped_batches`` hands a batch out only once verified.
"""

from __future__ import annotations

from ..errors import CorruptRecordError
from .record_batch import RecordBatch, decode_batch, peek_header, scan_batches
from .segment import Segment


def batches_at(
    seg: Segment, offset: int, max_bytes: int, hint: tuple[int, int] | None = None, *, skip: bool = False,
    mapped: bool = False,
) -> tuple[list[RecordBatch], int | None, bool]:
    """(batches, next position, stepped over damage) from the batch holding
    ``offset`` in ``seg`` (or the first after it), reading about ``max_bytes``;
    no batches if the segment has nothing there. ``hint`` is (position, base
    offset) of the batch to start from, when a sequential reader knows it."""
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
            # else a damaged base offset (outside the CRC): stepped over like any other damage
        stepped = True  # stepped over, as recovery does
        found = seg.find_batch(offset, skip=True)
    return [], None, stepped


def _read_run(seg: Segment, position: int, max_bytes: int, mapped: bool) -> tuple[list[RecordBatch], int]:
    """Decode whole batches of ``seg`` from ``position``, at least one, until
    about ``max_bytes``; (batches, next position). With ``mapped`` the batches
    are views of a mapping of the file (``Segment.map``), else of a copy read
    with ``pread``. The first batch damaged raises; later damage or a
    discontinuity ends the run, to be reported when it is reached."""
    where = seg.log_path
    size = seg.size
    if position >= size:
        return [], position
    want = min(max(max_bytes, 4096), size - position)
    buf = seg.map(position, want) if mapped else seg.pread(position, want)
    h = peek_header(buf, 0)
    if h is None:
        raise CorruptRecordError(f"{where}: invalid batch header at position {position}", path=where,
                                 position=position)
    if h[1] > len(buf):
        if position + h[1] > size:
            raise CorruptRecordError(f"{where}: batch at position {position} runs past the segment end",
                                     path=where, position=position)
        buf = seg.map(position, h[1]) if mapped else seg.pread(position, h[1])
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
                break  # the good prefix; whoever asks for the bad batch gets the error
            raise CorruptRecordError(str(e), path=where, position=position + p) from None
        if out and not seg.continues(out[-1].next_offset, b.base_offset, b.attributes):
            break
        out.append(b)
        p += h[1]
    return out, position + p


def mapped_batches(seg: Segment, position: int, expected: int, maps=None):
    """The batches of ``seg`` from ``position`` (whose batch must have base
    offset ``expected``) to the segment's end, from one read-only mapping of
    ``[position, size)`` (``Segment.map``; raises FileNotFoundError at once if
    the file is gone). A generator that verifies each batch only when asked
    for it, so a consumer that copies it at once (Spark's source) finds its
    bytes still in the CPU cache. It stops quietly at the valid end and at the
    first batch damaged or not continuing the offsets: the caller reads that
    offset with ``batches_at``, which reports or skips it. ``maps`` (a
    map_cache.MapCache) keeps the mapping for later scans."""
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
    """The first offset >= ``start_offset`` in ``seg`` whose record timestamp is
    >= ``timestamp_ms`` (None if the segment has none)."""
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
    """The largest record timestamp in ``seg`` (exact: from a checked time index,
    else by a scan), remembered in ``seg.max_timestamp_ms``."""
    ti = seg.checked_timeindex()  # a rebuild (if needed) also finds the exact max
    m = max(seg.max_timestamp_ms, ti.last()[0] if ti is not None and ti.entries else -1)
    if m < 0:
        for info in seg.iter_valid(0, seg.size, expected=seg.base_offset):
            m = max(m, info.max_timestamp_ms)
    seg.max_timestamp_ms = max(seg.max_timestamp_ms, m)
    return seg.max_timestamp_ms
