"""Test helper: damage one batch of a segment file on disk, as bit rot would."""

from __future__ import annotations

from vqs.record import scan_batches


def flip_batch_byte(seg_path: str, batch_index: int) -> tuple[int, int, int, bytes]:
    """Flip the last byte of the ``batch_index``-th batch of ``seg_path`` (inside
    its CRC, so its check fails); returns (position, base offset, size, the
    damaged batch's bytes as now on disk)."""
    with open(seg_path, "rb") as f:
        pos, base, size = list(scan_batches(f.read()))[batch_index]
    with open(seg_path, "r+b") as f:
        f.seek(pos + size - 1)
        b = f.read(1)
        f.seek(pos + size - 1)
        f.write(bytes([b[0] ^ 0xFF]))
        f.seek(pos)
        bad = f.read(size)
    return pos, base, size, bad
