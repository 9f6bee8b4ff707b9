"""The log: an ordered list of segments, one append position, one flush policy.

What an acknowledged append survives (the ``flush`` setting):

============  ==========================================  =========================================
policy        ``append`` returns when                     what a crash can lose
============  ==========================================  =========================================
``always``    its batch is written and fsynced; threads    nothing acknowledged (process crash or
              appending at once share one fsync            power loss)
              (group commit)
``interval``  it is in the log's buffer; a background      at most ``flush_interval_ms`` of appends
              thread writes and fsyncs every interval
``never``     it is in the buffer; written when a batch    since the last batch write (process
              fills, fsynced at ``close``                  crash), or since the OS last wrote back
============  ==========================================  =========================================

Under every policy a segment sealed by a roll is fsynced by the background
flusher thread, not by the appender; ``flush()`` and ``always`` appends fsync
any sealed segment still pending first, so durability is always a prefix.

Opening a log recovers it (recovery.py: the numbered passes, the torn tail
versus corruption); group commit for ``always`` lives in group_commit.py; the
directory's other files (checkpoint, clean marker, quarantine) in log_dir.py;
a readonly log follows its owner with readonly_tail.py.

Invariants (under ``_lock``):
- ``_start_offset <= _durable_end <= _written_end <= _next_offset``: records
  below ``_written_end`` are in segment files, the rest in the write buffer
  (``_buf_*``, one list per column, visible to reads at once);
- ``_durable_end`` never passes the first record of a sealed segment whose
  fsync is pending (``_unsynced``), and the checkpoint's recovery point never
  passes ``_durable_end``: durability is always a prefix;
- ``_run_cache`` holds records decoded from files (never the buffer) and is
  dropped whenever the start offset moves up or a segment goes away.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
import weakref
from collections.abc import Sequence
from itertools import accumulate
from operator import itemgetter

from ..errors import (
    ConfigError,
    CorruptRecordError,
    LogClosedError,
    OffsetOutOfRange,
    ReadOnlyError,
    VQSError,
)
from .dir_lock import DirLock
from .durable_file import atomic_write, fsync_dir
from .flusher import Flusher
from .group_commit import GroupCommit
from .log_dir import CHECKPOINT, CLEAN_MARKER, QUARANTINE_DIR, load_gaps, read_checkpoint, write_checkpoint
from .readonly_tail import find_tail, follow_segments, open_segments
from .record_batch import (
    HEADER,
    Record,
    RecordBatch,
    codec_id,
    decode_batch,
    encode_batch,
    encode_batch_parts,
)
from .recovery import LogLoader
from .segment import Segment

__all__ = [
    "CHECKPOINT", "CLEAN_MARKER", "FLUSH_POLICIES", "MAX_SEGMENT_SPAN", "QUARANTINE_DIR",
    "RECOVERY_POLICIES", "Log",
]

FLUSH_POLICIES = ("always", "interval", "never")
RECOVERY_POLICIES = ("fail", "skip", "truncate")
#: Relative offsets are u32 in the indexes: roll before a segment spans more.
MAX_SEGMENT_SPAN = (1 << 32) - (1 << 24)

_time_ns = time.time_ns
_ONLY_BYTES = {bytes}
#: Bytes of batches a read decodes and caches at a time (a run): enough to
#: amortise the lookup, few enough records that the cyclic GC (which visits
#: every live record while they are young) stays cheap for bulk reads.
_RUN_BYTES = 256 << 10
_value_of = itemgetter(3)  # Record.value (a Record is a tuple underneath)


class _SealJob:
    """A one-shot task for the shared flusher thread: fsync the segments a roll
    sealed. Holds the log weakly (a dropped log is not kept open by it)."""

    __slots__ = ("_log", "__weakref__")

    def __init__(self, owner: Log) -> None:
        self._log = weakref.ref(owner)

    def _flush_tick(self) -> bool:
        owner = self._log()
        if owner is not None:
            owner._sync_sealed()
        return False


def _now_ms() -> int:
    return _time_ns() // 1_000_000


def _as_bytes(v, what: str) -> bytes:
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, bytes):
        return v
    raise TypeError(f"{what} must be bytes-like, not {type(v).__name__}")


class Log:
    """A durable, segmented, checksummed append-only log (see module doc).

    Open with :meth:`Log.open`. Thread-safe. One process owns a log directory
    (an exclusive lock); other processes may open it with ``readonly=True``.
    """

    # Slots: the append path reads a dozen attributes per call, and a plain
    # instance dict of this many keys is a hash lookup for each.
    __slots__ = (
        "_base_offsets", "_blocked", "_buf_bytes", "_buf_has_extra", "_buf_headers", "_buf_keys",
        "_buf_timestamps", "_buf_values", "_appended", "_batch_max_bytes", "_batch_max_records",
        "_batch_max_records_less_1", "_checkpoint_interval_s", "_checkpoint_lock",
        "_checkpoint_recovery_point", "_checkpoint_time", "_closed", "_codec_id", "_dir_lock",
        "_durable_end", "_failed", "_flush_always", "_gaps", "_group", "_index_capacity_bytes",
        "_lock", "_next_offset", "_now_ms", "_read_hint", "_read_waiters", "_run_cache",
        "_seal_job", "_segments", "_start_offset", "_synced", "_syncing", "_system_clock",
        "_tail_hint", "_unsynced", "_written_end", "compression", "flush_interval_ms",
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
        clock=None,
    ) -> Log:
        """Open (creating if needed) the log in directory ``path``.

        Settings are validated here; a bad value raises ConfigError naming it.
        The default flush policy is ``interval`` (100 ms): an acknowledged
        append survives a process crash once the next flush ran, and at most
        ``flush_interval_ms`` of appends can be lost. Use ``flush="always"``
        for appends that survive anything once acknowledged.
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
                          ("retention_bytes", retention_bytes)):
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
        self._checkpoint_interval_s = checkpoint_interval_ms / 1000
        self._index_capacity_bytes = min(
            64 << 20, max(4096, (segment_bytes // max(index_interval_bytes, 256) + 16) * 8)
        )

        self._lock = threading.Lock()
        self._synced = threading.Condition(self._lock)
        self._appended = threading.Condition(self._lock)
        self._checkpoint_lock = threading.Lock()
        self._group = GroupCommit()  # flush="always": appenders share fsyncs
        self._read_waiters = 0  # threads in wait_for: appends notify them
        self._syncing = False
        # Segments sealed at a roll whose fsync has not completed yet (oldest
        # first). Invariant: ``_durable_end`` never passes the first one's records,
        # and the checkpoint's recovery point stays below them until synced.
        self._unsynced: list[Segment] = []
        self._seal_job = _SealJob(self)
        self._failed: BaseException | None = None
        self._closed = False
        self._blocked = readonly  # closed, readonly or failed: appends must check why
        self._dir_lock: DirLock | None = None
        self._reset_buffer()
        self._run_cache = None  # (first_offset, end_offset, records): a contiguous decoded run
        self._read_hint = None  # (segment, offset, position): where a sequential read continues
        self._tail_hint = None  # readonly: where the last search for the tail ended
        self.quarantined_batches = 0
        # {expected offset: base offset that may follow it}, shared with the segments
        self._gaps: dict[int, int] = load_gaps(self.path)

        if readonly:
            if not os.path.isdir(self.path):
                raise ConfigError(f"readonly log {self.path} does not exist")
            self._open_readonly()
            return self
        os.makedirs(self.path, exist_ok=True)
        if lock:
            self._dir_lock = DirLock(self.path).acquire()
        try:
            self._open_writer()
        except BaseException:
            self._close_files()
            if self._dir_lock:
                self._dir_lock.release()
            raise
        if flush == "interval":
            Flusher.shared().register(self, flush_interval_ms / 1000)
        return self

    def _reset_buffer(self) -> None:
        self._buf_values: list = []
        self._buf_timestamps: list = []
        self._buf_keys: list | None = None
        self._buf_headers: list | None = None
        self._buf_has_extra = False  # some buffered record has a key or headers
        self._buf_bytes = 0

    def _segment(self, base: int, *, active: bool, create: bool = False) -> Segment:
        return Segment(
            self.path, base, active=active, owner=not self.readonly, create=create, gaps=self._gaps,
            index_interval_bytes=self.index_interval_bytes,
            index_capacity_bytes=self._index_capacity_bytes,
        )

    def _write_checkpoint(self, recovery_point: int | None = None, from_flusher: bool = False) -> None:
        """Persist (recovery point, log start offset) atomically. The recovery
        point only moves forward and only to offsets already fsynced."""
        with self._checkpoint_lock:
            if from_flusher and self._closed:
                return  # close() wrote the last one; the directory may have a new owner
            rp = max(self._checkpoint_recovery_point, recovery_point if recovery_point is not None else self._durable_end)
            write_checkpoint(self.path, rp, self._start_offset)
            self._checkpoint_recovery_point = rp
            self._checkpoint_time = time.monotonic()

    def _open_writer(self) -> None:
        self._checkpoint_recovery_point = 0
        self._checkpoint_time = time.monotonic()
        loader = LogLoader(self.path, self.recovery, self._segment)
        self._segments = loader.segments  # closed by open() if loading fails
        loaded = loader.load()
        self.quarantined_batches += loaded.quarantined_batches
        self._base_offsets = [s.base_offset for s in self._segments]
        active = self._segments[-1]
        self._written_end = self._next_offset = self._durable_end = active.next_offset
        self._start_offset = min(max(self._base_offsets[0], loaded.start_offset), self._next_offset)
        active.created_ms = self._now_ms()
        self._write_checkpoint(self._next_offset)

    def _open_readonly(self) -> None:
        self._checkpoint_recovery_point = 0
        self._segments = open_segments(self.path, self._segment)
        if not self._segments:
            raise ConfigError(f"{self.path} holds no log segments")
        self._base_offsets = [s.base_offset for s in self._segments]
        _, lso = read_checkpoint(self.path)
        self._find_readonly_tail()
        self._start_offset = min(max(self._base_offsets[0], lso), self._next_offset)

    def _find_readonly_tail(self) -> None:
        self._tail_hint = find_tail(self._segments[-1], self._tail_hint)
        self._written_end = self._next_offset = self._durable_end = self._tail_hint[2]

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
            self._run_cache = None

    # --------------------------------------------------------------- append

    def append(self, value, *, key=None, headers=None, timestamp_ms: int | None = None) -> int:
        """Append one record; return its offset.

        The record is buffered into the open batch (and visible to reads at
        once); what the return promises depends on the flush policy (module doc).
        """
        if value.__class__ is not bytes:
            value = _as_bytes(value, "value")
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000 if self._system_clock else self._now_ms()
        with self._lock:
            if self._blocked:
                self._check_writable()
            off = self._next_offset
            self._next_offset = off + 1
            self._buf_values.append(value)
            self._buf_timestamps.append(timestamp_ms)
            if key is not None or headers or self._buf_has_extra:
                self._add_extra(key, headers)
            nbytes = self._buf_bytes + len(value)
            self._buf_bytes = nbytes
            if nbytes >= self._batch_max_bytes or off - self._written_end >= self._batch_max_records_less_1:
                self._write_buffer_locked()
            if self._read_waiters:
                self._appended.notify_all()
            if self._flush_always:
                step = self._group.join_locked()
        if self._flush_always:
            self._group.await_durable(self, off + 1, step)
        return off

    def _add_extra(self, key, headers) -> None:
        self._buf_has_extra = True
        if key is not None or self._buf_keys is not None:
            self._add_key(key)
        if headers or self._buf_headers is not None:
            self._add_headers(headers)

    def _add_key(self, key) -> None:
        if self._buf_keys is None:
            self._buf_keys = [None] * (len(self._buf_values) - 1)
        self._buf_keys.append(None if key is None else _as_bytes(key, "key") if key.__class__ is not bytes else key)

    def _add_headers(self, headers) -> None:
        if self._buf_headers is None:
            self._buf_headers = [None] * (len(self._buf_values) - 1)
        self._buf_headers.append(tuple(headers) if headers else None)

    def append_batch(
        self,
        values: Sequence,
        *,
        keys: Sequence | None = None,
        headers: Sequence | None = None,
        timestamps_ms: Sequence[int] | int | None = None,
    ) -> int:
        """Append many records as one write (split into batches of at most
        ``batch_max_bytes``); return the first offset. Records buffered by
        ``append`` are written first, so order is kept."""
        n = len(values)
        if n == 0:
            raise ConfigError("append_batch needs at least one value")
        if set(map(type, values)) != _ONLY_BYTES:
            values = [v if v.__class__ is bytes else _as_bytes(v, "value") for v in values]
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
        with self._lock:
            self._check_writable()
            self._write_buffer_locked()
            first = self._written_end
            # Split so that no batch exceeds batch_max_bytes (a single huge value
            # still makes a batch of its own).
            ends = list(accumulate(map(len, values)))
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
                parts = encode_batch_parts(base, vs, keys=ks, headers=hs, timestamps=ts, codec=self._codec_id)
                self._write_parts_locked(parts, base, base + (j - i))
                i = j
            self._next_offset = self._written_end
            if self._read_waiters:
                self._appended.notify_all()
            end = self._written_end
            if self._flush_always:
                step = self._group.join_locked()
        if self._flush_always:
            self._group.await_durable(self, end, step)
        return first

    def _check_writable(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.path} is closed")
        if self.readonly:
            raise ReadOnlyError(f"log {self.path} was opened with readonly=True")
        if self._failed is not None:
            raise VQSError(
                f"log {self.path} failed earlier and accepts no writes: {self._failed!r}"
            ) from self._failed

    def _write_buffer_locked(self) -> None:
        bv = self._buf_values
        if not bv:
            return
        base = self._written_end
        parts = encode_batch_parts(
            base, bv, keys=self._buf_keys, headers=self._buf_headers, timestamps=self._buf_timestamps, codec=self._codec_id
        )
        self._write_parts_locked(parts, base, base + len(bv))
        self._reset_buffer()

    def _write_parts_locked(self, parts: list, base: int, next_offset: int) -> None:
        hdr = HEADER.unpack_from(parts[0], 0)
        nbytes = hdr[1] + 12  # batch_length counts everything after its own field
        seg = self._active
        if seg.size > 0 and (
            seg.size + nbytes > self.segment_bytes
            or next_offset - seg.base_offset > MAX_SEGMENT_SPAN
            or (self.segment_ms is not None and self._now_ms() - (seg.created_ms or 0) >= self.segment_ms)
        ):
            self._roll_locked()
            seg = self._active
        max_ts = hdr[8]
        try:
            seg.append(parts, base, next_offset, max_ts, nbytes)
        except OSError as e:
            # Cut any partial write so the file ends at a batch boundary again.
            try:
                os.ftruncate(seg.fd, seg.size)
            except OSError:
                self._failed = e
                self._blocked = True
            raise VQSError(f"write to {seg.log_path} at position {seg.size} failed: {e}") from e
        self._written_end = next_offset

    @property
    def _active(self) -> Segment:
        return self._segments[-1]

    def _roll_locked(self) -> None:
        old = self._active
        # Sealed without an fsync: the appender goes on while the shared flusher
        # thread fsyncs it (as Kafka flushes a rolled segment asynchronously).
        # Until then the recovery point stays below it, so a power loss that
        # tears its tail is recovered like a torn tail (see recovery.py).
        old.seal(sync=False)
        new = self._segment(self._written_end, active=True, create=True)
        new.created_ms = self._now_ms()
        fsync_dir(self.path)
        self._segments.append(new)
        self._base_offsets.append(new.base_offset)
        self._unsynced.append(old)
        Flusher.shared().register(self._seal_job, 0.0)
        if self.retention_ms is not None or self.retention_bytes is not None:
            self._apply_retention_locked(self._now_ms())

    # ------------------------------------------------------------- durability

    def _sync_locked(self, active: bool = True) -> None:
        """Fsync the segments sealed since the last sync, then (``active``) write
        the buffer and fsync the active segment; the lock is released during
        the fsyncs so other threads can keep appending (group commit)."""
        if active:
            self._write_buffer_locked()
        sealed = self._unsynced[:]
        seg = self._active
        upto = self._written_end if active else sealed[-1].next_offset if sealed else 0
        if upto <= self._durable_end and not sealed:
            return
        self._syncing = True
        err = None
        failed = seg
        self._lock.release()
        t0 = time.monotonic()
        try:
            # Oldest first: ``_durable_end`` claims a prefix of the log.
            for failed in sealed:
                os.fsync(failed.fd)
            if active:
                failed = seg
                os.fsync(seg.fd)
        except OSError as e:
            err = e
        finally:
            if not sealed:
                self._group.fsync_seconds = 0.8 * self._group.fsync_seconds + 0.2 * min(time.monotonic() - t0, 0.01)
            self._lock.acquire()
            self._syncing = False
        if err is not None:
            # An fsync failure may have dropped dirty pages: never pretend otherwise.
            self._failed = err
            self._blocked = True
            self._synced.notify_all()
            raise VQSError(f"fsync of {failed.log_path} failed: {err}") from err
        if sealed:
            # A roll during the fsync may have appended more; only ours are done.
            del self._unsynced[: len(sealed)]
        if upto > self._durable_end:
            self._durable_end = upto
        self._synced.notify_all()
        if sealed:
            self._write_checkpoint()  # the recovery point passes the sealed segments

    def _sync_sealed(self) -> None:
        """The background half of a roll: fsync the sealed segments."""
        with self._lock:
            while self._syncing and not self._closed:
                self._synced.wait()
            if self._closed or self._failed is not None or not self._unsynced:
                return
            self._sync_locked(active=False)

    def flush(self) -> None:
        """Write buffered records and fsync: everything appended so far survives a crash."""
        with self._lock:
            if self._closed or self.readonly:
                return
            while self._syncing:
                self._synced.wait()
            self._sync_locked()

    def _flush_tick(self) -> bool:
        """One round of the interval flusher; False once the log is closed."""
        with self._lock:
            if self._closed:
                return False
            if not self._syncing and self._failed is None:
                self._sync_locked()
        if time.monotonic() - self._checkpoint_time >= self._checkpoint_interval_s and self._durable_end > self._checkpoint_recovery_point:
            self._write_checkpoint(from_flusher=True)
        return True

    # ----------------------------------------------------------------- read

    @property
    def start_offset(self) -> int:
        """The first offset that can be read (moves up with retention)."""
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """The next offset to be written (buffered records included)."""
        return self._next_offset

    def _check_read_offset_locked(self, offset: int) -> None:
        """Raise OffsetOutOfRange unless start <= offset <= end; a readonly log
        first looks for what its owner appended since (lock released meanwhile)."""
        if self.readonly and offset > self._next_offset:
            self._lock.release()
            try:
                self.refresh()
            finally:
                self._lock.acquire()
        if offset < self._start_offset or offset > self._next_offset:
            raise self._out_of_range(offset)

    def _out_of_range(self, offset: int) -> OffsetOutOfRange:
        return OffsetOutOfRange(
            f"offset {offset} is out of range for log {self.path}: "
            f"valid offsets are {self._start_offset}..{self._next_offset} (start..end)",
            offset=offset, start_offset=self._start_offset, end_offset=self._next_offset,
        )

    def read(self, offset: int, *, max_records: int = 500, max_bytes: int = 1 << 20) -> list[Record]:
        """Records from ``offset`` on: at most ``max_records``, and stopping once
        ``max_bytes`` of values were returned (always at least one record).

        Returns [] at the end of the log; raises OffsetOutOfRange below the start
        offset or past the end. Offsets may have gaps (quarantined batches):
        the first record returned has the smallest offset >= ``offset``.
        Every record comes from a batch whose CRC was verified.
        """
        c = self._run_cache  # invalidated whenever the start offset moves up
        if c is not None:
            lo, hi, recs, ends = c
            if lo <= offset < hi:
                i = offset - lo
                if max_records == 1:
                    return [recs[i]]
                # Served from the run when it holds all max_records and the
                # byte limit is not reached before the last of them.
                k = i + max_records - 1
                if k < len(recs) and ends[k - 1] - (ends[i - 1] if i else 0) < max_bytes:
                    return recs[i : k + 1]
        return self._read(offset, max_records, max_bytes)

    def _read(self, offset: int, max_records: int, max_bytes: int) -> list[Record]:
        if max_records < 1:
            raise ConfigError(f"max_records={max_records}: must be >= 1")
        out: list[Record] = []
        total = 0
        while len(out) < max_records and total < max_bytes:
            with self._lock:
                if self._closed:
                    raise LogClosedError(f"log {self.path} is closed")
                if not out:
                    self._check_read_offset_locked(offset)
                if offset >= self._next_offset:
                    break
                if offset >= self._written_end:
                    out.extend(self._buffered_records(offset, max_records - len(out)))
                    break
                i = bisect.bisect_right(self._base_offsets, offset) - 1
                seg = self._segments[max(i, 0)]
                seg_end = self._base_offsets[i + 1] if i + 1 < len(self._base_offsets) else self._written_end
            try:
                run = self._decode_run(seg, offset, seg_end, min(max_bytes, _RUN_BYTES))
            except CorruptRecordError:
                if out:
                    break  # hand out the good records; the next read reports the damage
                raise
            if run is None:
                # nothing at or after `offset` in this segment (a gap at its end)
                offset = seg_end
                continue
            first, end, recs, ends = run
            j = max(0, offset - first)
            stop = min(len(recs), j + max_records - len(out))
            before = ends[j - 1] if j else 0
            # The record whose value brings the total to max_bytes is the last one.
            k = bisect.bisect_left(ends, before + max_bytes - total, j, stop)
            if k < stop:
                stop = k + 1
            out += recs[j:stop]
            total += ends[stop - 1] - before
            offset = recs[stop - 1].offset + 1
            if stop < len(recs):
                break
        return out

    def _decode_run(self, seg: Segment, offset: int, seg_end: int, max_bytes: int):
        """Decode the batches from the one holding ``offset`` (reading about
        ``max_bytes``) into a contiguous run (first, end, records, value ends),
        cached for the next sequential read. ``value ends[k]`` is the byte count
        of the values of records[0..k]: reads cut at max_bytes by bisection."""
        h = self._read_hint
        hint = (h[2], offset) if h is not None and h[0] is seg and h[1] == offset else None
        got = self._batches_at(seg, offset, max_bytes, hint)
        if got is None:
            return None
        batches, next_pos = got
        recs: list[Record] = []
        first = end = None
        for b in batches:
            if b.next_offset <= offset:
                continue
            if first is None:
                first = b.base_offset
            elif b.base_offset != end:
                next_pos = None  # a gap: stop the run here
                break
            recs += b.records()
            end = b.next_offset
        if first is None:
            return None
        if next_pos is not None:
            self._read_hint = (seg, end, next_pos)
        run = first, end, recs, list(accumulate(map(len, map(_value_of, recs))))
        self._run_cache = run
        return run

    def _batches_at(self, seg: Segment, offset: int, max_bytes: int, hint=None):
        """(batches, next position) from the batch holding ``offset`` in ``seg``
        (or the first after it); None if the segment has nothing there. Damage is
        reported (CorruptRecordError), or stepped over with recovery="skip"."""
        skip = self.recovery == "skip"
        if hint is not None:
            pos, expected = hint
        else:
            found = seg.find_batch(offset, skip=skip)
            if found is None:
                return None
            pos, expected = found
        try:
            batches, next_pos = seg.read_batches_from(pos, max_bytes)
        except CorruptRecordError:
            if not skip:
                raise
            self.quarantined_batches += 1  # stepped over, as recovery does
            found = seg.find_batch(offset, skip=True)
            if found is None:
                return None
            pos, expected = found
            batches, next_pos = seg.read_batches_from(pos, max_bytes)
        if batches and not seg.continues(expected, batches[0].base_offset):
            raise CorruptRecordError(
                f"{seg.log_path}: batch at position {pos} has base offset "
                f"{batches[0].base_offset}, expected {expected}", path=seg.log_path, position=pos,
            )
        return batches, next_pos

    def _buffered_records(self, offset: int, n: int) -> list[Record]:
        i = offset - self._written_end
        j = min(len(self._buf_values), i + n)
        bk, bh, bt, bv = self._buf_keys, self._buf_headers, self._buf_timestamps, self._buf_values
        return [
            Record(
                offset + (k - i), bt[k], None if bk is None else bk[k], bv[k],
                () if bh is None or not bh[k] else tuple((hk, hv if isinstance(hv, bytes) else bytes(hv, "utf-8") if isinstance(hv, str) else bytes(hv)) for hk, hv in bh[k]),
            )
            for k in range(i, j)
        ]

    def read_batches(self, offset: int, *, max_bytes: int = 1 << 20) -> list[RecordBatch]:
        """Whole, CRC-verified batches holding offsets >= ``offset`` (about
        ``max_bytes`` of them, at least one if any exist): the zero-copy view
        for bulk consumers. The first batch may begin below ``offset``.
        Records still buffered come back as a freshly encoded batch."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            self._check_read_offset_locked(offset)
            out: list[RecordBatch] = []
            if offset >= self._written_end:
                if offset < self._next_offset:
                    i = offset - self._written_end
                    buf = encode_batch(
                        offset, self._buf_values[i:], keys=None if self._buf_keys is None else self._buf_keys[i:],
                        headers=None if self._buf_headers is None else self._buf_headers[i:], timestamps=self._buf_timestamps[i:],
                    )
                    out.append(decode_batch(buf))
                return out
            segs = list(zip(self._segments, self._base_offsets[1:] + [self._written_end]))
            written_end = self._written_end
        total = 0
        i = max(0, bisect.bisect_right([s.base_offset for s, _ in segs], offset) - 1)
        while i < len(segs) and total < max_bytes and offset < written_end:
            seg = segs[i][0]
            got = self._batches_at(seg, offset, max_bytes - total)
            if got is not None:
                batches, _ = got
                for b in batches:
                    if b.next_offset <= offset:
                        continue
                    if b.base_offset >= written_end:
                        break
                    out.append(b)
                    total += b.size_bytes
                    offset = b.next_offset
                if batches:
                    if total >= max_bytes:
                        break
                    continue
            i += 1
        return out

    def wait_for(self, offset: int, timeout: float | None) -> bool:
        """Block until a record at ``offset`` or later exists (end_offset > offset)
        or ``timeout`` seconds pass; True if it exists. Woken by appends, not by
        polling (a readonly log, fed by another process, re-reads the files)."""
        if self.readonly:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                self.refresh()
                if self._next_offset > offset:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                time.sleep(min(0.05, left) if left is not None else 0.05)
        with self._lock:
            if self._next_offset > offset:
                return True
            self._read_waiters += 1
            try:
                self._appended.wait_for(lambda: self._next_offset > offset or self._closed, timeout)
            finally:
                self._read_waiters -= 1
            return self._next_offset > offset

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp_ms``
        (None if there is none yet)."""
        with self._lock:
            segs = list(self._segments)
            buffered = [(self._written_end + k, t) for k, t in enumerate(self._buf_timestamps)]
        for seg in segs:
            if self._segment_max_ts(seg) < timestamp_ms:
                continue
            ti = seg.checked_timeindex()
            e = ti.lower(timestamp_ms) if ti is not None else None
            found = None if e is None else seg.find_batch(seg.base_offset + e[1])
            pos, expected = found if found is not None else (0, seg.base_offset)
            for info in seg.iter_valid(pos, seg.size, expected=expected):
                if info.max_timestamp_ms < timestamp_ms:
                    continue
                b = decode_batch(seg.pread(info.position, info.size), 0, where=seg.log_path)
                for k in range(max(0, self._start_offset - b.base_offset), b.count):
                    if b.timestamp(k) >= timestamp_ms:
                        return b.base_offset + k
        for off, t in buffered:
            if t >= timestamp_ms:
                return off
        return None

    def _segment_max_ts(self, seg: Segment) -> int:
        ti = seg.checked_timeindex()  # a rebuild (if needed) also finds the exact max
        m = max(seg.max_timestamp_ms, ti.last()[0] if ti is not None and ti.entries else -1)
        if m < 0:
            for info in seg.iter_valid(0, seg.size, expected=seg.base_offset):
                m = max(m, info.max_timestamp_ms)
        seg.max_timestamp_ms = max(seg.max_timestamp_ms, m)
        return seg.max_timestamp_ms

    # -------------------------------------------------------------- retention

    def delete_before(self, offset: int) -> int:
        """Make ``offset`` the new start (never past the end) and delete the
        whole segments below it; returns the number of segments deleted. The
        active segment is rolled for deletion only once it holds at least a
        quarter of ``segment_bytes``: disk use follows the backlog to within
        that much."""
        with self._lock:
            self._check_writable()
            offset = min(offset, self._next_offset)
            if offset <= self._start_offset:
                return 0
            if offset > self._written_end:
                self._write_buffer_locked()
            # A fully consumed active segment is rolled (so it can be deleted) only
            # once it is worth reclaiming: rolling costs fsyncs, and a queue that
            # drains often would otherwise roll on every drain.
            if offset >= self._written_end and self._active.size >= self.segment_bytes // 4:
                self._roll_locked()
            n = 0
            while len(self._segments) > 1 and self._base_offsets[1] <= offset:
                self._delete_first_locked()
                n += 1
            self._start_offset = offset
            self._run_cache = None
            self._write_checkpoint()
            return n

    def _delete_first_locked(self) -> None:
        seg = self._segments.pop(0)
        self._base_offsets.pop(0)
        seg.delete()
        self._run_cache = None
        if self._read_hint is not None and self._read_hint[0] is seg:
            self._read_hint = None

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past ``retention_ms`` (by their newest record)
        or beyond ``retention_bytes``; never the active segment."""
        with self._lock:
            self._check_writable()
            return self._apply_retention_locked(self._now_ms() if now_ms is None else now_ms)

    def _apply_retention_locked(self, now_ms: int) -> int:
        n = 0
        if self.retention_ms is not None:
            while len(self._segments) > 1 and self._segment_max_ts(self._segments[0]) < now_ms - self.retention_ms:
                self._delete_first_locked()
                n += 1
        if self.retention_bytes is not None:
            total = sum(s.size for s in self._segments)
            while len(self._segments) > 1 and total - self._segments[0].size >= self.retention_bytes:
                total -= self._segments[0].size
                self._delete_first_locked()
                n += 1
        if n:
            self._start_offset = max(self._start_offset, self._base_offsets[0])
            fsync_dir(self.path)
            self._write_checkpoint()
        return n

    # ------------------------------------------------------------------ info

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments) + self._buf_bytes

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
            try:
                if not self.readonly and self._failed is None:
                    while self._syncing:
                        self._synced.wait()
                    self._write_buffer_locked()
                    for seg in self._unsynced:
                        seg.sync()
                    self._unsynced = []
                    self._active.seal()
                    self._durable_end = self._written_end
                    self._write_checkpoint(self._written_end)
                    atomic_write(os.path.join(self.path, CLEAN_MARKER), b"")
            finally:
                self._closed = True
                self._blocked = True
                self._appended.notify_all()
                self._synced.notify_all()
                self._group.release_all()  # durable now, or they see the log closed
                self._close_files()
                if self._dir_lock is not None:
                    self._dir_lock.release()

    def _close_files(self) -> None:
        for s in getattr(self, "_segments", []):
            try:
                s.close()
            except OSError:
                pass
        self._run_cache = None
        self._read_hint = None

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
