"""A failing disk, with a real EIO from the kernel (``cuttable_disk``,
tests/conftest.py: ext2 on a loop device whose capacity is cut under the
mounted filesystem, so writeback past the new end fails and fsync returns
EIO; no hook in our code, no device-mapper, which this kernel lacks).

Asserted (docs/library.md, "A failing disk"): the log fails for good
(``Log.failed``; every later write raises ``LogFailedError`` naming the
file), reads of what was written go on, a log on another filesystem is not
affected, and once the device is back a reopen recovers the log with every
record fsynced before the fault and takes appends. Root only (a loop mount);
skipped with the reason elsewhere."""

from __future__ import annotations

import errno

import pytest

from vqs import Log, LogFailedError


@pytest.mark.parametrize("flush", ["always", "interval"])
def test_an_eio_fails_that_log_only_and_a_reopen_recovers_it(cuttable_disk, tmp_path, flush):
    bad_path = str(cuttable_disk.mnt / "bad")
    bad = Log.open(bad_path, flush=flush)
    good = Log.open(str(tmp_path / "good"), flush=flush)
    try:
        before = [b"%04d" % i for i in range(50)]
        for v in before:
            bad.append(v)
            good.append(v)
        bad.flush()
        good.flush()

        cuttable_disk.cut()
        with pytest.raises(LogFailedError) as ei:
            for i in range(2000):  # (interval: the flush's fsync meets it; always: the append's)
                bad.append(b"after %d " % i + b"x" * 1000)
                if flush == "interval":
                    bad.flush()
        cause = ei.value.__cause__
        assert isinstance(cause, OSError) and cause.errno == errno.EIO, repr(cause)
        assert ei.value.path.startswith(bad_path)
        assert bad.failed is not None
        with pytest.raises(LogFailedError) as again:  # failed for good
            bad.append(b"more")
        assert again.value.path.startswith(bad_path)
        assert [r.value for r in bad.read(0, max_records=50)] == before  # reads go on

        good.append(b"unaffected")  # another filesystem's log goes on
        good.flush()
        assert [r.value for r in good.read(50)] == [b"unaffected"]
    finally:
        try:
            bad.close()
        except LogFailedError:
            pass  # (closing a failed log may meet the failed fsync again)
        good.close()

    cuttable_disk.repair()
    bad = Log.open(bad_path, flush=flush)  # recovery validates the tail the fault left
    try:
        got = [r.value for r in bad.read(0, max_records=5000)]
        assert got[:50] == before  # every record fsynced before the fault
        assert all(v.startswith(b"after ") for v in got[50:])  # whatever else survived: whole records
        end = bad.end_offset
        assert bad.append(b"back") == end
        bad.flush()
    finally:
        bad.close()
