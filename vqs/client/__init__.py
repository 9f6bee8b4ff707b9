"""``vqs.Client``: the embedded API's shapes, over HTTP to a VQS server.

    client = vqs.Client("http://127.0.0.1:8642", token=None)
    client.create_topic("events", partitions=3)
    with client.producer() as p:
        p.send("events", b"hello", key=b"user-1")
    c = client.consumer("events", group="billing")
    for rec in c.poll(timeout=1.0): ...
    c.commit()
    q = client.create_queue("jobs", visibility_timeout=60)
    q.send("work"); [m] = q.receive(wait_seconds=5); q.delete(m.receipt_handle)

Produce and consume use the binary record-batch body (the log's own format);
on an ``http://`` URL the hot and JSON requests use one persistent socket per
thread (``lean``), the rest one ``httpx.Client`` made on first use, shared by
everything made from a Client. ``vqs.AsyncClient`` (``aio``) is the same
surface as coroutines. Errors come back as the embedded API's exceptions where one
exists (TopicDoesNotExist, QueueDoesNotExist, OffsetOutOfRange, ...), else as
``RemoteError`` with the server's status and code.

Modules: ``core`` (the Client facade), ``transport`` (HTTP, the keep-alive
pool and the hot path), ``error_map`` (error answers -> exceptions),
``topics`` (RemoteTopic, RemoteProducer), ``consumer`` (RemoteConsumer),
``queues`` (RemoteQueue, RemoteMessage), ``values`` (argument coercion),
``lean`` (the per-thread socket path), ``shapes`` (requests and answers without
I/O, shared by both clients), ``aio`` (AsyncClient), ``aio_consumer``,
``aio_idempotent``.
vqs.client sits beside vqs.hybrid above vqs.wire: it imports wire, broker,
storage and errors, never the server.
"""

from .consumer import RemoteConsumer
from .core import Client
from .queues import RemoteMessage, RemoteQueue
from .topics import RemoteProducer, RemoteTopic
from .transport import DEFAULT_URL

__all__ = ["DEFAULT_URL", "Client", "RemoteConsumer", "RemoteMessage", "RemoteProducer", "RemoteQueue",
           "RemoteTopic"]
