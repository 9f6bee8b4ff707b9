"""``group_by_key``: the grouping one ``send_batch`` uses (embedded Producer and the
idempotent HTTP producer alike), against a simple model."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vqs.broker.partitioner import RoundRobin, group_by_key, partition_for_key


@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=6)), min_size=1, max_size=40),
       parts=st.integers(1, 9), calls_before=st.integers(0, 5))
def test_group_by_key_matches_model(keys, parts, calls_before):
    rr = RoundRobin()
    for _ in range(calls_before):
        rr.next("t", parts)
    groups = group_by_key(keys, parts, rr, "t")
    # every index once, in input order within its partition
    assert sorted(i for idx in groups.values() for i in idx) == list(range(len(keys)))
    assert all(idx == sorted(idx) for idx in groups.values())
    where = {i: p for p, idx in groups.items() for i in idx}
    sticky = calls_before % parts  # the keyless records of one call share the next round-robin choice
    for i, k in enumerate(keys):
        assert where[i] == (sticky if k is None else partition_for_key(k, parts))
    # the round robin moved on once if any record was keyless, else not at all
    assert rr.next("t", parts) == (calls_before + (None in keys)) % parts
