"""The edge: each camera puts its frames into a HybridQueue of its own; one forwarder
sends them to a VQS topic keyed by camera, with the idempotent producer.

Cameras never wait for the network: a camera thread renders and encodes its
frames (vqs.pipelines.scene) at the camera's frame rate (``realtime``) or as
fast as it can, and puts ``(frame, ts_ms, jpeg)`` into its queue. The
queue's memory tier holds ``memory_bytes`` of frames (sized by their JPEG
bytes); past that the oldest frames spill to its disk tier, in order.

The forwarder takes each camera's head in turn: ``peek_batch`` (up to
``batch`` frames), ``send_batch`` to the topic (key: the camera; timestamp:
the capture time; header ``frame``: the frame number), and only when the send
returned, ``get_batch`` of the same count. So a frame leaves its queue only
once it is appended. The producer is idempotent: it numbers each partition's
requests and retries a request by itself through a refused connection, a
dropped one or a restarting server (up to ``retry_timeout``), and the server
appends a retried request once. While the server is away the forwarder waits
inside that retry, and frames pile up in the queues (memory, then disk).

Guarantees, with the server away for less than ``retry_timeout``: every
frame a camera delivered is appended once, in the camera's delivery order
(one key, one partition, one producer sending that camera's batches in
order). A send that still fails after ``retry_timeout`` leaves its frames at
the head of the queue and is tried again; the producer then starts over
with a new id, so that one batch may be appended twice (its earlier attempt
may have landed): :func:`verify` reports duplicates.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from ..client import Client
from ..errors import TopicAlreadyExists, TopicDoesNotExist, VQSError
from ..hybrid import HybridQueue
from .scene import Camera

FRAME_HEADER = "frame"


def _frame_size(item) -> int:
    return len(item[2]) + 96  # the JPEG bytes, and the tuple holding them


@dataclass
class EdgeStats:
    frames: int = 0               # delivered by the cameras (put)
    bytes: int = 0
    sent: int = 0                 # appended to the topic
    sent_bytes: int = 0
    requests: int = 0
    retries: int = 0              # produce requests sent again (the producer's count)
    failed_sends: int = 0         # sends that raised after every retry (their frames stayed queued)
    put_s: float = 0.0            # time the cameras spent in put
    forward_s: float = 0.0        # wall time from the first send to the last
    send_s: float = 0.0           # time in sends that needed no retry, and what they carried:
    send_frames: int = 0          # the forwarder's rate when the server is there
    send_bytes: int = 0
    peak_memory_items: int = 0    # across the queues, sampled by the forwarder
    peak_disk_items: int = 0
    peak_disk_bytes: int = 0
    spilled: int = 0              # items the queues moved from memory to disk
    disk_reads: int = 0           # items read back from disk
    delivered: dict = field(default_factory=dict)   # camera -> frame numbers in delivery order


class Edge:
    """Cameras, their HybridQueues (under ``root``) and the forwarder to ``url``."""

    def __init__(self, cams: list[Camera], url: str, root: str, *, topic: str = "frames", partitions: int = 4,
                 memory_bytes: int = 4 << 20, batch: int = 16, realtime: bool = True,
                 retry_timeout: float = 120.0, token: str | None = None):
        self.cams, self.url, self.root, self.topic = cams, url, root, topic
        self.partitions, self.batch, self.realtime = partitions, batch, realtime
        self.stats = EdgeStats(delivered={c.name: [] for c in cams})
        self._client = Client(url, token=token)
        self._producer = self._client.producer(idempotent=True, retry_timeout=retry_timeout)
        self.queues = {c.name: HybridQueue(os.path.join(root, c.name), memory_items=None,
                                           memory_bytes=memory_bytes, sizeof=_frame_size)
                       for c in cams}
        self._work = threading.Event()
        self._cameras_done = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._error: BaseException | None = None
        self.t_start = 0.0

    # ------------------------------------------------------------------ run
    def ensure_topic(self) -> None:
        try:
            self._client.topic(self.topic)
        except TopicDoesNotExist:
            try:
                self._client.create_topic(self.topic, partitions=self.partitions)
            except TopicAlreadyExists:
                pass

    def start(self) -> Edge:
        self.ensure_topic()
        self.t_start = time.monotonic()
        cams = [threading.Thread(target=self._camera, args=(c,), name=f"edge-{c.name}", daemon=True)
                for c in self.cams]
        fwd = threading.Thread(target=self._forward, name="edge-forwarder", daemon=True)
        self._threads = [*cams, fwd]
        for t in self._threads:
            t.start()
        threading.Thread(target=self._join_cameras, args=(cams,), daemon=True).start()
        return self

    def _join_cameras(self, cams) -> None:
        for t in cams:
            t.join()
        self._cameras_done.set()
        self._work.set()

    def _camera(self, cam: Camera) -> None:
        q, out = self.queues[cam.name], self.stats.delivered[cam.name]
        t0 = self.t_start
        n = nbytes = 0
        put_s = 0.0
        try:
            for fr in cam.frames():
                if self._stop.is_set():
                    return
                if self.realtime:  # deliver at capture time (late frames: at once, behind)
                    wait = t0 + (fr.ts_ms - cam.start_ms) / 1000 - time.monotonic()
                    if wait > 0 and self._stop.wait(wait):
                        return
                t = time.perf_counter()
                q.put((fr.frame, fr.ts_ms, fr.jpeg))
                put_s += time.perf_counter() - t
                out.append(fr.frame)
                n += 1
                nbytes += len(fr.jpeg)
                self._work.set()
        except BaseException as e:
            self._fail(e)
        finally:
            with self._lock:
                self.stats.frames += n
                self.stats.bytes += nbytes
                self.stats.put_s += put_s

    def _fail(self, e: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = e
        self._stop.set()
        self._work.set()

    def _forward(self) -> None:
        st = self.stats
        first = None
        try:
            while not self._stop.is_set():
                self._work.clear()
                moved = 0
                for name, q in self.queues.items():
                    items = q.peek_batch(self.batch)
                    if not items:
                        continue
                    r0, t0 = self._producer.retries, time.perf_counter()
                    try:
                        self._producer.send_batch(
                            self.topic, [it[2] for it in items], keys=[name.encode()] * len(items),
                            headers=[[(FRAME_HEADER, b"%d" % it[0])] for it in items],
                            timestamps_ms=[it[1] for it in items])
                    except VQSError:
                        st.failed_sends += 1  # the frames stay at the head: sent again next round
                        continue
                    size = sum(len(it[2]) for it in items)
                    if self._producer.retries == r0:
                        st.send_s += time.perf_counter() - t0
                        st.send_frames += len(items)
                        st.send_bytes += size
                    if first is None:
                        first = time.monotonic()
                    got = q.get_batch(len(items), block=False)
                    if len(got) != len(items):  # the forwarder is its queues' only consumer
                        raise VQSError(f"edge queue {q.path}: {len(items)} frames sent but {len(got)} taken "
                                       "(another consumer?)")
                    moved += len(items)
                    st.sent += len(items)
                    st.sent_bytes += size
                    st.requests += 1
                    st.forward_s = time.monotonic() - first
                self._sample()
                if not moved:
                    if self._cameras_done.is_set() and all(q.qsize() == 0 for q in self.queues.values()):
                        return
                    self._work.wait(0.05)
        except BaseException as e:
            self._fail(e)

    def _sample(self) -> None:
        st = self.stats
        mem = disk = dbytes = 0
        for q in self.queues.values():
            m = q.metrics
            mem += m.memory_items
            disk += m.disk_items
            dbytes += m.disk_bytes
        st.peak_memory_items = max(st.peak_memory_items, mem)
        st.peak_disk_items = max(st.peak_disk_items, disk)
        st.peak_disk_bytes = max(st.peak_disk_bytes, dbytes)

    @property
    def running(self) -> bool:
        """Some camera or the forwarder is still at work (False after a failure too)."""
        return any(t.is_alive() for t in self._threads)

    def backlog(self) -> dict:
        """Frames waiting at the edge now: in memory, on disk."""
        mem = disk = 0
        for q in self.queues.values():
            m = q.metrics
            mem += m.memory_items
            disk += m.disk_items
        return {"memory_items": mem, "disk_items": disk}

    def wait(self, timeout: float | None = None) -> EdgeStats:
        """Until every camera finished and every frame was sent; raises what a thread raised."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                raise TimeoutError(f"the edge did not finish in {timeout} s ({t.name} still running)")
        if self._error is not None:
            raise self._error
        return self.stats

    def close(self) -> None:
        self._stop.set()
        self._work.set()
        for t in self._threads:
            t.join(30)
        st = self.stats
        for q in self.queues.values():
            m = q.metrics
            st.spilled += m.spilled
            st.disk_reads += m.disk_reads
            q.close()
        st.retries = self._producer.retries
        self._client.close()


def verify(url: str, topic: str, delivered: dict[str, list[int]], *, token: str | None = None) -> dict:
    """Read the topic back and compare each camera's frame numbers with what it delivered:
    ``records``, ``missing``, ``duplicates``, ``out_of_order`` (0, 0, 0 when all is well)."""
    got: dict[str, list[int]] = {}
    with Client(url, token=token) as c:
        for row in c.offsets(topic):
            p, off, end = row["partition"], row["start_offset"], row["end_offset"]
            while off < end:
                batches, off, _ = c.read_stored_batches(topic, p, off, max_bytes=8 << 20)
                for b in batches:
                    for r in b.records():
                        frame = int(dict(r.headers)[FRAME_HEADER])
                        got.setdefault(r.key.decode(), []).append(frame)
    records = sum(len(v) for v in got.values())
    missing = dup = disorder = 0
    for cam, want in delivered.items():
        have = got.get(cam, [])
        missing += len(set(want) - set(have))
        dup += len(have) - len(set(have))
        if have != want and not (set(want) - set(have)) and len(have) == len(set(have)):
            disorder += 1
    return {"records": records, "missing": missing, "duplicates": dup, "out_of_order": disorder}
