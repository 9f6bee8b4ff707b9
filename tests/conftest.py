"""Shared test helpers (kept small: fixtures every test package may use)."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import subprocess
import sys

import pytest

# grpcio >= 1.81's fork handlers restart its epoll poller in a forked child, which can
# abort (SIGABRT, "epoll_wait error: Bad file descriptor") between a Popen with
# preexec_fn and its exec: measured here, 7 of 300 such children with a grpc server
# and channel live in the process, 0 of 400 with fork support off (grpc/grpc#43055).
# The gRPC front's tests run in this process before tests/spark, whose SparkSession
# starts its JVM that way: one aborted launch failed all 146 Spark tests once.
# Nothing in the tests forks to use gRPC in the child, so fork support is off.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # (and its line per fork, "skipping fork() handlers")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The suite's JVMs (the SparkSession's driver, the drivers of jobs and pages run as processes of
# their own, a standalone cluster's daemons and executors) live seconds to minutes on small
# inputs: they run with the client compiler only (C1). C2 pays off on long, hot loops; here its
# compiler threads would only take CPU from the tests. Spark reads the spark.* system property
# of SPARK_SUBMIT_OPTS into the driver's conf, which hands it to a cluster's executors.
_C1 = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{_C1} -Dspark.executor.extraJavaOptions={_C1}")
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", _C1)

# Hypothesis: the "ci" profile (loaded when CI=true) runs fewer examples with no
# deadline (a shared CI runner's timing says nothing about the code); local runs keep
# hypothesis's defaults. Tests that set their own max_examples take
# ``min(N, settings().max_examples)``, so CI's budget bounds them too.
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    _hypothesis_settings = None
if _hypothesis_settings is not None:
    _hypothesis_settings.register_profile("ci", max_examples=20, deadline=None)
    if os.environ.get("CI") == "true":
        _hypothesis_settings.load_profile("ci")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``make test`` runs pytest-xdist with ``--dist loadscope``; here its unit of work is a
    module: a module's tests run in order in one worker, so its fixtures are made once and
    the tests that share a module fixture's state see it. Every test under ``tests/spark/``
    is one unit: one worker, one SparkSession. (xdist's ``loadgroup`` marks cannot do this
    under pytest 9, whose node ids it no longer rewrites.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False  # units in collection order: see below

        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return ModuleScheduling(config, log)


def _unit(nodeid: str) -> str:
    """The unit of work of ``make test``'s scheduler that test ``nodeid`` belongs to."""
    module = nodeid.split("::", 1)[0]
    return "tests/spark/" if module.startswith("tests/spark/") else module


def pytest_collection_modifyitems(config, items):
    """Under ``make test``'s workers the units of work (pytest_xdist_make_scheduler) are
    handed out longest first, so that no long one starts near the end while the other
    workers idle: the units holding a test marked ``slow`` (those that take a minute or
    more), then the rest, each by number of tests (xdist's own order)."""
    if not hasattr(config, "workerinput"):  # (a worker's own ``dist`` option reads "no")
        return
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(_unit(item.nodeid), []).append(item)
    order = sorted(units.values(), key=lambda u: (not any(i.get_closest_marker("slow") for i in u), -len(u)))
    items[:] = [i for u in order for i in u]


@pytest.fixture
def child_env():
    """Environment for child Python processes: the repo on sys.path, unbuffered."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def python():
    return sys.executable


class SmallDisk:
    """A real, small filesystem (tmpfs) mounted for one test. ``fill(n)`` puts an
    ``n``-byte filler file on it; ``free()`` deletes it (the space comes back)."""

    def __init__(self, path: str):
        self.path = path
        self.filler = os.path.join(path, "filler")

    def fill(self, nbytes: int) -> None:
        with open(self.filler, "wb") as f:
            f.write(b"\0" * nbytes)
            f.flush()
            os.fsync(f.fileno())

    def fill_rest(self) -> None:
        """Use up whatever space is left (a second filler file)."""
        try:
            fd = os.open(self.filler + "2", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            return  # not even a new file fits (btrfs under a quota): full already
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)

    def free(self) -> None:
        for p in (self.filler, self.filler + "2"):
            if os.path.exists(p):
                os.unlink(p)

    def is_full(self) -> bool:
        """Whether 64 KiB more cannot be written (the probe file is removed)."""
        probe = os.path.join(self.path, "probe")
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError:
            return True
        try:
            os.write(fd, b"\0" * (64 << 10))
            return False
        except OSError:
            return True
        finally:
            os.close(fd)
            os.unlink(probe)


def _tmpfs(tmp_path, size: str = "3m"):
    """A tmpfs of ``size`` (3 MiB) at ``tmp_path/disk`` (root only: skipped with the reason
    otherwise); always unmounted afterwards. Full means ENOSPC."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield SmallDisk(str(mnt))
    finally:
        r = subprocess.run(["umount", str(mnt)], capture_output=True, text=True)
        if r.returncode != 0:  # something kept a file open: lazy unmount, and fail the test
            subprocess.run(["umount", "-l", str(mnt)])
            pytest.fail(f"{mnt} was busy at unmount (a file left open): {r.stderr.strip()}")


@pytest.fixture
def private_disk(tmp_path):
    """A 64 MiB tmpfs of the test's own: its free space changes only by what the test writes
    (the free space of ``/tmp`` moves with every other test running beside it)."""
    yield from _tmpfs(tmp_path, "64m")


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB tmpfs (``_tmpfs``): a real full filesystem, ENOSPC."""
    yield from _tmpfs(tmp_path)


class QuotaDisk(SmallDisk):
    """A btrfs subvolume limited to 3 MiB by a quota group (``btrfs qgroup
    limit``): writes past the limit fail with EDQUOT, a real one, at write().
    ``free()`` deletes the fillers and raises the limit to 4 MiB more (the
    quota is what a user would raise)."""

    errno = errno.EDQUOT

    def __init__(self, path: str, mnt: str):
        super().__init__(path)
        self.mnt = mnt

    def free(self) -> None:
        super().free()
        # the fillers' space comes back at the transaction commit; changing the
        # limit itself needs a little of it (it can fail with EDQUOT before)
        for attempt in range(5):
            _run_ok(["btrfs", "filesystem", "sync", self.mnt])
            try:
                _run_ok(["btrfs", "qgroup", "limit", "7M", self.path])
                return
            except RuntimeError:
                if attempt == 4:
                    raise


class _TmpfsDisk(SmallDisk):
    errno = errno.ENOSPC


def _run_rc(*cmd):
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True)
    except FileNotFoundError:  # the tool is not installed: the caller skips with this reason
        return subprocess.CompletedProcess(cmd, 127, "", f"{cmd[0]} is not installed")


CUT_SIZE = 16 << 20  # a cuttable disk; ext2 picks 1 KiB blocks and two 8 MiB groups at this size
CUT_KEEP = 4 << 20  # what the cut device keeps: the first group's metadata and the filler below


class CuttableDisk:
    """A failing disk with a real EIO: ext2 (no journal, ``errors=continue``) on
    a loop device whose capacity ``cut()`` shrinks under the mounted filesystem
    (the backing file truncated, ``losetup -c``): every write the kernel sends
    past the new end fails ("attempt to access beyond end of device"), so
    writeback fails and fsync returns EIO. ``repair()`` puts the backing file's
    tail back (a disk that failed and came back holds what it held), unmounts,
    checks and remounts. ``mnt`` is the mount point."""

    def __init__(self, tmp_path):
        self.img, self.mnt, self.tail = tmp_path / "disk.img", tmp_path / "mnt", tmp_path / "tail"
        self.mnt.mkdir()
        self.loop = None
        self.mounted = False

    def setup(self) -> None:
        with open(self.img, "wb") as f:
            f.truncate(CUT_SIZE)
        r = _run_rc("losetup", "-f", "--show", str(self.img))
        if r.returncode:
            pytest.skip(f"no loop device here: {r.stderr.strip()}")
        self.loop = r.stdout.strip()
        r = _run_rc("mkfs.ext2", "-q", "-F", self.loop)
        if r.returncode:
            pytest.skip(f"mkfs.ext2 failed: {r.stderr.strip()}")
        self.mount()
        # the low blocks in use, so that what the logs write later lands past the cut
        with open(self.mnt / "low-filler", "wb") as f:
            f.write(b"\0" * (6 << 20))
        os.sync()  # (ext2 writes its metadata back lazily: all of it on the device before a cut)

    def mount(self) -> None:
        r = _run_rc("mount", "-o", "errors=continue", self.loop, str(self.mnt))
        if r.returncode:
            pytest.skip(f"cannot mount {self.loop}: {r.stderr.strip()}")
        self.mounted = True

    def cut(self) -> None:
        with open(self.img, "rb") as src, open(self.tail, "wb") as dst:
            src.seek(CUT_KEEP)
            shutil.copyfileobj(src, dst)
        os.truncate(self.img, CUT_KEEP)
        assert _run_rc("losetup", "-c", self.loop).returncode == 0

    def repair(self) -> None:
        assert _run_rc("umount", str(self.mnt)).returncode == 0
        self.mounted = False
        with open(self.tail, "rb") as src, open(self.img, "r+b") as dst:
            dst.seek(CUT_KEEP)
            shutil.copyfileobj(src, dst)
        os.truncate(self.img, CUT_SIZE)
        assert _run_rc("losetup", "-c", self.loop).returncode == 0
        r = _run_rc("fsck.ext2", "-f", "-y", self.loop)
        assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: errors corrected (the lost writes)
        self.mount()

    def teardown(self) -> None:
        if self.mounted and _run_rc("umount", str(self.mnt)).returncode:
            _run_rc("umount", "-l", str(self.mnt))
        if self.loop:
            _run_rc("losetup", "-d", self.loop)


@pytest.fixture
def cuttable_disk(tmp_path):
    """A ``CuttableDisk`` at ``tmp_path/mnt`` (root only; skipped with the reason elsewhere)."""
    if os.geteuid() != 0:
        pytest.skip("loop devices and mounts need root")
    disk = CuttableDisk(tmp_path)
    try:
        disk.setup()
        yield disk
    finally:
        disk.teardown()


def _run_ok(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")


def _unavailable(reason: str):
    """Skip with the reason; in CI (root, CI=true) these tests must run: fail."""
    if os.environ.get("CI") == "true" and os.geteuid() == 0:
        pytest.fail(f"CI runs the quota tests: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def btrfs_quota_fs(tmp_path_factory):
    """One 200 MiB btrfs filesystem (a loop-mounted image, quotas enabled) for
    the whole run; tests get a fresh limited subvolume each (``quota_disk``).
    Unmounting frees the loop device (``mount -o loop`` sets autoclear)."""
    if os.geteuid() != 0:
        _unavailable("a btrfs loop mount needs root")
    for tool in ("mkfs.btrfs", "btrfs", "losetup"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} is missing (make test installs btrfs-progs as root)")
    with _loop_mounted(tmp_path_factory, "btrfs", 200 << 20, ["mkfs.btrfs", "-q"]) as mnt:
        _run_ok(["btrfs", "quota", "enable", mnt])
        yield mnt


@contextlib.contextmanager
def _loop_mounted(tmp_path_factory, kind: str, size: int, mkfs: list):
    """A sparse image of ``size`` bytes made by ``mkfs`` and loop-mounted (the
    mount point, a str); unmounted after, its loop device and image gone (a
    failed unmount fails the test). Skips (or, in CI, fails) where it cannot mount."""
    d = tmp_path_factory.mktemp(kind)
    img, mnt = d / "fs.img", d / "mnt"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(size)
    try:
        _run_ok([*mkfs, str(img)])
        _run_ok(["mount", "-o", "loop", str(img), str(mnt)])
    except RuntimeError as e:
        _unavailable(f"cannot mount a {kind} image here: {e}")
    try:
        yield str(mnt)
    finally:
        r = subprocess.run(["umount", str(mnt)], capture_output=True, text=True)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)])
        loops = subprocess.run(["losetup", "-j", str(img)], capture_output=True, text=True).stdout.strip()
        img.unlink()
        assert r.returncode == 0 and not loops, f"{mnt}: umount {r.stderr.strip()!r}, loop left: {loops!r}"


_subvolumes = itertools.count()


@pytest.fixture
def quota_disk(btrfs_quota_fs):
    """A btrfs subvolume limited to 3 MiB (``QuotaDisk``): full means EDQUOT.
    Deleted afterwards; a file left open under it fails the test."""
    sv = os.path.join(btrfs_quota_fs, f"sv{next(_subvolumes)}")
    _run_ok(["btrfs", "subvolume", "create", sv])
    _run_ok(["btrfs", "qgroup", "limit", "3M", sv])
    try:
        yield QuotaDisk(sv, btrfs_quota_fs)
    finally:
        held = [p for p in (os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd"))
                if p.startswith(sv + os.sep)]
        _run_ok(["btrfs", "subvolume", "delete", sv])
        assert not held, f"files left open under {sv}: {held}"


@pytest.fixture(scope="session")
def xfs_fs(tmp_path_factory):
    """One 300 MiB xfs filesystem (a loop-mounted sparse image; xfs has no
    smaller size) for the whole run; ``xfs_disk`` makes it look 3 MiB large."""
    if os.geteuid() != 0:
        _unavailable("an xfs loop mount needs root")
    for tool in ("mkfs.xfs", "losetup"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} is missing (make test installs xfsprogs as root)")
    with _loop_mounted(tmp_path_factory, "xfs", 300 << 20, ["mkfs.xfs", "-q", "-f"]) as mnt:
        yield mnt


class _XfsDisk(SmallDisk):
    errno = errno.ENOSPC

    def free(self) -> None:
        """(xfs frees a deleted file's blocks in the background: ``statvfs``
        shows them, and a log refused for space takes appends again, only
        after that; ``sync`` waits for it, as a user freeing space would)"""
        super().free()
        os.sync()


_xfs_dirs = itertools.count()


@pytest.fixture
def xfs_disk(xfs_fs):
    """A directory on the shared xfs with 3 MiB left free on the filesystem (a
    ballast file, fallocated, takes the rest): full means ENOSPC, as on xfs.
    Unlike tmpfs and ext4, xfs refuses ``fallocate`` of blocks a file already
    holds when the filesystem has less free space than the range (it reserves
    the whole range's blocks before looking). Removed afterwards; a file left
    open under it fails the test."""
    d = os.path.join(xfs_fs, f"d{next(_xfs_dirs)}")
    os.mkdir(d)
    ballast = os.path.join(xfs_fs, "ballast")
    os.sync()  # (the last test's deleted files: xfs frees their blocks in the background)
    st = os.statvfs(xfs_fs)
    assert st.f_bavail * st.f_frsize > 4 << 20, f"{xfs_fs}: a previous test left files behind"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, st.f_bavail * st.f_frsize - (3 << 20))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        yield _XfsDisk(d)
    finally:
        os.unlink(ballast)
        held = [p for p in (os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd"))
                if p.startswith(d + os.sep)]
        shutil.rmtree(d)
        assert not held, f"files left open under {d}: {held}"


@pytest.fixture(params=["tmpfs", "xfs"])
def enospc_disk(request, tmp_path):
    """``small_disk`` (a 3 MiB tmpfs) and ``xfs_disk`` in turn: the two ways
    ENOSPC is met (xfs also refuses to reserve blocks a file holds, and to
    make any file, while it is full)."""
    if request.param == "xfs":
        yield request.getfixturevalue("xfs_disk")
        return
    yield from _tmpfs(tmp_path)


@pytest.fixture(params=["tmpfs-ENOSPC", "btrfs-EDQUOT", "xfs-ENOSPC"])
def full_disk(request, tmp_path):
    """A small real filesystem that fills up, once per way a disk is full: a
    3 MiB tmpfs (ENOSPC), a btrfs subvolume under a 3 MiB quota (EDQUOT) and
    an xfs with 3 MiB free (ENOSPC; ``xfs_disk``). Same interface as
    ``small_disk``; ``errno`` is the error a write meets."""
    if request.param.startswith("btrfs"):
        yield request.getfixturevalue("quota_disk")
        return
    if request.param.startswith("xfs"):
        yield request.getfixturevalue("xfs_disk")
        return
    for disk in _tmpfs(tmp_path):
        disk.__class__ = _TmpfsDisk
        yield disk
