"""A consumer-group member process for test_group_rebalance.py: prints what it gets, one line each.

``python group_member.py BOOTSTRAP TOPIC GROUP``; lines: ``assigned 0,3``, ``revoked``,
``msg PARTITION OFFSET VALUE``. Commits after each message (synchronously).
"""

import sys

from confluent_kafka import Consumer, KafkaException


def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                  "partition.assignment.strategy": "range"})

    def on_assign(consumer, parts):
        print("assigned " + ",".join(str(p.partition) for p in parts), flush=True)

    def on_revoke(consumer, parts):
        print("revoked", flush=True)

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while True:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            print(f"msg {m.partition()} {m.offset()} {m.value().decode()}", flush=True)
            try:
                c.commit(message=m, asynchronous=False)
            except KafkaException:  # a rebalance under way: the next owner re-reads (at least once)
                pass
    except KeyboardInterrupt:
        pass
    finally:
        c.close()


if __name__ == "__main__":
    main()
