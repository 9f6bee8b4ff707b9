"""REST round trips against a real server process."""

from __future__ import annotations

import base64
import os
import struct
import threading
import time

import crc32c
import httpx
import pytest

from vqs.client import Client
from vqs.errors import OffsetOutOfRange
from vqs.record import HEADER, HEADER_SIZE, encode_batch
from vqs.wire import BATCH_CONTENT_TYPE, decode_body


def test_health_and_openapi(http):
    r = http.get("/health")
    assert r.status_code == 200 and r.json()["ready"] is True
    assert http.get("/health/live").json() == {"live": True}
    spec = http.get("/openapi.json").json()
    assert "/topics/{topic}/messages" in spec["paths"]
    assert http.get("/docs").status_code == 200


def test_topic_lifecycle(http, unique):
    r = http.post("/topics", json={"name": unique, "partitions": 3})
    assert r.status_code == 201, r.text
    assert r.json()["partitions"] == 3
    assert unique in http.get("/topics").json()["topics"]
    r = http.post("/topics", json={"name": unique})
    assert r.status_code == 409 and r.json()["error"]["code"] == "topic_exists"
    d = http.get(f"/topics/{unique}").json()
    assert [p["partition"] for p in d["partition_info"]] == [0, 1, 2]
    assert http.delete(f"/topics/{unique}").status_code == 204
    r = http.get(f"/topics/{unique}")
    assert r.status_code == 404 and r.json()["error"]["code"] == "topic_not_found"


def test_a_topics_settings_are_altered_in_place(http, unique):
    """PATCH /topics/{t}: the body's settings become the topic's own (null: the server's default;
    absent: unchanged, unless ?replace=true); ?validate_only=true changes nothing; a bad one is
    400 naming it, nothing changed."""
    assert http.post("/topics", json={"name": unique, "retention_ms": -1}).status_code == 201
    r = http.patch(f"/topics/{unique}", json={"flush": "always", "retention_bytes": 4096, "segment_ms": 60_000})
    assert r.status_code == 200, r.text
    cfg = r.json()["config"]
    assert (cfg["flush"], cfg["retention_bytes"], cfg["segment_ms"], cfg["retention_ms"]) == ("always", 4096, 60_000,
                                                                                              None)
    cfg = http.patch(f"/topics/{unique}", json={"retention_bytes": None}).json()["config"]
    assert cfg["retention_bytes"] is None and cfg["flush"] == "always"
    cfg = http.patch(f"/topics/{unique}", params={"validate_only": "true"}, json={"flush": "never"}).json()["config"]
    assert cfg["flush"] == "always"
    for body, field in (({"flush": "sometimes"}, "flush"), ({"cleanup_policy": "shred"}, "cleanup_policy"),
                        ({"max_compaction_lag_ms": 0}, "max_compaction_lag_ms"), ({"nope": 1}, "nope"),
                        ({"retention_ms": True}, "retention_ms"), ({"max_message_bytes": True}, "max_message_bytes"),
                        ({"segment_ms": "60000"}, "segment_ms"), ({"min_cleanable_dirty_ratio": True},
                                                                  "min_cleanable_dirty_ratio"),
                        ({"segment_bytes": 1 << 31}, "segment_bytes")):
        r = http.patch(f"/topics/{unique}", json=body)
        assert r.status_code == 400 and r.json()["error"]["field"] == field, r.text
    for field in ("flush_interval_ms", "retention_ms", "retention_bytes", "delete_retention_ms"):
        # a number past a 64-bit long: refused by its shape, before topic.json is written
        r = http.patch(f"/topics/{unique}", content=b'{"%s": 1%s}' % (field.encode(), b"0" * 400),
                       headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["field"] == field and len(r.text) < 1000, r.text
    assert http.get(f"/topics/{unique}").json()["config"]["flush"] == "always"
    cfg = http.patch(f"/topics/{unique}", params={"replace": "true"}, json={"segment_ms": 120_000}).json()["config"]
    assert cfg["segment_ms"] == 120_000 and cfg["flush"] == http.get("/health").json()["flush"]  # back to the server's
    r = http.patch(f"/topics/{unique}-none", json={})
    assert r.status_code == 404 and r.json()["error"]["code"] == "topic_not_found"


def test_a_group_ids_configs_over_http(http, unique):
    """GET/PATCH /groups/{g}/config: every group config in force and the group's own; a value
    sets one, null resets it; ?validate_only=true changes nothing; a bad one is 400, nothing
    changed."""
    path = f"/groups/cfg-{unique}/config"
    r = http.get(path)
    assert r.status_code == 200 and r.json()["own"] == {}, r.text
    assert r.json()["config"]["share.delivery.count.limit"] == "5"
    r = http.patch(path, json={"share.delivery.count.limit": 3, "errors.deadletterqueue.copy.record.enable": True})
    assert r.status_code == 200 and r.json()["own"] == {"share.delivery.count.limit": "3",
                                                        "errors.deadletterqueue.copy.record.enable": "true"}
    r = http.patch(path, params={"validate_only": "true"}, json={"share.delivery.count.limit": 4})
    assert r.status_code == 200 and r.json()["config"]["share.delivery.count.limit"] == "3"
    for body in ({"share.delivery.count.limit": "many"}, {"retention.ms": 1}, ["x"]):
        assert http.patch(path, json=body).status_code == 400
    r = http.patch(path, json={"share.delivery.count.limit": None, "errors.deadletterqueue.copy.record.enable": None})
    assert r.json()["own"] == {} and r.json()["config"]["share.delivery.count.limit"] == "5"


def test_internal_topics_are_listed_only_with_all(http, unique):
    internal = f"__spark_state.{unique}"
    assert http.post("/topics", json={"name": internal}).status_code == 201
    assert http.post("/topics", json={"name": unique}).status_code == 201
    listed = http.get("/topics").json()["topics"]
    assert unique in listed and not any(n.startswith("__") for n in listed)
    assert {unique, internal} <= set(http.get("/topics", params={"all": "true"}).json()["topics"])
    assert http.get(f"/topics/{internal}").status_code == 200   # hidden from the list, not from use


def test_json_produce_consume_round_trip(http, unique):
    http.post("/topics", json={"name": unique})
    msgs = [{"value": "hello"}, {"value_b64": base64.b64encode(b"\x00\xff").decode(), "key": "k1",
                                 "headers": {"h": "v"}}, {"value": "ünïcode", "timestamp_ms": 1234}]
    r = http.post(f"/topics/{unique}/messages", json={"messages": msgs})
    assert r.status_code == 200, r.text
    assert r.json() == {"count": 3, "ranges": [{"partition": 0, "base_offset": 0, "count": 3}]}
    d = http.get(f"/topics/{unique}/messages", params={"offset": 0}).json()
    assert [m["offset"] for m in d["messages"]] == [0, 1, 2]
    assert d["messages"][0]["value"] == "hello"
    assert base64.b64decode(d["messages"][1]["value_b64"]) == b"\x00\xff"
    assert d["messages"][1]["key"] == "k1" and d["messages"][1]["headers"] == [["h", "v"]]
    assert d["messages"][2]["value"] == "ünïcode" and d["messages"][2]["timestamp_ms"] == 1234
    assert d["next_offset"] == 3 and d["end_offset"] == 3
    d = http.get(f"/topics/{unique}/messages", params={"offset": 1, "limit": 1, "encoding": "base64"}).json()
    assert [m["offset"] for m in d["messages"]] == [1] and d["next_offset"] == 2
    assert http.get(f"/topics/{unique}/offsets").json()["partitions"] == [
        {"partition": 0, "start_offset": 0, "end_offset": 3}]


def test_binary_produce_consume_round_trip(http, unique):
    http.post("/topics", json={"name": unique, "partitions": 2})
    values = [f"m{i}".encode() * 10 for i in range(250)]
    body = encode_batch(0, values, keys=[b"k"] * 250, headers=[[("a", b"1")]] * 250)
    r = http.post(f"/topics/{unique}/messages", params={"partition": 1}, content=body,
                  headers={"content-type": BATCH_CONTENT_TYPE})
    assert r.status_code == 200, r.text
    assert r.json()["ranges"] == [{"partition": 1, "base_offset": 0, "count": 250}]
    got = []
    off = 7
    while True:
        r = http.get(f"/topics/{unique}/messages", params={"partition": 1, "offset": off, "limit": 100},
                     headers={"accept": BATCH_CONTENT_TYPE})
        assert r.status_code == 200
        recs = [rec for b in decode_body(r.content) for rec in b.records()]
        assert len(recs) <= 100
        if not recs:
            break
        assert recs[0].offset == off
        got += recs
        off = int(r.headers["x-vqs-next-offset"])
    assert [x.value for x in got] == values[7:]
    assert all(x.key == b"k" and x.headers == (("a", b"1"),) for x in got)


def test_null_values_round_trip_as_json_null_and_as_batches(http, unique):
    http.post("/topics", json={"name": unique})
    r = http.post(f"/topics/{unique}/messages", json={"messages": [
        {"value": None, "key": "gone"}, {"value": ""}, {"value": "v"}]})
    assert r.status_code == 200, r.text
    body = encode_batch(0, [b"x", None], keys=[b"k", b"gone2"], nulls=True)
    r = http.post(f"/topics/{unique}/messages", content=body, headers={"content-type": BATCH_CONTENT_TYPE})
    assert r.status_code == 200, r.text
    msgs = http.get(f"/topics/{unique}/messages", params={"offset": 0}).json()["messages"]
    assert [(m["key"], m["value"]) for m in msgs] == [("gone", None), (None, ""), (None, "v"), ("k", "x"),
                                                      ("gone2", None)]
    r = http.get(f"/topics/{unique}/messages", params={"offset": 0}, headers={"accept": BATCH_CONTENT_TYPE})
    assert [x.value for b in decode_body(r.content) for x in b.records()] == [None, b"", b"v", b"x", None]
    r = http.post(f"/topics/{unique}/messages", json={"messages": [{"key": "no value"}]})
    assert r.status_code == 400 and "null for a null value" in r.json()["error"]["message"]


def test_null_header_values_round_trip_as_json_null(http, unique):
    http.post("/topics", json={"name": unique})
    r = http.post(f"/topics/{unique}/messages", json={"messages": [
        {"value": "a", "headers": {"n": None, "e": ""}}, {"value": "b", "headers": [["n", None], ["v", "x"]]}]})
    assert r.status_code == 200, r.text
    msgs = http.get(f"/topics/{unique}/messages", params={"offset": 0}).json()["messages"]
    assert [m["headers"] for m in msgs] == [[["n", None], ["e", ""]], [["n", None], ["v", "x"]]]
    r = http.get(f"/topics/{unique}/messages", params={"offset": 0}, headers={"accept": BATCH_CONTENT_TYPE})
    assert [x.headers for b in decode_body(r.content) for x in b.records()] == [
        (("n", None), ("e", b"")), (("n", None), ("v", b"x"))]
    r = http.post(f"/topics/{unique}/messages", json={"messages": [{"value": "c", "headers": {"n": 1}}]})
    assert r.status_code == 400 and r.json()["error"]["field"] == "headers"


def test_corrupt_binary_body_is_400(http, unique):
    http.post("/topics", json={"name": unique})
    body = bytearray(encode_batch(0, [b"abc"]))
    body[-1] ^= 0xFF
    r = http.post(f"/topics/{unique}/messages", content=bytes(body), headers={"content-type": BATCH_CONTENT_TYPE})
    assert r.status_code == 400 and r.json()["error"]["code"] == "corrupt_batch"


def amplifying_batch(n: int = 1024, size: int = 4096) -> bytes:
    """A batch of ``size`` bytes of values and ``n`` offsets alternating 0 and ``size``, its CRC
    valid: read as its offsets say, it would stand for n/2 values of ``size`` bytes each."""
    offs = [0] + [size if i % 2 == 0 else 0 for i in range(n - 1)] + [size]
    body = struct.pack(f"<{n + 1}I", *offs) + b"x" * size
    batch = bytearray(HEADER_SIZE) + body
    HEADER.pack_into(batch, 0, 0, len(batch) - 12, 0, 1, 0, 0, n, 0, 0, -1, -1, -1, len(body))
    struct.pack_into("<I", batch, 12, crc32c.crc32c(bytes(batch[16:])))
    return bytes(batch)


def test_a_binary_body_whose_offsets_go_back_is_refused_and_appends_nothing(http, unique):
    """8 KiB that would read as 2 MiB of values (hostile or broken client): 400, nothing appended."""
    http.post("/topics", json={"name": unique})
    r = http.post(f"/topics/{unique}/messages", content=amplifying_batch(),
                  headers={"content-type": BATCH_CONTENT_TYPE})
    assert r.status_code == 400 and r.json()["error"]["code"] == "corrupt_batch", r.text
    assert "offsets decrease" in r.json()["error"]["message"]
    assert http.get(f"/topics/{unique}").json()["partition_info"][0]["end_offset"] == 0


def test_errors_name_the_field(http, unique):
    http.post("/topics", json={"name": unique})
    r = http.post(f"/topics/{unique}/messages", json={"messages": [{"nope": 1}]})
    assert r.status_code == 400 and r.json()["error"]["field"] == "nope"
    r = http.post(f"/topics/{unique}/messages", json={"messages": [{}]})
    assert r.status_code == 400 and r.json()["error"]["field"] == "value"
    r = http.post(f"/topics/{unique}/messages", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = http.get(f"/topics/{unique}/messages", params={"offset": 99})
    assert r.status_code == 400 and r.json()["error"]["code"] == "offset_out_of_range"
    r = http.get(f"/topics/{unique}/messages", params={"partition": 5})
    assert r.status_code == 400 and r.json()["error"]["field"] == "partition"
    r = http.get(f"/topics/{unique}/messages", params={"limit": 0})
    assert r.status_code == 400 and r.json()["error"]["field"] == "limit"
    r = http.post("/topics", json={"name": "../etc"})
    assert r.status_code == 400 and r.json()["error"]["field"] == "name"
    r = http.get("/topics/%2E%2E")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_name"
    # (X-VQS-Client: a credential-less server refuses a text/plain POST without it as cross-site)
    r = http.post(f"/topics/{unique}/messages", content=b"x", headers={"content-type": "text/plain",
                                                                      "x-vqs-client": "test"})
    assert r.status_code == 415


def test_errors_never_show_a_server_path(http, server, unique):
    """An offset out of range is told in offsets, never with the log's path (issue #11): JSON and
    binary consumes, and the vqs.Client exception built from the answer."""
    paths = {server.data_dir, os.path.realpath(server.data_dir)}
    http.post("/topics", json={"name": unique})
    http.post(f"/topics/{unique}/messages", json={"messages": [{"value": "a"}]})
    for headers in ({}, {"accept": BATCH_CONTENT_TYPE}):
        r = http.get(f"/topics/{unique}/messages", params={"offset": 99}, headers=headers)
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == "offset_out_of_range" and err["field"] == "offset"
        assert err["detail"] == {"offset": 99, "start_offset": 0, "end_offset": 1}
        assert "99" in err["message"] and "0..1" in err["message"]
        assert not any(p in r.text for p in paths) and "Traceback" not in r.text
    with Client(server.url) as client:
        c = client.consumer()
        c.assign([(unique, 0)])
        c.seek((unique, 0), 99)
        with pytest.raises(OffsetOutOfRange) as ei:
            c.poll()
        c.close()
    assert ei.value.offset == 99 and not any(p in str(ei.value) for p in paths)


def test_long_poll_is_woken_by_a_send(http, base_url, unique):

    http.post("/topics", json={"name": unique})
    result = {}
    # made before the thread starts: making a Client takes ~0.15 s on a loaded machine,
    # which would eat into the 0.3 s the poll must be seen waiting
    c = httpx.Client(base_url=base_url, timeout=30)

    def consumer():
        t0 = time.monotonic()
        result["r"] = c.get(f"/topics/{unique}/messages", params={"offset": 0, "wait_ms": 10000}).json()
        result["dt"] = time.monotonic() - t0

    th = threading.Thread(target=consumer)
    with c:
        th.start()
        time.sleep(0.3)
        http.post(f"/topics/{unique}/messages", json={"messages": [{"value": "wake"}]})
        th.join(15)
    assert result["r"]["messages"][0]["value"] == "wake"
    assert 0.2 < result["dt"] < 5
    t0 = time.monotonic()
    d = http.get(f"/topics/{unique}/messages", params={"offset": 1, "wait_ms": 300}).json()
    assert d["messages"] == [] and 0.25 < time.monotonic() - t0 < 5


def test_groups(http, unique):
    http.post("/topics", json={"name": unique, "partitions": 2})
    http.post(f"/topics/{unique}/messages", json={"messages": [{"value": "a", "partition": 0},
                                                               {"value": "b", "partition": 1},
                                                               {"value": "c", "partition": 1}]})
    g = unique + "-g"
    assert http.get(f"/groups/{g}").status_code == 404
    r = http.post(f"/groups/{g}/offsets", json={"offsets": [{"topic": unique, "partition": 1, "offset": 1}]})
    assert r.status_code == 200, r.text
    assert g in http.get("/groups").json()["groups"]
    d = http.get(f"/groups/{g}").json()
    # partition 0 was never committed: the group would read it from the start (lag 1, committed null)
    assert d["partitions"] == [{"topic": unique, "partition": 0, "committed": None, "start_offset": 0,
                                "end_offset": 1, "lag": 1},
                               {"topic": unique, "partition": 1, "committed": 1, "start_offset": 0,
                                "end_offset": 2, "lag": 1}]
    assert d["total_lag"] == 2
    # consuming with the group starts at the committed offset
    d = http.get(f"/topics/{unique}/messages", params={"partition": 1, "group": g}).json()
    assert [m["value"] for m in d["messages"]] == ["c"]
    assert http.delete(f"/groups/{g}").status_code == 204
    assert http.delete(f"/groups/{g}").status_code == 404


def test_wait_any_partition(http, base_url, unique):

    http.post("/topics", json={"name": unique, "partitions": 3})
    body = {"partitions": [{"topic": unique, "partition": p, "offset": 0} for p in range(3)], "wait_ms": 10000}
    out = {}

    def waiter():
        with httpx.Client(base_url=base_url, timeout=30) as c:
            out["r"] = c.post("/wait", json=body).json()

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.3)
    http.post(f"/topics/{unique}/messages", json={"messages": [{"value": "x", "partition": 2}]})
    th.join(15)
    assert out["r"] == {"ready": [{"topic": unique, "partition": 2}]}


def test_metrics(http, unique):
    http.post("/topics", json={"name": unique})
    http.post(f"/topics/{unique}/messages", json={"messages": [{"value": "abc"}]})
    text = http.get("/metrics").text
    assert f'vqs_messages_in_total{{kind="topic",name="{unique}"}} 1.0' in text
    assert f'vqs_bytes_in_total{{kind="topic",name="{unique}"}} 3.0' in text
    assert "vqs_http_request_duration_seconds_bucket" in text
    assert f'vqs_topic_end_offset{{partition="0",topic="{unique}"}} 1.0' in text
    assert 'vqs_disk_bytes{kind="topic"' in text


def test_headers_the_format_cannot_hold_are_400(http, unique):
    """More than 65,535 headers, or a header name over 65,535 bytes (the format's u16 fields):
    400 naming the field, nothing appended (it was 500: struct.error in the append)."""
    assert http.post("/topics", json={"name": unique}).status_code == 201
    for headers in ([["h", "x"]] * 70_000, {"n" * 70_000: "x"}):
        r = http.post(f"/topics/{unique}/messages", json={"messages": [{"value": "v", "headers": headers}]})
        assert r.status_code == 400 and r.json()["error"]["field"] == "headers", r.text[:300]
    # more records than a produce takes (MAX_PRODUCE_RECORDS): 413 before a record is made
    from vqs.record import encode_batch

    body = encode_batch(0, [b""] * 1_000_001)
    r = http.post(f"/topics/{unique}/messages", content=body, headers={"content-type": "application/vnd.vqs.batch"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_many_records", r.text[:300]
    assert http.get(f"/topics/{unique}").json()["partition_info"][0]["end_offset"] == 0


@pytest.mark.parametrize("body, where", [
    (b"{not json", "(at character 1)"),
    (b'{"a":1,}', "(at character 7)"),
    (b"[1,", "(at character 3)"),
    (b'{"name": "\xff"}', "it is not UTF-8 text"),
    (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
])
def test_every_body_that_is_not_json_is_invalid_json_saying_where(http, unique, body, where):
    http.post("/topics", json={"name": unique})
    http.post("/queues", json={"name": unique})
    routes = ["/topics", f"/topics/{unique}/messages", "/queues", f"/queues/{unique}/messages",
              f"/queues/{unique}/receive", f"/groups/{unique}/offsets", "/wait", f"/topics/{unique}/partitions"]
    for route in routes:  # the fast path's produce and the framework's routes alike
        r = http.post(route, content=body, headers={"content-type": "application/json"})
        err = r.json()["error"]
        assert (r.status_code, err["code"], err["field"]) == (400, "invalid_json", "body"), (route, r.text)
        assert err["message"].startswith("the body is not valid JSON: ") and where in err["message"], (route, r.text)
