"""Server-side partition assignment for VQS consumer groups: balanced first, then sticky.

``assign(subscriptions, partitions, previous)`` maps each member to the
partitions it should own. Invariants:

- every partition of every subscribed topic goes to exactly one member that
  subscribes to its topic (a topic nobody subscribes to is not assigned);
- with identical subscriptions the members' counts differ by at most one
  (partitions go one by one to the eligible member that has fewest);
- a member first keeps its previous partitions up to its fair share (the
  floor of its partitions over the members competing for them), those of the
  topics fewest members subscribe to first (the ones others could not take),
  and a partition that must move prefers its previous owner on ties: a membership
  change moves few partitions (joining a group of N moves about 1/(N+1) of
  them; a member leaving moves only its own);
- the same input gives the same output (members in the order given).

A pure function: the caller (assigned_groups.py) holds the group's lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .topic import TopicPartition


def assign(subscriptions: Mapping[str, Iterable[str]], partitions: Mapping[str, int],
           previous: Mapping[str, Iterable[TopicPartition]] | None = None) -> dict[str, list[TopicPartition]]:
    """{member: sorted partitions}; ``partitions`` gives each topic's partition count
    (a topic missing from it has none)."""
    members = list(subscriptions)
    order = {m: i for i, m in enumerate(members)}
    subs = {m: set(ts) for m, ts in subscriptions.items()}
    topics = sorted({t for s in subs.values() for t in s})
    subscribers = {t: [m for m in members if t in subs[m]] for t in topics}
    tps = [TopicPartition(t, p) for t in topics for p in range(partitions.get(t, 0))]

    quota = {}
    for m in members:
        mine = sum(partitions.get(t, 0) for t in subs[m])
        rivals = {x for t in subs[m] for x in subscribers[t]} or {m}
        quota[m] = mine // len(rivals)

    prev_owner: dict[TopicPartition, str] = {}
    for m, owned in (previous or {}).items():
        for tp in owned:
            prev_owner[TopicPartition(*tp)] = m

    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    rest = []
    tps.sort(key=lambda tp: (len(subscribers[tp.topic]), tp))
    for tp in tps:  # keep what each member had, up to its fair share, what others could not take first
        m = prev_owner.get(tp)
        if m in out and tp.topic in subs[m] and len(out[m]) < quota[m]:
            out[m].append(tp)
        else:
            rest.append(tp)
    for tp in rest:  # the rest, in the same order, one by one to the eligible member with fewest
        prev = prev_owner.get(tp)
        best = min(subscribers[tp.topic], key=lambda m: (len(out[m]), m != prev, order[m]))
        out[best].append(tp)
    return {m: sorted(v) for m, v in out.items()}
