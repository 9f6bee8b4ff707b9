"""SASL sessions that end (KIP-368, Kafka's ``connections.max.reauth.ms``):
``kafka_connections_max_reauth_ms``.

A real server; a raw client for the protocol's letter (the lifetime SaslAuthenticate v1 tells, a
new login on the same connection, the close of a connection that goes on without one, a login
that changes its principal) and confluent-kafka for a client that logs in again by itself.
"""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer

ck = pytest.importorskip("confluent_kafka")

LIFETIME_MS = 1500


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = KafkaServer(tmp_path_factory.mktemp("vqs-reauth") / "data", "--token", "s3cret",
                    env={"VQS_KAFKA_CONNECTIONS_MAX_REAUTH_MS": str(LIFETIME_MS)}).start()
    yield s
    assert s.stop() == 0, s.log()


def _login(k: RawKafka, user: str, password: str = "s3cret") -> tuple[int, int]:
    """SaslHandshake v1 (PLAIN), then SaslAuthenticate v1: (error code, session lifetime ms)."""
    assert k.request(17, 1, bytes(Writer().string("PLAIN").b)).int16() == 0
    r = k.request(36, 1, bytes(Writer().bytes_(b"\x00%s\x00%s" % (user.encode(), password.encode())).b))
    err = r.int16()
    r.nullable_string()  # error message
    r.bytes_()  # auth bytes
    return err, r.int64()


def _metadata_answered(k: RawKafka) -> bool:
    """A Metadata v1 request for no topic: answered (True) or the connection closed (False)."""
    k.corr += 1
    k.send_frame(bytes(Writer().int16(3).int16(1).int32(k.corr).string("raw-test").int32(0).b))
    return k.recv_frame() is not None


def test_a_session_lasts_its_lifetime_and_a_new_login_renews_it(server):
    k = RawKafka(server.kafka_port)
    try:
        assert _login(k, "app") == (0, LIFETIME_MS)  # the lifetime the client is told
        assert _metadata_answered(k)
        time.sleep(LIFETIME_MS / 1000 + 0.2)  # past the session's end: only a new login is taken
        assert _login(k, "app") == (0, LIFETIME_MS)
        assert _metadata_answered(k)  # renewed
        time.sleep(LIFETIME_MS / 1000 + 0.2)
        assert not _metadata_answered(k)  # ended, no new login: closed
    finally:
        k.close()
    assert "its SASL session ended without a new login (kafka_connections_max_reauth_ms)" in server.log()


def test_a_new_login_must_keep_the_principal(server):
    k = RawKafka(server.kafka_port)
    try:
        assert _login(k, "app") == (0, LIFETIME_MS)
        err, lifetime = _login(k, "someone-else")
        assert (err, lifetime) == (58, 0)  # SASL_AUTHENTICATION_FAILED, then closed
        assert k.recv_frame() is None
    finally:
        k.close()


def test_a_wrong_password_on_a_new_login_closes_the_connection(server):
    k = RawKafka(server.kafka_port)
    try:
        assert _login(k, "app") == (0, LIFETIME_MS)
        assert _login(k, "app", "guess") == (58, 0)
        assert k.recv_frame() is None
    finally:
        k.close()


def test_confluent_kafka_logs_in_again_by_itself(server):
    """librdkafka re-authenticates before the session ends (KIP-368): a producer that sends for
    three lifetimes on its connections loses nothing and is never cut off."""
    ended = server.log().count("SASL session ended")
    errors: list = []
    delivered: list = []
    told: list = []  # the client's own account of each login's session lifetime (debug=security)

    class Told(logging.Handler):
        def emit(self, record):
            if "Received session lifetime" in (msg := record.getMessage()) and "/bootstrap" not in msg:
                told.append(msg)

    log = logging.getLogger(f"reauth-{uuid.uuid4().hex[:6]}")
    log.addHandler(Told())
    log.setLevel(logging.DEBUG)
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN", "sasl.username": "app", "sasl.password": "s3cret",
                     "linger.ms": 0, "error_cb": lambda e: errors.append(e), "debug": "security", "logger": log})
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    end = time.monotonic() + 3 * LIFETIME_MS / 1000
    n = 0
    while time.monotonic() < end:
        p.produce(topic, b"%d" % n, on_delivery=lambda err, msg: delivered.append(err))
        n += 1
        p.poll(0.1)
    assert p.flush(10) == 0
    assert len(delivered) == n and not any(delivered), delivered
    assert not errors, errors
    assert server.log().count("SASL session ended") == ended
    # the login, then at least one more on the same connection (librdkafka renews before the end)
    assert len(told) >= 2 and all(f"{LIFETIME_MS} ms" in m for m in told), told


def test_the_setting_is_checked():
    from vqs.errors import ConfigError
    from vqs.server.settings import Settings

    with pytest.raises(ConfigError, match="kafka_connections_max_reauth_ms must be 0"):
        Settings(kafka_connections_max_reauth_ms=-1).check()


def test_the_broker_describes_its_session_lifetime_and_mechanisms(server):
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "ops", "sasl.password": "s3cret"})
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["connections.max.reauth.ms"].value == str(LIFETIME_MS)
    assert cfg["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert cfg["ssl.client.auth"].value == "none"
