"""Topics over HTTP: ``RemoteTopic`` (a topic's description and offsets) and
``RemoteProducer`` (``vqs.Producer``'s send and send_batch).

Guarantees: a send returns only after the server acknowledged it (its flush
policy says what the acknowledgement promises); nothing is buffered on the
client, so ``flush`` has nothing to do. A batch travels as one binary
record-batch body (the log's own format, ``vqs.record``) and
comes back as one ``RecordMetadata`` per value, in input order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import errors as E
from ..broker.topic import RecordMetadata
from ..record import encode_batch_parts
from ..wire import BATCH_CONTENT_TYPE
from .error_map import from_response
from .values import as_bytes, as_headers

if TYPE_CHECKING:
    from .core import Client
    from .transport import Transport

PRODUCE_HEADERS = ((b"content-type", BATCH_CONTENT_TYPE.encode()),)
_PRODUCE_LINES = b"content-type: %s\r\n" % BATCH_CONTENT_TYPE.encode()


def produce_columns(values: Sequence, keys: Sequence | None, headers: Sequence | None,
                    timestamps_ms: Sequence[int] | None) -> tuple:
    """``send_batch``'s columns checked (each as long as ``values``, else ``ConfigError``) and
    normalised for ``batch_body``: (values as bytes or None (a null value), keys or None when
    none is set, headers or None when no record has any, timestamps as a list or None)."""
    n = len(values)
    for name, col in (("keys", keys), ("headers", headers), ("timestamps_ms", timestamps_ms)):
        if col is not None and len(col) != n:
            raise E.ConfigError(f"send_batch: {name} has {len(col)} items, values has {n}")
    # the class test first: values are nearly always bytes already
    vals = [v if v.__class__ is bytes or v is None else as_bytes(v) for v in values]
    ks = None if keys is None or all(k is None for k in keys) else [None if k is None else as_bytes(k, "key") for k in keys]
    hs = None if headers is None or not any(headers) else [as_headers(h) for h in headers]
    ts = None if timestamps_ms is None else list(timestamps_ms)
    return vals, ks, hs, ts


def batch_body(vals: list, ks: list | None, hs: list | None, ts: list | None) -> bytes:
    """A produce request's binary body: the columns as one record batch (the log's format)."""
    return b"".join(encode_batch_parts(0, vals, keys=ks, headers=hs, timestamps=0 if ts is None else ts,
                                       nulls=None in vals))


class RemoteTopic:
    """A topic on the server (a snapshot of its description, offsets fetched live)."""

    def __init__(self, client: Client, transport: Transport, desc: dict):
        self._client = client
        self._transport = transport
        self.name = desc["name"]
        self.partitions = desc["partitions"]
        self.config = desc.get("config", {})
        self._desc = desc

    def __repr__(self) -> str:
        return f"RemoteTopic({self.name!r}, partitions={self.partitions})"

    def describe(self) -> dict:
        return self._transport.json("GET", f"/topics/{self.name}")

    def start_offsets(self) -> list[int]:
        return [p["start_offset"] for p in self._client.offsets(self.name)]

    def end_offsets(self) -> list[int]:
        return [p["end_offset"] for p in self._client.offsets(self.name)]

    def start_offset(self, partition: int) -> int:
        return self.start_offsets()[partition]

    def end_offset(self, partition: int) -> int:
        return self.end_offsets()[partition]

    def read(self, partition: int, offset: int, *, max_records: int = 500, max_bytes: int = 1 << 20,
             timeout: float = 0.0) -> list:
        return self._client.read(self.name, partition, offset, max_records=max_records, max_bytes=max_bytes,
                                 timeout=timeout)


class RemoteProducer:
    """``Producer`` over HTTP: every send is acknowledged by the server before it returns
    (the server's flush policy says what the acknowledgement promises)."""

    def __init__(self, transport: Transport):
        self._transport = transport

    def send(self, topic: str, value, key=None, headers=None, partition: int | None = None,
             timestamp_ms: int | None = None):
        tr = self._transport
        if self.__class__ is RemoteProducer and tr._lean is not None and value.__class__ is bytes and key is None \
                and headers is None and timestamp_ms is None and (partition is None or partition.__class__ is int):
            # one plain value (the common send): the same body and answer as send_batch's, with
            # the request's head made once per topic and partition (Transport.lean). Not for a
            # subclass: its send_batch (the idempotent producer's numbered requests) is its send.
            r = tr.lean("POST", f"/topics/{topic}/messages", "" if partition is None else f"partition={partition}",
                        _PRODUCE_LINES, b"".join(encode_batch_parts(0, (value,))), keep=True)
            if r.status_code != 200:
                raise from_response(r)
            try:
                rg = json.loads(r.content)["ranges"][0]
                return RecordMetadata(topic, rg["partition"], rg["base_offset"])
            except (ValueError, LookupError, TypeError):
                raise E.RemoteError(f"POST /topics/{topic}/messages: the answer is not a produce answer",
                                    status=200, code="bad_answer") from None
        return self.send_batch(topic, [value], keys=None if key is None else [key],
                               headers=None if headers is None else [headers], partition=partition,
                               timestamps_ms=None if timestamp_ms is None else [timestamp_ms])[0]

    def send_batch(self, topic: str, values: Sequence, keys: Sequence | None = None,
                   headers: Sequence | None = None, partition: int | None = None,
                   timestamps_ms: Sequence[int] | None = None) -> list:
        from .shapes import produce_answer

        if len(values) == 0:
            return []
        body = batch_body(*produce_columns(values, keys, headers, timestamps_ms))
        params = {} if partition is None else {"partition": partition}
        _, data = self._transport.hot("POST", f"/topics/{topic}/messages", params,
                                      PRODUCE_HEADERS, content=body)
        return produce_answer(topic, json.loads(data))

    def flush(self) -> None:
        """Nothing is buffered client-side: every send was acknowledged."""

    def close(self) -> None:
        pass

    def __enter__(self) -> RemoteProducer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
