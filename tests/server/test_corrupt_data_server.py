"""Corruption in the server's own stored data is the server's fault, said alike on every front: a
read of a damaged batch is 500 ``corrupt_data`` over REST (naming the topic and partition, never a
path), DATA_LOSS over gRPC, CORRUPT_MESSAGE over Kafka (as Kafka answers a corrupt log's read);
logged at error, a line a minute per damaged place; ``vqs consume --url`` exits 4 as ``vqs
consume --data-dir`` does. A client's corrupt produce body stays the client's: 400 ``corrupt_batch``."""

from __future__ import annotations

import glob
import os
import socket
import struct
import subprocess
import sys

import httpx
import pytest
from socket_reads import recv_exact
from vqs_server_proc import ServerProcess, free_port

from vqs.client import Client
from vqs.record import decode_batch
from vqs.server.kafka.codec import Reader, Writer


def _kafka_fetch_error(port: int, topic: str, offset: int) -> int:
    """The error code of a Fetch v11 of partition 0 of ``topic`` from ``offset``."""
    w = Writer().int16(1).int16(11).int32(1).string("t")
    w.int32(-1).int32(0).int32(1).int32(1 << 20).int8(0).int32(0).int32(-1)
    w.array(1).string(topic).array(1).int32(0).int32(-1).int64(offset).int64(-1).int32(1 << 20)
    w.array(0).string("")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(w.b)) + bytes(w.b))
        r = Reader(recv_exact(s, struct.unpack(">i", recv_exact(s, 4))[0]))
    assert r.int32() == 1  # correlation id
    r.int32()
    assert r.int16() == 0
    r.int32()
    assert r.array_len() == 1 and r.string() == topic and r.array_len() == 1
    assert r.int32() == 0
    return r.int16()


def test_a_damaged_stored_batch_is_a_server_error_on_every_front(tmp_path):
    grpc = pytest.importorskip("grpc")
    from vqs.server.grpc.gen import vqs_pb2, vqs_pb2_grpc

    kafka, grpc_port = free_port(), free_port()
    server = ServerProcess(tmp_path / "data", "--flush", "always", "--kafka-port", str(kafka),
                           "--grpc-port", str(grpc_port)).start()
    try:
        with Client(server.url) as c:
            c.create_topic("damaged")
            prod = c.producer()
            for _ in range(3):  # one stored batch per request: offsets 0-4, 5-9, 10-14
                prod.send_batch("damaged", [b"x" * 1000] * 5, partition=0)
        [path] = glob.glob(os.path.join(server.data_dir, "topics", "damaged", "0", "*.log"))
        data = open(path, "rb").read()
        second = decode_batch(data, 0).size_bytes
        with open(path, "r+b") as f:  # a flipped byte in the second batch's values
            f.seek(second + 200)
            f.write(bytes([data[second + 200] ^ 0xFF]))
        for _ in range(2):
            r = httpx.get(f"{server.url}/topics/damaged/messages?partition=0&offset=5&limit=1", timeout=30)
            assert r.status_code == 500, r.text
            err = r.json()["error"]
            assert err["code"] == "corrupt_data" and err["type"] == "CorruptRecordError"
            assert "topic 'damaged' partition 0" in err["message"] and server.data_dir not in r.text
        # a client's corrupt body is the client's error
        r = httpx.post(f"{server.url}/topics/damaged/messages?partition=0", content=b"\x00" * 70,
                       headers={"content-type": "application/vnd.vqs.batch"}, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["code"] == "corrupt_batch", r.text
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
            with pytest.raises(grpc.RpcError) as e:
                vqs_pb2_grpc.RecordsStub(ch).Fetch(vqs_pb2.FetchRequest(topic="damaged", partition=0, offset=5,
                                                                        max_records=1), timeout=10)
            assert e.value.code() == grpc.StatusCode.DATA_LOSS
            assert "topic 'damaged' partition 0" in e.value.details() and server.data_dir not in e.value.details()
        assert _kafka_fetch_error(kafka, "damaged", 5) == 2  # CORRUPT_MESSAGE
        p = subprocess.run([sys.executable, "-m", "vqs.cli", "consume", "damaged", "--partition", "0", "--offset",
                            "5", "--max", "1", "--url", server.url], capture_output=True, text=True, timeout=60)
        assert p.returncode == 4, p.stdout + p.stderr
        assert "topic 'damaged' partition 0" in p.stderr and "Traceback" not in p.stderr
        log = server.wait_log("ERROR", "CorruptRecordError")
        assert sum("ERROR" in line and "CorruptRecordError" in line for line in log.splitlines()) == 1, log
    finally:
        assert server.stop() == 0, server.log()


def test_a_queue_whose_data_is_damaged_leaves_health_and_metrics_answering(tmp_path):
    """A queue whose message log fails validation when it is opened (a flipped byte in a sealed
    segment, after an unclean stop) cannot be opened; that is latched (LevelDB's rule: its
    recovery is not run again at each access, each logging its warnings), and /health and
    /metrics go on answering: the queue is a failed log there, the others as they are."""
    server = ServerProcess(tmp_path / "data", "--flush", "always").start()
    with Client(server.url) as c:
        q = c.create_queue("cq")
        for i in range(300):
            q.send(b"m%03d" % i + b"x" * 200)
        c.create_queue("fine").send(b"ok")
    server.kill9()
    [seg] = sorted(glob.glob(os.path.join(server.data_dir, "queues", "cq", "messages", "*.log")))[:1]
    with open(seg, "r+b") as f:  # inside the first batch, with batches after it: corruption, not a torn tail
        f.seek(1000)
        b = f.read(1)
        f.seek(1000)
        f.write(bytes([b[0] ^ 0xFF]))
    server.start()
    try:
        for _ in range(5):
            r = httpx.get(f"{server.url}/queues/cq", timeout=30)
            assert r.status_code == 500 and r.json()["error"]["code"] == "corrupt_data", r.text
        h = httpx.get(f"{server.url}/health", timeout=30)
        assert h.status_code == 200, h.text
        storage = h.json()["storage"]
        assert "log_failed" in storage["reasons"] and server.data_dir not in h.text
        assert [(p["kind"], p["name"], p["problem"]) for p in storage["problems"]] == [("queue", "cq", "log_failed")]
        m = httpx.get(f"{server.url}/metrics", timeout=30)
        assert m.status_code == 200
        assert 'vqs_log_failed{kind="queue",name="cq"} 1.0' in m.text
        assert 'vqs_queue_messages{queue="fine",state="visible"} 1.0' in m.text
        # the queue's recovery ran once, not once per access
        assert server.log().count("CorruptRecordError") <= 2, server.log()
    finally:
        server.stop()
