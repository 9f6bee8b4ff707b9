"""The log's checkpoint part (log_durability.Checkpoint): its recovery point
only moves forward (a truncating repair aside), and once retired (the log's
close) the interval flusher writes none."""

from vqs.storage import Log
from vqs.storage.log_dir import read_checkpoint
from vqs.storage.log_durability import Checkpoint


def test_recovery_point_only_moves_forward(tmp_path):
    ck = Checkpoint(str(tmp_path), 5.0)
    ck.write(10, 0)
    ck.write(4, 2)  # an older durable end: the recovery point stays
    assert read_checkpoint(str(tmp_path)) == (10, 2)
    assert ck.recovery_point == 10
    ck.lower_to(3, 1)  # a truncating repair lowers it
    assert read_checkpoint(str(tmp_path)) == (3, 1)


def test_retired_checkpoint_ignores_the_flusher(tmp_path):
    ck = Checkpoint(str(tmp_path), 5.0)
    ck.write(7, 0)
    ck.retire()
    ck.write(9, 0, from_flusher=True)  # after close: the directory may have a new owner
    assert read_checkpoint(str(tmp_path)) == (7, 0)
    ck.write(9, 0)
    assert read_checkpoint(str(tmp_path)) == (9, 0)


def test_due_after_the_interval_with_new_durable_records(tmp_path):
    ck = Checkpoint(str(tmp_path), 0.0)
    ck.write(5, 0)
    assert not ck.due(5)
    assert ck.due(6)


def test_close_checkpoints_the_end(tmp_path):
    log = Log.open(tmp_path / "log", flush="interval", flush_interval_ms=60_000)
    for i in range(10):
        log.append(b"v%d" % i)
    log.close()
    assert read_checkpoint(str(tmp_path / "log"))[0] == 10
