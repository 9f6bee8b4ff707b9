"""Kafka ACLs: the authorizer's rules against Kafka's (StandardAuthorizer: DENY wins, implied
DESCRIBE, prefixes and wildcards, allow.everyone.if.no.acl.found), the filters of
Describe/DeleteAcls, the store's bounds and file; then confluent-kafka's AdminClient creating,
describing and deleting ACLs, and SCRAM users' producers, consumers and admin calls allowed
and refused by them, across a restart."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kafka_clients import admin_results, delivery_codes
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.errors import CorruptRecordError
from vqs.server.kafka import acls as A
from vqs.server.kafka.codec import Writer

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

ALICE, BOB = "User:alice", "User:bob"


def _acl(rtype, name, principal, op, perm=A.ALLOW, pattern=A.LITERAL, host="*"):
    return A.Acl(rtype, name, pattern, principal, host, op, perm)


# ---------------------------------------------------------------------- the rules, in process

def test_no_acl_leaves_everything_open_and_one_closes_its_resource_only(tmp_path):
    acls = A.Acls(str(tmp_path))
    assert not acls.any and acls.authorize(BOB, "10.0.0.1", A.WRITE, A.TOPIC, "t")
    assert acls.create([_acl(A.TOPIC, "t", ALICE, A.READ)]) == [(0, None)]
    assert acls.authorize(ALICE, "h", A.READ, A.TOPIC, "t")
    assert not acls.authorize(ALICE, "h", A.WRITE, A.TOPIC, "t")  # bound, and not this operation
    assert not acls.authorize(BOB, "h", A.READ, A.TOPIC, "t")
    assert acls.authorize(BOB, "h", A.WRITE, A.TOPIC, "u")  # a resource no ACL names
    assert acls.authorize(BOB, "h", A.READ, A.GROUP, "t")  # another resource type
    closed = A.Acls(str(tmp_path), allow_if_no_acl=False)
    assert closed.authorize(ALICE, "h", A.READ, A.TOPIC, "t") and not closed.authorize(ALICE, "h", A.READ, A.TOPIC, "u")
    supers = A.Acls(str(tmp_path), super_users=[BOB], allow_if_no_acl=False)
    assert supers.authorize(BOB, "h", A.DELETE, A.TOPIC, "t") and supers.authorize(BOB, "h", A.ALTER, A.CLUSTER, "x")


def test_deny_wins_and_describe_is_implied_by_use(tmp_path):
    acls = A.Acls(str(tmp_path))
    acls.create([_acl(A.TOPIC, "*", "User:*", A.ALL),
                 _acl(A.TOPIC, "secret-", ALICE, A.READ, A.DENY, A.PREFIXED),
                 _acl(A.TOPIC, "logs", BOB, A.WRITE),
                 _acl(A.TOPIC, "cfg", BOB, A.ALTER_CONFIGS)])
    assert acls.authorize(ALICE, "h", A.WRITE, A.TOPIC, "anything")  # the wildcard, for anyone
    assert not acls.authorize(ALICE, "h", A.READ, A.TOPIC, "secret-x")  # DENY beats ALLOW ALL
    assert acls.authorize(ALICE, "h", A.DESCRIBE, A.TOPIC, "secret-x")  # only READ is denied
    assert acls.authorize(BOB, "h", A.READ, A.TOPIC, "secret-x")
    (tmp_path / "b").mkdir()
    bob_only = A.Acls(str(tmp_path / "b"))
    bob_only.create([_acl(A.TOPIC, "logs", BOB, A.WRITE), _acl(A.TOPIC, "cfg", BOB, A.ALTER_CONFIGS)])
    assert bob_only.authorize(BOB, "h", A.DESCRIBE, A.TOPIC, "logs")  # WRITE implies DESCRIBE
    assert not bob_only.authorize(BOB, "h", A.READ, A.TOPIC, "logs")
    assert bob_only.authorize(BOB, "h", A.DESCRIBE_CONFIGS, A.TOPIC, "cfg")  # ALTER_CONFIGS implies it
    assert not bob_only.authorize(BOB, "h", A.DESCRIBE, A.TOPIC, "cfg")


def test_prefixes_hosts_and_the_cluster(tmp_path):
    acls = A.Acls(str(tmp_path))
    acls.create([_acl(A.TOPIC, "a", ALICE, A.READ, pattern=A.PREFIXED),
                 _acl(A.TOPIC, "abc-", ALICE, A.READ, A.DENY, A.PREFIXED, host="10.0.0.9"),
                 _acl(A.CLUSTER, A.CLUSTER_NAME, ALICE, A.ALTER)])
    assert acls.authorize(ALICE, "10.0.0.1", A.READ, A.TOPIC, "a")
    assert acls.authorize(ALICE, "10.0.0.1", A.READ, A.TOPIC, "abc-1")
    assert not acls.authorize(ALICE, "10.0.0.9", A.READ, A.TOPIC, "abc-1")  # denied from that host only
    assert acls.authorize(BOB, "10.0.0.1", A.READ, A.TOPIC, "b")  # no ACL covers "b"
    assert not acls.authorize(BOB, "10.0.0.1", A.READ, A.TOPIC, "ab")
    assert acls.authorize(ALICE, "h", A.ALTER, A.CLUSTER, A.CLUSTER_NAME)
    assert not acls.authorize(BOB, "h", A.ALTER, A.CLUSTER, A.CLUSTER_NAME)
    assert acls.authorize_any(ALICE, "h", A.READ, A.TOPIC) and not acls.authorize_any(BOB, "h", A.READ, A.TOPIC)


def test_filters_match_as_kafkas(tmp_path):
    acls = A.Acls(str(tmp_path))
    lit = _acl(A.TOPIC, "orders", ALICE, A.READ)
    pre = _acl(A.TOPIC, "ord", BOB, A.WRITE, pattern=A.PREFIXED)
    star = _acl(A.TOPIC, "*", ALICE, A.DESCRIBE)
    grp = _acl(A.GROUP, "orders", ALICE, A.READ)
    acls.create([lit, pre, star, grp])
    f = A.AclFilter
    assert acls.describe(f(A.R_ANY, None, A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY)) == [lit, pre, star, grp]
    assert acls.describe(f(A.TOPIC, "orders", A.MATCH, None, None, A.OP_ANY, A.PERM_ANY)) == [lit, pre, star]
    assert acls.describe(f(A.TOPIC, "orders", A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY)) == [lit]
    assert acls.describe(f(A.TOPIC, "ord", A.PREFIXED, None, None, A.OP_ANY, A.PERM_ANY)) == [pre]
    assert acls.describe(f(A.R_ANY, None, A.P_ANY, ALICE, "*", A.READ, A.ALLOW)) == [lit, grp]
    assert f(0, None, A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY).invalid()  # UNKNOWN resource type
    [(code, msg, gone)] = acls.delete([f(A.TOPIC, None, A.P_ANY, ALICE, None, A.OP_ANY, A.PERM_ANY)])
    assert code == 0 and gone == [lit, star]
    assert acls.describe(f(A.R_ANY, None, A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY)) == [pre, grp]
    assert A.Acls(str(tmp_path)).describe(f(A.R_ANY, None, A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY)) == [pre, grp]


def test_creations_are_validated_as_kafka_and_bounded(tmp_path, monkeypatch):
    acls = A.Acls(str(tmp_path))
    bad = [_acl(A.R_ANY, "t", ALICE, A.READ), _acl(A.TOPIC, "t", ALICE, A.READ, pattern=A.MATCH),
           _acl(A.TOPIC, "t", ALICE, A.OP_ANY), _acl(A.TOPIC, "t", ALICE, A.READ, A.PERM_ANY),
           _acl(A.TOPIC, "", ALICE, A.READ), _acl(A.TOPIC, "t", "alice", A.READ),
           _acl(A.TOPIC, "t" * 2000, ALICE, A.READ)]
    results = acls.create(bad + [_acl(A.TOPIC, "t", ALICE, A.READ), _acl(A.TOPIC, "t", ALICE, A.READ)])
    assert [c for c, _ in results] == [42] * 7 + [0, 0]  # INVALID_REQUEST; a duplicate is one binding
    assert "no colon" in results[5][1]
    assert len(acls.describe(A.AclFilter(A.R_ANY, None, A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY))) == 1
    monkeypatch.setattr(A, "MAX_ACLS", 3)
    results = acls.create([_acl(A.GROUP, f"g{i}", ALICE, A.READ) for i in range(4)])
    assert [c for c, _ in results] == [0, 0, 44, 44]  # POLICY_VIOLATION past the bound
    (tmp_path / "kafka_acls.json").write_text(json.dumps({"acls": [{"resource_type": 2}]}))
    with pytest.raises(CorruptRecordError, match=r"kafka_acls\.json"):
        A.Acls(str(tmp_path))


# ---------------------------------------------------------------------- real clients

def _conf(server, user: str, password: str, mechanism="SCRAM-SHA-256", **more) -> dict:
    return {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, **more}


def _produce(conf: dict, topic: str, n: int) -> list:
    """The delivery error codes of ``n`` messages (None: delivered)."""
    return delivery_codes(conf, topic, [b"v%d" % i for i in range(n)])


def _consume(conf: dict, topic: str, group: str, n: int):
    """The first ``n`` values, or the first error's code."""
    c = ck.Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error():
                return m.error().code()
            got.append(m.value())
    finally:
        c.close()
    return got


def test_acls_through_confluent_kafka_decide_what_scram_users_may_do(tmp_path):
    server = KafkaServer(tmp_path / "data", "--token", "s3cret").start()
    try:
        admin = AdminClient(_conf(server, "admin", "s3cret", "PLAIN"))  # a token holder: the operator
        ups = [UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                            (u + "-pw").encode()) for u in ("alice", "bob")]
        assert all(v is None for v in admin_results(admin.alter_user_scram_credentials(ups)).values())
        admin_results(admin.create_topics([NewTopic("acl-t", 1), NewTopic("free-t", 1)]))
        alice, bob = _conf(server, "alice", "alice-pw"), _conf(server, "bob", "bob-pw")
        bindings = [
            AclBinding(ResourceType.TOPIC, "acl-", ResourcePatternType.PREFIXED, ALICE, "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "acl-g", ResourcePatternType.LITERAL, ALICE, "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "acl-t", ResourcePatternType.LITERAL, BOB, "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "acl-t", ResourcePatternType.LITERAL, BOB, "*",
                       AclOperation.READ, AclPermissionType.DENY),
            AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:carol", "*",
                       AclOperation.ALTER, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "bob-g", ResourcePatternType.LITERAL, BOB, "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
        ]
        assert admin_results(admin.create_acls(bindings)) == dict.fromkeys(bindings)
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        assert set(admin.describe_acls(everything).result(10)) == set(bindings)
        match = AclBindingFilter(ResourceType.TOPIC, "acl-t", ResourcePatternType.MATCH, None, None,
                                 AclOperation.ANY, AclPermissionType.ANY)
        assert set(admin.describe_acls(match).result(10)) == {bindings[0], bindings[2], bindings[3]}

        assert _produce(bob, "acl-t", 3) == [None] * 3
        assert _produce(alice, "acl-t", 1) == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert _produce(bob, "free-t", 1) == [None]  # no ACL names it: open
        assert _consume(alice, "acl-t", "acl-g", 3) == [b"v0", b"v1", b"v2"]
        assert _consume(alice, "acl-t", "bob-g", 1) == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
        assert _consume(alice, "acl-t", "unnamed-g", 1) == [b"v0"]  # a group no ACL names: open
        assert _consume(bob, "acl-t", "bob-g", 1) == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        listed = set(AdminClient(bob).list_topics(timeout=10).topics)
        assert "acl-t" in listed and "free-t" in listed  # bob may WRITE acl-t: DESCRIBE is implied
        alice_admin = AdminClient(alice)
        refused = admin_results(alice_admin.create_acls([AclBinding(
            ResourceType.TOPIC, "free-t", ResourcePatternType.LITERAL, ALICE, "*", AclOperation.ALL,
            AclPermissionType.ALLOW)]))
        assert list(refused.values()) == [ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED]  # the cluster is bound
        # (DescribeAcls answers CLUSTER_AUTHORIZATION_FAILED, test_the_cluster_guards_the_acl_apis;
        # librdkafka keeps only its message and hands back no binding)
        assert alice_admin.describe_acls(everything).result(10) == []

        assert server.stop() == 0, server.log()
        server.start()  # the ACLs are on disk
        admin = AdminClient(_conf(server, "admin", "s3cret", "PLAIN"))
        assert _consume(bob, "acl-t", "bob-g", 1) == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        deny = AclBindingFilter(ResourceType.TOPIC, "acl-t", ResourcePatternType.LITERAL, BOB, None,
                                AclOperation.ANY, AclPermissionType.DENY)
        assert list(admin_results(admin.delete_acls([deny])).values()) == [[bindings[3]]]
        assert _consume(bob, "acl-t", "bob-g", 3) == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED  # no READ yet
        assert admin_results(admin.create_acls([AclBinding(
            ResourceType.TOPIC, "acl-t", ResourcePatternType.LITERAL, BOB, "*", AclOperation.READ,
            AclPermissionType.ALLOW)])) == dict.fromkeys([AclBinding(
                ResourceType.TOPIC, "acl-t", ResourcePatternType.LITERAL, BOB, "*", AclOperation.READ,
                AclPermissionType.ALLOW)])
        assert _consume(bob, "acl-t", "bob-g", 3) == [b"v0", b"v1", b"v2"]
    finally:
        assert server.stop() == 0, server.log()


def test_a_pattern_assigns_each_member_only_the_topics_it_may_describe(tmp_path):
    """KIP-848 regex subscriptions (KAFKA-18813): alice and bob subscribe one group to one pattern
    matching two topics; an ACL binds one of them to bob, so alice's matches leave it out and it
    goes to bob whatever the assignor would do; alice may not describe the group (it is assigned
    a topic she may not see), bob may."""
    server = KafkaServer(tmp_path / "data", "--token", "s3cret").start()
    consumers = []
    try:
        op = _conf(server, "admin", "s3cret", "PLAIN")
        admin = AdminClient(op)
        ups = [UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                            (u + "-pw").encode()) for u in ("alice", "bob")]
        admin_results(admin.alter_user_scram_credentials(ups))
        admin_results(admin.create_topics([NewTopic("rx-open", 2), NewTopic("rx-hidden", 2)]))
        admin_results(admin.create_acls([AclBinding(
            ResourceType.TOPIC, "rx-hidden", ResourcePatternType.LITERAL, BOB, "*", AclOperation.READ,
            AclPermissionType.ALLOW)]))
        for user in ("alice", "bob"):
            c = ck.Consumer({**_conf(server, user, user + "-pw"), "group.id": "rx-g", "group.protocol": "consumer",
                             "topic.metadata.refresh.interval.ms": 500})
            c.subscribe(["^rx-.*"])
            consumers.append(c)

        def assigned():
            for c in consumers:
                c.poll(0.1)
            return [sorted((tp.topic, tp.partition) for tp in c.assignment()) for c in consumers]

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            a, b = assigned()
            if len(a) + len(b) == 4:
                break
        assert len(a) + len(b) == 4, (a, b)  # every partition of both topics, once
        assert {t for t, _ in a} == {"rx-open"}, a  # alice: the topic she may see, nothing else
        assert ("rx-hidden", 0) in b and ("rx-hidden", 1) in b, b

        def describe(conf):
            client = AdminClient(conf)  # (kept while its future runs: a client collected drops it)
            return client.describe_consumer_groups(["rx-g"])["rx-g"].result(10)

        assert len(describe(_conf(server, "bob", "bob-pw")).members) == 2
        with pytest.raises(ck.KafkaException) as e:
            describe(_conf(server, "alice", "alice-pw"))
        assert e.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        for c in consumers:
            c.close()
        assert server.stop() == 0, server.log()


def _binding(w: Writer, flex: bool, v: int, rtype: int, name, pattern: int, principal, host, op: int, perm: int):
    s = w.compact_string if flex else w.string
    w.int8(rtype)
    s(name)
    if v >= 1:
        w.int8(pattern)
    s(principal)
    s(host)
    w.int8(op).int8(perm)
    if flex:
        w.tags()


def _array_len(r, flex: bool) -> int:
    return r.compact_array_len(0) if flex else r.int32()


def test_the_acl_apis_raw_every_version(kafka_server):
    """CreateAcls, DescribeAcls and DeleteAcls 0-3 (flexible from 2) as the message definitions
    lay them out; v0 knows no pattern type (LITERAL). The bindings go again at the end (the
    server is the session's)."""
    k = RawKafka(kafka_server.kafka_port)
    base = f"acl-raw-{uuid.uuid4().hex[:8]}"
    for v in range(4):
        flex, name = v >= 2, f"{base}-{v}"
        send = k.flex_request if flex else k.request

        def text(r, f=flex):
            return r.compact_string() if f else r.nullable_string()
        pattern = A.PREFIXED if v == 3 else A.LITERAL
        w = Writer()
        (w.compact_array if flex else w.array)(1)
        _binding(w, flex, v, A.TOPIC, name, pattern, ALICE, "*", A.READ, A.ALLOW)
        if flex:
            w.tags()
        r = send(30, v, bytes(w.b))
        assert r.int32() == 0 and _array_len(r, flex) == 1 and r.int16() == 0 and text(r) is None
        w = Writer()
        _binding(w, flex, v, A.TOPIC, name, A.P_ANY if v else A.LITERAL, None, None, A.OP_ANY, A.PERM_ANY)
        r = send(29, v, bytes(w.b))
        assert r.int32() == 0 and r.int16() == 0 and text(r) is None
        assert _array_len(r, flex) == 1 and r.int8() == A.TOPIC and text(r) == name
        assert v == 0 or r.int8() == pattern
        assert _array_len(r, flex) == 1 and text(r) == ALICE and text(r) == "*"
        assert (r.int8(), r.int8()) == (A.READ, A.ALLOW)
        w = Writer()
        (w.compact_array if flex else w.array)(1)
        _binding(w, flex, v, A.TOPIC, name, A.P_ANY if v else A.LITERAL, ALICE, None, A.OP_ANY, A.PERM_ANY)
        if flex:
            w.tags()
        r = send(31, v, bytes(w.b))
        assert r.int32() == 0 and _array_len(r, flex) == 1 and r.int16() == 0 and text(r) is None
        assert _array_len(r, flex) == 1 and r.int16() == 0 and text(r) is None
        assert r.int8() == A.TOPIC and text(r) == name
        assert v == 0 or r.int8() == pattern
    w = Writer()
    _binding(w, False, 1, A.R_ANY, None, A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY)
    r = k.request(29, 1, bytes(w.b))
    assert r.int32() == 0 and r.int16() == 0 and r.nullable_string() is None
    left = []
    for _ in range(r.int32()):
        _, name, _ = r.int8(), r.string(), r.int8()
        for _ in range(r.int32()):
            r.string(), r.string(), r.int8(), r.int8()
        left.append(name)
    assert not [n for n in left if n.startswith(base)]


def test_the_cluster_guards_the_acl_apis(tmp_path):
    """Once an ACL names the cluster, only whom it allows may describe (DESCRIBE) or change
    (ALTER) ACLs: here the anonymous principal of a server without logins."""
    server = KafkaServer(tmp_path / "data").start()
    try:
        k = RawKafka(server.kafka_port)
        w = Writer().array(1)
        _binding(w, False, 1, A.CLUSTER, A.CLUSTER_NAME, A.LITERAL, "User:carol", "*", A.ALTER, A.ALLOW)
        r = k.request(30, 1, bytes(w.b))
        assert r.int32() == 0 and r.int32() == 1 and r.int16() == 0
        w = Writer()
        _binding(w, False, 1, A.R_ANY, None, A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY)
        r = k.request(29, 1, bytes(w.b))
        assert r.int32() == 0 and r.int16() == 31 and "DESCRIBE" in r.nullable_string() and r.int32() == 0
        w = Writer().array(1)
        _binding(w, False, 1, A.R_ANY, None, A.P_ANY, None, None, A.OP_ANY, A.PERM_ANY)
        r = k.request(31, 1, bytes(w.b))
        assert r.int32() == 0 and r.int32() == 1 and r.int16() == 31
    finally:
        assert server.stop() == 0, server.log()


def test_a_request_holds_at_most_the_bounds(tmp_path):
    """CreateAcls keeps at most MAX_ACLS creations of a request (the rest POLICY_VIOLATION,
    never held), DeleteAcls acts on at most MAX_FILTERS filters (the rest INVALID_REQUEST)."""
    server = KafkaServer(tmp_path / "data").start()
    try:
        k = RawKafka(server.kafka_port)
        n = A.MAX_ACLS + 5
        w = Writer().array(n)
        for i in range(n):
            _binding(w, False, 1, A.GROUP, f"g{i}", A.LITERAL, ALICE, "*", A.READ, A.ALLOW)
        r = k.request(30, 1, bytes(w.b))
        assert r.int32() == 0 and r.int32() == n
        codes = []
        for _ in range(n):
            codes.append(r.int16())
            r.nullable_string()
        assert codes == [0] * A.MAX_ACLS + [44] * 5
        n = A.MAX_FILTERS + 3
        w = Writer().array(n)
        for i in range(n):
            _binding(w, False, 1, A.GROUP, f"g{i}", A.LITERAL, None, None, A.OP_ANY, A.PERM_ANY)
        r = k.request(31, 1, bytes(w.b))
        assert r.int32() == 0 and r.int32() == n
        codes = []
        for _ in range(n):
            codes.append(r.int16())
            r.nullable_string()
            for _ in range(r.int32()):
                r.int16(), r.nullable_string(), r.int8(), r.string(), r.int8(), r.string(), r.string()
                r.int8(), r.int8()
        assert codes == [0] * A.MAX_FILTERS + [42] * 3
    finally:
        assert server.stop() == 0, server.log()


def test_super_users_and_a_closed_default_from_the_settings(tmp_path):
    """With Kafka users (PLAIN), a super user (--kafka-super-user) is not restricted by a DENY
    for everyone; with kafka_allow_if_no_acl false, a resource no binding names is closed."""
    from vqs.errors import ConfigError
    from vqs.server.settings import Settings

    with pytest.raises(ConfigError, match="kafka_super_users"):
        Settings(kafka_super_users=["alice"]).check()
    server = KafkaServer(tmp_path / "data", "--kafka-user", "alice:a-pw", "--kafka-user", "bob:b-pw",
                         "--kafka-super-user", "User:bob", env={"VQS_KAFKA_ALLOW_IF_NO_ACL": "false"}).start()
    try:
        alice, bob = _conf(server, "alice", "a-pw", "PLAIN"), _conf(server, "bob", "b-pw", "PLAIN")
        admin = AdminClient(bob)
        admin_results(admin.create_topics([NewTopic("closed-t", 1), NewTopic("denied-t", 1)]))
        deny = AclBinding(ResourceType.TOPIC, "denied-t", ResourcePatternType.LITERAL, "User:*", "*",
                          AclOperation.ALL, AclPermissionType.DENY)
        allow = AclBinding(ResourceType.TOPIC, "denied-t", ResourcePatternType.LITERAL, ALICE, "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)
        assert admin_results(admin.create_acls([deny, allow])) == dict.fromkeys([deny, allow])
        assert _produce(bob, "denied-t", 1) == [None]  # a super user
        assert _produce(alice, "denied-t", 1) == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]  # DENY wins
        assert _produce(alice, "closed-t", 1) == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]  # no binding
        assert _produce(bob, "closed-t", 1) == [None]
    finally:
        assert server.stop() == 0, server.log()
