"""SQS errors as AWS reports them.

An error has the JSON protocol's shape name (``__type`` =
``com.amazonaws.sqs#<Name>``), the query protocol's code (``x-amzn-query-error``
header = ``<QueryCode>;<Sender|Receiver>``, and ``<Code>`` in the XML), an
HTTP status and AWS's message.

One table of SQS error identities: a queue error's (code, query code, HTTP
status, Sender/Receiver) is declared once, on its class in vqs.errors, because
the embedded API raises the same errors (its batch results carry ``code`` and
``sender_fault``, the REST front its ``http_status``) and must know them
without importing the server. This module adds only what the embedded API
never raises (FRONT_ERRORS: protocol, signing, request shape) and AWS's
default wording; no name is in both (tests/server/test_sqs_errors.py).
"""

from __future__ import annotations

from ... import errors as E

# Errors only this front raises (request shape, protocol, signing, the server's own state):
# name -> (query code, HTTP status, fault). The queue errors are not here: their identity is
# their class's, in vqs.errors (QUEUE_ERRORS below is read from there).
FRONT_ERRORS: dict[str, tuple[str, int, str]] = {
    "QueueDeletedRecently": ("AWS.SimpleQueueService.QueueDeletedRecently", 400, "Sender"),
    "InvalidIdFormat": ("InvalidIdFormat", 400, "Sender"),
    "RequestThrottled": ("RequestThrottled", 400, "Sender"),
    "InvalidAddress": ("InvalidAddress", 404, "Sender"),
    "InvalidSecurity": ("InvalidSecurity", 403, "Sender"),
    "InvalidAction": ("InvalidAction", 400, "Sender"),
    "InvalidQueryParameter": ("InvalidQueryParameter", 400, "Sender"),
    "MalformedQueryString": ("MalformedQueryString", 404, "Sender"),
    "ValidationError": ("ValidationError", 400, "Sender"),
    "SerializationException": ("SerializationException", 400, "Sender"),
    "InvalidClientTokenId": ("InvalidClientTokenId", 403, "Sender"),
    "SignatureDoesNotMatch": ("SignatureDoesNotMatch", 403, "Sender"),
    "IncompleteSignature": ("IncompleteSignature", 400, "Sender"),
    "MissingAuthenticationToken": ("MissingAuthenticationToken", 403, "Sender"),
    "RequestExpired": ("RequestExpired", 400, "Sender"),
    "AuthorizationQueryParametersError": ("AuthorizationQueryParametersError", 400, "Sender"),
    "AccessDenied": ("AccessDenied", 403, "Sender"),
    "ServiceUnavailable": ("ServiceUnavailable", 503, "Server"),
    "InternalFailure": ("InternalFailure", 500, "Receiver"),
    "RequestEntityTooLarge": ("RequestEntityTooLarge", 413, "Sender"),
}

# The JSON protocol's shape name where AWS's differs from the error's name (its ``__type``;
# boto3 shows it as ``QueryErrorCode`` and takes ``Code`` from x-amzn-query-error as usual).
JSON_TYPES: dict[str, str] = {
    "InvalidParameterValue": "InvalidParameterValueException",
    "MissingParameter": "MissingRequiredParameterException",
}

# AWS's default message per error name, for an error raised without a message of its own.
DEFAULT_MESSAGES: dict[str, str] = {
    "QueueDoesNotExist": 'The specified queue does not exist.',
    "QueueNameExists": 'A queue already exists with the same name and a different value for attribute(s)',
    "QueueDeletedRecently": 'You must wait 60 seconds after deleting a queue before you can create another with the same name.',
    "PurgeQueueInProgress": 'Only one PurgeQueue operation on the queue is allowed every 60 seconds.',
    "MessageNotInflight": "The message referred to isn't in flight.",
    "ReceiptHandleIsInvalid": 'The input receipt handle is invalid.',
    "InvalidIdFormat": "The specified receipt handle isn't valid for the current version.",
    "TooManyEntriesInBatchRequest": 'Maximum number of entries per request are 10.',
    "EmptyBatchRequest": 'There should be at least one SendMessageBatchRequestEntry in the request.',
    "BatchEntryIdsNotDistinct": 'Two or more batch entries in the request have the same Id.',
    "BatchRequestTooLong": 'Batch requests cannot be longer than 1048576 bytes.',
    "InvalidBatchEntryId": 'A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.',
    "UnsupportedOperation": 'Error code 400. Unsupported operation.',
    "InvalidAttributeName": 'Unknown Attribute.',
    "InvalidAttributeValue": 'Invalid value for the parameter.',
    "InvalidMessageContents": 'The message contains characters outside the allowed set.',
    "OverLimit": 'The specified action violates a limit.',
    "RequestThrottled": 'The request was denied due to request throttling.',
    "ResourceNotFoundException": "One or more specified resources don't exist.",
    "InvalidAddress": 'The specified ID is invalid.',
    "InvalidSecurity": 'The request was not made over HTTPS or did not use SigV4 for signing.',
    "InvalidParameterValue": 'An invalid or out-of-range value was supplied for the input parameter.',
    "MissingParameter": 'A required parameter for the specified action is not supplied.',
    "InvalidAction": 'The action or operation requested is invalid.',
    "InvalidQueryParameter": 'The AWS query string is malformed or does not adhere to AWS standards.',
    "MalformedQueryString": 'The query string contains a syntax error.',
    "ValidationError": 'The input fails to satisfy the constraints specified by an AWS service.',
    "SerializationException": 'The request body could not be parsed.',
    "InvalidClientTokenId": 'The security token included in the request is invalid.',
    "SignatureDoesNotMatch": 'The request signature we calculated does not match the signature you provided.',
    "IncompleteSignature": 'The request signature does not conform to AWS standards.',
    "MissingAuthenticationToken": 'Request is missing Authentication Token',
    "RequestExpired": 'Request has expired.',
    "AuthorizationQueryParametersError": 'Invalid query authorization parameters.',
    "AccessDenied": 'Access to the resource is denied.',
    "ServiceUnavailable": 'The request has failed due to a temporary failure of the server.',
    "InternalFailure": 'The request processing has failed because of an unknown error, exception or failure.',
    "RequestEntityTooLarge": 'The request body is too large.',
}


def _queue_errors() -> dict[str, tuple[str, int, str]]:
    """code -> (query code, HTTP status, fault) of every vqs.errors.QueueError class naming its own code."""
    out = {}
    stack = list(E.QueueError.__subclasses__())
    while stack:
        k = stack.pop()
        stack.extend(k.__subclasses__())
        if "code" in vars(k):
            out[k.code] = (k.query_code, k.http_status, "Sender" if k.sender_fault else "Receiver")
    return out


QUEUE_ERRORS: dict[str, tuple[str, int, str]] = _queue_errors()

class SQSError(Exception):
    def __init__(self, name: str, message: str | None = None, *, status: int | None = None,
                 query_code: str | None = None, fault: str | None = None):
        default_query_code, default_status, default_fault = (
            QUEUE_ERRORS.get(name) or FRONT_ERRORS.get(name) or (name, 400, "Sender"))
        self.name = name
        self.query_code = query_code or default_query_code
        self.status = status or default_status
        self.fault = fault or default_fault
        self.message = message or DEFAULT_MESSAGES.get(name, name)
        super().__init__(self.message)

    @property
    def json_type(self) -> str:
        return "com.amazonaws.sqs#" + JSON_TYPES.get(self.name, self.name)

    @property
    def query_error_header(self) -> str:
        return f"{self.query_code};{self.fault}"


def from_queue_error(e: E.QueueError) -> SQSError:
    """An embedded queue error as SQS reports it (its class's identity, its own message)."""
    return SQSError(e.code, str(e), status=e.http_status, query_code=e.query_code,
                    fault="Sender" if e.sender_fault else "Receiver")
