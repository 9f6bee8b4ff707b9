"""Serializers of the HybridQueue: how items become bytes on the disk tier.

The memory tier keeps live objects; an item is serialized only when it goes to
disk (spill, close, or every put when ``durable=True``). A serializer is any
object with ``dumps(obj) -> bytes`` and ``loads(bytes) -> obj``; four are built
in by name:

==========  ==================================================================
``pickle``  (default) any picklable object; protocol 5
``json``    JSON values (dict, list, str, int, float, bool, None); compact UTF-8
``msgpack`` msgpack values, bytes kept apart from str; needs ``pip install msgpack``
``raw``     bytes-like items only (``bytes``); what goes in is what comes out
==========  ==================================================================

``"bytes"`` is an alias of ``"raw"``.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from functools import partial
from typing import Any

from ..errors import ConfigError, SerializationError

BUILTIN = ("pickle", "json", "msgpack", "raw")
_ALIASES = {"bytes": "raw"}


class Serializer:
    """A named pair of functions; ``dumps`` must return ``bytes``."""

    __slots__ = ("name", "dumps", "loads", "builtin", "accepts_buffers")

    def __init__(self, name: str, dumps: Callable[[Any], bytes], loads: Callable[[bytes], Any],
                 builtin: bool, accepts_buffers: bool = False):
        self.name = name
        self.dumps = dumps
        self.loads = loads
        self.builtin = builtin
        #: loads() takes a memoryview and keeps no reference to it (read without a copy)
        self.accepts_buffers = accepts_buffers

    def __repr__(self) -> str:
        return f"Serializer({self.name!r})"


def _raw_dumps(obj) -> bytes:
    if obj.__class__ is bytes:
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    raise TypeError(f"serializer='raw' stores bytes-like items, not {type(obj).__name__}")


def _raw_loads(data: bytes) -> bytes:
    return data


_json_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _json_dumps(obj) -> bytes:
    return _json_encode(obj).encode("utf-8")


def _custom(obj) -> Serializer:
    dumps, loads = obj.dumps, obj.loads
    name = getattr(obj, "name", None)
    if not isinstance(name, str):
        name = getattr(obj, "__name__", None) or type(obj).__qualname__

    def checked_dumps(item):
        data = dumps(item)
        if data.__class__ is bytes:
            return data
        if isinstance(data, str):
            return data.encode("utf-8")
        if isinstance(data, (bytes, bytearray, memoryview)):
            return bytes(data)
        raise TypeError(f"serializer {name!r}: dumps returned {type(data).__name__}, not bytes")

    return Serializer(f"custom:{name}", checked_dumps, loads, False)


def resolve(spec) -> Serializer:
    """Turn the ``serializer=`` setting into a Serializer (ConfigError if unusable)."""
    if isinstance(spec, Serializer):
        return spec
    if isinstance(spec, str):
        name = _ALIASES.get(spec, spec)
        if name == "pickle":
            return Serializer("pickle", partial(pickle.dumps, protocol=5), pickle.loads, True, True)
        if name == "json":
            return Serializer("json", _json_dumps, json.loads, True)
        if name == "raw":
            return Serializer("raw", _raw_dumps, _raw_loads, True)
        if name == "msgpack":
            try:
                import msgpack  # type: ignore[import-not-found]
            except ImportError:
                raise ConfigError(
                    "serializer='msgpack' needs the msgpack package, which is not installed "
                    "(pip install msgpack), or choose serializer='pickle', 'json' or 'raw'"
                ) from None
            return Serializer(
                "msgpack",
                partial(msgpack.packb, use_bin_type=True),
                partial(msgpack.unpackb, raw=False, strict_map_key=False),
                True,
                True,
            )
        raise ConfigError(
            f"serializer={spec!r} is not known: use one of {', '.join(BUILTIN)} "
            "(or 'bytes'), or an object with dumps(obj) -> bytes and loads(bytes) -> obj"
        )
    if callable(getattr(spec, "dumps", None)) and callable(getattr(spec, "loads", None)):
        return _custom(spec)
    raise ConfigError(
        f"serializer={spec!r}: must be one of {', '.join(BUILTIN)} or an object with "
        "callable dumps and loads attributes"
    )


def wrap_error(exc: BaseException, what: str) -> SerializationError:
    err = SerializationError(f"{what}: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err
