"""REST for idempotent producers: ``POST /producers`` hands out a producer id, and the
query parameters that make a produce request idempotent.

A client (``vqs.Client(...).producer(idempotent=True)``) asks once for a
producer id and epoch, then sends every produce request to one partition with
``?partition=P&producer_id=I&producer_epoch=E&sequence=S``: S is the sequence
of the request's first record, and the next request to P carries S + (its
record count). The server appends through the broker's producer state
(broker/idempotent.py): a retried request that was appended already is not
appended again and is answered with its original offsets (200, as Kafka
answers a duplicate with success); a gap is 409 ``out_of_order_sequence``,
an older epoch 409 ``producer_fenced``, an id never handed out 400
``unknown_producer_id``.

Invariants: ids are never handed out twice in a data directory (not across
restarts either); the state that recognises a duplicate is kept in the log's
batch headers, so it survives a restart with the data (and is lost with the
records a crash under flush="interval"/"never" loses: then the retry is
appended, once).
"""

from __future__ import annotations

from fastapi import APIRouter

from ..context import ServerContext
from ..errors import APIError
from .conventions import JSONRoute, jresp, query_int, ready_broker
from .models import PRODUCE_QUERY

#: The query parameters of an idempotent produce request (besides ``partition``).
PARAMS = ("producer_id", "producer_epoch", "sequence")


def idempotent_producer(ctx: ServerContext, topic: str, query):
    """The IdempotentProducer for a produce request whose query carries ``producer_id``
    (None without it): every one of PARAMS and ``partition`` are then required."""
    if query.get("producer_id") is None:
        return None
    from ...broker.idempotent import IdempotentProducer

    for name in (*PARAMS, "partition"):
        if query.get(name) in (None, ""):
            raise APIError(400, "invalid_argument",
                           f"an idempotent produce needs query parameters {', '.join(PARAMS)} and partition; "
                           f"{name} is missing", field=name)
    pid, epoch, seq, partition = (query_int(query, name, None, *PRODUCE_QUERY[name][:2])
                                  for name in (*PARAMS, "partition"))
    return IdempotentProducer.resume(ready_broker(ctx), pid, epoch, topic, partition, seq)


def producer_routes(ctx: ServerContext) -> APIRouter:
    r = APIRouter(tags=["topics"], route_class=JSONRoute)

    @r.post("/producers", summary="A producer id for idempotent produce requests", status_code=201,
            description="Returns `{\"producer_id\", \"epoch\"}`: an id never handed out before by this data "
                        "directory. Produce requests that carry it with `producer_epoch`, a per-partition "
                        "`sequence` and `partition` are appended once however often they are retried.")
    async def new_producer():
        states = ready_broker(ctx).producer_states
        pid, epoch = await ctx.run(states.new_producer)  # may write DATA/producer_ids (fsync)
        return jresp({"producer_id": pid, "epoch": epoch}, status=201)

    return r
