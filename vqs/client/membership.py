"""What a remote group member decides, without I/O: shared by the blocking
consumer (consumer.py) and the asyncio one (aio_consumer.py), which do the
requests.

The protocol (REST, ``/groups/{g}/members``; the server side is
vqs/broker/assigned_groups.py): a member joins with its topics and session
timeout and gets ``member_id``, ``generation``, its ``assignment``,
``pending`` (a rebalance is under way) and ``heartbeat_interval_ms``; each
heartbeat reports the partitions it still holds. The invariants kept here:

- a partition is let go only after what was consumed of it is committed (the
  commit is the caller's request; ``revoked`` says what to commit), and the
  loss of the partition is then reported at once by another heartbeat, so a
  rebalance waits for no timer;
- a commit carries the member id and generation, so the server refuses one
  from a member it has removed (FencedMember);
- while a rebalance is pending the member heartbeats at least every
  ``PENDING_BEAT_S`` so it picks up its new assignment promptly.
"""

from __future__ import annotations

from .values import as_tp

#: Heartbeat period while the server says a rebalance is pending (seconds).
PENDING_BEAT_S = 0.1
#: The longest a heartbeat waits on the server for its answer to change (ms).
MAX_HEARTBEAT_WAIT_MS = 20_000
#: Rounds of revoke-commit-report one heartbeat answer may start.
MAX_REVOKE_ROUNDS = 10


def join_body(topics: list, session_timeout_ms: int) -> dict:
    return {"topics": list(topics), "session_timeout_ms": session_timeout_ms}


def heartbeat_body(member: dict, owned: list, wait: float) -> dict:
    return {"generation": member["generation"],
            "owned": [{"topic": t, "partition": p} for t, p in owned],
            "wait_ms": max(0, min(MAX_HEARTBEAT_WAIT_MS, int(wait * 1000)))}


def assignment_of(answer: dict) -> list:
    return [as_tp((x["topic"], x["partition"])) for x in answer["assignment"]]


def revoked(held: list, new: list, positions: dict) -> tuple[list, dict]:
    """(the held partitions not in ``new``, {those of them with a position: it}):
    what to commit before reporting them gone."""
    keep = set(new)
    gone = [tp for tp in held if tp not in keep]
    return gone, {tp: positions[tp] for tp in gone if tp in positions}


def next_beat_in(answer: dict) -> float:
    """Seconds until the next heartbeat is due after ``answer``."""
    interval = answer["heartbeat_interval_ms"] / 1000
    return min(interval, PENDING_BEAT_S) if answer["pending"] else interval


def commit_body(offsets: dict, member: dict | None) -> dict:
    body: dict = {"offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()]}
    if member is not None:
        body.update(member_id=member["member_id"], generation=member["generation"])
    return body
