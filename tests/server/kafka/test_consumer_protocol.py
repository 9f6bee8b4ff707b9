"""Kafka's consumer group protocol (KIP-848) with confluent-kafka ``group.protocol=consumer``
(member processes, as a real deployment runs them) and raw requests against a real server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.server.kafka.codec import Reader, Writer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

HERE = os.path.dirname(__file__)
SESSION_MS = 3000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # the default heartbeat interval: the SIGKILL test holds it to the session timeout + 2 s
    s = KafkaServer(tmp_path_factory.mktemp("vqs-kip848") / "data", "--flush", "always", env={
        "VQS_KAFKA_CONSUMER_SESSION_TIMEOUT_MS": str(SESSION_MS),
        "VQS_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS": "1000"}).start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()


class Member:
    """consumer_member.py as a process: its partitions (incremental adds and revokes) and values."""

    def __init__(self, bootstrap, topic, group, *instance_id, gated: bool = False):
        self.ready = threading.Event()  # gated: made, waiting for go() to subscribe
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "consumer_member.py"), bootstrap, topic,
                                      group, *instance_id], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.PIPE if gated else subprocess.DEVNULL, text=True,
                                     env=dict(os.environ, MEMBER_GATED="1" if gated else "0"))
        self.assigned: set[int] = set()
        self.changes = 0  # assignment lines seen
        self.values: list[str] = []
        self.lock = threading.Lock()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            parts = {int(p) for p in rest.split(",") if p} if kind in ("assigned", "revoked") else set()
            if kind == "ready":
                self.ready.set()
                continue
            with self.lock:
                self.changes += kind in ("assigned", "revoked")
                if kind == "assigned":
                    self.assigned |= parts
                elif kind == "revoked":
                    self.assigned -= parts
                elif kind == "msg":
                    self.values.append(rest.split(" ", 2)[2])

    def go(self) -> None:
        """A gated member subscribes now."""
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def parts(self) -> set[int]:
        with self.lock:
            return set(self.assigned)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _wait(cond, timeout: float, what: str) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _topic(server, partitions: int) -> str:
    name = f"kip848-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(10)
    return name


def _produce(server, topic: str, values) -> None:
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), key=str(i).encode())
    assert p.flush(10) == 0


def _split(members, n: int):
    def check():
        a = [m.parts() for m in members]
        return (all(a) and sum(len(x) for x in a) == n and set().union(*a) == set(range(n))
                and max(map(len, a)) - min(map(len, a)) <= 1)
    return check


def test_members_split_partitions_and_a_third_joins_without_duplicates(server):
    topic, group = _topic(server, 6), f"g-{uuid.uuid4().hex[:8]}"
    _produce(server, topic, [f"a{i}" for i in range(200)])
    members = [Member(server.bootstrap, topic, group) for _ in range(2)]
    try:
        _wait(_split(members, 6), 30, "two members with three partitions each")
        _produce(server, topic, [f"b{i}" for i in range(200)])
        members.append(Member(server.bootstrap, topic, group))
        _wait(_split(members, 6), 30, "three members with two partitions each")
        _produce(server, topic, [f"c{i}" for i in range(200)])
        want = {f"{k}{i}" for k in "abc" for i in range(200)}

        def seen():
            out = []
            for m in members:
                with m.lock:
                    out += m.values
            return out
        _wait(lambda: set(seen()) >= want, 60, "every record consumed")
        got = seen()
        assert len(got) == len(set(got)) == 600, "a record was consumed twice across the rebalances"
    finally:
        for m in members:
            m.stop()


def test_a_sigkilled_members_partitions_move_within_the_session_timeout(server):
    topic, group = _topic(server, 4), f"g-{uuid.uuid4().hex[:8]}"
    members = [Member(server.bootstrap, topic, group) for _ in range(2)]
    try:
        _wait(_split(members, 4), 30, "two members with two partitions each")
        victim, survivor = members
        victim.stop(signal.SIGKILL)
        killed = time.monotonic()
        moved = _wait(lambda: survivor.parts() == set(range(4)), SESSION_MS / 1000 + 10, "the survivor with all")
        assert moved - killed <= SESSION_MS / 1000 + 2, f"reassigned after {moved - killed:.1f} s"
        _produce(server, topic, [f"x{i}" for i in range(40)])
        _wait(lambda: {f"x{i}" for i in range(40)} <= set(survivor.values), 20, "the survivor reads every partition")
    finally:
        for m in members:
            m.stop()


def test_a_static_member_back_takes_its_partitions_and_the_others_keep_theirs(server):
    topic, group = _topic(server, 4), f"g-{uuid.uuid4().hex[:8]}"
    static, other = Member(server.bootstrap, topic, group, "static-1"), Member(server.bootstrap, topic, group)
    members = [static, other]
    try:
        _wait(_split(members, 4), 30, "two members with two partitions each")
        held, others, changes = static.parts(), other.parts(), other.changes
        epoch, size = _describe(server, group)
        # the member coming back is started (interpreter, client) before the other leaves: its
        # slot is kept for one session timeout (SESSION_MS), which a process start on a loaded
        # machine can take
        back = Member(server.bootstrap, topic, group, "static-1", gated=True)
        members.append(back)
        assert back.ready.wait(30)
        static.stop(signal.SIGINT)  # closes: a static member leaves for now (epoch -2)
        assert _describe(server, group) == (epoch, size) == (epoch, 2)  # its slot kept: no new epoch
        back.go()
        _wait(lambda: back.parts() == held, 30, "the static member back with its partitions")
        assert other.parts() == others and other.changes == changes  # no rebalance for the others
    finally:
        for m in members:
            m.stop()


def test_a_pattern_subscription_gets_matching_topics_and_ones_made_later(server):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first = _topic(server, 2)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for name in (f"{prefix}-a", f"{prefix}.b"):
        admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(10)
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                     "group.protocol": "consumer", "topic.metadata.refresh.interval.ms": 500})
    c.subscribe([f"^{prefix}-.*", first])
    try:
        def names():
            return sorted((tp.topic, tp.partition) for tp in c.assignment())
        _wait(lambda: c.poll(0.1) is None and names() == [(first, 0), (first, 1), (f"{prefix}-a", 0)], 30,
              "the named topic and the one matching")
        admin.create_topics([NewTopic(f"{prefix}-c", num_partitions=1, replication_factor=1)])[f"{prefix}-c"].result(10)
        _wait(lambda: c.poll(0.1) is None and (f"{prefix}-c", 0) in names(), 30, "the topic made later")
    finally:
        c.close()


def test_commits_round_trip_and_the_group_is_described(server):
    topic, group = _topic(server, 2), f"g-{uuid.uuid4().hex[:8]}"
    _produce(server, topic, [f"v{i}" for i in range(10)])
    conf = {"bootstrap.servers": server.bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    c = ck.Consumer(conf)
    c.subscribe([topic])
    try:
        _wait(lambda: c.poll(0.1) is not None or len(c.assignment()) == 2, 30, "an assignment")
        c.commit(offsets=[ck.TopicPartition(topic, 0, 3), ck.TopicPartition(topic, 1, 4)], asynchronous=False)
        got = c.committed([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=10)
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 3), (1, 4)]

        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        d = admin.describe_consumer_groups([group])[group].result(10)
        assert d.type == ck.ConsumerGroupType.CONSUMER
        assert len(d.members) == 1
        assert {tp.partition for tp in d.members[0].assignment.topic_partitions} == {0, 1}
        listed = admin.list_consumer_groups().result(10)
        types = {g.group_id: g.type for g in listed.valid}
        assert types[group] == ck.ConsumerGroupType.CONSUMER
        with pytest.raises(ck.KafkaException) as e:  # a group with members is not deleted
            admin.delete_consumer_groups([group])[group].result(10)
        assert e.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
    finally:
        c.close()
    # a new member of the group starts where the commits left off
    c = ck.Consumer(conf)
    c.subscribe([topic])
    try:
        values = set()
        deadline = time.monotonic() + 30
        while len(values) < 3 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                values.add((m.partition(), m.offset()))
        assert values and all(o >= (3 if p == 0 else 4) for p, o in values), values
    finally:
        c.close()


# ---------------------------------------------------------------------- raw requests

def _flex(raw: RawKafka, api_key: int, version: int, body: bytes) -> Reader:
    """A flexible-version request (header v2) and its response after header v1."""
    raw.corr += 1
    head = Writer().int16(api_key).int16(version).int32(raw.corr).string("raw-test").tags()
    raw.send_frame(bytes(head.b) + body)
    resp = raw.recv_frame()
    assert resp is not None, "connection closed"
    r = Reader(resp)
    assert r.int32() == raw.corr
    r.tagged_fields()
    return r


def _heartbeat(raw, group, member, epoch, topics=None, regex=None) -> tuple[int, str | None, int]:
    w = Writer().compact_string(group).compact_string(member).int32(epoch).compact_string(None)
    w.compact_string(None).int32(30_000)
    if topics is None:
        w.uvarint(0)
    else:
        w.compact_array(len(topics))
        for t in topics:
            w.compact_string(t)
    w.compact_string(regex).compact_string(None).uvarint(0).tags()  # regex, assignor, owned
    r = _flex(raw, 68, 1, bytes(w.b))
    r.int32()
    err = r.int16()
    r.compact_string()
    return err, r.compact_string(), r.int32()


def _describe(server, group) -> tuple[int, int]:
    """ConsumerGroupDescribe v0 of ``group``: (group epoch, members)."""
    raw = RawKafka(server.kafka_port)
    try:
        r = _flex(raw, 69, 0, bytes(Writer().compact_array(1).compact_string(group).boolean(False).tags().b))
        r.int32()
        assert r.compact_array_len() == 1
        assert r.int16() == 0, r.compact_string()
        r.compact_string()
        assert r.compact_string() == group
        r.compact_string()  # state
        epoch = r.int32()
        r.int32()
        r.compact_string()
        return epoch, r.compact_array_len()
    finally:
        raw.close()


def _join_classic(raw, group) -> int:
    w = Writer().string(group).int32(10_000).int32(10_000).string("").string(None).string("consumer")
    w.array(1).string("range").bytes_(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
    r = raw.request(11, 5, bytes(w.b))
    r.int32()
    return r.int16()


def test_epochs_fence_and_unknown_members_are_refused(server):
    topic, group = _topic(server, 2), f"g-{uuid.uuid4().hex[:8]}"
    raw = RawKafka(server.kafka_port)
    try:
        err, member, epoch = _heartbeat(raw, group, "", 0, [topic])
        assert err == 0 and member and epoch >= 1
        assert _heartbeat(raw, group, member, epoch + 5)[0] == 110  # FENCED_MEMBER_EPOCH
        assert _heartbeat(raw, group, "no-such-member", 1)[0] == 25  # UNKNOWN_MEMBER_ID
        assert _heartbeat(raw, group, member, epoch) == (0, member, epoch)
        assert _heartbeat(raw, "g-rx", "", 0, None, "(a*)*(?=b)")[0] == 128  # INVALID_REGULAR_EXPRESSION
        assert _heartbeat(raw, group, member, -1) == (0, member, -1)  # leaves
        assert _heartbeat(raw, group, member, epoch)[0] == 25
    finally:
        raw.close()


def test_classic_and_consumer_protocol_groups_are_kept_apart(server):
    topic = _topic(server, 1)
    raw = RawKafka(server.kafka_port)
    try:
        new_group = f"g-{uuid.uuid4().hex[:8]}"
        err, member, _ = _heartbeat(raw, new_group, "", 0, [topic])
        assert err == 0
        assert _join_classic(raw, new_group) == 23  # INCONSISTENT_GROUP_PROTOCOL

        classic_group = f"g-{uuid.uuid4().hex[:8]}"
        c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": classic_group,
                         "session.timeout.ms": 6000})
        c.subscribe([topic])
        try:
            _wait(lambda: c.poll(0.1) is not None or bool(c.assignment()), 30, "the classic member's assignment")
            assert _heartbeat(raw, classic_group, "", 0, [topic])[0] == 69  # GROUP_ID_NOT_FOUND
            admin = AdminClient({"bootstrap.servers": server.bootstrap})
            listed = admin.list_consumer_groups().result(10)
            types = {g.group_id: g.type for g in listed.valid}
            assert types[classic_group] == ck.ConsumerGroupType.CLASSIC
            assert types[new_group] == ck.ConsumerGroupType.CONSUMER
        finally:
            c.close()
        _heartbeat(raw, new_group, member, -1)
        assert _join_classic(raw, new_group) != 23  # an empty group takes either protocol
    finally:
        raw.close()


def _commit_v9(raw, group, member, epoch, topic, offset) -> int:
    w = Writer().compact_string(group).int32(epoch).compact_string(member).compact_string(None)
    w.compact_array(1).compact_string(topic).compact_array(1).int32(0).int64(offset).int32(-1)
    w.compact_string(None).tags().tags().tags()
    r = _flex(raw, 8, 9, bytes(w.b))
    r.int32()
    assert r.compact_array_len() == 1 and r.compact_string() == topic and r.compact_array_len() == 1
    assert r.int32() == 0
    return r.int16()


def _fetch_v9(raw, group, member, epoch, topic) -> tuple[int, int]:
    """(group error, committed offset of partition 0)."""
    w = Writer().compact_array(1).compact_string(group).compact_string(member).int32(epoch)
    w.compact_array(1).compact_string(topic).compact_array(1).int32(0).tags().tags().boolean(False).tags()
    r = _flex(raw, 9, 9, bytes(w.b))
    r.int32()
    assert r.compact_array_len() == 1 and r.compact_string() == group
    assert r.compact_array_len() == 1 and r.compact_string() == topic and r.compact_array_len() == 1
    assert r.int32() == 0
    offset = r.int64()
    r.int32()
    r.compact_string()
    r.int16()
    r.tagged_fields()
    r.tagged_fields()
    return r.int16(), offset


def test_offset_commit_and_fetch_v9_carry_the_member_epoch(server):
    topic, group = _topic(server, 1), f"g-{uuid.uuid4().hex[:8]}"
    raw = RawKafka(server.kafka_port)
    try:
        err, member, epoch = _heartbeat(raw, group, "", 0, [topic])
        assert err == 0
        assert _commit_v9(raw, group, member, epoch, topic, 7) == 0
        assert _commit_v9(raw, group, member, epoch + 1, topic, 8) == 113  # STALE_MEMBER_EPOCH
        assert _commit_v9(raw, group, "nobody", epoch, topic, 8) == 25  # UNKNOWN_MEMBER_ID
        assert _commit_v9(raw, group, "", -1, topic, 8) == 25  # outside the group while it has members
        assert _fetch_v9(raw, group, member, epoch, topic) == (0, 7)
        assert _fetch_v9(raw, group, "nobody", epoch, topic)[0] == 25
        assert _fetch_v9(raw, group, None, -1, topic) == (0, 7)  # an admin's fetch names no member
    finally:
        raw.close()


def test_a_consumer_that_assigns_its_own_partitions_commits_into_an_empty_group(server):
    # group.protocol=consumer without subscribe(): librdkafka commits with its own member id and
    # epoch -1; Kafka takes that into a group with no members (an "outside" commit)
    topic, group = f"self-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "group.protocol": "consumer",
                     "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, 0)])
        got = c.commit(offsets=[ck.TopicPartition(topic, 0, 7)], asynchronous=False)
        assert [(p.topic, p.offset, p.error) for p in got] == [(topic, 7, None)]
        assert c.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset == 7
        with pytest.raises(ck.KafkaException) as e:  # a topic no one made: the topic's error, not the member's
            c.commit(offsets=[ck.TopicPartition(f"{topic}-none", 0, 1)], asynchronous=False)
        assert e.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        c.close()


def test_a_groups_own_session_and_heartbeat_configs(server):
    """Kafka 4's group configs of a consumer-protocol group (IncrementalAlterConfigs on a GROUP
    resource): DescribeConfigs shows them as the group's own, a heartbeat is answered with the
    group's interval (another group keeps the server's), a session not above the interval is
    INVALID_CONFIG, and DELETE gives the server's back."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    topic, group, other = _topic(server, 1), f"g-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})

    def alter(*entries):
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET)
            for k, v in entries])
        return next(iter(admin.incremental_alter_configs([res]).values()))

    def interval(g) -> int:
        raw = RawKafka(server.kafka_port)
        try:
            w = Writer().compact_string(g).compact_string(uuid.uuid4().hex).int32(0).compact_string(None)
            w.compact_string(None).int32(30_000).compact_array(1).compact_string(topic)
            w.compact_string(None).compact_string(None).uvarint(0).tags()
            r = _flex(raw, 68, 1, bytes(w.b))
            r.int32()
            assert r.int16() == 0
            r.compact_string()
            r.compact_string()
            r.int32()
            return r.int32()
        finally:
            raw.close()

    assert alter(("consumer.heartbeat.interval.ms", "700"), ("consumer.session.timeout.ms", "20000")).result(10) is None
    with pytest.raises(ck.KafkaException, match="greater than"):
        alter(("consumer.session.timeout.ms", "1000"), ("consumer.heartbeat.interval.ms", "1500")).result(10)
    entries = next(iter(admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values())).result(10)
    own, default = entries["consumer.heartbeat.interval.ms"], entries["share.session.timeout.ms"]
    assert (own.value, own.source) == ("700", ConfigSource.GROUP_CONFIG.value)
    assert entries["consumer.session.timeout.ms"].value == "20000"
    assert default.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert interval(group) == 700 and interval(other) != 700
    assert alter(("consumer.heartbeat.interval.ms", None)).result(10) is None
    assert interval(group) == interval(other)
    # a bad value is the config's error, not the group id's, and its message stays short
    with pytest.raises(ck.KafkaException) as ei:
        alter(("errors.deadletterqueue.topic.name", "../etc")).result(10)
    assert ei.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    with pytest.raises(ck.KafkaException) as ei:
        alter(("consumer.session.timeout.ms", "2" * 900)).result(10)
    assert ei.value.args[0].code() == ck.KafkaError.INVALID_CONFIG and len(ei.value.args[0].str()) < 300
