"""The VQS error hierarchy: every error VQS raises on purpose derives from VQSError.

Messages name the file, offset or setting involved, so a user can act on them.
"""

from __future__ import annotations


class VQSError(Exception):
    """Root of every error VQS raises on purpose."""


class ConfigError(VQSError, ValueError):
    """A setting or argument has a value VQS cannot use (the message names it)."""


class LogLockedError(VQSError):
    """Another process (or another open Log in this one) owns the directory."""

    def __init__(self, path: str, holder_pid: int | None):
        self.path = path
        self.holder_pid = holder_pid
        who = f"pid {holder_pid}" if holder_pid else "another process"
        super().__init__(
            f"{path} is locked by {who}; one process owns a data directory "
            "(open it with readonly=True, or go through the VQS server)"
        )


class LogClosedError(VQSError):
    """The log (or broker, queue) was closed."""


class ReadOnlyError(VQSError):
    """A write was attempted on a log opened with readonly=True."""


class OffsetOutOfRange(VQSError):
    """The requested offset is below the log start offset (deleted by retention)
    or above the log end offset."""

    def __init__(self, message: str, *, offset: int, start_offset: int, end_offset: int):
        self.offset = offset
        self.start_offset = start_offset
        self.end_offset = end_offset
        super().__init__(message)


class CorruptRecordError(VQSError):
    """A record batch failed validation (CRC, bounds or structure)."""

    def __init__(self, message: str, *, path: str | None = None, position: int | None = None):
        self.path = path
        self.position = position
        super().__init__(message)


class MessageTooLarge(VQSError, ValueError):
    """A message or batch exceeds the configured size limit."""


class InvalidName(VQSError, ValueError):
    """A topic, queue or group name is not allowed."""


class TopicDoesNotExist(VQSError):
    """The named topic is not in the broker's catalog."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"topic {name!r} does not exist (create it with create_topic)")


class TopicAlreadyExists(VQSError):
    """create_topic was given the name of an existing topic."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"topic {name!r} already exists")
