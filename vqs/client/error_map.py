"""The server's error answers, as the embedded API's exceptions (``vqs.Client``).

Guarantees: an error the embedded API has a class for arrives as that class
(``TopicDoesNotExist``, ``QueueDoesNotExist``, ``OffsetOutOfRange`` with its
offsets, the queue errors); any other refusal is ``RemoteError`` with the HTTP
status, the server's stable ``code`` and the offending ``field``. Every
exception is a ``vqs.errors.VQSError``, and its message is the server's.
"""

from __future__ import annotations

from .. import errors as E


def _bare(cls: type, msg: str) -> Exception:
    """An instance of ``cls`` with the server's message, without the class's own
    constructor (whose arguments, e.g. a queue name, the answer does not carry)."""
    ex = cls.__new__(cls)
    E.VQSError.__init__(ex, msg)
    return ex


def from_response(r) -> Exception:
    """The exception for an error answer (an ``httpx.Response``)."""
    try:
        doc = r.json()
    except ValueError:  # not JSON (an empty body, a proxy's error page): keep the status and text
        doc = None
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(err, dict):
        err = {}
    code = err.get("code", f"http_{r.status_code}")
    msg = err.get("message") or r.text[:500] or f"HTTP {r.status_code}"
    field = err.get("field")
    if code in ("topic_not_found", "queue_not_found", "topic_exists"):
        cls = {"topic_not_found": E.TopicDoesNotExist, "queue_not_found": E.QueueDoesNotExist,
               "topic_exists": E.TopicAlreadyExists}[code]
        ex = _bare(cls, msg)
        ex.name = None
        return ex
    if code == "offset_out_of_range":
        extra = err.get("detail") or {}
        return E.OffsetOutOfRange(msg, offset=extra.get("offset", -1), start_offset=extra.get("start_offset", -1),
                                  end_offset=extra.get("end_offset", -1))
    if code == "invalid_name":
        return E.InvalidName(msg)
    if code == "message_too_large":
        return E.MessageTooLarge(msg)
    cls = getattr(E, err.get("sqs_code") or "", None)  # the server's name of a queue error's class
    if isinstance(cls, type) and issubclass(cls, E.QueueError):
        return _bare(cls, msg)
    return E.RemoteError(msg, status=r.status_code, code=code, field=field)


def from_failed_entry(f: dict) -> Exception:
    """The exception for one ``failed`` entry of a batch answer (``{"code", "message"}``)."""
    cls = getattr(E, f.get("code", ""), None)
    if isinstance(cls, type) and issubclass(cls, E.VQSError):
        return _bare(cls, f.get("message", ""))
    return E.RemoteError(f.get("message", ""), status=400, code=f.get("code", "failed"))
