"""Filling a small filesystem through a log or a queue, and draining a queue:
the steps the disk-full tests share (tests/storage, tests/broker)."""

from __future__ import annotations

import pytest

from vqs import DiskFullError


def fill_log(log, limit: int = 100_000) -> int:
    """Append 1 KB records (``b"%08d" % n`` + 1,000 bytes) until the disk refuses
    one (DiskFullError, which must come before ``limit``); return how many were
    acknowledged."""
    n = 0
    with pytest.raises(DiskFullError):
        while n < limit:
            log.append(b"%08d" % n + b"v" * 1000)
            n += 1
    return n


def close_full(log) -> None:
    """Close ``log`` on a disk that may still be full: a close that could not
    write its clean-shutdown marker or checkpoint raises DiskFullError after
    releasing everything (the next open validates the tail, as after a crash)."""
    try:
        log.close()
    except DiskFullError:
        pass


def fill_topic(producer, topic: str = "t", limit: int = 20_000) -> int:
    """Send 1 KB records to ``topic`` through ``producer`` until the disk
    refuses one (DiskFullError, which must come before ``limit``); return how
    many were acknowledged."""
    p = producer
    n = 0
    with pytest.raises(DiskFullError):
        while n < limit:
            p.send(topic, b"%08d" % n + b"v" * 1000)
            n += 1
    return n


def fill_queue(q, broker, body: bytes) -> int:
    """Send ``body + b"%06d" % n`` until the disk refuses, then flush the broker;
    return how many sends were acknowledged."""
    n = 0
    try:
        while True:
            q.send(body + b"%06d" % n)
            n += 1
    except DiskFullError:
        pass
    try:
        broker.flush()
    except DiskFullError:
        pass  # (btrfs: the held sends take new blocks; they wait in the buffer, acknowledged)
    return n


def drain_queue(q, batch: bool = False, **receive_kw) -> list:
    """Receive until the queue answers empty, deleting each message one by one
    (single deletes: each one's room on a full disk is what is checked), or
    each receive's messages in one ``delete_batch``; the bodies, in the order
    received."""
    got: list = []
    while True:
        ms = q.receive(10, **receive_kw)
        if not ms:
            return got
        got += [m.body for m in ms]
        if batch:
            q.delete_batch([m.receipt_handle for m in ms])
        else:
            for m in ms:
                q.delete(m.receipt_handle)
