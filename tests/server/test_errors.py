"""What of an embedded error a REST client sees: the status and code, never a server path."""

from __future__ import annotations

import pytest

from vqs import errors as E
from vqs.server.errors import client_message, from_vqs_error

PATH = "/srv/vqs-data/topics/t/0"


@pytest.mark.parametrize("exc, status, code", [
    (E.LogClosedError(f"log {PATH} is closed"), 503, "closing"),
    (E.TooManyOpenFiles(f"opening {PATH}/00000000000000000000.log failed: this process reached its open-file "
                        "limit (RLIMIT_NOFILE: soft 256, hard 256)", path=PATH), 503, "too_many_open_files"),
    (E.ReadOnlyError(f"log {PATH} was opened with readonly=True"), 409, "read_only"),
    (E.CorruptRecordError(f"{PATH}/00000000000000000000.log: CRC mismatch at 4096", path=PATH), 500, "corrupt_data"),
    (E.VQSError(f"fsync of {PATH}/00000000000000000000.log failed: [Errno 5] EIO"), 400, "invalid_request"),
    (E.OffsetOutOfRange(f"offset 9 is out of range for log {PATH}", offset=9, start_offset=0, end_offset=3),
     400, "offset_out_of_range"),
])
def test_server_state_errors_hide_paths(exc, status, code):
    api = from_vqs_error(exc)
    assert (api.status, api.code) == (status, code)
    assert "/srv" not in str(api.body()) and "/srv" not in client_message(exc)


def test_request_errors_keep_their_message():
    assert from_vqs_error(E.TopicDoesNotExist("t")).message == str(E.TopicDoesNotExist("t"))
    api = from_vqs_error(E.PurgeQueueInProgress("q"))
    assert (api.status, api.code, api.body()["error"]["sqs_code"]) == (403, "purge_queue_in_progress",
                                                                      "PurgeQueueInProgress")
    api = from_vqs_error(E.ReceiptHandleExpired("h"))  # the code is SQS's, the type the precise class
    assert (api.status, api.code, api.body()["error"]["sqs_code"], api.body()["error"]["type"]) == (
        400, "invalid_parameter_value", "InvalidParameterValue", "ReceiptHandleExpired")
    assert from_vqs_error(E.MessageNotInflight()).status == 409
    assert from_vqs_error(E.InvalidName("bad name")).field == "name"


def test_out_of_descriptors_is_a_503_to_retry_naming_the_limit():
    """Before: 400 invalid_request "could not complete the request" (a client error, not retried)."""
    api = from_vqs_error(E.TooManyOpenFiles(f"opening {PATH}/x.log failed", path=PATH, soft_limit=256))
    assert api.status == 503 and api.headers.get("Retry-After") == "1"
    assert "RLIMIT_NOFILE" in api.message and "/srv" not in api.message
