"""A received message, and how a message record of the queue's log encodes one.

A queue's message log holds one record per message: ``value`` is the body and
the record headers (docs/FORMAT.md, "Queue state log" / message records) carry
everything else, under the one-letter names ``H_*`` below. A plain message (a
standard queue's send without attributes or delay) has no headers at all.

Invariants:
* a message id is ``{id_prefix}{offset + id_base:012x}`` (UUID-shaped;
  ``id_prefix`` and ``id_base`` are the queue's, see ``config_files.new_identity``) unless the record carries ``H_ID`` (it was moved in from another
  queue and keeps the id it had there);
* the sent timestamp is the record's timestamp unless the record carries
  ``H_SENT`` (moved to a dead-letter queue: retention counts from the original send).
"""

from __future__ import annotations

from .config import DEFAULT_ARN_PREFIX

# record header names
H_GROUP = "g"  # message group id (utf-8)
H_DEDUP = "u"  # deduplication id (utf-8)
H_DELAY = "t"  # per-message delay, ms (ascii)
H_ID = "i"  # message id, when not derived from the offset (moved messages)
H_SENT = "o"  # original sent timestamp ms (ascii), when moved
H_SOURCE = "s"  # source queue name (messages moved to a dead-letter queue)
H_COUNT = "n"  # receive count at the source when moved to the DLQ (ascii)
H_ATTR = "m:"  # prefix: message attribute; value = DataType NUL value
H_TRACE = "x"  # AWSTraceHeader system attribute (utf-8)

HEX2 = [f"{i:02x}" for i in range(256)]


def message_ids(prefix: str, base: int, first: int, n: int) -> list[str]:
    """[f"{prefix}{o + base:012x}" for o in range(first, first + n)], formatting one
    number per 256 offsets (the ids of a batch differ in their last two digits;
    ``base``'s low byte is zero).
    (The standard queue's plain send serves a batch within one block of 256 from
    its cached prefix and calls this for the rest.)"""
    out: list = []
    o = first + base
    end = o + n
    while o < end:
        lo = o & 255
        k = min(256 - lo, end - o)
        out += map(f"{prefix}{o >> 8:010x}".__add__, HEX2[lo:lo + k])
        o += k
    return out


#: receive_state's answers besides a delay's end (which is > 0)
VISIBLE = 0
EXPIRED = -1


def receive_state(ts: int, headers, now: int, expire_before: int) -> int:
    """What a receive at ``now`` does with a message that has no lease, from its
    record's timestamp ``ts`` and headers: the one rule of standard, fair and
    FIFO queues (and of a message move task, recovery's delayed messages).

    * ``> 0``: its send delay (``H_DELAY``, counted from ``ts``) ends at that time,
      after ``now``: track it as delayed, deliver nothing;
    * ``EXPIRED``: first sent (``H_SENT``, else ``ts``) at or before
      ``expire_before``: past retention, forget it;
    * ``VISIBLE``: deliver it.

    The delay is decided first: a delayed message is tracked even when past
    retention (its expiry is then found when it turns visible). A message with a
    lease has served its delay, and a FIFO queue tracks every delay at send and
    at open: for those only the expiry is checked (``sent_at``, ``sent_ms``). With
    ``expire_before=-1`` it answers the delay alone. Receive loops over plain
    records (no headers) may inline the last line."""
    if headers:
        sent = ts
        for k, v in headers:
            if k == H_DELAY:
                until = ts + int(v)
                if until > now:
                    return until
            elif k == H_SENT:
                sent = int(v)
        return EXPIRED if sent <= expire_before else VISIBLE  # sent_at, inline
    return EXPIRED if ts <= expire_before else VISIBLE


def sent_at(ts: int, headers) -> int:
    """When a message was first sent, from its record's timestamp ``ts`` and
    headers (``H_SENT`` if it was moved): what retention counts from."""
    if headers:
        for k, v in headers:
            if k == H_SENT:
                return int(v)
    return ts


def sent_ms(r) -> int:
    """``sent_at`` of record ``r`` (inline: FIFO receives call it per message)."""
    h = r.headers
    if h:
        for k, v in h:
            if k == H_SENT:
                return int(v)
    return r.timestamp_ms


def group_id(headers) -> str | None:
    """The message group id in a message record's headers, or None."""
    for k, v in headers:
        if k == H_GROUP:
            return v.decode()
    return None


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
    trace_header = None  # SQS's AWSTraceHeader (H_TRACE)
    _fifo = False

    @classmethod
    def _first_delivery(cls, pfx: tuple[str, int], o: int, body, ts: int, handle: str, now: int) -> Message:
        """A plain message (no headers) received for the first time. (The standard
        queue's hottest loop inlines this body: keep the two in step.)"""
        m = cls.__new__(cls)
        m._pfx = pfx
        m.body = body
        m.receipt_handle = handle
        m.sent_timestamp_ms = ts
        m.first_receive_timestamp_ms = now
        m.offset = o
        return m

    @classmethod
    def _from_record(cls, pfx: tuple[str, int], fifo: bool, o: int, value, ts: int, headers, handle: str,
                     count: int, first: int) -> Message:
        """A message whose record has headers (or a redelivery): decodes them."""
        m = cls.__new__(cls)
        m.body = value
        m.receipt_handle = handle
        if count != 1:
            m.receive_count = count
        m.first_receive_timestamp_ms = first
        m.offset = o
        if fifo:
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
            elif k == H_COUNT:  # moved to a DLQ: SQS's receive count goes on from the source's
                m.receive_count = count + int(v)
            elif k == H_TRACE:
                m.trace_header = v.decode("utf-8")
        if attrs:
            m._attrs = attrs
        m.sent_timestamp_ms = sent
        if mid is not None:
            m._id = mid
        m._pfx = pfx
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
        if i is None:
            prefix, base = self._pfx  # the queue's (id_prefix, id_base)
            return f"{prefix}{self.offset + base:012x}"
        return i

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
        if self.trace_header is not None:
            out["AWSTraceHeader"] = self.trace_header
        if self.source_queue is not None:
            out["DeadLetterQueueSourceArn"] = f"{arn_prefix}:{self.source_queue}"
        return out
