"""The batch body's compression codecs (spec: docs/FORMAT.md, "Record batch"): an id per codec,
and for each one a compressor and a bounded decompressor.

Invariant: a decompressor never yields, nor allocates for, more than the batch header's
``body_length + 1`` bytes, whatever the compressed frame declares: a decompression bomb
costs at most the size the header admits, which the batch decoder bounds first.
"""

from __future__ import annotations

import zlib

from ..errors import ConfigError

CODEC_NONE = 0
CODEC_ZSTD = 1
CODEC_LZ4 = 2
CODEC_GZIP = 3
CODECS = {None: CODEC_NONE, "none": CODEC_NONE, "zstd": CODEC_ZSTD, "lz4": CODEC_LZ4, "gzip": CODEC_GZIP}
CODEC_NAMES = {CODEC_NONE: None, CODEC_ZSTD: "zstd", CODEC_LZ4: "lz4", CODEC_GZIP: "gzip"}


def codec_id(compression: str | None) -> int:
    """The codec id of a compression setting (None, "zstd", "lz4", "gzip")."""
    try:
        return CODECS[compression]
    except KeyError:
        raise ConfigError(
            f"compression={compression!r} is not supported; use None, 'zstd', 'lz4' or 'gzip'"
        ) from None


_zstd_c = None
_zstd_d = None


def _zstd_compress(raw: bytes) -> bytes:
    global _zstd_c
    if _zstd_c is None:
        import zstandard

        _zstd_c = zstandard.ZstdCompressor(level=3)
    return _zstd_c.compress(raw)


def _zstd_decompress(raw, size: int) -> bytes:
    """At most ``size + 1`` bytes: a frame that claims or yields more than the header's
    body_length is refused before anything large is allocated."""
    global _zstd_d
    import zstandard

    if _zstd_d is None:
        _zstd_d = zstandard.ZstdDecompressor()
    declared = zstandard.frame_content_size(raw)
    if declared not in (-1, size):
        raise ValueError(f"zstd frame declares {declared} bytes, header says {size}")
    if declared == size:
        return _zstd_d.decompress(raw)  # allocates exactly the header's body_length
    return _zstd_d.stream_reader(bytes(raw)).read(size + 1)


def _lz4_compress(raw: bytes) -> bytes:
    import lz4.frame

    return lz4.frame.compress(raw, store_size=True)


def _lz4_decompress(raw, size: int) -> bytes:
    """The frame's declared content size must be the header's body_length (checked first)."""
    import lz4.frame

    raw = bytes(raw)
    declared = lz4.frame.get_frame_info(raw)["content_size"]
    if declared != size:
        raise ValueError(f"lz4 frame declares {declared} bytes, header says {size}")
    return lz4.frame.decompress(raw)


def _gzip_compress(raw: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: one gzip member (RFC 1952)
    return c.compress(raw) + c.flush()


def _gzip_decompress(raw, size: int) -> bytes:
    """One gzip member and nothing after it, inflated to at most ``size + 1`` bytes (gzip
    declares no size up front: the bound is the inflater's)."""
    d = zlib.decompressobj(31)
    out = d.decompress(raw, size + 1)
    if len(out) > size:
        raise ValueError(f"the gzip member holds more than the header's {size} bytes")
    if not d.eof:
        raise ValueError("the gzip member is truncated")
    if d.unused_data:
        raise ValueError("bytes follow the gzip member")
    return out


#: a codec's two halves: one entry per codec id but CODEC_NONE
COMPRESS = {CODEC_ZSTD: _zstd_compress, CODEC_LZ4: _lz4_compress, CODEC_GZIP: _gzip_compress}
DECOMPRESS = {CODEC_ZSTD: _zstd_decompress, CODEC_LZ4: _lz4_decompress, CODEC_GZIP: _gzip_decompress}
