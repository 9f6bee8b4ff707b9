"""Durable lease state of a queue: an append-only state log plus a snapshot.

Layout (``DATA/queues/{name}/state/``)::

    log/            a vqs.storage.Log of state records (docs/FORMAT.md, record batches)
    snapshot        one record batch (CRC-checked), replaced atomically

Every change of a message's lease state is a record of the state log, written
before the call that made it returns (with the queue's flush policy: ``always``
fsyncs first, group-committed; ``interval``/``never`` buffer as the Log does).
A record's value is one operation on one or more messages::

    b"L" + n * (offset u64, nonce u64, until_ms i64, received_ms i64,
                first_received_ms i64, receive_count u32)      lease / visibility change
    b"R" + m * (offset u64, nonce u64, n u32, until_ms i64, received_ms i64)
                                                             first leases of runs: offset + i
                                                             leased with nonce + i (i < n),
                                                             first_received = received, count 1
    b"D" + n * offset u64                                    delete (ack, DLQ move, expiry)
    b"P" + below u64                                         purge: every offset < below deleted
    b"E" + end u64 + nonce u64                               receipt epoch (below), written only
                                                             when its snapshot finds the disk full
    b"M" + target_end u64 + len u16 + target + n * offset u64
                                                             move intent: these messages are being
                                                             moved to queue ``target`` (utf-8), whose
                                                             log then ended at ``target_end``

Space on a full disk (the queue's drain path must outlive its lease churn):
the state log's appends are control writes (``Log.open(control=True)``,
vqs.disk.space): the space governor refuses them only under a quarter of
the floor that refuses sends, so receives, visibility changes and deletes go
on after sends are refused. Records kept here before they go to the log
(``buffered``) are counted as used too (``space.Claim``). A receive or a
visibility change keeps ``DELETE_FLOOR`` more for deletes (``room_for(...,
floor=True)`` raises DiskFullError before anything changes), so a consumer
can always acknowledge what it holds. The store counts the bytes appended
since the last snapshot (``grown``); the queue snapshots past ``compact_at``:
``COMPACT_BYTES``, or on a full disk ``SHORT_COMPACT_BYTES``, so the space of
delete records comes back (the state log's older segments are deleted).

An "L" entry is the whole state of that message's current delivery, so replay
just keeps the last one. The snapshot is the whole in-memory state at state
log offset ``state_offset`` (records below it are already folded in, and are
in the log's file, fsynced, before the snapshot is: the log's end never falls
below it, so no record appended later can land where replay skips it); after a
snapshot is written the state log's older segments are deleted (compaction).

Snapshot batch records: [0] JSON ``{"version", "state_offset", "low", "cursor",
"taken_ms", "epochs"}``, [1] the live entries packed as in "L" (count 0 = a delayed
message never received, ``until_ms`` = when it becomes visible), [2] the
offsets >= cursor already deleted (u64 each).

A move intent ("M", vqs/broker/queue/redrive.py) is fsynced before the target's log can hold
any of the messages; the source's "D" record for them follows (or, when the target refused
them, nothing). Replay keeps the intents no "D" followed (``RecoveredState.moving``: offset ->
(target, target_end)); the snapshot meta carries them as ``"moving": [[offset, target,
target_end], ...]`` (absent: none). The queue looks a message up in its target's log from
``target_end`` on (by message id) before moving it again: a move that a crash or a full disk
interrupted after the target took it is finished, not repeated.

``epochs`` (absent in older snapshots: ``[]``) is the receipt-handle epoch list of
vqs.broker.queue.leases (``[[first offset, first nonce], ...]``): the queue appends an entry when it opens after a crash and
writes a snapshot before it issues a handle, so the list is durable before it
is relied on. Where that snapshot finds the disk full (an open after a crash
on a full disk), the queue writes the epoch as an "E" record to the state log
instead (a control write, a few bytes): replay forgets every state at offsets >=
``end`` (as the snapshot would have), lowers ``low`` and ``cursor`` to ``end``
and appends the epoch; the next snapshot folds it in.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
from array import array

from ...disk import Claim
from ...errors import CorruptRecordError, DiskFullError
from ...record import decode_batch, encode_batch
from ...storage import BATCH_FIXED, RECORD_FIXED, Log, atomic_write
from .lease_records import ENTRY, EPOCH, MOVE, OP_DELETE, OP_EPOCH, OP_LEASE, OP_MOVE, OP_PURGE, OP_RUN, RUN

logger = logging.getLogger("vqs.broker")

SNAPSHOT = "snapshot"
PENDING_BYTES = 512 << 10  # buffered=True: push past this many bytes
#: bound of the batch headers of one push of the pending records (append_batch may split it)
PUSH_FIXED = 4 * BATCH_FIXED

#: what only deletes and purges may use on a full disk (module doc): about
#: 500 one-message delete records (snapshots on a full disk come every SHORT_COMPACT_BYTES)
DELETE_FLOOR = 16 << 10
#: snapshot (compact) once the state log grew this much since the last snapshot
COMPACT_BYTES = 8 << 20
#: on a full disk, snapshot (compact) after this many bytes of records
SHORT_COMPACT_BYTES = 32 << 10
#: an earlier version's scratch file (removed at open)
_OLD_SPARE = "snapshot.spare"

class RecoveredState:
    """What a queue restarts from."""

    def __init__(self):
        self.low = 0
        self.cursor = 0
        # offset -> [nonce, until_ms, count, received_ms, first_ms]
        self.live: dict[int, list] = {}
        self.deleted_ahead: set[int] = set()
        self.replayed_records = 0
        self.max_nonce = 0  # the largest nonce of a recovered lease
        self.epochs: list[tuple[int, int]] = []  # the snapshot's, then "E" records'
        self.moving: dict[int, tuple[str, int]] = {}  # move intents no delete followed


class LeaseStateStore:
    """The state log and snapshot of one queue (see module doc)."""

    __slots__ = ("path", "log", "grown", "compact_at", "_durable_each", "_buffered", "_pending",
                 "_pending_bytes", "_claim", "snapshot_offset", "epochs")

    def __init__(self, path: str, *, flush: str, flush_interval_ms: int = 100,
                 segment_bytes: int = 8 << 20, recovery: str = "fail", buffered: bool = False,
                 min_free_bytes: int | None = None):
        self.path = path
        os.makedirs(path, exist_ok=True)
        self.log = Log.open(
            os.path.join(path, "log"), flush=flush, flush_interval_ms=flush_interval_ms,
            segment_bytes=segment_bytes, segment_ms=None, recovery=recovery, control=True,
            min_free_bytes=min_free_bytes,
        )
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(path, _OLD_SPARE))
        self.grown = 0  # record bytes appended since the last snapshot
        # the queue snapshots once ``grown`` passes it; SHORT_COMPACT_BYTES from when a
        # claim or write of the state log found no space until a snapshot succeeds
        self.compact_at = COMPACT_BYTES
        self.log.on_disk_short = self._short  # (under the log's lock: it only sets flags)
        self._durable_each = flush == "always"
        # buffered=True: records are kept here and handed to the log as one
        # append_batch by push() (the owner calls it under its lock: when this
        # buffer fills, from its interval tick, and before flush/snapshot/close).
        self._buffered = buffered and not self._durable_each
        self._pending: list = []
        self._pending_bytes = 0
        self._claim = Claim(self.log.path, min_free_bytes, control=True)  # the pending records' room (module doc)
        self.snapshot_offset = 0  # state-log offset the last snapshot covers
        # receipt-handle epochs (first offset, first nonce): kept by the queue,
        # carried by every snapshot (module doc)
        self.epochs: list[tuple[int, int]] = []

    # ---------------------------------------------------------------- writes

    def append(self, value: bytes) -> None:
        """Append one operation record. With flush=always it is fsynced on return;
        otherwise it is buffered like any Log append (written by the flusher)."""
        self.grown += len(value)
        if self._buffered:
            p = self._pending
            # acknowledged once pending: counted by the space governor (Claim), or refused here
            need = self._pending_bytes + len(value) + RECORD_FIXED * (len(p) + 1) + PUSH_FIXED
            if need > self._claim.held:
                self._hold(need)
            p.append(value)
            self._pending_bytes += len(value)
            if len(p) >= 1024 or self._pending_bytes >= PENDING_BYTES:
                self.push()
        elif self._durable_each:
            self.log.append_batch([value])
        else:
            self.log.append(value)

    def append_many(self, values: list) -> None:
        if self._buffered:
            for v in values:
                self.append(v)
            return
        self.grown += sum(map(len, values))
        if self._durable_each:
            self.log.append_batch(values)
        else:
            for v in values:
                self.log.append(v)

    def room_for(self, nbytes: int, floor: bool = True) -> None:
        """Before an operation that appends up to ``nbytes`` of records: hold
        the space now, so a full disk refuses it (DiskFullError) before it
        changes anything in memory, not after (a receive's leases). ``floor``
        (receives, visibility changes): keep ``DELETE_FLOOR`` more for deletes
        (module doc). Buffered, the common case is one comparison."""
        need = self._pending_bytes + nbytes + RECORD_FIXED * (len(self._pending) + 2) + PUSH_FIXED
        if floor:
            need += DELETE_FLOOR
        if need > self._claim.held:
            self._hold(need)
            if not self._buffered:
                self._claim.release()  # (a check: the log takes its own room when appended)

    def _hold(self, bound: int) -> None:
        try:
            self._claim.ensure(bound)
        except DiskFullError:
            self._short()
            raise

    def _short(self) -> None:
        self.compact_at = SHORT_COMPACT_BYTES

    def snapshot_waits(self) -> None:
        """A periodic snapshot found the disk full: try again after half as much again."""
        self.grown = self.compact_at // 2

    @property
    def pending(self) -> bool:
        """Records not yet handed to the log (buffered=True)."""
        return bool(self._pending)

    def push(self) -> None:
        """Hand the buffered records to the log (written at once, fsynced as
        the log's flush policy says)."""
        p = self._pending
        if p:
            claimed = self._claim.held
            try:
                self.log.append_batch(p, claim=self._claim)  # (its bytes become the log's grant)
            except BaseException:
                self._claim.force(claimed)  # acknowledged: still counted, still pending
                raise
            self._pending = []
            self._pending_bytes = 0
            self._claim.release()

    def flush(self) -> None:
        """Write and fsync what is in the log (call push() first for the buffer)."""
        self.log.flush()

    def write_epoch(self, end: int, nonce: int) -> None:
        """Make the receipt epoch (``end``, ``nonce``) durable without a snapshot
        (module doc): an "E" record, fsynced before this returns whatever the
        flush policy. A control write of a few bytes; where even that finds no
        space it raises DiskFullError: the queue opens all the same and its
        sends wait for the epoch, vqs.broker.queue.core)."""
        self.push()
        self.log.append_batch([bytes([OP_EPOCH]) + EPOCH.pack(end, nonce)])
        self.log.flush()

    # -------------------------------------------------------------- snapshot

    def write_snapshot(self, *, low: int, cursor: int, live: dict, deleted_ahead, now_ms: int,
                       moving: dict | None = None) -> None:
        """Atomically replace the snapshot with this state, then drop the state
        log below it. The caller holds the queue lock (no op can slip between)."""
        self.push()
        # Every record below state_offset is in the log's file, fsynced, before a
        # snapshot names it (flush="always" queues append to the log's own buffer,
        # fsynced after the queue lock): else a crash after the rename leaves the
        # log's end below state_offset, and the records the next run appends there
        # (an "E" record, leases, deletes) are skipped by the replay after it.
        # A buffer that finds no space raises here: no snapshot, the log stays the truth.
        self.log.flush()
        state_offset = self.log.end_offset
        meta = json.dumps({
            "version": 1, "state_offset": state_offset, "low": low, "cursor": cursor,
            "taken_ms": now_ms, "epochs": [list(e) for e in self.epochs],
            **({"moving": [[o, t, e] for o, (t, e) in moving.items() if o in live]} if moving else {}),
        }).encode()
        flat = []
        for o, e in live.items():  # e: a vqs.broker.queue.leases.Lease
            flat += (o, e.nonce, e.until, e.received, e.first, e.count)
        n = len(live)
        blob = struct.pack("<" + "QQqqqI" * n, *flat) if n else b""
        ahead = array("Q", sorted(deleted_ahead))
        if ahead.itemsize != 8:  # pragma: no cover
            raise RuntimeError("array('Q') is not 8 bytes here")
        data = encode_batch(0, [meta, blob, ahead.tobytes()], timestamps=now_ms)
        # A SIGKILL at any step leaves a state that opens with every acknowledged
        # record: until the rename the old snapshot and the whole state log after
        # it are there; the rename is atomic and made durable (directory fsync)
        # before any state-log segment is deleted, and the new snapshot covers
        # every record below state_offset; deleting segments below it (a rolled
        # active one too, the log keeps its next offset) loses nothing replay reads.
        # A full disk raises DiskFullError here: no snapshot, the log stays the truth.
        atomic_write(os.path.join(self.path, SNAPSHOT), data)
        self.snapshot_offset = state_offset
        self.log.delete_before(state_offset)
        self.grown = 0
        self.compact_at = COMPACT_BYTES

    # -------------------------------------------------------------- recovery

    def recover(self) -> RecoveredState:
        st = RecoveredState()
        snap = os.path.join(self.path, SNAPSHOT)
        start = self.log.start_offset
        if os.path.exists(snap):
            with open(snap, "rb") as f:
                data = f.read()
            b = decode_batch(data, 0, where=snap)
            if b.count != 3:
                raise CorruptRecordError(f"{snap}: expected 3 records, found {b.count}", path=snap)
            meta = json.loads(b.value(0))
            if meta.get("version") != 1:
                raise CorruptRecordError(f"{snap}: unknown snapshot version {meta.get('version')!r}", path=snap)
            st.low = meta["low"]
            st.cursor = meta["cursor"]
            self.epochs = [(int(o), int(n)) for o, n in meta.get("epochs", ())]
            st.epochs = list(self.epochs)
            st.moving = {int(o): (str(t), int(e)) for o, t, e in meta.get("moving", ())}
            self.snapshot_offset = start = meta["state_offset"]
            blob = b.value(1)
            live = st.live
            for o, nonce, until, received, first, count in ENTRY.iter_unpack(blob):
                live[o] = [nonce, until, count, received, first]
            ahead = array("Q")
            ahead.frombytes(b.value(2))
            st.deleted_ahead = set(ahead)
        start = max(start, self.log.start_offset)
        end = self.log.end_offset
        off = start
        while off < end:
            recs = self.log.read(off, max_records=4096)
            if not recs:
                break
            for r in recs:
                self._apply(st, r.value)
            st.replayed_records += len(recs)
            off = recs[-1].offset + 1
        self.epochs = st.epochs
        if st.live:
            st.max_nonce = max(e[0] for e in st.live.values())
        self._fill_below_snapshot()
        return st

    def _fill_below_snapshot(self) -> None:
        """A snapshot past the log's end (written before 2026-11-25, when a snapshot
        could name records still in the log's buffer, then a crash): fill the gap
        with empty "D" records, so that nothing appended from now on lands below
        ``snapshot_offset``, where the next replay would skip it."""
        gap = self.snapshot_offset - self.log.end_offset
        if gap > 0:
            logger.warning("%s: the state log ends %d records before its snapshot's offset %d "
                           "(a crash after that snapshot); filling the gap", self.path, gap, self.snapshot_offset)
            try:
                self.log.append_batch([bytes([OP_DELETE])] * gap)
                self.log.flush()
            except DiskFullError as e:  # (opens all the same: records appended meanwhile may not replay)
                logger.warning("%s: gap not filled: %s", self.path, e)

    @staticmethod
    def _apply(st: RecoveredState, v: bytes) -> None:
        op = v[0]
        live = st.live
        if op == OP_LEASE:
            for o, nonce, until, received, first, count in ENTRY.iter_unpack(memoryview(v)[1:]):
                live[o] = [nonce, until, count, received, first]
                st.deleted_ahead.discard(o)
        elif op == OP_RUN:
            ahead = st.deleted_ahead
            for o, nonce, n, until, received in RUN.iter_unpack(memoryview(v)[1:]):
                for i in range(n):
                    live[o + i] = [nonce + i, until, 1, received, received]
                if ahead:
                    ahead.difference_update(range(o, o + n))
        elif op == OP_DELETE:
            n = (len(v) - 1) // 8
            moving = st.moving
            for o in struct.unpack_from("<%dQ" % n, v, 1):
                live.pop(o, None)
                if moving:
                    moving.pop(o, None)
                if o >= st.cursor:
                    st.deleted_ahead.add(o)
        elif op == OP_PURGE:
            (below,) = struct.unpack_from("<Q", v, 1)
            for o in [o for o in live if o < below]:
                del live[o]
            st.deleted_ahead = {o for o in st.deleted_ahead if o >= below}
            st.low = max(st.low, below)
            st.cursor = max(st.cursor, below)
            st.moving = {o: m for o, m in st.moving.items() if o >= below}
        elif op == OP_EPOCH:
            end, nonce = EPOCH.unpack_from(v, 1)
            for o in [o for o in live if o >= end]:
                del live[o]
            st.deleted_ahead = {o for o in st.deleted_ahead if o < end}
            st.low = min(st.low, end)
            st.cursor = min(st.cursor, end)
            st.epochs = [e for e in st.epochs if e[0] < end] + [(end, nonce)]
            st.moving = {o: m for o, m in st.moving.items() if o < end}
        elif op == OP_MOVE:
            target_end, k = MOVE.unpack_from(v, 1)
            at = 1 + MOVE.size
            target = bytes(v[at:at + k]).decode()
            at += k
            for o in struct.unpack_from("<%dQ" % ((len(v) - at) // 8), v, at):
                st.moving[o] = (target, target_end)
        else:
            raise CorruptRecordError(f"state log record with unknown operation {op:#x}")

    def close(self) -> None:
        """Hand the buffered records to the log and close it; the log is closed (its
        files and lock released) even when the push fails (a full disk), whose
        error is raised then."""
        try:
            if not self.log.closed:
                self.push()
        finally:
            self.log.close()
