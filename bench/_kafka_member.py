"""A consumer-protocol (KIP-848) group member for bench/kafka_bench.py's rebalance section.

    python bench/_kafka_member.py BOOTSTRAP TOPIC GROUP

confluent-kafka with ``group.protocol=consumer`` (auto commit on). Prints one line each,
flushed: ``assigned 0,3`` (partitions added), ``revoked 1`` (partitions taken back), and
``first P`` when it receives the first record of partition P since P was assigned to it.
Runs until killed; SIGTERM closes the consumer.
"""

import signal
import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "latest", "fetch.wait.max.ms": 100})
    fresh: set[int] = set()

    def on_assign(consumer, parts):
        fresh.update(p.partition for p in parts)
        print("assigned " + ",".join(str(p.partition) for p in parts), flush=True)

    def on_revoke(consumer, parts):
        fresh.difference_update(p.partition for p in parts)
        print("revoked " + ",".join(str(p.partition) for p in parts), flush=True)

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while not stop:
            for m in c.consume(100, timeout=0.1):
                if not m.error() and m.partition() in fresh:
                    fresh.discard(m.partition())
                    print(f"first {m.partition()}", flush=True)
    finally:
        c.close()


if __name__ == "__main__":
    main()
