"""The API table and the cluster-level APIs: ApiVersions, Metadata, CreateTopics, DeleteTopics,
FindCoordinator, InitProducerId, SASL (configs: configs.py).

``API_TABLE`` maps an API key to (min version, max version, first flexible
version, handler); ApiVersions advertises exactly this table, so a client
never negotiates a version that has no handler (Produce 0-2's handler refuses
them: listed only for old clients' feature checks). This is one Kafka node
(node id 0) that leads every partition and coordinates every group; topics
are created with replication factor 1 (any other is refused).
"""

from __future__ import annotations

from ... import errors as E
from ...broker.catalog import validate_topic_settings
from ...broker.names import is_internal
from . import acls as A
from . import (
    admin,
    consumer_protocol,
    data,
    groups,
    logins,
    scram,
    share,
    share_groups,
    share_offsets,
    topic_ids,
)
from . import configs as configs_
from . import errors as K
from .codec import Writer
from .oauthbearer import MECHANISM as OAUTH_MECHANISM
from .oauthbearer import OAuthFailed, bearer_token
from .scram import BY_NAME as SCRAM_MECHANISMS
from .scram import ScramExchange, ScramFailed, mechanisms_offered

NO_FLEX = 1 << 15


async def api_versions(ctx, conn, v, r):
    if v >= 3:
        r.compact_string()  # client software name
        r.compact_string()
        r.tagged_fields()
    w = Writer().int16(0)
    if v >= 3:
        w.compact_array(len(API_TABLE))
        for key, (lo, hi, _, _) in sorted(API_TABLE.items()):
            w.int16(key).int16(lo).int16(hi).tags()
        w.int32(0).tags()
        return bytes(w.b)
    w.array(len(API_TABLE))
    for key, (lo, hi, _, _) in sorted(API_TABLE.items()):
        w.int16(key).int16(lo).int16(hi)
    if v >= 1:
        w.int32(0)
    return bytes(w.b)


def api_versions_error() -> bytes:
    """The v0 ApiVersions response with UNSUPPORTED_VERSION, as Kafka answers an unknown version."""
    w = Writer().int16(K.UNSUPPORTED_VERSION).array(len(API_TABLE))
    for key, (lo, hi, _, _) in sorted(API_TABLE.items()):
        w.int16(key).int16(lo).int16(hi)
    return bytes(w.b)


def _topic_names(r, v) -> list[str] | None:
    n = r.nullable_array_len(2)
    if n is None or (n == 0 and v == 0):
        return None
    return [r.string() for _ in range(n)]


async def metadata(ctx, conn, v, r):
    if v >= 9:
        return await topic_ids.metadata_flexible(ctx, conn, v, r)
    names = _topic_names(r, v)
    auto_create = r.boolean() if v >= 4 else True
    cluster_ops = r.boolean() if v >= 8 else False
    topic_ops = r.boolean() if v >= 8 else False
    broker = ctx.broker
    if names is None:  # all topics: VQS's internal ones (__spark_*) only when asked for by name
        names = [n for n in broker.topics()
                 if not is_internal(n) and A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, n)]
    w = Writer()
    if v >= 3:
        w.int32(0)
    w.array(1).int32(ctx.node_id).string(ctx.host).int32(ctx.port)
    if v >= 1:
        w.string(None)
    if v >= 2:
        w.string(ctx.cluster_id)
    if v >= 1:
        w.int32(ctx.node_id)
    w.array(len(names))
    for name in names:
        err, parts = K.NONE, 0
        try:
            if not A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, name):
                raise A.Refused(K.TOPIC_AUTHORIZATION_FAILED)
            parts = broker.topic(name).partitions
        except A.Refused as e:
            err = e.code
        except E.TopicDoesNotExist:
            err = K.UNKNOWN_TOPIC_OR_PARTITION
            if auto_create and ctx.settings.kafka_auto_create_topics and A.may_create_topic(ctx, conn, name):
                try:
                    parts = broker.create_topic(name, ctx.settings.kafka_num_partitions).partitions
                    err = K.NONE
                except E.TopicAlreadyExists:
                    parts = broker.topic(name).partitions
                    err = K.NONE
                except E.VQSError as e:
                    err = K.code_for(e)
        except E.VQSError as e:
            err = K.code_for(e)
        w.int16(err).string(name)
        if v >= 1:
            # VQS's internal topics (the Spark sink's __spark_*) are Kafka's internal topics:
            # clients leave them out of pattern subscriptions and listings (exclude.internal.topics)
            w.boolean(is_internal(name))
        w.array(parts)
        for p in range(parts):
            w.int16(0).int32(p).int32(ctx.node_id)
            if v >= 7:
                w.int32(0)
            w.array(1).int32(ctx.node_id).array(1).int32(ctx.node_id)
            if v >= 5:
                w.array(0)
        if v >= 8:
            w.int32(admin.authorized_operations(ctx, conn, A.TOPIC, name, topic_ops and not err))
    if v >= 8:
        w.int32(admin.authorized_operations(ctx, conn, A.CLUSTER, A.CLUSTER_NAME, cluster_ops))
    return bytes(w.b)


async def create_topics(ctx, conn, v, r):
    topics = []
    for _ in range(r.array_len(8)):
        name = r.string()
        parts = r.int32()
        rf = r.int16()
        assignments = [(r.int32(), [r.int32() for _ in range(r.array_len(4))]) for _ in range(r.array_len(8))]
        configs = {}
        for _ in range(r.array_len(4)):
            key = r.string()
            configs[key] = r.nullable_string()
        topics.append((name, parts, rf, configs, assignments))
    r.int32()  # timeout
    validate_only = r.boolean() if v >= 1 else False
    w = Writer()
    if v >= 2:
        w.int32(0)
    w.array(len(topics))
    for name, parts, rf, configs, assignments in topics:
        err, msg = K.NONE, None
        kwargs = {}
        if not A.may_create_topic(ctx, conn, name):
            err, msg = K.TOPIC_AUTHORIZATION_FAILED, "CREATE on the cluster or the topic is not allowed"
        else:
            try:
                kwargs = configs_.topic_settings(configs)
                validate_topic_settings(1, kwargs)  # the broker's own bounds, also under validate_only
            except E.ConfigError as e:
                err, msg = K.INVALID_CONFIG, str(e)
        if err:
            pass
        elif assignments:  # manual assignments, as Kafka: they give the partition count
            if parts != -1 or rf != -1:
                err, msg = K.INVALID_REQUEST, ("manual assignments are given with num_partitions and "
                                               "replication_factor -1")
            elif sorted(p for p, _ in assignments) != list(range(len(assignments))) or any(
                    b != [ctx.node_id] for _, b in assignments):
                err, msg = K.INVALID_REPLICA_ASSIGNMENT, (
                    f"this broker is one node (id {ctx.node_id}): partitions 0..n-1, each assigned "
                    f"[{ctx.node_id}]")
            else:
                parts, rf = len(assignments), 1
        if err:
            pass
        elif rf not in (-1, 1):
            err, msg = K.INVALID_REPLICATION_FACTOR, "this broker is one node: replication factor must be 1"
        elif parts == 0 or parts < -1:
            err, msg = K.INVALID_PARTITIONS, f"number of partitions must be positive, not {parts}"
        else:
            n = ctx.settings.kafka_num_partitions if parts == -1 else parts
            limit = ctx.settings.max_partitions_per_topic
            if n > limit:
                err, msg = K.INVALID_PARTITIONS, f"{n} partitions exceed max_partitions_per_topic ({limit})"
            elif validate_only:
                try:
                    ctx.broker.topic(name)
                    err, msg = K.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
                except E.TopicDoesNotExist:
                    pass
                except E.VQSError as e:
                    err, msg = K.code_for(e), str(e)
            else:
                try:
                    await ctx.blocking(lambda n=n, name=name, kw=kwargs: ctx.broker.create_topic(name, n, **kw))
                except E.VQSError as e:
                    err, msg = K.code_for(e), str(e)
        w.string(name).int16(err)
        if v >= 1:
            w.string(msg)
    return bytes(w.b)


async def delete_topics(ctx, conn, v, r):
    names = [r.string() for _ in range(r.array_len(2))]
    r.int32()
    w = Writer()
    if v >= 1:
        w.int32(0)
    w.array(len(names))
    for name in names:
        err = K.NONE
        try:
            if not A.allowed(ctx, conn, A.DELETE, A.TOPIC, name):
                raise A.Refused(K.TOPIC_AUTHORIZATION_FAILED)
            await ctx.blocking(ctx.broker.delete_topic, name)
        except A.Refused as e:
            err = e.code
        except E.VQSError as e:
            err = K.code_for(e)
        w.string(name).int16(err)
    return bytes(w.b)


async def find_coordinator(ctx, conn, v, r):
    """FindCoordinator 0-2: this node, for a group whose principal may DESCRIBE it (a
    transactional id is answered too: InitProducerId refuses transactions)."""
    key = r.string()
    key_type = r.int8() if v >= 1 else 0
    w = Writer()
    if v >= 1:
        w.int32(0)
    if key_type == 0 and not A.allowed(ctx, conn, A.DESCRIBE, A.GROUP, key):
        w.int16(K.GROUP_AUTHORIZATION_FAILED)
        if v >= 1:
            w.string("DESCRIBE on the group is not allowed")
        return bytes(w.int32(-1).string("").int32(-1).b)
    w.int16(K.NONE)
    if v >= 1:
        w.string(None)
    w.int32(ctx.node_id).string(ctx.host).int32(ctx.port)
    return bytes(w.b)


async def init_producer_id(ctx, conn, v, r):
    txn = r.nullable_string()
    r.int32()
    w = Writer().int32(0)
    if txn is not None:
        return bytes(w.int16(K.INVALID_REQUEST).int64(-1).int16(-1).b)  # no transactions
    if not (A.cluster_allowed(ctx, conn, A.IDEMPOTENT_WRITE) or A.allowed_on_any(ctx, conn, A.WRITE, A.TOPIC)):
        return bytes(w.int16(K.CLUSTER_AUTHORIZATION_FAILED).int64(-1).int16(-1).b)
    try:
        pid, epoch = await ctx.blocking(ctx.broker.producer_states.new_producer)
    except E.DiskFullError:
        # A new block of producer ids could not be written: what Kafka answers while no
        # id block is available (KIP-730); every client retries it (librdkafka, Java).
        return bytes(w.int16(K.COORDINATOR_LOAD_IN_PROGRESS).int64(-1).int16(-1).b)
    return bytes(w.int16(K.NONE).int64(pid).int16(epoch).b)


async def sasl_handshake(ctx, conn, v, r):
    """SaslHandshake: PLAIN (v0: raw SASL bytes follow; v1: SaslAuthenticate), SCRAM and
    OAUTHBEARER (v1)."""
    mech = r.string()
    offered = mechanisms_offered(ctx)
    ok = mech in offered and (v >= 1 or mech == "PLAIN")
    if ok:
        conn.mechanism = mech if v >= 1 else "PLAIN-v0"
        conn.scram = None
    w = Writer().int16(K.NONE if ok else K.UNSUPPORTED_SASL_MECHANISM).array(len(offered))
    for m in offered:
        w.string(m)
    return bytes(w.b)


async def sasl_authenticate(ctx, conn, v, r):
    """SaslAuthenticate: PLAIN in one round, SCRAM in two (client-first, client-final). A
    failure is answered, then the connection is closed (``failed_user``)."""
    auth = r.bytes_()
    w = Writer()
    out = b""
    if conn.mechanism == "PLAIN":
        why = logins.plain(conn, auth)
        w.int16(K.NONE if why is None else K.SASL_AUTHENTICATION_FAILED).string(why)
    elif conn.mechanism == OAUTH_MECHANISM:
        token = ""
        try:
            token = bearer_token(auth)
            why = logins.login(conn, *ctx.oauth.login(token))
            w.int16(K.NONE if why is None else K.SASL_AUTHENTICATION_FAILED).string(why)
        except OAuthFailed as e:
            conn.authenticated = False
            conn.failed_user = ctx.oauth.claimed_subject(token) if token else ""
            w.int16(K.SASL_AUTHENTICATION_FAILED).string(str(e))
    elif conn.mechanism in SCRAM_MECHANISMS:
        ex = conn.scram
        try:
            if ex is None:
                conn.scram = ex = ScramExchange(ctx.scram, conn.mechanism)
                out = ex.first(auth)
                w.int16(K.NONE).string(None)
            else:
                out = ex.final(auth)
                conn.scram = None
                why = logins.login(conn, "User:" + ex.user)
                if why is not None:
                    out = b""
                w.int16(K.NONE if why is None else K.SASL_AUTHENTICATION_FAILED).string(why)
        except ScramFailed as e:
            conn.authenticated = False
            conn.failed_user = (ex.user_named if ex is not None else "")[:64]
            w.int16(K.SASL_AUTHENTICATION_FAILED).string(str(e))
    else:
        w.int16(K.ILLEGAL_SASL_STATE).string("SaslHandshake first")
        conn.failed_user = ""  # a SaslAuthenticate out of order fails the connection too
    w.bytes_(out)
    if v >= 1:
        w.int64(conn.session_ms if conn.failed_user is None else 0)  # KIP-368's session lifetime
    return bytes(w.b)


API_TABLE: dict = {
    0: (0, 8, NO_FLEX, data.produce),  # 0-2 advertised for old librdkafka, refused on use
    1: (4, 11, NO_FLEX, data.fetch),
    2: (1, 10, 6, data.list_offsets),
    3: (0, 12, 9, metadata),
    8: (2, 9, 8, groups.offset_commit),
    9: (1, 9, 6, groups.offset_fetch),
    10: (0, 2, NO_FLEX, find_coordinator),
    11: (0, 5, NO_FLEX, groups.join_group),
    12: (0, 3, NO_FLEX, groups.heartbeat),
    13: (0, 3, NO_FLEX, groups.leave_group),
    14: (0, 3, NO_FLEX, groups.sync_group),
    15: (0, 4, NO_FLEX, groups.describe_groups),
    16: (0, 5, 3, groups.list_groups),
    17: (0, 1, NO_FLEX, sasl_handshake),
    18: (0, 3, 3, api_versions),
    19: (0, 4, NO_FLEX, create_topics),
    20: (0, 3, NO_FLEX, delete_topics),
    21: (0, 1, NO_FLEX, admin.delete_records),
    22: (0, 1, NO_FLEX, init_producer_id),
    23: (0, 4, 4, data.offset_for_leader_epoch),
    29: (0, 3, 2, A.describe_acls),
    30: (0, 3, 2, A.create_acls),
    31: (0, 3, 2, A.delete_acls),
    32: (0, 4, 4, configs_.describe_configs),
    33: (0, 2, 2, configs_.alter_configs),
    36: (0, 1, NO_FLEX, sasl_authenticate),
    37: (0, 1, NO_FLEX, admin.create_partitions),
    42: (0, 1, NO_FLEX, admin.delete_groups),
    44: (0, 1, 1, configs_.incremental_alter_configs),
    47: (0, 0, NO_FLEX, admin.offset_delete),
    50: (0, 0, 0, scram.describe_user_scram_credentials),
    51: (0, 0, 0, scram.alter_user_scram_credentials),
    60: (0, 0, 0, admin.describe_cluster),
    68: (0, 1, 0, consumer_protocol.consumer_group_heartbeat),
    69: (0, 1, 0, consumer_protocol.consumer_group_describe),
    76: (1, 1, 0, share_groups.share_group_heartbeat),
    77: (1, 1, 0, share_groups.share_group_describe),
    78: (1, 2, 0, share.share_fetch),
    79: (1, 2, 0, share.share_acknowledge),
    90: (0, 0, 0, share_offsets.describe_share_group_offsets),
    91: (0, 0, 0, share_offsets.alter_share_group_offsets),
    92: (0, 0, 0, share_offsets.delete_share_group_offsets),
}
