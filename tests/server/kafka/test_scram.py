"""SASL/SCRAM: the exchange against RFC 7677's example, the credential store's rules (as
Kafka's ScramControlManager), and confluent-kafka's AdminClient, producer and consumer
logging in with SCRAM-SHA-256 and -512 against the server, across a restart."""

from __future__ import annotations

import base64
import hashlib
import uuid

import pytest
from kafka_clients import admin_results, fails_to_log_in
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer
from vqs.server.kafka.scram import ScramCredentials, ScramExchange, ScramFailed

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

SHA256, SHA512 = 1, 2


def _upsert(store, name, password: bytes, salt: bytes, mech=SHA256, iterations=4096):
    digest = "sha256" if mech == SHA256 else "sha512"
    salted = hashlib.pbkdf2_hmac(digest, password, salt, iterations)
    return store.alter([], [(name, mech, iterations, salt, salted)])


# ---------------------------------------------------------------------- the exchange, in process

def test_the_exchange_of_rfc_7677(tmp_path):
    store = ScramCredentials(str(tmp_path))
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    assert _upsert(store, "user", b"pencil", salt) == [("user", 0, None)]
    ex = ScramExchange(store, "SCRAM-SHA-256", nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert ex.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == \
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert ex.final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=") == \
        b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert ex.user == "user"
    # what is kept: no password, no salted password
    text = open(tmp_path / "scram_credentials.json").read()
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    assert "pencil" not in text and base64.b64encode(salted).decode() not in text
    assert ScramCredentials(str(tmp_path)).get("user", SHA256) == store.get("user", SHA256)


def test_an_unknown_user_is_answered_like_a_known_one_and_fails_at_the_proof(tmp_path):
    store = ScramCredentials(str(tmp_path))
    _upsert(store, "alice", b"right", b"salt-of-alice")
    answers = []
    for name in ("alice", "nobody", "nobody"):
        ex = ScramExchange(store, "SCRAM-SHA-256", nonce="server")
        first = ex.first(b"n,,n=%s,r=client" % name.encode())
        assert first.startswith(b"r=clientserver,s=") and first.endswith(b",i=4096")
        answers.append(first)
        with pytest.raises(ScramFailed, match="Invalid user credentials"):
            ex.final(b"c=biws,r=clientserver,p=" + base64.b64encode(bytes(32)))
        assert ex.user is None
    assert answers[1] == answers[2] != answers[0]  # a stable salt for a name with no credential
    ex = ScramExchange(store, "SCRAM-SHA-512", nonce="s")  # alice has no SHA-512 credential
    ex.first(b"n,,n=alice,r=c")
    with pytest.raises(ScramFailed, match="Invalid user credentials"):
        ex.final(b"c=biws,r=cs,p=" + base64.b64encode(bytes(64)))


@pytest.mark.parametrize("first", [
    b"", b"n=alice,r=x", b"p=tls-unique,,n=alice,r=x", b"n,,r=x,n=alice", b"n,,n=alice", b"n,,n=al=ice,r=x",
    b"n,,n=alice,r=", b"n,,n=alice,r=a b", b"n,a=bob,n=alice,r=x", b"n,,n=alice,r=x,tokenauth=true",
    b"n,,n=\xff,r=x", b"n,,n=alice,r=" + b"x" * 5000,
])
def test_malformed_client_first_messages_fail(tmp_path, first):
    with pytest.raises(ScramFailed):
        ScramExchange(ScramCredentials(str(tmp_path)), "SCRAM-SHA-256").first(first)


@pytest.mark.parametrize("final", [
    b"c=biws,r=cs", b"c=biws,r=cs,p=!!", b"c=eSws,r=cs,p=AAAA", b"c=biws,r=other,p=AAAA", b"r=cs,c=biws,p=AAAA",
    b"c=biws,r=cs,p=AAAA",  # a proof of the wrong size
])
def test_malformed_client_final_messages_fail(tmp_path, final):
    store = ScramCredentials(str(tmp_path))
    _upsert(store, "alice", b"pw", b"salt")
    ex = ScramExchange(store, "SCRAM-SHA-256", nonce="s")
    ex.first(b"n,,n=alice,r=c")
    with pytest.raises(ScramFailed):
        ex.final(final)
    with pytest.raises(ScramFailed, match="Unexpected"):
        ScramExchange(store, "SCRAM-SHA-256").final(b"c=biws,r=x,p=AAAA")


def test_escaped_names_round_trip(tmp_path):
    store = ScramCredentials(str(tmp_path))
    _upsert(store, "a,b=c", b"pw", b"salt")
    ex = ScramExchange(store, "SCRAM-SHA-256", nonce="s")
    assert ex.first(b"n,,n=a=2Cb=3Dc,r=c").startswith(b"r=cs,s=" + base64.b64encode(b"salt"))


def test_alterations_follow_kafkas_rules_and_land_together(tmp_path):
    store = ScramCredentials(str(tmp_path))
    salted = bytes(32)
    got = store.alter(
        [("ghost", SHA256), ("", SHA256), ("x", 9)],
        [("ok", SHA256, 4096, b"s", salted), ("few", SHA256, 4095, b"s", salted),
         ("many", SHA256, 16385, b"s", salted), ("twice", SHA256, 4096, b"s", salted),
         ("twice", SHA512, 4096, b"s", bytes(64)), ("short", SHA256, 4096, b"s", bytes(31)),
         ("nosalt", SHA256, 4096, b"", salted), ("x" * 257, SHA256, 4096, b"s", salted)])
    codes = {n: c for n, c, _ in got}
    assert codes == {"ok": 0, "ghost": 91, "": 93, "x": 33, "few": 93, "many": 93, "twice": 92, "short": 93,
                     "nosalt": 93, "x" * 257: 93}
    assert [r[0] for r in store.describe(None)] == ["ok"]
    assert store.describe(["ok", "nope", "ok"]) == [
        ("ok", 92, "Cannot describe SCRAM credentials for the same user twice in a single request: ok", []),
        ("nope", 91, "Attempt to describe a user credential that does not exist: nope", [])]
    # a deletion and an upsertion of one user in one request: neither is applied
    assert store.alter([("ok", SHA256)], [("ok", SHA512, 8192, b"s", bytes(64))]) == \
        [("ok", 92, "A user credential cannot be altered twice in the same request")]
    assert store.describe(["ok"]) == [("ok", 0, None, [(SHA256, 4096)])]
    reopened = ScramCredentials(str(tmp_path))
    assert reopened.describe(None) == store.describe(None)


def test_the_number_of_users_is_bounded(tmp_path, monkeypatch):
    import vqs.server.kafka.scram as scram

    monkeypatch.setattr(scram, "MAX_USERS", 2)
    store = ScramCredentials(str(tmp_path))
    up = [(f"u{i}", SHA256, 4096, b"s", bytes(32)) for i in range(3)]
    got = {n: c for n, c, _ in store.alter([], up)}
    assert got == {"u0": 93, "u1": 93, "u2": 93} and store.describe(None) == []
    assert {n: c for n, c, _ in store.alter([], up[:2])} == {"u0": 0, "u1": 0}
    assert {n: c for n, c, _ in store.alter([], [up[2], ("u0", SHA512, 4096, b"s", bytes(64))])} == \
        {"u2": 93, "u0": 0}


def test_a_corrupt_credentials_file_stops_the_server_naming_it(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "scram_credentials.json").write_text('{"users": {"a": {"SCRAM-SHA-1": {}}}}')
    server = KafkaServer(tmp_path / "data").start(wait=False)
    assert server.proc.wait(30) != 0
    assert "scram_credentials.json" in server.log()


# ---------------------------------------------------------------------- over the wire

def _name() -> str:
    return f"scram-{uuid.uuid4().hex[:8]}"


def test_admin_client_describes_and_alters_credentials(kafka_server):
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    user = _name()
    assert admin_results(admin.describe_user_scram_credentials([user])) == {user: ck.KafkaError.RESOURCE_NOT_FOUND}
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000)
    ups = [UserScramCredentialUpsertion(user, info, b"password", b"salt"),
           UserScramCredentialUpsertion(user + "-512", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                        b"pw\x00pw", b"s\x00lt")]
    assert admin_results(admin.alter_user_scram_credentials(ups)) == {user: None, user + "-512": None}
    got = admin_results(admin.describe_user_scram_credentials([user, user + "-512"]))
    assert [(i.mechanism, i.iterations) for i in got[user].scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 10000)]
    assert [(i.mechanism, i.iterations) for i in got[user + "-512"].scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 4096)]
    few = UserScramCredentialUpsertion(_name(), ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"p")
    assert list(admin_results(admin.alter_user_scram_credentials([few])).values()) == \
        [ck.KafkaError.UNACCEPTABLE_CREDENTIAL]
    dels = [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256),
            UserScramCredentialDeletion(user + "-512", ScramMechanism.SCRAM_SHA_256)]
    assert admin_results(admin.alter_user_scram_credentials(dels)) == \
        {user: None, user + "-512": ck.KafkaError.RESOURCE_NOT_FOUND}
    assert admin_results(admin.describe_user_scram_credentials([user])) == {user: ck.KafkaError.RESOURCE_NOT_FOUND}


def _client(server, mechanism: str, user: str, password: str, **more) -> dict:
    return {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, **more}


def test_scram_users_log_in_produce_and_consume_across_a_restart(tmp_path):
    server = KafkaServer(tmp_path / "data", "--token", "s3cret").start()
    try:
        admin = AdminClient(_client(server, "PLAIN", "admin", "s3cret"))
        ups = [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                            b"alice-pw"),
               UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                            b"bob-pw")]
        assert admin_results(admin.alter_user_scram_credentials(ups)) == {"alice": None, "bob": None}
        assert server.stop() == 0, server.log()
        server.start()
        p = ck.Producer(_client(server, "SCRAM-SHA-256", "alice", "alice-pw"))
        for i in range(20):
            p.produce("scram-topic", b"m%d" % i)
        assert p.flush(15) == 0
        c = ck.Consumer(_client(server, "SCRAM-SHA-512", "bob", "bob-pw", **{
            "group.id": "scram-g", "auto.offset.reset": "earliest"}))
        c.subscribe(["scram-topic"])
        got = []
        try:
            while len(got) < 20:
                m = c.poll(10)
                assert m is not None and m.error() is None, m and m.error()
                got.append(m.value())
        finally:
            c.close()
        assert got == [b"m%d" % i for i in range(20)]
        assert fails_to_log_in(_client(server, "SCRAM-SHA-256", "alice", "wrong"))
        assert fails_to_log_in(_client(server, "SCRAM-SHA-512", "alice", "alice-pw"))  # no -512 credential
        assert fails_to_log_in(_client(server, "SCRAM-SHA-256", "mallory", "x"))
        # (one line a minute per client address: the first failure's, the others counted)
        server.wait_log("authentication failed: kafka SASL/SCRAM-SHA-256 user 'alice'")
        admin = AdminClient(_client(server, "SCRAM-SHA-512", "bob", "bob-pw"))  # a SCRAM user is a client too
        dels = [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)]
        assert admin_results(admin.alter_user_scram_credentials(dels)) == {"alice": None}
        assert fails_to_log_in(_client(server, "SCRAM-SHA-256", "alice", "alice-pw"))
    finally:
        assert server.stop() == 0, server.log()
    with open(server.log_path, encoding="utf-8") as f:
        log = f.read()
    assert "alice-pw" not in log and "wrong" not in log  # no password is ever logged


def test_the_handshake_offers_what_the_server_requires(tmp_path, kafka_server):
    k = RawKafka(kafka_server.kafka_port)  # no credentials: no SASL at all
    r = k.request(17, 1, bytes(Writer().string("SCRAM-SHA-256").b))
    assert r.int16() == 33 and r.int32() == 0
    server = KafkaServer(tmp_path / "data", "--token", "s3cret").start()
    try:
        k = RawKafka(server.kafka_port)
        r = k.request(17, 1, bytes(Writer().string("SCRAM-SHA-512").b))
        assert r.int16() == 0 and [r.string() for _ in range(r.int32())] == \
            ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        r = k.request(36, 1, bytes(Writer().bytes_(b"n,,n=nobody,r=abc").b))
        assert r.int16() == 0 and r.nullable_string() is None
        assert r.bytes_().startswith(b"r=abc")
        r = k.request(36, 1, bytes(Writer().bytes_(b"c=biws,r=abc,p=AAAA").b))
        assert r.int16() == 58  # SASL_AUTHENTICATION_FAILED, then the connection is closed
        assert k.recv_frame() is None
        k = RawKafka(server.kafka_port)  # SCRAM needs SaslAuthenticate: not the v0 handshake
        assert k.request(17, 0, bytes(Writer().string("SCRAM-SHA-256").b)).int16() == 33
    finally:
        assert server.stop() == 0, server.log()
