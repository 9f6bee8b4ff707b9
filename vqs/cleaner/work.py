"""The reading and writing half of a cleaning pass (clean.py): the offset map
of the dirty section, and the survivors of a group of sealed segments written
to ``{first}.cleaned``. It touches no state of the log: only the files of
sealed segments (never written again) and the one ``.cleaned`` file it
creates, so it runs in the log's process or in a worker process
(worker.py) alike; the swap that puts the file in place is storage's.

Per-batch work over the columns: a batch's keys are sliced out of its key
column at once, the map takes them with one ``dict.update``, the survivors of
a batch are index ranges, and a run of survivors with consecutive offsets is
written as one batch made from slices of the columns it came from (no record
objects).

Invariants: a batch is read only once CRC-verified and continuing the offsets
(``segment_batches``); the ``.cleaned`` file is fsynced before ``write`` returns, and
any failure removes it (the log never sees a partial one).
"""

from __future__ import annotations

import os
import sys
import time
from array import array
from bisect import bisect_left
from functools import lru_cache
from itertools import islice

from ..disk import fs
from ..record import (
    ATTR_COMPACTED,
    ATTR_HEADERS,
    ATTR_KEYS,
    ATTR_NULL_VALUES,
    ATTR_TIMESTAMPS,
    CODEC_NONE,
    HEADER,
    HEADER_SIZE,
    encode_batch_parts,
    frame_batch,
    head_batch,
    peek_header,
)
from ..storage import Segment, cleaned_path, remove_files, segment_batches, write_all

#: records and bytes (keys and values) of a batch the cleaner writes (as the log's own defaults)
BATCH_RECORDS = 4096
BATCH_BYTES = 1 << 20
#: the cleaner's output is written in writes of about this many bytes
WRITE_BYTES = 1 << 20
#: what the offset map counts per key besides the key's bytes
KEY_OVERHEAD = 100
_LITTLE = sys.byteorder == "little"


@lru_cache(maxsize=BATCH_RECORDS + 1)
def _all_valid(n: int) -> bytes:
    """A validity bitmap of ``n`` set bits (LSB first)."""
    return b"\xff" * (n >> 3) + (bytes(((1 << (n & 7)) - 1,)) if n & 7 else b"")


def _keys(b) -> list:
    """The batch's keys (None: a null key) sliced from its key column at once."""
    o = b.key_offsets.tolist()
    d = b.key_data.tobytes()
    keys = [d[x:y] for x, y in zip(o, islice(o, 1, None))]
    kv = b.key_validity
    if kv.tobytes() != _all_valid(b.count):
        for i in range(b.count):
            if not (kv[i >> 3] >> (i & 7)) & 1:
                keys[i] = None
    return keys


class IoThrottle:
    """At most ``rate`` bytes a second read and written over a pass (Kafka's
    ``log.cleaner.io.max.bytes.per.second``): ``took(n)`` sleeps while the pass is
    ahead of it. None: no bound."""

    def __init__(self, rate: float | None, clock=time.monotonic, sleep=time.sleep):
        self.rate, self.clock, self.sleep = rate, clock, sleep
        self.start = clock()
        self.done = 0

    def took(self, n: int) -> None:
        if self.rate is None:
            return
        self.done += n
        ahead = self.done / self.rate - (self.clock() - self.start)
        if ahead > 0:
            self.sleep(ahead)


UNTHROTTLED = IoThrottle(None)


class OffsetMap:
    """key -> offset of its latest record in the dirty section; bounded by ``max_bytes``
    (keys' bytes plus KEY_OVERHEAD per key; a batch's new keys are counted at its
    average key length)."""

    __slots__ = ("offsets", "bytes", "max_bytes", "throttle")

    def __init__(self, max_bytes: int, throttle: IoThrottle = UNTHROTTLED):
        self.offsets: dict[bytes, int] = {}
        self.bytes = 0
        self.max_bytes = max_bytes
        self.throttle = throttle

    def add_segment(self, seg: Segment) -> None:
        offsets = self.offsets
        for b in segment_batches(seg, self.throttle.took, BATCH_BYTES):
            if b.key_validity is None:
                continue
            keys = _keys(b)
            before = len(offsets)
            offsets.update(zip(keys, range(b.base_offset, b.next_offset)))
            offsets.pop(None, None)
            added = len(offsets) - before
            if added:
                self.bytes += added * (KEY_OVERHEAD + len(b.key_data) // b.count)

    @property
    def full(self) -> bool:
        return self.bytes >= self.max_bytes


def scan_headers(segs: list[Segment], throttle: IoThrottle = UNTHROTTLED, covered: int = 0
                 ) -> tuple[set[tuple[int, int, int]], list[int]]:
    """From the batch headers alone: (producer id, epoch, base sequence) of every idempotent
    producer's last batch in ``segs`` at or past ``covered``, and each segment's largest
    timestamp. The cleaner keeps those batches whole (all the pieces of a split one): a
    producer's state is rebuilt from the log after a crash, and one whose last batch were
    gone would be refused (out of order) when it goes on. Below ``covered`` the owner's
    snapshot of the producers' state holds it (clean.py's ``snapshot_producers``)."""
    last: dict[int, tuple[int, int, int]] = {}
    max_ts: list[int] = []
    for seg in segs:
        pos, m = 0, -1
        while pos + HEADER_SIZE <= seg.size:
            head = seg.pread(pos, min(BATCH_BYTES, seg.size - pos))
            throttle.took(len(head))
            p = 0
            while p + HEADER_SIZE <= len(head):
                h = peek_header(head, p)
                if h is None:
                    break
                f = HEADER.unpack_from(head, p)
                m = max(m, f[8])
                if f[9] >= 0:
                    if f[0] >= covered:
                        last[f[9]] = (f[9], f[10], f[11])
                    else:
                        last.pop(f[9], None)
                p += h[1]
            if p == 0:
                break  # damage: segment_batches reports it
            pos += p
        max_ts.append(m)
    return set(last.values()), max_ts


def _u32(values: list) -> array:
    a = array("I", values)
    if not _LITTLE:
        a.byteswap()
    return a


def _encode_plain(base: int, b, i: int, j: int, compacted: bool) -> bytearray:
    """``_encode_run`` of one piece of a batch without headers or null values, uncompressed,
    on a little-endian machine (the usual run: a few records of one producer batch; its
    columns are the file's bytes)."""
    n = j - i
    vo, ko = b.value_offsets, b.key_offsets
    v0, v1, k0, k1 = vo[i], vo[j], ko[i], ko[j]
    out = bytearray(HEADER_SIZE)
    out += array("I", [x - v0 for x in vo[i : j + 1]]) if v0 else vo[i : j + 1]
    out += b.value_data[v0:v1]
    out += _all_valid(n)
    out += array("I", [x - k0 for x in ko[i : j + 1]]) if k0 else ko[i : j + 1]
    out += b.key_data[k0:k1]
    attrs = ATTR_KEYS | (ATTR_COMPACTED if compacted else 0)
    t = b.timestamps
    if t is None:
        first = high = b.first_timestamp_ms
    else:
        t = t[i:j]
        tl = t.tolist()
        first, high = tl[0], max(tl)
        if high != first or min(tl) != first:
            attrs |= ATTR_TIMESTAMPS
            out += t
    return head_batch(out, base, n, attrs, first, high)


def _encode_run(base: int, pieces: list, codec: int, compacted: bool) -> list:
    """One batch of the records ``pieces`` hold (``(batch, i, j)``: records ``[i, j)`` of a
    decoded batch, every one with a key; together consecutive offsets from ``base``),
    its body made from slices of their columns (the layout encode_batch_parts writes)."""
    if len(pieces) == 1 and codec == CODEC_NONE:
        b, i, j = pieces[0]
        if b.header_offsets is None and b.value_validity is None and _LITTLE:
            return [_encode_plain(base, b, i, j, compacted)]
    out = bytearray(HEADER_SIZE)
    n = sum(j - i for _, i, j in pieces)
    attrs = ATTR_KEYS | (ATTR_COMPACTED if compacted else 0)
    columns = [("value_offsets", "value_data"), ("key_offsets", "key_data")]
    if any(b.header_offsets is not None for b, _, _ in pieces):
        attrs |= ATTR_HEADERS
        columns.append(("header_offsets", "header_data"))
    for at, (offsets_name, data_name) in enumerate(columns):
        if at == 1:
            out += _all_valid(n)  # (every record kept has a key)
        offs, size = [0], 0
        for b, i, j in pieces:
            o = getattr(b, offsets_name)
            if o is None:  # (a piece without headers: empty ones)
                offs += [size] * (j - i)
                continue
            shift = size - o[i]
            offs += [x + shift for x in o[i + 1 : j + 1]]
            size += o[j] - o[i]
        if size > 0xFFFF_FFFF:
            raise OverflowError("a cleaned batch column exceeds 4 GiB")  # (bounded by BATCH_BYTES)
        out += _u32(offs)
        for b, i, j in pieces:
            o = getattr(b, offsets_name)
            if o is not None:
                out += getattr(b, data_name)[o[i] : o[j]]
    if len(pieces) == 1 and pieces[0][0].timestamps is None:
        first_ts = max_ts = pieces[0][0].first_timestamp_ms
    else:
        ts = []
        for b, i, j in pieces:
            ts += [b.first_timestamp_ms] * (j - i) if b.timestamps is None else b.timestamps[i:j].tolist()
        first_ts, max_ts = ts[0], max(ts)
        if max_ts != first_ts or min(ts) != first_ts:
            attrs |= ATTR_TIMESTAMPS
            t = array("q", ts)
            if not _LITTLE:
                t.byteswap()
            out += t
    if any(b.value_validity is not None for b, _, _ in pieces):
        bits = []
        for b, i, j in pieces:
            vv = b.value_validity
            bits += [1] * (j - i) if vv is None else [(vv[k >> 3] >> (k & 7)) & 1 for k in range(i, j)]
        if 0 in bits:
            attrs |= ATTR_NULL_VALUES
            packed = bytearray((n + 7) >> 3)
            for k, v in enumerate(bits):
                if v:
                    packed[k >> 3] |= 1 << (k & 7)
            out += packed
    if codec != CODEC_NONE:
        return frame_batch(base, [memoryview(out)[HEADER_SIZE:]], n, attrs, first_ts, max_ts, codec=codec)
    return [head_batch(out, base, n, attrs, first_ts, max_ts)]


class _Writer:
    """The survivors of a group of segments into ``{first}.cleaned``."""

    def __init__(self, directory: str, first: int, codec: int, throttle: IoThrottle = UNTHROTTLED):
        self.throttle = throttle
        self.path = cleaned_path(directory, first)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.expected = first  # where a batch continues the offsets without ATTR_COMPACTED
        self.codec = codec
        self.size = 0  # bytes of the batches made (all written once finish returns)
        self.run: list = []  # (batch, i, j) pieces of consecutive offsets waiting to be written
        self.run_n = self.run_bytes = 0
        self.run_end = -1  # the offset that continues the run
        # encoded batches not yet written: one write per WRITE_BYTES, not one per batch (a
        # stream of key updates leaves runs of a few records, each its own batch)
        self.pending: list = []
        self.pending_bytes = 0

    def piece(self, b, i: int, j: int) -> None:
        """Records ``[i, j)`` of batch ``b`` (each with a key) join the run (cut at
        BATCH_RECORDS records or once BATCH_BYTES of keys and values are in)."""
        vo, ko = b.value_offsets, b.key_offsets
        base = b.base_offset
        if j < b.count and (not self.run or base + i != self.run_end) and j - i <= BATCH_RECORDS \
                and vo[j - 1] - vo[i] + ko[j - 1] - ko[i] < BATCH_BYTES:
            # a run that nothing continues (the batch goes on without it) and fits: written now
            self.flush_run()
            self._emit(_encode_run(base + i, [(b, i, j)], self.codec, base + i != self.expected))
            self.expected = base + j
            return
        while i < j:
            if self.run and (b.base_offset + i != self.run_end or self.run_n >= BATCH_RECORDS
                             or self.run_bytes >= BATCH_BYTES):
                self.flush_run()
            m = min(j, i + BATCH_RECORDS - self.run_n)
            room = BATCH_BYTES - self.run_bytes
            v0, k0 = vo[i], ko[i]
            if vo[m] - v0 + ko[m] - k0 >= room:  # the record that reaches the bound is the last
                m = i + 1 + bisect_left(range(i + 1, m + 1), room, key=lambda k: vo[k] - v0 + ko[k] - k0)
            self.run.append((b, i, m))
            self.run_n += m - i
            self.run_bytes += vo[m] - v0 + ko[m] - k0
            self.run_end = b.base_offset + m
            i = m

    def flush_run(self) -> None:
        if not self.run:
            return
        b, i, _ = self.run[0]
        base = b.base_offset + i
        self._emit(_encode_run(base, self.run, self.codec, base != self.expected))
        self.expected = self.run_end
        self.run, self.run_n, self.run_bytes = [], 0, 0

    def _emit(self, parts: list) -> None:
        n = 0
        for p in parts:
            n += memoryview(p).nbytes  # (arrays among them: offsets, timestamps)
        self.pending += parts
        self.pending_bytes += n
        self.size += n
        if self.pending_bytes >= WRITE_BYTES:
            self._drain()

    def _drain(self) -> None:
        if self.pending:
            self.throttle.took(write_all(self.fd, [b"".join(self.pending)]))  # one buffer: one write
            self.pending, self.pending_bytes = [], 0

    def batch(self, b) -> None:
        """A batch that keeps every record: copied as it is when it continues the offsets, else
        written again with bit 4: as a run, or (a producer's batch, or one with a null key)
        encoded with its producer fields (an idempotent producer's state)."""
        self.flush_run()
        if b.base_offset == self.expected:
            self._emit([b.raw])
            self.expected = b.next_offset
        elif b.producer_id < 0 and b.key_validity is not None and b.key_validity.tobytes() == _all_valid(b.count):
            self.piece(b, 0, b.count)  # after a gap: a run (bit 4), which what follows may continue
        else:
            rs = b.records()
            self._emit(encode_batch_parts(
                b.base_offset, [r.value for r in rs], keys=[r.key for r in rs],
                headers=[r.headers or None for r in rs], timestamps=[r.timestamp_ms for r in rs],
                codec=self.codec, nulls=True, compacted=True, producer_id=b.producer_id,
                producer_epoch=b.producer_epoch, base_sequence=b.base_sequence))
            self.expected = b.next_offset

    def finish(self) -> None:
        self.flush_run()
        self._drain()
        fs.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1

    def abandon(self) -> None:
        self.pending = []
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        remove_files(self.path)


def _kept(b, latest: dict, tombstones_before: int) -> list[int]:
    """Indexes of ``b``'s records a pass keeps: a key whose latest mapped offset is not
    later, and not a tombstone below ``tombstones_before``."""
    if b.key_validity is None:
        return []
    base = b.base_offset
    get = latest.get
    kept = [o - base for k, o in zip(_keys(b), range(base, b.next_offset)) if k is not None and get(k, o) <= o]
    vv = b.value_validity
    if vv is not None and base < tombstones_before:
        kept = [i for i in kept if base + i >= tombstones_before or (vv[i >> 3] >> (i & 7)) & 1]
    return kept


class CleanWork:
    """One pass's reading and writing over the sealed segments ``segs`` (in order):
    ``map`` first, then ``write`` for each group."""

    def __init__(self, directory: str, segs: list[Segment], io_max_bytes_per_s: float | None = None):
        self.directory = directory
        self.segs = segs
        self.throttle = IoThrottle(io_max_bytes_per_s)
        self.latest: dict[bytes, int] = {}
        self.producers: set = set()
        self.max_ts: list[int] = []  # of the segments mapped and those before them

    def map(self, first_dirty: int, max_map_bytes: int, producers_covered: int = 0) -> int:
        """Map the dirty section from ``segs[first_dirty]`` on until the map is full (at
        least one segment); the count of segments mapped, from the first. Producers' last
        batches below ``producers_covered`` are cleaned as any other (``scan_headers``)."""
        omap = OffsetMap(max_map_bytes, self.throttle)
        mapped = first_dirty
        while mapped < len(self.segs) and not (omap.full and mapped > first_dirty):
            omap.add_segment(self.segs[mapped])
            mapped += 1
        self.latest = omap.offsets
        self.producers, self.max_ts = scan_headers(self.segs[:mapped], self.throttle, producers_covered)
        return mapped

    def write(self, group: list[int], codec: int, clean_point: int, horizon: int) -> tuple[int, int]:
        """Write the survivors of ``segs[i] for i in group`` (mapped ones) to
        ``{first}.cleaned``, fsynced; (bytes written, records removed). A segment whose
        newest record is not after ``horizon`` (``delete_retention_ms`` ago) loses its
        tombstones below the clean point."""
        segs = [self.segs[i] for i in group]
        w = _Writer(self.directory, segs[0].base_offset, codec, self.throttle)
        latest, producers = self.latest, self.producers
        removed = 0
        try:
            for i, seg in zip(group, segs):
                before = clean_point if self.max_ts[i] <= horizon else 0
                for b in segment_batches(seg, self.throttle.took, BATCH_BYTES):
                    if b.producer_id >= 0 and (b.producer_id, b.producer_epoch, b.base_sequence) in producers:
                        w.batch(b)  # an idempotent producer's last batch stays whole
                        continue
                    kept = _kept(b, latest, before)
                    removed += b.count - len(kept)
                    if len(kept) == b.count:
                        w.batch(b)
                        continue
                    start = prev = -2
                    for i in kept:
                        if i != prev + 1:
                            if start >= 0:
                                w.piece(b, start, prev + 1)
                            start = i
                        prev = i
                    if start >= 0:
                        w.piece(b, start, prev + 1)
            w.finish()
        except BaseException:
            w.abandon()
            raise
        return w.size, removed

    def close(self) -> None:
        self.latest = {}
