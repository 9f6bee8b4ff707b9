"""What ``vqs.Client`` accepts for values, keys, headers and topic partitions,
normalised to the embedded API's types before anything goes on the wire.

Guarantees: bytes-like values pass as bytes, ``str`` as its UTF-8 bytes, any
other type raises ``TypeError`` naming the argument; header values follow the
same rule, and may also be None (a null value, as Kafka's); a ``(topic,
partition)`` pair becomes a ``TopicPartition``.
"""

from __future__ import annotations


def as_tp(tp):
    from ..broker.topic import TopicPartition

    topic, partition = tp
    return TopicPartition(topic, int(partition))


def as_bytes(v, what="value") -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(f"{what} must be bytes or str, not {type(v).__name__}")


def as_headers(h):
    """Headers (a dict or (name, value) pairs) as [(str, bytes or None)], or None for none."""
    if not h:
        return None
    items = h.items() if isinstance(h, dict) else h
    return [(str(k), None if v is None else as_bytes(v, "header value")) for k, v in items]
