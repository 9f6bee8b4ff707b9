"""Names of topics, queues and consumer groups.

A name is 1-200 characters from ``[A-Za-z0-9._-]`` and is neither ``.`` nor
``..``, so it can never escape the data directory when used as a path part.
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
