"""Receipt handles: opaque, tamper-evident, tied to one delivery of one message.

A handle is 48 lowercase hex digits encoding 24 bytes::

    offset u64 LE | delivery nonce u64 LE | tag 8 bytes

``tag`` is a keyed BLAKE2b-64 (a MAC) of the first 16 bytes under the queue's
secret (32 random bytes made when the queue is created). A handle cannot be
forged or altered (a guess succeeds with probability 2**-64), nor used on
another queue or on a re-created queue of the same name. The nonce identifies
one delivery: every receive of a message draws a new one, and the queue keeps
the nonce of each message's current delivery, so a handle from an earlier
delivery no longer matches. Clients must treat handles as opaque strings.
"""

from __future__ import annotations

import struct
from hashlib import blake2b
from hmac import compare_digest

from ..errors import ReceiptHandleIsInvalid

_BODY = struct.Struct("<QQ")
HANDLE_LEN = 48


class ReceiptCodec:
    __slots__ = ("_mac",)

    def __init__(self, secret: bytes):
        if len(secret) < 16:
            raise ValueError("receipt secret must be at least 16 bytes")
        self._mac = blake2b(key=secret[:64], digest_size=8)

    def encode(self, offset: int, nonce: int) -> str:
        body = _BODY.pack(offset, nonce)
        h = self._mac.copy()
        h.update(body)
        return (body + h.digest()).hex()

    def decode(self, handle: object) -> tuple[int, int]:
        """(offset, nonce) of a handle made by this codec; else ReceiptHandleIsInvalid."""
        if handle.__class__ is not str or len(handle) != HANDLE_LEN:
            raise ReceiptHandleIsInvalid(handle)
        try:
            raw = bytes.fromhex(handle)
        except ValueError:
            raise ReceiptHandleIsInvalid(handle) from None
        h = self._mac.copy()
        h.update(raw[:16])
        if not compare_digest(h.digest(), raw[16:]) or not handle.islower() and not handle.isdigit():
            raise ReceiptHandleIsInvalid(handle)
        return _BODY.unpack_from(raw)
