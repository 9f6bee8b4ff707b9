"""Stateful stream processors, unmodified, against ``vqs serve --kafka-port``:
a Quix Streams application (confluent-kafka underneath) and a Faust worker
(aiokafka underneath) keep their state in a compacted changelog topic they
create themselves; each test runs the application, loses its local state
(thrown away; Faust's table is in memory), runs it again and checks the state
came back from the changelog (the counts go on, not restart).

Each tool runs in its own environment (``make tool-envs``: .venv-tools/NAME,
pinned in apps/NAME-requirements.txt), since Quix Streams pins a
confluent-kafka older than ours and Faust its own aiokafka.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
APPS = Path(__file__).resolve().parent / "apps"
KEYS = [f"k{i}" for i in range(5)]


def _tool_python(name: str) -> str:
    py = ROOT / ".venv-tools" / name / "bin" / "python"
    if not (py.parent.parent / ".installed").exists():
        pytest.skip(f"{name} has its own environment: run `make tool-envs` (make test does)")
    return str(py)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(server, *names: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1)
                                  for n in names]).values():
        f.result(10)


def _produce(server, topic: str, seqs: range) -> None:
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
    for i in seqs:
        p.produce(topic, key=KEYS[i % len(KEYS)], value=json.dumps({"seq": i}))
    assert p.flush(15) == 0


def _read_all(server, topic: str, seqs: range, timeout: float = 60) -> list[dict]:
    """The JSON values of ``topic`` until every ``seq`` in ``seqs`` was seen (or the timeout)."""
    c = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": _name("reader"),
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[dict] = []
    want = set(seqs)
    deadline = time.monotonic() + timeout
    try:
        while want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(json.loads(m.value()))
                want.discard(out[-1]["seq"])
    finally:
        c.close()
    return out


def _cleanup_policy(server, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([res])[res].result(10)["cleanup.policy"].value


def _changelogs(server, containing: str) -> list[str]:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    return [t for t in admin.list_topics(timeout=10).topics if "changelog" in t and containing in t]


def _check_counts(rows: list[dict], first_run: int, total: int) -> None:
    """Every record was counted, and the second run counted on from the first run's state: the
    first count it wrote for a key is one more than the first run's last (a store that restarted
    empty would write 1). The tools promise at-least-once: a record processed twice after a
    rebalance counts twice, so later counts may run higher, never lower."""
    assert {r["seq"] for r in rows} == set(range(total))
    per_key = first_run // len(KEYS)
    for key in KEYS:
        before = [r["n"] for r in rows if r["key"] == key and r["seq"] < first_run]
        after = [r["n"] for r in rows if r["key"] == key and r["seq"] >= first_run]
        assert max(before) == per_key, (key, before)
        assert after and min(after) == per_key + 1, (key, after)


def test_quix_streams_state_comes_back_from_its_changelog(kafka_server, tmp_path):
    py = _tool_python("quix")
    src, dst, group = _name("quix-in"), _name("quix-out"), _name("quix")
    _create(kafka_server, src, dst)
    state = tmp_path / "state"

    def run(count: int) -> None:
        out = subprocess.run([py, str(APPS / "quix_app.py"), kafka_server.bootstrap, group, str(state), src, dst,
                              str(count)], capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]

    _produce(kafka_server, src, range(50))
    run(50)
    [changelog] = _changelogs(kafka_server, group)
    assert _cleanup_policy(kafka_server, changelog) == "compact"
    shutil.rmtree(state)  # the local store goes: the next run restores it from the changelog
    _produce(kafka_server, src, range(50, 75))
    run(25)
    _check_counts(_read_all(kafka_server, dst, range(75)), 50, 75)


def _start_faust(py: str, server, app_id: str, data_dir: Path, src: str, dst: str, log: Path):
    """A Faust worker, once it says it is ready (its table recovered, its input resumed: the
    app's ``ready`` task, which Faust starts after table recovery), with its log in ``log``."""
    with open(log, "w") as err:
        worker = subprocess.Popen([py, str(APPS / "faust_app.py"), server.bootstrap, app_id, str(data_dir), src,
                                   dst], stdout=subprocess.PIPE, stderr=err, text=True)
    said = threading.Event()  # set by "ready", or by the end of stdout (the worker exited)
    lines: list[str] = []

    def watch() -> None:  # reads stdout to its end (a full pipe would block the worker)
        for line in worker.stdout:
            lines.append(line.strip())
            if lines[-1] == "ready":
                said.set()
        said.set()

    threading.Thread(target=watch, daemon=True).start()
    if not said.wait(120) or "ready" not in lines:
        worker.kill()
        worker.wait()
        pytest.fail("the Faust worker did not get ready:\n" + log.read_text()[-3000:])
    return worker


def test_faust_table_comes_back_from_its_changelog(kafka_server, tmp_path):
    """A Faust table (in memory: nothing of it outlives the worker) counts per key; the worker is
    stopped and started again, and the table comes back from its changelog topic.

    Each run's input is produced once the worker is ready. Faust 0.15.3 loses input records
    that wait while a worker with tables starts (docs/kafka.md, "Stream processors"): when its
    table recovery ends it resumes the input partitions, awaits the seek to the committed
    offsets (during which its fetcher hands aiokafka's prefetched input records to the agent's
    queue) and then clears every agent queue (``flow_control.resume()``), records whose offsets
    it has already counted as read. That is Faust's, whatever the broker."""
    py = _tool_python("faust")
    src, dst, app_id = _name("faust-in"), _name("faust-out"), _name("faust")
    _create(kafka_server, src, dst)

    def run(seqs: range) -> list[dict]:
        """A worker until every record of ``seqs`` has its count in ``dst``, then stopped as a
        user stops one (SIGTERM: it commits its offsets and leaves the group)."""
        log = tmp_path / f"worker-{seqs.start}.log"
        worker = _start_faust(py, kafka_server, app_id, tmp_path / "data", src, dst, log)
        try:
            _produce(kafka_server, src, seqs)
            rows = _read_all(kafka_server, dst, range(seqs.stop), timeout=120)
        finally:
            worker.terminate()
            rc = worker.wait(60)
        assert {r["seq"] for r in rows} >= set(seqs), log.read_text()[-3000:]
        assert rc == 0, log.read_text()[-3000:]
        return rows

    run(range(50))
    [changelog] = _changelogs(kafka_server, app_id)
    assert _cleanup_policy(kafka_server, changelog) == "compact"
    _check_counts(run(range(50, 75)), 50, 75)
