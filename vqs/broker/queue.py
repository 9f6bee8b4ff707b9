"""An SQS-style queue: a message log plus durable lease state (DESIGN.md, Broker/Queues).

Storage (``DATA/queues/{name}/``): ``queue.meta`` (the VQS v1 header page,
vqs.broker.queue_meta), ``queue.json`` (the rest of the configuration and the
receipt-handle secret), ``messages/`` (a vqs.storage.Log: one record per message,
body = value, metadata in record headers) and ``state/`` (vqs.broker.lease_state).

Message states (in memory, rebuilt at open from the snapshot + state log + message log)::

    fresh      in the log, never received; standard queues keep no per-message
               state for these: everything at or past ``cursor`` is fresh unless
               listed in ``live`` or ``ahead``
    DELAYED    not visible before ``until`` (per-queue or per-message delay)
    INFLIGHT   received, leased until ``until`` (visibility timeout)
    AVAILABLE  received before, lease expired or released: visible again
    MOVING     being moved to the dead-letter queue or redriven out of it
    deleted    gone (ack, purge, DLQ move, retention); the lowest offset not deleted
               is ``low``; whole segments below it are deleted from disk

Durability (the queue's ``flush`` setting, default ``interval``):

* ``always``: ``send`` returns after the message is fsynced; ``receive``,
  ``delete``, ``change_visibility`` return after their state record is fsynced
  (concurrent callers share fsyncs). A crash (kill -9, power loss) loses no
  acknowledged send or delete, and a leased message never comes back before its
  lease ends.
* ``interval``: sends and state records are buffered (in the queue, handed to
  the logs in batches; standard queues' plain sends too) and written and
  fsynced every ``flush_interval_ms`` (100 ms) by a background thread; a crash
  (even a process crash) can lose that last interval: sends (lost), deletes (the
  message is delivered again), leases (the message may come back early). This
  is what makes a send/receive/delete cycle cost microseconds, not an fsync.
* ``never``: written when a log's batch buffer fills, and at close.

Moves between queues (dead-letter moves, redrives) always fsync the target
queue's log before the source deletes the message: a crash leaves a duplicate,
never a loss.

Receipt handles: stale-handle rules (SQS's documented behaviour):

* standard queue, ``delete``: a handle of the message's current delivery deletes
  it, even after its lease expired (as long as nobody received it since); a
  handle of an earlier delivery, or of a message already deleted, is a success
  that does nothing (the newer lease is untouched);
* FIFO queue, ``delete``: the handle must be the current delivery and its lease
  unexpired, else ``ReceiptHandleExpired`` (SQS: InvalidParameterValue, "The
  receipt handle has expired"); an already deleted message is a success;
* ``change_visibility``: the handle must be the current, unexpired delivery, else
  ``MessageNotInflight``;
* a malformed or forged handle, or one from another queue: ``ReceiptHandleIsInvalid``.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import secrets
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from itertools import chain, repeat, starmap

from ..errors import (
    BatchEntryIdsNotDistinct,
    BatchRequestTooLong,
    EmptyBatchRequest,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidBatchEntryId,
    InvalidMessageContents,
    InvalidParameterValue,
    LogClosedError,
    MessageNotInflight,
    MissingParameter,
    OffsetOutOfRange,
    OverLimit,
    PurgeQueueInProgress,
    QueueError,
    QueueMessageTooLarge,
    ReceiptHandleExpired,
    TooManyEntriesInBatchRequest,
)
from ..storage.durable_file import atomic_write
from ..storage.flusher import Flusher
from ..storage.log import Log
from . import queue_meta
from .dedup import WINDOW_MS, DedupWindow, content_dedup_id
from .lease_state import (
    OP_PURGE,
    LeaseStateStore,
    encode_deletes,
    encode_leases,
    encode_runs,
)
from .queue_config import (
    DEFAULT_ARN_PREFIX,
    READ_ONLY_SQS,
    SQS_TO_PY,
    STORAGE_SETTINGS,
    QueueConfig,
    normalize,
    redrive_allows,
    validate_tags,
)
from .receipt import ReceiptCodec

DELAYED, INFLIGHT, AVAILABLE, MOVING = 0, 1, 2, 3
# live entry: [nonce, until_ms, receive_count, received_ms, first_received_ms, state]
_NONCE, _UNTIL, _COUNT, _RECV, _FIRST, _STATE = range(6)

MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 1048576  # SQS: a send batch's messages together
MAX_INFLIGHT = 120_000  # SQS's in-flight limit per queue (standard and FIFO)
MAX_VISIBILITY_S = 43200
MAX_WAIT_S = 20
MAX_DELAY_S = 900
MAX_MESSAGE_ATTRIBUTES = 10
PURGE_INTERVAL_MS = 60_000
COMPACT_BYTES = 8 << 20  # compact the state log (snapshot) past this many bytes
TAIL_BYTES = 32 << 20  # in-memory copy of recently sent, not yet received messages
PUSH_RUN_RECORDS = 32  # pushes pending sends as a batch per send-ms run when runs average this

# record header names (docs/FORMAT.md, "Queue state log" / message records)
H_GROUP = "g"  # message group id (utf-8)
H_DEDUP = "u"  # deduplication id (utf-8)
H_DELAY = "t"  # per-message delay, ms (ascii)
H_ID = "i"  # message id, when not derived from the offset (moved messages)
H_SENT = "o"  # original sent timestamp ms (ascii), when moved
H_SOURCE = "s"  # source queue name (messages moved to a dead-letter queue)
H_COUNT = "n"  # receive count at the source when moved to the DLQ (ascii)
H_ATTR = "m:"  # prefix: message attribute; value = DataType NUL value

_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_ATTR_NAME = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_GROUP_ID = re.compile(r"[!-~]{1,128}")  # alphanumerics and punctuation
# Characters SQS refuses in bodies and attribute strings (outside XML 1.0 Char).
_BAD_CHARS = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

_EMPTY = ()
_HANDLE = struct.Struct("<QQQ")  # a receipt handle's bytes: offset, nonce, tag (vqs.broker.receipt)
_TAG_WORDS: dict = {}


def _tag_words(nblocks: int) -> struct.Struct:
    """Struct reading ``nblocks`` 64-byte receipt tag blocks as u64 LE words."""
    s = _TAG_WORDS.get(nblocks)
    if s is None:
        s = _TAG_WORDS[nblocks] = struct.Struct("<%dQ" % (8 * nblocks))
    return s


def _message_ids(prefix: str, first: int, n: int) -> list[str]:
    """[f"{prefix}{o:012x}" for o in range(first, first + n)], formatting one
    number per 256 offsets (the ids of a batch differ in their last two digits).
    (``_send_plain`` serves a batch within one block of 256 from its cached
    prefix and calls this for the rest.)"""
    out: list = []
    o = first
    end = first + n
    while o < end:
        lo = o & 255
        k = min(256 - lo, end - o)
        out += map(f"{prefix}{o >> 8:010x}".__add__, _HEX2[lo:lo + k])
        o += k
    return out


_HEX2 = [f"{i:02x}" for i in range(256)]


def _now_ms_from(clock: Callable[[], float]) -> Callable[[], int]:
    if clock is time.time:
        ns = time.time_ns
        return lambda: ns() // 1_000_000
    return lambda: int(clock() * 1000)


class Message:
    """A received message.

    ``body`` is bytes (a ``str`` sent is stored UTF-8: ``text`` decodes it).
    ``attributes`` are the message attributes, normalized to SQS's shape
    ``{name: {"DataType": ..., "StringValue": ...} | {"DataType": ..., "BinaryValue": bytes}}``.
    """

    __slots__ = (
        "_pfx", "body", "receipt_handle", "sent_timestamp_ms",
        "first_receive_timestamp_ms", "_attrs", "offset", "__dict__",
    )
    # Rarely set: class defaults, so that making a plain message writes fewer
    # fields (a message that has one keeps it in its __dict__).
    receive_count = 1  # a first delivery's
    _id = None
    group_id = None
    dedup_id = None
    source_queue = None
    _fifo = False

    @classmethod
    def _first_delivery(cls, pfx: str, o: int, body, ts: int, handle: str, now: int) -> Message:
        """A plain message (no headers) received for the first time."""
        m = cls.__new__(cls)
        m._pfx = pfx
        m.body = body
        m.receipt_handle = handle
        m.sent_timestamp_ms = ts
        m.first_receive_timestamp_ms = now
        m.offset = o
        return m

    @property
    def attributes(self) -> dict:
        """The message attributes (a dict; {} when it has none)."""
        try:
            return self._attrs
        except AttributeError:  # a plain message: made on first use
            a = self._attrs = {}
            return a

    @attributes.setter
    def attributes(self, value: dict) -> None:
        self._attrs = value

    @property
    def id(self) -> str:
        """The message id (UUID-shaped; kept when the message moves between queues)."""
        i = self._id
        return f"{self._pfx}{self.offset:012x}" if i is None else i

    def __repr__(self) -> str:
        b = self.body if len(self.body) <= 32 else self.body[:32] + b"..."
        return (f"Message(id={self.id!r}, body={b!r}, receive_count={self.receive_count}, "
                f"offset={self.offset})")

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    @property
    def sequence_number(self) -> str | None:
        """FIFO queues: the message's sequence number (increasing within the queue)."""
        return f"{self.offset:020d}" if self._fifo else None

    def system_attributes(self, arn_prefix: str = DEFAULT_ARN_PREFIX) -> dict[str, str]:
        """SQS's message system attributes, as strings."""
        out = {
            "SenderId": "AIDAVQSVQSVQSVQSVQSVQ",
            "SentTimestamp": str(self.sent_timestamp_ms),
            "ApproximateReceiveCount": str(self.receive_count),
            "ApproximateFirstReceiveTimestamp": str(self.first_receive_timestamp_ms),
        }
        if self.group_id is not None:
            out["MessageGroupId"] = self.group_id
        if self._fifo:
            if self.dedup_id is not None:
                out["MessageDeduplicationId"] = self.dedup_id
            out["SequenceNumber"] = f"{self.offset:020d}"
        if self.source_queue is not None:
            out["DeadLetterQueueSourceArn"] = f"{arn_prefix}:{self.source_queue}"
        return out


class _Rec:
    """A record-shaped tuple (offset, timestamp_ms, key, value, headers) for messages
    that came from the in-memory tail rather than from a log read."""

    __slots__ = ("offset", "timestamp_ms", "key", "value", "headers")

    def __init__(self, offset, value, ts, headers):
        self.offset = offset
        self.timestamp_ms = ts
        self.key = None
        self.value = value
        self.headers = headers or ()


class _Prepared:
    """A validated message ready to append."""

    __slots__ = ("value", "headers", "delay_ms", "group", "dedup_key", "dedup_id", "entry_id")


class Queue:
    """One SQS-style queue; made and opened by QueueRegistry (see module doc)."""

    def __init__(self, *a, **k):  # pragma: no cover
        raise TypeError("queues are opened by QueueRegistry")

    # ================================================================== open

    @classmethod
    def _open(cls, path: str, name: str, *, clock: Callable[[], float],
              resolver: Callable[[str], Queue | None] | None = None,
              lister: Callable[[], list] | None = None) -> Queue:
        self = object.__new__(cls)
        self.name = name
        self.path = path
        self._clock = clock
        self._now_ms = _now_ms_from(clock)
        self._resolver = resolver or (lambda n: None)
        self._lister = lister or (list)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0
        self._closed = False
        self._last_purge_ms = None
        self._load_config()
        cfg = self.config
        self._sync = cfg.flush == "always"
        opts = cfg.log_options()
        if self._sync:
            # Appends are buffered under the queue lock; the caller fsyncs after
            # releasing it (log.flush), so concurrent callers share fsyncs.
            opts["flush"] = "interval"
        self._log = Log.open(os.path.join(path, "messages"), **opts)
        # Standard queues under a relaxed flush policy buffer plain sends here and
        # hand them to the log as one append_batch (one call per up to
        # batch_max_records messages instead of one Log.append per message); the
        # interval tick below hands them over and fsyncs, so the promise of the
        # policy (at most one interval lost) is unchanged. Invariant: the pending
        # messages have the offsets log.end_offset, log.end_offset + 1, ...
        self._buffered = not self._sync and not cfg.fifo
        self._pv: list = []  # pending values
        # their timestamps, as runs: (ts, count) for runs before the last, and
        # the last run in _pt_ts/_pt_n (a send in the same ms only adds to _pt_n)
        self._pt: list = []
        self._pt_ts = -1
        self._pt_n = 0
        self._pbytes = 0
        self._pmax_n = max(1, min(cfg.batch_max_records, 4096))
        self._pmax_b = max(1, cfg.batch_max_bytes)
        self._push_err: BaseException | None = None
        try:
            self._state = LeaseStateStore(
                os.path.join(path, "state"), flush=opts["flush"],
                flush_interval_ms=cfg.flush_interval_ms, recovery=cfg.recovery,
                buffered=not self._sync,
            )
        except BaseException:
            self._log.close()
            raise
        try:
            self._recover()
        except BaseException:
            self._state.close()
            self._log.close()
            raise
        if cfg.flush == "interval":
            Flusher.shared().register(self, cfg.flush_interval_ms / 1000)
        return self

    # ------------------------------------------------- buffered sends, flushing

    def _end_offset(self) -> int:
        """The next offset to be written (pending sends included)."""
        return self._log.end_offset + len(self._pv)

    def _push_locked(self) -> None:
        """Hand the pending sends to the message log (one batch), and the
        pending state records to the state log."""
        pv = self._pv
        if pv:
            runs = self._pt
            try:
                if not runs:  # one run: one timestamp for the batch
                    self._log.append_batch(pv, timestamps_ms=self._pt_ts)
                elif len(pv) >= PUSH_RUN_RECORDS * (len(runs) + 1):
                    self._push_runs_locked()
                else:
                    ts = list(chain.from_iterable(starmap(repeat, runs)))
                    ts += repeat(self._pt_ts, self._pt_n)
                    self._log.append_batch(pv, timestamps_ms=ts)
            except BaseException as e:
                # keep them pending (retried at the next push); sends refuse
                # until a push succeeds
                self._push_err = e
                raise
            self._pv = []
            self._pt = []
            self._pt_ts = -1
            self._pt_n = 0
            self._pbytes = 0
            self._push_err = None
        self._state.push()

    def _push_runs_locked(self) -> None:
        """Hand the pending sends to the message log as one batch per run of
        equal send timestamps: a batch whose records share one timestamp needs
        no per-record timestamp column, which costs the log about a microsecond
        a record to build. (Runs are long when sends are frequent; the caller
        takes this path only then.) If an append fails, the runs written
        before it leave the pending list."""
        pv = self._pv
        runs = self._pt
        log = self._log
        i = done = 0
        try:
            for ts, c in runs:
                log.append_batch(pv[i:i + c], timestamps_ms=ts)
                i += c
                done += 1
            log.append_batch(pv[i:], timestamps_ms=self._pt_ts)
        except BaseException:
            if i:
                del pv[:i]
                del runs[:done]
                self._pbytes = sum(map(len, pv))
            raise

    def _flush_tick(self) -> bool:
        """The interval flusher's tick (flush="interval"): hand pending sends and
        state records to their logs and fsync them; False once closed."""
        with self._lock:
            if self._closed:
                return False
            pushed = bool(self._pv) or self._state.pending
            if pushed:
                self._push_locked()
        if pushed:
            try:
                self._log.flush()
                self._state.flush()
            except LogClosedError:
                return False
        return True

    def _load_config(self) -> None:
        with open(os.path.join(self.path, "queue.json"), "rb") as f:
            info = json.loads(f.read())
        with open(os.path.join(self.path, "queue.meta"), "rb") as f:
            meta = queue_meta.decode(f.read(), os.path.join(self.path, "queue.meta"))
        cfgd = dict(info["config"])
        cfgd.update(
            visibility_timeout=meta.visibility_timeout,
            delay_seconds=meta.delay_seconds,
            receive_wait_seconds=meta.receive_wait_seconds,
            retention_seconds=meta.retention_period,
            max_message_bytes=meta.max_message_size,
            tags={**meta.tags, **info.get("tags_overflow", {})},
        )
        self.config = QueueConfig.from_json(cfgd)
        self.created_ms = info["created_ms"]
        self.modified_ms = info.get("modified_ms", self.created_ms)
        self._secret = bytes.fromhex(info["secret"])
        self._id_prefix = info["id_prefix"]
        self._codec = ReceiptCodec(self._secret)
        self._apply_config_cache()

    def _apply_config_cache(self) -> None:
        cfg = self.config
        self._fifo = cfg.fifo
        self._ret_ms = cfg.retention_seconds * 1000
        self._vis_default = cfg.visibility_timeout
        self._delay_ms = cfg.delay_seconds * 1000
        self._max_bytes = cfg.max_message_bytes

    @staticmethod
    def _write_files(path: str, *, name: str, config: QueueConfig, created_ms: int,
                     modified_ms: int, secret: bytes, id_prefix: str,
                     counters: tuple[int, int, int] = (0, 0, 0)) -> None:
        """Write queue.json and queue.meta (each replaced atomically)."""
        meta = queue_meta.QueueMeta(
            item_count=counters[0], next_read_offset=counters[1], next_write_offset=counters[2],
            max_message_size=config.max_message_bytes, retention_period=config.retention_seconds,
            receive_wait_seconds=config.receive_wait_seconds, delay_seconds=config.delay_seconds,
            visibility_timeout=config.visibility_timeout, tags=dict(config.tags),
        )
        page, overflow = queue_meta.encode(meta)
        cfgd = config.to_json()
        for k in ("visibility_timeout", "delay_seconds", "receive_wait_seconds",
                  "retention_seconds", "max_message_bytes", "tags"):
            del cfgd[k]  # the header page is their home
        info = {
            "version": 1, "name": name, "created_ms": created_ms, "modified_ms": modified_ms,
            "secret": secret.hex(), "id_prefix": id_prefix, "config": cfgd,
            "tags_overflow": overflow,
        }
        atomic_write(os.path.join(path, "queue.json"), json.dumps(info, indent=1).encode())
        atomic_write(os.path.join(path, "queue.meta"), page)

    @staticmethod
    def _new_identity() -> tuple[bytes, str]:
        r = secrets.token_bytes(40)
        h = r[32:].hex()
        id_prefix = f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[r[31] & 3]}{r[30]:02x}{h[0]}-"
        return r[:32], id_prefix

    def _save_files(self) -> None:
        self._push_locked()
        self._write_files(
            self.path, name=self.name, config=self.config, created_ms=self.created_ms,
            modified_ms=self.modified_ms, secret=self._secret, id_prefix=self._id_prefix,
            counters=(self._backlog_locked(), self._low, self._log.end_offset),
        )

    # -------------------------------------------------------------- recovery

    def _recover(self) -> None:
        st = self._state.recover()
        log = self._log
        end = log.end_offset
        start = log.start_offset
        now = self._now_ms()
        dirty = False
        # Offsets at or past the end were lost from the message log (a crash
        # under a relaxed flush policy): forget their state, then compact so the
        # state log can never apply it to the new messages that reuse them.
        for o in [o for o in st.live if o >= end or o < start]:
            del st.live[o]
            dirty = True
        ahead = {o for o in st.deleted_ahead if start <= o < end}
        if len(ahead) != len(st.deleted_ahead):
            dirty = True
        self._low = min(max(st.low, start), end)
        self._cursor = min(max(st.cursor, self._low), end)
        self._live: dict[int, list] = {}
        self._timers: list = []
        self._avail: list = []
        self._ahead: set[int] = ahead
        self._n_delayed = self._n_inflight = self._n_available = 0
        self._nonce = secrets.randbits(62) << 1
        self._state_bytes = 0
        self._dels: list = []
        # handles this process issued -> (offset, nonce): a handle found here is
        # authentic without recomputing its MAC (cleared when it grows stale)
        self._issued: dict[str, tuple[int, int]] = {}
        # standard queues: what this process sent, not yet received, kept in
        # memory so that receive needn't read it back from the log: one entry
        # per send call, (first offset, values, sent_ms, headers list or None,
        # bytes), for consecutive offsets; the messages not yet taken are those
        # from tail_base (in the first entry) to tail_end
        self._tail: deque = deque()
        self._tail_base = 0
        self._tail_end = 0
        self._tail_bytes = 0
        self._reclaim_low = self._low
        self._reclaim_next = self._low + 16
        self._tag_cache = (-1, -1, b"")  # (offset, nonce, tags) of the last receipt tag block
        self._id_block = (-1, "")  # (offset >> 8, message-id prefix of those offsets)
        self._bytes_per_offset = 0.0
        self._sent_n = self._sent_b = 0  # messages (and their bytes) sent by this process
        # FIFO structures
        self._groups: dict[str, deque] = {}
        self._group_of: dict[int, str] = {}
        self._gin: dict[str, int] = {}
        self._ready: list = []
        self._dedup = DedupWindow(WINDOW_MS)
        self._attempts: dict[str, tuple[int, list]] = {}  # FIFO ReceiveRequestAttemptId
        live = self._live
        for o, e in st.live.items():
            if o < self._low:
                continue
            if e[2] == 0:
                state = DELAYED if e[1] > now else AVAILABLE
            else:
                state = INFLIGHT if e[1] > now else AVAILABLE
            e.append(state)
            live[o] = e
            if state == AVAILABLE:
                self._n_available += 1
                if not self._fifo:
                    self._avail.append(o)
            else:
                if state == DELAYED:
                    self._n_delayed += 1
                else:
                    self._n_inflight += 1
                self._timers.append((e[1], o, e[0]))
        heapq.heapify(self._timers)
        heapq.heapify(self._avail)
        if self._fifo:
            self._rebuild_fifo(now)
        else:
            self._advance_low()
        if dirty:
            self._compact_locked(now)

    def _rebuild_fifo(self, now: int) -> None:
        """FIFO: every message not deleted is in a group deque; rebuild them (and
        the dedup window) from the message log."""
        log = self._log
        end = log.end_offset
        low = self._low
        cursor = self._cursor
        live, ahead = self._live, self._ahead
        win_start = now - WINDOW_MS
        scope_group = self.config.deduplication_scope == "messageGroup"
        scan_from = low
        t = log.offset_for_time(win_start) if log.end_offset > log.start_offset else None
        if t is not None:
            scan_from = min(low, t)
        scan_from = max(scan_from, log.start_offset)
        off = scan_from
        while off < end:
            recs = log.read(off, max_records=4096)
            if not recs:
                break
            for r in recs:
                o = r.offset
                h = dict(r.headers) if r.headers else {}
                if r.timestamp_ms > win_start and H_ID not in h and H_DEDUP in h:
                    # (a message moved in from another queue carries H_ID: not a send)
                    g = h.get(H_GROUP, b"").decode()
                    d = h[H_DEDUP].decode()
                    self._dedup.add((g, d) if scope_group else d, r.timestamp_ms, o)
                if o < low:
                    continue
                deleted = o in ahead or (o < cursor and o not in live)
                if deleted:
                    continue
                g = h.get(H_GROUP, b"").decode()
                dq = self._groups.get(g)
                if dq is None:
                    dq = self._groups[g] = deque()
                dq.append(o)
                self._group_of[o] = g
                e = live.get(o)
                if e is None and H_DELAY in h:
                    vis = r.timestamp_ms + int(h[H_DELAY])
                    if vis > now:
                        live[o] = [0, vis, 0, 0, 0, DELAYED]
                        self._n_delayed += 1
                        heapq.heappush(self._timers, (vis, o, 0))
                elif e is not None and e[_STATE] == INFLIGHT:
                    self._gin[g] = self._gin.get(g, 0) + 1
            off = recs[-1].offset + 1
        # FIFO keeps no cursor: every pending message is in a group.
        self._cursor = end
        self._ahead = set()
        for g, dq in self._groups.items():
            if not self._gin.get(g):
                heapq.heappush(self._ready, (dq[0], g))
        self._advance_low()

    # ============================================================== sending

    def _prepare(self, body, delay_seconds, attributes, group_id, dedup_id, *, entry_id=None) -> _Prepared:
        p = _Prepared()
        p.entry_id = entry_id
        if body.__class__ is bytes:
            value = body
        elif isinstance(body, str):
            if _BAD_CHARS.search(body):
                raise InvalidMessageContents(
                    "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | "
                    "#x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"
                )
            value = body.encode("utf-8")
        elif isinstance(body, (bytearray, memoryview)):
            value = bytes(body)
        elif body is None:
            raise MissingParameter("The request must contain the parameter MessageBody.")
        else:
            raise InvalidParameterValue(f"MessageBody must be str or bytes, not {type(body).__name__}")
        if not value:
            raise MissingParameter("The request must contain the parameter MessageBody.")
        size = len(value)
        headers = None
        if attributes:
            headers, asize = _encode_attributes(attributes)
            size += asize
        if size > self._max_bytes:
            raise QueueMessageTooLarge(
                f"One or more parameters are invalid. Reason: Message must be shorter than "
                f"{self._max_bytes} bytes."
            )
        if delay_seconds is None:
            delay_ms = self._delay_ms
        else:
            if self._fifo:
                raise InvalidParameterValue(
                    "Value " + str(delay_seconds) + " for parameter DelaySeconds is invalid. Reason: "
                    "The request include parameter that is not valid for this queue type."
                )
            if not isinstance(delay_seconds, int) or isinstance(delay_seconds, bool) or not 0 <= delay_seconds <= MAX_DELAY_S:
                raise InvalidParameterValue(
                    f"Value {delay_seconds} for parameter DelaySeconds is invalid. Reason: "
                    f"DelaySeconds must be >= 0 and <= {MAX_DELAY_S}."
                )
            delay_ms = delay_seconds * 1000
        p.delay_ms = delay_ms
        group = None
        if group_id is not None:
            if not isinstance(group_id, str) or not _GROUP_ID.fullmatch(group_id):
                raise InvalidParameterValue(
                    f"Value {group_id} for parameter MessageGroupId is invalid. Reason: "
                    "MessageGroupId can only include alphanumeric and punctuation characters. "
                    "1 to 128 in length."
                )
            group = group_id
        p.dedup_id = None
        p.dedup_key = None
        if self._fifo:
            if group is None:
                raise MissingParameter("The request must contain the parameter MessageGroupId.")
            if dedup_id is None:
                if not self.config.content_based_deduplication:
                    raise InvalidParameterValue(
                        "The queue should either have ContentBasedDeduplication enabled or "
                        "MessageDeduplicationId provided explicitly"
                    )
                dedup_id = content_dedup_id(value)
            elif not isinstance(dedup_id, str) or not _GROUP_ID.fullmatch(dedup_id):
                raise InvalidParameterValue(
                    f"Value {dedup_id} for parameter MessageDeduplicationId is invalid. Reason: "
                    "MessageDeduplicationId can only include alphanumeric and punctuation "
                    "characters. 1 to 128 in length."
                )
            p.dedup_id = dedup_id
            p.dedup_key = (group, dedup_id) if self.config.deduplication_scope == "messageGroup" else dedup_id
        elif dedup_id is not None:
            raise InvalidParameterValue(
                f"Value {dedup_id} for parameter MessageDeduplicationId is invalid. Reason: The "
                "request includes a parameter that is not valid for this queue type."
            )
        p.group = group
        extra = []
        if group is not None:
            extra.append((H_GROUP, group.encode()))
        if p.dedup_id is not None:
            extra.append((H_DEDUP, p.dedup_id.encode()))
        if delay_ms:
            extra.append((H_DELAY, str(delay_ms).encode()))
        if extra:
            headers = tuple(extra) + (headers or ())
        p.value = value
        p.headers = headers
        return p

    def send(self, body, delay_seconds: int | None = None, attributes: dict | None = None,
             group_id: str | None = None, dedup_id: str | None = None) -> str:
        """Send one message; return its message id (see ``send_message`` for the
        FIFO sequence number). Raises on invalid input (SQS's errors)."""
        if (body.__class__ is bytes and delay_seconds is None and attributes is None
                and group_id is None and dedup_id is None and not self._fifo and not self._delay_ms
                and 0 < len(body) <= self._max_bytes):
            return self._send_plain([body])[0]
        p = self._prepare(body, delay_seconds, attributes, group_id, dedup_id)
        return self._send_prepared([p])[0][0]

    def send_message(self, body, delay_seconds: int | None = None, attributes: dict | None = None,
                     group_id: str | None = None, dedup_id: str | None = None) -> dict:
        """Like ``send``; returns ``{"message_id", "sequence_number"}`` (None for standard queues)."""
        p = self._prepare(body, delay_seconds, attributes, group_id, dedup_id)
        mid, off = self._send_prepared([p])[0]
        return {"message_id": mid, "sequence_number": f"{off:020d}" if self._fifo else None}

    def send_batch(self, entries: Iterable) -> list[str]:
        """Send 1-10 messages; return their ids (in order).

        An entry is a body (str/bytes) or a dict with ``body`` and optional
        ``delay_seconds``, ``attributes``, ``group_id``, ``dedup_id``, ``id``.
        Every entry is validated first: an invalid one raises and nothing is sent.
        (``send_batch_entries`` gives SQS's per-entry results instead.)
        """
        entries = list(entries)
        n = len(entries)
        if n == 0:
            raise EmptyBatchRequest()
        if n > MAX_BATCH_ENTRIES:
            raise TooManyEntriesInBatchRequest(n)
        if (not self._fifo and not self._delay_ms and list(map(type, entries)).count(bytes) == n
                and all(entries)):
            # plain bodies, none empty: when together they fit one message and
            # one batch, each does (else each is validated, and refused, below)
            total = sum(map(len, entries))
            if total <= self._max_bytes and total <= MAX_BATCH_BYTES:
                return self._send_plain(entries, total)
        preps = [self._prepare_entry(e) for e in entries]
        self._check_batch(preps)
        return [mid for mid, _ in self._send_prepared(preps)]

    def _prepare_entry(self, e) -> _Prepared:
        if isinstance(e, dict):
            unknown = set(e) - {"body", "delay_seconds", "attributes", "group_id", "dedup_id", "id"}
            if unknown:
                raise InvalidParameterValue(f"unknown batch entry field(s): {', '.join(sorted(unknown))}")
            return self._prepare(e.get("body"), e.get("delay_seconds"), e.get("attributes"),
                                 e.get("group_id"), e.get("dedup_id"), entry_id=e.get("id"))
        return self._prepare(e, None, None, None, None)

    @staticmethod
    def _check_batch(preps: list) -> None:
        ids = [p.entry_id for p in preps if p.entry_id is not None]
        _check_entry_ids(ids)
        total = sum(len(p.value) for p in preps)
        if total > MAX_BATCH_BYTES:
            raise BatchRequestTooLong(
                f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {total} bytes."
            )

    def send_batch_entries(self, entries: list[dict]) -> dict:
        """SQS SendMessageBatch: each entry a dict with ``id`` and ``body`` (and the
        optional fields of ``send_batch``). Returns ``{"successful": [{"id",
        "message_id", "sequence_number"}], "failed": [{"id", "code",
        "sender_fault", "message"}]}``. Whole-request problems (no entries, more
        than 10, repeated or invalid ids, over 1 MiB) raise."""
        entries = list(entries)
        if not entries:
            raise EmptyBatchRequest()
        if len(entries) > MAX_BATCH_ENTRIES:
            raise TooManyEntriesInBatchRequest(len(entries))
        _check_entry_ids([e.get("id") if isinstance(e, dict) else None for e in entries])
        preps, failed = [], []
        for e in entries:
            try:
                p = self._prepare_entry(e)
                preps.append(p)
            except QueueError as err:
                failed.append(_failure(e["id"], err))
        total = sum(len(p.value) for p in preps)
        if total > MAX_BATCH_BYTES:
            raise BatchRequestTooLong(
                f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {total} bytes."
            )
        ok = []
        if preps:
            for p, (mid, off) in zip(preps, self._send_prepared(preps)):
                ok.append({"id": p.entry_id, "message_id": mid,
                           "sequence_number": f"{off:020d}" if self._fifo else None})
        return {"successful": ok, "failed": failed}

    def _send_plain(self, values: list, nbytes: int | None = None) -> list[str]:
        """Hot path: standard queue, no delay, no headers."""
        log = self._log
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            ts = self._now_ms()
            n = len(values)
            if nbytes is None:
                nbytes = sum(map(len, values))
            if self._buffered:
                if (self._push_err is not None or len(self._pv) + n > self._pmax_n
                        or self._pbytes + nbytes > self._pmax_b):
                    self._push_locked()
                pv = self._pv
                first = log.end_offset + len(pv)
                if nbytes <= self._pmax_b:
                    pv += values
                    if ts == self._pt_ts:
                        self._pt_n += n
                    else:
                        if self._pt_n:
                            self._pt.append((self._pt_ts, self._pt_n))
                        self._pt_ts = ts
                        self._pt_n = n
                    self._pbytes += nbytes
                else:  # bigger than a batch: straight to the log (pending is empty)
                    log.append_batch(values, timestamps_ms=ts)
            else:
                ap = log.append
                first = ap(values[0], timestamp_ms=ts)
                for i in range(1, n):
                    ap(values[i], timestamp_ms=ts)
            tail = self._tail
            if not tail:
                self._tail_base = self._tail_end = first
            if self._tail_end == first and self._tail_bytes < TAIL_BYTES:
                tail.append((first, values, ts, None, nbytes))
                self._tail_end = first + n
                self._tail_bytes += nbytes
            self._sent_n += n
            self._sent_b += nbytes
            if self._waiting:
                self._cond.notify(n)
        if self._sync:
            log.flush()
        lo = first & 255
        if lo + n <= 256:  # ids of one block of 256 offsets: its prefix is cached
            blk, pre = self._id_block
            if blk != first >> 8:
                blk = first >> 8
                pre = f"{self._id_prefix}{blk:010x}"
                self._id_block = (blk, pre)  # one store: consistent for other threads
            return list(map(pre.__add__, _HEX2[lo:lo + n]))
        return _message_ids(self._id_prefix, first, n)

    def _send_prepared(self, preps: list) -> list[tuple[str, int]]:
        log = self._log
        out: list = [None] * len(preps)
        dup_of: dict[int, int] = {}  # entry index -> index of the earlier entry it repeats
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            now = self._now_ms()
            todo = []
            if self._fifo:
                dd = self._dedup
                first_in_batch: dict = {}
                for i, p in enumerate(preps):
                    prev = dd.lookup(p.dedup_key, now)
                    if prev is not None:
                        out[i] = (self._message_id_at(prev), prev)
                        continue
                    j = first_in_batch.get(p.dedup_key)
                    if j is not None:
                        dup_of[i] = j
                        continue
                    first_in_batch[p.dedup_key] = i
                    todo.append(i)
            else:
                todo = list(range(len(preps)))
            if todo:
                values = [preps[i].value for i in todo]
                headers = [preps[i].headers for i in todo] if any(preps[i].headers for i in todo) else None
                first = self._append_locked(values, headers, now)
                pfx = self._id_prefix
                for k, i in enumerate(todo):
                    o = first + k
                    p = preps[i]
                    out[i] = (f"{pfx}{o:012x}", o)
                    if p.delay_ms:
                        vis = now + p.delay_ms
                        self._live[o] = [0, vis, 0, 0, 0, DELAYED]
                        self._n_delayed += 1
                        heapq.heappush(self._timers, (vis, o, 0))
                    if self._fifo:
                        self._dedup.add(p.dedup_key, now, o)
                        self._fifo_add(o, p.group)
                if self._waiting:
                    self._cond.notify(len(todo))
            for i, j in dup_of.items():
                out[i] = out[j]
        if self._sync and todo:
            log.flush()
        return out

    def _append_locked(self, values: list, headers: list | None, ts: int) -> int:
        """Append (buffered, as the log's flush policy says) and remember the tail."""
        if self._pv:
            self._push_locked()  # keep the order of offsets
        ap = self._log.append
        n = len(values)
        nbytes = sum(map(len, values))
        self._sent_n += n
        self._sent_b += nbytes
        if headers is None:
            first = ap(values[0], timestamp_ms=ts)
            for i in range(1, n):
                ap(values[i], timestamp_ms=ts)
        else:
            first = ap(values[0], headers=headers[0], timestamp_ms=ts)
            for i in range(1, n):
                ap(values[i], headers=headers[i], timestamp_ms=ts)
        if not self._fifo:
            tail = self._tail
            if not tail:
                self._tail_base = self._tail_end = first
            if self._tail_end == first and self._tail_bytes < TAIL_BYTES:
                tail.append((first, values, ts, headers, nbytes))
                self._tail_end = first + n
                self._tail_bytes += nbytes
        return first

    def _decode(self, handle) -> tuple[int, int]:
        p = self._issued.get(handle) if handle.__class__ is str else None
        return p if p is not None else self._codec.decode(handle)

    def _message_id_at(self, o: int) -> str:
        return f"{self._id_prefix}{o:012x}"

    def _fifo_add(self, o: int, g: str) -> None:
        dq = self._groups.get(g)
        if dq is None:
            dq = self._groups[g] = deque()
        dq.append(o)
        self._group_of[o] = g
        if len(dq) == 1 and not self._gin.get(g):
            heapq.heappush(self._ready, (o, g))

    # ============================================================ receiving

    def receive(self, max_messages: int = 1, wait_seconds: float | None = None,
                visibility_timeout: int | None = None, attempt_id: str | None = None) -> list[Message]:
        """Receive up to ``max_messages`` (1-10) visible messages, leasing them
        for ``visibility_timeout`` seconds (default: the queue's). With
        ``wait_seconds`` (0-20; default the queue's ReceiveMessageWaitTimeSeconds)
        waits until at least one message is available (long poll, woken by sends
        and by leases or delays ending). Returns [] when none came.

        FIFO queues: ``attempt_id`` (SQS ReceiveRequestAttemptId) makes a retry
        safe: within 5 minutes, a receive with the same id whose messages are all
        still in flight under the leases it made returns the same messages and
        receipt handles again, with their visibility timeout restarted."""
        if max_messages.__class__ is not int or not 1 <= max_messages <= 10:
            raise InvalidParameterValue(
                f"Value {max_messages} for parameter MaxNumberOfMessages is invalid. "
                "Reason: Must be between 1 and 10, if provided."
            )
        if wait_seconds is None:
            wait = self.config.receive_wait_seconds
        else:
            if isinstance(wait_seconds, bool) or not isinstance(wait_seconds, (int, float)) or not 0 <= wait_seconds <= MAX_WAIT_S:
                raise InvalidParameterValue(
                    f"Value {wait_seconds} for parameter WaitTimeSeconds is invalid. "
                    f"Reason: Must be >= 0 and <= {MAX_WAIT_S}, if provided."
                )
            wait = wait_seconds
        if visibility_timeout is None:
            vis = self._vis_default
        else:
            if visibility_timeout.__class__ is not int or not 0 <= visibility_timeout <= MAX_VISIBILITY_S:
                raise InvalidParameterValue(
                    f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. "
                    f"Reason: Must be >= 0 and <= {MAX_VISIBILITY_S}, if provided."
                )
            vis = visibility_timeout
        if attempt_id is not None:
            if not self._fifo:
                attempt_id = None  # SQS ignores it on standard queues
            elif not isinstance(attempt_id, str) or not _GROUP_ID.fullmatch(attempt_id):
                raise InvalidParameterValue(
                    f"Value {attempt_id} for parameter ReceiveRequestAttemptId is invalid. Reason: "
                    "It can only include alphanumeric and punctuation characters. 1 to 128 in length."
                )
            else:
                again = self._retry_attempt(attempt_id, vis)
                if again is not None:
                    return again
        dlq = None
        if self.config.dead_letter_queue is not None:
            dlq = self._resolver(self.config.dead_letter_queue)
        deadline = None
        while True:
            with self._lock:
                if self._closed:
                    if deadline is not None:
                        return []  # closed while we waited
                    raise LogClosedError(f"queue {self.name} is closed")
                now = self._now_ms()
                if self._fifo:
                    msgs, moves = self._take_fifo(max_messages, vis, now, dlq)
                else:
                    msgs, moves = self._take(max_messages, vis, now, dlq)
                if not msgs and not moves:
                    if wait <= 0:
                        return msgs
                    mono = time.monotonic()
                    if deadline is None:
                        deadline = mono + wait
                    left = deadline - mono
                    if left <= 0:
                        return msgs
                    if self._timers:
                        left = min(left, max(0.001, (self._timers[0][0] - now) / 1000))
                    self._waiting += 1
                    try:
                        self._cond.wait(left)
                    finally:
                        self._waiting -= 1
                    continue
            if self._sync:
                self._state.flush()
            if moves:
                if not self._finish_moves(moves, dlq):
                    dlq = None  # unavailable: deliver as usual for the rest of this call
                if not msgs:
                    continue
            if attempt_id is not None and msgs:
                with self._lock:
                    self._attempts[attempt_id] = (self._now_ms() + WINDOW_MS, msgs)
            return msgs

    def _retry_attempt(self, attempt_id: str, vis: int) -> list | None:
        with self._lock:
            now = self._now_ms()
            att = self._attempts
            for k in [k for k, (exp, _) in att.items() if exp <= now]:
                del att[k]
            prev = att.get(attempt_id)
            if prev is None:
                return None
            msgs = prev[1]
            live = self._live
            for m in msgs:
                e = live.get(m.offset)
                if e is None or e[_STATE] != INFLIGHT or e[_UNTIL] <= now or e[_NONCE] != self._decode(m.receipt_handle)[1]:
                    del att[attempt_id]
                    return None
            flat = []
            until = now + vis * 1000
            for m in msgs:
                e = live[m.offset]
                e[_UNTIL] = until
                heapq.heappush(self._timers, (until, m.offset, e[_NONCE]))
                flat += (m.offset, e[_NONCE], until, e[_RECV], e[_FIRST], e[_COUNT])
            self._log_ops(flat, [], now)
        if self._sync:
            self._state.flush()
        return list(msgs)

    def _fire_timers(self, now: int) -> None:
        timers = self._timers
        live = self._live
        fifo = self._fifo
        pop = heapq.heappop
        due: list = []
        while timers and timers[0][0] <= now:
            t = pop(timers)
            if len(t) == 3:
                due.append(t)
            else:  # (until, o, nonce, k): offsets o..o+k-1 leased with nonces nonce..nonce+k-1
                until, o, nonce, k = t
                due += zip(repeat(until, k), range(o, o + k), range(nonce, nonce + k))
        for until, o, nonce in due:
            e = live.get(o)
            if e is None or e[_NONCE] != nonce or e[_UNTIL] != until:
                continue
            st = e[_STATE]
            if st == INFLIGHT:
                self._n_inflight -= 1
            elif st == DELAYED:
                self._n_delayed -= 1
            else:
                continue
            e[_STATE] = AVAILABLE
            self._n_available += 1
            if fifo:
                g = self._group_of.get(o)
                if g is not None:
                    if st == INFLIGHT:
                        c = self._gin.get(g, 0) - 1
                        if c > 0:
                            self._gin[g] = c
                        else:
                            self._gin.pop(g, None)
                    if not self._gin.get(g):
                        heapq.heappush(self._ready, (self._groups[g][0], g))
            else:
                heapq.heappush(self._avail, o)
        live_timed = self._n_inflight + self._n_delayed
        if len(timers) > 2 * live_timed + 4096:
            # drop stale entries (deleted or re-leased messages)
            self._timers = [(e[_UNTIL], o, e[_NONCE]) for o, e in live.items()
                            if e[_STATE] == INFLIGHT or e[_STATE] == DELAYED]
            heapq.heapify(self._timers)

    def _read_one(self, o: int):
        """The record at offset o, or None if it is gone (below the log start, or
        a gap left by recovery="skip"); other read errors propagate."""
        if self._pv:
            self._push_locked()
        try:
            recs = self._log.read(o, max_records=1)
        except OffsetOutOfRange:
            return None
        if not recs or recs[0].offset != o:
            return None
        return recs[0]

    def _take(self, n: int, vis: int, now: int, dlq) -> tuple[list, list]:
        """Standard queue: lease up to n visible messages, oldest (lowest offset)
        first. Returns (messages, moves): moves are messages past
        max_receive_count, marked MOVING, for the caller to move to the DLQ."""
        if self._timers and self._timers[0][0] <= now:
            self._fire_timers(now)
        if self._n_inflight >= MAX_INFLIGHT:
            raise OverLimit(
                f"Too many messages in flight on queue {self.name} (limit {MAX_INFLIGHT}); "
                "delete messages or let their visibility timeout end."
            )
        out: list = []
        moves: list = []
        flat: list = []
        dels: list = []
        live = self._live
        until = now + vis * 1000
        expire_before = now - self._ret_ms
        tag_block = self._codec._block
        hpack = _HANDLE.pack
        issued = self._issued
        if len(issued) > 4 * self._n_inflight + 65536:
            issued.clear()  # stale handles (leases that ended): decoded by MAC instead
        timers = self._timers
        push = heapq.heappush
        mrc = self.config.max_receive_count if dlq is not None else None
        nonce = self._nonce
        pfx = self._id_prefix
        new_message = Message.__new__
        append = out.append
        cursor = self._cursor

        # 1. messages received before (or delayed) and visible again, below the cursor
        avail = self._avail
        while avail and len(out) < n and avail[0] < cursor:
            o = heapq.heappop(avail)
            e = live.get(o)
            if e is None or e[_STATE] != AVAILABLE:
                continue
            r = self._read_one(o)
            self._n_available -= 1
            if r is None or self._sent_ms(r) <= expire_before:
                del live[o]
                dels.append(o)
                continue
            if mrc is not None and e[_COUNT] >= mrc:
                e[_STATE] = MOVING
                moves.append((o, r, e))
                continue
            nonce += 1
            handle, count, first = self._lease_tracked(o, e, nonce, until, now, flat)
            out.append(self._message(o, r.value, r.timestamp_ms, r.headers, handle, count, first))

        # 2. from the cursor on: fresh messages (and any tracked ones met on the way)
        log = self._log
        ahead = self._ahead
        nfresh = 0
        runs: list = []  # (offset, nonce, n, until, received) per run of fresh messages
        tail = self._tail
        end = log.end_offset + len(self._pv)
        while len(out) < n and cursor < end:
            k = n - len(out)
            tb = self._tail_base
            if tail and cursor >= tb:
                # sent in this process: take from the in-memory tail (one entry
                # per send call), not from the log
                if cursor > tb:  # the cursor moved past some (deleted before received)
                    while tail and tail[0][0] + len(tail[0][1]) <= cursor:
                        self._tail_bytes -= tail.popleft()[4]
                    tb = self._tail_base = cursor
                    if not tail:
                        continue
                f0, vals, ts, hdrs, nb = tail[0]
                i = tb - f0
                take = len(vals) - i
                if take <= k:  # all that is left of this send
                    tail.popleft()
                    self._tail_bytes -= nb
                    if i:
                        vals = vals[i:]
                        if hdrs is not None:
                            hdrs = hdrs[i:]
                else:
                    take = k
                    vals = vals[i:i + k]
                    if hdrs is not None:
                        hdrs = hdrs[i:i + k]
                self._tail_base = o = tb + take
                o0 = tb
                if (hdrs is None and not ahead and ts > expire_before
                        and (not live or not any(map(live.__contains__, range(o0, o))))):
                    # Hot path: fresh plain messages, none tracked, none expired.
                    # One timer entry and one run of lease entries for all of them.
                    n0 = nonce + 1
                    # receipt tags: one hash per 8 deliveries (vqs.broker.receipt); the
                    # last block of the previous receive often starts this one
                    sh = n0 & 7
                    bo, bn = o0 - sh, n0 - sh
                    co, cn, cd = self._tag_cache
                    if co == bo and cn == bn:
                        blocks = [cd]
                        j = 8
                    else:
                        blocks = []
                        j = 0
                    while j < sh + take:
                        blocks.append(tag_block(bo + j, bn + j))
                        j += 8
                    self._tag_cache = (bo + j - 8, bn + j - 8, blocks[-1])
                    # the tags as u64 LE: a handle is then one pack of 3 u64 LE
                    tags = (_TAG_WORDS.get(len(blocks)) or _tag_words(len(blocks))).unpack(b"".join(blocks))
                    t = sh
                    o = o0
                    for value in vals:
                        nonce += 1
                        live[o] = [nonce, until, 1, now, now, INFLIGHT]
                        handle = hpack(o, nonce, tags[t]).hex()
                        t += 1
                        issued[handle] = (o, nonce)
                        # Message._first_delivery, inline (the hottest loop)
                        m = new_message(Message)
                        m._pfx = pfx
                        m.body = value
                        m.receipt_handle = handle
                        m.sent_timestamp_ms = ts
                        m.first_receive_timestamp_ms = now
                        m.offset = o
                        append(m)
                        o += 1
                    push(timers, (until, o0, n0, take))
                    runs += (o0, n0, take, until, now)
                    nfresh += take
                    cursor = o
                    continue
                recs = list(zip(range(o0, o0 + take), vals, repeat(ts),
                                hdrs if hdrs is not None else repeat(None)))
            else:
                if self._pv:
                    self._push_locked()
                recs = [(r.offset, r.value, r.timestamp_ms, r.headers)
                        for r in log.read(cursor, max_records=k)]
                if not recs:
                    break
            for o, value, ts, h in recs:
                cursor = o + 1
                e = live.get(o)
                if e is not None:
                    # delayed at send, or leased before a restart: deliver only if
                    # visible now (it is also in the avail heap; that entry goes stale)
                    if e[_STATE] != AVAILABLE:
                        continue
                    self._n_available -= 1
                    sent = ts
                    if h:
                        for hk, hv in h:
                            if hk == H_SENT:
                                sent = int(hv)
                    if sent <= expire_before:
                        del live[o]
                        dels.append(o)
                        continue
                    if mrc is not None and e[_COUNT] >= mrc:
                        e[_STATE] = MOVING
                        moves.append((o, _Rec(o, value, ts, h), e))
                        continue
                    nonce += 1
                    handle, count, first = self._lease_tracked(o, e, nonce, until, now, flat)
                    out.append(self._message(o, value, ts, h or (), handle, count, first))
                    continue
                if ahead and o in ahead:
                    ahead.discard(o)
                    continue
                sent = ts
                if h:
                    hd = dict(h)
                    d = hd.get(H_DELAY)
                    if d is not None and ts + int(d) > now:
                        vis_at = ts + int(d)
                        live[o] = [0, vis_at, 0, 0, 0, DELAYED]
                        self._n_delayed += 1
                        push(timers, (vis_at, o, 0))
                        continue
                    s = hd.get(H_SENT)
                    if s is not None:
                        sent = int(s)
                if sent <= expire_before:
                    dels.append(o)
                    continue
                nonce += 1
                nfresh += 1
                live[o] = [nonce, until, 1, now, now, INFLIGHT]
                push(timers, (until, o, nonce))
                flat += (o, nonce, until, now, now, 1)
                handle = self._codec.encode(o, nonce)
                issued[handle] = (o, nonce)
                if h:
                    out.append(self._message(o, value, ts, h, handle, 1, now))
                else:
                    out.append(Message._first_delivery(pfx, o, value, ts, handle, now))
            if len(out) >= n:
                break
        self._cursor = cursor
        self._nonce = nonce
        self._n_inflight += nfresh
        if runs:
            v = encode_runs(runs, len(runs) // 5)
            self._state.append(v)
            self._state_bytes += len(v)
        if flat or dels:
            self._log_ops(flat, dels, now)
        elif self._state_bytes > COMPACT_BYTES:
            self._compact_locked(now)
        return out, moves

    def _sent_ms(self, r) -> int:
        h = r.headers
        if h:
            for k, v in h:
                if k == H_SENT:
                    return int(v)
        return r.timestamp_ms

    def _lease_tracked(self, o: int, e: list, nonce: int, until: int, now: int, flat: list):
        """Lease message ``o``, already tracked by entry ``e`` (received before,
        or delayed), under ``nonce`` until ``until``: update the entry, the
        timer heap, the issued handles and ``flat`` (the lease records the
        caller writes). Returns (receipt handle, receive count, first receive ms)."""
        count = e[_COUNT] + 1
        first = e[_FIRST] or now
        e[_NONCE] = nonce
        e[_UNTIL] = until
        e[_COUNT] = count
        e[_RECV] = now
        e[_FIRST] = first
        e[_STATE] = INFLIGHT
        self._n_inflight += 1
        heapq.heappush(self._timers, (until, o, nonce))
        flat += (o, nonce, until, now, first, count)
        handle = self._codec.encode(o, nonce)
        self._issued[handle] = (o, nonce)
        return handle, count, first

    def _message(self, o: int, value, ts: int, headers, handle: str, count: int, first: int) -> Message:
        m = Message.__new__(Message)
        m.body = value
        m.receipt_handle = handle
        if count != 1:
            m.receive_count = count
        m.first_receive_timestamp_ms = first
        m.offset = o
        if self._fifo:
            m._fifo = True
        mid = None
        sent = ts
        attrs = {}
        for k, v in headers:
            if k.startswith(H_ATTR):
                dt, _, val = v.partition(b"\0")
                dts = dt.decode()
                if dts.startswith("Binary"):
                    attrs[k[2:]] = {"DataType": dts, "BinaryValue": val}
                else:
                    attrs[k[2:]] = {"DataType": dts, "StringValue": val.decode("utf-8")}
            elif k == H_GROUP:
                m.group_id = v.decode()
            elif k == H_DEDUP:
                m.dedup_id = v.decode()
            elif k == H_ID:
                mid = v.decode()
            elif k == H_SENT:
                sent = int(v)
            elif k == H_SOURCE:
                m.source_queue = v.decode()
        if attrs:
            m._attrs = attrs
        m.sent_timestamp_ms = sent
        if mid is not None:
            m._id = mid
        m._pfx = self._id_prefix
        return m

    def _take_fifo(self, n: int, vis: int, now: int, dlq) -> tuple[list, list]:
        """FIFO: messages in order within a group; a group with a message in
        flight delivers nothing more until that message is deleted or visible."""
        if self._timers and self._timers[0][0] <= now:
            self._fire_timers(now)
        out: list = []
        moves: list = []
        flat: list = []
        dels: list = []
        if self._n_inflight >= MAX_INFLIGHT:
            return out, moves  # SQS FIFO returns no messages (no error) at the limit
        live = self._live
        until = now + vis * 1000
        expire_before = now - self._ret_ms
        mrc = self.config.max_receive_count if dlq is not None else None
        ready = self._ready
        groups, gin = self._groups, self._gin
        while ready and len(out) < n:
            head, g = heapq.heappop(ready)
            dq = groups.get(g)
            if not dq or dq[0] != head or gin.get(g):
                continue
            took = 0
            while len(out) < n and took < len(dq):
                o = dq[took]  # strict order from the head: nothing is skipped
                e = live.get(o)
                if e is not None and e[_STATE] != AVAILABLE:
                    break  # delayed or moving: the group waits
                r = self._read_one(o)
                if r is None or self._sent_ms(r) <= expire_before:
                    self._remove_locked(o, e)
                    dels.append(o)
                    continue
                if mrc is not None and e is not None and e[_COUNT] >= mrc:
                    self._n_available -= 1
                    e[_STATE] = MOVING
                    moves.append((o, r, e))
                    break
                self._nonce += 1
                nonce = self._nonce
                if e is None:
                    e = live[o] = [nonce, until, 1, now, now, INFLIGHT]
                else:
                    self._n_available -= 1
                    e[_NONCE] = nonce
                    e[_UNTIL] = until
                    e[_COUNT] += 1
                    e[_RECV] = now
                    e[_FIRST] = e[_FIRST] or now
                    e[_STATE] = INFLIGHT
                self._n_inflight += 1
                heapq.heappush(self._timers, (until, o, nonce))
                flat += (o, nonce, until, now, e[_FIRST], e[_COUNT])
                handle = self._codec.encode(o, nonce)
                self._issued[handle] = (o, nonce)
                out.append(self._message(o, r.value, r.timestamp_ms, r.headers,
                                         handle, e[_COUNT], e[_FIRST]))
                took += 1
            if took:
                gin[g] = gin.get(g, 0) + took
        self._log_ops(flat, dels, now)
        return out, moves

    def _log_ops(self, flat: list, dels: list, now: int) -> None:
        st = self._state
        if flat:
            v = encode_leases(flat, len(flat) // 6)
            st.append(v)
            self._state_bytes += len(v)
        if dels:
            for o in dels:
                if not self._fifo and o >= self._cursor:
                    self._ahead.add(o)
            v = encode_deletes(dels)
            st.append(v)
            self._state_bytes += len(v)
            self._advance_low()
        if self._state_bytes > COMPACT_BYTES:
            self._compact_locked(now)

    # ============================================================ deleting

    def delete(self, receipt_handle: str) -> None:
        """Delete (acknowledge) a received message (stale-handle rules: module doc)."""
        o, nonce = self._decode(receipt_handle)
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            err = self._delete_one_locked(o, nonce, receipt_handle)
            if self._dels:
                self._flush_dels_locked()
        if self._sync:
            self._state.flush()
        if err is not None:
            raise err
        self._maybe_reclaim()

    def delete_batch(self, receipt_handles: Iterable[str]) -> None:
        """Delete up to 10 messages. Every handle is checked first: a malformed or
        forged one raises ReceiptHandleIsInvalid and nothing is deleted.
        (``delete_batch_entries`` gives SQS's per-entry results instead.)"""
        handles = list(receipt_handles)
        if not handles:
            raise EmptyBatchRequest()
        if len(handles) > MAX_BATCH_ENTRIES:
            raise TooManyEntriesInBatchRequest(len(handles))
        # Handles this process issued need no MAC check; taking them out of the
        # cache now is harmless (a handle not found is checked by its MAC).
        try:
            pairs = list(map(self._issued.pop, handles, repeat(None, len(handles))))
        except TypeError:  # an unhashable "handle"
            pairs = [None] * len(handles)
        if None in pairs:
            dec = self._codec.decode
            pairs = [dec(h) if p is None else p for h, p in zip(handles, pairs)]
        errs = None
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            if not self._fifo:
                # hot path
                live = self._live
                pop = live.pop
                dels = self._dels
                inflight = 0
                for o, nonce in pairs:
                    e = pop(o, None)
                    if e is None:
                        continue  # deleted before: success
                    if e[0] == nonce and e[5] == INFLIGHT:
                        inflight += 1
                        dels.append(o)
                        continue
                    st = e[5]
                    if e[0] != nonce or st == MOVING:
                        live[o] = e  # an earlier delivery's handle, or being moved: no-op
                        continue
                    if st == AVAILABLE:
                        self._n_available -= 1
                    else:
                        self._n_delayed -= 1
                    dels.append(o)
                self._n_inflight -= inflight
            else:
                issued = self._issued
                for h in handles:
                    if h.__class__ is str:
                        issued.pop(h, None)
                for (o, nonce), h in zip(pairs, handles):
                    err = self._delete_one_locked(o, nonce, h)
                    if err is not None and errs is None:
                        errs = err
            if self._dels:
                self._flush_dels_locked()
        if self._sync:
            self._state.flush()
        if errs is not None:
            raise errs
        if self._low >= self._reclaim_next:
            self._maybe_reclaim()

    def delete_batch_entries(self, entries: list[dict]) -> dict:
        """SQS DeleteMessageBatch: entries ``{"id", "receipt_handle"}``; returns
        ``{"successful": [{"id"}], "failed": [{"id", "code", "sender_fault", "message"}]}``."""
        entries = list(entries)
        if not entries:
            raise EmptyBatchRequest()
        if len(entries) > MAX_BATCH_ENTRIES:
            raise TooManyEntriesInBatchRequest(len(entries))
        _check_entry_ids([e.get("id") for e in entries])
        ok, failed = [], []
        todo = []
        for e in entries:
            try:
                todo.append((e, *self._decode(e.get("receipt_handle"))))
            except QueueError as err:
                failed.append(_failure(e["id"], err))
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            for e, o, nonce in todo:
                err = self._delete_one_locked(o, nonce, e.get("receipt_handle"))
                if err is None:
                    ok.append({"id": e["id"]})
                else:
                    failed.append(_failure(e["id"], err))
            if self._dels:
                self._flush_dels_locked()
        if self._sync:
            self._state.flush()
        self._maybe_reclaim()
        return {"successful": ok, "failed": failed}

    def _delete_one_locked(self, o: int, nonce: int, handle) -> QueueError | None:
        if handle.__class__ is str:
            self._issued.pop(handle, None)
        e = self._live.get(o)
        if e is None:
            if self._fifo and o in self._group_of:
                # never received under this handle's delivery (state lost in a crash)
                return ReceiptHandleExpired(handle)
            return None  # already deleted: success
        if e[_NONCE] != nonce or e[_STATE] == MOVING:
            return ReceiptHandleExpired(handle) if self._fifo else None
        if self._fifo and (e[_STATE] != INFLIGHT or e[_UNTIL] <= self._now_ms()):
            return ReceiptHandleExpired(handle)
        self._remove_locked(o, e)
        self._dels.append(o)
        return None

    def _remove_locked(self, o: int, e: list | None) -> None:
        """Forget message o (its delete record is written by the caller)."""
        if e is not None:
            del self._live[o]
            st = e[_STATE]
            if st == INFLIGHT:
                self._n_inflight -= 1
            elif st == AVAILABLE:
                self._n_available -= 1
            elif st == DELAYED:
                self._n_delayed -= 1
        if self._fifo:
            g = self._group_of.pop(o, None)
            if g is not None:
                dq = self._groups[g]
                if dq and dq[0] == o:
                    dq.popleft()
                else:
                    try:
                        dq.remove(o)
                    except ValueError:
                        pass
                if e is not None and e[_STATE] == INFLIGHT:
                    c = self._gin.get(g, 0) - 1
                    if c > 0:
                        self._gin[g] = c
                    else:
                        self._gin.pop(g, None)
                if not dq:
                    del self._groups[g]
                elif not self._gin.get(g):
                    heapq.heappush(self._ready, (dq[0], g))

    def _flush_dels_locked(self) -> None:
        dels = self._dels
        self._dels = []
        v = encode_deletes(dels)
        self._state.append(v)
        self._state_bytes += len(v)
        if self._fifo:
            self._advance_low()
        else:
            c = self._cursor
            if max(dels) >= c:
                for o in dels:
                    if o >= c:
                        self._ahead.add(o)
            if self._live or self._ahead:
                self._advance_low()
            elif self._low < c:  # _advance_low when nothing is tracked
                self._low = c
        if self._state_bytes > COMPACT_BYTES:
            self._compact_locked(self._now_ms())

    def _advance_low(self) -> None:
        low = self._low
        if self._fifo:
            end = self._log.end_offset
            g = self._group_of
            while low < end and low not in g:
                low += 1
        else:
            c = self._cursor
            live = self._live
            if not live:
                low = max(low, c)
            while low < c and low not in live:
                low += 1
            if low == c and self._ahead:
                ahead = self._ahead
                end = self._end_offset()
                while low < end and low in ahead and low not in live:
                    ahead.discard(low)
                    low += 1
                if low > self._cursor:
                    self._cursor = low
        self._low = low

    # ============================================================ visibility

    def change_visibility(self, receipt_handle: str, visibility_timeout: int) -> None:
        """Set the lease of a message in flight to end ``visibility_timeout``
        seconds from now (0: visible now). The lease can't end more than 12 hours
        after the message was received (InvalidParameterValue)."""
        o, nonce = self._decode(receipt_handle)
        self._check_visibility(visibility_timeout)
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            err = self._change_vis_locked(o, nonce, visibility_timeout, self._now_ms())
        if self._sync:
            self._state.flush()
        if err is not None:
            raise err

    def change_visibility_batch_entries(self, entries: list[dict]) -> dict:
        """SQS ChangeMessageVisibilityBatch: entries ``{"id", "receipt_handle",
        "visibility_timeout"}``; returns successful/failed like ``delete_batch_entries``."""
        entries = list(entries)
        if not entries:
            raise EmptyBatchRequest()
        if len(entries) > MAX_BATCH_ENTRIES:
            raise TooManyEntriesInBatchRequest(len(entries))
        _check_entry_ids([e.get("id") for e in entries])
        ok, failed = [], []
        todo = []
        for e in entries:
            try:
                o, nonce = self._decode(e.get("receipt_handle"))
                self._check_visibility(e.get("visibility_timeout"))
                todo.append((e, o, nonce))
            except QueueError as err:
                failed.append(_failure(e["id"], err))
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            now = self._now_ms()
            for e, o, nonce in todo:
                err = self._change_vis_locked(o, nonce, e["visibility_timeout"], now)
                if err is None:
                    ok.append({"id": e["id"]})
                else:
                    failed.append(_failure(e["id"], err))
        if self._sync:
            self._state.flush()
        return {"successful": ok, "failed": failed}

    @staticmethod
    def _check_visibility(v) -> None:
        if v.__class__ is not int or not 0 <= v <= MAX_VISIBILITY_S:
            raise InvalidParameterValue(
                f"Value {v} for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 "
                f"and <= {MAX_VISIBILITY_S}."
            )

    def _change_vis_locked(self, o: int, nonce: int, seconds: int, now: int) -> QueueError | None:
        e = self._live.get(o)
        if e is None or e[_NONCE] != nonce or e[_STATE] != INFLIGHT or e[_UNTIL] <= now:
            return MessageNotInflight()
        until = now + seconds * 1000
        if until - e[_RECV] > MAX_VISIBILITY_S * 1000:
            return InvalidParameterValue(
                f"Value {seconds} for parameter VisibilityTimeout is invalid. Reason: Total "
                f"VisibilityTimeout for the message is beyond the limit [{MAX_VISIBILITY_S} seconds]"
            )
        e[_UNTIL] = until
        heapq.heappush(self._timers, (until, o, nonce))
        v = encode_leases([o, nonce, until, e[_RECV], e[_FIRST], e[_COUNT]], 1)
        self._state.append(v)
        self._state_bytes += len(v)
        if seconds == 0:
            self._fire_timers(now)
            if self._waiting:
                self._cond.notify()
        return None

    # ============================================================== purge

    def purge(self) -> None:
        """Delete every message sent before this call (in flight ones included).
        Only one purge per 60 seconds (PurgeQueueInProgress)."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            now = self._now_ms()
            if self._last_purge_ms is not None and now - self._last_purge_ms < PURGE_INTERVAL_MS:
                raise PurgeQueueInProgress(self.name)
            self._push_locked()
            below = self._log.end_offset
            v = bytes([OP_PURGE]) + below.to_bytes(8, "little")
            self._state.append(v)
            self._state_bytes += len(v)
            for o in [o for o in self._live if o < below]:
                e = self._live[o]
                self._remove_locked(o, e)
            self._ahead = {o for o in self._ahead if o >= below}
            if self._fifo:
                for o in [o for o in self._group_of if o < below]:
                    self._remove_locked(o, None)
            self._cursor = max(self._cursor, below)
            self._low = max(self._low, below)
            self._tail.clear()
            self._tail_bytes = 0
            self._issued.clear()
            self._advance_low()
            self._last_purge_ms = now
        if self._sync:
            self._state.flush()
        self.reclaim()

    # =========================================================== DLQ moves

    def _finish_moves(self, moves: list, dlq: Queue | None) -> bool:
        """Append the moving messages to ``dlq``, then delete them here: a crash in
        between leaves a duplicate, never a loss."""
        try:
            if dlq is None or dlq._closed:
                raise QueueError("dead-letter queue unavailable")
            dlq._accept_moved([(self._with_id(r), e[_COUNT]) for _, r, e in moves],
                              source=self.name, sync=self._sync)
        except Exception:
            with self._lock:
                for o, _, e in moves:
                    if self._live.get(o) is e and e[_STATE] == MOVING:
                        self._make_available_locked(o, e)
            return False
        with self._lock:
            for o, _, e in moves:
                if self._live.get(o) is e and e[_STATE] == MOVING:
                    e[_STATE] = AVAILABLE
                    self._n_available += 1
                    self._remove_locked(o, e)
                    self._dels.append(o)
            if self._dels:
                self._flush_dels_locked()
        if self._sync:
            self._state.flush()
        return True

    def _make_available_locked(self, o: int, e: list) -> None:
        e[_STATE] = AVAILABLE
        self._n_available += 1
        if self._fifo:
            g = self._group_of.get(o)
            if g is not None and not self._gin.get(g):
                heapq.heappush(self._ready, (self._groups[g][0], g))
        else:
            heapq.heappush(self._avail, o)

    def _accept_moved(self, items: list, *, source: str | None, sync: bool = False) -> None:
        """Append messages moved from another queue (DLQ move, or redrive out of a DLQ).

        items: (record, receive_count). Messages keep their id and original sent
        timestamp (retention counts from it, as SQS does for DLQs); a redriven
        message (source None) starts a new retention period."""
        values, headers = [], []
        for r, count in items:
            h = dict(r.headers) if r.headers else {}
            h.pop(H_DELAY, None)
            if source is not None:
                h.setdefault(H_SENT, str(r.timestamp_ms).encode())
                h[H_SOURCE] = source.encode()
                h[H_COUNT] = str(count).encode()
            else:
                h.pop(H_SENT, None)
                h.pop(H_SOURCE, None)
                h.pop(H_COUNT, None)
            values.append(r.value)
            headers.append(tuple(h.items()))
        with self._lock:
            if self._closed:
                raise LogClosedError(f"queue {self.name} is closed")
            now = self._now_ms()
            first = self._append_locked(values, headers, now)
            if self._fifo:
                for k, h in enumerate(headers):
                    g = dict(h).get(H_GROUP, b"").decode()
                    self._fifo_add(first + k, g)
            if self._waiting:
                self._cond.notify(len(values))
        # Always fsync: the caller deletes the messages from their old queue next,
        # and that delete must never be durable before this append is.
        self._log.flush()

    # ========================================================= attributes

    def _fresh_count_locked(self) -> int:
        if self._fifo:
            return 0
        c = self._cursor
        n = self._end_offset() - c
        if n <= 0:
            return 0
        n -= sum(1 for o in self._ahead if o >= c)
        n -= sum(1 for o in self._live if o >= c)
        return max(0, n)

    def _backlog_locked(self) -> int:
        if self._fifo:
            return len(self._group_of)
        return self._n_inflight + self._n_delayed + self._n_available + self._fresh_count_locked() + sum(
            1 for e in self._live.values() if e[_STATE] == MOVING)

    def counts(self) -> dict:
        """{"visible", "in_flight", "delayed"}: SQS's approximate counts."""
        with self._lock:
            now = self._now_ms()
            if self._timers and self._timers[0][0] <= now:
                self._fire_timers(now)
            moving = sum(1 for e in self._live.values() if e[_STATE] == MOVING) if len(self._live) < 100_000 else 0
            if self._fifo:
                visible = len(self._group_of) - self._n_inflight - self._n_delayed - moving
            else:
                visible = self._n_available + self._fresh_count_locked()
            return {"visible": max(0, visible), "in_flight": self._n_inflight + moving,
                    "delayed": self._n_delayed}

    def attributes(self, names: Iterable[str] | None = None, *,
                   arn_prefix: str = DEFAULT_ARN_PREFIX) -> dict[str, str]:
        """GetQueueAttributes: SQS attribute names -> values formatted as SQS does
        (strings). ``names`` None or containing "All" returns every attribute."""
        c = self.counts()
        cfg = self.config
        out = {
            "QueueArn": f"{arn_prefix}:{self.name}",
            "ApproximateNumberOfMessages": str(c["visible"]),
            "ApproximateNumberOfMessagesNotVisible": str(c["in_flight"]),
            "ApproximateNumberOfMessagesDelayed": str(c["delayed"]),
            "CreatedTimestamp": str(self.created_ms // 1000),
            "LastModifiedTimestamp": str(self.modified_ms // 1000),
        }
        out.update(cfg.sqs_attributes(arn_prefix))
        if names is None:
            return out
        names = list(names)
        if "All" in names:
            return out
        valid = set(READ_ONLY_SQS) | set(SQS_TO_PY) | {"RedrivePolicy"}
        res = {}
        for nm in names:
            if nm not in valid:
                raise InvalidAttributeName(f"Unknown Attribute {nm}.")
            if nm in out:
                res[nm] = out[nm]
        return res

    def set_attributes(self, attrs: dict | None = None, **kw) -> None:
        """SetQueueAttributes: Python or SQS names (module queue_config)."""
        changes = normalize({**(attrs or {}), **kw}, creating=False)
        if "tags" in changes:
            raise InvalidAttributeValue("use tag()/untag() to change tags")
        self._apply_changes(changes)

    def _apply_changes(self, changes: dict) -> None:
        if not changes:
            return
        cfg = self.config
        if "dead_letter_queue" in changes and changes["dead_letter_queue"] is not None:
            self._check_dlq(changes["dead_letter_queue"], cfg.fifo)
        for k in STORAGE_SETTINGS:
            if k in changes and changes[k] != getattr(cfg, k):
                raise InvalidAttributeName(f"{k} can only be set when the queue is created")
        new = cfg.updated(changes)
        with self._lock:
            self.config = new
            self.modified_ms = self._now_ms()
            self._apply_config_cache()
            self._save_files()
            if self._waiting:
                self._cond.notify_all()

    def _check_dlq(self, dlq_name: str, fifo: bool) -> None:
        if dlq_name == self.name:
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: a queue cannot be its own "
                "dead-letter queue."
            )
        dlq = self._resolver(dlq_name)
        if dlq is None:
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target does "
                "not exist."
            )
        if dlq.config.fifo != fifo:
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target must "
                "be of the same type (standard or FIFO) as the source."
            )
        if not redrive_allows(dlq.config.redrive_allow_policy, self.name):
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: The dead-letter queue's "
                "RedriveAllowPolicy does not allow this source queue."
            )

    # ---------------------------------------------------------------- tags

    def tags(self) -> dict[str, str]:
        return dict(self.config.tags)

    def tag(self, tags: dict[str, str]) -> None:
        new = {**self.config.tags, **tags}
        validate_tags(tags)
        validate_tags(new)
        self._apply_changes({"tags": new})

    def untag(self, keys: Iterable[str]) -> None:
        new = dict(self.config.tags)
        for k in keys:
            new.pop(k, None)
        self._apply_changes({"tags": new})

    # ------------------------------------------------------- DLQ helpers

    def dead_letter_source_queues(self) -> list[str]:
        """Names of the queues whose RedrivePolicy targets this queue."""
        out = []
        for q in self._lister():
            if q is not self and q.config.dead_letter_queue == self.name:
                out.append(q.name)
        return sorted(out)

    def move_messages(self, destination: str | None = None, *, max_messages: int | None = None,
                      max_per_second: float | None = None, cancel: threading.Event | None = None,
                      progress: Callable[[int], None] | None = None) -> int:
        """Redrive: move visible messages out of this (dead-letter) queue to
        ``destination``, or back to the queue each came from when None. Returns
        how many moved. Messages with no known source (and no destination) stay."""
        moved = 0
        while max_messages is None or moved < max_messages:
            if cancel is not None and cancel.is_set():
                break
            k = 10 if max_messages is None else min(10, max_messages - moved)
            if max_per_second:
                k = max(1, min(k, int(max_per_second)))
            with self._lock:
                if self._closed:
                    raise LogClosedError(f"queue {self.name} is closed")
                now = self._now_ms()
                batch = self._take_for_move(k, now)
            if not batch:
                break
            by_target: dict[str, list] = {}
            stuck = []
            for o, r, e in batch:
                tgt = destination
                if tgt is None:
                    src = dict(r.headers).get(H_SOURCE) if r.headers else None
                    tgt = src.decode() if src is not None else None
                q = self._resolver(tgt) if tgt is not None else None
                if q is None or q is self:
                    stuck.append((o, r, e))
                else:
                    by_target.setdefault(tgt, []).append((o, r, e))
            done = []
            for tgt, items in by_target.items():
                q = self._resolver(tgt)
                try:
                    q._accept_moved([(self._with_id(r), e[_COUNT]) for _, r, e in items], source=None,
                                    sync=self._sync)
                    done += items
                except Exception:
                    stuck += items
            with self._lock:
                for o, _, e in done:
                    if self._live.get(o) is e and e[_STATE] == MOVING:
                        e[_STATE] = AVAILABLE
                        self._n_available += 1
                        self._remove_locked(o, e)
                        self._dels.append(o)
                if self._dels:
                    self._flush_dels_locked()
                for o, _, e in stuck:
                    if self._live.get(o) is e and e[_STATE] == MOVING:
                        self._make_available_locked(o, e)
            if self._sync:
                self._state.flush()
            moved += len(done)
            if progress is not None and done:
                progress(len(done))
            if not done:
                break
            if max_per_second:
                time.sleep(len(done) / max_per_second)
        self._maybe_reclaim()
        return moved

    def _with_id(self, r):
        """A copy of record r whose headers carry its message id (for moving out)."""
        from ..storage.record_batch import Record

        h = tuple(r.headers) if r.headers else ()
        if not any(k == H_ID for k, _ in h):
            h = h + ((H_ID, f"{self._id_prefix}{r.offset:012x}".encode()),)
        return Record(r.offset, r.timestamp_ms, r.key, r.value, h)

    def _take_for_move(self, n: int, now: int) -> list:
        """Mark up to n visible messages MOVING (no lease); return (o, record, entry)."""
        self._push_locked()
        if self._timers and self._timers[0][0] <= now:
            self._fire_timers(now)
        out = []
        dels = []
        expire_before = now - self._ret_ms
        if self._fifo:
            for g, dq in list(self._groups.items()):
                if len(out) >= n:
                    break
                if self._gin.get(g):
                    continue
                for o in list(dq):
                    if len(out) >= n:
                        break
                    e = self._live.get(o)
                    if e is not None and e[_STATE] != AVAILABLE:
                        break
                    r = self._read_one(o)
                    if r is None or self._sent_ms(r) <= expire_before:
                        self._remove_locked(o, e)
                        dels.append(o)
                        continue
                    if e is None:
                        e = self._live[o] = [0, 0, 0, 0, 0, AVAILABLE]
                        self._n_available += 1
                    self._n_available -= 1
                    e[_STATE] = MOVING
                    out.append((o, r, e))
                    break  # one per group per pass keeps group order simple
        else:
            live = self._live
            while self._avail and len(out) < n:
                o = heapq.heappop(self._avail)
                e = live.get(o)
                if e is None or e[_STATE] != AVAILABLE:
                    continue
                r = self._read_one(o)
                self._n_available -= 1
                if r is None or self._sent_ms(r) <= expire_before:
                    del live[o]
                    dels.append(o)
                    continue
                e[_STATE] = MOVING
                out.append((o, r, e))
            log = self._log
            while len(out) < n and self._cursor < log.end_offset:
                recs = log.read(self._cursor, max_records=n - len(out))
                if not recs:
                    break
                for r in recs:
                    o = r.offset
                    self._cursor = o + 1
                    if o in live:
                        continue
                    if o in self._ahead:
                        self._ahead.discard(o)
                        continue
                    if self._sent_ms(r) <= expire_before:
                        dels.append(o)
                        continue
                    if r.headers:
                        d = dict(r.headers).get(H_DELAY)
                        if d is not None and r.timestamp_ms + int(d) > now:
                            vis_at = r.timestamp_ms + int(d)
                            live[o] = [0, vis_at, 0, 0, 0, DELAYED]
                            self._n_delayed += 1
                            heapq.heappush(self._timers, (vis_at, o, 0))
                            continue
                    e = live[o] = [0, 0, 0, 0, 0, MOVING]
                    out.append((o, r, e))
        if dels:
            self._dels.extend(dels)
            self._flush_dels_locked()
        return out

    # ==================================================== maintenance

    def _maybe_reclaim(self) -> None:
        low = self._low
        if low < self._reclaim_next:
            return
        # bytes per offset: what this process sent (the log's size over its span
        # overstates it once the active segment holds consumed messages)
        if self._sent_n >= 64:
            bpo = self._sent_b / self._sent_n + 16
        else:
            bpo = self._bytes_per_offset
            if bpo <= 0:
                span = self._log.end_offset - self._log.start_offset
                size = self._log.size_bytes
                if span >= 1024 and size > 0:
                    bpo = self._bytes_per_offset = min(65536.0, max(1.0, size / span))
                else:
                    bpo = 1024.0
        need = max(16, int(self.config.segment_bytes / bpo))
        if low - self._reclaim_low >= need:
            self.reclaim()
        else:  # look again when a segment's worth may be consumed
            self._reclaim_next = min(self._reclaim_low + need, low + 4096)

    def reclaim(self) -> int:
        """Delete the message-log segments below the lowest message not yet deleted
        (FIFO queues keep the last 5 minutes, the deduplication window). Returns
        the number of segments deleted."""
        with self._lock:
            if self._closed:
                return 0
            self._push_locked()
            target = self._low
            if self._fifo:
                t = self._log.offset_for_time(self._now_ms() - WINDOW_MS)
                target = min(target, self._log.end_offset if t is None else t)
            self._reclaim_low = self._low
            self._reclaim_next = self._low + 16
        return self._log.delete_before(target) if target > self._log.start_offset else 0

    def expire(self) -> int:
        """Retention: delete visible messages older than MessageRetentionPeriod now
        (receive does it as it meets them). Returns how many were deleted."""
        n = 0
        with self._lock:
            if self._closed:
                return 0
            self._push_locked()
            now = self._now_ms()
            expire_before = now - self._ret_ms
            if not self._fifo:
                log = self._log
                dels = []
                while self._cursor < log.end_offset:
                    recs = log.read(self._cursor, max_records=1000)
                    stop = False
                    for r in recs:
                        o = r.offset
                        if o in self._live or o in self._ahead:
                            self._ahead.discard(o)
                            self._cursor = o + 1
                            continue
                        if self._sent_ms(r) > expire_before:
                            stop = True
                            break
                        dels.append(o)
                        self._cursor = o + 1
                    if stop or not recs:
                        break
                for o, e in list(self._live.items()):
                    if e[_STATE] == AVAILABLE:
                        r = self._read_one(o)
                        if r is None or self._sent_ms(r) <= expire_before:
                            self._remove_locked(o, e)
                            dels.append(o)
                n = len(dels)
                if dels:
                    self._dels.extend(dels)
                    self._flush_dels_locked()
            else:
                dels = []
                for _g, dq in list(self._groups.items()):
                    for o in list(dq):
                        e = self._live.get(o)
                        if e is not None and e[_STATE] != AVAILABLE:
                            break
                        r = self._read_one(o)
                        if r is None or self._sent_ms(r) <= expire_before:
                            self._remove_locked(o, e)
                            dels.append(o)
                        else:
                            break
                n = len(dels)
                if dels:
                    self._dels.extend(dels)
                    self._flush_dels_locked()
        if self._sync and n:
            self._state.flush()
        return n

    def _compact_locked(self, now: int) -> None:
        self._state.write_snapshot(
            low=self._low, cursor=self._cursor if not self._fifo else self._low,
            live=self._live, deleted_ahead=self._deleted_ahead_for_snapshot(), now_ms=now,
        )
        self._state_bytes = 0

    def _deleted_ahead_for_snapshot(self) -> Iterable[int]:
        if not self._fifo:
            return self._ahead
        # FIFO: cursor == low in the snapshot; every offset in [low, end) that is
        # in no group is deleted
        g = self._group_of
        return [o for o in range(self._low, self._log.end_offset) if o not in g]

    def compact(self) -> None:
        """Write a snapshot of the lease state and drop the state log below it."""
        with self._lock:
            if self._closed:
                return
            self._compact_locked(self._now_ms())

    def flush(self) -> None:
        """fsync the message log and the state log."""
        with self._lock:
            if not self._closed:
                self._push_locked()
        self._log.flush()
        self._state.flush()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Flush, snapshot the lease state, write queue.meta, close the logs; wakes
        long polls (they return []). Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                self._push_locked()
                self._compact_locked(self._now_ms())
                self._save_files()
            finally:
                self._closed = True
                self._cond.notify_all()
        try:
            self._log.flush()
            target = self._low
            if self._fifo:
                t = self._log.offset_for_time(self._now_ms() - WINDOW_MS)
                target = min(target, self._log.end_offset if t is None else t)
            if target > self._log.start_offset:
                self._log.delete_before(target)
        finally:
            try:
                self._state.close()
            finally:
                self._log.close()

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, fifo={self._fifo}, low={self._low}, end={self._end_offset()})"


# =================================================================== helpers


def _check_entry_ids(ids: list) -> None:
    seen = set()
    for i in ids:
        if i is None:
            continue
        if not isinstance(i, str) or not _ENTRY_ID.fullmatch(i):
            raise InvalidBatchEntryId(i)
        if i in seen:
            raise BatchEntryIdsNotDistinct(i)
        seen.add(i)


def _failure(entry_id, err: QueueError) -> dict:
    return {"id": entry_id, "code": err.code, "sender_fault": err.sender_fault, "message": str(err)}


def _encode_attributes(attributes: dict) -> tuple[tuple, int]:
    """Message attributes -> record headers and their SQS size (name + type + value)."""
    if not isinstance(attributes, dict):
        raise InvalidParameterValue("MessageAttributes must be a dict")
    if len(attributes) > MAX_MESSAGE_ATTRIBUTES:
        raise InvalidParameterValue(
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{MAX_MESSAGE_ATTRIBUTES}]."
        )
    out = []
    size = 0
    for name, v in attributes.items():
        if (not isinstance(name, str) or not _ATTR_NAME.fullmatch(name) or name.startswith(".")
                or name.endswith(".") or ".." in name or name.lower().startswith(("aws.", "amazon."))):
            raise InvalidParameterValue(
                f"Message ({name}) contains invalid attribute name: names are 1-256 characters "
                "from [A-Za-z0-9_.-], without leading, trailing or doubled periods, and not "
                "starting with AWS. or Amazon."
            )
        if isinstance(v, dict):
            dt = v.get("DataType")
            if not isinstance(dt, str) or not dt:
                raise InvalidParameterValue(f"The message attribute '{name}' must contain a non-empty attribute type.")
            base = dt.split(".", 1)[0]
            if base not in ("String", "Number", "Binary") or len(dt) > 256:
                raise InvalidParameterValue(
                    f"The type of message attribute '{name}' is invalid. You must use only the "
                    "following supported type prefixes: Binary, Number, String."
                )
            if base == "Binary":
                val = v.get("BinaryValue")
                if isinstance(val, str):
                    raise InvalidParameterValue(f"The message attribute '{name}' with type 'Binary' must use field 'Binary'.")
                if val is None:
                    raise InvalidParameterValue(f"The message attribute '{name}' with type 'Binary' must use field 'Binary'.")
                raw = bytes(val)
            else:
                val = v.get("StringValue")
                if not isinstance(val, str):
                    raise InvalidParameterValue(f"The message attribute '{name}' with type '{base}' must use field 'String'.")
                if _BAD_CHARS.search(val):
                    raise InvalidMessageContents(f"Invalid characters in message attribute '{name}'.")
                if base == "Number":
                    _check_number(name, val)
                raw = val.encode("utf-8")
        elif isinstance(v, bool):
            raise InvalidParameterValue(f"message attribute {name!r}: use a str, number or bytes value")
        elif isinstance(v, str):
            dt, raw = "String", v.encode("utf-8")
            if _BAD_CHARS.search(v):
                raise InvalidMessageContents(f"Invalid characters in message attribute '{name}'.")
        elif isinstance(v, (int, float)):
            dt, raw = "Number", repr(v).encode()
            _check_number(name, raw.decode())
        elif isinstance(v, (bytes, bytearray, memoryview)):
            dt, raw = "Binary", bytes(v)
        else:
            raise InvalidParameterValue(f"message attribute {name!r}: use a str, number or bytes value")
        if not raw and not dt.startswith("Binary"):
            raise InvalidParameterValue(f"Message attribute '{name}' must contain a non-empty value of type '{dt}'.")
        size += len(name.encode()) + len(dt.encode()) + len(raw)
        out.append((H_ATTR + name, dt.encode() + b"\0" + raw))
    return tuple(out), size


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _check_number(name: str, s: str) -> None:
    if not _NUMBER.fullmatch(s) or len(s.lstrip("+-").replace(".", "").split("e")[0].split("E")[0]) > 38:
        raise InvalidParameterValue(
            f"Can't cast the value of message ({name}) attribute to a number."
        )
