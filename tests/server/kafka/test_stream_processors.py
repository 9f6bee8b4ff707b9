"""A stateful stream processor, unmodified, against ``vqs serve --kafka-port``:
a Quix Streams application (confluent-kafka underneath) keeps its state in a
compacted changelog topic it creates itself; the test runs the application,
throws its local state away, runs it again and checks the state came back
from the changelog (the counts go on, not restart).

The tool runs in its own environment (``make tool-envs``: .venv-tools/NAME,
pinned in apps/NAME-requirements.txt), since Quix Streams pins a
confluent-kafka older than ours.
"""

from __future__ import annotations

import json
import shutil
import subprocess
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
