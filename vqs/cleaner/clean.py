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

Who does what: the map and the ``.cleaned`` files are work.py's, over sealed segments' files
only, in this thread or (``worker``) in a worker process (worker.py), so that a pass's CPU
leaves the owner's interpreter lock alone; the planning and the space stay here; the swap
that puts a ``.cleaned`` file in place of its segments, crash-safe and under the log's lock,
is storage's (``replace_sealed``, whose module doc gives the steps).

Space: the output is a control write (storage's space governor), so on a full disk the cleaner still runs
(and frees space) until even that room is gone; ENOSPC met anyway abandons the pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..disk import floor_of, fs, space_for
from ..errors import CleanerWorkerError, ConfigError, DiskFullError
from ..record import codec_id
from ..storage import (
    Segment,
    check_int,
    cleaned_path,
    has_clean_point,
    log_now_ms,
    read_clean_point,
    remove_files,
    replace_sealed,
    sealed_segments,
    segment_batches,
    segment_max_timestamp,
    write_clean_point,
)
from .work import CleanWork
from .worker import Worker

logger = logging.getLogger(__name__)

#: a cleaned segment spans fewer offsets (the indexes' relative offsets are u32)
MAX_SPAN = 1 << 31


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


def check_rate(name: str, value) -> None:
    """A bytes-per-second bound: None (none) or a number > 0 (ConfigError names ``name``)."""
    if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0):
        raise ConfigError(f"{name} must be a number > 0 or None, not {value!r}")


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
              stop=None, worker: bool = False, io_max_bytes_per_s: float | None = None,
              snapshot_producers=None) -> CleanStats:
    """One cleaning pass over ``log`` (module doc); ``force`` ignores the dirty ratio; ``stop()``
    true ends the pass before its next group (what is swapped stays; the clean point stays),
    and with a worker within ``worker.STOP_POLL_S`` (the worker killed, its group
    abandoned): a pass never holds up its owner's close, however busy the machine.
    ``worker``: the map and the cleaned files are made in a worker process
    (worker.py); this thread keeps only the planning and the swaps.
    ``io_max_bytes_per_s``: the pass reads and writes at most this many bytes a second
    (Kafka's ``log.cleaner.io.max.bytes.per.second``; None: no bound).
    ``snapshot_producers()``: called once a pass is due, records the idempotent producers'
    state of the log durably elsewhere (the broker's snapshot) and returns the offset it
    covers; a producer's last batch below it is cleaned like any other (Kafka empties it),
    where without it the batch stays whole (the state is rebuilt from the log: one whose
    last batch were gone would be refused as out of order when it goes on)."""
    check_rate("io_max_bytes_per_s", io_max_bytes_per_s)
    stats = CleanStats()
    now_ms = log_now_ms(log) if now_ms is None else now_ms
    segs, ends = sealed_segments(log)
    clean_point = read_clean_point(log.path)
    first_dirty = next((i for i, s in enumerate(segs) if s.base_offset >= clean_point), len(segs))
    if first_dirty == len(segs):
        return stats  # nothing sealed since the last pass (an idle log: no file is touched)
    n = first_dirty  # the cleanable prefix: what is below the clean point was old enough before
    while n < len(segs) and segment_max_timestamp(segs[n]) <= now_ms - settings.min_compaction_lag_ms:
        n += 1
    segs, ends = segs[:n], ends[:n]
    if first_dirty == len(segs):
        return stats
    dirty = sum(s.size for s in segs[first_dirty:])
    total = sum(s.size for s in segs)
    due = force or (total and dirty / total >= settings.min_cleanable_dirty_ratio)
    if not due and settings.max_compaction_lag_ms is not None:
        first = next(segment_batches(segs[first_dirty]), None)
        due = first is not None and first.first_timestamp_ms <= now_ms - settings.max_compaction_lag_ms
    if not due:
        return stats
    covered = snapshot_producers() if snapshot_producers is not None else 0
    work = (Worker(log, segs, io_max_bytes_per_s, stop) if worker
            else CleanWork(log.path, segs, io_max_bytes_per_s))
    try:
        _clean(log, settings, work, segs, ends, first_dirty, clean_point, now_ms, stop, stats, covered)
    except CleanerWorkerError:
        if stop is None or not stop():
            raise
        # stopped in the middle of a group: the worker was killed, the group abandoned (its
        # .cleaned file removed), as a stop between groups leaves the next one
    finally:
        work.close()
    return stats


def _clean(log, settings, work, segs, ends, first_dirty, clean_point, now_ms, stop, stats, covered) -> None:
    mapped = work.map(first_dirty, settings.max_map_bytes, covered)
    map_end = ends[mapped - 1]
    horizon = now_ms - settings.delete_retention_ms
    space = space_for(log.path)
    floor = floor_of(space, log.min_free_bytes, control=True)
    codec = codec_id(log.compression)
    for g in _groups(segs[:mapped], ends[:mapped], log.segment_bytes):
        if stop is not None and stop():
            return
        group = [segs[i] for i in g]
        need = sum(s.size for s in group)
        try:
            space.take(need, floor, log.path, control=True)
        except DiskFullError as e:
            logger.info("log cleaner waits for space in %s: %s", log.path, e)
            return
        written = 0
        try:
            if not has_clean_point(log.path):  # before the first swap: the log may hold cleaned segments
                write_clean_point(log.path, clean_point)
            written, removed = _clean_group(log, work, g, group, ends[g[-1]], codec, clean_point, horizon)
        except (OSError, DiskFullError) as e:
            if isinstance(e, DiskFullError) or e.errno in fs.NO_SPACE:
                space.short()
                logger.info("log cleaner found no space in %s; trying again later", log.path)
                return
            raise
        finally:
            space.wrote(written)
            space.give(need - written)
        if removed is None:
            return  # the log changed under the pass (retention, close): next time
        space.freed()
        stats.segments_in += len(group)
        stats.segments_out += 1
        stats.bytes_in += need
        stats.bytes_out += written
        stats.records_removed += removed
    write_clean_point(log.path, map_end)


def _clean_group(log, work, g: list[int], group: list[Segment], end: int, codec: int, clean_point: int,
                 horizon: int):
    """One group written and swapped in; (bytes written, records removed), removed None if
    the log changed under the pass (nothing done)."""
    try:
        size, removed = work.write(g, codec, clean_point, horizon)
    except BaseException:
        remove_files(cleaned_path(log.path, group[0].base_offset))  # (a dead worker leaves it)
        raise
    return size, (removed if replace_sealed(log, group, end) else None)
