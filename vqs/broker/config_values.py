"""Kafka config values as text (group configs, share settings): parsed by one rule for every
front, so a value is taken or refused alike over Kafka, HTTP, gRPC and the library."""

from __future__ import annotations

from ..errors import ConfigError, shown


def config_int(key: str, value: str, lo: int, hi: int) -> int:
    """The integer config ``key`` = ``value``: ASCII digits alone (blanks around them allowed,
    as Kafka trims), in ``lo..hi``; ConfigError naming it."""
    text = (value or "").strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 20 and lo <= int(text) <= hi):
        raise ConfigError(f"config {key}={shown(value)} must be an integer in {lo}..{hi}")
    return int(text)
