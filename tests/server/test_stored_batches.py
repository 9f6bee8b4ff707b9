"""The stored-batch fetch: ``GET /topics/{t}/messages?stored=1`` with ``Accept: application/vnd.vqs.batch``.

A real server (``flush = always``: every acknowledged produce is in its
segment file) answers the bytes of the whole stored batches holding the
offsets asked for, byte for byte as the segment file holds them: from the
batch holding ``offset`` (which may begin below it), compressed ones as
stored, whole batches up to ``max_bytes`` (at least one) and until ``limit``
records; the next offset is the end of the last batch. A batch whose bytes
were damaged on disk is never served: an answer ends before it, and a fetch
that starts at it is answered 500 ``corrupt_data`` (the server's fault). The lean dispatch (the
fast path) and the FastAPI route answer alike, and ``vqs.Client`` decodes
the answer (``read_stored_batches``).
"""

from __future__ import annotations

import glob
import os

import httpx
import pytest
from vqs_server_proc import ServerProcess

from vqs.client import Client
from vqs.record import decode_batch
from vqs.wire import BATCH_CONTENT_TYPE, decode_body

ACCEPT = {"accept": BATCH_CONTENT_TYPE}
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = ServerProcess(tmp_path_factory.mktemp("stored") / "data", "--flush", "always").start()
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def client(server):
    with Client(server.url) as c:
        yield c


def _fill(client, topic: str, batches: int = 3, per: int = 5, size: int = 10_000, compression=None) -> None:
    """``batches`` produce requests of ``per`` records each: one stored batch per request."""
    client.create_topic(topic, compression=compression)
    prod = client.producer()
    for b in range(batches):
        vals = [bytes([65 + (b * per + i) % 26]) * size for i in range(per)]
        prod.send_batch(topic, vals, keys=[b"k%d" % i if i % 2 else None for i in range(per)],
                        headers=[[("h", b"%d" % i)] if i % 3 == 0 else None for i in range(per)],
                        timestamps_ms=[T0 + b * per + i for i in range(per)], partition=0)


def _segment(server, topic: str) -> tuple[str, bytes, list]:
    """(path, bytes, [(position, base offset, next offset, size)]) of the topic's one segment."""
    [path] = glob.glob(os.path.join(server.data_dir, "topics", topic, "0", "*.log"))
    with open(path, "rb") as f:
        data = f.read()
    out = []
    pos = 0
    while pos < len(data):
        b = decode_batch(data, pos)
        out.append((pos, b.base_offset, b.next_offset, b.size_bytes))
        pos += b.size_bytes
    return path, data, out


def _get(server, topic: str, extra: str = "", headers=ACCEPT) -> httpx.Response:
    return httpx.get(f"{server.url}/topics/{topic}/messages?partition=0{extra}", headers=headers, timeout=30)


def test_whole_log_is_the_segment_file(server, client):
    _fill(client, "plain")
    _, data, batches = _segment(server, "plain")
    assert [(b[1], b[2]) for b in batches] == [(0, 5), (5, 10), (10, 15)]
    r = _get(server, "plain", "&offset=0&stored=1")
    assert r.status_code == 200 and r.headers["content-type"] == BATCH_CONTENT_TYPE
    assert len(r.content) > 64 << 10  # written apart from its head by the fast path
    assert r.content == data
    assert (r.headers["x-vqs-next-offset"], r.headers["x-vqs-start-offset"], r.headers["x-vqs-end-offset"]) \
        == ("15", "0", "15")
    # the existing decoders read them: the same records as the re-encoded answer
    stored = [rec for b in decode_body(r.content) for rec in b.records()]
    fresh = [rec for b in decode_body(_get(server, "plain", "&offset=0").content) for rec in b.records()]
    assert stored == fresh and len(stored) == 15


def test_first_batch_may_begin_below_the_offset(server, client):
    _, data, batches = _segment(server, "plain")
    r = _get(server, "plain", "&offset=7&stored=1")
    assert r.content == data[batches[1][0]:]
    assert r.headers["x-vqs-next-offset"] == "15"
    # the re-encoding answer starts exactly at the offset, as before
    assert decode_body(_get(server, "plain", "&offset=7").content)[0].base_offset == 7


def test_whole_batches_within_max_bytes_and_limit(server, client):
    _, data, batches = _segment(server, "plain")
    one = data[batches[1][0]:batches[1][0] + batches[1][3]]
    # at least one batch, however small max_bytes is
    r = _get(server, "plain", "&offset=6&stored=1&max_bytes=1")
    assert r.content == one and r.headers["x-vqs-next-offset"] == "10"
    # whole batches only: two fit, the third would pass max_bytes
    two = batches[1][3] + batches[2][3]
    r = _get(server, "plain", f"&offset=6&stored=1&max_bytes={two - 1}")
    assert r.content == one
    r = _get(server, "plain", f"&offset=6&stored=1&max_bytes={two}")
    assert r.content == data[batches[1][0]:]
    # limit counts records from the offset on; the batch that reaches it is whole
    r = _get(server, "plain", "&offset=6&stored=1&limit=4")
    assert r.content == one
    r = _get(server, "plain", "&offset=6&stored=1&limit=5")
    assert r.content == data[batches[1][0]:]


@pytest.mark.parametrize("extra", ["", "&unknown=1"], ids=["fast path", "route"])
def test_an_answer_holds_one_segment_and_the_next_offset_goes_on(server, client, extra):
    """A fetch reads one segment, as Kafka's: an answer ends at its segment's end however
    large ``max_bytes``, and following ``x-vqs-next-offset`` serves every segment file whole."""
    topic = "segmented" + ("-route" if extra else "")
    client.create_topic(topic, segment_bytes=40_000)
    prod = client.producer()
    for b in range(12):  # one ~10 KB batch a request: several segments
        prod.send_batch(topic, [bytes([65 + b]) * 10_000], partition=0)
    paths = sorted(glob.glob(os.path.join(server.data_dir, "topics", topic, "0", "*.log")))
    assert len(paths) >= 3
    files = []
    for path in paths:
        with open(path, "rb") as f:
            files.append(f.read())
    got, offset = [], 0
    while True:
        r = _get(server, topic, f"&offset={offset}&stored=1&max_bytes={64 << 20}{extra}")
        assert r.status_code == 200
        if not r.content:
            break
        got.append(r.content)
        offset = int(r.headers["x-vqs-next-offset"])
    assert got == files and offset == 12


def test_end_of_log_and_out_of_range(server, client):
    r = _get(server, "plain", "&offset=15&stored=1&wait_ms=20")
    assert r.status_code == 200 and r.content == b"" and r.headers["x-vqs-next-offset"] == "15"
    r = _get(server, "plain", "&offset=16&stored=1")
    assert r.status_code == 400 and r.json()["error"]["code"] == "offset_out_of_range"


def test_the_lean_dispatch_and_the_route_answer_alike(server, client):
    """An unknown parameter hands the request to the FastAPI route (which ignores it)."""
    fast = _get(server, "plain", "&offset=3&stored=1&max_bytes=30000")
    route = _get(server, "plain", "&offset=3&stored=1&max_bytes=30000&unknown=1")
    assert fast.status_code == route.status_code == 200
    assert fast.content == route.content and fast.headers["x-vqs-next-offset"] == route.headers["x-vqs-next-offset"]


@pytest.mark.parametrize("extra", ["", "&unknown=1"])
def test_stored_needs_the_binary_media_type(server, client, extra):
    r = _get(server, "plain", "&offset=0&stored=1" + extra, headers={})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_argument" and err["field"] == "stored"
    assert _get(server, "plain", "&offset=0&stored=2" + extra).status_code in (400, 422)


@pytest.mark.parametrize("codec,cid", [("zstd", 1), ("lz4", 2), ("gzip", 3)])
def test_compressed_batches_are_served_compressed(server, client, codec, cid):
    topic = f"packed-{codec}"
    _fill(client, topic, size=3000, compression=codec)  # compressible values
    _, data, batches = _segment(server, topic)
    assert all(data[b[0] + 17] == cid for b in batches)  # the header's codec byte
    r = _get(server, topic, "&offset=2&stored=1")
    assert r.content == data and r.headers["x-vqs-next-offset"] == "15"
    got = [rec for b in decode_body(r.content) for rec in b.records()]
    assert [x.value for x in got] == [bytes([65 + i % 26]) * 3000 for i in range(15)]


def test_a_damaged_stored_batch_is_not_served(server, client):
    _fill(client, "damaged")
    path, data, batches = _segment(server, "damaged")
    pos = batches[1][0] + 64 + 100  # inside the second batch's body
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(bytes([data[pos] ^ 0xFF]))
    # an answer ends before it
    r = _get(server, "damaged", "&offset=0&stored=1")
    assert r.status_code == 200 and r.content == data[:batches[1][0]]
    assert r.headers["x-vqs-next-offset"] == "5"
    # a fetch that starts at it is an error naming no server path
    r = _get(server, "damaged", "&offset=5&stored=1")
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "corrupt_data" and server.data_dir not in r.text
    # the batch after it is whole and served
    r = _get(server, "damaged", "&offset=10&stored=1")
    assert r.status_code == 200 and r.content == data[batches[2][0]:]


def test_client_read_stored_batches(server, client):
    batches, nxt, end = client.read_stored_batches("plain", 0, 7, max_bytes=1)
    assert [(b.base_offset, b.count) for b in batches] == [(5, 5)] and (nxt, end) == (10, 15)
    batches, nxt, end = client.read_stored_batches("plain", 0, 7)
    assert [b.base_offset for b in batches] == [5, 10] and nxt == 15
    recs = [r for b in batches for r in b.records() if r.offset >= 7]
    assert [(r.offset, r.key, r.value, r.headers) for r in recs] == \
        [(r.offset, r.key, r.value, r.headers) for r in client.read("plain", 0, 7, max_records=100)]
    # read_batches keeps its contract: exactly the records from the offset on, at most max_records
    batches, nxt, _ = client.read_batches("plain", 0, 7, max_records=4)
    assert [(b.base_offset, b.count) for b in batches] == [(7, 4)] and nxt == 11
