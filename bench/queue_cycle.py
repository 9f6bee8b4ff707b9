"""Instructions per queue operation, before/after: valgrind cachegrind on N queue
cycles (send, receive, delete), the difference between two run lengths so that
start-up and imports cancel. Wall time on a shared VM moves +-20 %; instruction
counts settle a few-percent question.

    python bench/queue_cycle.py --base-tree /tmp/base      # a worktree of the base commit
    python bench/queue_cycle.py --run 1000 b10             # one run (what valgrind executes)

Prints a Markdown table; --json writes the figures.
"""

from __future__ import annotations

import tempfile

import _cycle

MODES = {  # mode: (short run, long run, messages per cycle)
    "b1": (1000, 3000, 1),
    "b10": (200, 600, 10),
    "fifo10": (100, 300, 10),
}
LABELS = {
    "b1": "standard queue cycle, batch 1 (send, receive, delete), interval",
    "b10": "standard queue cycle, batch 10, per message",
    "fifo10": "FIFO cycle, batch 10 in 3 groups, per message",
}


def run_cycles(n: int, mode: str) -> None:
    from vqs.broker import Broker  # (the public surface: the same call on any revision compared)

    # background rounds (the interval flusher, queue maintenance) held off: their number under
    # valgrind depends on the run's slowed wall time, not on the operations counted
    reg = Broker(tempfile.mkdtemp(), queue_maintenance_interval_ms=3_600_000, flush_interval_ms=3_600_000)
    if mode == "fifo10":
        q = reg.create_queue("q.fifo", fifo=True, content_based_deduplication=True, visibility_timeout=60)
    else:
        q = reg.create_queue("q", visibility_timeout=60)
    for i in range(n):
        if mode == "b1":
            q.send(b"x" * 100)
            (m,) = q.receive(1)
            q.delete(m.receipt_handle)
        elif mode == "b10":
            q.send_batch([b"x" * 100] * 10)
            q.delete_batch([m.receipt_handle for m in q.receive(10)])
        else:
            q.send_batch([{"body": f"{i}-{k}", "group_id": f"g{k % 3}"} for k in range(10)])
            got = 0
            while got < 10:
                ms = q.receive(10)
                got += len(ms)
                q.delete_batch([m.receipt_handle for m in ms])
    reg.close()


def main() -> None:
    _cycle.main(__file__, __doc__, MODES, LABELS, run_cycles, "message")


if __name__ == "__main__":
    main()
