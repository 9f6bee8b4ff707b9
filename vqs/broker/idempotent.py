"""IdempotentProducer: a Producer whose batches are numbered, so a retried one is appended once.

``broker.producer(idempotent=True)`` takes a producer id (epoch 0) from the
broker's ``producer_states`` (producer_state.py: ids never handed out twice in
a data directory) and numbers its records per partition, as a Kafka
idempotent producer does: a batch of n records at sequence s is followed by
one at s + n. Every batch goes through ``ProducerStates.send``, which checks
the sequence and appends under the partition's lock: the next sequence is
appended; a batch the partition already holds (the same sequence and count,
among the producer's last five there) is not appended again and answers with
its first append's offsets; a gap raises OutOfOrderSequence, an older epoch
ProducerFenced. The state is kept in the batch headers, so it survives a
restart with the log.

Invariants: the producer's next sequence on a partition moves on only after
an append returned (a send that raised, e.g. DiskFullError, can be called
again and is appended at most once); sends of one producer are serialized
(one lock), so its batches reach each partition in sequence order. Single
records are one-record batches (no write buffer): an idempotent send costs
one batch write, where a plain ``Producer.send`` buffers.

The REST front makes one of these per idempotent request (``resume``), with
the client's producer id, epoch, partition and sequence: that is how
``vqs.Client(...).producer(idempotent=True)`` gets the same guarantee over HTTP.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .producer import Producer
from .topic import RecordMetadata

if TYPE_CHECKING:  # pragma: no cover
    from .broker import Broker

_SEQ_MASK = 0x7FFFFFFF  # sequences wrap at 2^31, as Kafka's


class IdempotentProducer(Producer):
    """A Producer whose every batch is appended exactly once, however often it is retried.

    ``producer_id`` and ``epoch`` identify it; ``sequence(topic, partition)``
    is the sequence its next batch there will carry.
    """

    def __init__(self, broker: Broker, *, clock_ms: Callable[[], int] | None = None,
                 producer_id: int | None = None, epoch: int = 0):
        super().__init__(broker, clock_ms=clock_ms)
        self._states = broker.producer_states
        if producer_id is None:
            producer_id, epoch = self._states.new_producer()
        else:
            self._states.check_known(producer_id)
        self.producer_id = producer_id
        self.epoch = epoch
        self._seq: dict[tuple[str, int], int] = {}
        self._only: int | None = None  # resume(): the one partition this producer may write
        self._lock = threading.Lock()
        self.duplicates = 0  # batches answered as duplicates (not appended again)

    @classmethod
    def resume(cls, broker: Broker, producer_id: int, epoch: int, topic: str, partition: int,
               sequence: int) -> IdempotentProducer:
        """A producer that continues ``producer_id``/``epoch`` on one partition at ``sequence``
        (a remote client's batch: the server does not keep producers between requests)."""
        if not 0 <= sequence <= _SEQ_MASK:
            raise ConfigError(f"sequence {sequence} is outside 0..{_SEQ_MASK}")
        if not -1 < epoch < 1 << 15:
            raise ConfigError(f"producer epoch {epoch} is outside 0..32767")
        t = broker.topic(topic)
        t.log(partition)  # validates the number
        p = cls(broker, producer_id=producer_id, epoch=epoch)
        p._seq[(t.name, partition)] = sequence
        p._only = partition
        return p

    def sequence(self, topic: str, partition: int) -> int:
        """The sequence the next batch to ``topic``/``partition`` will carry."""
        return self._seq.get((topic, partition), 0)

    def send(self, topic: str, value, key=None, headers=None, partition: int | None = None,
             timestamp_ms: int | None = None) -> RecordMetadata:
        """Append one record as a one-record batch (see the class doc); its metadata."""
        return self.send_batch(topic, [value], keys=None if key is None else [key],
                               headers=None if headers is None else [headers], partition=partition,
                               timestamps_ms=None if timestamp_ms is None else [timestamp_ms])[0]

    def send_batch(self, topic: str, values: Sequence, keys: Sequence | None = None,
                   headers: Sequence | None = None, partition: int | None = None,
                   timestamps_ms: Sequence[int] | None = None) -> list[RecordMetadata]:
        """``Producer.send_batch``, each partition's records one numbered batch."""
        if self._only is not None:
            if partition is None:
                partition = self._only
            elif partition != self._only:
                raise ConfigError(f"this idempotent request writes partition {self._only}, not {partition}")
        return super().send_batch(topic, values, keys=keys, headers=headers, partition=partition,
                                  timestamps_ms=timestamps_ms)

    def _append(self, t, p: int, values, keys, headers, timestamps_ms) -> int:
        key = (t.name, p)
        with self._lock:
            seq = self._seq.get(key, 0)
            first, dup = self._states.send(t, p, self.producer_id, self.epoch, seq, values, keys, headers,
                                           timestamps_ms)
            self._seq[key] = (seq + len(values)) & _SEQ_MASK
            if dup:
                self.duplicates += 1
        return first
