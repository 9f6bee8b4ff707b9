"""The SQS error table: one identity per error name, queue errors' from their classes."""

from __future__ import annotations

import pytest

from vqs import errors as E
from vqs.server.sqs.errors import DEFAULT_MESSAGES, FRONT_ERRORS, QUEUE_ERRORS, SQSError, from_queue_error


def test_no_error_name_is_declared_twice():
    assert not set(QUEUE_ERRORS) & set(FRONT_ERRORS)
    assert set(DEFAULT_MESSAGES) <= set(QUEUE_ERRORS) | set(FRONT_ERRORS)


@pytest.mark.parametrize("cls", [E.QueueDoesNotExist, E.QueueAlreadyExists, E.PurgeQueueInProgress, E.OverLimit,
                                 E.MessageNotInflight, E.ReceiptHandleIsInvalid, E.InvalidParameterValue,
                                 E.BatchEntryIdsNotDistinct, E.EmptyBatchRequest])
def test_queue_errors_take_their_identity_from_their_class(cls):
    err = SQSError(cls.code)
    assert (err.query_code, err.status) == (cls.query_code, cls.http_status)
    assert err.fault == ("Sender" if cls.sender_fault else "Receiver")
    assert err.message == DEFAULT_MESSAGES[cls.code]


def test_known_identities():
    assert SQSError("QueueDoesNotExist").query_error_header == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert SQSError("QueueNameExists").query_code == "QueueAlreadyExists"
    assert SQSError("PurgeQueueInProgress").status == 403
    assert (SQSError("ServiceUnavailable").status, SQSError("ServiceUnavailable").fault) == (503, "Server")
    assert SQSError("SignatureDoesNotMatch").status == 403
    assert SQSError("NoSuchThing").query_error_header == "NoSuchThing;Sender"


def test_from_queue_error_keeps_the_message():
    err = from_queue_error(E.PurgeQueueInProgress("q1"))
    assert (err.name, err.status, err.query_code) == ("PurgeQueueInProgress", 403,
                                                      "AWS.SimpleQueueService.PurgeQueueInProgress")
    assert "q1" in err.message
    assert from_queue_error(E.ReceiptHandleExpired("h")).name == "InvalidParameterValue"
