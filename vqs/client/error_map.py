"""The server's error answers, as the embedded API's exceptions (``vqs.Client``).

Guarantees: an error the embedded API has a class for arrives as that class:
the answer's ``type`` (the embedded error's precise name, e.g.
``ReceiptHandleExpired`` where the code says only ``invalid_parameter_value``)
names it; an answer without one (an older server) is mapped from its code and
``sqs_code`` as before. ``OffsetOutOfRange`` keeps its offsets. Any other
refusal is ``RemoteError`` with the HTTP status, the server's stable ``code``
and the offending ``field``. Every exception is a ``vqs.errors.VQSError``, and
its message is the server's; constructor arguments the answer does not carry
(a topic's or queue's ``name``, a receipt ``handle``) are None.
"""

from __future__ import annotations

import inspect

from .. import errors as E


def _bare(cls: type, msg: str) -> Exception:
    """An instance of ``cls`` with the server's message, without the class's own
    constructor (whose arguments, e.g. a queue name, the answer does not carry: None)."""
    ex = cls.__new__(cls)
    E.VQSError.__init__(ex, msg)
    init = cls.__init__
    if inspect.isfunction(init):  # a constructor of vqs.errors, not the builtin one
        for p in list(inspect.signature(init).parameters)[1:]:
            if p != "message":
                setattr(ex, p, None)
    return ex


def _named(name) -> type | None:
    """The class of ``vqs.errors`` the server named, if it is one of the embedded API's errors."""
    cls = getattr(E, name, None) if isinstance(name, str) else None
    if isinstance(cls, type) and issubclass(cls, E.VQSError) and cls is not E.RemoteError:
        return cls
    return None


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
    cls = _named(err.get("type"))
    if cls is not None and cls is not E.OffsetOutOfRange:
        return _bare(cls, msg)
    if code in ("topic_not_found", "queue_not_found", "topic_exists"):
        cls = {"topic_not_found": E.TopicDoesNotExist, "queue_not_found": E.QueueDoesNotExist,
               "topic_exists": E.TopicAlreadyExists}[code]
        return _bare(cls, msg)
    if code == "offset_out_of_range":
        extra = err.get("detail") or {}
        return E.OffsetOutOfRange(msg, offset=extra.get("offset", -1), start_offset=extra.get("start_offset", -1),
                                  end_offset=extra.get("end_offset", -1))
    if code == "invalid_name":
        return E.InvalidName(msg)
    if code == "message_too_large":
        return E.MessageTooLarge(msg)
    cls = getattr(E, err.get("sqs_code") or "", None)  # an older server named a queue error's class here
    if isinstance(cls, type) and issubclass(cls, E.QueueError):
        return _bare(cls, msg)
    return E.RemoteError(msg, status=r.status_code, code=code, field=field)


def from_failed_entry(f: dict) -> Exception:
    """The exception for one ``failed`` entry of a delete answer (``{"code", "message"}``,
    and ``type`` when the server knows the precise error)."""
    cls = _named(f.get("type")) or _named(f.get("code"))
    if cls is not None:
        return _bare(cls, f.get("message", ""))
    return E.RemoteError(f.get("message", ""), status=400, code=f.get("code", "failed"))
