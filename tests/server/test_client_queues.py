"""vqs.Client queues against the embedded API: the same attributes and the same error classes.

Each test sends the same thing to an embedded queue and to one on the server
and asserts the answers are equal, so the REST front cannot drift from the
embedded API in message attributes or in the precise error raised.
"""

from __future__ import annotations

import base64

import httpx
import pytest

import vqs
import vqs.client as vc
from vqs import errors as E
from vqs.client.error_map import from_failed_entry, from_response


@pytest.fixture
def client(base_url):
    with vc.Client(base_url) as c:
        yield c


@pytest.fixture
def broker(tmp_path):
    with vqs.Broker(str(tmp_path / "embedded")) as b:
        yield b


ATTRIBUTES = {
    "s": "text",
    "n": 42,
    "f": 1.5,
    "b": b"\x00\xff",
    "typed-number": {"DataType": "Number.int", "StringValue": "-7"},
    "typed-binary": {"DataType": "Binary.png", "BinaryValue": bytearray(b"\x89PNG")},
    "typed-string": {"DataType": "String.label", "StringValue": "é"},
}


def test_attributes_in_every_embedded_form_come_back_as_the_embedded_api_gives_them(client, broker, unique):
    local, remote = broker.create_queue(unique), client.create_queue(unique)
    local.send(b"x", attributes=ATTRIBUTES)
    remote.send(b"x", attributes=ATTRIBUTES)
    [lm], [rm] = local.receive(), remote.receive()
    assert rm.attributes == lm.attributes
    assert rm.attributes["b"] == {"DataType": "Binary", "BinaryValue": b"\x00\xff"}
    assert rm.attributes["n"] == {"DataType": "Number", "StringValue": "42"}
    remote.send_batch([{"body": b"y", "attributes": {"b": b"\x01"}}, {"body": b"z"}])
    got = {m.body: m.attributes for m in remote.receive(max_messages=10)}
    assert got == {b"y": {"b": {"DataType": "Binary", "BinaryValue": b"\x01"}}, b"z": {}}


@pytest.mark.parametrize("attributes", [
    {"n": {"DataType": "Number", "StringValue": "not a number"}},
    {"b": {"DataType": "Binary", "BinaryValue": "AP8="}},  # a str, not bytes
    {"b": {"DataType": "Binary", "StringValue": "x"}},
    {"x": {"DataType": "Whatever", "StringValue": "x"}},
    {"bad name!": "x"},
])
def test_an_attribute_the_embedded_api_refuses_is_refused_with_the_same_error(client, broker, unique, attributes):
    local, remote = broker.create_queue(unique), client.create_queue(unique)
    with pytest.raises(E.VQSError) as embedded:
        local.send(b"x", attributes=attributes)
    with pytest.raises(E.VQSError) as over_http:
        remote.send(b"x", attributes=attributes)
    assert type(over_http.value) is type(embedded.value)
    assert str(over_http.value) == str(embedded.value)
    assert remote.receive() == []


def test_rest_attributes_are_plain_strings_or_sqs_shaped_with_base64_binary(http, unique):
    assert http.post("/queues", json={"name": unique}).status_code == 201
    attrs = {"k": "v", "bin": {"DataType": "Binary", "BinaryValue": base64.b64encode(b"\x00\x01").decode()}}
    r = http.post(f"/queues/{unique}/messages", json={"messages": [{"body": "a", "attributes": attrs}]})
    assert r.status_code == 200, r.text
    [m] = http.post(f"/queues/{unique}/receive", json={}).json()["messages"]
    assert m["attributes"] == {"k": {"DataType": "String", "StringValue": "v"}, "bin": attrs["bin"]}
    bad = {"bin": {"DataType": "Binary", "BinaryValue": "not base64!"}}
    r = http.post(f"/queues/{unique}/messages", json={"messages": [{"body": "a", "attributes": bad}]})
    assert r.status_code == 400 and r.json()["error"]["field"] == "attributes"


def test_error_bodies_name_the_precise_embedded_error(http, unique):
    assert http.post("/queues", json={"name": unique + ".fifo", "fifo": True}).status_code == 201
    q = f"/queues/{unique}.fifo"
    assert http.post(f"{q}/messages", json={"messages": [{"body": "a", "group_id": "g", "dedup_id": "d"}]}).status_code == 200
    stale = http.post(f"{q}/receive", json={"visibility_timeout": 0}).json()["messages"][0]["receipt_handle"]
    assert http.post(f"{q}/receive", json={"visibility_timeout": 30}).json()["messages"]
    [failed] = http.post(f"{q}/delete", json={"receipt_handles": [stale]}).json()["failed"]
    assert (failed["code"], failed["type"]) == ("InvalidParameterValue", "ReceiptHandleExpired")
    r = http.post(f"{q}/visibility", json={"receipt_handle": "junk", "visibility_timeout": 0})
    assert r.status_code == 400
    err = r.json()["error"]
    assert (err["code"], err["sqs_code"], err["type"]) == ("receipt_handle_is_invalid", "ReceiptHandleIsInvalid",
                                                          "ReceiptHandleIsInvalid")
    err = http.get(f"/topics/{unique}-missing").json()["error"]
    assert (err["code"], err["type"]) == ("topic_not_found", "TopicDoesNotExist")


def _answer(status: int, error: dict) -> httpx.Response:
    return httpx.Response(status, json={"error": error})


def test_the_client_prefers_the_type_and_falls_back_to_the_code():
    ex = from_response(_answer(400, {"code": "invalid_parameter_value", "message": "m", "sqs_code": "InvalidParameterValue",
                                     "type": "ReceiptHandleExpired"}))
    assert type(ex) is E.ReceiptHandleExpired and str(ex) == "m" and ex.handle is None
    # an answer without a type (an older server): mapped from the codes, as before
    ex = from_response(_answer(400, {"code": "invalid_parameter_value", "message": "m", "sqs_code": "InvalidParameterValue"}))
    assert type(ex) is E.InvalidParameterValue
    ex = from_response(_answer(404, {"code": "topic_not_found", "message": "m"}))
    assert type(ex) is E.TopicDoesNotExist and ex.name is None
    ex = from_response(_answer(400, {"code": "offset_out_of_range", "message": "m", "type": "OffsetOutOfRange",
                                     "detail": {"offset": 9, "start_offset": 0, "end_offset": 3}}))
    assert (type(ex), ex.offset, ex.start_offset, ex.end_offset) == (E.OffsetOutOfRange, 9, 0, 3)
    # a type that is not one of the embedded API's errors is not trusted
    for name in ("RemoteError", "Path", "__class__"):
        ex = from_response(_answer(418, {"code": "teapot", "message": "m", "type": name}))
        assert (type(ex), ex.status, ex.code) == (E.RemoteError, 418, "teapot")
    assert type(from_failed_entry({"code": "InvalidParameterValue", "type": "ReceiptHandleExpired"})) is E.ReceiptHandleExpired
    assert type(from_failed_entry({"code": "ReceiptHandleIsInvalid"})) is E.ReceiptHandleIsInvalid
