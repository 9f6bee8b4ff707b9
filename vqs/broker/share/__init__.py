"""Share groups (Kafka's KIP-932): a topic read with queue semantics.

* partition.py  ``SharePartition``: one partition's acquisitions, locks, delivery counts and
                acknowledgements, kept by the queue lease engine (vqs.broker.queue)
* groups.py     ``ShareGroups``: members, the broker-side assignment, the share partitions
* consumer.py   ``ShareConsumer``: ``broker.share_consumer(topics, group)``, a member in-process
"""

from ...errors import InvalidRecordState
from .consumer import ShareConsumer, ShareRecord
from .groups import ShareGroups, ShareSettings
from .partition import ACCEPT, GAP, REJECT, RELEASE, RENEW, SharePartition

__all__ = ["ACCEPT", "GAP", "REJECT", "RELEASE", "RENEW", "InvalidRecordState", "ShareConsumer", "ShareGroups",
           "SharePartition", "ShareRecord", "ShareSettings"]
