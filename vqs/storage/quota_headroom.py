"""Headroom under a btrfs quota: a small ballast file whose deletion lets
writes into reserved blocks go on once the quota group's limit is spent.

Why (measured, kernel 6.18, btrfs under ``btrfs qgroup limit 3M``, the limit
spent by another file): a ``write()`` into blocks that ``fallocate`` reserved
(log_reserve.py) needs no new *data* space on btrfs: a preallocated extent is
written in place (the inode's PREALLOC flag sends its writeback down the
no-copy-on-write path; the group's ``referenced`` bytes do not change over
1 MiB written). What fails is the *metadata* reservation every buffered write
makes first (about one 16 KiB tree node per outstanding extent), which btrfs
checks against the group's limit: with 16 KiB or less left under the limit,
``write()`` raises EDQUOT though its data blocks are ours; with 20 KiB left,
1 MiB is written in place. Marking the files NOCOW (``chattr +C``,
FS_NOCOW_FL) changes nothing: measured side by side, the same writes pass and
fail at the same margins (the no-COW path is taken already); it would also
turn off btrfs's checksums for them. ``ftruncate`` and punching a hole are
refused too (they start a transaction under the quota); ``unlink`` is not
(btrfs lets its transaction fall back on the global reserve, quotas not
enforced).

So where a log reserves space on btrfs (statfs magic ``BTRFS_SUPER_MAGIC``),
a ballast of ``BALLAST_BYTES`` (``posix_fallocate``) is kept on that
filesystem, as ``quota-headroom`` in the directory of the log that made it
(segment listings ignore the name). A write that meets EDQUOT (``write_all``,
durable_file.py) deletes a ballast of its filesystem and retries: the
ballast's bytes return to the quota group at the next transaction commit
(``syncfs`` here; newer kernels also commit on their own before they return
EDQUOT), and each write's metadata reservation is given back at a commit, so
writing into reserved blocks does not use the headroom up.

Invariants:
- **ballast first**: once a ballast of a filesystem was deleted, the log
  allocates nothing new there (a reservation top-up, a new segment file)
  until a ballast stands again (``ready``): the headroom is kept for writes
  into blocks already reserved, and a new ballast is the first thing made
  when space is back;
- a ballast holds nothing anyone reads: a crash at any point leaves none, an
  empty one or a whole one, each harmless (an earlier run's is adopted when
  its log opens, so a directory never holds more than one);
- the write path pays nothing until a write fails with EDQUOT; a top-up pays
  a dict lookup (a ``stat`` on btrfs).

What it does not cover: another writer that takes the freed headroom first
(then the write fails as before: the records wait in their reserved blocks),
a filesystem full to the last block without a quota (ENOSPC), and ZFS or
bcachefs (not measured).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import threading

logger = logging.getLogger("vqs.storage")

BTRFS_SUPER_MAGIC = 0x9123683E
BALLAST_NAME = "quota-headroom"
#: 64 KiB: the metadata reservations of a few writes in one transaction (about
#: 16 KiB each); 24 KiB was measured to do, slowly (a commit per write)
BALLAST_BYTES = 64 << 10

_lock = threading.Lock()
_dirs: dict[str, int | None] = {}  # log directory -> st_dev if on btrfs, else None
_ballasts: dict[int, set[str]] = {}  # st_dev -> ballast paths made or adopted here
_spent: set[int] = set()  # st_dev whose ballast was deleted and not made again yet
_libc = None


def _c():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        except OSError:
            _libc = False
    return _libc


def fs_magic(path: str) -> int | None:
    """The ``statfs`` f_type of ``path``'s filesystem; None where unknown."""
    lib = _c()
    if not lib:
        return None
    buf = ctypes.create_string_buffer(512)  # struct statfs; f_type is its first field (a long)
    try:
        if lib.statfs(os.fsencode(path), buf) == 0:
            return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF
    except (AttributeError, TypeError):
        pass
    return None


def _dev_of(path: str, fd: int) -> int | None:
    """st_dev of the log directory ``path`` when it is on btrfs (cached per
    directory; on first sight an earlier run's ballast there is adopted)."""
    try:
        return _dirs[path]
    except KeyError:
        pass
    dev = None
    if fs_magic(path) == BTRFS_SUPER_MAGIC:
        dev = os.fstat(fd).st_dev  # a btrfs subvolume has its own: one per quota group 0/<id>
        own = os.path.join(path, BALLAST_NAME)
        if os.path.exists(own):
            _ballasts.setdefault(dev, set()).add(own)
    _dirs[path] = dev
    return dev


def ready(path: str, fd: int) -> bool:
    """Before the log in directory ``path`` (``fd``: a file of it) allocates
    new space: on btrfs, make sure a ballast stands on its filesystem (made
    here when none does). False when one is needed and there is no space for
    it: the caller allocates nothing (it has no space either, module doc)."""
    with _lock:
        dev = _dev_of(path, fd)
        if dev is None:
            return True
        have = _ballasts.setdefault(dev, set())
        for p in list(have):
            if os.path.exists(p):
                return True
            have.discard(p)  # its log was deleted
        own = os.path.join(path, BALLAST_NAME)
        try:
            bfd = os.open(own, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError as e:
            return e.errno not in (errno.ENOSPC, errno.EDQUOT)
        try:
            os.posix_fallocate(bfd, 0, BALLAST_BYTES)
        except OSError as e:
            os.close(bfd)
            os.unlink(own)  # (allowed under a spent quota)
            return e.errno not in (errno.ENOSPC, errno.EDQUOT)
        os.close(bfd)
        have.add(own)
        if dev in _spent:
            _spent.discard(dev)
            logger.info("%s: quota headroom made again (%d bytes)", own, BALLAST_BYTES)
        return True


def release_for(fd: int) -> bool:
    """A write to ``fd`` failed with EDQUOT: delete one ballast of its
    filesystem (a registered one, else one beside the file: a log opened on a
    spent quota) and commit, so a retry has the headroom. False when there
    was none (the caller raises as before)."""
    try:
        dev = os.fstat(fd).st_dev
        beside = os.path.join(os.path.dirname(os.readlink(f"/proc/self/fd/{fd}")), BALLAST_NAME)
    except OSError:
        return False
    with _lock:
        have = _ballasts.get(dev, set())
        for p in [*have, beside]:
            have.discard(p)
            try:
                os.unlink(p)
            except FileNotFoundError:
                continue
            except OSError:
                return False
            _spent.add(dev)
            lib = _c()
            if lib:
                lib.syncfs(fd)  # the freed blocks count at the commit (errors: the retry tells)
            logger.warning("%s: the quota is spent; deleted its %d-byte headroom so that writes into "
                           "reserved blocks go on (made again when space is back)", p, BALLAST_BYTES)
            return True
    return False
