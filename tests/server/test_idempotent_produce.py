"""Idempotent produce over REST and vqs.Client(...).producer(idempotent=True): a retried
request (a dropped connection, a server restart) is appended once."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from vqs_server_proc import ServerProcess

import vqs
from vqs.record import encode_batch_parts
from vqs.wire import BATCH_CONTENT_TYPE


def _params(pid, seq, partition=1, epoch=0):
    return {"partition": partition, "producer_id": pid, "producer_epoch": epoch, "sequence": seq}


def test_rest_idempotent_produce_answers_a_duplicate_with_its_offsets(server, http, unique):
    assert http.post("/topics", json={"name": unique, "partitions": 2}).status_code == 201
    r = http.post("/producers")
    assert r.status_code == 201
    pid = r.json()["producer_id"]
    path = f"/topics/{unique}/messages"
    body = {"messages": [{"value": "a"}, {"value": "b", "key": "k"}, {"value": "c"}]}
    first = http.post(path, params=_params(pid, 0), json=body)
    assert first.status_code == 200, first.text
    assert first.json() == {"count": 3, "ranges": [{"partition": 1, "base_offset": 0, "count": 3}]}
    assert http.post(path, params=_params(pid, 0), json=body).json() == first.json()  # a retry: no append
    batch = b"".join(encode_batch_parts(0, [b"d", b"e"]))
    ct = {"content-type": BATCH_CONTENT_TYPE}
    for _ in range(2):  # the binary body, sent twice
        r = http.post(path, params=_params(pid, 3), content=batch, headers=ct)
        assert r.json()["ranges"] == [{"partition": 1, "base_offset": 3, "count": 2}]
    offs = http.get(f"/topics/{unique}/offsets").json()
    assert [p["end_offset"] for p in offs["partitions"]] == [0, 5]
    gap = http.post(path, params=_params(pid, 9), json=body)
    assert gap.status_code == 409
    assert gap.json()["error"]["code"] == "out_of_order_sequence" and "next sequence there is 5" in gap.text
    assert gap.json()["error"]["type"] == "OutOfOrderSequence"
    missing = http.post(path, params={"producer_id": pid, "producer_epoch": 0, "sequence": 5}, json=body)
    assert missing.status_code == 400 and missing.json()["error"]["field"] == "partition"
    unknown = http.post(path, params=_params(pid + 10_000, 0), json=body)
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_producer_id"
    other = http.post(path, params=_params(pid, 5), json={"messages": [{"value": "x", "partition": 0}]})
    assert other.status_code == 400  # an idempotent request writes its one partition

    with vqs.Client(server.url) as c:
        p = c.producer(idempotent=True)
        metas = p.send_batch(unique, [b"1", b"2", b"3", b"4"], keys=[b"a", b"b", b"c", b"d"])
        assert sorted(m.offset for m in metas if m.partition == 0) == list(range(p.sequence(unique, 0)))
        with pytest.raises(vqs.TopicDoesNotExist):
            p.send(unique + "-none", b"x")


class _DropOneProduceAnswer:
    """A TCP proxy in front of the server that closes the client's connection instead of passing
    on the answer to the first idempotent produce request: the request was appended, the client
    never hears so."""

    def __init__(self, target_port: int):
        self.target = target_port
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.dropped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()  # the server is down: as a refused connection
                continue
            armed = threading.Event()
            threading.Thread(target=self._pipe, args=(c, s, armed, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(s, c, armed, False), daemon=True).start()

    def _pipe(self, src, dst, armed, up):
        try:
            while data := src.recv(65536):
                if up and b"producer_id=" in data and not self.dropped.is_set():
                    armed.set()
                elif not up and armed.is_set() and not self.dropped.is_set():
                    self.dropped.set()
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self):
        self.lsock.close()


def test_client_retries_a_dropped_answer_and_a_server_restart_without_duplicates(tmp_path):
    """A dropped answer is retried (a duplicate); a send while the server is down waits for its
    restart; after the SIGKILL a retry of an acknowledged request is still a duplicate."""
    server = ServerProcess(tmp_path / "data", "--flush", "always").start()
    proxy = _DropOneProduceAnswer(server.port)
    try:
        with vqs.Client(f"http://127.0.0.1:{proxy.port}") as c:
            c.create_topic("t")
            p = c.producer(idempotent=True, retry_timeout=30)
            sent = [p.send("t", b"m%d" % i).offset for i in range(5)]
            assert proxy.dropped.is_set() and p.retries >= 1
            server.kill9()  # the next send finds no server, and retries until it is back
            restart = threading.Timer(0.3, server.start)
            restart.start()
            t0 = time.monotonic()
            sent += [p.send("t", b"m%d" % i).offset for i in range(5, 8)]
            restart.join()
            assert time.monotonic() - t0 < 30
            assert sent == list(range(8))
            # a request acknowledged before the crash, sent again (one of the producer's last five
            # batches there, the window Kafka keeps too): a duplicate
            again = httpx.post(server.url + "/topics/t/messages", params=_params(p.producer_id, 4, 0),
                               json={"messages": [{"value": "m4"}]})
            assert again.json().get("ranges") == [{"partition": 0, "base_offset": 4, "count": 1}], again.text
            old = httpx.post(server.url + "/topics/t/messages", params=_params(p.producer_id, 0, 0),
                             json={"messages": [{"value": "m0"}]})
            assert old.status_code == 409 and "older than" in old.text
            assert httpx.post(server.url + "/producers", headers={"x-vqs-client": "test"}).json()["producer_id"] > p.producer_id
            values = [r.value for r in c.read("t", 0, 0, max_records=100)]
            assert values == [b"m%d" % i for i in range(8)]  # each once, in order
    finally:
        proxy.close()
        server.stop()



def test_openapi_documents_the_produce_query_parameters_as_enforced(server, http, unique):
    op = http.get("/openapi.json").json()["paths"]["/topics/{topic}/messages"]["post"]
    params = {p["name"]: p for p in op["parameters"] if p["in"] == "query"}
    assert set(params) == {"partition", "producer_id", "producer_epoch", "sequence"}
    assert http.post("/topics", json={"name": unique, "partitions": 1}).status_code == 201
    pid = http.post("/producers").json()["producer_id"]
    ok = _params(pid, 0, partition=0)
    for name, p in params.items():
        assert p["schema"]["type"] == "integer" and p["description"]
        if name == "partition":
            continue  # its bound is the topic's partition count, under the schema's maximum
        over = http.post(f"/topics/{unique}/messages", params={**ok, name: p["schema"]["maximum"] + 1},
                         json={"messages": [{"value": "x"}]})
        assert over.status_code == 400 and over.json()["error"]["field"] == name, over.text
        assert f"between {p['schema']['minimum']} and {p['schema']['maximum']}" in over.json()["error"]["message"]
