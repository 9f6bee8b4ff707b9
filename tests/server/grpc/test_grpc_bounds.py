"""The gRPC front's bounds, attacked with raw HTTP/2 frames and real stubs on a real server."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from grpc_server_proc import GrpcServer

grpc = pytest.importorskip("grpc")


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


FORGED = b'INJECTED\n{"level":"error","msg":"forged"}\x1b[31mRED\x1b[0m'


def test_a_peers_goaway_text_never_reaches_the_log(tmp_path):
    """Before: the gRPC C core logged a GOAWAY's debug data raw, at INFO, on stderr: anyone
    reaching the port could add lines (a forged JSON record) and terminal escape codes.
    (GRPC_VERBOSITY=INFO: as an operator's environment may say; the tests' is ERROR.)"""
    s = GrpcServer(tmp_path / "data", "--log-format", "json", env={"GRPC_VERBOSITY": "INFO"}).start()
    try:
        with socket.create_connection(("127.0.0.1", s.grpc_port)) as c:
            c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b""))
            c.sendall(_frame(7, 0, 0, struct.pack(">II", 0, 2) + FORGED))
            c.settimeout(5)
            try:
                while c.recv(65536):
                    pass
            except (TimeoutError, ConnectionResetError):
                pass
        time.sleep(0.5)  # the server's handling of the frame is its own (nothing to wait on)
    finally:
        assert s.stop() == 0, s.log()
    log = s.log()
    assert "INJECTED" not in log and "forged" not in log and "\x1b" not in log, log
