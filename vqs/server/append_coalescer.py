"""Coalesced appends: concurrent produce requests to one partition written as one append.

Under load many connections each produce a record or a few, and each request
would pay a whole ``Producer.send_batch`` (a log append: encode, CRC, one
``writev``) for it. The event loop sees such requests arrive together (one
poll of many sockets starts them all in the same round), so the first request
for a partition opens a *group* and schedules its write with
``loop.call_soon``; every request for the same partition that joins before
that callback runs (the others started in that round) is added to the group;
the callback appends the group as one batch and hands each request its own
offsets. A request that finds no group open for its partition, its body one
plain record batch (``send_encoded``), is appended at once as the client
encoded it (``Log.append_encoded``: no decoding into values and no encoding
again), and answered from the next round: it leads, and the requests after it
in the same round form the group behind it, as in a log's group commit.

Invariants:

* **Acknowledged means appended as the flush policy says.** A request's
  future is resolved only after ``Producer.send_batch`` of the group that
  holds its records has returned, and the request is answered only then.
  Under ``interval`` and ``never`` (the server's and the topic's own ``flush``)
  that append runs inline in the event loop (it cannot wait on an fsync;
  ``ServerContext.inline_for_topic``): the records
  are in the segment file before any answer is written, so a SIGKILL of the
  server after an answer loses none of them (the kernel holds the written
  pages; only a power loss can take the last ``flush_interval_ms``, as the
  policy documents). Under ``always`` (the server's or the topic's) the group is appended in a worker thread
  and ``send_batch`` returns only after the fsync (the log's group commit
  shares one fsync between threads), so an answered record is on disk.
* **Order.** A group's records are laid out in the order the requests joined,
  each request's records consecutive and in its own order; groups of one
  partition are appended in the order they were opened (``call_soon`` runs
  callbacks first in, first out). Requests in flight at the same time have no
  order between them (as before); a client's next request on a connection
  comes after the answer to the previous one, so it lands after it.
* **One group is one record batch, so a failed write leaves nothing of it.**
  A group holds at most ``Log.batch_max_bytes`` of values (a request that
  alone is larger is appended by itself, split by the log as it always was),
  which the log writes as a single batch; a write that fails is cut back to
  the batch boundary by the log. So a request answered with an error had none
  of its records appended by its group.
* **One request's error does not fail the others.** Requests are checked
  (sizes, partitions, encodings) before they join. A group append that raises
  anything but a write error (the log's ``DiskFullError``, ``LogFailedError``,
  ``LogClosedError``, ``ReadOnlyError`` and other ``OSError``: the log or the
  disk refusing every request alike) failed before writing anything (the
  batch is encoded before it is written), and its requests are appended again
  one by one, each getting its own answer.
* **Partitions.** A request joins the group of the one partition all its
  records go to: the one it names, the topic's only partition, or the hash
  partition of its keys when they all hash to one. Keyless requests without a
  partition share one group per topic, appended to the next partition
  round-robin, so a group of them stays one batch (Kafka's sticky
  partitioner; the spread over partitions is by group, not by request).
  A request whose records go to several partitions is not coalesced
  (``Producer.send_batch`` directly, as before). Requests that give their
  own timestamps group apart from those the log stamps (one clock reading for
  the group, as for any one append).

Cost added per request: a future and a dict lookup; saved: all but one
``send_batch`` per group (the measurements are in bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio

from ..broker.partitioner import partition_for_key
from ..errors import DiskFullError, LogClosedError, LogFailedError, ReadOnlyError

#: Errors that say the log or the disk refuses every write alike: not retried one by one.
_WRITE_ERRORS = (DiskFullError, LogFailedError, LogClosedError, ReadOnlyError, OSError)

#: At most this many records in one group (a bound on one append's time).
MAX_GROUP_RECORDS = 4096


class _Group:
    __slots__ = ("topic", "partition", "entries", "nbytes", "nrecords", "limit")

    def __init__(self, topic, partition, limit: int):
        self.topic = topic
        self.partition = partition
        self.entries: list = []  # (values, keys, headers, timestamps, value bytes, future)
        self.nbytes = 0
        self.nrecords = 0
        self.limit = limit


class AppendCoalescer:
    """``send``: a produce request's records appended, coalesced with concurrent ones (see above).
    Lives on the event loop's thread; only ``_append`` may run in a worker thread."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._open: dict = {}  # (topic object, partition or None, stamped) -> the group taking requests
        self._tasks: set = set()  # appends running in worker threads (the loop keeps only weak references)

    def send(self, topic, partition, values: list, keys, headers, timestamps, nbytes: int, sink=None):
        """Append one request's records (``keys``, ``headers``, ``timestamps``: None or one per
        value, as ``Producer.send_batch``; ``nbytes``: the values' bytes) and count them in
        ``vqs_messages_in`` / ``vqs_bytes_in``; await the answer for their RecordMetadata in
        input order. (A future, not a coroutine: one frame less on the request's way.)

        ``sink``: instead of a new future, an object with a future's ``done``, ``set_result``,
        ``set_exception`` and ``cancel``, called on the loop's thread exactly as a future's
        would be (the HTTP fast path's request answers from them, with no task of its own);
        it is returned; or None, with nothing done, for a request whose records go to several
        partitions (those are appended apart, by ``_direct``: a coroutine)."""
        if topic.compacted:
            topic.check_keys(keys, len(values))  # InvalidRecord before anything is queued
        n = topic.partitions
        if partition is None:
            if n == 1:
                partition = 0
            elif keys is not None:
                parts = {None if k is None else partition_for_key(k, n) for k in keys}
                partition = parts.pop() if len(parts) == 1 else None
                if partition is None:  # records for several partitions (or keyless among keyed)
                    if sink is not None:
                        return None
                    return self._direct(topic, values, keys, headers, timestamps, nbytes)
        # requests with their own timestamps group apart: a group is stamped by the log, or not at all
        key = (topic, partition, timestamps is not None)
        g = self._open.get(key)
        if g is not None and (g.nbytes + nbytes > g.limit or g.nrecords + len(values) > MAX_GROUP_RECORDS):
            del self._open[key]  # full: its write is scheduled already; this request opens the next
            g = None
        loop = asyncio.get_running_loop()
        if g is None:
            lg = topic.log(0 if partition is None else partition)  # validates the number
            g = self._open[key] = _Group(topic, partition, lg.batch_max_bytes)
            loop.call_soon(self._write, key, g)
        fut = loop.create_future() if sink is None else sink
        g.entries.append((values, keys, headers, timestamps, nbytes, fut))
        g.nbytes += nbytes
        g.nrecords += len(values)
        return fut

    def send_encoded(self, topic, partition, batch, sink) -> bool:
        """One request's one record batch (decoded, checked) appended now, as it is encoded
        (``Log.append_encoded``), and ``sink`` answered from the loop's next round (as a
        future's callbacks run), counted as ``send`` counts. False, nothing done, when it goes
        through ``send`` instead: under ``always`` (the append waits on an fsync: a worker
        thread's), a topic with several partitions and none named (the group's round-robin
        chooses), a group open for its partition (requests that came first in this round),
        or a batch the log does not take as encoded (``Producer.send_encoded``)."""
        if not self.ctx.inline_for_topic(topic):
            return False
        if partition is None:
            if topic.partitions != 1:
                return False
            partition = 0
        if (topic, partition, False) in self._open:
            return False
        metas = self.ctx.producer().send_encoded(topic.name, partition, batch)
        if metas is None:
            return False
        n = batch.count
        self.ctx.metrics.count_in("topic", topic.name, n, batch.value_offsets[n])
        asyncio.get_running_loop().call_soon(sink.set_result, metas)
        return True

    async def _direct(self, topic, values, keys, headers, timestamps, nbytes) -> list:
        metas = await self.ctx.topic_write(topic, self.ctx.producer().send_batch, topic.name, values,
                                           keys=keys, headers=headers, timestamps_ms=timestamps)
        self.ctx.metrics.count_in("topic", topic.name, len(metas), nbytes)
        return metas

    # ------------------------------------------------------------------ the write
    def _write(self, key, g: _Group) -> None:
        if self._open.get(key) is g:
            del self._open[key]  # closed: who comes now opens the next group
        if self.ctx.inline_for_topic(g.topic):
            self._resolve(g, self._append(g))
        else:
            task = asyncio.get_running_loop().create_task(self._write_in_thread(g))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _write_in_thread(self, g: _Group) -> None:
        try:
            out = await self.ctx.run(self._append, g)
        except asyncio.CancelledError:  # the server stopping: the requests are cancelled with it
            for *_, fut in g.entries:
                fut.cancel()
            raise
        except Exception as e:  # the worker call itself failed
            out = [e] * len(g.entries)
        self._resolve(g, out)

    def _append(self, g: _Group) -> list:
        """Append the group; one result per request: its RecordMetadata list or an exception."""
        entries = g.entries
        if len(entries) == 1:
            return [self._send_one(g, entries[0])]
        values: list = []
        keys: list | None = None
        headers: list | None = None
        timestamps: list | None = [] if entries[0][3] is not None else None  # all given, or none
        for vs, ks, hs, ts, _, _ in entries:
            if ks is not None and keys is None:
                keys = [None] * len(values)
            if keys is not None:
                keys += [None] * len(vs) if ks is None else ks
            if hs is not None and headers is None:
                headers = [None] * len(values)
            if headers is not None:
                headers += [None] * len(vs) if hs is None else hs
            if timestamps is not None:
                timestamps += ts
            values += vs
        try:
            metas = self.ctx.producer().send_batch(g.topic.name, values, keys=keys, headers=headers,
                                                   partition=g.partition, timestamps_ms=timestamps)
        except _WRITE_ERRORS as e:
            return [e] * len(entries)
        except Exception:
            # Raised before anything was written (see the module's invariants): each
            # request on its own, so only the one at fault gets the error.
            return [self._send_one(g, e) for e in entries]
        out = []
        i = 0
        for vs, *_ in entries:
            out.append(metas[i:i + len(vs)])
            i += len(vs)
        return out

    def _resolve(self, g: _Group, results: list) -> None:
        """Answer the group's requests; count what was appended (once for the group)."""
        n = nbytes = 0
        for (vs, _, _, _, nb, fut), r in zip(g.entries, results):
            if isinstance(r, BaseException):
                if not fut.done():
                    fut.set_exception(r)
                continue
            n += len(vs)
            nbytes += nb
            if not fut.done():  # else its request was cancelled (the server stopping): the records stay
                fut.set_result(r)
        if n:
            self.ctx.metrics.count_in("topic", g.topic.name, n, nbytes)

    def _send_one(self, g: _Group, entry):
        vs, ks, hs, ts, _, _ = entry
        try:
            return self.ctx.producer().send_batch(g.topic.name, vs, keys=ks, headers=hs, partition=g.partition,
                                                  timestamps_ms=ts)
        except Exception as e:
            return e
