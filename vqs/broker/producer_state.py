"""Idempotent producers: producer ids, and per partition the last sequences of each producer.

``new_producer`` hands out ids from DATA/producer_ids: the file holds the
first id not yet handed out in blocks of ``BLOCK``, replaced atomically
before any id of a new block is used, so an id is never handed out twice,
even after a crash (a crash skips the rest of the block).

Sequences: an idempotent batch is appended with its (producer id, epoch,
base sequence) in the VQS batch header (Log.append_batch(producer=...)), so
the log itself is the durable record of every producer's sequences, as in
Kafka. A partition's state is built on first use by scanning its batches
from the snapshot's offset (DATA/topics/T/P/producers.json, written by
``snapshot`` after the log is flushed, so it never covers a record a crash
could lose) or from the start. What a crash loses from the log's tail is
lost from the state with it: a retry of such a batch is appended again, and
a retry of a batch that survived is a duplicate. Check, append and state
update happen under the partition's lock.

A batch larger than the log's ``batch_max_bytes`` is stored as several
pieces (Log.append_batch splits it) that all carry the batch's base sequence;
the scan merges pieces that follow one another with the same (producer,
epoch, base sequence) back into the one batch the producer sent, so a retry
of it after a crash is still a duplicate. (Logs written before that carry
consecutive sequences in the pieces; ``check`` also takes a run of kept
batches that covers exactly the retried range as that batch.)

Rules (Kafka's): a batch whose (sequence, count) matches one of the
producer's last ``KEEP`` batches is a duplicate (answered with the first
append's offset, appended nothing); the next sequence (last + 1, wrapping at
2^31) is appended; an older epoch is fenced (``fenced``); a new epoch or an
unknown producer must start at sequence 0; anything else is ``out_of_order``.
"""

from __future__ import annotations

import json
import threading
from collections import deque

from ..errors import CorruptRecordError, OutOfOrderSequence, ProducerFenced, UnknownProducerId
from ..storage import atomic_write
from .layout import producer_ids_file, producer_snapshot_file

BLOCK = 1000
KEEP = 5


class PartitionProducers:
    """The producers of one partition log: pid -> (epoch, deque of (seq, count, first offset))."""

    def __init__(self, log):
        self.log = log
        self.lock = threading.Lock()
        self.state: dict[int, tuple[int, deque]] = {}
        self.valid_to = 0

    def load(self) -> None:
        path = producer_snapshot_file(self.log.path)
        start = self.log.start_offset
        try:
            with open(path, "rb") as f:
                snap = json.loads(f.read())
            if start <= snap["offset"] <= self.log.end_offset:
                self.state = {int(p): (e, deque((tuple(b) for b in bs), KEEP)) for p, (e, bs) in snap["producers"].items()}
                start = snap["offset"]
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError):
            self.state = {}  # a bad snapshot only costs a full scan: the log is the truth
        off = start
        end = self.log.end_offset
        prev = None  # (pid, epoch, seq, next offset) of the last batch scanned
        while off < end:
            batches = self.log.read_batches(off, max_bytes=8 << 20)
            if not batches:
                break
            for b in batches:
                if b.next_offset <= off:
                    continue
                pid = b.producer_id
                if pid >= 0:
                    key = (pid, b.producer_epoch, b.base_sequence, b.base_offset)
                    if prev == key:
                        self._extend(pid, b.count)  # a further piece of a batch split on append
                    else:
                        self._record(pid, b.producer_epoch, b.base_sequence, b.count, b.base_offset)
                    prev = (pid, b.producer_epoch, b.base_sequence, b.next_offset)
                else:
                    prev = None
                off = b.next_offset
        self.valid_to = off

    def _extend(self, pid: int, count: int) -> None:
        batches = self.state[pid][1]
        s, c, first = batches[-1]
        batches[-1] = (s, c + count, first)

    def _record(self, pid: int, epoch: int, seq: int, count: int, first: int) -> None:
        cur = self.state.get(pid)
        if cur is None or cur[0] != epoch:
            cur = (epoch, deque(maxlen=KEEP))
            self.state[pid] = cur
        cur[1].append((seq, count, first))

    def check(self, pid: int, epoch: int, seq: int, count: int) -> tuple[str, int]:
        """("append", -1), ("duplicate", first offset), ("fenced", -1) or ("out_of_order", -1)."""
        cur = self.state.get(pid)
        if cur is None or epoch > cur[0]:
            return ("append", -1) if seq == 0 else ("out_of_order", -1)
        if epoch < cur[0]:
            return "fenced", -1
        batches = cur[1]
        for i, (s, c, first) in enumerate(batches):
            if s == seq:
                # Logs written before pieces shared their batch's base sequence hold a split
                # batch as pieces with consecutive sequences: a run of them is one batch.
                j = i + 1
                while c < count and j < len(batches) and batches[j][0] == (seq + c) & 0x7FFFFFFF:
                    c += batches[j][1]
                    j += 1
                if c == count:
                    return "duplicate", first
        if not batches:
            return ("append", -1) if seq == 0 else ("out_of_order", -1)
        s, c, _ = batches[-1]
        if seq == (s + c) & 0x7FFFFFFF:
            return "append", -1
        return "out_of_order", -1

    def snapshot(self) -> int:
        """Record the state up to the log's end durably (bounds the next scan; under ``lock``);
        the offset it covers. The end is read before the log is flushed, so every record
        below it is on disk when the snapshot is: a crash can never leave a snapshot past the
        log's end (one past it would be ignored, and the scan from the start could not
        rebuild producers whose batches the log cleaner has since emptied)."""
        end = self.log.end_offset
        self.log.flush()
        data = {"offset": end,
                "producers": {str(p): [e, [list(b) for b in bs]] for p, (e, bs) in self.state.items()}}
        atomic_write(producer_snapshot_file(self.log.path), json.dumps(data).encode())
        return end


class ProducerStates:
    """Producer ids of a data directory and the per-partition sequence state."""

    def __init__(self, path: str):
        self.ids_path = producer_ids_file(path)
        self._lock = threading.Lock()
        self._next = self._block_end = self._read_ids()
        self._parts: dict[tuple[str, int], PartitionProducers] = {}

    def _read_ids(self) -> int:
        try:
            with open(self.ids_path, "rb") as f:
                return int(f.read().strip() or b"0")
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as e:
            raise CorruptRecordError(f"unreadable producer id file {self.ids_path}: {e}",
                                     path=self.ids_path) from e

    def new_producer(self) -> tuple[int, int]:
        """A fresh (producer id, epoch 0), never handed out before in this data directory."""
        with self._lock:
            if self._next >= self._block_end:
                atomic_write(self.ids_path, b"%d\n" % (self._block_end + BLOCK))
                self._block_end += BLOCK
            pid = self._next
            self._next += 1
            return pid, 0

    def partition(self, topic, p: int) -> PartitionProducers:
        """The state of ``topic``'s partition ``p`` (a Topic), loaded on first use."""
        log = topic.log(p)
        key = (topic.name, p)
        with self._lock:
            st = self._parts.get(key)
            if st is None or st.log is not log:  # first use, or the topic was recreated
                st = self._parts[key] = PartitionProducers(log)
                with st.lock:
                    st.load()
            return st

    def append(self, topic, p: int, pid: int, epoch: int, seq: int, values, keys, headers,
               timestamps) -> tuple[str, int]:
        """Check and append one idempotent batch; (status, first offset) as ``check`` plus "append"."""
        st = self.partition(topic, p)
        with st.lock:
            status, first = st.check(pid, epoch, seq, len(values))
            if status != "append":
                return status, first
            first = st.log.append_batch(values, keys=keys, headers=headers, timestamps_ms=timestamps,
                                        producer=(pid, epoch, seq))
            st._record(pid, epoch, seq, len(values), first)
            return "append", first

    def check_known(self, pid: int) -> None:
        """Raise UnknownProducerId unless ``pid`` was handed out by ``new_producer`` (ever)."""
        with self._lock:
            if not 0 <= pid < self._next:
                raise UnknownProducerId(f"producer id {pid} was never handed out by this server")

    def send(self, topic, p: int, pid: int, epoch: int, seq: int, values, keys, headers,
             timestamps) -> tuple[int, bool]:
        """``append`` for VQS's own producers: (first offset, True if it was a duplicate whose
        first append had that offset); a gap raises OutOfOrderSequence, an old epoch ProducerFenced."""
        status, first = self.append(topic, p, pid, epoch, seq, values, keys, headers, timestamps)
        if status == "append" or status == "duplicate":
            return first, status == "duplicate"
        where = f"topic {topic.name!r} partition {p}"
        st = self.partition(topic, p)
        with st.lock:
            cur = st.state.get(pid)
        if status == "fenced":
            raise ProducerFenced(f"producer {pid} epoch {epoch} is fenced on {where}: epoch {cur[0]} wrote there")
        last = cur[1][-1] if cur and cur[1] else None
        nxt = 0 if last is None or epoch != cur[0] else (last[0] + last[1]) & 0x7FFFFFFF
        msg = (f"producer {pid} epoch {epoch}: a batch of {len(values)} at sequence {seq} on {where}, but the "
               f"next sequence there is {nxt}")
        if last is not None and 0 < (nxt - seq) & 0x7FFFFFFF < 1 << 30:
            msg += f" (the batch is older than the producer's last {KEEP} there: appended long ago, or lost)"
        raise OutOfOrderSequence(msg)

    def snapshot_partition(self, topic, p: int) -> int:
        """Record ``topic``'s partition ``p``'s producer state durably (loading it first if need
        be); the offset the record covers. The log cleaner calls it before a pass: below that
        offset, producers' batches need not stay in the log for the state to be rebuilt."""
        st = self.partition(topic, p)
        with st.lock:
            return st.snapshot()

    def snapshot(self) -> None:
        """Snapshot every loaded partition whose log is still open (at shutdown)."""
        with self._lock:
            parts = list(self._parts.values())
        for st in parts:
            if st.log.closed:
                continue
            with st.lock:
                st.snapshot()
