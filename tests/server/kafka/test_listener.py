"""The listener's framing, errors and SASL/PLAIN against a real server."""

from __future__ import annotations

import struct
import time

import pytest
from certs import needs_openssl, self_signed
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.errors import ConfigError
from vqs.server.kafka.codec import Writer
from vqs.server.settings import Settings

ck = pytest.importorskip("confluent_kafka")


def _alive(server) -> None:
    k = RawKafka(server.kafka_port)
    r = k.request(18, 0, b"")
    assert r.int16() == 0
    k.close()


def test_oversized_negative_and_garbage_frames_close_only_their_connection(kafka_server):
    for frame in (struct.pack(">i", 200 << 20), struct.pack(">i", -5), struct.pack(">i", 3) + b"abc"):
        k = RawKafka(kafka_server.kafka_port)
        k.sock.sendall(frame)
        assert k.recv_frame() is None  # closed
        k.close()
    k = RawKafka(kafka_server.kafka_port)
    k.send_frame(bytes(Writer().int16(3).int16(5).int32(1).string("x").b) + b"\x7f\xff\xff\xff")  # bad array
    assert k.recv_frame() is None
    k.close()
    _alive(kafka_server)
    log = kafka_server.log()
    assert "frame of 209715200 bytes (max 104857600, kafka_max_frame_bytes)" in log
    assert "malformed request" in log and "Traceback" not in log


def test_unknown_api_key_closes_and_unknown_api_versions_version_answers_35(kafka_server):
    k = RawKafka(kafka_server.kafka_port)
    r = k.request(18, 99, b"")
    assert r.int16() == 35  # UNSUPPORTED_VERSION, with the supported list (a v0 response)
    apis = {r.int16(): (r.int16(), r.int16()) for _ in range(r.int32())}
    assert apis[0] == (0, 8) and apis[1] == (4, 11)  # Produce 0-2 advertised (refused on use)
    k.send_frame(bytes(Writer().int16(1000).int16(0).int32(2).string("x").b))
    assert k.recv_frame() is None
    k.close()
    _alive(kafka_server)


def test_off_loopback_needs_a_token():
    with pytest.raises(ConfigError, match="Kafka listener"):
        Settings(host="10.1.2.3", kafka_port=9092, sigv4_keys={"a": "b"}).check()
    Settings(host="10.1.2.3", kafka_port=9092, tokens=["t"]).check()


def test_sasl_plain_with_a_token(tmp_path):
    server = KafkaServer(tmp_path / "data", "--token", "s3cret").start()
    try:
        good = {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": "me", "sasl.password": "s3cret"}
        p = ck.Producer(good)
        p.produce("sasl-t", b"hello")
        assert p.flush(10) == 0
        from confluent_kafka.admin import AdminClient

        bad = AdminClient(dict(good, **{"sasl.password": "wrong"}))
        with pytest.raises(ck.KafkaException):
            bad.list_topics(timeout=3)
        k = RawKafka(server.kafka_port)  # no SASL: only ApiVersions/SaslHandshake are answered
        assert k.request(18, 0, b"").int16() == 0
        k.send_frame(bytes(Writer().int16(3).int16(1).int32(9).string("x").int32(-1).b))
        assert k.recv_frame() is None
        k.close()
    finally:
        server.stop()


def test_sigv4_keys_alone_leave_kafka_closed(tmp_path):
    """SigV4 keys grant the SQS API only: with them and no token, a Kafka client gets
    ApiVersions and nothing else (no SASL mechanism is offered)."""
    server = KafkaServer(tmp_path / "data", "--sigv4-key", "AKID:secret", env={"VQS_TOKENS": ""}).start()
    try:
        k = RawKafka(server.kafka_port)
        assert k.request(18, 0, b"").int16() == 0
        k.send_frame(bytes(Writer().int16(3).int16(1).int32(9).string("x").int32(-1).b))
        assert k.recv_frame() is None
    finally:
        assert server.stop() == 0, server.log()


def test_kafka_users_replace_the_tokens_for_kafka_only(tmp_path):
    server = KafkaServer(tmp_path / "data", "--token", "admin-token", "--kafka-user", "app:app-pass").start()
    try:
        base = {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN"}
        p = ck.Producer(dict(base, **{"sasl.username": "app", "sasl.password": "app-pass"}))
        p.produce("users-t", b"hello")
        assert p.flush(10) == 0
        from confluent_kafka.admin import AdminClient

        for user, password in (("app", "admin-token"), ("other", "app-pass"), ("app", "wrong")):
            # refused as an authentication failure (the client reports it at once; waiting out a
            # request timeout would not tell a refusal from a server that never answered)
            errors: list = []
            bad = AdminClient(dict(base, **{"sasl.username": user, "sasl.password": password,
                                            "error_cb": errors.append}))
            deadline = time.monotonic() + 15
            while not any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors):
                assert time.monotonic() < deadline, (user, errors)
                bad.poll(0.05)
        import httpx

        r = httpx.get(server.url + "/topics", headers={"authorization": "Bearer app-pass"})
        assert r.status_code in (401, 403)  # a Kafka password is not a REST credential
        page = httpx.get(server.url + "/console/about", headers={"authorization": "Bearer admin-token"}).text
        assert "app-pass" not in page and "passwords hidden" in page
    finally:
        assert server.stop() == 0, server.log()
    assert "app-pass" not in server.log()


@needs_openssl
def test_kafka_over_tls_with_sasl(tmp_path):
    cert, key = self_signed(tmp_path)
    server = KafkaServer(tmp_path / "data", "--token", "s3cret", "--tls-cert", cert, "--tls-key", key).start()
    try:
        conf = {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": cert,
                "sasl.mechanism": "PLAIN", "sasl.username": "me", "sasl.password": "s3cret"}
        p = ck.Producer(conf)
        p.produce("tls-t", b"over tls")
        assert p.flush(15) == 0
        c = ck.Consumer(dict(conf, **{"group.id": "tls-g", "auto.offset.reset": "earliest"}))
        c.subscribe(["tls-t"])
        got = None
        for _ in range(30):
            m = c.poll(1)
            if m is not None and not m.error():
                got = m.value()
                break
        c.close()
        assert got == b"over tls"
        k = RawKafka(server.kafka_port)  # plaintext on the TLS port: no answer
        k.sock.sendall(bytes(Writer().int32(10).int16(18).int16(0).int32(1).string("x").b))
        assert k.recv_frame() is None
    finally:
        assert server.stop() == 0, server.log()
