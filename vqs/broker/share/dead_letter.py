"""Archived share-group records copied to a dead-letter topic (Kafka's KIP-1191).

A share group whose config ``errors.deadletterqueue.topic.name`` names a topic
gets one record there for every record it archives: one REJECTed, or one
released or expired at the delivery limit. The record has Kafka's headers
(``__dlq.errors.topic``, ``.partition``, ``.offset``, ``.group``,
``.delivery.count``, ``.message``) and, when ``errors.deadletterqueue.copy.
record.enable`` is true, the original key and value (else no key, a null
value). It goes to partition ``source partition % partitions`` of the topic.

Exactly once with respect to the archive decision, across a SIGKILL: the
share partition appends the dead-letter records (handed to the operating
system when ``append_batch`` returns) *before* the state-log record that
settles them, under its lock. A crash between the two leaves the records
live in the state log but already in the dead-letter topic; at open the
partition reads the dead-letter partition from its *mark* (``dlq.json``
beside its state: a dead-letter topic, partition and offset below which
every copy this share partition made is settled in its snapshot) and
settles the offsets it finds copied, instead of archiving them again. The
mark is moved to the dead-letter partition's end after each snapshot, and
to a new target's end before the first copy sent there, so a recovery reads
only what was appended since the last snapshot. A topic named but missing
at archive time is skipped (logged): the record is archived without a copy,
as a Kafka broker does when its dead-letter write fails.
"""

from __future__ import annotations

import json
import logging
import os

from ...errors import TopicDoesNotExist, VQSError
from ...storage import atomic_write

logger = logging.getLogger(__name__)

MARK = "dlq.json"
REJECTED = "Offset rejected by client."
EXCEEDED = "Offset delivery count exceeded the threshold."
#: records read per step while a recovery scans the dead-letter partition
_SCAN_STEP = 500


class DeadLetters:
    """The dead-letter copies of one share partition (module doc). ``settings`` is a
    callable returning the group's ShareSettings in force."""

    def __init__(self, broker, group: str, topic: str, partition: int, path: str, settings):
        self.broker = broker
        self.group = group
        self.topic = topic
        self.partition = partition
        self.path = os.path.join(path, MARK)
        self._settings = settings
        self._mark = self._read_mark()

    def _read_mark(self) -> dict | None:
        try:
            with open(self.path, "rb") as f:
                m = json.loads(f.read())
            return {"topic": str(m["topic"]), "partition": int(m["partition"]), "offset": int(m["offset"])}
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            logger.warning("%s: unreadable dead-letter mark; ignored", self.path)
            return None

    def _write_mark(self, topic: str, partition: int, offset: int) -> None:
        self._mark = {"topic": topic, "partition": partition, "offset": offset}
        atomic_write(self.path, json.dumps(self._mark).encode())

    def _target(self):
        """(topic name, Topic, partition) the copies go to now, or None."""
        name = self._settings().dlq_topic
        if not name:
            return None
        try:
            t = self.broker.topic(name)
        except TopicDoesNotExist:
            logger.warning("share group %r: dead-letter topic %r does not exist; archived records of %s-%d "
                           "are not copied", self.group, name, self.topic, self.partition)
            return None
        return name, t, self.partition % t.partitions

    def send(self, source_log, items: list) -> None:
        """Copy archived records ``[(offset, delivery count, message)]`` (module doc); the
        append is in the operating system when this returns."""
        target = self._target()
        if target is None or not items:
            return
        name, t, k = target
        log = t.log(k)
        m = self._mark
        if m is None or m["topic"] != name or m["partition"] != k:
            self._write_mark(name, k, log.end_offset)
        copy = self._settings().dlq_copy_record
        originals = _originals(source_log, [o for o, _c, _m in items]) if copy else {}
        keys, values, headers = [], [], []
        for o, count, message in items:
            rec = originals.get(o)
            keys.append(rec.key if rec is not None else None)
            values.append(rec.value if rec is not None else None)
            headers.append((("__dlq.errors.topic", self.topic.encode()),
                            ("__dlq.errors.partition", str(self.partition).encode()),
                            ("__dlq.errors.offset", str(o).encode()),
                            ("__dlq.errors.group", self.group.encode()),
                            ("__dlq.errors.delivery.count", str(count).encode()),
                            ("__dlq.errors.message", message.encode())))
        log.append_batch(values, keys=keys if copy else None, headers=headers)
        if t._waiters:
            t._notify()

    def marked(self) -> None:
        """The share partition's snapshot is written: move the mark to the target's end."""
        m = self._mark
        if m is None:
            return
        try:
            end = self.broker.topic(m["topic"]).log(m["partition"]).end_offset
        except VQSError:
            return
        if end != m["offset"]:
            self._write_mark(m["topic"], m["partition"], end)

    def copied(self) -> set:
        """The offsets of this share partition copied to the dead-letter partition since the mark."""
        m = self._mark
        if m is None:
            return set()
        try:
            log = self.broker.topic(m["topic"]).log(m["partition"])
        except VQSError:
            return set()
        want = (self.topic.encode(), str(self.partition).encode(), self.group.encode())
        out: set = set()
        off = max(m["offset"], log.start_offset)
        while off < log.end_offset:
            recs = log.read(off, max_records=_SCAN_STEP)
            if not recs:
                break
            for r in recs:
                h = dict(r.headers or ())
                if (h.get("__dlq.errors.topic"), h.get("__dlq.errors.partition"), h.get("__dlq.errors.group")) == want:
                    try:
                        out.add(int(h.get("__dlq.errors.offset", b"")))
                    except (TypeError, ValueError):  # not a number (or a null value)
                        pass
            off = recs[-1].offset + 1
        return out


def _originals(log, offsets: list) -> dict:
    """{offset: record} of the source records still in the log."""
    out: dict = {}
    for o in sorted(offsets):
        if o in out or o < log.start_offset:
            continue
        for r in log.read(o, max_records=1):
            out[r.offset] = r
    return out
