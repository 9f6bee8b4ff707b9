"""The REST API: one router per concept, assembled by ``build_router``.

    conventions.py  names, JSON responses, query integers, the ready broker
    models.py       the JSON request bodies (pydantic) and their limits
    ops.py          /health, /health/live, /health/ready, /metrics
    topics.py       /topics: list, create, describe, delete, offsets
    messages.py     /topics/{topic}/messages (produce, consume; JSON and
                    application/vnd.vqs.batch) and /wait
    produce.py      the produce route's core: the body's checks and the append
                    (shared with the HTTP fast path)
    groups.py       /groups: consumer groups' offsets and lag
    producers.py    /producers (ids for idempotent produce requests) and the
                    query parameters of an idempotent produce
    queues.py       /queues: SQS-style queues
    share.py        /share-groups: share groups' members and records in flight

JSON for people; ``application/vnd.vqs.batch`` (vqs/wire.py) for speed on the
produce and consume paths. Route modules import conventions and models, never
each other (messages.py takes ``idempotent_producer`` from producers.py as a
parameter of ``message_routes``, handed over here).
"""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter

from ..context import ServerContext
from .groups import group_routes
from .messages import consume_messages, message_routes
from .ops import ops_routes
from .produce import produce_messages
from .producers import idempotent_producer, producer_routes
from .queues import queue_routes
from .share import share_routes
from .topics import topic_routes

__all__ = ["build_router", "consume_messages", "produce_messages"]


def build_router(ctx: ServerContext) -> APIRouter:
    r = APIRouter()
    messages = partial(message_routes, idempotent=idempotent_producer)
    for routes in (ops_routes, topic_routes, messages, group_routes, queue_routes, producer_routes, share_routes):
        r.include_router(routes(ctx))
    return r
