"""Names of topics, queues and consumer groups.

A name is 1-200 characters from ``[A-Za-z0-9._-]`` and is neither ``.`` nor
``..``, so it can never escape the data directory when used as a path part.
A name starting with ``__`` is *internal* (e.g. the Spark sink's
``__spark_stage.{queryId}``): a topic like any other, left out of listings
meant for people (``vqs topic list``, REST ``GET /topics``) unless asked for.
"""

from __future__ import annotations

import re

from ..errors import InvalidName

_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")


def validate_name(name: object, kind: str = "name") -> str:
    """Return ``name`` if it is a valid topic/queue/group name, else raise InvalidName."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidName(
            f"invalid {kind} {name!r}: use 1-200 characters from [A-Za-z0-9._-], not '.' or '..'"
        )
    return name


def is_internal(name: str) -> bool:
    """True for an internal name (``__`` prefix): hidden from listings by default."""
    return name.startswith("__")
