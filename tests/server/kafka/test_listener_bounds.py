"""The Kafka listener's bounds against a real server: connection caps, deadlines, the frame cap
before authentication, a failed SASL authentication closing its connection, decompression
bombs and over-limit records answered per partition (docs/security.md)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.server.kafka.codec import Writer
from vqs.server.kafka.records import encode_records

ck = pytest.importorskip("confluent_kafka")


def _closed(k: RawKafka, within: float) -> bool:
    k.sock.settimeout(within)
    try:
        return k.sock.recv(1) == b""
    except TimeoutError:
        return False


def test_a_failed_sasl_authentication_is_answered_logged_and_closed(tmp_path):
    server = KafkaServer(tmp_path / "data", "--token", "s3cret").start()
    try:
        k = RawKafka(server.kafka_port)
        assert k.request(17, 1, bytes(Writer().string("PLAIN").b)).int16() == 0
        r = k.request(36, 1, bytes(Writer().bytes_(b"\x00mallory\x00guess-1").b))
        assert r.int16() == 58  # SASL_AUTHENTICATION_FAILED, then the connection is closed
        assert k.recv_frame() is None
        k = RawKafka(server.kafka_port)  # before authentication, a frame over 512 KiB closes
        k.sock.sendall(struct.pack(">i", 600 << 10))
        assert k.recv_frame() is None
        good = {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": "me", "sasl.password": "s3cret",
                "message.max.bytes": 2 << 20}
        p = ck.Producer(good)
        p.produce("big-after-auth", b"x" * (700 << 10))  # over 512 KiB once authenticated: fine
        assert p.flush(15) == 0
    finally:
        assert server.stop() == 0, server.log()
    log = server.log()
    assert "authentication failed: kafka SASL/PLAIN user 'mallory'" in log and "guess-1" not in log
    assert "before authentication" in log


def test_connections_are_capped_per_client_and_silent_ones_closed(tmp_path):
    env = {"VQS_MAX_CONNECTIONS_PER_CLIENT": "5", "VQS_KAFKA_FRAME_TIMEOUT_S": "1",
           "VQS_KAFKA_IDLE_TIMEOUT_S": "4"}
    server = KafkaServer(tmp_path / "data", env=env).start()
    try:
        held = [RawKafka(server.kafka_port) for _ in range(4)]
        for k in held:
            assert k.request(18, 0, b"").int16() == 0  # authenticated (no credentials): may idle
        silent = RawKafka(server.kafka_port)  # the fifth: says nothing, closed after the frame timeout
        over = RawKafka(server.kafka_port)    # the sixth: over the cap, closed at once
        assert _closed(over, 1.0)
        t0 = time.monotonic()
        assert _closed(silent, 5.0) and time.monotonic() - t0 < 3
        assert held[0].request(18, 0, b"").int16() == 0  # the held ones still serve
        half = RawKafka(server.kafka_port)  # a request that never finishes
        half.sock.sendall(struct.pack(">i", 100) + b"\x00\x12")
        assert _closed(half, 5.0)
        assert _closed(held[1], 8.0)  # idle past kafka_idle_timeout_s
    finally:
        assert server.stop() == 0, server.log()
    log = server.log()
    assert "over max_connections_per_client" in log and "was idle" in log and "sent no request" in log


def test_a_decompression_bomb_and_too_many_headers_are_refused_per_partition(tmp_path):
    server = KafkaServer(tmp_path / "data", env={"VQS_MAX_BODY_BYTES": str(1 << 20)}).start()
    try:
        k = RawKafka(server.kafka_port)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("bombs", num_partitions=1, replication_factor=1)])["bombs"].result(10)
        for codec in (1, 2, 3, 4):  # gzip, snappy, lz4, zstd: 16 MiB of zeros, 16x the cap
            bomb = encode_records(0, [bytes(16 << 20)], timestamps=[1_000], codec=codec)
            assert len(bomb) < 1 << 20
            assert k.produce("bombs", 0, bomb)[0] == 10, codec  # MESSAGE_TOO_LARGE
        many = encode_records(0, [b"v"], headers=[tuple(("h", b"") for _ in range(70_000))], timestamps=[1_000])
        assert k.produce("bombs", 0, many)[0] == 87  # INVALID_RECORD, answered: the connection stays
        assert k.produce("bombs", 0, encode_records(0, [b"ok"], timestamps=[1_000], codec=4)) == (0, 0)
    finally:
        assert server.stop() == 0, server.log()
    assert "Traceback" not in server.log()


def test_the_over_cap_connection_does_not_stop_others(tmp_path):
    server = KafkaServer(tmp_path / "data", env={"VQS_MAX_CONNECTIONS": "3"}).start()
    try:
        socks = [socket.create_connection(("127.0.0.1", server.kafka_port)) for _ in range(3)]
        extra = RawKafka(server.kafka_port)
        assert _closed(extra, 2.0)
        for s in socks:
            s.close()
        deadline = time.monotonic() + 5
        while True:  # the closed ones are counted out as the server sees them go
            k = RawKafka(server.kafka_port)
            try:
                assert k.request(18, 0, b"").int16() == 0
                break
            except AssertionError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        assert server.stop() == 0, server.log()


def test_a_record_over_max_message_bytes_is_refused_as_on_every_front(tmp_path):
    server = KafkaServer(tmp_path / "data").start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("sized", num_partitions=1, replication_factor=1)])["sized"].result(10)
        k = RawKafka(server.kafka_port)
        big = encode_records(0, [b"x" * ((1 << 20) + 1)], timestamps=[1_000])
        assert k.produce("sized", 0, big)[0] == 10  # MESSAGE_TOO_LARGE, as REST's 413
        assert k.produce("sized", 0, encode_records(0, [b"x" * (1 << 20)], timestamps=[1_000]))[0] == 0
    finally:
        assert server.stop() == 0, server.log()


def test_a_topics_max_message_bytes_is_the_one_rule_for_kafka_and_rest(tmp_path):
    import httpx
    from confluent_kafka.admin import AdminClient, NewTopic

    server = KafkaServer(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        for name, limit in (("small", 2048), ("large", 4 << 20)):
            admin.create_topics([NewTopic(name, 1, 1, config={"max.message.bytes": str(limit)})])[name].result(10)
        k = RawKafka(server.kafka_port)
        assert k.produce("small", 0, encode_records(0, [b"x" * 2049], timestamps=[1_000]))[0] == 10
        assert k.produce("small", 0, encode_records(0, [b"x" * 2048], timestamps=[1_000]))[0] == 0
        three_mib = b"x" * (3 << 20)  # over the server's default, under the topic's own limit
        assert k.produce("large", 0, encode_records(0, [three_mib], timestamps=[1_000]))[0] == 0
        k.close()
        delivered = []
        p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
        p.produce("small", b"y" * 4096, on_delivery=lambda err, msg: delivered.append(err))
        p.flush(15)
        assert delivered and delivered[0].code() == ck.KafkaError.MSG_SIZE_TOO_LARGE  # MESSAGE_TOO_LARGE
        with httpx.Client(base_url=server.url, timeout=30) as http:
            r = http.post("/topics/small/messages", json={"messages": [{"value": "z" * 2049}]})
            assert r.status_code == 413 and "2048" in r.text
            assert http.post("/topics/small/messages", json={"messages": [{"value": "z" * 2048}]}).status_code == 200
            r = http.post("/topics/large/messages", json={"messages": [{"value": "z" * (3 << 20)}]})
            assert r.status_code == 200, r.text
            assert http.post("/topics", json={"name": "viarest", "max_message_bytes": 100}).status_code == 201
            assert http.post("/topics/viarest/messages", json={"messages": [{"value": "z" * 101}]}).status_code == 413
        k = RawKafka(server.kafka_port)
        assert k.produce("viarest", 0, encode_records(0, [b"x" * 101], timestamps=[1_000]))[0] == 10
        k.close()
    finally:
        assert server.stop() == 0, server.log()


def test_group_session_and_rebalance_timeouts_are_bounded(tmp_path):
    server = KafkaServer(tmp_path / "data").start()  # the defaults: 6 s to 30 min, as Kafka's

    def join(session_ms: int, rebalance_ms: int) -> int:
        body = (Writer().string("g-bounds").int32(session_ms).int32(rebalance_ms).string("").string("consumer")
                .array(1).string("range").bytes_(b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"))
        k = RawKafka(server.kafka_port)
        try:
            r = k.request(11, 1, bytes(body.b))  # JoinGroup v1
            return r.int16()
        finally:
            k.close()

    try:
        assert join(1_000, 60_000) == 26            # INVALID_SESSION_TIMEOUT: below the minimum
        assert join(3_600_000, 60_000) == 26        # above the maximum
        assert join(10_000, 86_400_000) == 26       # a rebalance timeout of a day
        c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "g-ok", "session.timeout.ms": 6000})
        c.subscribe(["t-bounds"])
        c.poll(1)  # a client within the bounds joins as before
        c.close()
    finally:
        assert server.stop() == 0, server.log()
