"""Checking a log's settings, and changing those a topic may alter while open
(``Log.reconfigure``: every value checked first, then set under the log's lock; one not
given takes ``open``'s default). Nothing written changes: the next batch, roll and retention
pass use the new values.

A change of ``flush`` or ``flush_interval_ms`` keeps every promise already made (crash
reasoning): the buffer is written under the old policy first (so a full disk under a new
``always``, which drops its buffer, never drops a record acknowledged under ``interval`` or
``never``; under those, a full disk refuses the flush change and keeps the old policy, the
other settings being already in force: the same call again completes it), then the policy
changes, then everything written so far is fsynced (what ``interval`` promised within its
interval, ``always`` before its appends return, is on disk whatever the new policy).
Appends after the switch keep the new policy; an ``always`` appender that joined a group
commit before it is fsynced by that group. The log's flusher job is replaced (the old one
retires at its next tick), so the new interval holds from now.
"""

from __future__ import annotations

from ..errors import ConfigError, DiskFullError, shown
from ..record import codec_id
from .segments import index_capacity

FLUSH_POLICIES = ("always", "interval", "never")
ALTERABLE = ("segment_bytes", "segment_ms", "retention_ms", "retention_bytes", "compression", "flush",
             "flush_interval_ms")


#: the largest value of any integer setting: a signed 64-bit integer (Kafka's long), so that
#: every count, size and time taken fits what the fronts and the files carry
LONG_MAX = (1 << 63) - 1


def check_int(name: str, val, lo: int, *, optional: bool = False, hi: int = LONG_MAX) -> None:
    """ConfigError unless ``val`` is an integer in ``lo..hi`` (or None, ``optional``)."""
    if (val is not None or not optional) and (not isinstance(val, int) or isinstance(val, bool)
                                              or not lo <= val <= hi):
        raise ConfigError(f"{name}={shown(val)}: must be {'None or ' if optional else ''}an integer "
                          f"in {lo}..{hi}")


def reconfigure(log, **settings) -> None:
    unknown = sorted(set(settings) - set(ALTERABLE))
    if unknown:
        raise ConfigError(f"{', '.join(unknown)}: not settings of an open log (those are {', '.join(ALTERABLE)})")
    defaults = type(log).open.__kwdefaults__
    new = {k: settings[k] if k in settings else defaults[k] for k in ALTERABLE}
    check_settings(new)  # (Log.open's rules, every value before anything changes)
    codec = codec_id(new["compression"])
    size = new["segment_bytes"]
    flush, interval = new.pop("flush"), new.pop("flush_interval_ms")
    with log._lock:
        log._buf.codec = codec
        for name, val in new.items():
            setattr(log, name, val)
        log._segs.index_capacity_bytes = index_capacity(size, log.index_interval_bytes)
        if (flush, interval) != (log.flush_policy, log.flush_interval_ms):
            _set_flush_locked(log, flush, interval)  # last: the one step that can fail (disk full)


RECOVERY_POLICIES = ("fail", "skip", "truncate")
#: Log.open's integer settings: name -> (least value, None allowed)
_INTS = {"segment_bytes": (128, False), "index_interval_bytes": (0, False), "batch_max_records": (1, False),
         "batch_max_bytes": (1, False), "checkpoint_interval_ms": (1, False), "flush_interval_ms": (1, False),
         "segment_ms": (0, True), "retention_ms": (0, True), "retention_bytes": (0, True),
         "min_free_bytes": (0, True)}


def check_settings(settings: dict) -> None:
    """ConfigError naming the first of ``settings`` (Log.open's keywords, any subset) whose
    value Log.open would refuse: an owner that holds them as defaults (a Broker) checks them
    when it is made, not at its first topic."""
    if "flush" in settings and settings["flush"] not in FLUSH_POLICIES:
        raise ConfigError(f"flush={shown(settings['flush'])}: must be one of {', '.join(FLUSH_POLICIES)}")
    if "recovery" in settings and settings["recovery"] not in RECOVERY_POLICIES:
        raise ConfigError(f"recovery={shown(settings['recovery'])}: must be one of {', '.join(RECOVERY_POLICIES)}")
    if "compression" in settings:
        codec_id(settings["compression"])  # (ConfigError for an unknown one)
    for name, (lo, optional) in _INTS.items():
        if name in settings:
            check_int(name, settings[name], lo, optional=optional)


def _set_flush_locked(log, flush: str, interval: int) -> None:
    """The module doc's flush change, under the log's lock (released during the fsync)."""
    if log.readonly or log._closed or log._failed is not None:
        log.flush_policy, log.flush_interval_ms, log._flush_always = flush, interval, flush == "always"
        return
    try:
        log._write_buffer_locked()  # under the old policy
    except DiskFullError:
        if not log._flush_always:
            raise  # (interval, never: the buffer keeps what was acknowledged; nothing changed)
        # always: the write dropped the buffer and its appenders raised; nothing is left that
        # any policy could lose, so the change goes on
    log.flush_policy, log.flush_interval_ms, log._flush_always = flush, interval, flush == "always"
    log._sync.flush_job = None  # the registered job retires at its next tick
    log._sync.wait_idle()
    log._sync.sync_log(log)
    log._flush_idle = False
    if flush != "never":
        log._sync.join_flusher(log)  # the new interval from now (it goes idle if nothing comes)
    log._unblock()
