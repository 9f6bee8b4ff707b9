"""The hot routes' handlers (vqs/server/lean.py, on the HTTP fast path) answer as the FastAPI routes do.

Two real servers, one with ``fast_http`` on (the default) and one with it
off (every request through FastAPI), get the same requests in the same order
on the same fresh names: valid ones of every shape the lean path takes, and
invalid ones it must hand to the framework (or answer with the shared cores'
errors). Status, body and headers must match, after masking what differs
between any two servers (message ids, receipt handles, timestamps, the Date
header). Then their request and error counters must match too.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time

import httpx
import pytest
from vqs_server_proc import ServerProcess

from vqs.record import encode_batch
from vqs.wire import decode_body

BATCH = "application/vnd.vqs.batch"
JSON = {"Content-Type": "application/json"}
_MASKED = {"message_ids", "id", "receipt_handle", "sent_timestamp_ms", "first_receive_timestamp_ms",
           "timestamp_ms"}


@pytest.fixture(scope="module")
def servers(server, tmp_path_factory):
    """The session's server (the fast path on, the default) and one with it off."""
    slow = ServerProcess(tmp_path_factory.mktemp("framework") / "data", env={"VQS_FAST_HTTP": "0"}).start()
    yield server, slow
    assert slow.stop() == 0, slow.log()


def _mask(doc):
    if isinstance(doc, dict):
        return {k: "*" if k in _MASKED else _mask(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_mask(x) for x in doc]
    return doc


def _answer(r: httpx.Response) -> dict:
    headers = [(k, v) for k, v in r.headers.raw if k.lower() not in (b"date", b"content-length")]
    assert int(r.headers.get("content-length", len(r.content))) == len(r.content)
    if r.headers.get("content-type", "").startswith("application/json"):
        body = _mask(r.json())
    elif r.headers.get("content-type") == BATCH:  # the records, not their timestamps
        body = [(bt.base_offset, [(bt.key(i), bytes(v), bt.headers(i)) for i, v in enumerate(bt.values())])
                for bt in decode_body(r.content)]
    else:
        body = r.content
    return {"status": r.status_code, "headers": headers, "body": body}


def _scenario(c: httpx.Client, prefix: str) -> list[dict]:
    """Every request, in order; what the server answered to each. Names start with ``prefix``
    (the same on both servers; the session's server has other tests' topics and queues)."""
    out = []
    t, t3, q, f = (prefix + x for x in ("t", "t3", "q", "f.fifo"))

    def go(method, url, **kw):
        r = c.request(method, url, **kw)
        out.append({"request": f"{method} {url} {kw}"[:300], **_answer(r)})
        return r

    c.post("/topics", json={"name": t}).raise_for_status()
    c.post("/topics", json={"name": t3, "partitions": 3}).raise_for_status()
    c.post("/queues", json={"name": q}).raise_for_status()
    c.post("/queues", json={"name": f, "fifo": True}).raise_for_status()

    # --- produce: valid
    p = f"/topics/{t}/messages"
    go("POST", p, json={"messages": [{"value": "v0"}]})
    go("POST", p, content=b'{"messages":[{"value":"v1","key":"k","headers":{"h":"x"}}]}')  # no content type
    go("POST", p, content=b'{"messages":[{"value":"\\u00e9t\\u00e9"}]}',
       headers={"Content-Type": "application/json; charset=utf-8"})
    go("POST", p, json={"messages": [{"value_b64": base64.b64encode(b"\xff\x00").decode(), "timestamp_ms": 5,
                                      "partition": 0}, {"value": "w", "key_b64": "AA=="}]})
    go("POST", f"/topics/{t3}/messages", json={"messages": [{"value": "a", "partition": 2}, {"value": "b", "partition": 1},
                                                         {"value": "c", "partition": 2}]})
    go("POST", p, content=bytes(encode_batch(0, [b"b1", b"b2"])), headers={"Content-Type": BATCH})
    go("POST", f"/topics/{t3}/messages?partition=1", content=bytes(encode_batch(0, [b"x"])), headers={"Content-Type": BATCH})
    go("POST", f"/topics/{t3}/messages?partition=", content=bytes(encode_batch(0, [b"y"])), headers={"Content-Type": BATCH})
    go("POST", p, json={"messages": [{"value": "q"}]}, params={"ignored": "1"})
    # keyed records with no partition: spread over t3's partitions by key (appended apart), or all one key
    keyed = [b"k%d" % i for i in range(6)]
    go("POST", f"/topics/{t3}/messages", content=bytes(encode_batch(0, [b"s"] * 6, keys=keyed)),
       headers={"Content-Type": BATCH})
    go("POST", f"/topics/{t3}/messages", content=bytes(encode_batch(0, [b"u", b"v"], keys=[b"same", b"same"])),
       headers={"Content-Type": BATCH})
    two = bytes(encode_batch(0, [b"first"])) + bytes(encode_batch(0, [b"second", b"third"]))
    go("POST", p, content=two, headers={"Content-Type": BATCH})  # two batches: one answer, both appended
    # --- produce: invalid
    # two batches, the second's value over max_message_bytes: refused whole (the first not appended)
    go("POST", p, content=bytes(encode_batch(0, [b"kept?"])) + bytes(encode_batch(0, [b"x" * ((1 << 20) + 1)])),
       headers={"Content-Type": BATCH})
    for body in (b"{", b"[]", b'{"messages":[]}', b'{"messages":[{"value":1}]}', b'{"messages":[{"value":"a","x":1}]}',
                 b'{"messages":[{"value":"a"}],"more":1}', b'{"messages":[{"value":"a","partition":7}]}',
                 b'{"messages":[{"value":"a","partition":true}]}', b'{"messages":[{"value_b64":"%%"}]}',
                 b'{"messages":[{"value":"a","timestamp_ms":-1}]}', b'{"messages":[{"value":"a","headers":[1]}]}',
                 json.dumps({"messages": [{"value": "x" * ((1 << 20) + 1)}]}).encode(), b""):
        go("POST", p, content=body, headers=JSON)
    go("POST", p, content=b"v", headers={"Content-Type": "text/plain"})
    go("POST", p, content=b"\x00" * 70, headers={"Content-Type": BATCH})
    go("POST", p, content=b"", headers={"Content-Type": BATCH})
    go("POST", f"/topics/{t}/messages?partition=4", content=bytes(encode_batch(0, [b"x"])), headers={"Content-Type": BATCH})
    go("POST", f"/topics/{t}/messages?partition=a", content=bytes(encode_batch(0, [b"x"])), headers={"Content-Type": BATCH})
    go("POST", f"/topics/{prefix}nope/messages", json={"messages": [{"value": "v"}]})
    go("POST", "/topics/bad name/messages", json={"messages": [{"value": "v"}]})
    go("PUT", p, json={"messages": [{"value": "v"}]})

    # --- consume: valid
    for qs in ("?offset=0&limit=3", "?offset=1&encoding=base64", "", "?partition=2&offset=0", "?offset=0&max_bytes=1",
              "?group=g1", "?offset=999", "?offset=0&wait_ms=0&limit=100000", "?offset=0&group=g"):
        go("GET", p + qs)
    go("GET", f"/topics/{t3}/messages?partition=2&offset=0")
    go("GET", p + "?offset=0&limit=2", headers={"Accept": BATCH})
    go("GET", p + "?offset=3", headers={"Accept": f"text/plain, {BATCH}"})
    # --- consume: invalid (the framework's validation)
    for qs in ("?partition=99999", "?partition=-1", "?offset=-1", "?limit=0", "?limit=x", "?max_bytes=0",
              "?wait_ms=20001", "?encoding=xml", "?group=a%20b", "?group=..", "?offset=1&offset=2", "?other=1",
              "?partition=", "?offset=%2B1", "?partition=1", "?offset=00001", "?stored=2", "?stored=true",
              "?offset=999&stored=1"):
        go("GET", p + qs)
        go("GET", p + qs, headers={"Accept": BATCH})
    go("GET", p + "?offset=0&stored=1")  # stored batches without the binary Accept: the core's 400
    go("GET", f"/topics/{prefix}nope/messages?offset=0")
    go("GET", f"/topics/{t3}/messages?partition=3")

    # --- queue send: valid
    s = f"/queues/{q}/messages"
    go("POST", s, json={"messages": [{"body": "m1"}]})
    go("POST", s, json={"messages": [{"body": "m2", "delay_seconds": 0, "attributes": {"a": "1"}},
                                     {"body_b64": base64.b64encode(b"\xfe").decode()}]})
    go("POST", s, json={"messages": [{"body": "m3", "attributes": {
        "n": {"DataType": "Number", "StringValue": "3"},
        "b": {"DataType": "Binary", "BinaryValue": "AP8="}}, "group_id": "g", "dedup_id": None}]})
    go("POST", s, json={"messages": [{"body": f"m{i}"} for i in range(12)]})
    go("POST", f"/queues/{f}/messages", json={"messages": [{"body": "x", "group_id": "g", "dedup_id": "d"}]})
    # --- queue send: invalid, or coerced by pydantic (then the framework's answer; no delays:
    # when a delayed message shows would depend on each server's speed)
    for body in ({}, {"messages": []}, {"messages": [{}]}, {"messages": [{"body": "a", "body_b64": "YQ=="}]},
                 {"messages": [{"body": "a", "delay_seconds": 901}]}, {"messages": [{"body": "a", "delay_seconds": "0"}]},
                 {"messages": [{"body": "a", "delay_seconds": False}]}, {"messages": [{"body": "a", "delay_seconds": 0.0}]},
                 {"messages": [{"body": 5}]}, {"messages": [{"body_b64": "%%"}]}, {"messages": [{"body": "a", "x": 1}]},
                 {"messages": [{"body": "a", "attributes": {str(i): "v" for i in range(11)}}]},
                 {"messages": [{"body": "a", "attributes": {"a": {"StringValue": "v"}}}]},
                 {"messages": [{"body": "a", "attributes": {"a": {"DataType": "Number", "StringValue": "x"}}}]},
                 {"messages": [{"body": "a", "attributes": {"a": {"DataType": "Binary", "BinaryValue": "%"}}}]},
                 {"messages": [{"body": "a", "group_id": "g" * 129}]}, {"messages": [{"body": "x" * ((1 << 20) + 1)}]},
                 {"messages": [{"body": "a"}], "extra": 1}, [1], None):
        go("POST", s, json=body)
    go("POST", f"/queues/{f}/messages", json={"messages": [{"body": "x"}]})
    go("POST", s, content=b"{", headers=JSON)
    go("POST", s, content=b"", headers=JSON)
    go("POST", s, content=b'{"messages":[{"body":"a"}]}', headers={"Content-Type": "text/plain"})
    go("POST", s, content=b'{"messages":[{"body":"a"}]}')  # no content type: the framework's call
    go("POST", f"/queues/{prefix}nope/messages", json={"messages": [{"body": "a"}]})

    # --- receive and delete
    rcv = f"/queues/{q}/receive"
    r1 = go("POST", rcv, json={})
    r2 = go("POST", rcv, json={"max_messages": 12, "wait_seconds": 0, "visibility_timeout": 30})
    go("POST", rcv, json={"max_messages": 2, "wait_seconds": 0.0, "visibility_timeout": None})
    for body in ({"max_messages": 0}, {"max_messages": 1001}, {"wait_seconds": 21}, {"wait_seconds": "0"},
                 {"wait_seconds": False}, {"visibility_timeout": -1}, {"visibility_timeout": 1.5}, {"x": 1}, [], None):
        go("POST", rcv, json=body)
    go("POST", f"/queues/{prefix}nope/receive", json={})
    handles = [m["receipt_handle"] for m in r1.json()["messages"] + r2.json()["messages"]]
    d = f"/queues/{q}/delete"
    go("POST", d, json={"receipt_handles": handles[:1]})
    go("POST", d, json={"receipt_handles": handles[1:]})
    go("POST", d, json={"receipt_handles": handles[:1]})  # again: already deleted
    for body in ({"receipt_handles": ["bogus"]}, {"receipt_handles": ["bogus", "worse"]}, {"receipt_handles": []},
                 {"receipt_handles": [1]}, {"receipt_handles": "h"}, {"receipt_handles": ["h"], "x": 1}, {}):
        go("POST", d, json=body)
    go("POST", f"/queues/{prefix}nope/delete", json={"receipt_handles": ["h"]})
    return out


def _counters(c: httpx.Client) -> dict:
    out = {}
    for line in c.get("/metrics").text.splitlines():
        m = re.match(r"(vqs_(?:http_requests|errors)_total\{.*\}) (\S+)$", line)
        if m and 'route="/metrics"' not in line:
            out[m.group(1)] = float(m.group(2))
    return out


def _delta(before: dict, after: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def test_lean_and_framework_answer_alike(servers):
    lean, slow = servers
    prefix = f"lean-{os.getpid()}-{time.monotonic_ns() % 10**6}-"
    with httpx.Client(base_url=lean.url, timeout=30) as a, httpx.Client(base_url=slow.url, timeout=30) as b:
        before = _counters(a), _counters(b)
        got, want = _scenario(a, prefix), _scenario(b, prefix)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g["request"] = w["request"] = g["request"].split(" {")[0]  # receipt handles differ
            assert g == w, f"{g['request']}\n lean: {g}\n framework: {w}"
        # the same requests counted alike: the lean path labels its routes as FastAPI does
        assert _delta(before[0], _counters(a)) == _delta(before[1], _counters(b))


def test_lean_route_is_counted_under_its_template(servers):
    lean, _ = servers
    with httpx.Client(base_url=lean.url, timeout=30) as c:
        name = f"counted-{os.getpid()}-{time.monotonic_ns() % 10**6}"
        c.post("/topics", json={"name": name}).raise_for_status()
        c.post(f"/topics/{name}/messages", json={"messages": [{"value": "v"}]}).raise_for_status()
        text = c.get("/metrics").text
    assert re.search(r'vqs_http_requests_total\{api="rest",method="POST",route="/topics/\{topic\}/messages",'
                     r'status="200"\} [1-9]', text), text


def test_sqs_request_ids_are_distinct_and_uuid_shaped(base_url):
    with httpx.Client(base_url=base_url, timeout=30) as c:
        ids = [c.post("/", content=b"{}", headers={"Content-Type": "application/x-amz-json-1.0",
                                                    "X-Amz-Target": "AmazonSQS.ListQueues"}).headers["x-amzn-requestid"]
               for _ in range(3)]
    assert len(set(ids)) == 3
    assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", i) for i in ids), ids


def test_a_binary_body_with_a_refused_batch_appends_none_of_it(servers):
    """Every batch of a binary produce is checked before any is appended: a body whose second
    batch holds a value over max_message_bytes is answered 413 and its first batch is not in
    the log (the client's retry of the fixed body cannot duplicate it)."""
    for srv in servers:
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            name = f"refused-{os.getpid()}-{time.monotonic_ns() % 10**6}"
            c.post("/topics", json={"name": name}).raise_for_status()
            p = f"/topics/{name}/messages"
            body = bytes(encode_batch(0, [b"first"])) + bytes(encode_batch(0, [b"x" * ((1 << 20) + 1)]))
            r = c.post(p, content=body, headers={"Content-Type": BATCH})
            assert r.status_code == 413, r.text
            assert c.post(p, content=bytes(encode_batch(0, [b"after"])),
                          headers={"Content-Type": BATCH}).json()["ranges"][0]["base_offset"] == 0
            assert [m["value"] for m in c.get(p, params={"offset": 0}).json()["messages"]] == ["after"]
