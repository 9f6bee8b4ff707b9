"""Failed authentications on every front (REST, SQS, the console, native, gRPC, Kafka) are
counted in one metric by front and logged alike with the client's address, never the
credential, a line per front and client address a minute at most (auth_failures.py)."""

from __future__ import annotations

import re
import socket
import struct

import httpx
import pytest
from socket_reads import recv_exact
from vqs_server_proc import ServerProcess, free_port

from vqs.native_wire import hello
from vqs.server.kafka.codec import Writer

grpc = pytest.importorskip("grpc")

TOKEN = "the-right-token-0123456789"
GUESSES = {f: f"guess-{f}-secret" for f in ("rest", "console", "native", "grpc", "kafka")}
SQS_SECRET_GUESS = "guess-sqs-secret"


def _kafka_guess(port: int, password: str) -> None:
    """A SASL/PLAIN login with a wrong password (SaslHandshake v1, SaslAuthenticate v1)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for corr, (key, body) in enumerate(((17, Writer().string("PLAIN").b),
                                            (36, Writer().bytes_(b"\x00mallory\x00" + password.encode()).b))):
            frame = bytes(Writer().int16(key).int16(1).int32(corr).string("t").b) + bytes(body)
            s.sendall(struct.pack(">i", len(frame)) + frame)
            head = recv_exact(s, 4)
            assert head is not None
            recv_exact(s, struct.unpack(">i", head)[0])


def _native_guess(port: int, token: str) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(hello(token.encode()))
        (n,) = struct.unpack(">I", recv_exact(s, 4))
        return struct.unpack_from(">BH", recv_exact(s, n))[1]


def test_failed_authentications_of_every_front_are_counted_and_logged_alike(tmp_path):
    from vqs.server.grpc.gen import vqs_pb2, vqs_pb2_grpc

    kafka, grpc_port, native = free_port(), free_port(), free_port()
    server = ServerProcess(tmp_path / "data", "--token", TOKEN, "--sigv4-key", "AKID:the-sigv4-secret",
                           "--kafka-port", str(kafka), "--grpc-port", str(grpc_port),
                           "--native-port", str(native)).start()
    try:
        u = server.url
        assert httpx.get(u + "/topics", headers={"authorization": "Bearer " + GUESSES["rest"]}).status_code == 403
        r = httpx.post(u + "/", content=b"Action=ListQueues", headers={
            "content-type": "application/x-www-form-urlencoded", "x-amz-date": "20240101T000000Z",
            "authorization": "AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/sqs/aws4_request, "
                             "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64})
        assert r.status_code in (400, 403), r.text
        r = httpx.post(u + "/console/login", data={"token": GUESSES["console"]})
        assert r.status_code == 401, r.text
        assert _native_guess(native, GUESSES["native"]) == 403
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
            stub = vqs_pb2_grpc.TopicsStub(ch)
            for _ in range(2):  # twice from one address: counted twice, logged once
                with pytest.raises(grpc.RpcError) as e:
                    stub.ListTopics(vqs_pb2.ListTopicsRequest(),
                                    metadata=(("authorization", "Bearer " + GUESSES["grpc"]),), timeout=10)
                assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        _kafka_guess(kafka, GUESSES["kafka"])
        log = server.wait_log("authentication failed: rest forbidden (GET /topics) from 127.0.0.1:",
                              "authentication failed: sqs ",
                              "authentication failed: console login (POST /console/login) from 127.0.0.1:",
                              "authentication failed: native forbidden (HELLO) from 127.0.0.1:",
                              "authentication failed: grpc PERMISSION_DENIED (/vqs.v1.Topics/ListTopics) "
                              "from 127.0.0.1:",
                              "authentication failed: kafka SASL/PLAIN user 'mallory' (connection closed) "
                              "from 127.0.0.1:")
        assert log.count("authentication failed: grpc") == 1, log
        metrics = httpx.get(u + "/metrics", headers={"authorization": "Bearer " + TOKEN}).text
        counts = dict(re.findall(r'vqs_authentication_failures_total\{front="(\w+)"\} ([\d.]+)', metrics))
        assert counts == {"rest": "1.0", "sqs": "1.0", "console": "1.0", "native": "1.0", "grpc": "2.0",
                          "kafka": "1.0"}, metrics
    finally:
        assert server.stop() == 0, server.log()
    log = server.log()
    for guess in (*GUESSES.values(), SQS_SECRET_GUESS, TOKEN, "the-sigv4-secret"):
        assert guess not in log


def test_a_kafka_client_without_sasl_is_a_failed_authentication_logged_once_a_minute_per_address(tmp_path):
    kafka = free_port()
    server = ServerProcess(tmp_path / "data", "--token", TOKEN, "--kafka-port", str(kafka)).start()
    try:
        for _ in range(3):  # a client not configured for SASL reconnects, and asks again
            with socket.create_connection(("127.0.0.1", kafka), timeout=10) as s:
                frame = bytes(Writer().int16(3).int16(1).int32(1).string("t").int32(-1).b)  # Metadata v1
                s.sendall(struct.pack(">i", len(frame)) + frame)
                assert recv_exact(s, 4) is None  # closed unanswered
        log = server.wait_log("authentication failed: kafka a request (API key 3) before SASL authentication: "
                              "the client must be configured for SASL (connection closed) from 127.0.0.1:")
        metrics = httpx.get(server.url + "/metrics", headers={"authorization": "Bearer " + TOKEN}).text
        assert 'vqs_authentication_failures_total{front="kafka"} 3.0' in metrics
    finally:
        assert server.stop() == 0, server.log()
    assert log.count("before SASL") == 1 and "malformed request" not in log, log
