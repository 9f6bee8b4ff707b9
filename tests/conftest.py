"""Shared test helpers (kept small: fixtures every test package may use)."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
        fd = os.open(self.filler + "2", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
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
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"\0" * (64 << 10))
            return False
        except OSError:
            return True
        finally:
            os.close(fd)
            os.unlink(probe)


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB tmpfs at ``tmp_path/disk`` (root only: skipped with the reason
    otherwise); always unmounted afterwards."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
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
