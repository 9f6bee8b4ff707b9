"""Kafka's record-batch compression codecs (gzip, snappy raw or xerial-framed, lz4 frame,
zstd) and the errors of a produced batch.

Invariant: decompression never makes more than its ``cap`` of output (the largest body the
server accepts, ``max_body_bytes``): a batch that would inflate past it, a decompression
bomb, is refused (``MESSAGE_TOO_LARGE``) after at most ``cap`` bytes of work, its size read
from the codec's header where it has one (snappy) and otherwise from a bounded stream.
"""

from __future__ import annotations

from ...errors import VQSError

XERIAL = b"\x82SNAPPY\x00"
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
#: a v2 batch header's size, and where its attributes' low byte lies
_HEAD_SIZE = 61
_ATTRS_LOW = 22


class CorruptBatch(VQSError):
    """A produced batch that cannot be decoded (CRC, length, codec, record layout)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code  # CORRUPT_MESSAGE unless said otherwise


def decompress(codec: int, data: bytes, cap: int) -> bytes:
    """``data`` decompressed, never more than ``cap`` bytes of output made: a batch that would
    inflate past it (a decompression bomb) is refused after at most ``cap`` bytes of work."""
    try:
        if codec == 1:
            return _bounded_gzip(data, cap)
        if codec == 2:
            import cramjam

            if data[:8] == XERIAL:
                out = bytearray()
                p = 16
                while p + 4 <= len(data):
                    n = int.from_bytes(data[p : p + 4], "big")
                    chunk = data[p + 4 : p + 4 + n]
                    _check_size(len(out) + cramjam.snappy.decompress_raw_len(chunk), cap)
                    out += bytes(cramjam.snappy.decompress_raw(chunk))
                    p += 4 + n
                return bytes(out)
            _check_size(cramjam.snappy.decompress_raw_len(data), cap)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == 3:
            import lz4.frame

            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=cap + 1)
            _check_size(len(out), cap)
            if not d.eof:
                raise ValueError("the lz4 frame ends early")
            return out
        if codec == 4:
            import io

            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
            parts, size = [], 0
            while True:
                chunk = reader.read(min(cap + 1 - size, 1 << 20))
                if not chunk:
                    return b"".join(parts)
                size += len(chunk)
                _check_size(size, cap)
                parts.append(chunk)
    except CorruptBatch:
        raise
    except Exception as e:  # the codecs' own errors
        raise CorruptBatch(f"{CODEC_NAMES[codec]} data does not decompress: {e}") from e
    raise CorruptBatch(f"unknown compression codec {codec}", code=76)  # UNSUPPORTED_COMPRESSION_TYPE


def _check_size(size: int, cap: int) -> None:
    if size > cap:
        raise CorruptBatch(f"the batch decompresses to more than {cap} bytes, the largest the server "
                           "accepts (max_body_bytes)", code=10)  # MESSAGE_TOO_LARGE


def _bounded_gzip(data: bytes, cap: int) -> bytes:
    import zlib

    out = bytearray()
    rest = data
    while rest:  # gzip members back to back, as GZIPInputStream reads them
        d = zlib.decompressobj(wbits=31)
        out += d.decompress(rest, cap + 1 - len(out))
        _check_size(len(out), cap)
        if d.unconsumed_tail:  # output stopped at the bound with input left: more than cap
            _check_size(cap + 1, cap)
        if not d.eof:
            raise ValueError("the gzip stream ends early")
        rest = d.unused_data
    return bytes(out)


def is_compressed(data: bytes) -> bool:
    """Whether the first batch of a Produce partition's ``records`` is compressed (attributes
    at byte 21): such a batch is decoded off the listener's loop."""
    return len(data) >= _HEAD_SIZE and bool(data[_ATTRS_LOW] & 7)


def compress(codec: int, raw: bytes) -> bytes:
    """``raw`` compressed with Kafka codec ``codec`` (Fetch answers, tests)."""
    import cramjam

    if codec == 1:
        return bytes(cramjam.gzip.compress(raw))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(raw))
    if codec == 3:
        return bytes(cramjam.lz4.compress(raw))
    if codec == 4:
        return bytes(cramjam.zstd.compress(raw))
    raise CorruptBatch(f"unknown compression codec {codec}", code=76)
