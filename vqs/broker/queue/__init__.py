"""SQS-style queues: one message log plus durable lease state per queue.

Modules (each states its invariants):

* core.py         the public ``Queue`` (facade, lock, shared operations)
* opening.py      ``open_queue``: a stored queue opened as its type (standard or FIFO)
* standard.py     ``StandardQueue``: the standard receive strategy and its hot paths
* fifo.py         ``FifoQueue``: message groups, deduplication, FIFO delete rules
* fair.py         fair queues: a standard queue's tenants and the noisy-tenant rule
* leases.py       the lease table (``Lease`` entries, timers, state counts)
* send_buffer.py  buffered plain sends and the in-memory tail
* message.py      ``Message`` and the message record's headers
* validate.py     SQS's limits, message attributes, batch entries
* batch_entries.py  SQS's batch actions with per-entry results
* redrive.py      dead-letter moves, redrive
* move_tasks.py   message move tasks (``MoveTasks``), kept across restarts
* maintenance.py  expire, reclaim, compact
* peek.py         pending messages read without receiving them
* recovery.py     the lease table rebuilt at open
* settings.py     queue.json / queue.meta, queue attributes and tags

The queues of a data directory are made, opened and deleted by
vqs.broker.queue.registry.QueueRegistry.
"""

from .core import Queue
from .fifo import FifoQueue
from .message import Message
from .move_tasks import MoveTask, MoveTasks
from .opening import open_queue
from .peek import PeekedMessage
from .standard import StandardQueue

__all__ = ["FifoQueue", "Message", "MoveTask", "MoveTasks", "PeekedMessage", "Queue", "StandardQueue", "open_queue"]
