"""Share-group members the server keeps for its remote clients: one registry for REST and gRPC.

A client over HTTP or gRPC holds no connection for its membership: it joins
(the server makes an embedded ``broker.share_consumer`` and keeps it here by
``(group, member id)``), then receives and acknowledges naming its member id,
and leaves. Both fronts keep their members here, so a member joined on one
front receives and acknowledges on the other, with one implementation of the
semantics (vqs.broker.share.consumer).

Invariants:

* at most ``max_members`` members live at once (``join`` answers None past
  it: the front refuses, 429 or RESOURCE_EXHAUSTED);
* a member not called for its group's ``session_timeout_ms`` is closed (what
  it holds released) at the next ``join``: an abandoned member costs a slot
  for at most one session timeout after the next client comes;
* calls into one member run one at a time (``Member.lock``, taken in the
  worker thread that runs them): ``ShareConsumer`` is not thread-safe, and two
  requests of one client may arrive at once;
* ``poll_waiting`` waits without a thread (the topics' append hook,
  long_poll.py), re-polls in slices of ``POLL_SLICE_S`` (records released by
  other members and locks that end wake no hook), and gives up at its
  deadline or once the server stops.
"""

from __future__ import annotations

import threading
import time

from ..errors import InvalidRecordState, VQSError
from .long_poll import wait_topics

MAX_MEMBERS = 1000
#: a waiting receive polls again at least this often (releases and ended locks wake no hook)
POLL_SLICE_S = 0.25


class Member:
    __slots__ = ("consumer", "used", "lock")

    def __init__(self, consumer):
        self.consumer = consumer
        self.used = time.monotonic()
        self.lock = threading.Lock()

    def call(self, fn, *args):
        """``fn(*args)`` with this member's lock held (in a worker thread)."""
        with self.lock:
            return fn(*args)


class ShareMembers:
    """The server's remote share-group members (module doc)."""

    def __init__(self, max_members: int = MAX_MEMBERS):
        self.max_members = max_members
        self._lock = threading.Lock()
        self._members: dict[tuple[str, str], Member] = {}

    def __len__(self) -> int:
        return len(self._members)

    def join(self, broker, topics: list[str], group: str) -> Member | None:
        """A new member of ``group`` reading ``topics``, joined (blocking: run it in a worker
        thread); None when ``max_members`` are live."""
        self._close_lapsed(broker)
        with self._lock:
            if len(self._members) >= self.max_members:
                return None
        c = broker.share_consumer(topics, group)
        try:
            c.join()
        except BaseException:
            c.close()
            raise
        m = Member(c)
        with self._lock:
            self._members[(group, c.member_id)] = m
        return m

    def get(self, group: str, member: str) -> Member | None:
        """The live member, its last use now; None when this server has no such member."""
        m = self._members.get((group, member))
        if m is not None:
            m.used = time.monotonic()
        return m

    def leave(self, group: str, member: str) -> Member | None:
        """Forget the member and return it (the caller closes it, in a worker thread)."""
        with self._lock:
            return self._members.pop((group, member), None)

    def _close_lapsed(self, broker) -> None:
        now = time.monotonic()
        with self._lock:
            gone = []
            for key, m in list(self._members.items()):
                if now - m.used > broker.share_groups.settings_for(key[0]).session_timeout_ms / 1000:
                    gone.append(self._members.pop(key))
        for m in gone:
            try:
                m.call(m.consumer.close)
            except VQSError:  # its topic deleted, the broker closing: nothing left to release
                pass


async def poll_waiting(run, broker, member: Member, max_records: int, wait_s: float, stopping) -> list:
    """``member``'s records (up to ``max_records``), waiting up to ``wait_s`` for one (module
    doc); ``run`` runs a blocking call in a worker thread, ``stopping()`` says the server stops."""
    c = member.consumer
    deadline = time.monotonic() + wait_s
    while True:
        recs = await run(member.call, c.poll, max_records, 0.0)
        left = deadline - time.monotonic()
        if recs or left <= 0 or stopping():
            return recs
        topics, ends = [], {}
        for t, p in c.assignment():
            try:
                topic = broker.topic(t)
                ends[(t, p)] = (topic, topic.log(p).end_offset)
            except VQSError:
                continue
            if topic not in topics:
                topics.append(topic)
        await wait_topics(topics, _appended(ends), min(left, POLL_SLICE_S), stopping)


def _appended(ends: dict):
    """A check: has a record been appended past ``ends`` ({key: (topic, end offset)})?"""

    def check() -> bool:  # a record past what the poll saw: poll again at once
        try:
            return any(topic.log(p).end_offset > end for (_t, p), (topic, end) in ends.items())
        except VQSError:
            return True  # deleted meanwhile: the next poll says what is left

    return check


def acknowledge_each(consumer, acks) -> list[str | None]:
    """Acknowledge ``[(topic, partition, offset), type]`` pairs one by one: per ack None
    (done, durable) or why not (``InvalidRecordState``: the member does not hold it); any
    other error ends the call, the acks before it done."""
    out: list[str | None] = []
    for record, kind in acks:
        try:
            consumer.acknowledge(record, kind)
            out.append(None)
        except InvalidRecordState as e:
            out.append(str(e))
    return out
