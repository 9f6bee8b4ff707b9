"""The gRPC front's security: the HTTP server's bearer tokens, the loopback rule, TLS; and
what `vqs serve --grpc-port` says when it cannot start (no grpc extra, a port in use)."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys

import grpc
import pytest
from certs import needs_openssl, self_signed
from grpc_server_proc import GrpcServer, Stubs, wait_http

from vqs.errors import ConfigError
from vqs.server.settings import Settings


def test_tokens_unauthenticated_permission_denied_and_open_health(tmp_path, pb):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    s = GrpcServer(tmp_path / "data", "--token", "s3cret", "--token", "other",
                   env={"VQS_TOKENS": ""}).start(wait=False)
    try:
        wait_http(s.url, headers={})
        ch = grpc.insecure_channel(s.target)
        st = Stubs(ch)
        req = pb.ListTopicsRequest()
        for md, code in ((None, grpc.StatusCode.UNAUTHENTICATED),
                         ((("authorization", "Basic s3cret"),), grpc.StatusCode.UNAUTHENTICATED),
                         ((("authorization", "Bearer wrong"),), grpc.StatusCode.PERMISSION_DENIED)):
            with pytest.raises(grpc.RpcError) as ei:
                st.topics.ListTopics(req, metadata=md)
            assert ei.value.code() == code, md
        with pytest.raises(grpc.RpcError) as ei:  # share groups: the same tokens
            st.share.Receive(pb.ShareReceiveRequest(group="g", member_id="m"))
        assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # a streaming call is refused the same way, before anything is read
        with pytest.raises(grpc.RpcError) as ei:
            list(st.records.Subscribe(pb.SubscribeRequest(topic="t"), timeout=5))
        assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as ei:
            list(st.records.ProduceStream(iter([pb.ProduceRequest(topic="t", values=[b"x"])]),
                                          metadata=(("authorization", "Bearer nope"),)))
        assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
        ok = (("authorization", "Bearer other"),)
        st.topics.CreateTopic(pb.CreateTopicRequest(name="t"), metadata=ok)
        assert st.topics.ListTopics(req, metadata=ok).names == ["t"]
        h = health_pb2_grpc.HealthStub(ch)  # open, as REST's /health
        assert h.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING
        ch.close()
    finally:
        assert s.stop() == 0, s.log()


def test_off_loopback_grpc_needs_bearer_tokens():
    with pytest.raises(ConfigError, match=r"gRPC.*without bearer tokens"):
        Settings(host="0.0.0.0", grpc_port=9000, sigv4_keys={"AKID": "secret"}).check()  # SigV4 is SQS's only
    Settings(host="0.0.0.0", grpc_port=9000, tokens=["t"], sigv4_keys={"AKID": "secret"}).check()
    Settings(host="0.0.0.0", grpc_port=9000, insecure=True).check()
    with pytest.raises(ConfigError, match="grpc_port"):
        Settings(port=9000, grpc_port=9000).check()
    with pytest.raises(ConfigError, match="tls_cert and tls_key"):
        Settings(tls_cert="cert.pem").check()


@needs_openssl
def test_tls_serves_https_and_grpc_with_one_certificate(tmp_path, pb):
    cert, key = self_signed(tmp_path)
    s = GrpcServer(tmp_path / "data", "--tls-cert", cert, "--tls-key", key).start(wait=False)
    try:
        with open(cert, "rb") as f:
            root = f.read()
        wait_http(s.url, verify=ssl.create_default_context(cafile=cert))
        ch = grpc.secure_channel(s.target, grpc.ssl_channel_credentials(root_certificates=root))
        st = Stubs(ch)
        st.topics.CreateTopic(pb.CreateTopicRequest(name="tls"))
        assert st.records.Produce(pb.ProduceRequest(topic="tls", values=[b"x"])).count == 1
        ch.close()
        plain = grpc.insecure_channel(s.target)  # no TLS: refused
        with pytest.raises(grpc.RpcError) as ei:
            Stubs(plain).topics.ListTopics(pb.ListTopicsRequest(), timeout=3)
        assert ei.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        plain.close()
        assert "gRPC 127.0.0.1" in s.log() and "https://127.0.0.1" in s.log()
    finally:
        assert s.stop() == 0, s.log()


def test_without_the_grpc_extra_serve_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['grpc'] = None\n"  # as if grpcio were not installed
            "from vqs.server.run import main\n"
            f"main(['--data-dir', {str(tmp_path / 'data')!r}, '--port', '{_free()}', '--grpc-port', '1', "
            "'--log-format', 'text'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "pip install 'vqs[grpc]'" in r.stderr
    assert not os.path.exists(tmp_path / "data")  # refused before anything was opened


def test_a_grpc_port_in_use_is_refused(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        s = GrpcServer(tmp_path / "data", grpc_port=held.getsockname()[1]).start(wait=False)
        rc = s.proc.wait(60)
        s._log.close()
    assert rc == 3, s.log()
    assert "is in use" in s.log() and "--grpc-port" in s.log()
    assert "add_port" not in s.log()  # one line of ours, not the C core's first
    assert not os.path.exists(tmp_path / "data")


def _free() -> int:
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def test_sigv4_keys_alone_leave_grpc_closed(tmp_path, pb):
    """SigV4 keys grant the SQS API only: with them and no token, every gRPC call but the
    health and reflection services is refused."""
    s = GrpcServer(tmp_path / "data", "--sigv4-key", "AKID:secret", env={"VQS_TOKENS": ""}).start()
    try:
        with grpc.insecure_channel(s.target) as ch:
            for md in (None, (("authorization", "Bearer anything"),)):
                with pytest.raises(grpc.RpcError) as ei:
                    Stubs(ch).topics.CreateTopic(pb.CreateTopicRequest(name="t"), metadata=md)
                assert ei.value.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
    finally:
        assert s.stop() == 0, s.log()
