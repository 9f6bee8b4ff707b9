"""The HybridQueue's consumed-position checkpoint: two checksummed slots, in place.

``hybrid.ckpt`` holds two 64-byte slots. Each write goes to the slot the
previous write did not use (alternating by sequence number), with one
``pwrite``; the reader takes the valid slot (magic, version, CRC-32C) with the
highest sequence number. A torn or lost write therefore falls back to the
previous checkpoint, never to garbage.

Slot layout, little-endian::

    0   magic      4s   b"VQHC"
    4   version    u16  1
    6   flags      u16  bit 0: written by close() (the counters are exact)
    8   seq        u64  write sequence number
    16  read_off   u64  first log offset not yet consumed
    24  end_off    u64  log end offset when written
    32  disk_bytes u64  serialized bytes of the items in [read_off, end_off)
    40  reserved   20 bytes of zeros
    60  crc        u32  CRC-32C of bytes 0..59

A ``pwrite`` survives a process crash (kill -9) as soon as it returns (it is in
the page cache); :meth:`Checkpoint.sync` (fsync) makes it survive power loss.

A new file is written with both slots zeroed (invalid) at creation, so later
writes overwrite space the file already has: checkpoints go on on a full disk
(a queue that cannot be created for want of space raises DiskFullError then).
On a copy-on-write filesystem (btrfs) an overwrite takes new space: there a
checkpoint is a control write, which the space governor (vqs.disk.space)
keeps room for; a write the kernel still refuses raises DiskFullError (the
previous slot stays valid) and hybrid_queue.py takes nothing (durable get)
or skips it.
"""

from __future__ import annotations

import errno
import os
import struct
from typing import NamedTuple

import crc32c as _crc32c

from ..disk import fs
from ..errors import DiskFullError
from ..storage import fsync_dir

MAGIC = b"VQHC"
VERSION = 1
FLAG_CLEAN = 1
SLOT_SIZE = 64
_BODY = struct.Struct("<4sHHQQQQ20x")
_CRC = struct.Struct("<I")
assert _BODY.size == 60
_crc = _crc32c.crc32c


class State(NamedTuple):
    seq: int
    read_off: int
    end_off: int
    disk_bytes: int
    clean: bool


def _decode(buf: bytes) -> State | None:
    if len(buf) < SLOT_SIZE:
        return None
    (crc,) = _CRC.unpack_from(buf, 60)
    if _crc(buf[:60]) != crc:
        return None
    magic, version, flags, seq, read_off, end_off, disk_bytes = _BODY.unpack_from(buf, 0)
    if magic != MAGIC or version != VERSION:
        return None
    return State(seq, read_off, end_off, disk_bytes, bool(flags & FLAG_CLEAN))


class Checkpoint:
    """Open (creating if needed) the checkpoint file at ``path``."""

    def __init__(self, path: str):
        self.path = path
        created = not os.path.exists(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(self._fd).st_size < 2 * SLOT_SIZE:
                # allocate the two slots now (zeros: no valid slot), never at a write
                size = os.fstat(self._fd).st_size
                os.pwrite(self._fd, bytes(2 * SLOT_SIZE - size), size)
                os.fsync(self._fd)
        except OSError as e:
            os.close(self._fd)
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(f"creating {path} failed: the disk is full ({e.strerror})",
                                    path=path) from e
            raise
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(path)))
        raw = os.pread(self._fd, 2 * SLOT_SIZE, 0)
        slots = [_decode(raw[i * SLOT_SIZE:(i + 1) * SLOT_SIZE]) for i in (0, 1)]
        valid = [s for s in slots if s is not None]
        self.state: State | None = max(valid, key=lambda s: s.seq) if valid else None
        self._seq = self.state.seq if self.state else 0

    def write(self, read_off: int, end_off: int, disk_bytes: int, *, clean: bool = False) -> None:
        """Record the consumed position (one pwrite; see module doc)."""
        seq = self._seq + 1
        body = _BODY.pack(MAGIC, VERSION, FLAG_CLEAN if clean else 0, seq,
                          read_off, end_off, max(0, disk_bytes))
        data, pos = body + _CRC.pack(_crc(body)), (seq & 1) * SLOT_SIZE
        try:
            fs.pwrite(self._fd, data, pos)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(f"writing {self.path} failed: the disk is full ({e.strerror})",
                                    path=self.path) from e
            raise
        self._seq = seq

    def sync(self) -> None:
        fs.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
