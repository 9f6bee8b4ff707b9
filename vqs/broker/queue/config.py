"""A queue's configuration: SQS attributes, their limits, and VQS storage settings.

Attributes can be given by their Python names (``visibility_timeout=60``) or by
their SQS names with SQS's string values (``VisibilityTimeout="60"``), as the
SQS adapter receives them. Values outside SQS's limits raise
``InvalidAttributeValue``; unknown names raise ``InvalidAttributeName``.

===========================  =================================  ================  =========
Python name                  SQS name                           limits            default
===========================  =================================  ================  =========
visibility_timeout           VisibilityTimeout                  0..43200 s        30
delay_seconds                DelaySeconds                       0..900 s         0
receive_wait_seconds         ReceiveMessageWaitTimeSeconds      0..20 s           0
retention_seconds            MessageRetentionPeriod             60..1209600 s     345600
max_message_bytes            MaximumMessageSize                 1024..1048576     1048576
dead_letter_queue            RedrivePolicy.deadLetterTargetArn  a queue name      None
max_receive_count            RedrivePolicy.maxReceiveCount      1..1000           None
fifo                         FifoQueue                          creation only     False
content_based_deduplication  ContentBasedDeduplication          FIFO only         False
deduplication_scope          DeduplicationScope                 queue|messageGroup
fifo_throughput_limit        FifoThroughputLimit                perQueue|perMessageGroupId
redrive_allow_policy         RedriveAllowPolicy                 JSON              None
policy                       Policy                             JSON (stored)     None
kms_master_key_id            KmsMasterKeyId                     stored            None
kms_data_key_reuse_period_seconds  KmsDataKeyReusePeriodSeconds  60..86400      None
sqs_managed_sse_enabled      SqsManagedSseEnabled               stored            True
===========================  =================================  ================  =========

VQS settings (not SQS attributes): ``flush`` (``always`` | ``interval`` |
``never``, default ``interval``), ``flush_interval_ms`` (100), ``segment_bytes``
(the message log's segment size, 32 MiB), plus the Log settings ``segment_ms``,
``recovery``, ``compression``, ``index_interval_bytes``, ``batch_max_records``,
``batch_max_bytes``, ``min_free_bytes`` (None: the filesystem's default,
vqs.disk.space; 0: off; sends are refused with DiskFullError once the
filesystem has less free space; the state log, where receives and deletes go,
has a quarter of it as its floor).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace

from ...errors import ConfigError, InvalidAttributeName, InvalidAttributeValue

DEFAULT_ARN_PREFIX = "arn:aws:sqs:us-east-1:123456789012"

#: SQS name -> Python name, for the attributes that map one to one.
SQS_TO_PY = {
    "VisibilityTimeout": "visibility_timeout",
    "DelaySeconds": "delay_seconds",
    "ReceiveMessageWaitTimeSeconds": "receive_wait_seconds",
    "MessageRetentionPeriod": "retention_seconds",
    "MaximumMessageSize": "max_message_bytes",
    "FifoQueue": "fifo",
    "ContentBasedDeduplication": "content_based_deduplication",
    "DeduplicationScope": "deduplication_scope",
    "FifoThroughputLimit": "fifo_throughput_limit",
    "RedriveAllowPolicy": "redrive_allow_policy",
    "Policy": "policy",
    "KmsMasterKeyId": "kms_master_key_id",
    "KmsDataKeyReusePeriodSeconds": "kms_data_key_reuse_period_seconds",
    "SqsManagedSseEnabled": "sqs_managed_sse_enabled",
}
PY_TO_SQS = {v: k for k, v in SQS_TO_PY.items()}

#: Attributes GetQueueAttributes reports but nobody sets.
READ_ONLY_SQS = frozenset({
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
})

#: Storage settings a queue accepts (also via QueueRegistry defaults).
STORAGE_SETTINGS = frozenset({
    "flush", "flush_interval_ms", "segment_bytes", "segment_ms", "recovery",
    "compression", "index_interval_bytes", "batch_max_records", "batch_max_bytes",
    "min_free_bytes",
})
#: Log settings that make no sense for a queue (its retention is MessageRetentionPeriod);
#: accepted in registry defaults (the Broker passes its topic defaults) and ignored.
IGNORED_DEFAULTS = frozenset({"retention_ms", "retention_bytes"})

#: SQS's limits on the integer attributes, one table for every check of them
#: (a queue's configuration here; a request's overrides: validate.py)
MAX_VISIBILITY_S = 43200
MAX_DELAY_S = 900
MAX_WAIT_S = 20
#: Python name -> (SQS name, lowest, highest)
LIMITS = {
    "visibility_timeout": ("VisibilityTimeout", 0, MAX_VISIBILITY_S),
    "delay_seconds": ("DelaySeconds", 0, MAX_DELAY_S),
    "receive_wait_seconds": ("ReceiveMessageWaitTimeSeconds", 0, MAX_WAIT_S),
    "retention_seconds": ("MessageRetentionPeriod", 60, 1209600),
    "max_message_bytes": ("MaximumMessageSize", 1024, 1048576),
    "max_receive_count": ("RedrivePolicy.maxReceiveCount", 1, 1000),
    "kms_data_key_reuse_period_seconds": ("KmsDataKeyReusePeriodSeconds", 60, 86400),
}
_ALWAYS_SET = ("visibility_timeout", "delay_seconds", "receive_wait_seconds", "retention_seconds",
               "max_message_bytes")

MAX_TAGS = 50
_TAG_KEY_MAX = 128
_TAG_VALUE_MAX = 256


@dataclass
class QueueConfig:
    """The settings of one queue (see the module doc for names and limits)."""

    visibility_timeout: int = 30
    delay_seconds: int = 0
    receive_wait_seconds: int = 0
    retention_seconds: int = 345600
    max_message_bytes: int = 1048576
    dead_letter_queue: str | None = None
    max_receive_count: int | None = None
    fifo: bool = False
    content_based_deduplication: bool = False
    deduplication_scope: str = "queue"
    fifo_throughput_limit: str = "perQueue"
    redrive_allow_policy: dict | None = None
    policy: str | None = None
    kms_master_key_id: str | None = None
    kms_data_key_reuse_period_seconds: int | None = None
    sqs_managed_sse_enabled: bool = True  # SQS: new queues get SSE-SQS unless told otherwise
    tags: dict = field(default_factory=dict)
    # storage (VQS)
    flush: str = "interval"
    flush_interval_ms: int = 100
    segment_bytes: int = 32 << 20
    segment_ms: int | None = 7 * 86_400_000
    recovery: str = "fail"
    compression: str | None = None
    index_interval_bytes: int = 4096
    batch_max_records: int = 4096
    batch_max_bytes: int = 1 << 20
    min_free_bytes: int | None = None  # sends refused under this much free disk (None: the default, vqs/disk/space.py)

    # -------------------------------------------------------------- building

    def log_options(self) -> dict:
        """Keyword arguments for ``Log.open`` of the message log."""
        return {
            "segment_bytes": self.segment_bytes,
            "segment_ms": self.segment_ms,
            "flush": self.flush,
            "flush_interval_ms": self.flush_interval_ms,
            "recovery": self.recovery,
            "compression": self.compression,
            "index_interval_bytes": self.index_interval_bytes,
            "batch_max_records": self.batch_max_records,
            "batch_max_bytes": self.batch_max_bytes,
            "min_free_bytes": self.min_free_bytes,
        }

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, d: dict) -> QueueConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def updated(self, changes: dict) -> QueueConfig:
        """A copy with ``changes`` (already normalized Python names) applied and validated."""
        new = replace(self, **changes)
        new.validate()
        return new

    # ------------------------------------------------------------ validation

    def validate(self) -> None:
        for name in _ALWAYS_SET:
            _int_range(getattr(self, name), *LIMITS[name])
        if (self.dead_letter_queue is None) != (self.max_receive_count is None):
            raise InvalidAttributeValue(
                "Value for parameter RedrivePolicy is invalid. Reason: Redrive policy does "
                "not contain mandatory attribute: "
                + ("maxReceiveCount." if self.max_receive_count is None else "deadLetterTargetArn.")
            )
        if self.max_receive_count is not None:
            _int_range(self.max_receive_count, *LIMITS["max_receive_count"])
        if not self.fifo and self.content_based_deduplication:
            raise InvalidAttributeName("Unknown Attribute ContentBasedDeduplication.")
        if self.deduplication_scope not in ("queue", "messageGroup"):
            raise InvalidAttributeValue(
                f"Invalid value for the parameter DeduplicationScope: {self.deduplication_scope!r}"
            )
        if self.fifo_throughput_limit not in ("perQueue", "perMessageGroupId"):
            raise InvalidAttributeValue(
                f"Invalid value for the parameter FifoThroughputLimit: {self.fifo_throughput_limit!r}"
            )
        if self.fifo_throughput_limit == "perMessageGroupId" and self.deduplication_scope != "messageGroup":
            raise InvalidAttributeValue(
                "Invalid value for the parameter FifoThroughputLimit. Reason: "
                "perMessageGroupId requires DeduplicationScope messageGroup."
            )
        if self.kms_data_key_reuse_period_seconds is not None:
            _int_range(self.kms_data_key_reuse_period_seconds, *LIMITS["kms_data_key_reuse_period_seconds"])
        if self.redrive_allow_policy is not None:
            _check_redrive_allow(self.redrive_allow_policy)
        validate_tags(self.tags)
        if self.flush not in ("always", "interval", "never"):
            raise ConfigError(f"flush={self.flush!r}: must be one of always, interval, never")

    # ------------------------------------------------------------ SQS output

    def redrive_policy_json(self, arn_prefix: str = DEFAULT_ARN_PREFIX) -> str | None:
        if self.dead_letter_queue is None:
            return None
        return json.dumps(
            {"deadLetterTargetArn": f"{arn_prefix}:{self.dead_letter_queue}",
             "maxReceiveCount": self.max_receive_count},
            separators=(",", ":"),
        )

    def sqs_attributes(self, arn_prefix: str = DEFAULT_ARN_PREFIX) -> dict[str, str]:
        """The configuration attributes as SQS formats them (strings)."""
        out = {
            "VisibilityTimeout": str(self.visibility_timeout),
            "MaximumMessageSize": str(self.max_message_bytes),
            "MessageRetentionPeriod": str(self.retention_seconds),
            "DelaySeconds": str(self.delay_seconds),
            "ReceiveMessageWaitTimeSeconds": str(self.receive_wait_seconds),
            "SqsManagedSseEnabled": "true" if self.sqs_managed_sse_enabled else "false",
        }
        rp = self.redrive_policy_json(arn_prefix)
        if rp is not None:
            out["RedrivePolicy"] = rp
        if self.redrive_allow_policy is not None:
            out["RedriveAllowPolicy"] = json.dumps(self.redrive_allow_policy, separators=(",", ":"))
        if self.fifo:
            out["FifoQueue"] = "true"
            out["ContentBasedDeduplication"] = "true" if self.content_based_deduplication else "false"
            out["DeduplicationScope"] = self.deduplication_scope
            out["FifoThroughputLimit"] = self.fifo_throughput_limit
        if self.policy is not None:
            out["Policy"] = self.policy
        if self.kms_master_key_id is not None:
            out["KmsMasterKeyId"] = self.kms_master_key_id
            # SQS shows the reuse period only with a KMS key (default 300 s)
            rp = self.kms_data_key_reuse_period_seconds
            out["KmsDataKeyReusePeriodSeconds"] = str(300 if rp is None else rp)
        return out


# ------------------------------------------------------------------ parsing


def normalize(attrs: dict, *, creating: bool) -> dict:
    """Map Python- or SQS-named attributes to Python names with Python values.

    ``RedrivePolicy`` (JSON string or dict) becomes ``dead_letter_queue`` +
    ``max_receive_count``; an empty RedrivePolicy string removes the DLQ.
    Raises InvalidAttributeName / InvalidAttributeValue.
    """
    out: dict = {}
    py_names = {f.name for f in fields(QueueConfig)}
    if creating:
        _check_fifo_only(attrs)
    for key, val in attrs.items():
        if key == "RedrivePolicy" or key == "redrive_policy":
            out.update(parse_redrive_policy(val))
            continue
        if key in SQS_TO_PY:
            name = SQS_TO_PY[key]
            out[name] = _parse_sqs_value(key, name, val)
            continue
        if key in READ_ONLY_SQS:
            raise InvalidAttributeName(f"Unknown Attribute {key}. (read-only)")
        if key in py_names:
            out[key] = _check_py_value(key, val)
            continue
        raise InvalidAttributeName(f"Unknown Attribute {key}.")
    if not creating and "fifo" in out:
        raise InvalidAttributeName("Unknown Attribute FifoQueue.")  # SQS: set only when creating a queue
    return out


def _check_fifo_only(attrs: dict) -> None:
    """CreateQueue of a standard queue refuses the FIFO-only attributes, in
    SQS's words (a FifoQueue=false is refused too)."""
    fifo = attrs.get("FifoQueue", attrs.get("fifo"))
    if fifo is True or (isinstance(fifo, str) and fifo.lower() == "true"):
        return
    if fifo is False or (isinstance(fifo, str) and fifo.lower() == "false"):
        if "FifoQueue" in attrs:
            raise InvalidAttributeName("Unknown Attribute FifoQueue.")
    elif fifo is not None:
        return  # not a boolean: InvalidAttributeValue from the parse
    if "ContentBasedDeduplication" in attrs:
        raise InvalidAttributeName("Unknown Attribute ContentBasedDeduplication.")
    for key in ("DeduplicationScope", "FifoThroughputLimit"):
        if key in attrs:
            raise InvalidAttributeName(f"You can specify the {key} only when FifoQueue is set to true.")


def check_fifo_change(changes: dict, fifo: bool) -> None:
    """SetQueueAttributes: FifoQueue may be given only as the queue's type on a
    FIFO queue; a standard queue knows no FIFO attributes (SQS's errors)."""
    if fifo:
        if changes.get("fifo", True) is not True:
            raise InvalidAttributeValue(
                "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
            )
        return
    for name in ("fifo", "content_based_deduplication", "deduplication_scope", "fifo_throughput_limit"):
        if name in changes:
            raise InvalidAttributeName(f"Unknown Attribute {PY_TO_SQS[name]}.")


def parse_redrive_policy(val) -> dict:
    if val is None or val == "" or val == {}:
        return {"dead_letter_queue": None, "max_receive_count": None}
    if isinstance(val, str):
        try:
            val = json.loads(val)
        except ValueError:
            raise InvalidAttributeValue(
                "Value for parameter RedrivePolicy is invalid. Reason: Invalid JSON."
            ) from None
    if not isinstance(val, dict):
        raise InvalidAttributeValue("Value for parameter RedrivePolicy is invalid. Reason: not an object.")
    unknown = set(val) - {"deadLetterTargetArn", "maxReceiveCount"}
    if unknown:
        raise InvalidAttributeValue(
            f"Value for parameter RedrivePolicy is invalid. Reason: unknown field(s) {sorted(unknown)}."
        )
    arn = val.get("deadLetterTargetArn")
    mrc = val.get("maxReceiveCount")
    if arn is None or mrc is None:
        raise InvalidAttributeValue(
            "Value for parameter RedrivePolicy is invalid. Reason: Redrive policy does not "
            "contain mandatory attribute: "
            + ("deadLetterTargetArn." if arn is None else "maxReceiveCount.")
        )
    try:
        mrc = int(mrc)
    except (TypeError, ValueError):
        raise InvalidAttributeValue(
            f"Value {mrc!r} for parameter RedrivePolicy is invalid. Reason: maxReceiveCount must be an integer."
        ) from None
    return {"dead_letter_queue": queue_name_from_arn(arn), "max_receive_count": mrc}


def queue_name_from_arn(arn: object) -> str:
    """``arn:aws:sqs:region:account:name`` (or a bare name or queue URL) -> name."""
    if not isinstance(arn, str) or not arn:
        raise InvalidAttributeValue(f"Value {arn!r} for parameter deadLetterTargetArn is invalid.")
    name = arn.rsplit(":", 1)[-1] if arn.startswith("arn:") else arn.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        raise InvalidAttributeValue(f"Value {arn!r} for parameter deadLetterTargetArn is invalid.")
    return name


_BOOL = {"true": True, "false": False}


def _parse_sqs_value(key: str, name: str, val):
    if name in ("fifo", "content_based_deduplication", "sqs_managed_sse_enabled"):
        if isinstance(val, bool):
            return val
        if isinstance(val, str) and val.lower() in _BOOL:
            return _BOOL[val.lower()]
        raise InvalidAttributeValue(f"Invalid value for the parameter {key}.")
    if name in ("visibility_timeout", "delay_seconds", "receive_wait_seconds",
                "retention_seconds", "max_message_bytes", "kms_data_key_reuse_period_seconds"):
        if isinstance(val, bool):
            raise InvalidAttributeValue(f"Invalid value for the parameter {key}.")
        if isinstance(val, int):
            return val
        if isinstance(val, str) and re.fullmatch(r"[+-]?\d{1,12}", val.strip()):
            return int(val)
        raise InvalidAttributeValue(f"Invalid value for the parameter {key}.")
    if name == "redrive_allow_policy":
        if isinstance(val, str):
            if val == "":
                return None
            try:
                val = json.loads(val)
            except ValueError:
                raise InvalidAttributeValue(
                    "Value for parameter RedriveAllowPolicy is invalid. Reason: Invalid JSON."
                ) from None
        return val
    if val is None:
        return None
    if not isinstance(val, str):
        raise InvalidAttributeValue(f"Invalid value for the parameter {key}.")
    if val == "" and name in ("policy", "kms_master_key_id"):
        return None  # SQS: an empty value removes the attribute
    return val


def _check_py_value(name: str, val):
    if name in ("fifo", "content_based_deduplication", "sqs_managed_sse_enabled"):
        if not isinstance(val, bool):
            raise InvalidAttributeValue(f"{name} must be True or False, not {val!r}")
    elif name in _ALWAYS_SET:
        if not isinstance(val, int) or isinstance(val, bool):
            raise InvalidAttributeValue(f"Invalid value for the parameter {PY_TO_SQS[name]}: {val!r}")
    elif name == "tags":
        if not isinstance(val, dict):
            raise InvalidAttributeValue(f"tags must be a dict of str to str, not {type(val).__name__}")
        val = dict(val)
    elif name == "redrive_allow_policy" and isinstance(val, str):
        return _parse_sqs_value("RedriveAllowPolicy", name, val)
    return val


def _int_range(val, key: str, lo: int, hi: int) -> None:
    if not isinstance(val, int) or isinstance(val, bool) or not lo <= val <= hi:
        raise InvalidAttributeValue(
            f"Invalid value for the parameter {key}. Reason: must be an integer from {lo} to {hi}, not {val!r}."
        )


def _check_redrive_allow(p) -> None:
    if not isinstance(p, dict):
        raise InvalidAttributeValue("Value for parameter RedriveAllowPolicy is invalid.")
    perm = p.get("redrivePermission")
    if perm not in ("allowAll", "denyAll", "byQueue"):
        raise InvalidAttributeValue(
            "Value for parameter RedriveAllowPolicy is invalid. Reason: redrivePermission must "
            "be allowAll, denyAll or byQueue."
        )
    arns = p.get("sourceQueueArns")
    if perm == "byQueue":
        if not isinstance(arns, list) or not 1 <= len(arns) <= 10:
            raise InvalidAttributeValue(
                "Value for parameter RedriveAllowPolicy is invalid. Reason: byQueue needs "
                "1 to 10 sourceQueueArns."
            )
    elif arns:
        raise InvalidAttributeValue(
            "Value for parameter RedriveAllowPolicy is invalid. Reason: sourceQueueArns is "
            "only allowed with redrivePermission byQueue."
        )


def redrive_allows(policy: dict | None, source_name: str) -> bool:
    """Does a DLQ's RedriveAllowPolicy let ``source_name`` use it?"""
    if policy is None:
        return True
    perm = policy.get("redrivePermission")
    if perm == "allowAll":
        return True
    if perm == "denyAll":
        return False
    return source_name in {queue_name_from_arn(a) for a in policy.get("sourceQueueArns", ())}


def validate_tags(tags: dict, *, limit: int = MAX_TAGS) -> None:
    if not isinstance(tags, dict):
        raise InvalidAttributeValue("tags must be a dict of str to str")
    if len(tags) > limit:
        raise InvalidAttributeValue(f"Too many tags: at most {limit} per queue ({len(tags)}).")
    for k, v in tags.items():
        if not isinstance(k, str) or not 1 <= len(k) <= _TAG_KEY_MAX or "\0" in k:
            raise InvalidAttributeValue(f"Tag key {k!r} is invalid: 1-{_TAG_KEY_MAX} characters.")
        if not isinstance(v, str) or len(v) > _TAG_VALUE_MAX or "\0" in v:
            raise InvalidAttributeValue(f"Tag value for {k!r} is invalid: 0-{_TAG_VALUE_MAX} characters.")
