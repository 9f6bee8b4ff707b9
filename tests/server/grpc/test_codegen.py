"""The committed generated code (vqs/server/grpc/gen) is what `make grpc-proto` makes from the .proto."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("grpc_tools", reason="grpcio-tools (the dev extra) regenerates the code")

from vqs.server.grpc import codegen


def test_generated_code_is_fresh(tmp_path):
    for path in codegen.generate(str(tmp_path)):
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            fresh = f.read()
        with open(os.path.join(codegen.GEN_DIR, name), encoding="utf-8") as f:
            committed = f.read()
        assert committed == fresh, (f"vqs/server/grpc/gen/{name} is stale: run `make grpc-proto` "
                                    "after changing vqs/server/grpc/proto/vqs/v1/vqs.proto")
