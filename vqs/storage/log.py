"""The log: an ordered list of segments, one append position, one flush policy.

``Log`` is a facade over parts that each own their state (as Kafka's ``UnifiedLog`` over
``LocalLog``), all under the log's one lock: ``_segs`` (segments.py), ``_buf``
(log_buffer.py), ``_space``/``_grant`` (log_space.py), ``_sync`` (log_durability.py: what an
acknowledged append survives), ``_reads`` (log_reads.py), ``_group`` (group_commit.py);
recovery.py, retention.py and log_repair.py are functions over it. No part holds the log, so
an unclosed log is freed when dropped (its grant goes back through ``weakref.finalize``).

Invariants (under ``_lock``):
- ``_sync.durable_end <= _written_end <= _next_offset``, ``_start_offset <= _next_offset``:
  records below ``_written_end`` are in segment files, the rest in the write buffer;
- ``_blocked`` is true when the log is closed, readonly, failed, carries the clean-shutdown
  marker, is off the flusher while idle, or refuses appends for space: the append hot path
  tests this one flag;
- on a full disk an append is refused *before* it is buffered (log_space.py).

(Over 500 lines: the facade's public methods and the append hot path - buffer, batch writes,
roll - stay in one class body so appends read slots directly, with no delegation per call.)
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from itertools import accumulate

from ..disk import FD_EXHAUSTED, floor_of, fs, space_for, too_many_open_files
from ..errors import (
    ConfigError,
    CorruptRecordError,
    DiskFullError,
    LogClosedError,
    LogFailedError,
    LogLockedError,
    ReadOnlyError,
)
from ..record import (
    HEADER,
    Record,
    RecordBatch,
    codec_id,
    encode_batch_parts,
    is_plain,
    stamp_batch,
)
from . import log_settings, retention
from .dir_lock import DirLock, owner_above
from .durable_file import make_dirs, raise_if_disk_full
from .file_cache import CACHE
from .flusher import Flusher
from .group_commit import GroupCommit
from .log_buffer import NULL, WriteBuffer, batches_bound, checked_columns
from .log_buffer import as_bytes as _as_bytes
from .log_compaction import finish_swaps
from .log_dir import CHECKPOINT, CLEAN_MARKER, QUARANTINE_DIR, load_gaps
from .log_durability import Durability
from .log_reads import Reads
from .log_repair import repair
from .log_settings import FLUSH_POLICIES, RECOVERY_POLICIES
from .log_space import SpaceGate
from .recovery import LogLoader, adopt_loaded
from .segment import ALLOCATE_AHEAD
from .segments import Segments

__all__ = [
    "CHECKPOINT", "CLEAN_MARKER", "FLUSH_POLICIES", "MAX_SEGMENT_SPAN", "QUARANTINE_DIR",
    "RECOVERY_POLICIES", "Log",
]

#: Relative offsets are u32 in the indexes: roll before a segment spans more.
MAX_SEGMENT_SPAN = (1 << 32) - (1 << 24)

_time_ns = time.time_ns
_BASE = struct.Struct("<Q")


def _now_ms() -> int:
    return _time_ns() // 1_000_000


class Log:
    """A durable, segmented, checksummed append-only log (see module doc).

    Open with :meth:`Log.open`. Thread-safe. One process owns a log directory
    (an exclusive lock); other processes may open it with ``readonly=True``.
    """

    # Slots: the append path reads a dozen attributes per call, and a plain
    # instance dict of this many keys is a hash lookup for each.
    __slots__ = (
        "_blocked", "_buf", "_appended", "_clean_marker", "_closed", "_dir_lock",
        "_failed", "_flush_always", "_flush_idle", "_group",
        "_grant", "_space", "on_disk_short",
        "_lock", "_next_offset", "_now_ms", "_reads", "_read_waiters",
        "_segs", "_start_offset", "_sync", "_system_clock",
        "_written_end", "compression", "flush_interval_ms",
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
        """Open (creating if needed) the log in directory ``path``; a bad setting raises
        ConfigError naming it. ``flush``: log_durability.py. ``min_free_bytes`` (None: the
        filesystem's default; 0: off) and ``control`` (a queue's lease records): vqs/disk/space.py.
        ``defer_clean_marker``: after a clean close, change no file at open (marker and
        checkpoint stay until the first write), for callers that do not read the marker (a
        broker's partitions). ``clock``: seconds since the epoch, as time.time."""
        self = object.__new__(cls)
        self.path = os.fspath(path)
        self._now_ms = _now_ms if clock is None else (lambda: int(clock() * 1000))
        self._system_clock = clock is None
        log_settings.check_settings({
            "flush": flush, "flush_interval_ms": flush_interval_ms, "recovery": recovery,
            "segment_bytes": segment_bytes, "index_interval_bytes": index_interval_bytes,
            "batch_max_records": batch_max_records, "batch_max_bytes": batch_max_bytes,
            "checkpoint_interval_ms": checkpoint_interval_ms, "segment_ms": segment_ms,
            "retention_ms": retention_ms, "retention_bytes": retention_bytes, "min_free_bytes": min_free_bytes})
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
        self._space = SpaceGate(self.path, control)
        self._grant = self._space.grant
        self._buf = WriteBuffer(self._grant, codec_id(compression), batch_max_bytes, batch_max_records)
        #: called (under the lock; must not block or raise) when a write finds no
        #: space or is refused under min_free_bytes
        self.on_disk_short = None
        self._segs = Segments(self.path, owner=not readonly, segment_bytes=segment_bytes,
                              index_interval_bytes=index_interval_bytes)
        self._lock = threading.Lock()
        self._sync = Durability(self.path, self._lock, self, checkpoint_interval_ms / 1000)
        self._appended = threading.Condition(self._lock)
        self._group = GroupCommit()
        self._read_waiters = 0  # threads in wait_for: appends notify them
        self._failed: BaseException | None = None
        self._closed = False
        self._clean_marker = False
        self._flush_idle = False  # off the interval flusher until the next write (log_durability.py)
        self._blocked = readonly
        self._dir_lock: DirLock | None = None
        self._reads = Reads()
        self.quarantined_batches = 0

        if readonly:
            if not os.path.isdir(self.path):
                raise ConfigError(f"readonly log {self.path} does not exist")
            self._segs.gaps.update(load_gaps(self.path))
            self._reads.open_readonly(self)
            return self
        if lock:
            owner = owner_above(self.path)
            if owner is not None:  # a Broker's partition, a HybridQueue's log: its owner's alone
                raise LogLockedError(owner[0], owner[1], f"{self.path} is one of its logs: go through "
                                     f"its owner, or open it with Log.open(path, readonly=True)")
        make_dirs(self.path)  # (a spent quota: DiskFullError)
        if lock:
            self._dir_lock = DirLock(self.path).acquire()
        governor = self._grant.space = space_for(self.path)
        self._grant.floor = floor_of(governor, min_free_bytes, control)
        weakref.finalize(self, self._grant.release, True)
        try:
            finish_swaps(self.path)
            adopt_loaded(self, LogLoader(self.path, self.recovery, self._segs, defer_clean_marker).load())
        except BaseException as e:
            self._close_files()
            if self._dir_lock:
                self._dir_lock.release()
            if isinstance(e, OSError) and e.errno in FD_EXHAUSTED:
                raise too_many_open_files(self.path, e, held=CACHE.open_files, cap=CACHE.max_open_files) from e
            raise_if_disk_full(e, self.path, "opening")  # a new log's first files (a spent quota)
            raise
        self._buf.set_thresholds()
        if flush == "interval" and not self._clean_marker:
            self._sync.join_flusher(self)
        elif flush != "never":
            # on the flusher from the first write ("always": for the checkpoint and the grant)
            self._flush_idle = self._blocked = True
        return self

    def refresh(self) -> None:
        """Readonly logs: follow what the owner appended and deleted (readonly_tail.py)."""
        if self.readonly:
            self._reads.refresh(self)

    # --------------------------------------------------------------- append

    def append(self, value, *, key=None, headers=None, timestamp_ms: int | None = None) -> int:
        """Append one record to the write buffer (visible to reads at once); return its
        offset. ``value`` None is a null (Kafka's tombstone). What the return promises:
        log_durability.py."""
        null = False
        if value.__class__ is not bytes:
            if value is None:
                value, null = NULL, True
            else:
                value = _as_bytes(value, "value")
        if timestamp_ms is None:
            # (inline, not self._now_ms(): a tenth fewer instructions per append)
            timestamp_ms = _time_ns() // 1_000_000 if self._system_clock else self._now_ms()
        step = None
        with self._lock:
            if self._blocked:
                self._check_appendable(len(value))
            off = self._next_offset
            self._next_offset = off + 1
            b = self._buf
            b.values.append(value)
            b.timestamps.append(timestamp_ms)
            if key is not None or headers or b.has_extra or null:
                b.add_extra(key, headers, null)
            nbytes = b.bytes + len(value)
            b.bytes = nbytes
            # a full batch, or the end of the grant (log_buffer.py)
            if nbytes >= b.flush_bytes or off - self._written_end >= b.flush_records:
                self._buffer_full_locked()
            if self._read_waiters:
                self._appended.notify_all()
            if self._flush_always:
                step = self._group.join_locked()
                gen = b.gen
        if step is not None:  # (decided under the lock: ``flush`` may change meanwhile)
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
        """Append many records as one write (after what ``append`` buffered), split into
        batches of at most ``batch_max_bytes``; return the first offset. ``producer``: (id,
        epoch, base sequence) of an idempotent producer, in every piece's header. ``claim``:
        the space.Claim that counted these records while the caller buffered them; its
        bytes become the grant (what was admitted is not refused)."""
        n = len(values)
        values, keys, nulls = checked_columns(values, keys, headers, timestamps_ms)
        if timestamps_ms is None:
            timestamps_ms = self._now_ms()
        ends = list(accumulate(len(v) if v is not None else 0 for v in values) if nulls else accumulate(map(len, values)))
        total = ends[-1]
        buf = self._buf
        max_bytes, codec = buf.max_bytes, buf.codec
        bound = batches_bound(n, total, max_bytes, keys, headers)
        pid, epoch, seq = (-1, -1, -1) if producer is None else producer
        if codec:
            bound += (bound >> 7) + 128 * (1 + bound // max_bytes)
        with self._lock:
            if claim is not None and claim.held:
                self._grant.hand_over(claim, bound + buf.bound())
            if self._blocked:
                self._check_appendable(total)
            self._write_buffer_locked()
            self._take_locked(bound)
            first = self._written_end
            # (a value larger than batch_max_bytes makes a batch of its own)
            i = before = 0
            while i < n:
                j = max(bisect.bisect_right(ends, before + max_bytes, i), i + 1)
                before = ends[j - 1]
                if i == 0 and j == n:
                    vs, ks, hs, ts = values, keys, headers, timestamps_ms
                else:
                    vs = values[i:j]
                    ks = keys[i:j] if keys is not None else None
                    hs = headers[i:j] if headers is not None else None
                    ts = timestamps_ms if isinstance(timestamps_ms, int) else timestamps_ms[i:j]
                base = self._written_end
                parts = encode_batch_parts(base, vs, ks, hs, ts, codec, pid, epoch, seq, nulls)
                self._write_appended_locked(parts, base, base + (j - i))
                i = j
            end, step = self._appended_locked()
        if step is not None:
            self._group.await_durable(self, end, step)
        return first

    def append_encoded(self, batch: RecordBatch) -> int | None:
        """Append ``batch`` (a decoded RecordBatch, a producer's) as it is encoded, after what
        ``append`` buffered; return its first offset. What a return promises is ``append_batch``'s.

        Only a batch the log would have written so is taken: a plain one (``is_plain``: the
        layout ``append_batch`` writes of its records), in the log's codec, of at most
        ``batch_max_records`` records and ``batch_max_bytes`` of values. It is given its base
        offset, and, when its header carries no time (a timestamp <= 0), the log's clock,
        its CRC computed again. Any other batch: None, nothing done (the caller appends its
        records with ``append_batch``)."""
        buf = self._buf
        if (batch.codec != buf.codec or batch.count > buf.max_records_less_1 + 1
                or batch.value_offsets[batch.count] > buf.max_bytes or not is_plain(batch)):
            return None
        raw = bytearray(batch.raw)
        n = batch.count
        if batch.first_timestamp_ms <= 0:
            stamp_batch(raw, self._now_ms())
        nbytes = len(raw)
        with self._lock:
            if self._blocked:
                self._check_appendable(nbytes)
            self._write_buffer_locked()
            self._take_locked(nbytes)
            base = self._written_end
            _BASE.pack_into(raw, 0, base)
            self._write_appended_locked([raw], base, base + n)
            end, step = self._appended_locked()
        if step is not None:
            self._group.await_durable(self, end, step)
        return base

    def _write_appended_locked(self, parts: list, base: int, next_offset: int) -> None:
        """One batch of an ``append_batch`` / ``append_encoded`` written; a failed write leaves
        the offsets at what is written and the buffer settled, then raises."""
        try:
            self._write_parts_locked(parts, base, next_offset)
        except BaseException:
            self._next_offset = self._written_end
            self._buf.settle(self._flush_always)
            raise

    def _appended_locked(self) -> tuple:
        """An append's batches are written: the offsets and the buffer settle, readers waiting
        are woken; (the end, the group-commit step to wait for under ``always``, else None)."""
        self._next_offset = self._written_end
        self._buf.settle(self._flush_always)
        if self._read_waiters:
            self._appended.notify_all()
        return self._written_end, (self._group.join_locked() if self._flush_always else None)

    def _buffer_full_locked(self) -> None:
        """The append slow path (a threshold, log_buffer.py): cover the buffer
        (refused: the record is taken back out, DiskFullError); write the
        batch when it is full."""
        buf = self._buf
        need = buf.bound()
        if need > self._grant.buffer:
            try:
                self._take_locked(need)
            except DiskFullError:
                buf.unbuffer_last()
                self._next_offset -= 1
                raise
        if buf.full():
            self._write_buffer_locked()
        else:
            buf.set_thresholds()

    def _take_locked(self, need: int) -> None:
        """Make the grant cover ``need`` bytes; refused: appends are refused
        until the governor has room (``_space.low``) and DiskFullError."""
        grant = self._grant
        more = need - grant.buffer
        if more <= 0:
            return  # covered (the common case: no call)
        try:
            grant.take_upto(more, self._buf.step, self._segs.all[-1], self.path,
                            self._segs.index_capacity_bytes * 5 // 2)
        except DiskFullError:
            self._space.low = self._blocked = True
            if self.on_disk_short is not None:
                self.on_disk_short()
            raise

    def _write_buffer_locked(self) -> None:
        """Write the buffer as one batch. A full disk under flush="always" drops
        it (its appenders raise, ``WriteBuffer.drop``): a refused record is
        never readable, nor written later."""
        buf = self._buf
        n = len(buf.values)
        if not n:
            return
        base = self._written_end
        try:
            self._write_parts_locked(buf.encode(base), base, base + n)
        except DiskFullError as e:
            if self._flush_always:
                buf.drop(e)
                self._next_offset = base
            raise
        buf.reset()
        buf.settle(self._flush_always)

    def _write_parts_locked(self, parts: list, base: int, next_offset: int) -> None:
        hdr = HEADER.unpack_from(parts[0], 0)
        nbytes = hdr[1] + 12  # batch_length counts everything after its own field
        seg = self._segs.all[-1]
        if seg.size > 0 and (
            seg.size + nbytes > self.segment_bytes
            or next_offset - seg.base_offset > MAX_SEGMENT_SPAN
            or (self.segment_ms is not None and self._now_ms() - (seg.created_ms or 0) >= self.segment_ms)
        ):
            self._roll_locked()  # (no space for the next segment's file: this one grows past segment_bytes)
            seg = self._segs.all[-1]
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
                if cut.errno not in fs.NO_SPACE:  # (no space even to cut: before the next write)
                    self._fail(e, "")
            if e.errno in fs.NO_SPACE and self._failed is None:
                # Not latched: the file ends at a batch boundary again, and the
                # next write succeeds once space is freed (log_space.py).
                err = self._space.found_short(seg, e)
                self._blocked = True
                if self.on_disk_short is not None:
                    self.on_disk_short()
                # The error may be kept (queue.Full's cause): its traceback must
                # not pin the segment, whose space a later reclaim frees.
                e.__traceback__ = None
                seg = None
                raise err from e
            # Any other error (EIO: a failing device) latches, as a failed fsync
            # does: what the kernel kept of the write cannot be trusted.
            raise self._fail(e, f"write to {seg.log_path} at position {seg.size} failed", seg.log_path) from e
        if self._space.short:
            self._space.short = 0
            self._unblock()
        grant = self._grant
        left = grant.buffer - nbytes
        if left >= 0 and not grant.indexes:  # (Grant.wrote inline: its common case)
            grant.buffer = left
            grant.written += nbytes
        else:
            grant.wrote(nbytes, seg)
        self._written_end = next_offset

    def _roll_locked(self) -> bool:
        """Seal the active segment and start the next (a control write); False,
        nothing changed, when the new file finds no space (the next write
        tries again)."""
        try:
            old = self._segs.roll(self._written_end)
        except OSError as e:
            if e.errno not in fs.NO_SPACE:
                raise
            self._grant.space.short()
            return False
        # Sealed without an fsync: the appender goes on while the shared flusher
        # thread fsyncs it (as Kafka flushes a rolled segment asynchronously).
        # Until then the recovery point stays below it, so a power loss that
        # tears its tail is recovered like a torn tail (see recovery.py).
        self._segs.active.created_ms = self._now_ms()
        self._sync.unsynced.append(old)
        Flusher.shared().register(self._sync.seal_job, 0.0)
        if self.retention_ms is not None or self.retention_bytes is not None:
            retention.apply_locked(self, self._now_ms())
        return True

    # ------------------------------------------------------------------ gates

    def _check_writable(self) -> None:
        """Raise unless the log takes writes; the first write after a clean open
        removes the clean-shutdown marker, after an idle spell rejoins the flusher."""
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        if self.readonly:
            raise ReadOnlyError(f"log {self.path} was opened with readonly=True")
        if self._failed is not None:
            raise LogFailedError(f"log {self.path} failed earlier and accepts no writes: {self._failed!r}",
                                 path=self.path) from self._failed
        if self._clean_marker:
            try:
                self._sync.remove_clean_marker()
            except OSError as e:
                raise self._fail(e, f"removing the clean-shutdown marker of {self.path} failed") from e
            self._clean_marker = False
        if self._flush_idle:
            # Idle for a whole interval, the flusher let go of it: back on at the first write.
            self._flush_idle = False
            self._sync.join_flusher(self)
        self._blocked = self._space.low or bool(self._space.short)  # still checked per append

    def _check_appendable(self, nbytes: int) -> None:
        """Appends, when ``_blocked``: raise, or refuse ``nbytes`` more for space (log_space.py)."""
        if self._closed or self.readonly or self._failed is not None or self._clean_marker or self._flush_idle:
            self._check_writable()  # raises, or removes the clean marker / rejoins the flusher
        space = self._space
        if space.short:
            if self._buf.values:
                self._write_buffer_locked()  # (its failure is the refusal; its success clears it)
            else:
                space.space_back(nbytes, self._segs.all[-1].log_path)
        if space.low:
            space.admit(self._buf.bound(), nbytes, self._segs.all[-1].log_path)
            if not space.low:
                self._unblock()

    def _unblock(self) -> None:
        """Recompute ``_blocked`` after a reason for it went away."""
        self._blocked = (self._closed or self.readonly or self._failed is not None or self._space.low
                         or self._clean_marker or self._flush_idle or bool(self._space.short))

    # ----------------------------------------------------------------- reads

    @property
    def start_offset(self) -> int:
        """The first offset that can be read (moves up with retention)."""
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """The next offset to be written (buffered records included)."""
        return self._next_offset

    def read(self, offset: int, *, max_records: int = 500, max_bytes: int = 1 << 20) -> list[Record]:
        """Records from ``offset`` on: at most ``max_records``, stopping once ``max_bytes`` of
        values were returned (at least one record); [] at the end; OffsetOutOfRange below the
        start or past the end. Offsets may have gaps: the first record returned has the
        smallest offset >= ``offset``."""
        c = self._reads.run
        if c is not None:
            lo, hi, recs, ends = c
            if lo <= offset < hi:
                i = offset - lo
                if max_records == 1:
                    return [recs[i]]
                # from the run when it holds them all, the byte limit not reached before the last
                k = i + max_records - 1
                if i < k < len(recs) and ends[k - 1] - (ends[i - 1] if i else 0) < max_bytes:
                    return recs[i : k + 1]
        return self._reads.read(self, offset, max_records, max_bytes)

    def read_batches(self, offset: int, *, max_bytes: int = 1 << 20, mapped: bool = False,
                     within_segment: bool = False) -> list[RecordBatch]:
        """Whole, CRC-verified batches holding offsets >= ``offset`` (about ``max_bytes``, at
        least one if any exist; the first may begin below ``offset``); buffered records come
        back as a freshly encoded batch. ``mapped``: views of one mapping of the file per
        segment read, no copy. ``within_segment``: none past the end of the segment holding
        the first (as a Kafka fetch reads one segment), so mapped views hold one mapping."""
        return self._reads.read_batches(self, offset, max_bytes=max_bytes, mapped=mapped,
                                        within_segment=within_segment)

    def scan_batches(self, offset: int, end_offset: int | None = None, *, maps=None) -> Iterator[RecordBatch]:
        """What ``read_batches(..., mapped=True)`` in a loop returns and raises, from ``offset``
        to ``end_offset`` (default: the end), lazily: each segment mapped once, each batch
        verified as the consumer asks for it. ``maps``: a MapCache that keeps the mappings."""
        return self._reads.scan_batches(self, offset, end_offset, maps=maps)

    def wait_for(self, offset: int, timeout: float | None) -> bool:
        """Block until ``end_offset > offset`` or ``timeout`` seconds pass; True if it is.
        Woken by appends (a readonly log polls the files)."""
        return self._reads.wait_for(self, offset, timeout)

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        """The first offset stamped >= ``timestamp_ms``, or None."""
        return self._reads.offset_for_time(self, timestamp_ms)

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped with the log's largest timestamp
        (Kafka's ListOffsets MAX_TIMESTAMP), or None when no record is held."""
        return self._reads.max_timestamp(self)

    # -------------------------------------------------------------- retention

    def delete_before(self, offset: int) -> int:
        """Make ``offset`` (at most the end) the new start and delete the whole segments below
        it (retention.py); returns how many."""
        with self._lock:
            again = min(offset, self._next_offset) == self._start_offset and retention.consumed_left(self)
            if self._clean_marker and min(offset, self._next_offset) <= self._start_offset and not again:
                return 0  # nothing to do: the clean-shutdown marker may stay
            self._check_writable()
            return retention.delete_before_locked(self, offset, again)

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past ``retention_ms`` or ``retention_bytes`` (retention.py)."""
        with self._lock:
            now_ms = self._now_ms() if now_ms is None else now_ms
            if self._clean_marker and not retention.due(self, now_ms):
                return 0  # nothing to delete: the clean-shutdown marker may stay
            self._check_writable()
            return retention.apply_locked(self, now_ms)

    def repair(self, error: CorruptRecordError) -> bool:
        """Apply the ``recovery`` policy to the damage a read reported (log_repair.py): True
        when the log changed or the damage is gone (read again), False under ``fail``, for a
        readonly log, or when appends in flight did not finish in time."""
        return repair(self, error)

    def reconfigure(self, **settings) -> None:
        """Change what a topic may alter while open (log_settings.py)."""
        log_settings.reconfigure(self, **settings)

    # ------------------------------------------------------------------ info

    @property
    def failed(self) -> BaseException | None:
        """The I/O error that failed this log (it accepts no writes), or None."""
        return self._failed

    @property
    def disk_full(self) -> bool:
        """True while appends are refused under ``min_free_bytes``, or the last
        batch write failed with ENOSPC/EDQUOT and less than 64 KiB over the
        floor is free."""
        return self._space.disk_full()

    @property
    def min_free_bytes(self) -> int:
        """Appends are refused under this much free space (0 = off); settable
        (None: the filesystem's default, vqs/disk/space.py)."""
        return self._grant.floor

    @min_free_bytes.setter
    def min_free_bytes(self, value: int | None) -> None:
        with self._lock:
            self._space.set_floor(value)
            self._unblock()

    @property
    def size_bytes(self) -> int:
        return self._segs.size_bytes() + self._buf.bytes

    @property
    def batch_max_bytes(self) -> int:
        """The most value bytes one record batch of ``append_batch`` holds (more are split)."""
        return self._buf.max_bytes

    @property
    def segment_count(self) -> int:
        return len(self._segs.all)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"Log({self.path!r}, start={self._start_offset}, end={self._next_offset}, "
                f"segments={len(self._segs.all)}, flush={self.flush_policy!r})")

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
                    unsealed = self._sync.seal_for_close(self)  # (the sealed segments' fsyncs first)
                    full = full or unsealed
                    self._sync.durable_end = self._written_end
                    # A clean marker only with a checkpoint that matches it (on a
                    # full disk neither is written: the next open recovers).
                    if self._sync.try_checkpoint(self._start_offset, self._written_end) and unsealed is None:
                        self._sync.try_clean_marker(self._segs.all[-1], self._start_offset)
            finally:
                self._closed = True
                self._sync.checkpoint.retire()
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

    # ------------------------------------------------------------ durability

    def _fail(self, e: BaseException, what: str, path: str | None = None) -> LogFailedError:
        """Latch ``e`` (an fsync or write error: EIO): the log takes no more
        writes (what the kernel kept cannot be trusted); the error to raise."""
        self._failed = e
        self._blocked = True
        return LogFailedError(f"{what}: {e}", path=path or self.path)

    def flush(self) -> None:
        """Write buffered records and fsync: everything appended so far survives a crash."""
        with self._lock:
            if self._closed or self.readonly:
                return
            self._sync.wait_idle()
            self._sync.sync_log(self)

    def _close_files(self) -> None:
        self._segs.close()
        self._reads.forget()

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
