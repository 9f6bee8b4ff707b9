"""The log: an ordered list of segments, one append position, one flush policy.

What an acknowledged append survives (the ``flush`` setting):

============  ==========================================  =========================================
policy        ``append`` returns when                     what a crash can lose; a full disk
============  ==========================================  =========================================
``always``    its batch is written and fsynced; threads    nothing acknowledged (process crash or
              appending at once share one fsync            power loss); a full disk refuses the
              (group commit)                               append (DiskFullError), never after
``interval``  it is in the log's buffer, whose bytes the   at most ``flush_interval_ms`` of appends;
              space governor counts as used; a            a full disk loses nothing acknowledged:
              background thread writes and fsyncs every   the governor kept room for the buffer
              interval                                    (space.py; another program that takes
                                                          it: the buffer waits for space)
``never``     it is in the buffer (counted as above);     since the last batch write (process
              written when a batch fills, fsynced at      crash), or since the OS last wrote
              ``close``                                   back; a full disk: as ``interval``
============  ==========================================  =========================================

Under every policy a segment sealed by a roll is fsynced by the background
flusher thread, not by the appender; ``flush()`` and ``always`` appends fsync
any sealed segment still pending first, so durability is always a prefix.

The ``Log`` class is the facade; its parts live beside it (Kafka splits
``UnifiedLog`` the same way):

- recovery.py: opening for writing, the numbered recovery passes, torn tail
  versus corruption (``LogLoader``);
- log_reads.py: reads (the run cache, ``read_batches``, ``scan_batches``,
  ``wait_for``, ``offset_for_time``); segment_reads.py: one segment's lookups;
- log_durability.py: fsyncs, the background fsync of sealed segments,
  ``flush``; its parts ``Syncs`` (the fsync state) and ``Checkpoint`` own
  their state; group_commit.py: shared fsyncs for ``always``;
- log_space.py: the ``Grant`` part (what the space governor counts as the
  log's), ``min_free_bytes``, ``disk_full``, ``failed``; log_repair.py: damage reads find;
- log_buffer.py: the write buffer and its grant from the space governor (space.py);
- retention.py: which segments retention deletes;
- log_dir.py: the directory's other files (checkpoint, clean marker,
  quarantine); readonly_tail.py: following a log another process owns.

This module keeps opening, the write buffer and the append path, rolling,
retention's deletions and closing.

Invariants (under ``_lock``):
- ``_sync.durable_end <= _written_end <= _next_offset`` and ``_start_offset <=
  _next_offset``: records below ``_written_end`` are in segment files, the rest
  in the write buffer (``_buf_*``, one list per column, visible to reads at once);
- ``_sync.durable_end`` never passes the first record of a sealed segment
  whose fsync is pending (``_sync.unsynced``), and the checkpoint's recovery
  point never passes it: durability is always a prefix;
- ``_reads.run`` holds records decoded from files (never the buffer) and is
  dropped whenever the start offset moves up or a segment goes away;
- ``_blocked`` is true when the log is closed, readonly or failed, or
  still carries the clean-shutdown marker (``defer_clean_marker``), or is off
  the interval flusher while idle (``_flush_idle``), or appends are refused
  for space (``_low_space``: the governor refused; ``_space_short``: a write
  found none): the append hot path tests this one flag and only then asks why;
- a full disk: every buffered byte is covered by the log's grant from the
  space governor (log_buffer.py), and an append it cannot cover is refused
  *before* it is buffered: an acknowledged record is never refused later.
  A write that finds no space anyway (ENOSPC/EDQUOT: soft, space.py) keeps
  the buffer under ``interval``/``never`` (written once space is back), and
  under ``always`` drops its records, whose appenders raise
  (``_drop_buffer_locked``). Either way a refused record is never written
  later and the buffer does not grow while the disk is full;
- ``_clean_marker``: the marker of the last clean close is still on disk and
  no file changed since; the first write removes it (``_check_writable``)
  before it changes anything, and ``close`` then has nothing to write.

Files: segments open their files on demand through the process's file cache
(file_cache.py, bounded by ``max_open_files``); an idle log holds none.

(Over 500 lines: the facade's public methods and the append hot path -
buffer, batch writes, roll - stay in one class body so appends read slots
directly, with no delegation per call.)
"""

from __future__ import annotations

import bisect
import errno
import os
import threading
import time
import weakref
from collections.abc import Sequence
from itertools import accumulate

from ..errors import (
    ConfigError,
    DiskFullError,
    LogFailedError,
)
from . import space as _space
from .dir_lock import DirLock
from .durable_file import fsync_dir, make_dirs
from .fd_limit import FD_EXHAUSTED, too_many_open_files
from .file_cache import CACHE
from .flusher import Flusher
from .group_commit import GroupCommit
from .log_buffer import NULL, LogBuffer, batches_bound, nulls_restored
from .log_buffer import as_bytes as _as_bytes
from .log_dir import CHECKPOINT, CLEAN_MARKER, QUARANTINE_DIR, load_gaps, read_checkpoint
from .log_durability import Checkpoint, LogDurability, Syncs
from .log_reads import LogReads, ReadCache
from .log_repair import LogRepair
from .log_space import Grant, LogSpace
from .readonly_tail import find_tail, follow_segments, open_segments
from .record_batch import (
    HEADER,
    codec_id,
    encode_batch_parts,
)
from .recovery import LogLoader
from .retention import segments_past_retention
from .segment import ALLOCATE_AHEAD, Segment

__all__ = [
    "CHECKPOINT", "CLEAN_MARKER", "FLUSH_POLICIES", "MAX_SEGMENT_SPAN", "QUARANTINE_DIR",
    "RECOVERY_POLICIES", "Log",
]

FLUSH_POLICIES = ("always", "interval", "never")
RECOVERY_POLICIES = ("fail", "skip", "truncate")
#: Relative offsets are u32 in the indexes: roll before a segment spans more.
MAX_SEGMENT_SPAN = (1 << 32) - (1 << 24)

_time_ns = time.time_ns
#: errnos that mean "no space": the filesystem is full, or the quota is spent
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_ONLY_BYTES = {bytes}


def _now_ms() -> int:
    return _time_ns() // 1_000_000


def _index_capacity(segment_bytes: int, index_interval_bytes: int) -> int:
    """A new segment's preallocated offset-index bytes: an entry per index interval of a full segment."""
    return min(64 << 20, max(4096, (segment_bytes // max(index_interval_bytes, 256) + 16) * 8))


class Log(LogReads, LogDurability, LogSpace, LogRepair, LogBuffer):
    """A durable, segmented, checksummed append-only log (see module doc).

    Open with :meth:`Log.open`. Thread-safe. One process owns a log directory
    (an exclusive lock); other processes may open it with ``readonly=True``.
    """

    # Slots: the append path reads a dozen attributes per call, and a plain
    # instance dict of this many keys is a hash lookup for each.
    __slots__ = (
        "_base_offsets", "_blocked", "_buf_bytes", "_buf_extra", "_buf_gen", "_buf_has_extra", "_buf_headers", "_buf_nulls",
        "_buf_keys", "_buf_timestamps", "_buf_values", "_appended", "_batch_max_bytes", "_batch_max_records",
        "_batch_max_records_less_1", "_checkpoint", "_clean_marker", "_closed", "_codec_id", "_dir_lock",
        "_failed", "_flush_always", "_flush_idle", "_gaps", "_group", "_index_capacity_bytes",
        "_grant", "_low_space", "_space_short", "on_disk_short",
        "_lock", "_next_offset", "_now_ms", "_reads", "_read_waiters",
        "_flush_bytes", "_flush_records",
        "_segments", "_start_offset", "_sync", "_system_clock",
        "_tail_hint", "_written_end", "compression", "flush_interval_ms",
        "flush_policy", "index_interval_bytes", "path", "quarantined_batches", "readonly",
        "recovery", "retention_bytes", "retention_ms", "segment_bytes", "segment_ms",
        "__weakref__",
    )

    def __init__(self, path: str, **settings):
        raise TypeError("use Log.open(path, ...)")

    # ------------------------------------------------------------------ open

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        segment_bytes: int = 128 << 20,
        segment_ms: int | None = 7 * 86_400_000,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        flush: str = "interval",
        flush_interval_ms: int = 100,
        recovery: str = "fail",
        compression: str | None = None,
        index_interval_bytes: int = 4096,
        batch_max_records: int = 4096,
        batch_max_bytes: int = 1 << 20,
        readonly: bool = False,
        lock: bool = True,
        checkpoint_interval_ms: int = 5000,
        min_free_bytes: int | None = None,
        control: bool = False,
        defer_clean_marker: bool = False,
        clock=None,
    ) -> Log:
        """Open (creating if needed) the log in directory ``path``.

        Settings are validated here; a bad value raises ConfigError naming it.
        The default flush policy is ``interval`` (100 ms): an acknowledged
        append survives a process crash once the next flush ran, and at most
        ``flush_interval_ms`` of appends can be lost. Use ``flush="always"``
        for appends that survive anything once acknowledged.
        ``min_free_bytes`` (None: the filesystem's default, the smaller of
        64 MiB and 5 % of its size; 0: off): appends are refused with
        DiskFullError (naming the setting) once they would leave less free
        space than that (space.py), so deletes, checkpoints, rolls and
        ``close`` always have room; they resume on their own once space is
        freed. Appends already accepted (buffered) are still written.
        ``control``: the appends are control writes (a queue's lease records),
        refused only under a quarter of the floor, so a full queue drains.
        ``defer_clean_marker``: after a clean close, change no file at open
        (the clean-shutdown marker and the checkpoint stay until the first
        write), so reopening an idle log costs no fsync; for callers that do
        not read the marker as "the previous owner closed cleanly" after
        opening (a broker's partitions; queues do read it).
        """
        self = object.__new__(cls)
        self.path = os.fspath(path)
        # clock: seconds since the epoch, as time.time. Stamps records appended
        # without a timestamp, ages segments and drives time retention.
        self._now_ms = _now_ms if clock is None else (lambda: int(clock() * 1000))
        self._system_clock = clock is None
        if flush not in FLUSH_POLICIES:
            raise ConfigError(f"flush={flush!r}: must be one of {', '.join(FLUSH_POLICIES)}")
        if recovery not in RECOVERY_POLICIES:
            raise ConfigError(f"recovery={recovery!r}: must be one of {', '.join(RECOVERY_POLICIES)}")
        for name, val, lo in (
            ("segment_bytes", segment_bytes, 128),
            ("flush_interval_ms", flush_interval_ms, 1),
            ("index_interval_bytes", index_interval_bytes, 0),
            ("batch_max_records", batch_max_records, 1),
            ("batch_max_bytes", batch_max_bytes, 1),
            ("checkpoint_interval_ms", checkpoint_interval_ms, 1),
        ):
            if not isinstance(val, int) or isinstance(val, bool) or val < lo:
                raise ConfigError(f"{name}={val!r}: must be an integer >= {lo}")
        for name, val in (("segment_ms", segment_ms), ("retention_ms", retention_ms),
                          ("retention_bytes", retention_bytes), ("min_free_bytes", min_free_bytes)):
            if val is not None and (not isinstance(val, int) or isinstance(val, bool) or val < 0):
                raise ConfigError(f"{name}={val!r}: must be None or an integer >= 0")
        self._codec_id = codec_id(compression)
        self.compression = compression
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.retention_ms = retention_ms
        self.retention_bytes = retention_bytes
        self.flush_policy = flush
        self.flush_interval_ms = flush_interval_ms
        self.recovery = recovery
        self.index_interval_bytes = index_interval_bytes
        self.readonly = readonly
        self._flush_always = flush == "always"
        self._batch_max_records = batch_max_records
        self._batch_max_records_less_1 = batch_max_records - 1
        self._batch_max_bytes = batch_max_bytes
        self._grant = Grant(None, 0, control)  # what the governor counts as this log's (log_space.py)
        self._flush_bytes = self._flush_records = 0
        self._low_space = False     # refusing appends: the governor refused
        self._space_short = False   # the last batch write found no space (cleared by the next one)
        #: called (under the lock; must not block or raise) when a write finds no
        #: space or is refused under min_free_bytes (broker/queue/maintenance.py)
        self.on_disk_short = None
        self._index_capacity_bytes = _index_capacity(segment_bytes, index_interval_bytes)

        self._lock = threading.Lock()
        self._sync = Syncs(self._lock, self)
        self._appended = threading.Condition(self._lock)
        self._checkpoint = Checkpoint(self.path, checkpoint_interval_ms / 1000)
        self._group = GroupCommit()  # flush="always": appenders share fsyncs
        self._read_waiters = 0  # threads in wait_for: appends notify them
        self._failed: BaseException | None = None
        self._closed = False
        self._clean_marker = False
        self._flush_idle = False  # off the interval flusher until the next write (log_durability.py)
        # closed, readonly, failed, refused for space or marked clean: appends must check why
        self._blocked = readonly
        self._dir_lock: DirLock | None = None
        self._reset_buffer()
        self._reads = ReadCache()  # the decoded run and where a sequential read continues (log_reads.py)
        self._tail_hint = None  # readonly: where the last search for the tail ended
        self.quarantined_batches = 0
        # {expected offset: base offset that may follow it}, shared with the segments
        # (a writer's loader fills it from its one listing of the directory)
        self._gaps: dict[int, int] = {}

        if readonly:
            if not os.path.isdir(self.path):
                raise ConfigError(f"readonly log {self.path} does not exist")
            self._gaps.update(load_gaps(self.path))
            self._open_readonly()
            return self
        if lock:  # (otherwise the loader makes the directory if it is missing)
            make_dirs(self.path)  # (a spent quota: DiskFullError)
            self._dir_lock = DirLock(self.path).acquire()
        else:
            make_dirs(self.path)
        governor = _space.for_path(self.path)
        self._grant = Grant(governor, _space.floor_of(governor, min_free_bytes, control), control)
        weakref.finalize(self, self._grant.dropped)
        try:
            self._open_writer(defer_clean_marker)
        except OSError as e:
            self._close_files()
            if self._dir_lock:
                self._dir_lock.release()
            if e.errno in FD_EXHAUSTED:
                raise too_many_open_files(self.path, e, held=CACHE.open_files, cap=CACHE.max_open_files) from e
            if e.errno in DISK_FULL:  # a new log's first files (btrfs under a spent quota)
                raise DiskFullError(f"opening {self.path} failed: the disk is full ({e.strerror})", path=self.path) from e
            raise
        except BaseException:
            self._close_files()
            if self._dir_lock:
                self._dir_lock.release()
            raise
        self._set_thresholds()
        if flush == "interval" and not self._clean_marker:
            Flusher.shared().register(self, flush_interval_ms / 1000)
        elif flush != "never":
            # flush="always": the flusher checkpoints it and takes its grant back when it is
            # idle; from its first write (so does a clean-opened "interval" log)
            self._flush_idle = self._blocked = True
        return self

    def _reset_buffer(self) -> None:
        self._buf_values: list = []
        self._buf_timestamps: list = []
        self._buf_keys: list | None = None
        self._buf_headers: list | None = None
        self._buf_has_extra = False  # some buffered record has a key, headers or a null value
        self._buf_nulls = False  # some buffered value is NULL (log_buffer.py)
        self._buf_bytes = 0
        self._buf_extra = 0  # bound of the buffered keys' and headers' bytes (log_buffer.py)
        self._buf_gen: list = [None]  # always: [the error] once dropped unwritten (_drop_buffer_locked)

    def _segment(self, base: int, *, active: bool, create: bool = False) -> Segment:
        return Segment(
            self.path, base, active=active, owner=not self.readonly, create=create, gaps=self._gaps,
            index_interval_bytes=self.index_interval_bytes,
            index_capacity_bytes=self._index_capacity_bytes,
        )

    def _open_writer(self, defer_clean_marker: bool = False) -> None:
        loader = LogLoader(self.path, self.recovery, self._segment, defer_marker=defer_clean_marker,
                           gaps=self._gaps)
        self._segments = loader.segments  # closed by open() if loading fails
        loaded = loader.load()
        self.quarantined_batches += loaded.quarantined_batches
        self._base_offsets = [s.base_offset for s in self._segments]
        active = self._segments[-1]
        self._written_end = self._next_offset = self._sync.durable_end = active.next_offset
        self._start_offset = min(max(self._base_offsets[0], loaded.start_offset), self._next_offset)
        active.created_ms = self._now_ms()
        if loaded.marker_kept:
            # Nothing changed: the checkpoint on disk is the clean close's.
            self._checkpoint.recovery_point = loaded.recovery_point
            self._clean_marker = self._blocked = True
        else:
            # On a full disk the checkpoint waits (the old one stays valid): a full
            # log must open so that it can be drained.
            self._try_checkpoint(self._next_offset)
        for seg in self._segments:
            seg.release_files()  # an idle log holds no descriptor (reopened on use)

    def _open_readonly(self) -> None:
        self._segments = open_segments(self.path, self._segment)
        if not self._segments:
            raise ConfigError(f"{self.path} holds no log segments")
        self._base_offsets = [s.base_offset for s in self._segments]
        _, lso = read_checkpoint(self.path)
        self._find_readonly_tail()
        self._start_offset = min(max(self._base_offsets[0], lso), self._next_offset)

    def _find_readonly_tail(self) -> None:
        self._tail_hint = find_tail(self._segments[-1], self._tail_hint)
        self._written_end = self._next_offset = self._sync.durable_end = self._tail_hint[2]

    def refresh(self) -> None:
        """Readonly logs: pick up segments and batches the owner appended (and
        forget segments its retention deleted)."""
        if not self.readonly:
            return
        with self._lock:
            if not follow_segments(self.path, self._segments, self._segment):
                return
            self._base_offsets = [s.base_offset for s in self._segments]
            self._find_readonly_tail()
            _, lso = read_checkpoint(self.path)
            self._start_offset = min(max(self._base_offsets[0], lso, self._start_offset), self._next_offset)
            self._reads.run = None

    # --------------------------------------------------------------- append

    def append(self, value, *, key=None, headers=None, timestamp_ms: int | None = None) -> int:
        """Append one record; return its offset.

        The record is buffered into the open batch (and visible to reads at
        once); what the return promises depends on the flush policy (module doc).
        ``value`` None is a null value (Kafka's tombstone), read back as None.
        """
        null = False
        if value.__class__ is not bytes:
            if value is None:
                value, null = NULL, True
            else:
                value = _as_bytes(value, "value")
        if timestamp_ms is None:
            # The system clock read inline, not through self._now_ms() (callgrind:
            # 8,905 -> 7,958 instructions per 100 B append with __slots__).
            timestamp_ms = _time_ns() // 1_000_000 if self._system_clock else self._now_ms()
        with self._lock:
            if self._blocked:
                self._check_appendable(len(value))
            off = self._next_offset
            self._next_offset = off + 1
            self._buf_values.append(value)
            self._buf_timestamps.append(timestamp_ms)
            if key is not None or headers or self._buf_has_extra or null:
                self._add_extra(key, headers, null)
            nbytes = self._buf_bytes + len(value)
            self._buf_bytes = nbytes
            # a full batch, or the end of the grant (log_buffer.py)
            if nbytes >= self._flush_bytes or off - self._written_end >= self._flush_records:
                self._buffer_full_locked()
            if self._read_waiters:
                self._appended.notify_all()
            if self._flush_always:
                step = self._group.join_locked()
                gen = self._buf_gen
        if self._flush_always:
            self._group.await_durable(self, off + 1, step, gen)
        return off

    def append_batch(
        self,
        values: Sequence,
        *,
        keys: Sequence | None = None,
        headers: Sequence | None = None,
        timestamps_ms: Sequence[int] | int | None = None,
        producer: tuple[int, int, int] | None = None,
        claim=None,
    ) -> int:
        """Append many records as one write (split into batches of at most
        ``batch_max_bytes``); return the first offset. Records buffered by
        ``append`` are written first, so order is kept. ``producer`` is
        (producer id, epoch, base sequence) of an idempotent producer, kept in
        the batch headers; a split batch's pieces all carry its base sequence,
        which tells them apart from separate batches when the producer state
        is rebuilt from the log (broker/producer_state.py). ``claim``: the
        space.Claim that counted these records while the caller buffered them
        (acknowledged): its bytes become the batch's grant, so the governor
        cannot refuse what was already admitted."""
        n = len(values)
        if n == 0:
            raise ConfigError("append_batch needs at least one value")
        nulls = False
        if set(map(type, values)) != _ONLY_BYTES:
            nulls = None in values
            values = [v if v.__class__ is bytes or v is None else _as_bytes(v, "value") for v in values]
        if keys is not None:
            if len(keys) != n:
                raise ConfigError(f"keys has {len(keys)} entries for {n} values")
            keys = [k if k is None or k.__class__ is bytes else _as_bytes(k, "key") for k in keys]
        if headers is not None and len(headers) != n:
            raise ConfigError(f"headers has {len(headers)} entries for {n} values")
        if timestamps_ms is None:
            timestamps_ms = self._now_ms()
        elif not isinstance(timestamps_ms, int) and len(timestamps_ms) != n:
            raise ConfigError(f"timestamps_ms has {len(timestamps_ms)} entries for {n} values")
        # (also where the batches split)
        ends = list(accumulate(len(v) if v is not None else 0 for v in values) if nulls else accumulate(map(len, values)))
        total = ends[-1]
        bound = batches_bound(n, total, self._batch_max_bytes, keys, headers)
        if self._codec_id:
            bound += (bound >> 7) + 128 * (1 + bound // self._batch_max_bytes)
        with self._lock:
            if claim is not None and claim.held:
                self._grant.hand_over(claim, bound + self._buffer_bound())
            if self._blocked:
                self._check_appendable(total)
            self._write_buffer_locked()
            try:
                self._take_locked(bound)
            except DiskFullError:
                self._low_space = self._blocked = True
                raise
            first = self._written_end
            # Split so that no batch exceeds batch_max_bytes (a single huge value
            # still makes a batch of its own).
            i = before = 0
            while i < n:
                j = max(bisect.bisect_right(ends, before + self._batch_max_bytes, i), i + 1)
                before = ends[j - 1]
                if i == 0 and j == n:
                    vs, ks, hs, ts = values, keys, headers, timestamps_ms
                else:
                    vs = values[i:j]
                    ks = keys[i:j] if keys is not None else None
                    hs = headers[i:j] if headers is not None else None
                    ts = timestamps_ms if isinstance(timestamps_ms, int) else timestamps_ms[i:j]
                base = self._written_end
                if producer is None:
                    parts = encode_batch_parts(base, vs, keys=ks, headers=hs, timestamps=ts, codec=self._codec_id,
                                               nulls=nulls)
                else:
                    parts = encode_batch_parts(base, vs, keys=ks, headers=hs, timestamps=ts, codec=self._codec_id,
                                               producer_id=producer[0], producer_epoch=producer[1],
                                               base_sequence=producer[2], nulls=nulls)
                try:
                    self._write_parts_locked(parts, base, base + (j - i))
                except BaseException:
                    self._next_offset = self._written_end
                    self._settle_grant()
                    raise
                i = j
            self._next_offset = self._written_end
            self._settle_grant()
            if self._read_waiters:
                self._appended.notify_all()
            end = self._written_end
            if self._flush_always:
                step = self._group.join_locked()
        if self._flush_always:
            self._group.await_durable(self, end, step)
        return first

    def _write_buffer_locked(self) -> None:
        bv = self._buf_values
        if not bv:
            return
        base = self._written_end
        nulls = self._buf_nulls
        parts = encode_batch_parts(
            base, nulls_restored(bv) if nulls else bv, keys=self._buf_keys, headers=self._buf_headers,
            timestamps=self._buf_timestamps, codec=self._codec_id, nulls=nulls,
        )
        try:
            self._write_parts_locked(parts, base, base + len(bv))
        except DiskFullError as e:
            if self._flush_always:
                self._drop_buffer_locked(e)
            raise
        self._reset_buffer()
        self._settle_grant()

    def _write_parts_locked(self, parts: list, base: int, next_offset: int) -> None:
        hdr = HEADER.unpack_from(parts[0], 0)
        nbytes = hdr[1] + 12  # batch_length counts everything after its own field
        seg = self._active
        if seg.size > 0 and (
            seg.size + nbytes > self.segment_bytes
            or next_offset - seg.base_offset > MAX_SEGMENT_SPAN
            or (self.segment_ms is not None and self._now_ms() - (seg.created_ms or 0) >= self.segment_ms)
        ):
            self._roll_locked()  # (no space for the next segment's file: this one grows past segment_bytes)
            seg = self._active
        max_ts = hdr[8]
        try:
            seg.append(parts, base, next_offset, max_ts, nbytes,
                       seg.size + nbytes > seg.allocated and self._grant.ahead(ALLOCATE_AHEAD))
        except OSError as e:
            # Cut any partial write so the file ends at a batch boundary again.
            try:
                seg.cut_pending = True
                seg.cut_tail()
            except OSError as cut:
                if cut.errno not in DISK_FULL:  # (no space even to cut: before the next write)
                    self._failed = e
                    self._blocked = True
            if e.errno in DISK_FULL and self._failed is None:
                # Not latched: the file ends at a batch boundary again, and the
                # next write succeeds once space is freed.
                err = self._short_error_locked(seg, e)
                # The error may be kept (queue.Full's cause): its traceback must
                # not pin the segment, whose space a later reclaim frees.
                e.__traceback__ = None
                seg = None
                raise err from e
            # Any other error (EIO: a failing device) latches, as a failed fsync
            # does: what the kernel kept of the write cannot be trusted.
            self._failed = e
            self._blocked = True
            raise LogFailedError(f"write to {seg.log_path} at position {seg.size} failed: {e}",
                                 path=seg.log_path) from e
        if self._space_short:
            self._space_short = False
            self._unblock()
        self._grant.wrote(nbytes, seg)
        self._written_end = next_offset

    def _short_error_locked(self, seg: Segment, e: OSError) -> DiskFullError:
        """A write found no space (``e``: ENOSPC/EDQUOT), nothing of it is in the
        file: refused until space is back (log_space.py); the error to raise."""
        self._space_short, self._blocked = e.errno, True  # the errno: EDQUOT (log_space.py)
        self._grant.space.short()
        if self.on_disk_short is not None:
            self.on_disk_short()
        return DiskFullError(f"write to {seg.log_path} at position {seg.size} failed: "
                             f"the disk is full ({e.strerror})", path=seg.log_path)

    @property
    def _active(self) -> Segment:
        return self._segments[-1]

    def _roll_locked(self) -> bool:
        """Seal the active segment and start the next (a control write: never
        refused by the governor); False (nothing changed) when the next
        segment's file finds no space (the active one grows past
        ``segment_bytes`` meanwhile; the next write tries again)."""
        old = self._active
        try:
            new = self._segment(self._written_end, active=True, create=True)
        except OSError as e:
            if e.errno not in DISK_FULL:
                raise
            self._grant.space.short()
            return False
        # Sealed without an fsync: the appender goes on while the shared flusher
        # thread fsyncs it (as Kafka flushes a rolled segment asynchronously).
        # Until then the recovery point stays below it, so a power loss that
        # tears its tail is recovered like a torn tail (see recovery.py).
        old.seal(sync=False)
        new.created_ms = self._now_ms()
        fsync_dir(self.path)
        self._segments.append(new)
        self._base_offsets.append(new.base_offset)
        self._sync.unsynced.append(old)
        Flusher.shared().register(self._sync.seal_job, 0.0)
        if self.retention_ms is not None or self.retention_bytes is not None:
            self._apply_retention_locked(self._now_ms())
        return True

    def _count_indexes_locked(self) -> None:
        """The active segment's indexes (offset index + time index at 1.5x) are
        preallocated at its first write: counted as this log's from its first
        take until then (never refused: a roll is a control write)."""
        self._grant.count_indexes(self._index_capacity_bytes * 5 // 2, self.path)

    # -------------------------------------------------------------- retention

    def delete_before(self, offset: int) -> int:
        """Make ``offset`` the new start (never past the end) and delete the
        whole segments below it; returns the number of segments deleted. The
        active segment is rolled for deletion only once it holds at least a
        quarter of ``segment_bytes``: disk use follows the backlog to within
        that much. While space is short (log_space.py ``_roll_worth_it``), a
        wholly consumed active segment is rolled and deleted whatever its size,
        so a drained log gives its space back on a filesystem smaller than a
        segment."""
        with self._lock:
            # (offset == start: a consumed roll that found no room earlier is tried
            # again while space is short, log_space.py)
            again = min(offset, self._next_offset) == self._start_offset and self._consumed_left()
            if self._clean_marker and min(offset, self._next_offset) <= self._start_offset and not again:
                return 0  # nothing to do: the clean-shutdown marker may stay
            self._check_writable()
            offset = min(offset, self._next_offset)
            if offset <= self._start_offset and not again:
                return 0
            if offset > self._written_end:
                try:
                    self._write_buffer_locked()
                except DiskFullError:
                    # A full disk: delete what is written (that frees space); the
                    # buffered records stay for the next write.
                    offset = self._written_end
                    if offset <= self._start_offset:
                        return 0
            # a consumed active segment rolled when worth it, the segments below go (log_space.py)
            n = self._delete_consumed_locked(offset)
            self._start_offset = offset
            self._reads.run = None
            self._try_checkpoint()  # deleting frees space: never refused for the lack of it
            return n

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past ``retention_ms`` (by their newest record)
        or beyond ``retention_bytes``; the active segment only on a full disk."""
        with self._lock:
            now_ms = self._now_ms() if now_ms is None else now_ms
            if self._clean_marker and not self._retention_due(now_ms):  # (log_space.py)
                return 0  # nothing to delete: the clean-shutdown marker may stay
            self._check_writable()
            return self._apply_retention_locked(now_ms)

    def _apply_retention_locked(self, now_ms: int) -> int:
        rolled = self._roll_expired_locked(now_ms)  # log_space.py: a full disk's expired active segment
        n = segments_past_retention(self._segments, self.retention_ms, self.retention_bytes, now_ms)
        for _ in range(n):
            self._delete_first_locked()
        if n:
            self._start_offset = max(self._start_offset, self._base_offsets[0])
            fsync_dir(self.path)
            self._try_checkpoint()
        return n + rolled

    def reconfigure(self, *, segment_bytes: int = 128 << 20, retention_ms: int | None = None,
                    retention_bytes: int | None = None, compression: str | None = None) -> None:
        """Change the settings a topic may alter while open (the defaults are ``open``'s): the
        next batch written is compressed so, the next roll is at ``segment_bytes``, the next
        retention pass uses the new limits. Nothing written changes. Checked first (ConfigError,
        nothing changed), as ``open`` checks them."""
        codec = codec_id(compression)
        if not isinstance(segment_bytes, int) or isinstance(segment_bytes, bool) or segment_bytes < 128:
            raise ConfigError(f"segment_bytes={segment_bytes!r}: must be an integer >= 128")
        for name, val in (("retention_ms", retention_ms), ("retention_bytes", retention_bytes)):
            if val is not None and (not isinstance(val, int) or isinstance(val, bool) or val < 0):
                raise ConfigError(f"{name}={val!r}: must be None or an integer >= 0")
        with self._lock:
            self._codec_id, self.compression = codec, compression
            self.segment_bytes, self.retention_ms, self.retention_bytes = segment_bytes, retention_ms, retention_bytes
            self._index_capacity_bytes = _index_capacity(segment_bytes, self.index_interval_bytes)

    # ------------------------------------------------------------------ info

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments) + self._buf_bytes

    @property
    def batch_max_bytes(self) -> int:
        """The most value bytes one record batch of ``append_batch`` holds (more are split)."""
        return self._batch_max_bytes

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"Log({self.path!r}, start={self._start_offset}, end={self._next_offset}, "
                f"segments={len(self._segments)}, flush={self.flush_policy!r})")

    # ----------------------------------------------------------------- close

    def close(self) -> None:
        """Write and fsync everything, trim the indexes, write the checkpoint and
        the clean-shutdown marker, release the directory lock. Idempotent."""
        if self._closed:
            return
        with self._lock:
            if self._closed:
                return
            full = None
            self._grant.floor = 0  # closing writes what is buffered: the room kept is for this
            try:
                if not self.readonly and self._failed is None and not self._clean_marker:
                    self._sync.wait_idle()
                    try:
                        self._write_buffer_locked()
                    except DiskFullError as e:
                        full = e  # make what was written durable, then raise it
                    unsealed = self._seal_for_close()  # (the sealed segments' fsyncs first; EIO: LogFailedError)
                    full = full or unsealed
                    self._sync.durable_end = self._written_end
                    # A clean marker only with a checkpoint that matches it (on a
                    # full disk neither is written: the next open recovers).
                    if self._try_checkpoint(self._written_end) and unsealed is None:
                        self._try_clean_marker()
            finally:
                self._closed = True
                self._checkpoint.retire()
                self._blocked = True
                self._appended.notify_all()
                self._sync.done.notify_all()
                self._group.release_all()  # durable now, or they see the log closed
                self._grant.release()
                self._close_files()
                if self._dir_lock is not None:
                    self._dir_lock.release()
        if full is not None:
            raise full

    def _close_files(self) -> None:
        for s in getattr(self, "_segments", []):
            try:
                s.close()
            except OSError:
                pass
        self._reads.forget()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
