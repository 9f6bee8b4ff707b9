"""SQS-style queues: one message log plus durable lease state per queue.

Modules (each states its invariants):

* core.py           the public ``Queue`` (facade, lock, shared operations)
* opening.py        ``open_queue``: a stored queue opened as its type (standard or FIFO)
* registry.py       ``QueueRegistry``: a data directory's queues (create, open, list, delete)
* standard.py       ``StandardQueue``: the standard receive strategy and its hot paths
* fifo.py           ``FifoQueue``: message groups, deduplication, FIFO delete rules
* fair.py           fair queues: a standard queue's tenants and the noisy-tenant rule
* dedup.py          the FIFO deduplication window
* message.py        ``Message``, the message record's headers, ``receive_state`` (a
                    receive's delay/expiry/visible rule), ``sent_at`` (what retention counts from)
* receipt.py        receipt handles: the codec, which alone knows the handle layout
* leases.py         the lease table (``Lease`` entries, timers, state counts)
* lease_state.py    the lease table's durable form: a state log plus a snapshot
* lease_records.py  the state log's records
* recovery.py       the lease table rebuilt at open
* send_buffer.py    buffered plain sends and the in-memory tail
* config.py         a queue's configuration: SQS attributes, their limits (one table),
                    storage settings
* config_files.py   the configuration stored: ``queue.meta`` and ``queue.json``
* settings.py       ``QueueSettings``: a queue's part that owns its configuration and
                    identity, changes them (attributes, tags) and writes them
* validate.py       SQS's limits on requests, message attributes, batch entries
* batch_entries.py  SQS's batch actions with per-entry results (functions over a queue)
* redrive.py        ``Mover``: dead-letter moves, redrive (a queue's part)
* move_tasks.py     message move tasks (``MoveTasks``), kept across restarts
* maintenance.py    ``Maintenance``: purge, expire, reclaim, compact (a queue's part)
* peek.py           pending messages read without receiving them (``read_pending``)

The queues of a data directory are made, opened and deleted by
``registry.QueueRegistry``.
"""

from .core import Queue
from .fifo import FifoQueue
from .message import Message
from .move_tasks import MoveTask, MoveTasks
from .opening import open_queue
from .peek import PeekedMessage
from .standard import StandardQueue

__all__ = ["FifoQueue", "Message", "MoveTask", "MoveTasks", "PeekedMessage", "Queue", "StandardQueue", "open_queue"]
