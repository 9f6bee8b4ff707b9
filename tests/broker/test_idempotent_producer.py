"""broker.producer(idempotent=True): numbered batches, a retry appended once, gaps and fencing refused."""

from __future__ import annotations

import pytest

import vqs
from vqs.broker.idempotent import IdempotentProducer


def test_batches_are_numbered_per_partition_and_a_retry_is_appended_once(tmp_path):
    with vqs.Broker(tmp_path / "d") as b:
        b.create_topic("t", partitions=2)
        p = b.producer(idempotent=True)
        assert isinstance(p, IdempotentProducer) and p.producer_id >= 0 and p.epoch == 0
        assert p.send("t", b"a", partition=0).offset == 0
        metas = p.send_batch("t", [b"b", b"c", b"d"], keys=[b"k1", b"k2", b"k3"])  # spread by key
        assert sum(p.sequence("t", q) for q in (0, 1)) == 4
        assert p.sequence("t", 0) == 1 + sum(m.partition == 0 for m in metas)
        # a retry: the same producer, epoch and sequence (as a remote client's retried request)
        again = IdempotentProducer.resume(b, p.producer_id, p.epoch, "t", 0, 0)
        assert again.send("t", b"a").offset == 0 and again.duplicates == 1
        assert b.topic("t").end_offsets() == [p.sequence("t", 0), p.sequence("t", 1)]
        # a gap, an older epoch, an id never handed out
        gap = IdempotentProducer.resume(b, p.producer_id, p.epoch, "t", 0, p.sequence("t", 0) + 5)
        with pytest.raises(vqs.OutOfOrderSequence, match="next sequence there is"):
            gap.send("t", b"x")
        IdempotentProducer.resume(b, p.producer_id, 1, "t", 1, 0).send("t", b"epoch 1")
        with pytest.raises(vqs.ProducerFenced):
            p.send("t", b"old epoch", partition=1)
        with pytest.raises(vqs.UnknownProducerId):
            IdempotentProducer.resume(b, p.producer_id + 10_000, 0, "t", 0, 0)
        with pytest.raises(vqs.ConfigError):
            IdempotentProducer.resume(b, p.producer_id, 0, "t", 0, 0).send("t", b"x", partition=1)
        assert b.producer().__class__ is vqs.Producer  # the plain producer is unchanged


def test_a_retry_after_reopen_is_still_a_duplicate(tmp_path):
    with vqs.Broker(tmp_path / "d") as b:
        b.create_topic("t")
        p = b.producer(idempotent=True)
        p.send_batch("t", [b"1", b"2"])
        pid = p.producer_id
    with vqs.Broker(tmp_path / "d") as b:
        r = IdempotentProducer.resume(b, pid, 0, "t", 0, 0)
        assert [m.offset for m in r.send_batch("t", [b"1", b"2"])] == [0, 1]
        assert r.send("t", b"3").offset == 2
        assert [x.value for x in b.topic("t").read(0, 0)] == [b"1", b"2", b"3"]
