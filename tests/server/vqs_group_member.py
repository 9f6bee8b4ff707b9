"""A VQS consumer-group member process for test_group_members.py: prints what it gets, one line each.

``python vqs_group_member.py URL TOPIC GROUP SESSION_MS``; lines: ``assigned 0,3`` (whenever its
assignment changes), ``msg PARTITION OFFSET VALUE``. Commits after each poll; on SIGTERM it
commits, leaves the group and prints ``bye``.
"""

import signal
import sys
import threading

import vqs


def main() -> None:
    url, topic, group, session_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with vqs.Client(url) as client:
        c = client.consumer(topic, group=group, session_timeout_ms=session_ms)
        shown = None
        while not stop.is_set():
            recs = c.poll(max_records=20, timeout=0.2)
            now = sorted(p for _, p in c.assignment())
            if now != shown:
                shown = now
                print("assigned " + ",".join(map(str, now)), flush=True)
            for r in recs:
                print(f"msg {r.partition} {r.offset} {r.value.decode()}", flush=True)
            c.commit()
        c.commit()
        c.close()
        print("bye", flush=True)


if __name__ == "__main__":
    main()
