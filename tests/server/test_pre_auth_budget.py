"""The server-wide pre-authentication budget (vqs/server/byte_budget.py), against a real server.

Before: each front bounded what one connection may hold before its credential
is checked (a Kafka frame of 512 KiB before SASL, an SQS body of 4.25 MiB before
its signature), but nothing bounded their sum over many client addresses.
"""

from __future__ import annotations

import socket
import struct
import time

import httpx
import pytest
from vqs_server_proc import ServerProcess, free_port

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

TOKEN = "pre-auth-token"
AKID, SECRET = "AKIDPREAUTH", "pre-auth-secret"
FRAME = 512 << 10  # the largest frame before SASL authentication
BUDGET = 2 * FRAME + (8 << 10)  # two such frames, and room for small ones only


def _kafka(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _api_versions(c: socket.socket) -> bytes:
    """An ApiVersions v0 round trip (allowed before authentication)."""
    head = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    c.sendall(struct.pack(">i", len(head)) + head)
    size = struct.unpack(">i", c.recv(4))[0]
    body = b""
    while len(body) < size:
        body += c.recv(size - len(body))
    return body


def _closed(c: socket.socket, within: float) -> bool:
    c.settimeout(within)
    try:
        return c.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_bytes_held_before_authentication_are_capped_across_fronts(tmp_path):
    kafka_port = free_port()
    s = ServerProcess(tmp_path / "data", "--token", TOKEN, "--sigv4-key", f"{AKID}:{SECRET}",
                      "--kafka-port", str(kafka_port),
                      # the held frames stay unfinished for the test's length
                      env={"VQS_MAX_PRE_AUTH_BYTES": str(BUDGET), "VQS_KAFKA_FRAME_TIMEOUT_S": "60"}).start()
    sqs = boto3.client("sqs", endpoint_url=s.url, region_name="us-east-1", aws_access_key_id=AKID,
                       aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 1}))
    holders = []
    try:
        q = sqs.create_queue(QueueName="pre-auth")["QueueUrl"]
        for _ in range(2):  # two unauthenticated Kafka connections hold a whole frame each
            c = _kafka(kafka_port)
            c.sendall(struct.pack(">i", FRAME) + b"\x00\x12")
            holders.append(c)
        probe = _kafka(kafka_port)  # answered after the two size prefixes above were read
        assert _api_versions(probe)[4:6] == b"\x00\x00"
        over = _kafka(kafka_port)  # a third such frame: past the budget, closed at once
        over.sendall(struct.pack(">i", FRAME))
        assert _closed(over, 5.0)  # (before: held until kafka_frame_timeout_s)
        with pytest.raises(ClientError) as e:  # an SQS body awaiting its signature: 503
            sqs.send_message(QueueUrl=q, MessageBody="x" * (100 << 10))
        assert e.value.response["Error"]["Code"] == "ServiceUnavailable"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        r = httpx.post(s.url + "/console/login", data={"token": TOKEN})  # a login form: 503
        assert r.status_code == 503, r.text
        # the authenticated are not affected: REST with the token, a small SQS request
        assert httpx.get(s.url + "/topics", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert sqs.send_message(QueueUrl=q, MessageBody="small")["MessageId"]
        holders.pop().close()  # one frame given back: the large body is taken again
        deadline = time.monotonic() + 10
        while True:
            try:
                sqs.send_message(QueueUrl=q, MessageBody="x" * (100 << 10))
                break
            except ClientError as err:  # until the server has seen the close
                assert err.response["Error"]["Code"] == "ServiceUnavailable"
                assert time.monotonic() < deadline, "the budget was not given back"
                time.sleep(0.05)
        probe.close()
    finally:
        for c in holders:
            c.close()
        assert s.stop() == 0, s.log()
    log = s.log()
    # logged once (a line a minute at most, with the count left out), never a secret
    assert log.count("pre-authentication budget spent") == 1, log
    assert "refused 524288 bytes of a kafka request" in log
    assert TOKEN not in log and SECRET not in log
