"""SQS errors as AWS reports them.

An error has the JSON protocol's shape name (``__type`` =
``com.amazonaws.sqs#<Name>``), the query protocol's code (``x-amzn-query-error``
header = ``<QueryCode>;<Sender|Receiver>``, and ``<Code>`` in the XML), an
HTTP status and AWS's message.
"""

from __future__ import annotations

# name -> (query code, http status, fault, default message)
ERRORS: dict[str, tuple[str, int, str, str]] = {
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", 400, "Sender",
                          "The specified queue does not exist."),
    "QueueNameExists": ("QueueAlreadyExists", 400, "Sender",
                        "A queue already exists with the same name and a different value for attribute(s)"),
    "QueueDeletedRecently": ("AWS.SimpleQueueService.QueueDeletedRecently", 400, "Sender",
                             "You must wait 60 seconds after deleting a queue before you can create another with the same name."),
    "PurgeQueueInProgress": ("AWS.SimpleQueueService.PurgeQueueInProgress", 403, "Sender",
                             "Only one PurgeQueue operation on the queue is allowed every 60 seconds."),
    "MessageNotInflight": ("AWS.SimpleQueueService.MessageNotInflight", 400, "Sender",
                           "The message referred to isn't in flight."),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid", 400, "Sender",
                               "The input receipt handle is invalid."),
    "InvalidIdFormat": ("InvalidIdFormat", 400, "Sender", "The specified receipt handle isn't valid for the current version."),
    "TooManyEntriesInBatchRequest": ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400, "Sender",
                                     "Maximum number of entries per request are 10."),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest", 400, "Sender",
                          "There should be at least one SendMessageBatchRequestEntry in the request."),
    "BatchEntryIdsNotDistinct": ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, "Sender",
                                 "Two or more batch entries in the request have the same Id."),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong", 400, "Sender",
                            "Batch requests cannot be longer than 1048576 bytes."),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId", 400, "Sender",
                            "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long."),
    "UnsupportedOperation": ("AWS.SimpleQueueService.UnsupportedOperation", 400, "Sender",
                             "Error code 400. Unsupported operation."),
    "InvalidAttributeName": ("InvalidAttributeName", 400, "Sender", "Unknown Attribute."),
    "InvalidAttributeValue": ("InvalidAttributeValue", 400, "Sender", "Invalid value for the parameter."),
    "InvalidMessageContents": ("InvalidMessageContents", 400, "Sender", "The message contains characters outside the allowed set."),
    "OverLimit": ("OverLimit", 403, "Sender", "The specified action violates a limit."),
    "RequestThrottled": ("RequestThrottled", 400, "Sender", "The request was denied due to request throttling."),
    "ResourceNotFoundException": ("ResourceNotFoundException", 404, "Sender", "One or more specified resources don't exist."),
    "InvalidAddress": ("InvalidAddress", 404, "Sender", "The specified ID is invalid."),
    "InvalidSecurity": ("InvalidSecurity", 403, "Sender", "The request was not made over HTTPS or did not use SigV4 for signing."),
    # common AWS errors (not modelled as SQS exceptions; boto3 raises ClientError with this code)
    "InvalidParameterValue": ("InvalidParameterValue", 400, "Sender", "An invalid or out-of-range value was supplied for the input parameter."),
    "MissingParameter": ("MissingParameter", 400, "Sender", "A required parameter for the specified action is not supplied."),
    "InvalidAction": ("InvalidAction", 400, "Sender", "The action or operation requested is invalid."),
    "InvalidQueryParameter": ("InvalidQueryParameter", 400, "Sender", "The AWS query string is malformed or does not adhere to AWS standards."),
    "MalformedQueryString": ("MalformedQueryString", 404, "Sender", "The query string contains a syntax error."),
    "ValidationError": ("ValidationError", 400, "Sender", "The input fails to satisfy the constraints specified by an AWS service."),
    "SerializationException": ("SerializationException", 400, "Sender", "The request body could not be parsed."),
    "InvalidClientTokenId": ("InvalidClientTokenId", 403, "Sender", "The security token included in the request is invalid."),
    "SignatureDoesNotMatch": ("SignatureDoesNotMatch", 403, "Sender", "The request signature we calculated does not match the signature you provided."),
    "IncompleteSignature": ("IncompleteSignature", 400, "Sender", "The request signature does not conform to AWS standards."),
    "MissingAuthenticationToken": ("MissingAuthenticationToken", 403, "Sender", "Request is missing Authentication Token"),
    "RequestExpired": ("RequestExpired", 400, "Sender", "Request has expired."),
    "AuthorizationQueryParametersError": ("AuthorizationQueryParametersError", 400, "Sender", "Invalid query authorization parameters."),
    "AccessDenied": ("AccessDenied", 403, "Sender", "Access to the resource is denied."),
    "ServiceUnavailable": ("ServiceUnavailable", 503, "Server", "The request has failed due to a temporary failure of the server."),
    "InternalFailure": ("InternalFailure", 500, "Receiver", "The request processing has failed because of an unknown error, exception or failure."),
    "RequestEntityTooLarge": ("RequestEntityTooLarge", 413, "Sender", "The request body is too large."),
}


class SQSError(Exception):
    def __init__(self, name: str, message: str | None = None, *, status: int | None = None,
                 query_code: str | None = None, fault: str | None = None):
        default_query_code, default_status, default_fault, default_message = ERRORS.get(
            name, (name, 400, "Sender", name)
        )
        self.name = name
        self.query_code = query_code or default_query_code
        self.status = status or default_status
        self.fault = fault or default_fault
        self.message = message or default_message
        super().__init__(self.message)

    @property
    def json_type(self) -> str:
        return "com.amazonaws.sqs#" + self.name

    @property
    def query_error_header(self) -> str:
        return f"{self.query_code};{self.fault}"


def from_queue_error(e) -> SQSError:
    """An embedded queue error (vqs.errors.QueueError: code, query_code, http_status) as SQS's."""
    return SQSError(e.code, str(e), status=getattr(e, "http_status", None) or None,
                    query_code=getattr(e, "query_code", None),
                    fault="Sender" if getattr(e, "sender_fault", True) else "Receiver")
