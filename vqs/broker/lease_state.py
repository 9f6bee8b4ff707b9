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
    b"D" + n * offset u64                                    delete (ack, DLQ move, expiry)
    b"P" + below u64                                         purge: every offset < below deleted

An "L" entry is the whole state of that message's current delivery, so replay
just keeps the last one. The snapshot is the whole in-memory state at state
log offset ``state_offset`` (records below it are already folded in); after a
snapshot is written the state log's older segments are deleted (compaction).

Snapshot batch records: [0] JSON ``{"version", "state_offset", "low", "cursor",
"taken_ms"}``, [1] the live entries packed as in "L" (count 0 = a delayed
message never received, ``until_ms`` = when it becomes visible), [2] the
offsets >= cursor already deleted (u64 each).
"""

from __future__ import annotations

import json
import os
import struct
from array import array

from ..errors import CorruptRecordError
from ..storage.durable_file import atomic_write
from ..storage.log import Log
from ..storage.record_batch import decode_batch, encode_batch

ENTRY = struct.Struct("<QQqqqI")
ENTRY_SIZE = ENTRY.size  # 44
OP_LEASE = 0x4C  # "L"
OP_DELETE = 0x44  # "D"
OP_PURGE = 0x50  # "P"
SNAPSHOT = "snapshot"

_lease_structs: dict[int, struct.Struct] = {}
_delete_structs: dict[int, struct.Struct] = {}


def lease_struct(n: int) -> struct.Struct:
    s = _lease_structs.get(n)
    if s is None:
        s = _lease_structs[n] = struct.Struct("<B" + "QQqqqI" * n)
    return s


def delete_struct(n: int) -> struct.Struct:
    s = _delete_structs.get(n)
    if s is None:
        s = _delete_structs[n] = struct.Struct("<B%dQ" % n)
    return s


def encode_leases(flat: list, n: int) -> bytes:
    """``flat`` = n * (offset, nonce, until, received, first, count)."""
    return lease_struct(n).pack(OP_LEASE, *flat)


def encode_deletes(offsets) -> bytes:
    return delete_struct(len(offsets)).pack(OP_DELETE, *offsets)


class RecoveredState:
    """What a queue restarts from."""

    def __init__(self):
        self.low = 0
        self.cursor = 0
        # offset -> [nonce, until_ms, count, received_ms, first_ms]
        self.live: dict[int, list] = {}
        self.deleted_ahead: set[int] = set()
        self.replayed_records = 0


class LeaseStateStore:
    """The state log and snapshot of one queue (see module doc)."""

    def __init__(self, path: str, *, flush: str, flush_interval_ms: int = 100,
                 segment_bytes: int = 8 << 20, recovery: str = "fail"):
        self.path = path
        os.makedirs(path, exist_ok=True)
        self.log = Log.open(
            os.path.join(path, "log"), flush=flush, flush_interval_ms=flush_interval_ms,
            segment_bytes=segment_bytes, segment_ms=None, recovery=recovery,
        )
        self._durable_each = flush == "always"
        self.snapshot_offset = 0  # state-log offset the last snapshot covers

    # ---------------------------------------------------------------- writes

    def append(self, value: bytes) -> None:
        """Append one operation record. With flush=always it is fsynced on return;
        otherwise it is buffered like any Log append (written by the flusher)."""
        if self._durable_each:
            self.log.append_batch([value])
        else:
            self.log.append(value)

    def append_many(self, values: list) -> None:
        if self._durable_each:
            self.log.append_batch(values)
        else:
            for v in values:
                self.log.append(v)

    def flush(self) -> None:
        self.log.flush()

    @property
    def bytes_since_snapshot(self) -> int:
        return self.log.size_bytes

    # -------------------------------------------------------------- snapshot

    def write_snapshot(self, *, low: int, cursor: int, live: dict, deleted_ahead, now_ms: int) -> None:
        """Atomically replace the snapshot with this state, then drop the state
        log below it. The caller holds the queue lock (no op can slip between)."""
        state_offset = self.log.end_offset
        meta = json.dumps({
            "version": 1, "state_offset": state_offset, "low": low, "cursor": cursor,
            "taken_ms": now_ms,
        }).encode()
        flat = []
        for o, e in live.items():
            flat += (o, e[0], e[1], e[3], e[4], e[2])
        n = len(live)
        blob = struct.pack("<" + "QQqqqI" * n, *flat) if n else b""
        ahead = array("Q", sorted(deleted_ahead))
        if ahead.itemsize != 8:  # pragma: no cover
            raise RuntimeError("array('Q') is not 8 bytes here")
        data = encode_batch(0, [meta, blob, ahead.tobytes()], timestamps=now_ms)
        atomic_write(os.path.join(self.path, SNAPSHOT), data)
        self.snapshot_offset = state_offset
        self.log.delete_before(state_offset)

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
        return st

    @staticmethod
    def _apply(st: RecoveredState, v: bytes) -> None:
        op = v[0]
        live = st.live
        if op == OP_LEASE:
            for o, nonce, until, received, first, count in ENTRY.iter_unpack(memoryview(v)[1:]):
                live[o] = [nonce, until, count, received, first]
                st.deleted_ahead.discard(o)
        elif op == OP_DELETE:
            n = (len(v) - 1) // 8
            for o in struct.unpack_from("<%dQ" % n, v, 1):
                live.pop(o, None)
                if o >= st.cursor:
                    st.deleted_ahead.add(o)
        elif op == OP_PURGE:
            (below,) = struct.unpack_from("<Q", v, 1)
            for o in [o for o in live if o < below]:
                del live[o]
            st.deleted_ahead = {o for o in st.deleted_ahead if o >= below}
            st.low = max(st.low, below)
            st.cursor = max(st.cursor, below)
        else:
            raise CorruptRecordError(f"state log record with unknown operation {op:#x}")

    def close(self) -> None:
        self.log.close()
