"""``vqs group reset-offsets``, ``vqs group delete`` and ``vqs queue peek``: the same results
against a server and on a data directory (the command runs in-process: cli_helpers.run_vqs)."""

from __future__ import annotations

import json
import os

import pytest
from cli_helpers import run_vqs

from vqs import Broker


def _vqs(*args, where, input: bytes | None = None):
    return run_vqs(*args, *where, input=input)


@pytest.fixture
def unique(request):
    """A name unique to the test (the package's server is shared)."""
    import time

    return f"n{os.getpid() % 1000}-{time.monotonic_ns() % 10_000_000}"


@pytest.fixture(params=["server", "data-dir"])
def where(request, srv, tmp_path):
    if request.param == "server":
        return ["--url", srv.url]
    return ["--data-dir", str(tmp_path / "data")]


def _seed(where, topic, queue):
    assert _vqs("topic", "create", topic, "-p", 2, where=where).returncode == 0
    for part in (0, 1):
        p = _vqs("produce", topic, "--partition", part, where=where, input=b"".join(b"m%d\n" % i for i in range(10)))
        assert p.returncode == 0, p.stderr
    assert _vqs("queue", "create", queue, where=where).returncode == 0
    for body in ("a", "b", "c"):
        assert _vqs("queue", "send", queue, body, where=where).returncode == 0


def test_reset_offsets_plans_then_executes_and_delete_forgets(where, unique):
    topic, group, queue = f"t-{unique}", f"g-{unique}", f"q-{unique}"
    _seed(where, topic, queue)
    p = _vqs("group", "reset-offsets", group, "--topic", topic, "--to-offset", 4, "--json", where=where)
    plan = json.loads(p.stdout)
    assert not plan["executed"] and [r["new_offset"] for r in plan["partitions"]] == [4, 4]
    assert b"--execute" in p.stderr
    assert group not in _vqs("group", "list", where=where).stdout.decode().split()  # a plan commits nothing
    p = _vqs("group", "reset-offsets", group, "--topic", topic, "--to-latest", "--partition", 1, "--execute",
             where=where)
    assert p.returncode == 0, p.stderr
    p = _vqs("group", "reset-offsets", group, "--topic", topic, "--shift-by", -3, "--execute", "--json", where=where)
    assert [(r["committed"], r["new_offset"]) for r in json.loads(p.stdout)["partitions"]] == [(None, 0), (10, 7)]
    p = _vqs("group", "reset-offsets", group, "--topic", topic, "--to-datetime", "2000-01-01T00:00:00Z", "--json",
             where=where)
    assert [r["new_offset"] for r in json.loads(p.stdout)["partitions"]] == [0, 0]  # everything is newer
    p = _vqs("group", "reset-offsets", group, "--topic", topic, where=where)
    assert p.returncode == 2 and b"exactly one of" in p.stderr
    doc = json.loads(_vqs("group", "describe", group, "--json", where=where).stdout)
    assert {(r["partition"], r["committed"]) for r in doc["partitions"]} == {(0, 0), (1, 7)}
    assert _vqs("group", "delete", group, where=where).returncode == 0
    assert group not in _vqs("group", "list", where=where).stdout.decode().split()
    p = _vqs("group", "delete", group, where=where)
    assert p.returncode == 1 and b"has no committed offsets" in p.stderr


def test_peek_shows_pending_messages_and_changes_nothing(where, unique):
    topic, queue = f"t-{unique}", f"q-{unique}"
    _seed(where, topic, queue)
    rows = [json.loads(ln) for ln in _vqs("queue", "peek", queue, where=where).stdout.splitlines()]
    assert [r["body"] for r in rows] == ["a", "b", "c"] and {r["state"] for r in rows} == {"visible"}
    assert all(r["receive_count"] == 0 for r in rows)
    page2 = _vqs("queue", "peek", queue, "--from", rows[0]["offset"] + 1, "--max", 1, where=where).stdout
    assert [json.loads(ln)["body"] for ln in page2.splitlines()] == ["b"]
    got = [json.loads(ln) for ln in _vqs("queue", "receive", queue, where=where).stdout.splitlines()]
    assert got[0]["body"] == "a" and got[0]["receive_count"] == 1  # the peeks counted no delivery
    rows = [json.loads(ln) for ln in _vqs("queue", "peek", queue, where=where).stdout.splitlines()]
    assert rows[0]["state"] == "in_flight" and rows[0]["receive_count"] == 1


def test_the_embedded_and_remote_peek_have_one_shape(srv, tmp_path):
    import vqs

    with vqs.Client(srv.url) as c:
        c.create_queue("shape-q").send("x")
        [p] = c.queue("shape-q").peek()
    with Broker(str(tmp_path / "d")) as b:
        b.create_queue("shape-q").send("x")
        [e] = b.queue("shape-q").peek()
    assert type(p) is type(e) and p._fields == e._fields
    assert (p.message.body, p.state, p.receive_count, p.message.offset, p.message.receipt_handle) == \
        (e.message.body, e.state, e.receive_count, e.message.offset, e.message.receipt_handle)


def test_redrive_moves_a_dead_letter_queue_back(where, unique):
    src, dlq = f"src-{unique}", f"dlq-{unique}"
    assert _vqs("queue", "create", dlq, where=where).returncode == 0
    p = _vqs("queue", "create", src, "--dead-letter-queue", dlq, "--max-receive-count", 1, where=where)
    assert p.returncode == 0, p.stderr
    for body in ("x", "y"):
        assert _vqs("queue", "send", src, body, where=where).returncode == 0
    for _ in range(2):  # received once, released: the next receive moves them to the DLQ
        _vqs("queue", "receive", src, "--max", 10, "--visibility-timeout", 0, where=where)
    peek = [json.loads(ln)["body"] for ln in _vqs("queue", "peek", dlq, where=where).stdout.splitlines()]
    assert sorted(peek) == ["x", "y"]
    p = _vqs("queue", "redrive", dlq, where=where)
    assert p.returncode == 0 and b"moved 2 message(s)" in p.stderr, p.stderr
    assert _vqs("queue", "peek", dlq, where=where).stdout == b""
    back = [json.loads(ln)["body"] for ln in _vqs("queue", "peek", src, where=where).stdout.splitlines()]
    assert sorted(back) == ["x", "y"]


def test_redrive_says_which_messages_stay_and_how_to_move_them(where, unique):
    """A message sent to the dead-letter queue directly has no source to go back to: it stays,
    and the command says so and names --to, which moves it."""
    src, dlq, other = f"src-{unique}", f"dlq-{unique}", f"other-{unique}"
    for q in (dlq, other):
        assert _vqs("queue", "create", q, where=where).returncode == 0
    p = _vqs("queue", "create", src, "--dead-letter-queue", dlq, where=where)
    assert p.returncode == 2 and b"--dead-letter-queue and --max-receive-count go together" in p.stderr, p.stderr
    p = _vqs("queue", "create", src, "--dead-letter-queue", dlq, "--max-receive-count", 3, where=where)
    assert p.returncode == 0, p.stderr
    assert _vqs("queue", "send", dlq, "direct", where=where).returncode == 0
    p = _vqs("queue", "redrive", dlq, where=where)
    assert p.returncode == 0 and b"moved 0 message(s)" in p.stderr, p.stderr
    assert b"1 message(s) stayed in " + dlq.encode() in p.stderr and b"--to QUEUE" in p.stderr, p.stderr
    p = _vqs("queue", "redrive", dlq, "--to", other, where=where)
    assert p.returncode == 0 and b"moved 1 message(s)" in p.stderr and b"stayed" not in p.stderr, p.stderr
    assert [json.loads(ln)["body"] for ln in _vqs("queue", "peek", other, where=where).stdout.splitlines()] == ["direct"]
