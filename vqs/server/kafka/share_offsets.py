"""Share-group offset admin APIs: DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91),
DeleteShareGroupOffsets (92).

Version 0 of each (flexible), over the broker's share partitions
(vqs.broker.share.groups): a share partition's offset is its *start offset*
(every record below it is settled; -1 for a partition the group has no state
of yet). Alter sets it (clamped to the topic log's start..end) and forgets
the records in flight there; Delete drops the group's state of a topic, so
the next fetch starts where ``share.auto.offset.reset`` says. Both need the
group to have no members (NON_EMPTY_GROUP otherwise), as Kafka's; both are
durable when answered. Every request is bounded by the frame size and the
codec's array checks; the work runs off the listener's loop.
"""

from __future__ import annotations

from ... import errors as E
from . import acls as A
from . import errors as K
from .codec import Writer
from .share_groups import shares
from .topic_ids import topic_id

_NO_EPOCH = 0  # one broker leads every partition at epoch 0 (Metadata)


def _error(e: BaseException) -> tuple[int, str]:
    if isinstance(e, E.GroupNotEmpty):
        return K.NON_EMPTY_GROUP, str(e)
    if isinstance(e, E.InvalidName):
        return K.INVALID_GROUP_ID, str(e)
    return K.code_for(e), str(e)


# ---------------------------------------------------------------------- describe

async def describe_share_group_offsets(ctx, conn, v, r):
    groups = []
    for _ in range(r.compact_array_len(2)):
        group = r.compact_string() or ""
        n = r.compact_nullable_array_len(2)
        topics = None
        if n is not None:
            topics = []
            for _ in range(n):
                name = r.compact_string() or ""
                topics.append((name, [r.int32() for _ in range(r.compact_array_len(4))]))
                r.tagged_fields()
        r.tagged_fields()
        groups.append((group, topics))
    r.tagged_fields()
    sg = shares(ctx)

    def work(group, topics):
        """(group error, message, [(topic, [(partition, start, error, message)])])."""
        if not A.allowed(ctx, conn, A.DESCRIBE, A.GROUP, group):
            return K.GROUP_AUTHORIZATION_FAILED, "DESCRIBE on the share group is not allowed", []
        try:
            if sg.describe(group) is None:
                return K.GROUP_ID_NOT_FOUND, f"share group {group!r} not found", []
        except E.VQSError as e:
            return (*_error(e), [])
        if topics is None:  # every partition the group has state of
            by_topic: dict = {}
            for t, p in sg.stored_partitions(group):
                by_topic.setdefault(t, []).append(p)
            topics = [(t, ps) for t, ps in sorted(by_topic.items()) if A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, t)]
        out = []
        for t, ps in topics:
            rows = []
            for p in ps:
                if not A.allowed(ctx, conn, A.DESCRIBE, A.TOPIC, t):
                    rows.append((p, -1, K.TOPIC_AUTHORIZATION_FAILED, "DESCRIBE on the topic is not allowed"))
                    continue
                try:
                    rows.append((p, sg.start_offset(group, t, p), K.NONE, None))
                except E.VQSError as e:
                    rows.append((p, -1, *_error(e)))
            out.append((t, rows))
        return K.NONE, None, out

    w = Writer().int32(0).compact_array(len(groups))
    for group, topics in groups:
        err, msg, rows = await ctx.blocking(work, group, topics)
        w.compact_string(group).compact_array(len(rows))
        for t, parts in rows:
            w.compact_string(t)
            w.b += topic_id(ctx.broker, t)
            w.compact_array(len(parts))
            for p, start, perr, pmsg in parts:
                w.int32(p).int64(start).int32(_NO_EPOCH).int16(perr).compact_string(pmsg).tags()
            w.tags()
        w.int16(err).compact_string(msg).tags()
    return bytes(w.tags().b)


# ---------------------------------------------------------------------- alter

async def alter_share_group_offsets(ctx, conn, v, r):
    group = r.compact_string() or ""
    topics = []
    for _ in range(r.compact_array_len(3)):
        name = r.compact_string() or ""
        parts = []
        for _ in range(r.compact_array_len(13)):
            parts.append((r.int32(), r.int64()))
            r.tagged_fields()
        r.tagged_fields()
        topics.append((name, parts))
    r.tagged_fields()
    sg = shares(ctx)

    def work():
        if not A.allowed(ctx, conn, A.READ, A.GROUP, group):
            return K.GROUP_AUTHORIZATION_FAILED, "READ on the share group is not allowed", []
        try:
            if not group:
                raise E.InvalidName("a group id is required")
            sg.check_empty(group)  # a group not known yet is made, as Kafka's
        except E.VQSError as e:
            return (*_error(e), [])
        out = []
        for t, parts in topics:
            rows = []
            for p, start in parts:
                if not A.allowed(ctx, conn, A.READ, A.TOPIC, t):
                    rows.append((p, K.TOPIC_AUTHORIZATION_FAILED, "READ on the topic is not allowed"))
                    continue
                try:
                    if start < 0:
                        raise E.ConfigError(f"start offset {start} of {t}-{p} is negative")
                    sg.broker.topic(t).log(p)
                    sg.alter_start_offset(group, t, p, start)
                    rows.append((p, K.NONE, None))
                except E.GroupNotEmpty as e:
                    return (*_error(e), [])
                except E.ConfigError as e:
                    rows.append((p, K.INVALID_REQUEST, str(e)))
                except E.VQSError as e:
                    rows.append((p, *_error(e)))
            out.append((t, rows))
        return K.NONE, None, out

    err, msg, rows = await ctx.blocking(work)
    w = Writer().int32(0).int16(err).compact_string(msg)
    _topic_rows(w, ctx.broker, rows)
    return bytes(w.tags().b)


def _topic_rows(w, broker, rows) -> None:
    w.compact_array(len(rows))
    for t, parts in rows:
        w.compact_string(t)
        w.b += topic_id(broker, t)
        w.compact_array(len(parts))
        for p, err, msg in parts:
            w.int32(p).int16(err).compact_string(msg).tags()
        w.tags()


# ---------------------------------------------------------------------- delete

async def delete_share_group_offsets(ctx, conn, v, r):
    group = r.compact_string() or ""
    names = []
    for _ in range(r.compact_array_len(2)):
        names.append(r.compact_string() or "")
        r.tagged_fields()
    r.tagged_fields()
    sg = shares(ctx)

    def work():
        if not A.allowed(ctx, conn, A.DELETE, A.GROUP, group):
            return K.GROUP_AUTHORIZATION_FAILED, "DELETE on the share group is not allowed", []
        try:
            if sg.describe(group) is None:
                return K.GROUP_ID_NOT_FOUND, f"share group {group!r} not found", []
            sg.check_empty(group)
            out = []
            for t in names:
                if not A.allowed(ctx, conn, A.READ, A.TOPIC, t):
                    out.append((t, [(0, K.TOPIC_AUTHORIZATION_FAILED, "READ on the topic is not allowed")]))
                    continue
                try:
                    n = sg.broker.topic(t).partitions
                except E.VQSError as e:
                    out.append((t, [(0, *_error(e))]))
                    continue
                deleted = set(sg.delete_offsets(group, t))
                out.append((t, [(p, K.NONE, None) for p in range(n) if p in deleted]))
            return K.NONE, None, out
        except E.VQSError as e:
            return (*_error(e), [])

    err, msg, rows = await ctx.blocking(work)
    w = Writer().int32(0).int16(err).compact_string(msg)
    _topic_rows(w, ctx.broker, rows)
    return bytes(w.tags().b)

