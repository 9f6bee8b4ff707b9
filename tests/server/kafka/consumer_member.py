"""A consumer-protocol (KIP-848) group member process for test_consumer_protocol.py.

``python consumer_member.py BOOTSTRAP TOPIC GROUP [INSTANCE_ID]``; prints one line each:
``assigned 0,3`` (partitions added), ``revoked 1`` (partitions taken back),
``msg PARTITION OFFSET VALUE``. Commits after each message (synchronously).
With MEMBER_GATED=1 it prints ``ready`` once its consumer is made and subscribes
only when a line arrives on stdin (a join that starts at a moment the test picks).
"""

import os
import signal
import sys

from confluent_kafka import Consumer, KafkaException


def main() -> None:
    # SIGINT closes the consumer (a static member then leaves with epoch -2), whatever
    # disposition the process that started this one had (an ignored SIGINT is inherited)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bootstrap, topic, group = sys.argv[1:4]
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if len(sys.argv) > 4:
        conf["group.instance.id"] = sys.argv[4]
    c = Consumer(conf)

    def on_assign(consumer, parts):
        print("assigned " + ",".join(str(p.partition) for p in parts), flush=True)

    def on_revoke(consumer, parts):
        print("revoked " + ",".join(str(p.partition) for p in parts), flush=True)

    if os.environ.get("MEMBER_GATED") == "1":
        print("ready", flush=True)
        sys.stdin.readline()
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while True:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            print(f"msg {m.partition()} {m.offset()} {m.value().decode()}", flush=True)
            try:
                c.commit(message=m, asynchronous=False)
            except KafkaException:
                pass
    except KeyboardInterrupt:
        pass
    finally:
        c.close()


if __name__ == "__main__":
    main()
