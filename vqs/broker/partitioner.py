"""Choosing a partition for a record.

Keyed records go to ``murmur2(key) & 0x7fffffff % partitions``: Kafka's default
partitioner, bit for bit, so a key lands on the same partition in every process,
after every restart, and as it would in a Kafka topic with the same partition
count. (Python's ``hash()`` is salted per process and must never be used here.)

Keyless records are spread round-robin: one partition per ``send``, and one per
``send_batch`` call (the whole batch stays together, so it is written as one
batch on disk).
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
from array import array

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` as an unsigned 32-bit int (Java returns it signed)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    if n4:
        words = array("I")
        if words.itemsize != 4:  # pragma: no cover - exotic platforms
            words = array("L")
        words.frombytes(bytes(data[:n4]))
        if sys.byteorder == "big":  # pragma: no cover
            words.byteswap()
        for k in words:
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= data[n4 + 2] << 16
        if rest >= 2:
            h ^= data[n4 + 1] << 8
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


@functools.lru_cache(maxsize=1 << 16)
def _positive_hash(key: bytes) -> int:
    # Keys repeat (customer ids, ...): a cache hit costs far less than murmur2 in Python.
    return murmur2(key) & 0x7FFFFFFF


def partition_for_key(key, partitions: int) -> int:
    """The partition of ``key`` among ``partitions`` (Kafka's default partitioner)."""
    if partitions == 1:
        return 0
    if key.__class__ is not bytes:
        key = bytes(key)
    return _positive_hash(key) % partitions


class RoundRobin:
    """Thread-safe rotating partition choice for keyless records, per topic."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count] = {}
        self._lock = threading.Lock()

    def next(self, topic: str, partitions: int) -> int:
        counter = self._counters.get(topic)
        if counter is None:
            with self._lock:
                counter = self._counters.setdefault(topic, itertools.count())
        # next() on itertools.count is atomic under the GIL.
        return next(counter) % partitions


def group_by_key(keys, partitions: int, rr: RoundRobin, topic: str) -> dict[int, list[int]]:
    """The indexes of ``keys`` (one ``send_batch``'s) grouped by partition, in input order
    within each: a key goes to its hash partition; the keyless records of the call all go
    to one partition chosen round-robin (so they stay one batch)."""
    groups: dict[int, list[int]] = {}
    sticky = None
    for i, k in enumerate(keys):
        if k is None:
            if sticky is None:
                sticky = rr.next(topic, partitions)
            p = sticky
        else:
            p = partition_for_key(k, partitions)
        groups.setdefault(p, []).append(i)
    return groups
