"""MD5 digests that SQS clients check: of the body and of the message attributes.

AWS's encoding of message attributes (and of message *system* attributes) for
``MD5OfMessageAttributes``: attributes sorted by name; for each, the name, the
data type, a one-byte transport type (1 = String/Number, 2 = Binary) and the
value, each string/bytes item prefixed by its length as a 4-byte big-endian
integer; the MD5 of the concatenation, as lowercase hex.
"""

from __future__ import annotations

import hashlib
import struct

_LEN = struct.Struct(">I")


def md5_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _item(b: bytes) -> bytes:
    return _LEN.pack(len(b)) + b


def md5_of_attributes(attributes: dict) -> str | None:
    """MD5 of SQS message attributes ``{name: {"DataType", "StringValue"|"BinaryValue"}}``.

    ``BinaryValue`` is raw bytes here (the JSON protocol's base64 already decoded).
    Returns None for no attributes (SQS then omits the field).
    """
    if not attributes:
        return None
    parts = []
    for name in sorted(attributes):
        a = attributes[name]
        dtype = a["DataType"]
        parts.append(_item(name.encode("utf-8")))
        parts.append(_item(dtype.encode("utf-8")))
        if dtype.split(".", 1)[0] == "Binary":
            parts.append(b"\x02")
            parts.append(_item(bytes(a["BinaryValue"])))
        else:
            parts.append(b"\x01")
            parts.append(_item(a["StringValue"].encode("utf-8")))
    return hashlib.md5(b"".join(parts), usedforsecurity=False).hexdigest()
