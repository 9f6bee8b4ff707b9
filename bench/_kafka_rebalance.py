"""bench/kafka_bench.py's KIP-848 section (issue: after a member dies, its
partitions are reassigned within the session timeout + 2 s).

One server with the consumer-protocol session timeout ``session_ms``
(``kafka_consumer_session_timeout_ms``; the heartbeat interval left at its
default), a topic of ``2 x members`` partitions, a producer writing a record
to every partition every 20 ms throughout, and ``members`` processes
(bench/_kafka_member.py: confluent-kafka ``group.protocol=consumer``) in one
group. Each round: wait until the members split the partitions evenly and
each has read from all of its own; SIGKILL one (no leave: the server learns
of its death only when its session ends); then measure, from the kill, the
time until the survivors' assignments cover the dead member's partitions
(``reassigned``: their ``assigned`` callbacks) and until a survivor has read
a record from each of them (``consumed``). A new member replaces the dead one
before the next round. Times are taken when the lines the members print
reach this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import _common as C
import _kafka_common as K

TOPIC = "k-rebalance"
GROUP = "bench-kip848"
MEMBER = os.path.join(C.HERE, "_kafka_member.py")


class Member:
    """A member process and what it printed: (receipt time, kind, partitions)."""

    def __init__(self, bootstrap: str):
        self.proc = subprocess.Popen([sys.executable, MEMBER, bootstrap, TOPIC, GROUP], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                                     env=C.child_env())
        self.events: list[tuple[float, str, set[int]]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            t = time.monotonic()
            kind, _, rest = line.strip().partition(" ")
            with self.lock:
                self.events.append((t, kind, {int(p) for p in rest.split(",") if p}))

    def state(self, until: float = float("inf")) -> tuple[set[int], set[int]]:
        """(partitions held, partitions read from since assigned) after the events up to ``until``."""
        held: set[int] = set()
        read: set[int] = set()
        with self.lock:
            events = list(self.events)
        for t, kind, parts in events:
            if t > until:
                break
            if kind == "assigned":
                held |= parts
            elif kind == "revoked":
                held -= parts
                read -= parts
            elif kind == "first":
                read |= parts
        return held, read

    def stop(self, sig=signal.SIGTERM) -> None:
        C.stop_process(self.proc, sig, grace_s=15)


class Feeder(threading.Thread):
    """A record to every partition every ``every`` s until stopped."""

    def __init__(self, bootstrap: str, partitions: int, every: float = 0.02):
        super().__init__(daemon=True, name="feeder")
        self.p = K.producer(bootstrap, **{"linger.ms": 0})
        self.partitions, self.every = partitions, every
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(self.every):
            for part in range(self.partitions):
                self.p.produce(TOPIC, K.VALUE, partition=part)
            self.p.poll(0)
        self.p.flush(10)
        self.p = None  # closed here, before the server stops (else librdkafka logs the disconnect)


def _balanced(members: list[Member], n: int) -> bool:
    states = [m.state() for m in members]
    held = [h for h, _ in states]
    return (all(held) and sum(map(len, held)) == n and set().union(*held) == set(range(n))
            and max(map(len, held)) - min(map(len, held)) <= 1 and all(h == r for h, r in states))


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"KIP-848 bench: timed out waiting for {what}")
        time.sleep(0.05)


def _first_time(survivors: list[Member], lost: set[int], t_kill: float, kind: str) -> float | None:
    """The receipt time at which the survivors' events after ``t_kill`` first cover ``lost``
    (``assigned``: held; ``first``: read from); None if not yet."""
    events = []
    for i, m in enumerate(survivors):
        with m.lock:
            events += [(t, i, k, ps) for t, k, ps in m.events if t > t_kill]
    events.sort(key=lambda e: e[0])
    held = [m.state(t_kill)[0] for m in survivors]
    read: set[int] = set()
    for t, i, k, ps in events:
        if k == "assigned":
            held[i] |= ps
        elif k == "revoked":
            held[i] -= ps
        elif k == "first":
            read |= ps
        covered = set().union(*held) if kind == "assigned" else read
        if lost <= covered:
            return t
    return None


def run(tmp: str, members: int, rounds: int, session_ms: int) -> dict:
    n_parts = 2 * members
    env = {"VQS_KAFKA_CONSUMER_SESSION_TIMEOUT_MS": str(session_ms)}
    res: dict = {"members": members, "partitions": n_parts, "session_timeout_ms": session_ms, "rounds": []}
    with K.Server(tmp, "vqs-kip848", env=env) as srv:
        K.create_topic(srv.bootstrap, TOPIC, n_parts)
        feeder = Feeder(srv.bootstrap, n_parts)
        feeder.start()
        group: list[Member] = []
        try:
            C.note(f"KIP-848: {members} members ...")
            group = [Member(srv.bootstrap) for _ in range(members)]
            for r in range(rounds):
                _wait(lambda: _balanced(group, n_parts), 60, "the members to split the partitions")
                victim = group.pop(0)
                lost = victim.state()[0]
                victim.stop(signal.SIGKILL)
                t_kill = time.monotonic()
                C.note(f"KIP-848: round {r + 1}: SIGKILLed a member holding {sorted(lost)} ...")
                limit = session_ms / 1000 + 20
                _wait(lambda lost=lost, t_kill=t_kill: _first_time(group, lost, t_kill, "first") is not None, limit,
                      "the survivors to read the dead member's partitions")
                reassigned = _first_time(group, lost, t_kill, "assigned")
                consumed = _first_time(group, lost, t_kill, "first")
                res["rounds"].append({"lost": sorted(lost), "reassigned_s": reassigned - t_kill,
                                      "consumed_s": consumed - t_kill})
                group.append(Member(srv.bootstrap))
        finally:
            feeder.halt.set()
            for m in group:
                m.stop()
            feeder.join(30)
    rs = res["rounds"]
    res["reassigned_max_s"] = max(r["reassigned_s"] for r in rs)
    res["consumed_max_s"] = max(r["consumed_s"] for r in rs)
    return res


def bars(res: dict) -> list[dict]:
    limit = res["session_timeout_ms"] / 1000 + 2
    return [
        {"bar": "KIP-848: a SIGKILLed member's partitions reassigned (worst round, s)",
         "value": res["reassigned_max_s"], "target": f"<= {limit:g} s (session + 2 s)",
         "ok": res["reassigned_max_s"] <= limit},
        {"bar": "KIP-848: ... and read from by the survivors (worst round, s)",
         "value": res["consumed_max_s"], "target": f"<= {limit:g} s (session + 2 s)",
         "ok": res["consumed_max_s"] <= limit},
    ]


def table_md(res: dict) -> str:
    head = (f"{res['members']} members (`group.protocol=consumer`), {res['partitions']} partitions, a record to "
            f"each every 20 ms; session timeout {res['session_timeout_ms']:,} ms (server side), heartbeat "
            "interval the server's default; one member SIGKILLed per round.\n\n")
    rows = [[i + 1, ",".join(map(str, r["lost"])), f"{r['reassigned_s']:.2f}", f"{r['consumed_s']:.2f}"]
            for i, r in enumerate(res["rounds"])]
    return head + C.markdown_table(["round", "dead member's partitions", "reassigned after (s)",
                                    "read from after (s)"], rows, right=[2, 3])


def figures(res: dict) -> list[dict]:
    return [C.figure("kip848_reassigned_max_s", res["reassigned_max_s"], "s", better="lower"),
            C.figure("kip848_consumed_max_s", res["consumed_max_s"], "s", better="lower")]
