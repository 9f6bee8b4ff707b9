"""Crash-safe file primitives, through the filesystem seam (vqs/disk/fs.py).

Invariant: after ``atomic_write(path, data)`` returns, a crash leaves the old or the new
content at ``path``, never a mix, and the rename is durable; a failed write leaves no temp
file behind (removing it never replaces the error), and a full disk raises DiskFullError.
"""

from __future__ import annotations

import os

from ..disk import fs
from ..errors import DiskFullError
from .file_cache import CACHE


def fsync_dir(path: str) -> None:
    """Make creations, renames and deletions in directory ``path`` durable."""
    fd = CACHE.open_fd(path, os.O_RDONLY | os.O_DIRECTORY)  # out of descriptors: TooManyOpenFiles
    try:
        fs.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``; no space: DiskFullError."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise_if_disk_full(e, path)
        raise


def raise_if_disk_full(e: BaseException, path: str, doing: str = "creating", then: str = "") -> None:
    """Raise DiskFullError naming ``path`` if ``e`` is ENOSPC or EDQUOT; else return."""
    if isinstance(e, OSError) and e.errno in fs.NO_SPACE:
        raise DiskFullError(f"{doing} {path} failed: the disk is full ({e.strerror}){then}", path=path) from e


def rename_aside(src: str, dst: str) -> None:
    """``os.rename(src, dst)`` of a directory before it is removed; no space even for that
    (btrfs under a spent quota): DiskFullError, nothing changed."""
    try:
        fs.rename(src, dst)
    except OSError as e:
        raise_if_disk_full(e, src, "deleting", "; nothing was deleted, try again once there is room")
        raise


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: write a temp file, fsync, rename, fsync the dir."""
    tmp = f"{path}.tmp"
    fd = None
    try:
        fd = CACHE.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        view = memoryview(data)
        while view:
            n = fs.write(fd, view)
            view = view[n:]
        fs.fsync(fd)
        done, fd = fd, None
        os.close(done)
        fs.replace(tmp, path)
    except BaseException as e:
        if fd is not None:
            os.close(fd)
        _discard(tmp)
        raise_if_disk_full(e, path, "writing")
        raise
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def _discard(tmp: str) -> None:
    """Remove ``tmp`` on an error path, keeping the error being handled."""
    try:
        fs.unlink(tmp)
    except OSError:
        pass


def remove_files(*paths: str) -> None:
    """Unlink each of ``paths`` that exists."""
    for p in paths:
        try:
            fs.unlink(p)
        except FileNotFoundError:
            pass


def write_all(fd: int, parts: list, nbytes: int = -1) -> int:
    """Write every buffer in ``parts`` to ``fd`` (writev, short writes resumed); return the bytes.
    ``nbytes``: their total where the caller knows it (the common case is then one writev)."""
    n = 0
    if nbytes > 0 and len(parts) <= 1024:  # IOV_MAX
        n = fs.writev(fd, parts)
        if n == nbytes:
            return n
    # (zero-length buffers would make writev report 0 written for them forever)
    parts = [p for p in parts if memoryview(p).nbytes]
    total = 0
    for p in parts:
        total += memoryview(p).nbytes
    i = 0  # parts[i:] are left to write, the first ``n`` bytes of them written by the last writev
    while True:
        while n and i < len(parts):
            size = memoryview(parts[i]).nbytes
            if n >= size:
                n -= size
                i += 1
            else:
                parts[i] = memoryview(parts[i]).cast("B")[n:]
                n = 0
        if i == len(parts):
            break
        n = fs.writev(fd, parts[i:i + 1024])  # IOV_MAX
    return total
