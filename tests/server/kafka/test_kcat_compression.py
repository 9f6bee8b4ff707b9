"""Debian's kcat (librdkafka 2.0.2) produces every codec compressed on the wire.

Older librdkafka (librdkafka#4956) drops gzip, snappy and lz4 to uncompressed ("Broker does not
support compression type ...: not compressing batch") when the broker's Produce minimum is above 0; the
listener advertises Produce 0-7 for that reason. The server inflates what it is sent and stores
records in its own format, so what proves the codec was used is the request itself: a proxy in
front of the listener (the advertised listener, so every connection goes through it) reads the
attributes of each produced batch.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import uuid

import pytest
from kafka_server_proc import KafkaServer
from socket_reads import recv_exact

from vqs.server.kafka.codec import read_header

ck = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat)")

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class _ProduceRecorder:
    """A TCP proxy that forwards both ways and records (version, batch codec) of every
    Produce request's record batches."""

    def __init__(self):
        self.target = 0
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen()
        self.port = self.lsock.getsockname()[1]
        self.seen: list[tuple[int, int]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(c, s, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(s, c, False), daemon=True).start()

    def _pipe(self, src, dst, upstream: bool):
        try:
            while (head := recv_exact(src, 4)) is not None:
                body = recv_exact(src, int.from_bytes(head, "big"))
                if body is None:
                    break
                if upstream and int.from_bytes(body[:2], "big") == 0:
                    self._record(body)
                dst.sendall(head + body)
        except OSError:
            pass
        finally:
            dst.close()

    def _record(self, frame: bytes) -> None:
        _, version, _, _, r = read_header(frame)
        if version < 3:
            self.seen.append((version, -1))
            return
        r.nullable_string()
        r.int16()
        r.int32()
        for _ in range(r.array_len()):
            r.string()
            for _ in range(r.array_len()):
                r.int32()
                data = r.nullable_bytes() or b""
                p = 0
                while p + 23 <= len(data):  # each batch: base offset, length, ..., attributes at 21
                    self.seen.append((version, int.from_bytes(data[p + 21:p + 23], "big") & 7))
                    p += 12 + int.from_bytes(data[p + 8:p + 12], "big")

    def close(self):
        self.lsock.close()


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    proxy = _ProduceRecorder()
    server = KafkaServer(tmp_path_factory.mktemp("kcat") / "data",
                         env={"VQS_KAFKA_ADVERTISED_LISTENER": f"127.0.0.1:{proxy.port}"})
    proxy.target = server.kafka_port
    server.start()
    yield server, proxy
    proxy.close()
    assert server.stop() == 0, server.log()


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_kcat_sends_every_codec_compressed(proxied, codec):
    server, proxy = proxied
    topic = f"kcat-{codec}-{uuid.uuid4().hex[:8]}"
    lines = "".join(f"{i}:{'compressible text ' * 20}{i}\n" for i in range(200))
    before = len(proxy.seen)
    out = subprocess.run(["kcat", "-b", f"127.0.0.1:{proxy.port}", "-P", "-t", topic, "-K:", "-z", codec],
                         input=lines, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "not compressing" not in out.stderr, out.stderr
    sent = proxy.seen[before:]
    assert sent and all(v >= 3 for v, _ in sent), sent
    assert {c for _, c in sent} == {CODECS[codec]}, sent  # every batch compressed with that codec
    got = subprocess.run(["kcat", "-b", f"127.0.0.1:{proxy.port}", "-C", "-t", topic, "-e", "-f", "%k\\n"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [str(i) for i in range(200)]
