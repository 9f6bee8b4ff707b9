"""The files of a HybridQueue directory, and the check of its metadata file.

::

    {path}/
      .lock         one process owns the queue (storage.dir_lock)
      hybrid.json   {"format": 1, "serializer": name}: written once, at creation
      hybrid.ckpt   the consumed position (checkpoint.py)
      log/          the disk tier: a storage Log of serialized items

Invariant: a queue is reopened only with the format it was written in and,
for the built-in serializers, the serializer it was written with (a
mismatch is a ConfigError naming the right one, never a decoding error later).
"""

from __future__ import annotations

import json
import os

from ..errors import ConfigError
from ..storage import atomic_write
from .serializers import Serializer

FORMAT = 1
META = "hybrid.json"
CKPT = "hybrid.ckpt"
LOG_DIR = "log"


def check_meta(path: str, serializer: Serializer) -> None:
    """Check ``hybrid.json`` against this open, or write it for a new queue."""
    p = os.path.join(path, META)
    if os.path.exists(p):
        try:
            with open(p, "rb") as f:
                meta = json.loads(f.read())
            fmt, stored = meta["format"], meta["serializer"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{p} is unreadable ({e}); is {path} a HybridQueue?") from e
        if fmt != FORMAT:
            raise ConfigError(f"{p}: format {fmt!r} is not supported (this VQS reads {FORMAT})")
        if serializer.builtin and stored in ("pickle", "json", "msgpack", "raw") and stored != serializer.name:
            raise ConfigError(
                f"serializer={serializer.name!r}: the queue in {path} was written with "
                f"serializer={stored!r}; open it with that serializer"
            )
    else:
        atomic_write(p, json.dumps({"format": FORMAT, "serializer": serializer.name}).encode())
