"""The gRPC front's test helpers: a real ``vqs serve --grpc-port`` process, stubs, a readiness wait.

A module of its own (not conftest.py): test files import it by a name no other
test package uses.
"""

from __future__ import annotations

import time

import httpx
from vqs_server_proc import ServerProcess, free_port


class GrpcServer(ServerProcess):
    """``python -m vqs.server`` with ``--grpc-port`` on a free port."""

    def __init__(self, data_dir, *args: str, grpc_port: int | None = None, **kw):
        self.grpc_port = grpc_port or free_port()
        super().__init__(data_dir, "--grpc-port", str(self.grpc_port), *args, **kw)

    def fresh_ports(self) -> None:
        super().fresh_ports()
        self.grpc_port = self.fresh_option_port("--grpc-port")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"


def wait_http(url: str, timeout: float = 30, **kw) -> None:
    """Wait until ``url``'s /health/ready answers 200 (``kw``: httpx options, e.g. ``verify``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health/ready", timeout=1, **kw).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} not ready after {timeout} s")


class Stubs:
    def __init__(self, channel):
        from vqs.server.grpc.gen import vqs_pb2_grpc as pbg

        self.channel = channel
        self.topics = pbg.TopicsStub(channel)
        self.records = pbg.RecordsStub(channel)
        self.groups = pbg.GroupsStub(channel)
        self.queues = pbg.QueuesStub(channel)
        self.share = pbg.ShareGroupsStub(channel)
