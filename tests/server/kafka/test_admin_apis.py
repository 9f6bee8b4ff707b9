"""confluent-kafka's AdminClient against a real ``vqs serve --kafka-port``: CreatePartitions,
DeleteRecords, DeleteGroups, OffsetDelete, commit metadata, DescribeCluster."""

from __future__ import annotations

import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # noqa: E402


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _admin(server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})


def _create(admin, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(10)


def _produce(server, topic: str, n: int, partition: int = 0) -> None:
    p = ck.Producer({"bootstrap.servers": server.bootstrap})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert p.flush(10) == 0


def _partitions(admin, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def _code(fut) -> int:
    with pytest.raises(ck.KafkaException) as e:
        fut.result(10)
    return e.value.args[0].code()


def test_create_partitions_grows_validates_and_refuses_shrinking(kafka_server):
    admin = _admin(kafka_server)
    topic = _name("grow")
    _create(admin, topic, 2)
    _produce(kafka_server, topic, 5, partition=1)
    admin.create_partitions([NewPartitions(topic, 5)], validate_only=True)[topic].result(10)
    assert _partitions(admin, topic) == 2  # validate_only changed nothing
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert _partitions(admin, topic) == 5
    assert _code(admin.create_partitions([NewPartitions(topic, 3)])[topic]) == KafkaError.INVALID_PARTITIONS
    assert _code(admin.create_partitions([NewPartitions(topic, 5)])[topic]) == KafkaError.INVALID_PARTITIONS
    missing = _name("nope")
    assert _code(admin.create_partitions([NewPartitions(missing, 3)])[missing]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART
    # the new partitions take records; the old ones kept theirs
    _produce(kafka_server, topic, 3, partition=4)
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": _name("g")})
    assert c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 5)
    assert c.get_watermark_offsets(TopicPartition(topic, 4), timeout=10) == (0, 3)
    c.close()


def test_delete_records_moves_the_low_watermark(kafka_server):
    admin = _admin(kafka_server)
    topic = _name("delrec")
    _create(admin, topic, 2)
    _produce(kafka_server, topic, 10, partition=0)
    _produce(kafka_server, topic, 4, partition=1)
    res = admin.delete_records([TopicPartition(topic, 0, 6)])
    got = res[TopicPartition(topic, 0, 6)].result(10)
    assert got.low_watermark == 6
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": _name("g"),
                     "auto.offset.reset": "earliest"})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (6, 10)
    c.assign([TopicPartition(topic, 0, 0)])  # below the start: reset to it
    msg = c.poll(10)
    assert msg is not None and not msg.error() and msg.offset() == 6
    c.close()
    # -1: up to the high watermark
    tp_all = TopicPartition(topic, 1, -1)
    assert admin.delete_records([tp_all])[tp_all].result(10).low_watermark == 4
    # past the high watermark
    tp_far = TopicPartition(topic, 0, 11)
    assert _code(admin.delete_records([tp_far])[tp_far]) == KafkaError.OFFSET_OUT_OF_RANGE


def _commit(server, group: str, offsets) -> None:
    """Commit from outside the group (AlterConsumerGroupOffsets)."""
    admin = _admin(server)  # (kept: a collected AdminClient never completes its futures)
    res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)])
    for tp in res[group].result(10).topic_partitions:
        assert not tp.error, tp.error


def _committed(server, group: str, partitions=None) -> dict:
    admin = _admin(server)
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, partitions)])
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in res[group].result(10).topic_partitions}


def _member(server, group: str, topic: str):
    """A consumer of ``group`` subscribed to ``topic``, returned once it has its assignment."""
    assigned = []
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                     "enable.auto.commit": False})
    c.subscribe([topic], on_assign=lambda _c, parts: assigned.append(parts))
    for _ in range(100):
        c.poll(0.2)
        if assigned:
            return c
    raise AssertionError("no assignment")


def test_leader_epochs_round_trip(kafka_server):
    """What librdkafka's ListConsumerGroupOffsets test compares: offsets and leader epochs."""
    admin = _admin(kafka_server)
    topic, group = _name("epoch"), _name("g")
    _create(admin, topic, 2)
    _produce(kafka_server, topic, 30, partition=0)
    _produce(kafka_server, topic, 30, partition=1)
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": group})
    sent = [TopicPartition(topic, p, (p + 1) * 10, leader_epoch=2) for p in range(2)]
    c.commit(offsets=sent, asynchronous=False)
    got = c.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
    assert [(tp.offset, tp.leader_epoch) for tp in got] == [(10, 2), (20, 2)]
    c.close()
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert sorted((tp.partition, tp.offset, tp.leader_epoch) for tp in res.topic_partitions) == [
        (0, 10, 2), (1, 20, 2)]


def test_commit_metadata_kept_and_offsets_listed_exactly(kafka_server):
    admin = _admin(kafka_server)
    topic, group = _name("meta"), _name("g")
    _create(admin, topic, 3)
    _produce(kafka_server, topic, 10, partition=0)
    _produce(kafka_server, topic, 10, partition=2)
    _commit(kafka_server, group, [TopicPartition(topic, 0, 7, metadata="state-0"),
                                  TopicPartition(topic, 2, 3)])
    assert _committed(kafka_server, group) == {(topic, 0): (7, "state-0"), (topic, 2): (3, "")}
    asked = [TopicPartition(topic, p) for p in range(3)]
    assert _committed(kafka_server, group, asked) == {
        (topic, 0): (7, "state-0"), (topic, 1): (-1001, ""), (topic, 2): (3, "")}
    # a consumer's own commit with metadata, then a commit without: metadata replaced
    c = ck.Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 2, 5, metadata="x" * 100)], asynchronous=False)
    assert c.committed([TopicPartition(topic, 2)], timeout=10)[0].metadata == "x" * 100
    c.commit(offsets=[TopicPartition(topic, 2, 6)], asynchronous=False)
    c.close()
    assert _committed(kafka_server, group)[(topic, 2)] == (6, "")
    # too large: refused, the previous commit stays
    res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 8, metadata="m" * 5000)])])
    with pytest.raises(ck.KafkaException):
        for tp in res[group].result(10).topic_partitions:
            if tp.error:
                raise ck.KafkaException(tp.error)
    assert _committed(kafka_server, group)[(topic, 0)] == (7, "state-0")


def test_metadata_survives_a_restart(tmp_path):
    from kafka_server_proc import KafkaServer

    s = KafkaServer(tmp_path / "data").start()
    try:
        admin = _admin(s)
        _create(admin, "t", 1)
        _commit(s, "g", [TopicPartition("t", 0, 0, metadata="after-restart")])
        s.stop()
        s.start()
        assert _committed(s, "g") == {("t", 0): (0, "after-restart")}
    finally:
        s.stop()


def test_delete_groups_refuses_active_ones(kafka_server):
    admin = _admin(kafka_server)
    topic, idle, active, missing = _name("dg"), _name("idle"), _name("active"), _name("missing")
    _create(admin, topic, 1)
    _commit(kafka_server, idle, [TopicPartition(topic, 0, 0)])
    c = _member(kafka_server, active, topic)
    try:
        res = admin.delete_consumer_groups([idle, active, missing])
        res[idle].result(10)
        assert _code(res[active]) == KafkaError.NON_EMPTY_GROUP
        assert _code(res[missing]) == KafkaError.GROUP_ID_NOT_FOUND
        assert _committed(kafka_server, idle) == {}
    finally:
        c.close()
    assert _state(admin, active) == ck.ConsumerGroupState.EMPTY  # its member left; the group stays
    admin.delete_consumer_groups([active])[active].result(10)  # empty now
    # deleted: Dead, as Kafka's DescribeGroups says (not Empty, which it said while the
    # coordinator kept its record), and a second delete finds nothing
    assert _state(admin, active) == _state(admin, idle) == ck.ConsumerGroupState.DEAD
    assert _code(admin.delete_consumer_groups([active])[active]) == KafkaError.GROUP_ID_NOT_FOUND


def test_altering_an_active_groups_offsets_is_unknown_member(kafka_server):
    """An admin's offsets (generation -1, no member id) for a group with members are refused
    with UNKNOWN_MEMBER_ID, as Kafka's classic coordinator answers; taken once it is empty."""
    admin = _admin(kafka_server)
    topic, group = _name("alt"), _name("alt")
    _create(admin, topic, 1)
    c = _member(kafka_server, group, topic)
    try:
        res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3)])])
        [tp] = res[group].result(10).topic_partitions  # (the error is the partition's)
        assert tp.error is not None and tp.error.code() == KafkaError.UNKNOWN_MEMBER_ID
    finally:
        c.close()
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3)])])[
        group].result(10)
    assert _committed(kafka_server, group) == {(topic, 0): (3, "")}


def _state(admin, group: str):
    return admin.describe_consumer_groups([group])[group].result(10).state


def test_offset_delete(kafka_server):
    kadmin = pytest.importorskip("kafka.admin")
    import kafka
    from kafka.errors import GroupIdNotFoundError

    admin = _admin(kafka_server)
    read, other, group = _name("od"), _name("od2"), _name("g")
    _create(admin, read, 1)
    _create(admin, other, 2)
    _commit(kafka_server, group, [TopicPartition(read, 0, 0), TopicPartition(other, 0, 0),
                                  TopicPartition(other, 1, 0)])
    c = _member(kafka_server, group, read)
    k = kadmin.KafkaAdminClient(bootstrap_servers=kafka_server.bootstrap)
    try:
        got = k.delete_group_offsets(group, [kafka.TopicPartition(read, 0), kafka.TopicPartition(other, 1)])
        assert {tp.topic: err.__name__ for tp, err in got.items()} == {
            read: "GroupSubscribedToTopicError", other: "NoError"}
        assert set(_committed(kafka_server, group)) == {(read, 0), (other, 0)}
        with pytest.raises(GroupIdNotFoundError):
            k.delete_group_offsets(_name("nope"), [kafka.TopicPartition(read, 0)])
    finally:
        k.close()
        c.close()


def test_describe_cluster_and_authorized_operations(kafka_server):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    admin = _admin(kafka_server)
    topic, group = _name("ops"), _name("g")
    _create(admin, topic, 2)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    host, port = kafka_server.bootstrap.split(":")
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, host, int(port))]
    assert cluster.controller.id == 0 and cluster.cluster_id
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}
    assert admin.describe_cluster().result(10).authorized_operations is None  # not asked: none
    desc = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(10)
    assert len(desc.partitions) == 2
    assert set(desc.authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
        AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    c = _member(kafka_server, group, topic)
    try:
        g = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(10)
        assert set(g.authorized_operations) == {  # as Kafka 4 (AclEntry.supportedOperations(GROUP))
            AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS}
    finally:
        c.close()


def test_num_partitions_setting_for_auto_created_and_default_topics(tmp_path):
    from kafka_server_proc import KafkaServer

    from vqs.errors import ConfigError
    from vqs.server.settings import load_settings

    for bad in ("0", "257"):
        with pytest.raises(ConfigError, match="kafka_num_partitions"):
            load_settings(env={"VQS_KAFKA_NUM_PARTITIONS": bad}).check()
    s = KafkaServer(tmp_path / "data", env={"VQS_KAFKA_NUM_PARTITIONS": "3"}).start()
    try:
        admin = _admin(s)
        admin.create_topics([NewTopic("dflt")])["dflt"].result(10)  # num_partitions -1: the broker's
        assert _partitions(admin, "dflt") == 3
        p = ck.Producer({"bootstrap.servers": s.bootstrap})
        p.produce("auto", b"x")  # an unknown topic: created by Metadata
        assert p.flush(10) == 0
        assert _partitions(admin, "auto") == 3
    finally:
        s.stop()


def test_authorized_operations_with_sasl_and_the_total_partition_cap(tmp_path):
    from confluent_kafka.admin import AclOperation
    from kafka_server_proc import KafkaServer

    s = KafkaServer(tmp_path / "data", "--token", "s3cret", env={"VQS_MAX_TOTAL_PARTITIONS": "4"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": s.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "me", "sasl.password": "s3cret"})
        cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
        assert AclOperation.ALTER in cluster.authorized_operations and len(cluster.authorized_operations) == 7
        _create(admin, "capped", 2)
        assert _code(admin.create_partitions([NewPartitions("capped", 5)])["capped"]) == \
            KafkaError.INVALID_PARTITIONS  # 3 more: 5 in all, over 4
        admin.create_partitions([NewPartitions("capped", 4)])["capped"].result(10)
        assert _partitions(admin, "capped") == 4
    finally:
        s.stop()


def test_a_group_of_offsets_alone_is_the_same_type_listed_and_described(kafka_server):
    """Committed offsets and no members: ListGroups lists a classic, Empty group, and
    describing it says the same (ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND, as Kafka
    for a classic group, and the client describes it with DescribeGroups)."""
    from confluent_kafka import ConsumerGroupType

    admin = _admin(kafka_server)
    topic, group = _name("ty"), _name("ty")
    _create(admin, topic, 1)
    _commit(kafka_server, group, [TopicPartition(topic, 0, 1)])
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
    d = admin.describe_consumer_groups([group])[group].result(10)
    assert (listed[group].type, d.type) == (ConsumerGroupType.CLASSIC, ConsumerGroupType.CLASSIC)
    assert listed[group].state == d.state
