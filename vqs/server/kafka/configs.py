"""Configs over Kafka: DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), and
the topic configs CreateTopics takes.

A topic config is a Kafka name for one of the broker's topic settings (``TOPIC_CONFIGS``): it is
parsed to the setting's value here, and stored, validated and put in force by the broker
(``Broker.create_topic`` / ``Broker.alter_topic``: topic.json replaced atomically, then every
open partition reconfigured), so a value altered over Kafka is the one REST, gRPC and the
client apply from their next request. A name not in the table is INVALID_CONFIG, as Kafka
answers a name it does not know: a client never believes a setting took effect that did not.
The broker's own configs are the server's settings: described read-only, never altered
(INVALID_REQUEST, as Kafka answers a broker config it cannot update dynamically). A group
id's configs (a GROUP resource) are group_configs.py's.

Each resource is answered on its own (one bad resource fails only itself); ``validate_only``
checks everything an alteration would check and changes nothing. Every array count is checked
against the bytes left before anything is allocated (``Reader``); flexible versions
(DescribeConfigs v4, AlterConfigs v2, IncrementalAlterConfigs v1) read and write compact
fields through ``codec.Flex``.
"""

from __future__ import annotations

from typing import NamedTuple

from ... import errors as E
from ...broker.catalog import COMPRESSIONS
from . import acls as A
from . import errors as K
from .codec import Flex, Writer
from .group_configs import GROUP_RESOURCE, alter_group_configs, describe_group_configs
from .oauthbearer import is_endpoint
from .scram import mechanisms_offered

TOPIC, BROKER = 2, 4  # Kafka's ConfigResource types answered here
# ConfigSource (DescribeConfigs v1+)
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigType (DescribeConfigs v3+)
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
LONG_MAX = (1 << 63) - 1  # Kafka's "no bound" for segment.ms and max.compaction.lag.ms
MAX_VALUE_CHARS = 1_000  # a config value's characters at most (refused, never echoed, past it)
# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class _BadRequest(Exception):
    """An alteration Kafka refuses as INVALID_REQUEST (not a config value: the request's form)."""


class _Config(NamedTuple):
    setting: str         # the broker's topic setting it sets
    type: int
    broker: str          # the broker config it falls back on (its synonym)
    doc: str


TOPIC_CONFIGS = {
    "retention.ms": _Config("retention_ms", LONG, "log.retention.ms",
                            "How long a segment is kept after its newest record, in ms (-1: unlimited)."),
    "retention.bytes": _Config("retention_bytes", LONG, "log.retention.bytes",
                               "The bytes a partition keeps before its oldest segments go (-1: unlimited)."),
    "segment.bytes": _Config("segment_bytes", INT, "log.segment.bytes", "The size of a segment file (>= 128)."),
    "compression.type": _Config("compression", STRING, "compression.type",
                                "How records are stored: producer/uncompressed (as is), zstd or lz4."),
    "max.message.bytes": _Config("max_message_bytes", INT, "message.max.bytes",
                                 "The largest record value the topic takes on every front."),
    "segment.ms": _Config("segment_ms", LONG, "log.roll.ms", "How long a segment is written before it rolls."),
    "cleanup.policy": _Config("cleanup_policy", LIST, "log.cleanup.policy",
                              "delete (old segments go), compact (the latest record per key is kept) or both."),
    "delete.retention.ms": _Config("delete_retention_ms", LONG, "log.cleaner.delete.retention.ms",
                                   "How long a compacted topic keeps a tombstone."),
    "min.compaction.lag.ms": _Config("min_compaction_lag_ms", LONG, "log.cleaner.min.compaction.lag.ms",
                                     "A record stays uncompacted at least this long."),
    "max.compaction.lag.ms": _Config("max_compaction_lag_ms", LONG, "log.cleaner.max.compaction.lag.ms",
                                     "A record is compacted within this long."),
    "min.cleanable.dirty.ratio": _Config("min_cleanable_dirty_ratio", DOUBLE, "log.cleaner.min.cleanable.ratio",
                                         "The share of a log not yet compacted that starts a cleaning."),
    "flush.messages": _Config("flush", LONG, "log.flush.interval.messages",
                              "1: every record is fsynced before it is acknowledged (flush=always); "
                              f"{LONG_MAX}: by time (flush.ms). No other count is taken."),
    "flush.ms": _Config("flush_interval_ms", LONG, "log.flush.interval.ms",
                        "How often the partitions are fsynced, in ms (flush=interval)."),
}
# Topic configs this broker takes with one value only, stores nothing for, and describes as that
# value: KIP-1191's opt-in of a topic as a share group's dead-letter topic (every topic may be one).
FIXED_TOPIC_CONFIGS = {"errors.deadletterqueue.group.enable": "true"}
_INT_MIN = {"retention.ms": -1, "retention.bytes": -1, "segment.bytes": 128, "max.message.bytes": 1, "segment.ms": 1,
            "delete.retention.ms": 0, "min.compaction.lag.ms": 0, "max.compaction.lag.ms": 1, "flush.messages": 1,
            "flush.ms": 1}
#: Kafka's compression.type values -> the topic's storage codec (the codecs keep their names)
_COMPRESSION = {"producer": None, "uncompressed": None, **{c: c for c in COMPRESSIONS if c}}


def parse(key: str, value: str | None):
    """The broker setting's value of topic config ``key`` = ``value`` (None: the default);
    ConfigError (INVALID_CONFIG) naming the config for an unknown name, a null, or a value Kafka
    or this broker refuses."""
    if value is not None and len(value) > MAX_VALUE_CHARS:  # (no config takes one this long: not echoed)
        raise E.ConfigError(f"config {key[:200]}: a value of {len(value)} characters (at most {MAX_VALUE_CHARS})")
    if key in FIXED_TOPIC_CONFIGS:
        if value is None or value.strip().lower() != FIXED_TOPIC_CONFIGS[key]:
            raise E.ConfigError(f"config {key}={value!r}: only {FIXED_TOPIC_CONFIGS[key]} (every topic may be "
                                "a share group's dead-letter topic here)")
        return None
    if key not in TOPIC_CONFIGS:
        raise E.ConfigError(f"unknown topic config {key[:200]!r} "
                            f"(supported: {', '.join(sorted([*TOPIC_CONFIGS, *FIXED_TOPIC_CONFIGS]))})")
    if value is None:
        raise E.ConfigError(f"config {key} has a null value")
    if key in _INT_MIN:
        text = value.strip()
        if not text.lstrip("-").isdigit() or int(text) < _INT_MIN[key] or int(text) > LONG_MAX:
            raise E.ConfigError(f"config {key}={value!r} must be an integer >= {_INT_MIN[key]}"
                                + (" (-1: unlimited)" if _INT_MIN[key] < 0 else ""))
        if key in ("max.compaction.lag.ms", "flush.ms", "flush.messages") and int(text) == LONG_MAX:
            return None  # Kafka's default: "no bound" (flush: the broker's policy)
        if key == "flush.messages":
            if int(text) != 1:
                raise E.ConfigError(f"config flush.messages={value!r}: only 1 (every record fsynced before it is "
                                    f"acknowledged) or {LONG_MAX} (by time: flush.ms) are taken here")
            return "always"
        return int(text)
    if key == "min.cleanable.dirty.ratio":
        try:
            ratio = float(value)
        except ValueError:
            ratio = -1.0
        if not 0 <= ratio <= 1:
            raise E.ConfigError(f"config min.cleanable.dirty.ratio={value!r} must be a number in 0..1")
        return ratio
    if key == "compression.type":
        if value not in _COMPRESSION:
            raise E.ConfigError(f"config compression.type={value!r}: topics are stored as "
                                f"{', '.join(_COMPRESSION)} (snappy batches are taken, not kept)")
        return _COMPRESSION[value]
    policies = {p.strip() for p in value.split(",")}  # cleanup.policy
    if not policies or not policies <= {"delete", "compact"}:
        raise E.ConfigError(f"config cleanup.policy={value!r} must be delete, compact or compact,delete")
    return ",".join(sorted(policies))


def topic_settings(configs: dict) -> dict:
    """create_topic's keyword arguments for CreateTopics' configs (ConfigError as ``parse``)."""
    kwargs = {}
    for key, value in configs.items():
        parsed = parse(key, value)
        if parsed is not None:
            kwargs[TOPIC_CONFIGS[key].setting] = parsed
    return kwargs


def _shown(key: str, value, ctx) -> str:
    if key == "compression.type":
        return value or "producer"
    if key == "max.message.bytes":
        return str(value or ctx.settings.max_message_bytes)
    if key == "cleanup.policy":
        return value or "delete"
    if key == "flush.messages":
        return "1" if value == "always" else str(LONG_MAX)
    if value is None:  # no limit: retention's -1, the others' "no bound"
        return str(LONG_MAX) if key in ("segment.ms", "max.compaction.lag.ms") else "-1"
    return str(value)


def topic_configs(ctx, topic) -> dict[str, tuple[str, int, list]]:
    """Every topic config: name -> (value in force, source, synonyms [(name, value, source)]),
    the topic's own setting first among the synonyms, then the broker's default."""
    defaults = ctx.broker.topic_defaults()
    own, cfg = topic.overrides, topic.config
    out = {}
    for key, spec in TOPIC_CONFIGS.items():
        default = (spec.broker, _shown(key, defaults[spec.setting], ctx), DEFAULT_CONFIG)
        if spec.setting in own:
            value = _shown(key, own[spec.setting], ctx)
            out[key] = (value, DYNAMIC_TOPIC_CONFIG, [(key, value, DYNAMIC_TOPIC_CONFIG), default])
        else:
            out[key] = (_shown(key, cfg.get(spec.setting), ctx), DEFAULT_CONFIG, [default])
    for key, value in FIXED_TOPIC_CONFIGS.items():
        out[key] = (value, DEFAULT_CONFIG, [])
    return out


def broker_configs(ctx) -> dict[str, tuple[str, int, int, str]]:
    """The broker's configs: name -> (value, source, type, doc), all read-only (the server's settings)."""
    st, static = ctx.settings, STATIC_BROKER_CONFIG
    always = st.flush == "always"
    topic = ctx.broker.topic_defaults()
    return {
        "broker.id": (str(ctx.node_id), static, INT, "This node's id (one node)."),
        "node.id": (str(ctx.node_id), static, INT, "This node's id (one node)."),
        "auto.create.topics.enable": (str(st.kafka_auto_create_topics).lower(), static, BOOLEAN,
                                      "The server's kafka_auto_create_topics."),
        "num.partitions": (str(st.kafka_num_partitions), static, INT, "The server's kafka_num_partitions."),
        "default.replication.factor": ("1", DEFAULT_CONFIG, INT, "One node: one replica."),
        "min.insync.replicas": ("1", DEFAULT_CONFIG, INT, "One node: one replica."),
        "delete.topic.enable": ("true", DEFAULT_CONFIG, BOOLEAN, "DeleteTopics deletes."),
        "message.max.bytes": (str(st.max_message_bytes), static, INT, "The server's max_message_bytes."),
        "log.retention.ms": (_shown("retention.ms", topic["retention_ms"], ctx), DEFAULT_CONFIG, LONG,
                             "A topic's retention.ms default (-1: unlimited)."),
        "log.retention.bytes": (_shown("retention.bytes", topic["retention_bytes"], ctx), DEFAULT_CONFIG, LONG,
                                "A topic's retention.bytes default (-1: unlimited)."),
        "log.segment.bytes": (str(topic["segment_bytes"]), DEFAULT_CONFIG, INT, "A topic's segment.bytes default."),
        "log.cleanup.policy": (topic["cleanup_policy"], DEFAULT_CONFIG, LIST, "A topic's cleanup.policy default."),
        "compression.type": (topic["compression"] or "producer", DEFAULT_CONFIG, STRING,
                             "A topic's compression.type default."),
        # the server's flush policy: always fsyncs each write, interval every flush_interval_ms
        "log.flush.interval.messages": ("1" if always else str((1 << 63) - 1), static, LONG,
                                        "The server's flush: 1 under flush=always."),
        "log.flush.interval.ms": (str(st.flush_interval_ms) if st.flush == "interval" else None, static, LONG,
                                  "The server's flush_interval_ms under flush=interval."),
        "group.min.session.timeout.ms": (str(st.kafka_group_min_session_timeout_ms), static, INT,
                                         "The server's kafka_group_min_session_timeout_ms."),
        "group.max.session.timeout.ms": (str(st.kafka_group_max_session_timeout_ms), static, INT,
                                         "The server's kafka_group_max_session_timeout_ms."),
        "connections.max.idle.ms": (str(int(st.kafka_idle_timeout_s * 1000)), static, LONG,
                                    "The server's kafka_idle_timeout_s."),
        "socket.request.max.bytes": (str(st.kafka_max_frame_bytes), static, INT,
                                     "The server's kafka_max_frame_bytes."),
        "sasl.enabled.mechanisms": (",".join(mechanisms_offered(ctx)), static, LIST,
                                    "What SaslHandshake offers: none without credentials."),
        "connections.max.reauth.ms": (str(st.kafka_connections_max_reauth_ms), static, LONG,
                                      "The server's kafka_connections_max_reauth_ms (0: sessions never end)."),
        "ssl.client.auth": (st.kafka_tls_client_auth if st.kafka_tls_client_ca else "none", static, STRING,
                            "Client certificates: the server's kafka_tls_client_auth with kafka_tls_client_ca."),
        "ssl.principal.mapping.rules": (st.kafka_tls_principal_mapping_rules, static, STRING,
                                        "The server's kafka_tls_principal_mapping_rules."),
        "sasl.oauthbearer.jwks.endpoint.url": (st.kafka_oauthbearer_jwks if is_endpoint(st.kafka_oauthbearer_jwks)
                                               else None, static, STRING,
                                               "The server's kafka_oauthbearer_jwks when it is an endpoint (a "
                                               "file's path is not shown)."),
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": (str(st.kafka_oauthbearer_jwks_refresh_ms), static, LONG,
                                                      "The server's kafka_oauthbearer_jwks_refresh_ms."),
    }


def _bad_broker_name(ctx, name: str) -> str | None:
    if name in ("", str(ctx.node_id)):
        return None
    return f"unexpected broker id {name!r}: this is one node, id {ctx.node_id} (or empty: the defaults)"


def _refused(ctx, conn, rtype: int, name: str, operation: int) -> tuple[int, str] | None:
    """(error, message) when the principal may not do ``operation`` (DESCRIBE_CONFIGS or
    ALTER_CONFIGS) on a config resource (a topic, the broker: the cluster, a group), as Kafka."""
    if rtype == TOPIC:
        kind, code = A.TOPIC, K.TOPIC_AUTHORIZATION_FAILED
    elif rtype == BROKER:
        kind, code, name = A.CLUSTER, K.CLUSTER_AUTHORIZATION_FAILED, A.CLUSTER_NAME
    elif rtype == GROUP_RESOURCE:
        kind, code = A.GROUP, K.GROUP_AUTHORIZATION_FAILED
    else:
        return None
    if A.allowed(ctx, conn, operation, kind, name):
        return None
    what = "DESCRIBE_CONFIGS" if operation == A.DESCRIBE_CONFIGS else "ALTER_CONFIGS"
    return code, f"{what} on {name!r} is not allowed"


async def describe_configs(ctx, conn, v, r):
    f = Flex(r, v >= 4)
    resources = []
    for _ in range(f.array_len(3)):
        rtype = r.int8()
        name = f.string()
        n = f.nullable_array_len(1)
        keys = None if n is None else [f.string() for _ in range(n)]
        f.tags()
        resources.append((rtype, name, keys))
    synonyms = r.boolean() if v >= 1 else False
    docs = r.boolean() if v >= 3 else False
    w = f.w_array(Writer().int32(0), len(resources))
    for rtype, name, keys in resources:
        # name -> (value, source, synonyms, type, doc)
        configs: dict[str, tuple] = {}
        err, msg = K.NONE, None
        refused = _refused(ctx, conn, rtype, name, A.DESCRIBE_CONFIGS)
        if refused:
            err, msg = refused
        elif rtype == TOPIC:
            try:
                for k, (val, src, syn) in topic_configs(ctx, ctx.broker.topic(name)).items():
                    spec = TOPIC_CONFIGS.get(k)
                    configs[k] = ((val, src, syn, spec.type, spec.doc) if spec else
                                  (val, src, syn, BOOLEAN, "Fixed here: every topic may be a share group's "
                                   "dead-letter topic."))
            except E.VQSError as e:
                err, msg = K.code_for(e), str(e)
        elif rtype == BROKER:
            msg = _bad_broker_name(ctx, name)
            if msg:
                err = K.INVALID_REQUEST
            else:
                configs = {k: (val, src, [(k, val, src)], t, doc)
                           for k, (val, src, t, doc) in broker_configs(ctx).items()}
        elif rtype == GROUP_RESOURCE:  # a group id's configs
            try:
                configs = {k: (val, src, [(k, val, src)], t, None)
                           for k, (val, src, t) in describe_group_configs(ctx, name).items()}
            except E.InvalidName as e:
                err, msg = K.INVALID_GROUP_ID, str(e)
        else:
            err, msg = K.INVALID_REQUEST, f"resource type {rtype} is not supported (topics, brokers, groups)"
        if keys is not None:
            configs = {k: configs[k] for k in keys if k in configs}
        w.int16(err)
        f.w_string(w, msg).int8(rtype)
        f.w_string(w, name)
        f.w_array(w, len(configs))
        for k, (val, src, syn, ctype, doc) in configs.items():
            f.w_string(w, k)
            # read-only: the broker's (the server's settings); a topic's and a group's may be altered
            f.w_string(w, val).boolean(rtype == BROKER)
            if v == 0:
                w.boolean(src == DEFAULT_CONFIG)  # is_default
            else:
                w.int8(src)
            w.boolean(False)  # sensitive: none is
            if v >= 1:
                f.w_array(w, len(syn) if synonyms else 0)
                for sname, sval, ssrc in syn if synonyms else ():
                    f.w_string(w, sname)
                    f.w_string(w, sval).int8(ssrc)
                    f.w_tags(w)
            if v >= 3:
                w.int8(ctype)
                f.w_string(w, doc if docs else None)
            f.w_tags(w)
        f.w_tags(w)
    return bytes(f.w_tags(w).b)


def _read_alter(r, f, incremental: bool) -> tuple[list, bool]:
    resources = []
    for _ in range(f.array_len(3)):
        rtype = r.int8()
        name = f.string()
        configs = []
        for _ in range(f.array_len(3)):
            key = f.string()
            op = r.int8() if incremental else SET
            configs.append((key, op, f.nullable_string()))
            f.tags()
        f.tags()
        resources.append((rtype, name, configs))
    return resources, r.boolean()


def _topic_changes(topic, configs: list, incremental: bool) -> dict:
    """The broker settings a request's configs for one topic change (None: back to the default);
    ConfigError (INVALID_CONFIG) or _BadRequest (INVALID_REQUEST) naming the config."""
    changes = {}
    for key, op, value in configs:
        if key in FIXED_TOPIC_CONFIGS:
            if op != SET:
                raise E.ConfigError(f"config {key} is always {FIXED_TOPIC_CONFIGS[key]} here")
            parse(key, value)  # raises unless the one value
            continue
        if key not in TOPIC_CONFIGS:
            parse(key, value)  # raises: an unknown name
        spec = TOPIC_CONFIGS[key]
        if op == SET:
            if value is None:
                raise _BadRequest(f"null value not supported for {key}" if incremental else
                                 f"config {key} has a null value")
            parsed = parse(key, value)
        elif op == DELETE:
            parsed = None
        elif op in (APPEND, SUBTRACT):
            if spec.type != LIST:
                raise E.ConfigError(f"config value {'append' if op == APPEND else 'subtract'} is not "
                                    f"allowed for config key {key} (not a list)")
            items = (topic.config.get("cleanup_policy") or "delete").split(",")  # the list in force
            for item in (value or "").split(","):
                item = item.strip()
                if op == APPEND and item and item not in items:
                    items.append(item)
                elif op == SUBTRACT and item in items:
                    items.remove(item)
            parsed = parse(key, ",".join(items))
        else:
            raise _BadRequest(f"unknown config operation {op} for {key}")
        changes[spec.setting] = parsed
    return changes


async def _alter(ctx, conn, r, f, incremental: bool) -> bytes:
    resources, validate_only = _read_alter(r, f, incremental)
    seen: dict = {}
    for rtype, name, _ in resources:
        seen[(rtype, name)] = seen.get((rtype, name), 0) + 1
    answers = []
    for rtype, name, configs in resources:
        err, msg = K.NONE, None
        keys = [k for k, _, _ in configs]
        refused = _refused(ctx, conn, rtype, name, A.ALTER_CONFIGS)
        if refused:
            err, msg = refused
        elif seen[(rtype, name)] > 1:
            err, msg = K.INVALID_REQUEST, f"resource {name!r} appears more than once in the request"
        elif incremental and len(set(keys)) != len(keys):
            err, msg = K.INVALID_REQUEST, f"duplicate config keys for {name!r}"
        elif rtype == BROKER:
            err, msg = K.INVALID_REQUEST, _bad_broker_name(ctx, name) or (
                "the broker's configs are the server's settings and cannot be updated dynamically: "
                + ", ".join(sorted(keys)))
        elif rtype == GROUP_RESOURCE:  # a group id's own configs
            err, msg = await ctx.blocking(alter_group_configs, ctx, name, configs, incremental,
                                          validate_only)
        elif rtype != TOPIC:
            err, msg = K.INVALID_REQUEST, f"resource type {rtype} is not supported (topics, brokers, groups)"
        else:
            try:
                changes = _topic_changes(ctx.broker.topic(name), configs, incremental)  # (unknown topic first)
                await ctx.blocking(lambda n=name, c=changes: ctx.broker.alter_topic(
                    n, c, replace=not incremental, validate_only=validate_only))
            except _BadRequest as e:
                err, msg = K.INVALID_REQUEST, str(e)
            except E.VQSError as e:
                err, msg = K.code_for(e), str(e)
                if isinstance(e, E.InvalidName):
                    err = K.UNKNOWN_TOPIC_OR_PARTITION
        answers.append((err, msg, rtype, name))
    w = f.w_array(Writer().int32(0), len(answers))
    for err, msg, rtype, name in answers:
        w.int16(err)
        f.w_string(w, msg).int8(rtype)
        f.w_string(w, name)
        f.w_tags(w)
    return bytes(f.w_tags(w).b)


async def alter_configs(ctx, conn, v, r):
    """AlterConfigs: a topic's own configs become exactly those given (the others return to
    their defaults), as Kafka's non-incremental AlterConfigs."""
    return await _alter(ctx, conn, r, Flex(r, v >= 2), incremental=False)


async def incremental_alter_configs(ctx, conn, v, r):
    """IncrementalAlterConfigs: SET, DELETE (back to the default), APPEND and SUBTRACT (list
    configs only) on the named configs; the others stay."""
    return await _alter(ctx, conn, r, Flex(r, v >= 1), incremental=True)
