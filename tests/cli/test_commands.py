"""The vqs command against a server URL and against a data directory."""

from __future__ import annotations

import json
import os
import struct

from cli_helpers import run_vqs as vqs

from vqs import Broker as vqs_broker


def test_topic_produce_consume_group_via_url(srv):
    u = ["--url", srv.url]
    assert vqs("topic", "create", "clit", "--partitions", "2", *u).returncode == 0
    p = vqs("topic", "list", "--json", *u)
    assert "clit" in json.loads(p.stdout)
    p = vqs("produce", "clit", "--partition", "1", "--no-progress", *u, input=b"one\ntwo\nthree\n")
    assert p.returncode == 0 and b"sent 3" in p.stderr
    framed = b"".join(struct.pack(">I", len(x)) + x for x in (b"bin\x00ary", b"four"))
    assert vqs("produce", "clit", "--partition", "1", "--framing", "length", "--no-progress", *u,
               input=framed).returncode == 0
    p = vqs("consume", "clit", "--partition", "1", *u)
    assert p.stdout.split(b"\n")[:3] == [b"one", b"two", b"three"]
    p = vqs("consume", "clit", "--partition", "1", "--offset", "3", "--framing", "length", *u)
    assert p.stdout == framed
    p = vqs("consume", "clit", "--group", "g1", "--max", "2", "--framing", "json", *u)
    assert [json.loads(x)["value"] for x in p.stdout.splitlines()] == ["one", "two"]
    p = vqs("group", "describe", "g1", "--json", *u)
    rows = json.loads(p.stdout)["partitions"]
    assert {(r["partition"], r["committed"]) for r in rows} >= {(1, 2)}
    assert "g1" in json.loads(vqs("group", "list", "--json", *u).stdout)
    p = vqs("topic", "describe", "clit", *u)
    assert p.returncode == 0 and b"partition" in p.stdout
    assert vqs("topic", "delete", "clit", "-y", *u).returncode == 0
    p = vqs("topic", "describe", "clit", *u)
    assert p.returncode == 1 and b"does not exist" in p.stderr


def test_queue_commands_via_url(srv):
    u = ["--url", srv.url]
    assert vqs("queue", "create", "cliq", "--visibility-timeout", "60", *u).returncode == 0
    assert vqs("queue", "send", "cliq", "hello", *u).returncode == 0
    p = vqs("queue", "receive", "cliq", "--wait", "1", *u)
    m = json.loads(p.stdout)
    assert m["body"] == "hello" and m["receive_count"] == 1
    assert vqs("queue", "delete-message", "cliq", m["receipt_handle"], *u).returncode == 0
    p = vqs("queue", "describe", "cliq", "--json", *u)
    assert json.loads(p.stdout)["VisibilityTimeout"] == "60"
    assert "cliq" in json.loads(vqs("queue", "list", "--json", *u).stdout)
    assert vqs("queue", "purge", "cliq", *u).returncode == 0
    assert vqs("queue", "delete", "cliq", *u).returncode == 0


def test_data_dir_mode_and_inspect(tmp_path):
    d = str(tmp_path / "data")
    assert vqs("topic", "create", "local", "--data-dir", d).returncode == 0
    assert vqs("produce", "local", "--data-dir", d, "--no-progress", input=b"a\nb\n").returncode == 0
    p = vqs("consume", "local", "--data-dir", d)
    assert p.stdout == b"a\nb\n"
    p = vqs("inspect", d, "--json")
    rep = json.loads(p.stdout)
    assert p.returncode == 0 and rep["records"] == 2 and rep["corrupt"] is False
    p = vqs("inspect", d, "--records")
    assert b"all CRCs verified" in p.stdout and b"value=b'a'" in p.stdout
    seg = next(os.path.join(r, f) for r, _, fs in os.walk(os.path.join(d, "topics")) for f in fs
               if f.endswith(".log") and os.path.getsize(os.path.join(r, f)) > 0)
    b = bytearray(open(seg, "rb").read())
    b[-2] ^= 0xFF
    open(seg, "wb").write(bytes(b))
    p = vqs("inspect", d)
    assert p.returncode == 4 and b"CRC mismatch" in p.stderr
    p = vqs("inspect", seg, "--json")
    assert p.returncode == 4 and json.loads(p.stdout)["corrupt"] is True


def test_topic_create_and_alter_take_a_flush_policy(tmp_path):
    d = str(tmp_path / "data")
    assert vqs("topic", "create", "synced", "--flush", "always", "--data-dir", d).returncode == 0
    p = vqs("topic", "create", "odd", "--flush", "sometimes", "--data-dir", d)
    assert p.returncode != 0 and b"flush" in p.stderr
    with vqs_broker(d) as b:
        assert b.topic("synced").log(0).flush_policy == "always" and "odd" not in b.topics()
    p = vqs("topic", "alter", "synced", "--set", "flush=interval", "--set", "retention_ms=60000", "--data-dir", d)
    assert p.returncode == 0, p.stderr
    assert vqs("topic", "alter", "synced", "--set", "flush=bogus", "--data-dir", d).returncode != 0
    assert vqs("topic", "alter", "synced", "--data-dir", d).returncode != 0  # nothing to change
    with vqs_broker(d) as b:
        t = b.topic("synced")
        assert t.overrides == {"flush": "interval", "retention_ms": 60_000} and t.log(0).retention_ms == 60_000
    assert vqs("topic", "alter", "synced", "--reset", "retention_ms", "--data-dir", d).returncode == 0
    with vqs_broker(d) as b:
        assert b.topic("synced").overrides == {"flush": "interval"}


def test_group_config_shows_and_changes_a_group_ids_configs(srv, tmp_path):
    assert vqs("topic", "create", "t", "--data-dir", str(tmp_path / "data")).returncode == 0
    for where in (("--url", srv.url), ("--data-dir", str(tmp_path / "data"))):
        p = vqs("group", "config", "cfg", "--set", "share.record.lock.duration.ms=60000", "--json", *where)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["share.record.lock.duration.ms"] == {"value": "60000", "own": True}
        p = vqs("group", "config", "cfg", "--set", "share.delivery.count.limit=99", *where)
        assert p.returncode != 0 and b"share.delivery.count.limit" in p.stderr
        p = vqs("group", "config", "cfg", "--reset", "share.record.lock.duration.ms", "--json", *where)
        assert json.loads(p.stdout)["share.record.lock.duration.ms"]["own"] is False
        # a value is sent as typed: a topic named 007 is not the number 7
        assert vqs("topic", "create", "007", *where).returncode == 0
        p = vqs("group", "config", "cfg", "--set", "errors.deadletterqueue.topic.name=007", "--json", *where)
        assert json.loads(p.stdout)["errors.deadletterqueue.topic.name"] == {"value": "007", "own": True}, p.stderr


def test_topic_alter_over_a_server(srv):
    u = ("--url", srv.url)
    assert vqs("topic", "create", "altered", *u).returncode == 0
    p = vqs("topic", "alter", "altered", "--set", "max_message_bytes=100", "--set", "cleanup_policy=compact", *u)
    assert p.returncode == 0, p.stderr
    d = json.loads(vqs("topic", "describe", "altered", "--json", *u).stdout)
    assert d["config"]["max_message_bytes"] == 100 and d["config"]["cleanup_policy"] == "compact"
    p = vqs("topic", "alter", "altered", "--set", "segment_bytes=1", *u)
    assert p.returncode != 0 and b"segment_bytes" in p.stderr


def test_topic_list_hides_internal_topics_unless_all(tmp_path):
    d = str(tmp_path / "data")
    assert vqs("topic", "create", "frames", "--data-dir", d).returncode == 0
    assert vqs("topic", "create", "__spark_state.q1", "--data-dir", d).returncode == 0
    assert vqs("topic", "list", "--data-dir", d).stdout.split() == [b"frames"]
    assert json.loads(vqs("topic", "list", "--json", "--data-dir", d).stdout) == ["frames"]
    assert vqs("topic", "list", "--all", "--data-dir", d).stdout.split() == [b"__spark_state.q1", b"frames"]


def test_group_describe_counts_never_committed_partitions(tmp_path):
    from vqs import Broker

    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("t", partitions=3)
        for part in range(3):
            b.producer().send_batch("t", [b"x"] * 33_000, partition=part)
        b.commit_offsets("g", {("t", 0): 33_000, ("t", 1): 33_000})
    p = vqs("group", "describe", "g", "--data-dir", d)
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.decode().splitlines() if line.strip(" │|").startswith("t ")
            or " t " in line]
    cells = [[c for c in row if c not in ("│", "|", "┃")] for row in rows]
    assert ["t", "2", "-", "0", "33000", "33000"] in cells
    assert b"total lag: 33000" in p.stdout
    doc = json.loads(vqs("group", "describe", "g", "--json", "--data-dir", d).stdout)
    assert (doc["total_lag"], doc["members"], doc["state"]) == (33000, [], "Empty")
    rows = doc["partitions"]
    assert [(r["partition"], r["committed"], r["lag"]) for r in rows] == [(0, 33000, 0), (1, 33000, 0),
                                                                          (2, None, 33000)]


def test_group_describe_json_has_the_rest_documents_members(srv):
    import httpx

    import vqs as vqs_api

    u = ["--url", srv.url]
    with vqs_api.Client(srv.url) as client:
        client.create_topic("climem", partitions=2)
        client.producer().send_batch("climem", [b"a", b"b"], partition=0)
        member = client.consumer("climem", group="gmem", session_timeout_ms=30_000)
        try:
            assert len(member.poll(timeout=5)) == 2
            member.commit()
            doc = json.loads(vqs("group", "describe", "gmem", "--json", *u).stdout)
            rest = httpx.get(f"{srv.url}/groups/gmem").json()
            member_id = member.member_id
        finally:
            member.close()
    assert doc == rest  # the same document, field for field
    assert [m["member_id"] for m in doc["members"]] == [member_id]
    assert doc["members"][0]["assignment"] == [{"topic": "climem", "partition": 0},
                                               {"topic": "climem", "partition": 1}]
    assert (doc["protocol_type"], doc["total_lag"]) == ("vqs", 0)
