"""VQS consumer groups: the assignor against a model, embedded members in threads, expiry,
fencing, leave, and the refusal to mix with Kafka-protocol members."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqs import FencedMember, InconsistentGroupProtocol
from vqs.broker.assignor import assign
from vqs.broker.coordinator import INCONSISTENT_PROTOCOL, OK
from vqs.broker.topic import TopicPartition

TOPICS = ["a", "b", "c"]


@settings(max_examples=150, deadline=None)
@given(subs=st.lists(st.sets(st.sampled_from(TOPICS), min_size=1), min_size=1, max_size=6),
       counts=st.tuples(*[st.integers(0, 9)] * 3), prev_seed=st.randoms(use_true_random=False))
def test_assignor_gives_each_partition_to_one_subscriber_balanced_and_sticky(subs, counts, prev_seed):
    subscriptions = {f"m{i}": s for i, s in enumerate(subs)}
    partitions = dict(zip(TOPICS, counts))
    everything = [TopicPartition(t, p) for t in TOPICS for p in range(partitions[t])
                  if any(t in s for s in subs)]
    # a previous assignment: any owner (some of them gone, some not subscribed any more)
    previous: dict = {}
    for tp in everything:
        previous.setdefault(prev_seed.choice([*subscriptions, "gone"]), []).append(tp)
    out = assign(subscriptions, partitions, previous)
    got = [tp for tps in out.values() for tp in tps]
    assert sorted(got) == sorted(everything)  # each exactly once
    for m, tps in out.items():
        assert all(tp.topic in subscriptions[m] for tp in tps)
    if len({frozenset(s) for s in subs}) == 1:  # identical subscriptions: counts differ by <= 1
        sizes = [len(v) for v in out.values()]
        assert max(sizes) - min(sizes) <= 1
    assert assign(subscriptions, partitions, previous) == out  # deterministic


def test_assignor_moves_few_partitions_when_a_member_joins_or_leaves():
    parts = {"t": 12}
    three = assign({"x": ["t"], "y": ["t"], "z": ["t"]}, parts)
    four = assign({"x": ["t"], "y": ["t"], "z": ["t"], "w": ["t"]}, parts, three)
    moved = sum(1 for m in three for tp in three[m] if tp not in four[m])
    assert moved == 3 and len(four["w"]) == 3  # only what the newcomer needs
    back = assign({"x": ["t"], "y": ["t"], "z": ["t"]}, parts, {m: four[m] for m in "xyz"})
    assert all(set(four[m]) <= set(back[m]) for m in "xyz")  # w's leave moves only w's


def _values(records):
    return [r.value for r in records]


def test_members_in_threads_share_partitions_and_every_message_arrives_once(broker):
    broker.create_topic("t", partitions=6)
    p = broker.producer()
    p.send_batch("t", [f"a{i}".encode() for i in range(300)], keys=[str(i).encode() for i in range(300)])
    first = broker.consumer("t", group="g", session_timeout_ms=5000)
    assert len(first.assignment()) == 6 and first.generation == 1  # alone: every partition at once
    seen: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()
    done = threading.Barrier(3)
    members = [first]

    def run(c):
        while not stop.is_set():
            recs = c.poll(max_records=7, timeout=0.2)
            with lock:
                seen.extend(_values(recs))
            c.commit()
        done.wait(10)  # nobody leaves before the others stopped polling
        c.close()

    threads = [threading.Thread(target=run, args=(first,))]
    threads[0].start()
    for _ in range(2):  # two more members join while the first reads
        members.append(broker.consumer("t", group="g", session_timeout_ms=5000))
        threads.append(threading.Thread(target=run, args=(members[-1],)))
        threads[-1].start()
    p.send_batch("t", [f"b{i}".encode() for i in range(300)], keys=[str(i).encode() for i in range(300)])
    want = {f"{x}{i}".encode() for x in "ab" for i in range(300)}
    pause = threading.Event()

    def settled():
        d = broker.coordinator.assigned.describe("g")
        return d if d["state"] == "Stable" and len(d["members"]) == 3 else None

    for _ in range(200):  # every message read and the group settled
        with lock:
            if len(seen) >= 600 and settled():
                break
        pause.wait(0.05)
    settled = settled()
    stop.set()
    for t in threads:
        t.join(10)
    assert sorted(seen) == sorted(want)  # exactly once: revoked partitions were committed first
    assert settled is not None and len(settled["members"]) == 3
    assert sorted(len(m["assignment"]) for m in settled["members"]) == [2, 2, 2]
    assert sum(broker.group_offsets("g").values()) == 600
    assert broker.coordinator.assigned.describe("g") is None  # all left


def test_leave_gives_partitions_up_at_once(broker):
    broker.create_topic("t", partitions=4)
    a = broker.consumer("t", group="g", session_timeout_ms=60_000)
    b = broker.consumer("t", group="g", session_timeout_ms=60_000)
    assert b.assignment() == []  # a owns them all until it lets go
    a.poll()  # a heartbeats: two are revoked, committed and released
    b.poll()
    assert len(a.assignment()) == len(b.assignment()) == 2
    a.close()  # leaves: b gets a's partitions on its next poll, without waiting for a session
    b.poll()
    assert len(b.assignment()) == 4


def test_a_member_that_stops_polling_expires_its_commit_is_fenced_and_it_rejoins(broker):
    broker.create_topic("t", partitions=2)
    p = broker.producer()
    p.send_batch("t", [b"x"] * 10, partition=0)
    p.send_batch("t", [b"y"] * 10, partition=1)
    slow = broker.consumer("t", group="g", session_timeout_ms=200)
    assert len(slow.poll(max_records=4)) == 4
    gen = slow.generation
    other = broker.consumer("t", group="g", session_timeout_ms=5000)
    woken = threading.Event()
    got: list = []

    def read():  # waits (event-driven) until slow's session is over and both partitions are its
        while len(got) < 20:
            got.extend(other.poll(timeout=0.5))
            if len(other.assignment()) == 2:
                woken.set()
        other.commit()

    t = threading.Thread(target=read)
    t.start()
    assert woken.wait(5)  # slow said nothing for 200 ms: removed, its partitions moved
    t.join(5)
    assert len(got) == 20  # slow committed nothing: the 4 it read are read again (at least once)
    with pytest.raises(FencedMember, match="not in group"):
        slow.commit()  # a stale member never commits over the new owner
    assert broker.group_offsets("g") == {("t", 0): 10, ("t", 1): 10}
    with pytest.raises(FencedMember, match="stale"):
        broker.coordinator.assigned.check_commit("g", other.member_id, gen - 1, [])
    assert slow.poll() == [] and slow.member_id is not None and slow.generation > gen  # rejoined
    with pytest.raises(FencedMember, match="outside the group"):
        broker.consumer(group="g").commit({("t", 0): 0})  # not a member, the group has some
    other.close()
    slow.close()
    broker.consumer(group="g").commit({("t", 0): 0})  # nobody left: allowed again


def test_kafka_protocol_members_and_vqs_members_do_not_share_a_group(broker):
    broker.create_topic("t")
    c = broker.consumer("t", group="vqs-group")
    co = broker.coordinator
    assert co.join("vqs-group", "", protocols=[("range", b"")]).status == INCONSISTENT_PROTOCOL
    assert ("vqs-group", "vqs") in co.groups()
    assert co.describe("vqs-group")["protocol_type"] == "vqs"
    kafka = co.join("kafka-group", "", protocols=[("range", b"")])
    assert kafka.status == OK
    with pytest.raises(InconsistentGroupProtocol, match="kafka-group"):
        broker.consumer("t", group="kafka-group")
    c.close()
    assert co.join("vqs-group", "", protocols=[("range", b"")]).status == OK  # empty: either kind
