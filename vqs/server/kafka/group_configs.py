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

# ConfigType and ConfigSource values (configs.py's, Kafka's)
BOOLEAN, STRING, INT = 1, 2, 3
STATIC_BROKER_CONFIG = 4
SET, DELETE = 0, 1


GROUP_RESOURCE = 32  # Kafka's ConfigResource type GROUP
_GROUP_CONFIG = 8  # Kafka's ConfigSource for a group's own
#: each group config's type (Kafka's ConfigType)
_TYPES = {"consumer.session.timeout.ms": INT, "consumer.heartbeat.interval.ms": INT,
          "share.record.lock.duration.ms": INT, "share.delivery.count.limit": INT, "share.session.timeout.ms": INT,
          "share.heartbeat.interval.ms": INT, "errors.deadletterqueue.copy.record.enable": BOOLEAN}


def describe_group_configs(ctx, group: str) -> dict[str, tuple[str, int, int]]:
    """A GROUP resource of DescribeConfigs: every group config with the value in force for
    ``group``, {key: (value, source, type)}: the group's own (source GROUP_CONFIG), else the
    server's (STATIC_BROKER_CONFIG). InvalidName for a bad group id."""
    return {k: (v, _GROUP_CONFIG if own else STATIC_BROKER_CONFIG, _TYPES.get(k, STRING))
            for k, (v, own) in ctx.broker.group_config_values(group).items()}


def alter_group_configs(ctx, group: str, configs: list, incremental: bool, validate_only: bool
                        ) -> tuple[int, str | None]:
    """A GROUP resource of AlterConfigs / IncrementalAlterConfigs: ``configs`` is [(key, op,
    value)] (op SET or DELETE; AlterConfigs: SET, and every config not named goes back to the
    broker's). The configs become the group id's own (``Broker.alter_group_configs``), durable
    when answered. (error code, message)."""
    changes: dict = {}
    try:
        validate_group(group)
    except E.InvalidName as e:
        return K.INVALID_GROUP_ID, str(e)
    try:
        for key, op, value in configs:
            if op == SET and value is not None:
                changes[key] = value
            elif op == DELETE:
                changes[key] = None
            else:
                return K.INVALID_REQUEST, (f"config operation {op} (value {E.shown(value)}) is not supported "
                                           f"for {E.shown(key)}")
        ctx.broker.alter_group_configs(group, changes, replace=not incremental, validate_only=validate_only)
    except E.ConfigError as e:
        return K.INVALID_CONFIG, str(e)
    return K.NONE, None
