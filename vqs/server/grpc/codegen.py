"""Regenerate the gRPC front's Python code from its one ``.proto`` file.

    python -m vqs.server.grpc.codegen [OUT_DIR]     (make grpc-proto)

Runs grpcio-tools' ``protoc`` on ``proto/vqs/v1/vqs.proto`` and writes
``vqs_pb2.py``, ``vqs_pb2.pyi`` and ``vqs_pb2_grpc.py`` into OUT_DIR (default:
``gen/`` beside this file, where they are committed). protoc names the
message module by the proto's path (``from vqs.v1 import vqs_pb2``), which
would collide with the ``vqs`` package itself: the one import line is made
relative. tests/server/grpc/test_codegen.py regenerates into a temporary
directory and fails when the committed files differ (a stale checkout).

Needs the dev extra (grpcio-tools); nothing imports this module at run time.
"""

from __future__ import annotations

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "proto")
PROTO = "vqs/v1/vqs.proto"
GEN_DIR = os.path.join(HERE, "gen")
FILES = ("vqs_pb2.py", "vqs_pb2.pyi", "vqs_pb2_grpc.py")
_IMPORT = "from vqs.v1 import vqs_pb2 as vqs_dot_v1_dot_vqs__pb2"
_RELATIVE = "from . import vqs_pb2 as vqs_dot_v1_dot_vqs__pb2"
_SIZE_NOTE = ("# Over 500 lines: generated from proto/vqs/v1/vqs.proto by make grpc-proto "
              "(vqs/server/grpc/codegen.py), a stub and a servicer method per RPC; never edited by hand. "
              "Not split: a hand split would be undone by the next make grpc-proto, and the concepts live in "
              "vqs/server/grpc/*.py (docs/ARCHITECTURE.md).\n")


def generate(out_dir: str = GEN_DIR) -> list[str]:
    """Write the generated modules into ``out_dir``; returns their paths."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as tmp:
        args = ["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"--python_out={tmp}", f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}", PROTO]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {os.path.join(PROTO_ROOT, PROTO)}")
        os.makedirs(out_dir, exist_ok=True)
        written = []
        for name in FILES:
            with open(os.path.join(tmp, "vqs", "v1", name), encoding="utf-8") as f:
                text = f.read()
            if name == "vqs_pb2_grpc.py":
                if _IMPORT not in text:
                    raise SystemExit(f"protoc's {name} no longer imports {_IMPORT!r}: update codegen.py")
                text = text.replace(_IMPORT, _RELATIVE)
                # one stub and one servicer method per RPC: its size is the proto's, not ours to split
                text = _SIZE_NOTE + text
            path = os.path.join(out_dir, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            written.append(path)
    return written


if __name__ == "__main__":
    for p in generate(sys.argv[1] if len(sys.argv) > 1 else GEN_DIR):
        print(p)
