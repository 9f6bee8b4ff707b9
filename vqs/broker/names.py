"""Names of topics, queues and consumer groups.

A name is 1-200 characters from ``[A-Za-z0-9._-]`` and is neither ``.`` nor
``..``, so it can never escape the data directory when used as a path part.
A name starting with ``__`` is *internal* (e.g. the Spark sink's
``__spark_stage.{queryId}``): a topic like any other, left out of listings
meant for people (``vqs topic list``, REST ``GET /topics``) unless asked for.

A consumer group's id is wider, as Kafka's: any non-empty string (e.g.
``roundrobin,range``). Its directory under DATA/groups is the id itself when
the id is a name as above, else the id's UTF-8 bytes with every byte outside
``[A-Za-z0-9._-]`` written ``%XX`` (``group_dir_name``): a directory name
holding ``%`` is always an encoded one and a plain name never is, so the map
is one-to-one and its inverse (``group_from_dir``) is unambiguous. An id whose
directory name would pass ``MAX_GROUP_DIR`` bytes (what a file system takes
as one name) is refused before it costs anything.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from ..errors import InvalidName, shown

_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
MAX_GROUP_DIR = 255  # bytes of a group's directory name (one file-system name)


def validate_name(name: object, kind: str = "name") -> str:
    """Return ``name`` if it is a valid topic/queue/group name, else raise InvalidName."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidName(
            f"invalid {kind} {shown(name, 210)}: use 1-200 characters from [A-Za-z0-9._-], not '.' or '..'"
        )
    return name


def is_internal(name: str) -> bool:
    """True for an internal name (``__`` prefix): hidden from listings by default."""
    return name.startswith("__")


def group_dir_name(group: str) -> str:
    """The directory name of a (valid) group id under DATA/groups (module doc)."""
    if _NAME.fullmatch(group) and group not in (".", ".."):
        return group
    keep = _SAFE if group not in (".", "..") else _SAFE - {ord(".")}
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in group.encode("utf-8", "surrogatepass"))


def group_from_dir(entry: str) -> str:
    """The group id a directory name under DATA/groups stands for (inverse of ``group_dir_name``)."""
    return unquote(entry, errors="surrogatepass") if "%" in entry else entry


def validate_group(group: object) -> str:
    """Return ``group`` if it is a valid consumer group id (module doc), else raise InvalidName."""
    if not isinstance(group, str) or not group:
        raise InvalidName("invalid group id: it must be a non-empty string")
    if len(group) > MAX_GROUP_DIR or len(group_dir_name(group)) > MAX_GROUP_DIR:
        raise InvalidName(f"invalid group id {group[:40]!r}...: too long (its stored name would pass "
                          f"{MAX_GROUP_DIR} bytes)")
    return group
