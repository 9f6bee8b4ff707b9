"""VQS consumer groups over vqs.Client: member processes on a real server; SIGKILL, join, leave,
fencing of a stale member's commit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

import vqs

HERE = os.path.dirname(__file__)
SESSION_MS = 1500


class Member:
    """A member process; its lines are read by a thread that sets ``changed`` on each."""

    def __init__(self, url, topic, group):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "vqs_group_member.py"), url, topic, group,
                                      str(SESSION_MS)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.assigned: set[int] | None = None
        self.values: list[str] = []
        self.bye = False
        self.changed = threading.Condition()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            with self.changed:
                if kind == "assigned":
                    self.assigned = {int(p) for p in rest.split(",") if p}
                elif kind == "msg":
                    self.values.append(rest.split(" ", 2)[2])
                elif kind == "bye":
                    self.bye = True
                self.changed.notify_all()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Watch:
    """Waits for a condition over members' output: woken by each line they print."""

    def __init__(self, members):
        self.members = members
        self.cv = threading.Condition()
        for m in members:
            threading.Thread(target=self._relay, args=(m,), daemon=True).start()

    def _relay(self, m):
        while m.proc.poll() is None or m._t.is_alive():
            with m.changed:
                m.changed.wait(0.5)
            with self.cv:
                self.cv.notify_all()

    def until(self, cond, timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        with self.cv:
            while not cond():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                self.cv.wait(min(left, 0.5))
        return time.monotonic()


def _produce(client, topic, prefix, n):
    client.producer().send_batch(topic, [f"{prefix}{i}".encode() for i in range(n)],
                                 keys=[str(i).encode() for i in range(n)])


def test_three_members_one_sigkilled_its_partitions_move_and_all_arrive(base_url, unique):
    topic, group = unique, unique + "-g"
    with vqs.Client(base_url) as client:
        client.create_topic(topic, partitions=6)
        _produce(client, topic, "a", 300)
        members = [Member(base_url, topic, group) for _ in range(3)]
        watch = Watch(members)
        try:
            def balanced():
                a = [m.assigned for m in members]
                return all(x is not None and len(x) == 2 for x in a) and set().union(*a) == set(range(6))
            watch.until(balanced, 20, "three members with two partitions each")
            view = httpx.get(f"{base_url}/groups/{group}").json()
            assert view["protocol_type"] == "vqs" and len(view["members"]) == 3
            victim = members[0]
            victim_parts = set(victim.assigned)
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait()
            killed_at = time.monotonic()
            _produce(client, topic, "b", 300)
            rest = members[1:]
            moved_at = watch.until(lambda: set().union(*[m.assigned for m in rest]) == set(range(6)), 15,
                                   "the killed member's partitions to move")
            assert moved_at - killed_at < SESSION_MS / 1000 + 2.0  # the session, then a heartbeat
            assert victim_parts <= set().union(*[m.assigned for m in rest])
            want = {f"{x}{i}" for x in "ab" for i in range(300)}
            watch.until(lambda: want <= {v for m in members for v in m.values}, 20, "every message delivered")
        finally:
            for m in members:
                m.stop()
        assert all(m.bye for m in members[1:])
        assert sum(client.group_offsets(group).values()) == 600  # the survivors committed everything


def test_members_joining_get_partitions_and_nothing_is_read_twice(base_url, unique):
    topic, group = unique, unique + "-g"
    with vqs.Client(base_url) as client:
        client.create_topic(topic, partitions=4)
        _produce(client, topic, "a", 200)
        first = Member(base_url, topic, group)
        members = [first]
        watch = Watch([first])
        try:
            watch.until(lambda: first.assigned == {0, 1, 2, 3}, 20, "the first member to get everything")
            members += [Member(base_url, topic, group) for _ in range(2)]
            watch = Watch(members)
            _produce(client, topic, "b", 200)
            watch.until(lambda: all(m.assigned for m in members)
                        and sorted(len(m.assigned) for m in members) == [1, 1, 2]
                        and set().union(*[m.assigned for m in members]) == {0, 1, 2, 3},
                        20, "the joiners to get partitions")
            _produce(client, topic, "c", 200)
            want = {f"{x}{i}" for x in "abc" for i in range(200)}
            watch.until(lambda: want <= {v for m in members for v in m.values}, 20, "every message delivered")
        finally:
            for m in members:
                m.stop()
        got = [v for m in members for v in m.values]
        assert sorted(got) == sorted(want)  # exactly once: revoked partitions were committed first
        assert sum(client.group_offsets(group).values()) == 600


def test_leave_moves_partitions_at_once_and_a_stale_members_commit_is_fenced(base_url, unique):
    topic, group = unique, unique + "-g"
    with vqs.Client(base_url) as client:
        client.create_topic(topic, partitions=2)
        a = client.consumer(topic, group=group, session_timeout_ms=3000)  # heartbeats every second
        assert len(a.assignment()) == 2 and a.generation >= 1
        b = client.consumer(topic, group=group, session_timeout_ms=3000)
        assert b.assignment() == []  # a owns both until it lets one go
        a.poll(timeout=1.2)  # a heartbeats within: it lets one partition go
        t0 = time.monotonic()
        while not b.assignment() and time.monotonic() - t0 < 5:
            b.poll(timeout=0.3)  # b, with nothing, long-polls its heartbeat for a partition
        assert len(a.assignment()) == len(b.assignment()) == 1
        a.close()  # leaving frees a's partition at once, long before its session would end
        t0 = time.monotonic()
        while len(b.assignment()) < 2 and time.monotonic() - t0 < 5:
            b.poll(timeout=0.3)
        assert len(b.assignment()) == 2
        view = httpx.get(f"{base_url}/groups/{group}").json()
        assert [m["member_id"] for m in view["members"]] == [b.member_id]
        assert {(x["topic"], x["partition"]) for x in view["members"][0]["assignment"]} == set(b.assignment())
        # a stale generation, an unknown member, a commit from outside: 409 fenced_member
        url = f"{base_url}/groups/{group}"
        offs = [{"topic": topic, "partition": 0, "offset": 0}]
        r = httpx.post(f"{url}/offsets", json={"offsets": offs, "member_id": b.member_id,
                                                 "generation": b.generation - 1})
        assert r.status_code == 409 and r.json()["error"]["code"] == "fenced_member"
        r = httpx.post(f"{url}/members/nobody-1/heartbeat", json={"generation": 1, "owned": []})
        assert r.status_code == 409 and "not in group" in r.json()["error"]["message"]
        r = httpx.post(f"{url}/offsets", json={"offsets": offs})
        assert r.status_code == 409
        b.close()
        assert httpx.post(f"{url}/offsets", json={"offsets": offs}).status_code == 200  # no members now

        # a member that stops polling is removed; its commit is refused; the next poll rejoins
        client.producer().send_batch(topic, [b"y"] * 6, partition=1)
        slow = client.consumer(topic, group=group + "2", session_timeout_ms=300)
        assert len(slow.poll(max_records=4)) == 4
        other = client.consumer(topic, group=group + "2", session_timeout_ms=10_000)
        got = []
        while len(got) < 6:  # other's heartbeat long poll ends when slow's session lapses
            got += other.poll(timeout=5)
        assert len(other.assignment()) == 2  # slow's 4 uncommitted records were read again
        other.commit()
        with pytest.raises(vqs.FencedMember, match="not in group"):
            slow.commit()
        assert client.group_offsets(group + "2")[(topic, 1)] == 6
        slow.poll()
        assert slow.member_id is not None  # rejoined (with nothing: other holds both)
        cli = subprocess.run([sys.executable, "-m", "vqs.cli", "group", "describe", group + "2", "--url", base_url],
                             capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"}, timeout=60)
        assert cli.returncode == 0, cli.stderr
        assert other.member_id in cli.stdout and f"{topic}[0], {topic}[1]" in cli.stdout
        assert "vqs protocol" in cli.stdout
        slow.close()
        other.close()


def test_waiting_heartbeats_hold_no_thread_and_answer_when_the_group_changes(base_url, server, unique):
    """100 members' heartbeats wait (wait_ms) for a different assignment, each answered once new
    members take one of its two partitions. Before, a waiting heartbeat held a thread of a pool
    of 64, and those past it were answered at once without waiting."""
    def join(http):
        r = http.post(f"/groups/{unique}/members", json={"topics": [unique], "session_timeout_ms": 60_000})
        assert r.status_code == 201, r.text
        return r.json()["member_id"]

    def beat(http, mid, a, **kw):
        return http.post(f"/groups/{unique}/members/{mid}/heartbeat",
                         json={"generation": a["generation"], "owned": a["assignment"], **kw}).json()

    with httpx.Client(base_url=base_url, timeout=30) as http:
        assert http.post("/topics", json={"name": unique, "partitions": 200}).status_code == 201
        members = [join(http) for _ in range(100)]
        answers = {mid: beat(http, mid, {"generation": -1, "assignment": []}) for mid in members}
        answers = {mid: beat(http, mid, a) for mid, a in answers.items()}
        assert all(len(a["assignment"]) == 2 for a in answers.values())
        threads = len(os.listdir(f"/proc/{server.proc.pid}/task"))
        out: dict = {}

        def wait(mid):
            with httpx.Client(base_url=base_url, timeout=30) as c:
                out[mid] = (beat(c, mid, answers[mid], wait_ms=20_000), time.monotonic())

        waiters = [threading.Thread(target=wait, args=(mid,)) for mid in members]
        for t in waiters:
            t.start()
        time.sleep(1.0)  # the heartbeats reach their wait (nothing observable marks it)
        assert not out  # every one waits
        assert len(os.listdir(f"/proc/{server.proc.pid}/task")) - threads < 50  # (anyio's pool: 40)
        t0 = time.monotonic()
        for _ in range(100):
            join(http)
        for t in waiters:
            t.join(25)
        assert len(out) == 100
        assert all(len(a["assignment"]) < 2 for a, _ in out.values())
        assert max(at for _, at in out.values()) - t0 < 10  # woken by the changes, not at wait_ms
