"""The gRPC front's bounds, attacked with raw HTTP/2 frames and real stubs on a real server."""

from __future__ import annotations

import os
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
            # a PING after it: its ACK (or the connection's end) says the server has read the
            # GOAWAY (frames of a connection are handled in order)
            c.sendall(_frame(6, 0, 0, b"goaway-1"))
            c.settimeout(30)
            buf = b""
            try:
                while _frame(6, 1, 0, b"goaway-1") not in buf and (got := c.recv(65536)):
                    buf += got
            except ConnectionResetError:
                pass
    finally:
        assert s.stop() == 0, s.log()
    log = s.log()
    assert "INJECTED" not in log and "forged" not in log and "\x1b" not in log, log


def _peak_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    s = GrpcServer(tmp_path_factory.mktemp("vqs-grpc-bounds") / "data", "--token", "sekrit").start()
    yield s
    assert s.stop() == 0, s.log()


def test_an_unauthenticated_request_is_refused_before_it_is_read(guarded):
    """Before: a 50 MB request without a token was received and decoded (~+140 MiB peak)
    before the token was checked."""
    with grpc.insecure_channel(guarded.target, options=[("grpc.max_send_message_length", -1)]) as ch:
        call = ch.unary_unary("/vqs.v1.Records/Produce")
        before = _peak_mib(guarded.proc.pid)
        with pytest.raises(grpc.RpcError) as e:
            call(b"\x0a" + b"\xff" * 50_000_000, timeout=30)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert _peak_mib(guarded.proc.pid) - before < 20


@pytest.mark.parametrize("method,streaming", [("/vqs.v1.Records/Produce", False),
                                              ("/vqs.v1.Records/ProduceStream", True)])
def test_a_malformed_request_is_invalid_argument_in_plain_words(guarded, method, streaming):
    """Before: UNKNOWN, "Unexpected <class 'google.protobuf.message.DecodeError'>: Error parsing
    message with type 'vqs.v1.ProduceRequest'"."""
    md = [("authorization", "Bearer sekrit")]
    with grpc.insecure_channel(guarded.target) as ch:
        with pytest.raises(grpc.RpcError) as e:
            if streaming:
                list(ch.stream_stream(method)(iter([b"\xff\xff\xff"]), metadata=md, timeout=10))
            else:
                ch.unary_unary(method)(b"\xff\xff\xff", metadata=md, timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert "DecodeError" not in e.value.details() and "vqs.v1" not in e.value.details()


def test_connections_past_max_connections_are_closed_at_accept(tmp_path):
    """Before: the gRPC listener had no cap on connections (only on calls in progress), so
    idle connections could take every descriptor of the process."""
    s = GrpcServer(tmp_path / "data", "--max-connections", "3").start()
    opts = [("grpc.use_local_subchannel_pool", 1)]  # one connection per channel, none shared
    chans = []
    try:
        for _ in range(3):
            ch = grpc.insecure_channel(s.target, options=opts)
            grpc.channel_ready_future(ch).result(timeout=10)
            chans.append(ch)
        extra = grpc.insecure_channel(s.target, options=opts)
        with pytest.raises(grpc.FutureTimeoutError):
            grpc.channel_ready_future(extra).result(timeout=2)
        extra.close()
        chans.pop().close()
        deadline = time.monotonic() + 10
        while True:  # the server sees the close a moment later
            again = grpc.insecure_channel(s.target, options=opts)
            try:
                grpc.channel_ready_future(again).result(timeout=1)
                break
            except grpc.FutureTimeoutError:
                again.close()
                assert time.monotonic() < deadline, "a freed place was never given to a new connection"
        chans.append(again)
    finally:
        for ch in chans:
            ch.close()
        assert s.stop() == 0, s.log()


def _h2_open(port: int, source: str) -> socket.socket | None:
    """A raw HTTP/2 connection from ``source`` that the server answered (its SETTINGS), or None
    when the server closed it instead."""
    c = socket.socket()
    c.bind((source, 0))
    c.connect(("127.0.0.1", port))
    c.settimeout(10)
    try:
        c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b""))
        if c.recv(9):
            return c
    except (ConnectionResetError, BrokenPipeError):
        pass
    c.close()
    return None


def test_connections_from_one_address_are_capped_and_others_served(tmp_path):
    """Before: gRPC capped connections in total only (the C core has no per-address knob): one
    address could hold every place, idle, and no other client could connect."""
    s = GrpcServer(tmp_path / "data", "--max-connections-per-client", "3").start()
    held = []
    try:
        for _ in range(3):
            c = _h2_open(s.grpc_port, "127.0.0.2")
            assert c is not None
            held.append(c)
        assert _h2_open(s.grpc_port, "127.0.0.2") is None  # the fourth from that address: closed
        with grpc.insecure_channel(s.target) as ch:  # another address (127.0.0.1) is served
            from grpc_health.v1 import health_pb2, health_pb2_grpc

            answer = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        held.pop().close()
        deadline = time.monotonic() + 10
        while (again := _h2_open(s.grpc_port, "127.0.0.2")) is None:  # the server sees the close a moment later
            assert time.monotonic() < deadline, "a freed place was never given to a new connection"
        held.append(again)
    finally:
        for c in held:
            c.close()
        assert s.stop() == 0, s.log()
    assert "grpc: refused 1 connection(s) over max_connections_per_client" in s.log()


def test_a_killed_servers_core_socket_directory_is_removed_by_the_next_start(tmp_path):
    import subprocess
    import sys

    from vqs.server.grpc.front import _sweep_stale_socket_dirs

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"vqs-grpc-{gone.pid}-abc"
    dead.mkdir()
    (dead / "core.sock").write_bytes(b"")
    alive = tmp_path / f"vqs-grpc-{os.getpid()}-def"
    alive.mkdir()
    other = tmp_path / "vqs-grpc-notapid-x"
    other.mkdir()
    _sweep_stale_socket_dirs(str(tmp_path))
    assert not dead.exists()
    assert alive.exists() and other.exists()
