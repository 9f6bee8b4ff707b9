"""Broker: data-dir ownership, lifecycle, settings, retention in the background."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from vqs.broker import Broker
from vqs.errors import ConfigError, InvalidName, LogClosedError, LogLockedError, VQSError

PYTHON = sys.executable


def test_creates_layout(data_dir):
    with Broker(data_dir) as b:
        assert not b.closed
        assert sorted(os.listdir(data_dir)) == [".lock", "groups", "topics"]
        with open(os.path.join(data_dir, ".lock")) as f:
            assert int(f.read()) == os.getpid()
    assert b.closed


def test_second_broker_same_process_fails_naming_pid(data_dir):
    with Broker(data_dir):
        with pytest.raises(LogLockedError) as e:
            Broker(data_dir)
        assert f"pid {os.getpid()}" in str(e.value)
        assert e.value.holder_pid == os.getpid()
    Broker(data_dir).close()  # released at close


def test_a_partition_log_of_a_running_broker_is_refused_to_another_writer(data_dir, tmp_path, child_env):
    """A Broker opens its partitions without locks of their own: a writer in another process
    opening one directly (Log.open) is refused, naming the owner, as a second Broker is (its
    appends would interleave with the owner's and be overwritten: acknowledged records lost);
    a readonly reader still follows it. Likewise a durable HybridQueue's log."""
    from vqs import HybridQueue

    code = (
        "import sys\n"
        "from vqs import Log\n"
        "from vqs.errors import LogLockedError\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        Log.open(path).close()\n"
        "    except LogLockedError as e:\n"
        "        print(e.holder_pid, e.path)\n"
        "    Log.open(path, readonly=True).close()\n"
    )
    hq_dir = str(tmp_path / "hq")
    with Broker(data_dir) as b, HybridQueue(hq_dir, durable=True) as hq:
        b.create_topic("t")
        b.producer().send("t", b"x")
        b.flush()
        hq.put(b"x")
        part = os.path.join(data_dir, "topics", "t", "0")
        p = subprocess.run([PYTHON, "-c", code, part, os.path.join(hq_dir, "log")], env=child_env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.split("\n")[:2] == [f"{os.getpid()} {data_dir}", f"{os.getpid()} {hq_dir}"]
    p = subprocess.run([PYTHON, "-c", code, part], env=child_env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "", p.stderr  # the owner gone: it opens


def test_second_broker_other_process_fails_naming_pid(data_dir, child_env):
    code = (
        "import sys\n"
        "from vqs.broker import Broker\n"
        "from vqs.errors import LogLockedError\n"
        "try:\n"
        f"    Broker({data_dir!r})\n"
        "except LogLockedError as e:\n"
        "    print(e.holder_pid, '|', e)\n"
        "    sys.exit(3)\n"
    )
    with Broker(data_dir):
        p = subprocess.run([PYTHON, "-c", code], env=child_env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr
    pid, msg = p.stdout.split("|", 1)
    assert int(pid) == os.getpid()
    assert f"pid {os.getpid()}" in msg and data_dir in msg


def test_close_is_idempotent_and_blocks_use(data_dir):
    b = Broker(data_dir)
    b.create_topic("t")
    producer = b.producer()
    consumer = b.consumer("t")
    b.close()
    b.close()
    for call in (
        lambda: b.topics(),
        lambda: b.topic("t"),
        lambda: b.create_topic("u"),
        lambda: producer.send("t", b"x"),
        lambda: consumer.poll(),
        lambda: b.groups(),
    ):
        with pytest.raises(LogClosedError):
            call()


def test_context_manager_reopen_keeps_data(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t", partitions=2)
        b.producer().send("t", b"v", partition=1)
    with Broker(data_dir) as b:
        assert b.topics() == ["t"]
        assert b.topic("t").end_offsets() == [0, 1]


def test_unknown_setting_is_a_config_error(data_dir):
    with pytest.raises(ConfigError, match="flsh"):
        Broker(data_dir, flsh="always")
    with pytest.raises(ConfigError):
        Broker(data_dir, retention_check_interval_ms=0)
    # A bad log setting fails when the broker is made (test_a_bad_default_is_refused_when_the_broker_is_made).
    with pytest.raises(ConfigError, match="flush"):
        Broker(data_dir, flush="sometimes")


def test_defaults_reach_the_logs(data_dir):
    with Broker(data_dir, flush="always", segment_bytes=4096, compression="zstd") as b:
        t = b.create_topic("t", segment_bytes=8192)
        log = t.log(0)
        assert log.flush_policy == "always"
        assert log.segment_bytes == 8192  # the topic's own setting wins
        assert t.config == {
            "retention_ms": None,
            "retention_bytes": None,
            "segment_bytes": 8192,
            "compression": "zstd",
            "max_message_bytes": None,  # none of its own: a server applies its max_message_bytes
            "segment_ms": 7 * 86_400_000,
            "cleanup_policy": "delete",  # the cleaner's settings, in force once a topic compacts
            "delete_retention_ms": 86_400_000,
            "min_cleanable_dirty_ratio": 0.5,
            "min_compaction_lag_ms": 0,
            "max_compaction_lag_ms": None,
            "flush": "always",  # the broker's (a topic may have its own: create_topic(flush=))
            "flush_interval_ms": 100,
        }
        assert t.overrides == {"segment_bytes": 8192}


def test_open_failure_releases_lock(data_dir):
    with Broker(data_dir) as b:
        b.create_topic("t")
    # Corrupt the topic metadata: opening fails with a clear error and keeps no lock.
    with open(os.path.join(data_dir, "topics", "t", "topic.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(VQSError, match=r"topic\.json"):
        Broker(data_dir)
    os.remove(os.path.join(data_dir, "topics", "t", "topic.json"))
    Broker(data_dir).close()  # the lock was released


def test_retention_runs_in_background(data_dir, clock):
    with Broker(data_dir, clock=clock, retention_check_interval_ms=20, segment_bytes=1024) as b:
        b.create_topic("old", retention_ms=60_000)
        b.create_topic("keep")
        p = b.producer()
        for _ in range(20):  # many batches -> many segments
            p.send_batch("old", [b"x" * 100] * 3)
            p.send_batch("keep", [b"x" * 100] * 3)
        log = b.topic("old").log(0)
        assert log.segment_count > 3
        clock.advance(120)  # every record is now past retention_ms
        p.send_batch("old", [b"new"])
        deadline = time.monotonic() + 10
        while log.start_offset == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.start_offset > 0
        assert log.segment_count == 1  # only the active segment stays
        assert b.topic("keep").start_offset(0) == 0  # no retention set
        assert b.apply_retention() == 0


def test_close_stops_retention_thread(data_dir):
    import threading

    before = {t.name for t in threading.enumerate()}
    b = Broker(data_dir, retention_check_interval_ms=10)
    b.create_topic("t")
    b.close()
    after = {t.name for t in threading.enumerate()} - before
    assert not [n for n in after if n.startswith("vqs-")]


def test_queue_methods_delegate_to_registry(data_dir):
    from vqs.errors import QueueDoesNotExist

    with Broker(data_dir, visibility_timeout=45, flush="always") as b:
        q = b.create_queue("jobs")
        assert q.get_attributes()["VisibilityTimeout"] == "45"  # a queue default reached it
        b.create_queue("jobs-dlq")
        assert b.queues() == ["jobs", "jobs-dlq"]
        assert b.queues("jobs-") == ["jobs-dlq"]
        assert b.queue("jobs") is q
        q.send(b"work")
        b.delete_queue("jobs-dlq")
        with pytest.raises(QueueDoesNotExist):
            b.queue("jobs-dlq")
        with pytest.raises(InvalidName):
            b.queue("../x")
    assert os.path.isdir(os.path.join(data_dir, "queues", "jobs"))
    with Broker(data_dir) as b:  # queues are recovered at open
        assert b.queues() == ["jobs"]
        assert [m.body for m in b.queue("jobs").receive(max_messages=10)] == [b"work"]
    with pytest.raises(ConfigError, match="visibility_timeut"):
        Broker(data_dir, visibility_timeut=3)


def test_a_locked_data_dir_advises_what_works_for_what_was_opened(tmp_path):
    from vqs import HybridQueue, Log

    with Broker(str(tmp_path / "data")):
        with pytest.raises(LogLockedError) as ei:
            Broker(str(tmp_path / "data"))
        msg = str(ei.value)
        assert "readonly=True" not in msg.split("without the lock")[0]  # Broker takes no readonly flag
        assert "vqs.Client" in msg and "--url" in msg
    q = HybridQueue(str(tmp_path / "hq"))
    try:
        with pytest.raises(LogLockedError) as ei:
            HybridQueue(str(tmp_path / "hq"))
        assert "readonly" not in str(ei.value) and "one owner process" in str(ei.value)
    finally:
        q.close()
    log = Log.open(str(tmp_path / "log"))
    try:
        with pytest.raises(LogLockedError, match=r"Log.open\(path, readonly=True\)"):
            Log.open(str(tmp_path / "log"))
        log.append(b"x")
        log.flush()
        with Log.open(str(tmp_path / "log"), readonly=True) as ro:  # the advice works
            assert [r.value for r in ro.read(0)] == [b"x"]
    finally:
        log.close()


@pytest.mark.parametrize("kw,name", [({"flush": "sometimes"}, "flush"), ({"segment_bytes": "1MB"}, "segment_bytes"),
                                     ({"flush_interval_ms": -5}, "flush_interval_ms"),
                                     ({"compression": "rar"}, "rar"),
                                     ({"visibility_timeout": "x"}, "visibility_timeout")])
def test_a_bad_default_is_refused_when_the_broker_is_made(tmp_path, kw, name):
    """On an empty directory too: a Log setting given as a default was checked only at the
    first topic or queue."""
    with pytest.raises(ConfigError, match=name):
        Broker(str(tmp_path / "d"), **kw)
    assert not os.path.exists(tmp_path / "d" / ".lock")
