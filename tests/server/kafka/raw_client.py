"""A few raw Kafka requests for tests that need exact control (sequence numbers, bad frames)."""

from __future__ import annotations

import socket
import struct

from socket_reads import recv_exact

from vqs.server.kafka.codec import Reader, Writer


class RawKafka:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)

    def recv_frame(self) -> bytes | None:
        head = recv_exact(self.sock, 4)
        if head is None:
            return None
        return recv_exact(self.sock, struct.unpack(">i", head)[0])

    def request(self, api_key: int, version: int, body: bytes) -> Reader:
        self.corr += 1
        w = Writer().int16(api_key).int16(version).int32(self.corr).string("raw-test")
        self.send_frame(bytes(w.b) + body)
        resp = self.recv_frame()
        assert resp is not None, "connection closed"
        r = Reader(resp)
        assert r.int32() == self.corr
        return r

    def flex_request(self, api_key: int, version: int, body: bytes) -> Reader:
        """A request of a flexible version: header v2 (tagged fields), response header v1."""
        self.corr += 1
        w = Writer().int16(api_key).int16(version).int32(self.corr).string("raw-test").tags()
        self.send_frame(bytes(w.b) + body)
        resp = self.recv_frame()
        assert resp is not None, "connection closed"
        r = Reader(resp)
        assert r.int32() == self.corr
        r.tagged_fields()
        return r

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1) -> tuple[int, int]:
        """Produce v7; returns (error code, base offset)."""
        body = (Writer().string(None).int16(acks).int32(10_000).array(1).string(topic).array(1)
                .int32(partition).bytes_(records))
        r = self.request(0, 7, bytes(body.b))
        assert r.int32() == 1
        r.string()
        assert r.int32() == 1
        r.int32()
        err = r.int16()
        return err, r.int64()

    def init_producer_id(self) -> tuple[int, int]:
        r = self.request(22, 1, bytes(Writer().string(None).int32(60_000).b))
        r.int32()
        assert r.int16() == 0
        return r.int64(), r.int16()

    def topic_id(self, name: str) -> bytes:
        """Topic ``name``'s id, as Metadata v12 answers it (zeros: no such topic)."""
        w = Writer().compact_array(1)
        w.b += bytes(16)
        w.compact_string(name).tags()
        r = self.flex_request(3, 12, bytes(w.boolean(False).boolean(False).tags().b))
        r.int32()  # throttle
        for _ in range(r.compact_array_len(0)):  # brokers
            r.int32(), r.compact_string(), r.int32(), r.compact_string(), r.tagged_fields()
        r.compact_string(), r.int32()  # cluster id, controller
        assert r.compact_array_len(0) == 1
        err, got, tid = r.int16(), r.compact_string(), r.raw(16)
        assert got == name
        return bytes(16) if err else tid
