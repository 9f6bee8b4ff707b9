"""The log cleaner: compaction of a log's sealed segments (Kafka's ``cleanup.policy=compact``).

In the *cleanable* segments (sealed, fsynced, newest record older than
``min_compaction_lag_ms``) a record goes when its key has a later record in the *dirty*
section (the cleanable segments from the clean point on, key -> latest offset in an
``OffsetMap``); so do keyless records, and tombstones that went through one clean already in
a segment older than ``delete_retention_ms``. The rest keep their offsets. An idempotent
producer's last batch is kept whole (its state is rebuilt from batch headers after a crash).

The clean point (``cleaner.checkpoint``) only moves to the end of what a finished pass
mapped (a lost one means more work, never a wrong result). It is written before a log's
first swap: its presence tells a reader that counts records from offsets (the JVM reader's
COUNT(*)) to count from batch headers. A batch written after removed offsets carries
ATTR_COMPACTED; a batch that lost no record is copied as it is.

Crash safety: consecutive cleanable segments ``s1..sk`` (bounded by ``segment_bytes`` and
MAX_SPAN) become one segment named ``s1``:

1. the survivors are written to ``{s1}.cleaned`` and fsynced (a crash: deleted at open);
2. under the log's lock, if ``s1..sk`` are still its segments, it is renamed to
   ``{s1}-{end}.swap`` (``end``: the base after ``sk``), the directory fsynced: the commit;
3. ``sk..s2`` and ``s1``'s files are unlinked, the swap renamed to ``{s1}.log``, the
   directory fsynced; ``finish_swaps`` (the owner's open) completes this for any swap file.

Space: the output is a control write (space.py), so on a full disk the cleaner still runs
(and frees space) until even that room is gone; ENOSPC met anyway abandons the pass.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

from ..errors import ConfigError, CorruptRecordError, DiskFullError
from . import fs
from . import space as _space
from .durable_file import atomic_write, fsync_dir, remove_files, write_all
from .log_compaction import replace_sealed, sealed_segments
from .log_dir import list_segment_bases
from .log_settings import check_int
from .record_batch import HEADER, HEADER_SIZE, codec_id, encode_batch_parts, peek_header
from .segment import Segment, segment_files, segment_name
from .segment_reads import batches_at, segment_max_timestamp

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CLEAN_POINT = "cleaner.checkpoint"
#: a cleaned segment spans fewer offsets (the indexes' relative offsets are u32)
MAX_SPAN = 1 << 31
#: records and bytes of a batch the cleaner writes (as the log's own defaults)
BATCH_RECORDS = 4096
BATCH_BYTES = 1 << 20
WRITE_BYTES = 1 << 20


@dataclass(frozen=True)
class CompactionSettings:
    """A compacted log's settings (Kafka's names, dots as underscores)."""

    delete_retention_ms: int = 86_400_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int | None = None
    #: the offset map's bound: keys' bytes plus ~100 bytes per key
    max_map_bytes: int = 128 << 20

    def __post_init__(self):
        for name in ("delete_retention_ms", "min_compaction_lag_ms", "max_map_bytes"):
            check_int(name, getattr(self, name), 0)
        check_int("max_compaction_lag_ms", self.max_compaction_lag_ms, 1, optional=True)
        r = self.min_cleanable_dirty_ratio
        if not isinstance(r, (int, float)) or isinstance(r, bool) or not 0 <= r <= 1:
            raise ConfigError(f"min_cleanable_dirty_ratio must be a number in 0..1, not {r!r}")


@dataclass
class CleanStats:
    """What one pass over a log did."""

    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_removed: int = 0


def _swap_name(first: int, end: int) -> str:
    return f"{segment_name(first)}-{segment_name(end)}{SWAP_SUFFIX}"


def finish_swaps(path: str) -> bool:
    """The owner's open, before its segments are listed: delete ``*.cleaned`` files and
    complete every committed swap (step 3). True if a file changed."""
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return False
    changed = False
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            remove_files(os.path.join(path, name))
            changed = True
    for name in sorted(n for n in names if n.endswith(SWAP_SUFFIX)):
        try:
            first, end = (int(x) for x in name[: -len(SWAP_SUFFIX)].split("-"))
        except ValueError:
            continue  # not ours
        _install(path, name, first, [b for b in list_segment_bases(path, names) if first < b < end])
        changed = True
    if changed:
        fsync_dir(path)
    return changed


def _install(path: str, swap: str, first: int, later: list[int]) -> None:
    """Step 3: the replaced segments' files go, newest first; the swap takes ``first``'s name."""
    for base in reversed(later):
        remove_files(*reversed(segment_files(path, base)))
    log_file, index, timeindex = segment_files(path, first)
    remove_files(index, timeindex, log_file)
    fs.rename(os.path.join(path, swap), log_file)
    fsync_dir(path)


def read_clean_point(path: str) -> int:
    try:
        with open(os.path.join(path, CLEAN_POINT), "rb") as f:
            v = json.loads(f.read()).get("clean_point", 0)
        return v if isinstance(v, int) and v >= 0 else 0
    except (OSError, ValueError, AttributeError):
        return 0  # none, or unreadable: everything is dirty (more work, nothing lost)


class OffsetMap:
    """key -> offset of its latest record in the dirty section; bounded by ``max_bytes``."""

    __slots__ = ("offsets", "bytes", "max_bytes")

    def __init__(self, max_bytes: int):
        self.offsets: dict[bytes, int] = {}
        self.bytes = 0
        self.max_bytes = max_bytes

    def add_segment(self, seg: Segment) -> None:
        offsets = self.offsets
        for b in _batches(seg):
            if b.key_validity is None:
                continue
            for i in range(b.count):
                k = b.key(i)
                if k is not None:
                    if k not in offsets:
                        self.bytes += len(k) + 100
                    offsets[k] = b.base_offset + i

    @property
    def full(self) -> bool:
        return self.bytes >= self.max_bytes


def _batches(seg: Segment):
    """Every batch of a sealed segment, CRC-verified and continuous (CorruptRecordError otherwise)."""
    pos, expected = 0, seg.base_offset
    while pos < seg.size:
        batches, nxt, _ = batches_at(seg, expected, BATCH_BYTES, (pos, expected))
        if not batches or nxt is None or nxt <= pos:
            raise CorruptRecordError(f"{seg.log_path}: no valid batch at position {pos}",
                                     path=seg.log_path, position=pos)
        yield from batches
        pos, expected = nxt, batches[-1].next_offset


class _Writer:
    """The survivors of a group of segments into ``{first}.cleaned``."""

    def __init__(self, path: str, first: int, codec: int):
        self.path = os.path.join(path, segment_name(first) + CLEANED_SUFFIX)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.expected = first  # where a batch continues the offsets without ATTR_COMPACTED
        self.codec = codec
        self.size = 0  # bytes of the batches made (all written once finish returns)
        self.run: list = []  # records of consecutive offsets waiting to be written
        self.run_bytes = 0
        # encoded batches not yet written: one write per WRITE_BYTES, not one per batch
        self.pending: list = []
        self.pending_bytes = 0

    def record(self, r) -> None:
        if self.run and (r.offset != self.run[-1].offset + 1 or len(self.run) >= BATCH_RECORDS
                         or self.run_bytes >= BATCH_BYTES):
            self.flush_run()
        self.run.append(r)
        self.run_bytes += len(r.value or b"") + len(r.key or b"")

    def flush_run(self) -> None:
        run = self.run
        if not run:
            return
        self._write(run[0].offset, run, run[0].offset != self.expected)
        self.expected = run[-1].offset + 1
        self.run, self.run_bytes = [], 0

    def _write(self, base: int, rs: list, compacted: bool, **producer) -> None:
        self._emit(encode_batch_parts(
            base, [r.value for r in rs], keys=[r.key for r in rs],
            headers=[r.headers or None for r in rs], timestamps=[r.timestamp_ms for r in rs],
            codec=self.codec, nulls=True, compacted=compacted, **producer))

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
            write_all(self.fd, [b"".join(self.pending)])  # one buffer: one write
            self.pending, self.pending_bytes = [], 0

    def batch(self, b) -> None:
        """A batch that keeps every record: copied as it is when it continues the offsets, else
        encoded again, compacted, with its producer fields."""
        self.flush_run()
        if b.base_offset == self.expected:
            self._emit([b.raw])
        else:
            self._write(b.base_offset, b.records(), True, producer_id=b.producer_id,
                        producer_epoch=b.producer_epoch, base_sequence=b.base_sequence)
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


def _producers_last(segs: list[Segment]) -> set[tuple[int, int, int]]:
    """(producer id, epoch, base sequence) of every idempotent producer's last batch in
    ``segs``, from the headers: kept whole (every piece of a split one), or the producer
    would be refused as out of order after a crash."""
    last: dict[int, tuple[int, int, int]] = {}
    for seg in segs:
        pos = 0
        while pos + HEADER_SIZE <= seg.size:
            head = seg.pread(pos, min(BATCH_BYTES, seg.size - pos))
            p = 0
            while p + HEADER_SIZE <= len(head):
                h = peek_header(head, p)
                if h is None:
                    break
                f = HEADER.unpack_from(head, p)
                if f[9] >= 0:
                    last[f[9]] = (f[9], f[10], f[11])
                p += h[1]
            if p == 0:
                break  # damage: _batches reports it
            pos += p
    return set(last.values())


def _groups(segs: list[Segment], ends: list[int], max_bytes: int) -> list[list[int]]:
    """Indexes of ``segs`` in runs of consecutive segments of at most ``max_bytes``
    (at least one each) spanning fewer than MAX_SPAN offsets."""
    out: list[list[int]] = []
    for i, s in enumerate(segs):
        g = out[-1] if out else None
        if g and sum(segs[j].size for j in g) + s.size <= max_bytes and ends[i] - segs[g[0]].base_offset < MAX_SPAN:
            g.append(i)
        else:
            out.append([i])
    return out


def clean_log(log, settings: CompactionSettings, now_ms: int | None = None, *, force: bool = False,
              stop=None) -> CleanStats:
    """One cleaning pass over ``log``; ``force`` ignores the dirty ratio; ``stop()`` true ends
    the pass before its next group."""
    stats = CleanStats()
    now_ms = log._now_ms() if now_ms is None else now_ms
    segs, ends = sealed_segments(log)
    clean_point = read_clean_point(log.path)
    first_dirty = next((i for i, s in enumerate(segs) if s.base_offset >= clean_point), len(segs))
    if first_dirty == len(segs):
        return stats  # nothing sealed since the last pass: no file is touched
    n = first_dirty  # (below the clean point all was old enough before)
    while n < len(segs) and segment_max_timestamp(segs[n]) <= now_ms - settings.min_compaction_lag_ms:
        n += 1
    segs, ends = segs[:n], ends[:n]
    if first_dirty == len(segs):
        return stats
    dirty = sum(s.size for s in segs[first_dirty:])
    total = sum(s.size for s in segs)
    due = force or (total and dirty / total >= settings.min_cleanable_dirty_ratio)
    if not due and settings.max_compaction_lag_ms is not None:
        first = next(_batches(segs[first_dirty]), None)
        due = first is not None and first.first_timestamp_ms <= now_ms - settings.max_compaction_lag_ms
    if not due:
        return stats
    omap = OffsetMap(settings.max_map_bytes)
    mapped = first_dirty
    while mapped < len(segs) and not (omap.full and mapped > first_dirty):
        omap.add_segment(segs[mapped])
        mapped += 1
    map_end = ends[mapped - 1]
    horizon = now_ms - settings.delete_retention_ms
    marker = os.path.join(log.path, CLEAN_POINT)
    space = _space.for_path(log.path)
    floor = log.min_free_bytes // _space.CONTROL_DIVISOR
    producers = _producers_last(segs[:mapped])
    for g in _groups(segs[:mapped], ends[:mapped], log.segment_bytes):
        if stop is not None and stop():
            return stats
        group = [segs[i] for i in g]
        need = sum(s.size for s in group)
        try:
            space.take(need, floor, log.path, control=True)
        except DiskFullError as e:
            logger.info("log cleaner waits for space in %s: %s", log.path, e)
            return stats
        written = 0
        try:
            if not os.path.exists(marker):  # before the first swap: the log may hold cleaned segments
                atomic_write(marker, json.dumps({"clean_point": clean_point}).encode())
            written, removed = _clean_group(log, group, ends[g[-1]], omap.offsets, clean_point, horizon,
                                            producers)
        except (OSError, DiskFullError) as e:
            if isinstance(e, DiskFullError) or e.errno in fs.NO_SPACE:
                space.short()
                logger.info("log cleaner found no space in %s; trying again later", log.path)
                return stats
            raise
        finally:
            space.wrote(written)
            space.give(need - written)
        if removed is None:
            return stats  # the log changed under the pass (retention, close): next time
        space.freed()
        stats.segments_in += len(group)
        stats.segments_out += 1
        stats.bytes_in += need
        stats.bytes_out += written
        stats.records_removed += removed
    atomic_write(marker, json.dumps({"clean_point": map_end}).encode())
    return stats


def _clean_group(log, group: list[Segment], end: int, latest: dict, clean_point: int, horizon: int,
                 producers: set):
    """Steps 1-3 for one group; (bytes written, records removed), removed None if abandoned."""
    w = _Writer(log.path, group[0].base_offset, codec_id(log.compression))
    removed = 0
    try:
        for seg in group:
            tombstones_go = segment_max_timestamp(seg) <= horizon
            for b in _batches(seg):
                if b.producer_id >= 0 and (b.producer_id, b.producer_epoch, b.base_sequence) in producers:
                    w.batch(b)  # an idempotent producer's last batch stays whole
                    continue
                kept = [r for r in b.records() if r.key is not None and latest.get(r.key, r.offset) <= r.offset
                        and not (r.value is None and tombstones_go and r.offset < clean_point)]
                removed += b.count - len(kept)
                if len(kept) == b.count:
                    w.batch(b)
                else:
                    for r in kept:
                        w.record(r)
        w.finish()
    except BaseException:
        w.abandon()
        raise
    swap = os.path.join(log.path, _swap_name(group[0].base_offset, end))

    def commit() -> None:
        """Step 2. A failure takes the swap back: left beside a log that goes on, it would
        bring back segments retention deleted at the next open."""
        try:
            fs.rename(w.path, swap)
            fsync_dir(log.path)
        except OSError as e:
            try:
                remove_files(swap)
            except OSError:
                e.swap_left = True  # replace_sealed latches the log: only its next open may complete it
            raise

    def finish() -> None:
        try:
            _install(log.path, os.path.basename(swap), group[0].base_offset, [s.base_offset for s in group[1:]])
        except OSError as e:
            e.committed = True
            raise

    try:
        replaced = replace_sealed(log, group, commit, finish)
    except BaseException:
        w.abandon()
        raise
    if not replaced:
        w.abandon()
        return w.size, None
    return w.size, removed
