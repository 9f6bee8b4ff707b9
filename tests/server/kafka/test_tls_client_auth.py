"""Kafka's SSL client authentication (``ssl.client.auth=required``): ``--kafka-tls-client-ca``.

Real certificates (the openssl command), a real server, confluent-kafka over SSL: a certificate the
CA signed authenticates its client as ``User:<subject>`` (no SASL, though the server has tokens),
and ACLs bind that principal; a client without a certificate, or with one the CA did not sign,
fails the handshake.
"""

from __future__ import annotations

import socket
import ssl
import time
import uuid

import pytest
from certs import needs_openssl, openssl, self_signed
from kafka_clients import delivery_codes
from kafka_server_proc import KafkaServer

from vqs.errors import ConfigError
from vqs.server.kafka.codec import Writer
from vqs.server.kafka.tls import PrincipalMapper, subject
from vqs.server.settings import Settings

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

ALICE = "User:CN=alice,OU=eng,O=acme\\, Inc.,C=DE"  # Kafka's form of alice's subject (RFC 2253)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, the server's own certificate, alice's and bob's (signed by the CA) and mallory's (with
    alice's subject, self-signed)."""
    d = tmp_path_factory.mktemp("pki")
    f = {n: str(d / n) for n in ("ca.pem", "ca.key", "server.pem", "server.key", "alice.pem", "alice.key",
                                 "alice.csr", "bob.pem", "bob.key", "bob.csr", "mallory.pem", "mallory.key")}
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f["ca.key"], "-out", f["ca.pem"], "-days",
            "1", "-subj", "/CN=test client CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    self_signed(d, "server")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f["alice.key"], "-out", f["alice.csr"],
            "-subj", "/C=DE/O=acme, Inc./OU=eng/CN=alice")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f["bob.key"], "-out", f["bob.csr"],
            "-subj", "/C=DE/O=acme, Inc./OU=eng/CN=bob")
    for who in ("alice", "bob"):
        openssl("x509", "-req", "-in", f[f"{who}.csr"], "-CA", f["ca.pem"], "-CAkey", f["ca.key"],
                "-CAcreateserial", "-out", f[f"{who}.pem"], "-days", "1")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f["mallory.key"], "-out",
            f["mallory.pem"], "-days", "1", "-subj", "/C=DE/O=acme, Inc./OU=eng/CN=alice")
    return f


def _start(pki, data, **env) -> KafkaServer:
    """A server with the test CA's client certificates, once ready (its HTTPS front, which takes no
    client certificates, answers the readiness probe)."""
    return KafkaServer(data, "--token", "s3cret", "--tls-cert", pki["server.pem"], "--tls-key", pki["server.key"],
                       "--kafka-tls-client-ca", pki["ca.pem"], env=env).start()


@pytest.fixture(scope="module")
def server(pki, tmp_path_factory):
    s = _start(pki, tmp_path_factory.mktemp("vqs-mtls") / "data")
    yield s
    assert s.stop() == 0, s.log()


def _conf(server, pki, who: str | None, **extra) -> dict:
    conf = {"bootstrap.servers": server.bootstrap, "security.protocol": "SSL", "ssl.ca.location": pki["server.pem"],
            **extra}
    if who:
        conf.update({"ssl.certificate.location": pki[f"{who}.pem"], "ssl.key.location": pki[f"{who}.key"]})
    return conf


def _produce(conf: dict, topic: str, value: bytes) -> int | None:
    """Produce one record; the error code of its delivery (None: delivered)."""
    return delivery_codes(conf, topic, [value])[0]


def _api_versions_answer(server, pki, who: str | None) -> bytes | None:
    """An ApiVersions v0 request over TLS (with ``who``'s certificate): the answer's size prefix,
    or None when the TLS session fails or closes first."""
    ctx = ssl.create_default_context(cafile=pki["server.pem"])
    if who:
        ctx.load_cert_chain(pki[f"{who}.pem"], pki[f"{who}.key"])
    header = Writer().int16(18).int16(0).int32(1).string("probe").b
    try:
        with socket.create_connection(("127.0.0.1", server.kafka_port), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(bytes(Writer().int32(len(header)).b) + bytes(header))
            return tls.recv(4) or None
    except (ssl.SSLError, ConnectionError):
        return None


def _super_admin(server, pki) -> AdminClient:
    """The operator: SASL_SSL with the server's token (alice's certificate gets it through TLS)."""
    return AdminClient(_conf(server, pki, "alice", **{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                                      "sasl.username": "ops", "sasl.password": "s3cret"}))


@needs_openssl
def test_a_signed_certificate_logs_in_as_its_subject_and_acls_bind_it(server, pki):
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    alice = _conf(server, pki, "alice")
    assert _produce(alice, topic, b"by certificate") is None  # no SASL: the certificate authenticates
    c = ck.Consumer({**alice, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        m = None
        for _ in range(30):
            m = c.poll(1)
            if m is not None and not m.error():
                break
        assert m is not None and m.value() == b"by certificate"
    finally:
        c.close()
    bob = _conf(server, pki, "bob")
    assert _produce(bob, topic, b"by bob") is None  # no ACL names the topic yet: open to all
    admin = _super_admin(server, pki)
    allow = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, ALICE, "*", AclOperation.WRITE,
                       AclPermissionType.ALLOW)
    for fut in admin.create_acls([allow]).values():
        assert fut.result(10) is None
    described = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None,
                                                     None, AclOperation.ANY, AclPermissionType.ANY)).result(10)
    assert [b.principal for b in described] == [ALICE]
    # the topic is closed to every principal but the one its ACL names: alice's subject, exactly
    assert _produce(alice, topic, b"allowed") is None
    assert _produce(bob, topic, b"denied") == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    ops = _conf(server, pki, "bob", **{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                       "sasl.username": "ops", "sasl.password": "s3cret"})
    assert _produce(ops, topic, b"by the operator") is None  # a SASL login on TLS names the principal
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    cfg = admin.describe_configs([res])[res].result(10)
    assert (cfg["ssl.client.auth"].value, cfg["ssl.principal.mapping.rules"].value) == ("required", "DEFAULT")


@needs_openssl
@pytest.mark.parametrize("who", [None, "mallory"])
def test_a_client_without_a_certificate_the_ca_signed_fails_the_handshake(server, pki, who):
    """No certificate, or one with alice's subject that the CA did not sign: no connection (the
    handshake fails: no request is answered), where alice's certificate gets an answer."""
    assert _api_versions_answer(server, pki, "alice") is not None
    assert _api_versions_answer(server, pki, who) is None
    errors: list = []
    conf = _conf(server, pki, who, error_cb=lambda e: errors.append(e.code()))
    assert _produce({**conf, "message.timeout.ms": 3_000}, f"mtls-{uuid.uuid4().hex[:8]}", b"x") \
        == ck.KafkaError._MSG_TIMED_OUT  # never delivered
    assert errors and set(errors) <= {ck.KafkaError._SSL, ck.KafkaError._TRANSPORT,
                                      ck.KafkaError._ALL_BROKERS_DOWN}, errors


def test_the_subject_is_written_as_kafka_writes_it():
    """X500Principal's RFC 2253 form: the most specific RDN first, special characters escaped."""
    rdns = ((("countryName", "DE"),), (("organizationName", "a,b+c"),),
            (("organizationalUnitName", "x"), ("userId", "7")), (("commonName", " #odd; <name> "),))
    assert subject({"subject": rdns}) == 'CN=\\ #odd\\; \\<name\\>\\ ,OU=x+UID=7,O=a\\,b\\+c,C=DE'
    assert subject({"subject": ((("emailAddress", "a@example.com"),),)}) == "emailAddress=a@example.com"
    assert subject(None) is None and subject({}) is None
    # a trailing space is escaped after an escaped backslash too; a lone space once
    assert subject({"subject": ((("commonName", "a\\ "),), (("organizationName", " "),))}) == "O=\\ ,CN=a\\\\\\ "


def test_mapping_rules_map_subjects_as_kafkas_ssl_principal_mapper():
    """Kafka's SslPrincipalMapperTest, case by case."""
    mapper = PrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT"]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    commas = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert commas.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"
    assert PrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x") is None  # no rule applies
    for rules, count in [("DEFAULT", 1), ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT", 2),
                         ("RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/", 1), ("", 0), (",   , , ,  ", 0),
                         (",,RULE://,,,DEFAULT,,", 2)]:
        assert len(PrincipalMapper(rules).rules) == count, rules
    for bad in ["default", "DEFAUL", "DEFAULT/L", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
                "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", "RULE:^CN=(/$1/"]:
        with pytest.raises(ConfigError, match="kafka_tls_principal_mapping_rules"):
            PrincipalMapper(bad)


@needs_openssl
def test_mapping_rules_name_the_principal_and_a_subject_no_rule_maps_is_refused(pki, tmp_path):
    """alice's subject maps to User:alice; bob's matches no rule (and there is no DEFAULT): his
    connection is closed."""
    s = _start(pki, tmp_path / "data", VQS_KAFKA_TLS_PRINCIPAL_MAPPING_RULES="RULE:^CN=(alice),OU=eng,.*$/$1/U")
    try:
        assert _api_versions_answer(s, pki, "alice") is not None
        assert _api_versions_answer(s, pki, "bob") is None
        s.wait_log("no kafka_tls_principal_mapping_rules rule applies to its certificate's subject 'CN=bob,OU=eng,")
        topic = f"mtls-{uuid.uuid4().hex[:8]}"
        admin = _super_admin(s, pki)
        allow = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ALICE", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)
        for fut in admin.create_acls([allow]).values():
            assert fut.result(10) is None
        assert _produce(_conf(s, pki, "alice"), topic, b"as User:ALICE") is None
    finally:
        assert s.stop() == 0, s.log()


@needs_openssl
def test_the_client_ca_setting_is_checked_at_start(pki, tmp_path):
    with pytest.raises(ConfigError, match="kafka_tls_client_ca needs the listener's own certificate"):
        Settings(kafka_tls_client_ca=pki["ca.pem"]).check()
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=f"kafka_tls_client_ca: cannot load CA certificates from {junk}"):
        Settings(tls_cert=pki["server.pem"], tls_key=pki["server.key"], kafka_tls_client_ca=str(junk)).check()
    with pytest.raises(ConfigError, match="kafka_tls_principal_mapping_rules: invalid rule 'DEFAUL'"):
        Settings(tls_cert=pki["server.pem"], tls_key=pki["server.key"], kafka_tls_client_ca=pki["ca.pem"],
                 kafka_tls_principal_mapping_rules="DEFAUL").check()
    with pytest.raises(ConfigError, match="kafka_tls_client_auth must be required or requested"):
        Settings(tls_cert=pki["server.pem"], tls_key=pki["server.key"], kafka_tls_client_ca=pki["ca.pem"],
                 kafka_tls_client_auth="none").check()
    with pytest.raises(ConfigError, match="kafka_tls_client_ca: cannot read"):
        Settings(tls_cert=pki["server.pem"], tls_key=pki["server.key"],
                 kafka_tls_client_ca=str(tmp_path / "missing.pem")).check()


def test_super_users_may_be_certificate_subjects():
    """VQS_KAFKA_SUPER_USERS: principals separated by ";" (Kafka's super.users) or by a comma
    before the next User:, so a subject's own commas stay in it."""
    from vqs.server.settings import load_settings

    def parsed(value: str) -> list:
        return load_settings({}, env={"VQS_KAFKA_SUPER_USERS": value}).kafka_super_users

    assert parsed(f"{ALICE};User:ops") == [ALICE, "User:ops"]
    assert parsed(f"User:ops, {ALICE}") == ["User:ops", ALICE]
    assert parsed("User:a,User:b") == ["User:a", "User:b"]


@needs_openssl
def test_requested_client_certificates_leave_sasl_to_those_without_one(pki, tmp_path):
    """kafka_tls_client_auth=requested: alice logs in by her certificate, a client without one
    by SASL on the same port, and a certificate the CA did not sign still fails the handshake."""
    s = _start(pki, tmp_path / "data", VQS_KAFKA_TLS_CLIENT_AUTH="requested")
    try:
        topic = f"mtls-{uuid.uuid4().hex[:8]}"
        assert _produce(_conf(s, pki, "alice"), topic, b"by certificate") is None
        sasl = _conf(s, pki, None, **{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                      "sasl.username": "app", "sasl.password": "s3cret"})
        assert _produce(sasl, topic, b"by token") is None
        assert _api_versions_answer(s, pki, None) is not None  # no certificate: connected, SASL next
        assert _api_versions_answer(s, pki, "mallory") is None
        assert _produce(_conf(s, pki, None, **{"message.timeout.ms": 3_000}), topic, b"x") \
            == ck.KafkaError._MSG_TIMED_OUT  # neither a certificate nor a login
    finally:
        assert s.stop() == 0, s.log()


@needs_openssl
def test_kafka_python_and_aiokafka_log_in_by_certificate(server, pki):
    """Two clients on Python's own TLS stack (not librdkafka's): a certificate the CA signed is
    their login too."""
    import asyncio

    kafka = pytest.importorskip("kafka")
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.helpers import create_ssl_context

    topic = f"mtls-py-{uuid.uuid4().hex[:8]}"
    tls = dict(security_protocol="SSL", ssl_cafile=pki["server.pem"], ssl_certfile=pki["alice.pem"],
               ssl_keyfile=pki["alice.key"])
    p = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, **tls)
    try:
        p.send(topic, b"kafka-python").get(timeout=15)
    finally:
        p.close()

    async def consume() -> list:
        ctx = create_ssl_context(cafile=pki["server.pem"], certfile=pki["alice.pem"], keyfile=pki["alice.key"])
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=server.bootstrap, security_protocol="SSL",
                                      ssl_context=ctx, auto_offset_reset="earliest")
        await c.start()
        got: list = []
        try:
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=1000)
                got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await c.stop()

    assert asyncio.run(consume()) == [b"kafka-python"]
