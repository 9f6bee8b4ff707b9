"""The group coordinator's waits against a real server: a waiting JoinGroup holds no thread, so
hundreds of them stall no other request, and a waiting join whose connection closes leaves the
group at once (its rebalance goes on without it)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kafka_server_proc import KafkaServer
from raw_client import RawKafka

from vqs.server.kafka.codec import Reader, Writer
from vqs.server.kafka.records import encode_records

ck = pytest.importorskip("confluent_kafka")

#: a session (and rebalance) timeout long enough that no test here waits for one to pass
LONG_MS = 60_000
WAITING = 600  # more waiting joins than any pool of threads the listener ever had


def _join_frame(group: str, member: str = "", corr: int = 1) -> bytes:
    """A whole JoinGroup v1 request (size prefix included)."""
    body = (Writer().int16(11).int16(1).int32(corr).string("waits-test").string(group).int32(LONG_MS)
            .int32(LONG_MS).string(member).string("consumer").array(1).string("range").bytes_(b"meta"))
    return struct.pack(">i", len(body.b)) + bytes(body.b)


def _join(k: RawKafka, group: str, member: str = "") -> tuple[int, int, str, str]:
    """JoinGroup v1 -> (error, generation, leader, member id)."""
    r = k.request(11, 1, bytes(Writer().string(group).int32(LONG_MS).int32(LONG_MS).string(member)
                               .string("consumer").array(1).string("range").bytes_(b"meta").b))
    err, gen = r.int16(), r.int32()
    r.string()
    return err, gen, r.string(), r.string()


def _sync(k: RawKafka, group: str, gen: int, member: str) -> int:
    r = k.request(14, 0, bytes(Writer().string(group).int32(gen).string(member).array(1).string(member)
                               .bytes_(b"assignment").b))
    return r.int16()


def _heartbeat(k: RawKafka, group: str, gen: int, member: str) -> int:
    return k.request(12, 0, bytes(Writer().string(group).int32(gen).string(member).b)).int16()


def _members(k: RawKafka, group: str) -> tuple[str, int]:
    """DescribeGroups v0 -> (state, number of members)."""
    r = k.request(15, 0, bytes(Writer().array(1).string(group).b))
    assert r.int32() == 1
    assert r.int16() == 0
    r.string()
    state = r.string()
    r.string()
    r.string()
    return state, r.int32()


def _stable_member(port: int, group: str) -> tuple[RawKafka, str, int]:
    """A member that joined ``group`` alone and synced; it never rejoins, so a later join into
    ``group`` waits (up to the 60 s rebalance timeout) for it."""
    k = RawKafka(port)
    err, gen, leader, me = _join(k, group)
    assert err == 0 and leader == me
    assert _sync(k, group, gen, me) == 0
    return k, me, gen


def _wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def test_hundreds_of_waiting_joins_hold_no_thread_and_stall_no_other_request(tmp_path):
    env = {"VQS_MAX_CONNECTIONS": "2000", "VQS_MAX_CONNECTIONS_PER_CLIENT": "2000"}
    server = KafkaServer(tmp_path / "data", env=env).start()
    socks: list[socket.socket] = []
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic("waits", num_partitions=1, replication_factor=1)])["waits"].result(10)
        pin, _, _ = _stable_member(server.kafka_port, "stuck")
        before = _threads(server.proc.pid)
        for i in range(WAITING):  # each waits for "pin" to rejoin, which it never does
            s = socket.create_connection(("127.0.0.1", server.kafka_port))
            s.sendall(_join_frame("stuck", corr=i))
            socks.append(s)
        other = RawKafka(server.kafka_port)
        other.sock.settimeout(5)  # a stalled answer fails the test in seconds, not minutes
        _wait_for(lambda: _members(other, "stuck")[1] > 512, 15, "the joins to reach the coordinator")
        # every other kind of request is answered while they wait: cluster, data, other groups
        other.request(3, 1, bytes(Writer().int32(-1).b))  # Metadata, all topics
        assert other.produce("waits", 0, encode_records(0, [b"v"], timestamps=[1_000])) == (0, 0)
        err, gen, _, me = _join(other, "free")
        assert err == 0
        assert _sync(other, "free", gen, me) == 0
        assert _heartbeat(other, "free", gen, me) == 0
        _wait_for(lambda: _members(other, "stuck") == ("PreparingRebalance", WAITING + 1), 15,
                  "every join to be waiting in the group")
        assert _threads(server.proc.pid) < before + 50  # a waiting join holds no thread
    finally:
        for s in socks:
            s.close()
        assert server.stop() == 0, server.log()
    assert "Traceback" not in server.log()


def test_a_waiting_join_whose_connection_closes_leaves_the_group(kafka_server):
    group = f"drop-{time.monotonic_ns()}"
    pin, pin_id, gen = _stable_member(kafka_server.kafka_port, group)
    gone = socket.create_connection(("127.0.0.1", kafka_server.kafka_port))
    gone.sendall(_join_frame(group))  # waits for pin to rejoin
    k = RawKafka(kafka_server.kafka_port)
    _wait_for(lambda: _members(k, group) == ("PreparingRebalance", 2), 10, "the second join to wait")
    gone.close()  # its answer can never be delivered: the member goes now, not after 60 s
    _wait_for(lambda: _members(k, group)[1] == 1, 5, "the closed join to leave the group")
    assert _heartbeat(pin, group, gen, pin_id) == 27  # REBALANCE_IN_PROGRESS: rejoin
    pin.sock.settimeout(5)
    t0 = time.monotonic()
    err, gen2, leader, me = _join(pin, group, pin_id)  # the rebalance completes with pin alone
    assert (err, gen2, leader, me) == (0, gen + 1, pin_id, pin_id)
    assert time.monotonic() - t0 < 3
    assert _sync(pin, group, gen2, pin_id) == 0
    assert _members(k, group) == ("Stable", 1)


def _read_join(k: RawKafka) -> tuple[int, int, str, str]:
    r = Reader(k.recv_frame())
    r.int32()
    err, gen = r.int16(), r.int32()
    r.string()
    return err, gen, r.string(), r.string()


def test_a_waiting_sync_whose_connection_closes_leaves_the_group(kafka_server):
    group = f"dropsync-{time.monotonic_ns()}"
    a, b = RawKafka(kafka_server.kafka_port), RawKafka(kafka_server.kafka_port)
    a.send_frame(_join_frame(group)[4:])  # both join the group's first generation
    b.send_frame(_join_frame(group)[4:])
    (err_a, gen, leader, a_id), (err_b, gen_b, _, b_id) = _read_join(a), _read_join(b)
    assert err_a == err_b == 0 and gen == gen_b and leader in (a_id, b_id)
    lead, follow = (a, b) if leader == a_id else (b, a)
    follow_id = b_id if leader == a_id else a_id
    follow.send_frame(bytes(Writer().int16(14).int16(0).int32(9).string("waits-test").string(group).int32(gen)
                            .string(follow_id).array(0).b))  # waits for the leader's assignment
    k = RawKafka(kafka_server.kafka_port)
    follow.close()  # after the sync (the server reads it first): it can never be answered, so the
    # member leaves, and a rebalance starts
    _wait_for(lambda: _members(k, group) == ("PreparingRebalance", 1), 5, "the closed member to leave")
    assert _sync(lead, group, gen, leader) == 27  # REBALANCE_IN_PROGRESS: the leader rejoins alone
    lead.sock.settimeout(5)
    assert _join(lead, group, leader)[:3] == (0, gen + 1, leader)


def test_a_request_pipelined_behind_a_waiting_join_is_answered_after_it_in_order(kafka_server):
    group = f"pipe-{time.monotonic_ns()}"
    pin, pin_id, gen = _stable_member(kafka_server.kafka_port, group)
    k = RawKafka(kafka_server.kafka_port)
    k.sock.settimeout(10)
    api_versions = bytes(Writer().int16(18).int16(0).int32(2).string("waits-test").b)
    k.sock.sendall(_join_frame(group, corr=1) + struct.pack(">i", len(api_versions)) + api_versions)
    watch = RawKafka(kafka_server.kafka_port)
    _wait_for(lambda: _members(watch, group) == ("PreparingRebalance", 2), 10, "the join to wait")
    pin.sock.settimeout(10)
    assert _join(pin, group, pin_id)[:2] == (0, gen + 1)  # pin rejoins: the rebalance completes
    first, second = Reader(k.recv_frame()), Reader(k.recv_frame())
    assert first.int32() == 1 and first.int16() == 0 and first.int32() == gen + 1  # the join, then
    assert second.int32() == 2 and second.int16() == 0  # the ApiVersions read while it waited


def test_a_killed_confluent_consumer_waiting_in_a_join_leaves_at_once(kafka_server):
    import os
    import signal
    import subprocess
    import sys

    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"kill-{time.monotonic_ns()}", f"killg-{time.monotonic_ns()}"
    admin = AdminClient({"bootstrap.servers": kafka_server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)
    pin, pin_id, gen = _stable_member(kafka_server.kafka_port, group)
    member = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "group_member.py"),
                               kafka_server.bootstrap, topic, group], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        k = RawKafka(kafka_server.kafka_port)
        _wait_for(lambda: _members(k, group) == ("PreparingRebalance", 2), 20, "the consumer's join to wait")
        member.send_signal(signal.SIGKILL)  # its JoinGroup (rebalance timeout 300 s) can never be answered
        member.wait()
        _wait_for(lambda: _members(k, group)[1] == 1, 5, "the killed consumer to leave the group")
        pin.sock.settimeout(5)
        assert _join(pin, group, pin_id)[:3] == (0, gen + 1, pin_id)
    finally:
        if member.poll() is None:
            member.kill()
            member.wait()
