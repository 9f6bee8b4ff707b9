"""ShareFetch and ShareAcknowledge version 2 (Kafka 4.2) in raw requests: RENEW (KIP-1222)
extends the locks a member holds, and the record-limit acquire mode (KIP-1206) acquires no more
than MaxRecords. librdkafka sends version 1 only, so these are raw; the Java client sends 2."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

LOCK_MS = 3000
ACCEPT, RENEW = 1, 4
INVALID_REQUEST, INVALID_RECORD_STATE = 42, 121


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = KafkaServer(tmp_path_factory.mktemp("vqs-share-v2") / "data", env={
        "VQS_KAFKA_SHARE_RECORD_LOCK_MS": str(LOCK_MS), "VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest"}).start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()


def _topic(server, n: int) -> str:
    """A one-partition topic of ``n`` records in one stored batch."""
    name = f"renew-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(10)
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 50})
    for i in range(n):
        p.produce(name, value=b"v%d" % i)
    assert p.flush(10) == 0
    return name


class Member:
    """One share-group member on its own connection, with its share session's epoch."""

    def __init__(self, server, group: str, topic: str):
        self.k = RawKafka(server.kafka_port)
        self.group, self.member, self.epoch = group, str(uuid.uuid4()), 0
        w = (Writer().compact_string(group).compact_string(self.member).int32(0).compact_string(None)
             .compact_array(1).compact_string(topic).tags())
        r = self.k.flex_request(76, 1, bytes(w.b))
        r.int32()
        assert r.int16() == 0, r.compact_string()
        r.compact_string()
        assert r.compact_string() == self.member
        r.int32()
        r.int32()
        assert r.int8() == 1  # an assignment: the topic's one partition
        assert r.compact_array_len() == 1
        self.tid = r.uuid()
        assert [r.int32() for _ in range(r.compact_array_len())] == [0]

    def _acks(self, w: Writer, acks) -> Writer:
        w.compact_array(len(acks))
        for first, last, kind in acks:
            w.int64(first).int64(last).compact_array(1).int8(kind).tags()
        return w

    def fetch(self, v: int = 2, wait_ms: int = 0, max_records: int = 500, mode: int = 0, renew: bool = False,
              acks=(), fetch_fields: bool = True) -> tuple[int, int, list]:
        """ShareFetch: (top error, ack error, [(first, last, delivery count)])."""
        size, n = (1 << 20, max_records) if fetch_fields else (0, 0)
        w = (Writer().compact_string(self.group).compact_string(self.member).int32(self.epoch)
             .int32(wait_ms).int32(1 if fetch_fields else 0).int32(size).int32(n).int32(max_records))
        if v >= 2:
            w.int8(mode).boolean(renew)
        w.compact_array(1).b += self.tid
        self._acks(w.compact_array(1).int32(0), acks).tags().tags()
        r = self.k.flex_request(78, v, bytes(w.compact_array(0).tags().b))
        r.int32()
        err = r.int16()
        r.compact_string()
        r.int32()
        if err:
            return err, 0, []
        self.epoch += 1
        ack_err, ranges = 0, []
        for _ in range(r.compact_array_len()):
            r.uuid()
            for _ in range(r.compact_array_len()):
                r.int32()
                assert r.int16() == 0
                r.compact_string()
                ack_err = r.int16()
                r.compact_string()
                r.int32()
                r.int32()
                r.tagged_fields()
                r.compact_bytes()
                for _ in range(r.compact_array_len()):
                    ranges.append((r.int64(), r.int64(), r.int16()))
                    r.tagged_fields()
                r.tagged_fields()
            r.tagged_fields()
        return err, ack_err, ranges

    def acknowledge(self, acks, v: int = 2, renew: bool = False) -> int:
        """ShareAcknowledge: the partition's error code."""
        w = Writer().compact_string(self.group).compact_string(self.member).int32(self.epoch)
        if v >= 2:
            w.boolean(renew)
        w.compact_array(1).b += self.tid
        self._acks(w.compact_array(1).int32(0), acks).tags().tags()
        r = self.k.flex_request(79, v, bytes(w.tags().b))
        r.int32()
        assert r.int16() == 0
        r.compact_string()
        if v >= 2:
            assert r.int32() == LOCK_MS
        self.epoch += 1
        assert r.compact_array_len() == 1
        r.uuid()
        assert r.compact_array_len() == 1
        r.int32()
        return r.int16()


def test_renew_keeps_the_records_with_their_member_past_the_first_lock(server):
    topic, group = _topic(server, 5), f"g-{uuid.uuid4().hex[:6]}"
    a, b = Member(server, group, topic), Member(server, group, topic)
    err, _, got = a.fetch(wait_ms=5000)
    acquired = time.monotonic()
    assert err == 0 and got == [(0, 4, 1)]
    assert b.fetch()[2] == []  # b opens its session: nothing free

    time.sleep(1.0)  # a renews a second into its lock
    renewed = time.monotonic()
    assert a.acknowledge([(0, 4, RENEW)], renew=True) == 0
    # b waits past the end of the first lock, and not up to the end of the renewed one
    wait_ms = int((renewed + LOCK_MS / 1000 - 0.5 - time.monotonic()) * 1000)
    assert acquired + LOCK_MS / 1000 < time.monotonic() + wait_ms / 1000
    assert b.fetch(wait_ms=wait_ms)[2] == []

    # a renewing ShareFetch (fetch fields 0) only acknowledges, and answers at once
    t = time.monotonic()
    assert a.fetch(renew=True, acks=[(0, 4, RENEW)], fetch_fields=False)[:2] == (0, 0)
    assert time.monotonic() - t < 1.0
    # the renewed lock ends unused: b gets the records, a's later ACCEPT is refused
    err, _, got = b.fetch(wait_ms=2 * LOCK_MS)
    assert err == 0 and got == [(0, 4, 2)]
    assert a.acknowledge([(0, 4, ACCEPT)]) == INVALID_RECORD_STATE
    assert b.acknowledge([(0, 4, ACCEPT)]) == 0


def test_renew_only_where_the_request_says_so_and_a_renewing_fetch_fetches_nothing(server):
    topic, group = _topic(server, 3), f"g-{uuid.uuid4().hex[:6]}"
    a = Member(server, group, topic)
    assert a.fetch(wait_ms=5000)[2] == [(0, 2, 1)]
    assert a.acknowledge([(0, 2, RENEW)], v=1) == INVALID_REQUEST  # version 1 has no RENEW
    assert a.acknowledge([(0, 2, RENEW)], renew=False) == INVALID_REQUEST  # not announced
    assert a.fetch(acks=[(0, 2, RENEW)], fetch_fields=False)[:2] == (0, INVALID_REQUEST)
    assert a.fetch(renew=True, acks=[(0, 2, RENEW)], wait_ms=100)[0] == INVALID_REQUEST
    assert a.fetch(mode=7)[0] == INVALID_REQUEST
    assert a.acknowledge([(0, 2, ACCEPT)], renew=True) == 0  # the records were held all along


def test_the_record_limit_mode_acquires_no_more_than_max_records(server):
    topic, group = _topic(server, 10), f"g-{uuid.uuid4().hex[:6]}"
    a, b = Member(server, group, topic), Member(server, group, topic)
    assert a.fetch(wait_ms=5000, max_records=3, mode=1)[2] == [(0, 2, 1)]
    assert b.fetch(wait_ms=5000, max_records=3, mode=0)[2] == [(3, 9, 1)]  # batch-optimized: the batch's rest
