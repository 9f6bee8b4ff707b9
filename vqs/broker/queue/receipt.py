"""Receipt handles: opaque, tamper-evident, tied to one delivery of one message.

A handle is 48 lowercase hex digits encoding 24 bytes::

    offset u64 LE | delivery nonce u64 LE | tag 8 bytes

``tag`` is a MAC of (offset, nonce) under the queue's secret (32 random bytes
made when the queue is created). With ``s = nonce % 8``, it is bytes
``8*s .. 8*s+8`` of ``BLAKE2b-512(secret || (offset - s) u64 LE || (nonce - s) u64 LE)``
(personalization ``vqs-receipt-v2``; offset arithmetic mod 2**64): one hash
yields the tags of 8 deliveries whose offsets and nonces advance together, as
those of one receive do, and each (offset, nonce) owns exactly one 8-byte slice.
(A prefix MAC is sound for BLAKE2, which has no length extension; 48 bytes are
one compression.) Handles made with the earlier construction (keyed BLAKE2b-64
of the 16 bytes, key = secret) are still accepted.

A handle cannot be forged or altered (a guess succeeds with probability at
most 2**-63), nor used on another queue or on a re-created queue of the same
name. The nonce identifies one delivery: every receive of a message draws a
new one. What a valid handle may still do (on a standard queue, every handle
ever issued for a message acts on it; FIFO queues take only the current
delivery's) is the queue's rule (vqs.broker.queue.core), and which handles
are of messages lost in a crash is told by the receipt epochs
(vqs.broker.queue.leases). Clients must treat handles as opaque strings.
"""

from __future__ import annotations

import struct
from hashlib import blake2b
from hmac import compare_digest

from ...errors import ReceiptHandleIsInvalid

_BODY = struct.Struct("<QQ")
HANDLE_LEN = 48
PERSON = b"vqs-receipt-v2"
_M64 = (1 << 64) - 1

#: a handle's 24 bytes (hex-encoded: the handle) as three u64 LE words: offset,
#: nonce, and the tag read as a u64 LE. The layout is this codec's; a receive's
#: hot loop packs ``HANDLE_WORDS.pack(offset, nonce, words[i]).hex()`` with the
#: words ``run_tags`` gave it, inline (a call per message there costs ~10%).
HANDLE_WORDS = _WORDS = struct.Struct("<QQQ")
_TAG_WORDS: dict = {}


def _tag_words(nblocks: int) -> struct.Struct:
    """Struct reading ``nblocks`` 64-byte tag blocks as u64 LE words."""
    s = _TAG_WORDS.get(nblocks)
    if s is None:
        s = _TAG_WORDS[nblocks] = struct.Struct("<%dQ" % (8 * nblocks))
    return s


class ReceiptCodec:
    """One queue's handles (its secret); used under the queue's lock (``run_handles``
    keeps the last tag block it hashed). The handle layout is this class's alone:
    callers make handles with ``encode`` (one) or ``run_handles`` (a run)."""

    __slots__ = ("_last", "_legacy", "_mac")

    def __init__(self, secret: bytes):
        if len(secret) < 16:
            raise ValueError("receipt secret must be at least 16 bytes")
        self._mac = blake2b(secret[:64], digest_size=64, person=PERSON)
        self._legacy = blake2b(key=secret[:64], digest_size=8)
        self._last = (-1, -1, b"")  # (offset, nonce, block) of the last block run_tags hashed

    def _block(self, offset: int, nonce: int) -> bytes:
        """The 64-byte block of tags of (offset + i, nonce + i), i < 8 (nonce % 8 == 0)."""
        h = self._mac.copy()
        h.update(_BODY.pack(offset & _M64, nonce))
        return h.digest()

    def run_tags(self, offset: int, nonce: int, n: int) -> tuple[tuple[int, ...], int]:
        """The tags of the ``n`` deliveries ``(offset + i, nonce + i)``, ``i < n`` (one
        receive's run of fresh messages) as u64 LE words: ``(words, first)``, delivery
        ``i``'s at ``words[first + i]``; its handle is ``HANDLE_WORDS.pack(offset + i,
        nonce + i, words[first + i]).hex()``, equal to ``encode``'s. One hash per 8
        deliveries, and the last block of the previous run, which often starts this
        one, is not hashed again."""
        sh = nonce & 7
        bo, bn = offset - sh, nonce - sh
        co, cn, cd = self._last
        if co == bo and cn == bn:
            blocks = [cd]
            j = 8
        else:
            blocks = []
            j = 0
        block = self._block
        while j < sh + n:
            blocks.append(block(bo + j, bn + j))
            j += 8
        self._last = (bo + j - 8, bn + j - 8, blocks[-1])
        k = len(blocks)
        return (_TAG_WORDS.get(k) or _tag_words(k)).unpack(b"".join(blocks)), sh

    def run_handles(self, offset: int, nonce: int, n: int) -> list[str]:
        """The handles of a run (``run_tags``), for callers off the hottest loop."""
        words, sh = self.run_tags(offset, nonce, n)
        pack = _WORDS.pack
        return [pack(offset + i, nonce + i, words[sh + i]).hex() for i in range(n)]

    def tag(self, offset: int, nonce: int) -> bytes:
        s = nonce & 7
        t = 8 * s
        return self._block(offset - s, nonce - s)[t:t + 8]

    def encode(self, offset: int, nonce: int) -> str:
        return (_BODY.pack(offset, nonce) + self.tag(offset, nonce)).hex()

    def decode(self, handle: object) -> tuple[int, int]:
        """(offset, nonce) of a handle made by this codec; else ReceiptHandleIsInvalid."""
        if handle.__class__ is not str or len(handle) != HANDLE_LEN:
            raise ReceiptHandleIsInvalid(handle)
        try:
            raw = bytes.fromhex(handle)
        except ValueError:
            raise ReceiptHandleIsInvalid(handle) from None
        if not handle.islower() and not handle.isdigit():
            raise ReceiptHandleIsInvalid(handle)
        offset, nonce = _BODY.unpack_from(raw)
        tag = raw[16:]
        if not compare_digest(self.tag(offset, nonce), tag):
            h = self._legacy.copy()
            h.update(raw[:16])
            if not compare_digest(h.digest(), tag):
                raise ReceiptHandleIsInvalid(handle)
        return offset, nonce
