"""Fixtures of the contract suites: every variant of a queue behind one harness.

The queue contract (test_queue_contract.py) runs each test against every
variant of an SQS-style queue: standard and FIFO, embedded (``vqs.Broker``)
under each flush policy, and through a real ``vqs serve`` subprocess on
127.0.0.1 with ``vqs.Client``. The tests speak only the public API; the
``QueueHarness`` below hides just what the fronts name differently (how time
moves, how a batch delete reports per-entry results, how a front restarts),
never what they do.

Disk: embedded data directories live on tmpfs (/dev/shm) when the machine
has one. The contract is about semantics, and a clean restart reads back the
same files either way; on a loaded disk the fsyncs of ~200 queue creations
and closes would otherwise take most of the suite's time.

Time: embedded variants run on a ``ManualClock`` given to the Broker, so a
lease or delay ends when the test moves the clock. The server runs on the
wall clock: there the harness sleeps, and the tests keep such waits to a
second or two.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid

import pytest

import vqs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "server"))


class ManualClock:
    """An injectable clock (seconds, like time.time) that moves only when told."""

    def __init__(self, start: float = 1_700_000_000.0):
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


_names = itertools.count()
_DEFAULT = object()


class QueueHarness:
    """One variant: makes queues, sends with what the variant needs (FIFO: a
    group and a fresh dedup id unless the test gives them), moves time, restarts."""

    def __init__(self, variant: str, fifo: bool, remote: bool):
        self.variant = variant
        self.fifo = fifo
        self.remote = remote
        self.fake_time = not remote
        self.front = None  # vqs.Broker or vqs.Client

    # ------------------------------------------------------------- queues
    def name(self, stem: str = "q") -> str:
        n = f"{stem}-{next(_names)}-{uuid.uuid4().hex[:6]}"
        return n + ".fifo" if self.fifo else n

    def queue(self, stem: str = "q", **attrs):
        return self.front.create_queue(self.name(stem), fifo=self.fifo, **attrs)

    def reopen(self, q):
        """The same queue, looked up again by name (after a restart)."""
        return self.front.queue(q.name)

    # ------------------------------------------------------------ sending
    def entry(self, body, group: str = "g", dedup_id=_DEFAULT, **kw) -> dict:
        e = {"body": body, **kw}
        if self.fifo:
            e["group_id"] = group
            if dedup_id is _DEFAULT:
                e["dedup_id"] = uuid.uuid4().hex
            elif dedup_id is not None:
                e["dedup_id"] = dedup_id
        return e

    def send(self, q, body, group: str = "g", dedup_id=_DEFAULT, **kw) -> str:
        e = self.entry(body, group, dedup_id, **kw)
        return q.send(e.pop("body"), **e)

    def send_batch(self, q, bodies, group: str = "g") -> list[str]:
        return q.send_batch([self.entry(b, group) for b in bodies])

    def drain(self, q, visibility_timeout: int = 30) -> list:
        """Receive until a receive comes back empty (messages stay leased)."""
        out = []
        while got := q.receive(max_messages=10, visibility_timeout=visibility_timeout):
            out += got
        return out

    # ------------------------------------------------------------ deleting
    def delete_entries(self, q, handles: list[str]) -> tuple[int, dict[str, str]]:
        """Batch delete with per-entry results: (number deleted, {failed handle: error code})."""
        if self.remote:
            r = q.delete_batch(handles)
            return r["deleted"], {f["receipt_handle"]: f["code"] for f in r["failed"]}
        r = q.delete_batch_entries([{"id": f"e{i}", "receipt_handle": h} for i, h in enumerate(handles)])
        return len(r["successful"]), {handles[int(f["id"][1:])]: f["code"] for f in r["failed"]}

    # ---------------------------------------------------------------- time
    def now(self) -> float:
        return self.clock.now if self.fake_time else time.monotonic()

    def sleep_until(self, t: float) -> None:
        """Let time reach ``t`` (a value of ``now()``)."""
        if self.fake_time:
            self.clock.advance(max(0.0, t - self.clock.now))
        else:
            time.sleep(max(0.0, t - time.monotonic()))

    def advance(self, seconds: float) -> None:
        self.sleep_until(self.now() + seconds)

    # ------------------------------------------------------------- restart
    def restart(self) -> None:
        """Stop the front cleanly and open it again on the same data."""
        self._restart()


class EmbeddedHarness(QueueHarness):
    def __init__(self, variant: str, fifo: bool, flush: str, path: str):
        super().__init__(variant, fifo, remote=False)
        self.flush = flush
        self.path = path
        self.clock = ManualClock()
        self.front = vqs.Broker(path, clock=self.clock, flush=flush)

    def _restart(self) -> None:
        self.front.close()
        self.front = vqs.Broker(self.path, clock=self.clock, flush=self.flush)

    def close(self) -> None:
        self.front.close()


class ServerHarness(QueueHarness):
    def __init__(self, variant: str, fifo: bool, server: ServerHolder):
        super().__init__(variant, fifo, remote=True)
        self.server = server
        self.front = vqs.Client(server.url)

    def _restart(self) -> None:
        self.front.close()
        self.server.restart()
        self.front = vqs.Client(self.server.url)

    def close(self) -> None:
        self.front.close()


class ServerHolder:
    """A ``vqs serve`` subprocess (flush=interval) that a test may restart."""

    def __init__(self, root):
        from vqs_server_proc import ServerProcess

        self._cls = ServerProcess
        self.data_dir = os.path.join(str(root), "data")
        self.proc = ServerProcess(self.data_dir).start()

    @property
    def url(self) -> str:
        return self.proc.url

    def restart(self) -> None:
        rc = self.proc.stop()
        assert rc == 0, self.proc.log()
        self.proc = self._cls(self.data_dir).start()

    def stop(self) -> None:
        rc = self.proc.stop()
        assert rc == 0, self.proc.log()


EMBEDDED = [(f"{kind}-{flush}", kind == "fifo", flush)
            for kind in ("standard", "fifo") for flush in ("always", "interval", "never")]
SERVER = [("standard-server", False), ("fifo-server", True)]
QUEUE_VARIANTS = [v[0] for v in EMBEDDED] + [v[0] for v in SERVER]


@pytest.fixture(scope="module")
def contract_server(tmp_path_factory):
    """One real server per module, started on first use, stopped at the end."""
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    holder = ServerHolder(tmp_path_factory.mktemp("contract-server"))
    yield holder
    holder.stop()


@pytest.fixture
def data_root(tmp_path):
    """A fresh directory for one test's data: on tmpfs when there is one (module doc)."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        d = tempfile.mkdtemp(prefix="vqs-contract-", dir=shm)
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield str(tmp_path)


def _harness(request, data_root, variant: str) -> QueueHarness:
    for name, fifo, flush in EMBEDDED:
        if name == variant:
            return EmbeddedHarness(variant, fifo, flush, os.path.join(data_root, "data"))
    return ServerHarness(variant, dict(SERVER)[variant], request.getfixturevalue("contract_server"))


@pytest.fixture(params=QUEUE_VARIANTS)
def qh(request, data_root) -> QueueHarness:
    """The queue harness of one variant, standard or FIFO (see the module doc)."""
    h = _harness(request, data_root, request.param)
    yield h
    h.close()


@pytest.fixture(params=[v for v in QUEUE_VARIANTS if v.startswith("fifo")])
def fifo_qh(request, data_root) -> QueueHarness:
    """The FIFO variants only: for the rules of FIFO queues."""
    h = _harness(request, data_root, request.param)
    yield h
    h.close()


@pytest.fixture(params=[v for v in QUEUE_VARIANTS if v.startswith("standard")])
def standard_qh(request, data_root) -> QueueHarness:
    """The standard variants only: for the rules of standard queues."""
    h = _harness(request, data_root, request.param)
    yield h
    h.close()


# ------------------------------------------------------------------ HybridQueue

HYBRID_TIERS = {
    # everything stays in memory (the default budget is far above what a test puts)
    "memory": {},
    # a budget of 3 items: the rest overflows to the disk log
    "overflow": {"memory_items": 3},
    # every put written and fsynced before it returns
    "durable": {"durable": True},
}


class HybridFactory:
    """Opens HybridQueues of one tier on one directory (again after a close)."""

    def __init__(self, tier: str, path: str):
        self.tier = tier
        self.path = path
        self.kwargs = HYBRID_TIERS[tier]
        self._open: list = []

    def open(self, **extra):
        q = vqs.HybridQueue(self.path, **{**self.kwargs, **extra})
        self._open.append(q)
        return q

    def close_all(self) -> None:
        for q in self._open:
            q.close()


@pytest.fixture(params=list(HYBRID_TIERS))
def hybrid(request, data_root) -> HybridFactory:
    f = HybridFactory(request.param, os.path.join(data_root, "hq"))
    yield f
    f.close_all()


@pytest.fixture
def make_hybrid(data_root):
    """``make_hybrid(tier)``: a HybridFactory of a named tier, for tier-specific rules."""
    made: list[HybridFactory] = []

    def make(tier: str) -> HybridFactory:
        f = HybridFactory(tier, os.path.join(data_root, f"hq-{tier}-{len(made)}"))
        made.append(f)
        return f

    yield make
    for f in made:
        f.close_all()
