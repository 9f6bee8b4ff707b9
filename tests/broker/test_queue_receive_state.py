"""vqs.broker.queue.message.receive_state: the delay/expiry/visible rule of a receive."""

from __future__ import annotations

from vqs.broker.queue.message import EXPIRED, H_DELAY, H_GROUP, H_SENT, VISIBLE, receive_state

NOW = 1_000_000
RET = NOW - 60_000  # expire_before: sent at or before it is past retention


def test_plain_records_are_visible_until_retention_ends():
    assert receive_state(NOW - 10, (), NOW, RET) == VISIBLE
    assert receive_state(RET + 1, None, NOW, RET) == VISIBLE
    assert receive_state(RET, (), NOW, RET) == EXPIRED


def test_a_send_delay_counts_from_the_record_and_is_decided_first():
    h = [(H_GROUP, b"g"), (H_DELAY, b"5000")]
    assert receive_state(NOW - 1000, h, NOW, RET) == NOW + 4000
    assert receive_state(NOW - 5000, h, NOW, RET) == VISIBLE  # the delay ends at now: visible
    # delayed and past retention: tracked as delayed (its expiry is found when visible)
    assert receive_state(RET - 10, [(H_DELAY, b"900000")], NOW, RET) == RET - 10 + 900000


def test_a_moved_message_expires_from_its_first_send():
    assert receive_state(NOW, [(H_SENT, str(RET).encode())], NOW, RET) == EXPIRED
    assert receive_state(NOW, [(H_SENT, str(RET + 1).encode())], NOW, RET) == VISIBLE


def test_the_delay_alone():
    assert receive_state(0, [(H_SENT, b"0")], NOW, -1) == VISIBLE
    assert receive_state(NOW, [(H_DELAY, b"1")], NOW, -1) == NOW + 1
