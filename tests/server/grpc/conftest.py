"""gRPC front fixtures: a real ``vqs serve --grpc-port`` process and grpcio stubs on it."""

from __future__ import annotations

import pytest

grpc = pytest.importorskip("grpc", reason="the grpc extra (pip install 'vqs[grpc]') is not installed")

from grpc_server_proc import GrpcServer, Stubs  # noqa: E402


@pytest.fixture(scope="session")
def grpc_server(tmp_path_factory):
    s = GrpcServer(tmp_path_factory.mktemp("vqs-grpc") / "data").start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()


@pytest.fixture(scope="session")
def stubs(grpc_server):
    ch = grpc.insecure_channel(grpc_server.target)
    grpc.channel_ready_future(ch).result(timeout=10)
    st = Stubs(ch)
    st.port = grpc_server.port  # the HTTP port of the same server
    yield st
    ch.close()


@pytest.fixture
def pb():
    from vqs.server.grpc.gen import vqs_pb2

    return vqs_pb2
