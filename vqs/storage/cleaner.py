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

Who does what: the map and the ``.cleaned`` files are cleaner_work.py's, over sealed
segments' files only, in this thread or (``worker``) in a worker process
(cleaner_worker.py), so that a pass's CPU leaves the owner's interpreter lock alone; the
planning, the space and steps 2-3 stay here.

Crash safety: consecutive cleanable segments ``s1..sk`` (bounded by ``segment_bytes`` and
MAX_SPAN) become one segment named ``s1``:

1. the survivors are written to ``{s1}.cleaned`` and fsynced (a crash, of the owner or the
   worker: deleted by the pass or at the next open);
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

from ..errors import CleanerWorkerError, ConfigError, DiskFullError
from ..record import codec_id
from . import fs
from . import space as _space
from .cleaner_work import CLEANED_SUFFIX, CleanWork, cleaned_path, segment_batches
from .cleaner_worker import Worker
from .durable_file import atomic_write, fsync_dir, remove_files
from .log_compaction import replace_sealed, sealed_segments
from .log_dir import list_segment_bases
from .log_settings import check_int
from .segment import Segment, segment_files, segment_name
from .segment_reads import segment_max_timestamp

logger = logging.getLogger(__name__)

SWAP_SUFFIX = ".swap"
CLEAN_POINT = "cleaner.checkpoint"
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
              stop=None, worker: bool = False, io_max_bytes_per_s: float | None = None) -> CleanStats:
    """One cleaning pass over ``log`` (module doc); ``force`` ignores the dirty ratio; ``stop()``
    true ends the pass before its next group (what is swapped stays; the clean point stays),
    and with a worker within ``cleaner_worker.STOP_POLL_S`` (the worker killed, its group
    abandoned): a pass never holds up its owner's close, however busy the machine.
    ``worker``: the map and the cleaned files are made in a worker process
    (cleaner_worker.py); this thread keeps only the planning and the swaps.
    ``io_max_bytes_per_s``: the pass reads and writes at most this many bytes a second
    (Kafka's ``log.cleaner.io.max.bytes.per.second``; None: no bound)."""
    check_rate("io_max_bytes_per_s", io_max_bytes_per_s)
    stats = CleanStats()
    now_ms = log._now_ms() if now_ms is None else now_ms
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
    work = (Worker(log, segs, io_max_bytes_per_s, stop) if worker
            else CleanWork(log.path, segs, io_max_bytes_per_s))
    try:
        _clean(log, settings, work, segs, ends, first_dirty, clean_point, now_ms, stop, stats)
    except CleanerWorkerError:
        if stop is None or not stop():
            raise
        # stopped in the middle of a group: the worker was killed, the group abandoned (its
        # .cleaned file removed), as a stop between groups leaves the next one
    finally:
        work.close()
    return stats


def _clean(log, settings, work, segs, ends, first_dirty, clean_point, now_ms, stop, stats) -> None:
    mapped = work.map(first_dirty, settings.max_map_bytes)
    map_end = ends[mapped - 1]
    horizon = now_ms - settings.delete_retention_ms
    marker = os.path.join(log.path, CLEAN_POINT)
    space = _space.for_path(log.path)
    floor = log.min_free_bytes // _space.CONTROL_DIVISOR  # a control write (space.py)
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
            if not os.path.exists(marker):  # before the first swap: the log may hold cleaned segments
                atomic_write(marker, json.dumps({"clean_point": clean_point}).encode())
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
    atomic_write(marker, json.dumps({"clean_point": map_end}).encode())


def _clean_group(log, work, g: list[int], group: list[Segment], end: int, codec: int, clean_point: int,
                 horizon: int):
    """Steps 1-3 for one group; (bytes written, records removed), removed None if abandoned."""
    cleaned = cleaned_path(log.path, group[0].base_offset)
    try:
        size, removed = work.write(g, codec, clean_point, horizon)
    except BaseException:
        remove_files(cleaned)  # (a worker that died leaves it; one that failed removed it)
        raise
    swap = os.path.join(log.path, _swap_name(group[0].base_offset, end))

    def commit() -> None:
        """Step 2. A failure takes the swap back: left beside a log that goes on, it would
        bring back segments retention deleted at the next open."""
        try:
            fs.rename(cleaned, swap)
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
        remove_files(cleaned)
        raise
    if not replaced:
        remove_files(cleaned)
        return size, None
    return size, removed
