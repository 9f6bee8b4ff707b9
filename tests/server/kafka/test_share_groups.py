"""Share groups (KIP-932) with confluent-kafka's ShareConsumer against a real server."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka_clients import one_batch_producer
from kafka_server_proc import KafkaServer

ck = pytest.importorskip("confluent_kafka")
if not hasattr(ck, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)
from confluent_kafka import AcknowledgeType  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

LOCK_MS = 2000
LIMIT = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = KafkaServer(tmp_path_factory.mktemp("vqs-share") / "data", "--flush", "always", env={
        "VQS_KAFKA_SHARE_RECORD_LOCK_MS": str(LOCK_MS), "VQS_KAFKA_SHARE_DELIVERY_LIMIT": str(LIMIT),
        "VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest", "VQS_KAFKA_SHARE_HEARTBEAT_INTERVAL_MS": "500"}).start()
    yield s
    rc = s.stop()
    assert rc == 0, s.log()


def _topic(server, partitions: int, n: int, **producer_conf) -> tuple[str, set[bytes]]:
    name = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(10)
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, **producer_conf})
    values = {b"r%05d" % i for i in range(n)}
    for i, v in enumerate(sorted(values)):
        p.produce(name, value=v, key=b"k%d" % i)
    assert p.flush(20) == 0
    return name, values


def _consumer(server, group: str, explicit: bool = False, **extra):
    conf = {"bootstrap.servers": server.bootstrap, "group.id": group, "fetch.wait.max.ms": 200}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    conf.update(extra)
    return ck.ShareConsumer(conf)


def _poll_until(c, want, timeout: float = 20.0) -> list:
    """Poll ``c`` until ``want(messages so far)``; the messages (errors fail the test)."""
    got: list = []
    deadline = time.monotonic() + timeout
    while not want(got):
        assert time.monotonic() < deadline, f"timed out with {len(got)} records"
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            got.append(m)
    return got


def test_records_are_shared_among_consumers_each_accepted_once(server):
    topic, _ = _topic(server, 3, 0)
    group = f"g-{uuid.uuid4().hex[:6]}"
    seen: list = []
    lock = threading.Lock()
    done = threading.Event()
    joined = threading.Barrier(4)
    per_consumer = [0, 0, 0]

    def run(i):
        c = _consumer(server, group, **{"max.poll.records": 50})
        c.subscribe([topic])
        try:
            c.poll(0.5)  # joined: has partitions
            joined.wait(30)
            while not done.is_set():
                for m in c.poll(0.3):
                    assert m.error() is None, m.error()
                    with lock:
                        seen.append(m.value())
                        per_consumer[i] += 1
                        if len(set(seen)) == 600:
                            done.set()
            c.commit_sync(10)  # implicit mode: accepts what the last poll returned (close releases it)
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    joined.wait(30)
    # batches of 20 records: a fetch acquires whole stored batches, so batches of a partition's
    # every record could go to one member, before the assignment gives the partition to another
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, "batch.num.messages": 20})
    values = {b"r%05d" % i for i in range(600)}
    for i, v in enumerate(sorted(values)):
        p.produce(topic, value=v, key=b"k%d" % i)
    assert p.flush(20) == 0
    for t in threads:
        t.join(60)
    assert done.is_set()
    assert sorted(seen) == sorted(values)  # every record once: none twice, none lost
    assert all(per_consumer), per_consumer  # shared among the three
    # all accepted: a new member of the group gets nothing
    c = _consumer(server, group)
    c.subscribe([topic])
    try:
        end = time.monotonic() + 3
        while time.monotonic() < end:
            assert not [m for m in c.poll(0.5) if m.error() is None]
    finally:
        c.close()


def test_an_unacknowledged_record_comes_back_when_its_lock_ends(server):
    topic, values = _topic(server, 1, 5)
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = _consumer(server, group, explicit=True)
    a.subscribe([topic])
    first = _poll_until(a, lambda got: len(got) >= 5)
    assert {m.delivery_count() for m in first} == {1}
    t0 = time.monotonic()
    b = _consumer(server, group, explicit=True)  # a holds its records and never acknowledges
    b.subscribe([topic])
    try:
        again = _poll_until(b, lambda got: len(got) >= 5, timeout=LOCK_MS / 1000 + 15)
        assert time.monotonic() - t0 >= LOCK_MS / 1000 * 0.8  # not before the lock ended
        assert {m.value() for m in again} == values
        assert {m.delivery_count() for m in again} == {2}
        for m in again:
            b.acknowledge(m)
        assert all(e is None for e in b.commit_sync(10).values())
    finally:
        b.close()
        a.close()


def test_release_redelivers_with_the_next_delivery_count_reject_archives(server):
    topic, _ = _topic(server, 1, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = _consumer(server, group, explicit=True)
    c.subscribe([topic])
    try:
        got = _poll_until(c, lambda got: len(got) >= 4)
        by_value = {m.value(): m for m in got}
        c.acknowledge(by_value[b"r00000"], AcknowledgeType.RELEASE)
        c.acknowledge(by_value[b"r00001"], AcknowledgeType.REJECT)
        c.acknowledge(by_value[b"r00002"], AcknowledgeType.ACCEPT)
        c.acknowledge(by_value[b"r00003"], AcknowledgeType.ACCEPT)
        assert all(e is None for e in c.commit_sync(10).values())
        again = _poll_until(c, lambda got: len(got) >= 1)
        assert [(m.value(), m.delivery_count()) for m in again] == [(b"r00000", 2)]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        # the rejected record is archived: the next record is the only one that comes
        p = ck.Producer({"bootstrap.servers": server.bootstrap})
        p.produce(topic, value=b"marker")
        p.flush(10)
        rest = _poll_until(c, lambda got: len(got) >= 1)
        assert [m.value() for m in rest] == [b"marker"]
        c.acknowledge(rest[0])
        c.commit_sync(10)
    finally:
        c.close()


def test_a_record_released_up_to_the_delivery_limit_is_archived(server):
    topic, _ = _topic(server, 1, 1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = _consumer(server, group, explicit=True)
    c.subscribe([topic])
    try:
        counts = []
        for _ in range(LIMIT):
            (m,) = _poll_until(c, lambda got: len(got) >= 1)
            counts.append(m.delivery_count())
            c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync(10)
        assert counts == list(range(1, LIMIT + 1))
        p = ck.Producer({"bootstrap.servers": server.bootstrap})
        p.produce(topic, value=b"marker")
        p.flush(10)
        rest = _poll_until(c, lambda got: len(got) >= 1)
        assert [m.value() for m in rest] == [b"marker"]  # the released one was archived
        c.acknowledge(rest[0])
        c.commit_sync(10)
    finally:
        c.close()


def test_a_new_share_group_starts_at_the_end_by_default(tmp_path):
    server = KafkaServer(tmp_path / "data", env={"VQS_KAFKA_SHARE_HEARTBEAT_INTERVAL_MS": "500"}).start()
    try:
        topic, _ = _topic(server, 1, 10)  # before the group exists: not read
        c = _consumer(server, "latest")
        c.subscribe([topic])
        try:
            deadline = time.monotonic() + 20
            p = ck.Producer({"bootstrap.servers": server.bootstrap})
            got: list = []
            while not got:  # the group's start is fixed at its first fetch: produce until one is read
                assert time.monotonic() < deadline
                p.produce(topic, value=b"new")
                p.flush(10)
                got = [m for m in c.poll(0.5) if m.error() is None]
            assert {m.value() for m in got} == {b"new"}
        finally:
            c.close()
    finally:
        assert server.stop() == 0, server.log()


def _drain(server, group: str, topic: str, quiet_s: float = 3.0) -> set:
    """Accept what ``group`` still has to deliver, until nothing comes for ``quiet_s``."""
    c = _consumer(server, group, explicit=True)
    c.subscribe([topic])
    got: set = set()
    try:
        end = time.monotonic() + quiet_s
        while time.monotonic() < end:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                c.acknowledge(m)
                got.add(m.value())
            if msgs:
                assert all(e is None for e in c.commit_sync(10).values())
                end = time.monotonic() + quiet_s
    finally:
        c.close()
    return got


def test_server_sigkilled_mid_stream_loses_nothing_and_redelivers_no_accepted_record(tmp_path):
    """Three explicit-mode consumers accept and commit; the server (flush=interval: acknowledgements
    reach the OS before they are answered, not the disk) is SIGKILLed and restarted once."""
    server = KafkaServer(tmp_path / "data", env={
        "VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest", "VQS_KAFKA_SHARE_HEARTBEAT_INTERVAL_MS": "500"}).start()
    try:
        # batches of 20 (the max.poll.records): a fetch acquires whole stored batches, and the
        # crash must come mid-stream
        topic, values = _topic(server, 3, 900, **{"batch.num.messages": 20})
        group = "crash"
        lock = threading.Lock()
        committed: dict[bytes, float] = {}  # value -> when its accept was committed (monotonic)
        deliveries: list = []  # (value, delivery count, when polled)
        # held across each commit and across the kill: a commit the server applied and was
        # killed before answering would be neither failed nor committed (a test that could
        # not tell). So a failed commit was not applied: its records must come again.
        committing = threading.Lock()
        third = threading.Event()  # a third accepted: the server is killed now, the others still in flight
        killed = threading.Event()
        done = threading.Event()

        def run():
            c = _consumer(server, group, explicit=True, **{"max.poll.records": 20})
            c.subscribe([topic])
            try:
                while not done.is_set():
                    if third.is_set():
                        killed.wait(30)
                    try:
                        msgs = [m for m in c.poll(0.3) if m.error() is None]
                    except ck.KafkaException:
                        continue
                    now = time.monotonic()
                    with lock:
                        deliveries.extend((m.value(), m.delivery_count(), now) for m in msgs)
                    for m in msgs:
                        c.acknowledge(m)
                    if not msgs:
                        continue
                    try:
                        with committing:
                            result = c.commit_sync(10)
                    except ck.KafkaException:
                        continue
                    ok = {(tp.topic, tp.partition) for tp, err in result.items() if err is None}
                    with lock:
                        for m in msgs:
                            if (m.topic(), m.partition()) in ok:
                                committed.setdefault(m.value(), time.monotonic())
                        if len(committed) >= len(values) // 3:
                            third.set()
                        if len(committed) == len(values):
                            done.set()
            finally:
                c.close()

        threads = [threading.Thread(target=run) for _ in range(3)]
        for t in threads:
            t.start()
        assert third.wait(30), "no progress before the crash"
        with committing:
            server.kill9()
        killed_at = time.monotonic()
        killed.set()
        server.start()
        for t in threads:
            t.join(90)
        assert done.is_set(), f"{len(committed)} of {len(values)} accepted"
        assert set(committed) == values  # nothing lost
        for value, count, when in deliveries:  # an accepted record is never delivered again
            first = committed[value]
            assert when <= first, f"{value!r} delivered (count {count}) after its accept was committed"
        assert min(committed.values()) < killed_at < max(committed.values())  # the crash was mid-stream
    finally:
        assert server.stop() == 0, server.log()


_HOLDER = """
import sys, time
import confluent_kafka as ck
c = ck.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                      "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
n = 0
while n < int(sys.argv[4]):
    n += len([m for m in c.poll(0.5) if m.error() is None])
print("held", n, flush=True)
time.sleep(600)
"""


def test_a_sigkilled_consumer_releases_what_it_held_at_once(tmp_path):
    import signal
    import subprocess
    import sys

    server = KafkaServer(tmp_path / "data", env={
        "VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest", "VQS_KAFKA_SHARE_RECORD_LOCK_MS": "120000",
        "VQS_KAFKA_SHARE_HEARTBEAT_INTERVAL_MS": "500"}).start()
    try:
        topic, values = _topic(server, 1, 5)
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, server.bootstrap, "g", topic, "5"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().split() == ["held", "5"]
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        t0 = time.monotonic()
        c = _consumer(server, "g", explicit=True)
        c.subscribe([topic])
        try:
            got = _poll_until(c, lambda got: len(got) >= 5, timeout=30)
            assert time.monotonic() - t0 < 60  # not the 120 s lock: its connection's close released them
            assert {m.value() for m in got} == values and {m.delivery_count() for m in got} == {2}
            for m in got:
                c.acknowledge(m)
            assert all(e is None for e in c.commit_sync(10).values())
        finally:
            c.close()
    finally:
        assert server.stop() == 0, server.log()


def test_share_group_describe_shows_members_and_their_partitions(server):
    from raw_client import RawKafka

    from vqs.server.kafka.codec import Writer

    topic, _ = _topic(server, 2, 0)
    c = _consumer(server, "described", **{"client.id": "worker-1"})
    c.subscribe([topic])
    raw = RawKafka(int(server.bootstrap.rsplit(":", 1)[1]))
    try:
        c.poll(0.5)  # joined
        body = Writer().tags().compact_array(2).compact_string("described").compact_string("nobody")
        r = raw.request(77, 1, bytes(body.boolean(True).tags().b))
        r.tagged_fields()
        assert r.int32() == 0 and r.compact_array_len() == 2
        assert (r.int16(), r.compact_string(), r.compact_string()) == (0, None, "described")
        assert r.compact_string() == "Stable"
        epoch = r.int32()
        assert epoch > 0 and r.int32() == epoch and r.compact_string() == "simple"
        assert r.compact_array_len() == 1
        r.compact_string()  # member id
        assert r.compact_string() is None and r.int32() == epoch
        assert r.compact_string() == "worker-1" and r.compact_string() == "127.0.0.1"
        assert [r.compact_string() for _ in range(r.compact_array_len())] == [topic]
        assert r.compact_array_len() == 1
        r.uuid()
        assert r.compact_string() == topic
        assert sorted(r.int32() for _ in range(r.compact_array_len())) == [0, 1]
        r.tagged_fields()
        r.tagged_fields()
        r.tagged_fields()
        assert r.int32() != -2147483648  # authorized operations, asked for
        r.tagged_fields()
        assert r.int16() == 69  # GROUP_ID_NOT_FOUND
        assert r.compact_string() and r.compact_string() == "nobody" and r.compact_string() == "Dead"
        import vqs

        with vqs.Client(server.url) as client:  # the same group over REST
            d = client.describe_share_group("described")
            assert client.describe_share_group("nobody") is None
            assert "described" in client.share_group_names()
        assert d["state"] == "Stable" and d["epoch"] == epoch
        assert [(m["client_id"], m["assignment"]) for m in d["members"]] == [("worker-1", {topic: [0, 1]})]
    finally:
        raw.close()
        c.close()


_WORKER = """
import sys, time
import confluent_kafka as ck
c = ck.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "max.poll.records": 25,
                      "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 200})
c.subscribe([sys.argv[3]])
while True:
    try:
        msgs = [m for m in c.poll(0.3) if m.error() is None]
    except ck.KafkaException:
        continue
    if not msgs:
        continue
    time.sleep(0.05)  # the work: 2 ms a record
    for m in msgs:
        c.acknowledge(m)
    # "?": being committed. A SIGKILL (of this worker, or of the server) between the server's
    # state write and its answer settles records no commit here reports.
    print("\\n".join("?" + m.value().decode() for m in msgs), flush=True)
    try:
        result = c.commit_sync(10)
    except ck.KafkaException:
        continue
    ok = {(tp.topic, tp.partition) for tp, err in result.items() if err is None}
    for m in msgs:
        if (m.topic(), m.partition()) in ok:
            print(m.value().decode(), flush=True)
"""


def test_workers_one_sigkilled_and_the_server_sigkilled_each_record_accepted_once(tmp_path):
    """Three worker processes accept and commit; one is SIGKILLed, then the server is SIGKILLed
    and restarted: every record is accepted, and none by two commits."""
    import signal
    import subprocess
    import sys

    server = KafkaServer(tmp_path / "data", env={
        "VQS_KAFKA_SHARE_AUTO_OFFSET_RESET": "earliest", "VQS_KAFKA_SHARE_HEARTBEAT_INTERVAL_MS": "500"}).start()
    workers: list = []
    readers: list = []
    accepted: list = []
    unsure: set = set()  # in a commit that may have failed (see _WORKER)
    lock = threading.Lock()

    def read(proc):
        for line in proc.stdout:
            v = line.strip().encode()
            with lock:
                if v.startswith(b"?"):
                    unsure.add(v[1:])
                else:
                    accepted.append(v)

    def wait_for(n, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            with lock:
                if len(set(accepted) | unsure) >= n:
                    return
            assert time.monotonic() < deadline, f"{len(accepted)} accepted, waiting for {n}"
            time.sleep(0.05)

    try:
        # batches of 25 (the workers' max.poll.records): a fetch acquires whole stored batches,
        # and the server must be killed mid-stream
        topic, values = _topic(server, 3, 1500, **{"batch.num.messages": 25})
        for _ in range(3):
            w = subprocess.Popen([sys.executable, "-c", _WORKER, server.bootstrap, "workers", topic],
                                 stdout=subprocess.PIPE, text=True)
            workers.append(w)
            readers.append(threading.Thread(target=read, args=(w,), daemon=True))
            readers[-1].start()
        wait_for(200)
        workers[0].send_signal(signal.SIGKILL)  # holds records: released when its connection closes
        workers[0].wait()
        wait_for(600)
        server.kill9()
        with lock:
            assert len(accepted) < len(values)  # mid-stream
        server.start()
        wait_for(len(values), timeout=90)
        for w in workers:
            w.kill()
            w.wait()
        for t in readers:
            t.join(10)
        drained = _drain(server, "workers", topic)  # what is still to accept: unsure ones only
        with lock:
            got = list(accepted)
            assert set(got) | unsure == values  # nothing lost
            assert drained <= unsure - set(got), sorted(drained - unsure)[:5]
        assert len(got) == len(set(got))  # no record accepted twice
    finally:
        for w in workers:
            w.kill()
            w.wait()
        server.stop()


def test_a_topic_deleted_and_made_again_is_read_afresh(server):
    topic, _ = _topic(server, 1, 2)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    c = _consumer(server, f"g-{uuid.uuid4().hex[:6]}")
    c.subscribe([topic])
    try:
        assert len(_poll_until(c, lambda got: len(got) >= 2)) == 2
        c.commit_sync(10)
        admin.delete_topics([topic])[topic].result(10)
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(10)
        p = ck.Producer({"bootstrap.servers": server.bootstrap})
        p.produce(topic, value=b"again")
        p.flush(10)
        got = _poll_until(c, lambda got: len(got) >= 1, timeout=30)
        assert [(m.offset(), m.value(), m.delivery_count()) for m in got] == [(0, b"again", 1)]
    finally:
        c.close()


def test_a_share_groups_own_configs_over_incremental_alter_configs(tmp_path):
    """As librdkafka's share-consumer tests set share.auto.offset.reset (IncrementalAlterConfigs
    on a GROUP resource; runs where the listener serves that API); DescribeConfigs shows the
    group's own and the server's."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    from vqs.server.kafka.apis import API_TABLE

    if 44 not in API_TABLE:
        pytest.skip("IncrementalAlterConfigs is not served here")
    server = KafkaServer(tmp_path / "data").start()  # the server's default: latest
    try:
        topic, values = _topic(server, 1, 5)
        admin = AdminClient({"bootstrap.servers": server.bootstrap})

        def alter(value):
            res = ConfigResource(ResourceType.GROUP, "early", incremental_configs=[
                ConfigEntry("share.auto.offset.reset", value, incremental_operation=AlterConfigOpType.SET)])
            return next(iter(admin.incremental_alter_configs([res]).values()))

        with pytest.raises(ck.KafkaException, match="latest or earliest"):
            alter("sometimes").result(10)
        assert alter("earliest").result(10) is None
        described = next(iter(admin.describe_configs([ConfigResource(ResourceType.GROUP, "early")]).values()))
        entries = described.result(10)
        assert set(entries) >= {"share.auto.offset.reset", "share.record.lock.duration.ms", "share.isolation.level"}
        own, default = entries["share.auto.offset.reset"], entries["share.record.lock.duration.ms"]
        assert (own.value, own.source) == ("earliest", ConfigSource.GROUP_CONFIG.value)
        assert (default.value, default.source) == ("30000", ConfigSource.STATIC_BROKER_CONFIG.value)
        assert not own.is_read_only
        c = _consumer(server, "early")
        c.subscribe([topic])
        try:
            assert {m.value() for m in _poll_until(c, lambda got: len(got) >= 5)} == values  # from the start
            c.commit_sync(10)
        finally:
            c.close()
    finally:
        assert server.stop() == 0, server.log()



def test_a_fetch_acquires_whole_stored_batches_past_max_poll_records(server):
    """One stored batch of 300 records; max.poll.records 10 (the fetch's MaxRecords). The fetch
    acquires the whole batch, as Kafka's broker does; the records the member accepts are settled,
    the others come back, one delivery later, once it leaves: in one fetch, being one batch's."""
    name = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(10)
    p = one_batch_producer(server.bootstrap, name)
    values = [b"r%05d" % i for i in range(300)]
    for v in values:
        p.produce(name, value=v, partition=0)
    assert p.flush(20) == 0
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = _consumer(server, group, explicit=True, **{"max.poll.records": 10})
    a.subscribe([name])
    try:
        first = _poll_until(a, lambda got: len(got) > 0)
        assert [m.value() for m in first] == values  # the whole batch, past MaxRecords
        for m in first[:10]:
            a.acknowledge(m, AcknowledgeType.ACCEPT)
        assert all(e is None for e in a.commit_sync(10).values())
    finally:
        a.close()  # its share session ends: the 290 it holds are released
    b = _consumer(server, group, explicit=True, **{"max.poll.records": 10})
    b.subscribe([name])
    try:
        rest: list = []
        polls: list = []
        deadline = time.monotonic() + 20
        while len(rest) < 290:
            assert time.monotonic() < deadline, f"timed out with {len(rest)} records"
            got = b.poll(0.5)
            if got:
                polls.append(len(got))
            for m in got:
                assert m.error() is None, m.error()
                b.acknowledge(m, AcknowledgeType.ACCEPT)
                rest.append(m)
        assert all(e is None for e in b.commit_sync(10).values())
    finally:
        b.close()
    assert sorted(m.value() for m in rest) == values[10:]
    assert {m.delivery_count() for m in rest} == {2}
    assert len(polls) == 1  # the released records of the batch come whole too


def _one_record_batches(server, n: int) -> str:
    """A new one-partition topic of ``n`` stored batches of one record each (b"r0", b"r1", ...)."""
    name = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(10)
    p = ck.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(name, value=b"r%d" % i, partition=0)
        assert p.flush(10) == 0
    return name


def test_fetch_max_bytes_bounds_a_fetch_to_one_batch_at_least_and_zero_to_none(server):
    """fetch.max.bytes (the ShareFetch's MaxBytes) is a soft limit, as Kafka's: 1 answers one
    stored batch a fetch; 0 answers no records."""
    name = _one_record_batches(server, 4)
    nothing = _consumer(server, f"g-{uuid.uuid4().hex[:6]}", **{"fetch.max.bytes": 0})
    nothing.subscribe([name])
    try:
        for _ in range(3):
            assert [m for m in nothing.poll(0.5) if m.error() is None] == []
    finally:
        nothing.close()
    c = _consumer(server, f"g-{uuid.uuid4().hex[:6]}", **{"fetch.max.bytes": 1})
    c.subscribe([name])
    polls: list = []
    try:
        deadline = time.monotonic() + 20
        while sum(polls) < 4:
            assert time.monotonic() < deadline, polls
            got = [m for m in c.poll(0.5) if m.error() is None]
            if got:
                polls.append(len(got))
        c.commit_sync(10)
    finally:
        c.close()
    assert polls == [1, 1, 1, 1]


def test_fetch_max_bytes_bounds_released_records_too(server):
    """Records made available again (released here) are bounded by MaxBytes as fresh ones are:
    one stored batch a fetch at fetch.max.bytes 1."""
    name = _one_record_batches(server, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = _consumer(server, group, explicit=True)
    a.subscribe([name])
    try:
        for m in _poll_until(a, lambda got: len(got) >= 4):
            a.acknowledge(m, AcknowledgeType.RELEASE)
        assert all(e is None for e in a.commit_sync(10).values())
    finally:
        a.close()
    b = _consumer(server, group, **{"fetch.max.bytes": 1})
    b.subscribe([name])
    polls: list = []
    try:
        deadline = time.monotonic() + 20
        while sum(len(got) for got in polls) < 4:
            assert time.monotonic() < deadline, polls
            got = [(m.value(), m.delivery_count()) for m in b.poll(0.5) if m.error() is None]
            if got:
                polls.append(got)
        b.commit_sync(10)
    finally:
        b.close()
    assert polls == [[(b"r%d" % i, 2)] for i in range(4)]
