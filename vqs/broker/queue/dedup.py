"""FIFO deduplication: a 5-minute window of deduplication ids.

A message sent with a deduplication id seen in the last 5 minutes is accepted
(the send succeeds and returns the first message's id and sequence number) but
not enqueued again, as SQS does. The id is the explicit MessageDeduplicationId,
or the SHA-256 of the body when ContentBasedDeduplication is on. With
DeduplicationScope ``messageGroup`` the window is per message group.

The window is rebuilt at open from the message log: a FIFO queue never deletes
a segment holding messages younger than the window (see Queue._reclaim), and
every message carries its deduplication id in its headers.
"""

from __future__ import annotations

from collections import OrderedDict
from hashlib import sha256

WINDOW_MS = 5 * 60 * 1000


def content_dedup_id(body: bytes) -> str:
    return sha256(body).hexdigest()


class DedupWindow:
    """dedup key -> (expiry ms, offset) for the last ``window_ms`` of sends."""

    __slots__ = ("window_ms", "_d")

    def __init__(self, window_ms: int = WINDOW_MS):
        self.window_ms = window_ms
        self._d: OrderedDict = OrderedDict()

    def _expire(self, now_ms: int) -> None:
        d = self._d
        while d:
            k, (exp, _) = next(iter(d.items()))
            if exp > now_ms:
                break
            d.popitem(last=False)

    def lookup(self, key, now_ms: int) -> int | None:
        """The offset of the message first sent with ``key`` within the window, or None."""
        self._expire(now_ms)
        v = self._d.get(key)
        return None if v is None else v[1]

    def add(self, key, sent_ms: int, offset: int) -> None:
        exp = sent_ms + self.window_ms
        d = self._d
        if key in d:
            return
        d[key] = (exp, offset)
        # keep expiry order: entries come in time order except after a restart's
        # rebuild, where they come in log order (also time order).

    def __len__(self) -> int:
        return len(self._d)

    def clear(self) -> None:
        self._d.clear()
