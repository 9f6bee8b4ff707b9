"""Checking a log's settings, and changing those a topic may alter while open
(``Log.reconfigure``: every value checked first, then set under the log's lock; one not
given takes ``open``'s default). Nothing written changes: the next batch, roll and retention
pass use the new values.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..record import codec_id
from .segments import index_capacity

ALTERABLE = ("segment_bytes", "segment_ms", "retention_ms", "retention_bytes", "compression")


def check_int(name: str, val, lo: int, *, optional: bool = False) -> None:
    """ConfigError unless ``val`` is an integer >= ``lo`` (or None, ``optional``)."""
    if (val is not None or not optional) and (not isinstance(val, int) or isinstance(val, bool) or val < lo):
        raise ConfigError(f"{name}={val!r}: must be {'None or ' if optional else ''}an integer >= {lo}")


def reconfigure(log, **settings) -> None:
    unknown = sorted(set(settings) - set(ALTERABLE))
    if unknown:
        raise ConfigError(f"{', '.join(unknown)}: not settings of an open log (those are {', '.join(ALTERABLE)})")
    defaults = type(log).open.__kwdefaults__
    new = {k: settings[k] if k in settings else defaults[k] for k in ALTERABLE}
    codec = codec_id(new["compression"])  # (ConfigError for an unknown one)
    size = new["segment_bytes"]
    check_int("segment_bytes", size, 128)
    for name in ("segment_ms", "retention_ms", "retention_bytes"):
        check_int(name, new[name], 0, optional=True)
    with log._lock:
        log._buf.codec = codec
        for name, val in new.items():
            setattr(log, name, val)
        log._segs.index_capacity_bytes = index_capacity(size, log.index_interval_bytes)
