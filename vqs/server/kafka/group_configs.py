"""A group id's configs over Kafka: a GROUP resource of DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (configs.py dispatches by resource type). Kafka 4's group configs by
their names: a consumer-protocol group's ``consumer.*`` and a share group's ``share.*`` and
dead-letter ones, kept and checked by ``Broker.alter_group_configs`` (vqs.broker.group_configs)
and described over the server's settings.
"""

from __future__ import annotations

from ... import errors as E
from ...broker.names import validate_group
from . import errors as K
from . import share_groups
from .consumer_protocol import consumer_groups

# ConfigType and ConfigSource values (configs.py's, Kafka's)
BOOLEAN, STRING, INT = 1, 2, 3
STATIC_BROKER_CONFIG = 4
SET, DELETE = 0, 1


GROUP_RESOURCE = 32  # Kafka's ConfigResource type GROUP
_GROUP_CONFIG = 8  # Kafka's ConfigSource for a group's own
#: every group config (Kafka 4.x's GroupConfig, and KIP-1191's dead-letter ones): its type and
#: where the broker's value comes from (a ShareSettings field, a ConsumerGroups attribute, or a
#: fixed value)
_GROUP_CONFIGS = {
    "consumer.session.timeout.ms": (INT, "consumer", "session_timeout_ms"),
    "consumer.heartbeat.interval.ms": (INT, "consumer", "heartbeat_interval_ms"),
    "share.auto.offset.reset": (STRING, "share", "auto_offset_reset"),
    "share.record.lock.duration.ms": (INT, "share", "record_lock_ms"),
    "share.delivery.count.limit": (INT, "share", "delivery_limit"),
    "share.session.timeout.ms": (INT, "share", "session_timeout_ms"),
    "share.heartbeat.interval.ms": (INT, "share", "heartbeat_interval_ms"),
    "share.isolation.level": (STRING, None, "read_uncommitted"),  # (no transactions: both read the same)
    "errors.deadletterqueue.topic.name": (STRING, "share", "dlq_topic"),
    "errors.deadletterqueue.copy.record.enable": (BOOLEAN, "share", "dlq_copy_record"),
}


def describe_group_configs(ctx, group: str) -> dict[str, tuple[str, int, int]]:
    """A GROUP resource of DescribeConfigs: every group config with the value in force for
    ``group``, {key: (value, source, type)}: the group's own (source GROUP_CONFIG), else the
    server's (STATIC_BROKER_CONFIG). InvalidName for a bad group id."""
    validate_group(group)
    own = ctx.broker.group_configs.own(group)
    bases = {"consumer": consumer_groups(ctx), "share": share_groups.shares(ctx).settings}
    out = {}
    for key, (ctype, kind, attr) in _GROUP_CONFIGS.items():
        if key in own:
            out[key] = (own[key], _GROUP_CONFIG, ctype)
            continue
        value = attr if kind is None else getattr(bases[kind], attr)
        out[key] = (str(value).lower() if isinstance(value, bool) else str(value), STATIC_BROKER_CONFIG, ctype)
    return out


def alter_group_configs(ctx, group: str, configs: list, incremental: bool, validate_only: bool
                        ) -> tuple[int, str | None]:
    """A GROUP resource of AlterConfigs / IncrementalAlterConfigs: ``configs`` is [(key, op,
    value)] (op SET or DELETE; AlterConfigs: SET, and every config not named goes back to the
    broker's). The configs become the group id's own (``Broker.alter_group_configs``), durable
    when answered. (error code, message)."""
    consumer_groups(ctx)  # (configured from the server's settings: the rules check against them)
    share_groups.shares(ctx)
    changes: dict = {}
    try:
        if not incremental:
            changes = dict.fromkeys(ctx.broker.group_configs.own(group))
        for key, op, value in configs:
            if op == SET and value is not None:
                changes[key] = value
            elif op == DELETE:
                changes[key] = None
            else:
                return K.INVALID_REQUEST, f"config operation {op} (value {value!r}) is not supported for {key}"
        ctx.broker.alter_group_configs(group, changes, validate_only=validate_only)
    except E.InvalidName as e:
        return K.INVALID_GROUP_ID, str(e)
    except E.ConfigError as e:
        return K.INVALID_CONFIG, str(e)
    return K.NONE, None
