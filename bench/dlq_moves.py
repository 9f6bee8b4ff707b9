"""Dead-letter moves per second: 5,000 messages (100 B) past maxReceiveCount
moved by one receive (flush="interval", both queues in a temporary directory
under /tmp). Usage: ``python bench/dlq_moves.py LABEL``. The move path, not a
hot path: recorded in bench/RESULTS.md (issue 13, s13-dlq)."""

import sys
import tempfile
import time

import vqs

with tempfile.TemporaryDirectory(dir="/tmp") as d, vqs.Broker(d) as b:
    dlq = b.create_queue("dlq")
    q = b.create_queue("q", max_receive_count=1, dead_letter_queue="dlq")
    for _ in range(0, 5000, 10):
        q.send_batch([b"x" * 100] * 10)
    hs: list = []
    while len(hs) < 5000:
        hs += [m.receipt_handle for m in q.receive(10, visibility_timeout=600)]
    for h in hs:
        q.change_visibility(h, 0)
    t = time.perf_counter()
    assert q.receive(10) == []  # every message past the limit: all moved by this call
    dt = time.perf_counter() - t
    assert dlq.counts()["visible"] == 5000
    print(sys.argv[1] if len(sys.argv) > 1 else "", f"5000 dead-letter moves: {dt:.3f} s ({5000 / dt:.0f}/s)")
