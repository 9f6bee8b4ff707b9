"""Share groups (Kafka's KIP-932): a topic read with queue semantics.

* partition.py  ``SharePartition``: one partition's acquisitions, locks, delivery counts and
                acknowledgements, kept by the queue lease engine (vqs.broker.queue)
* groups.py     ``ShareGroups``: members, the broker-side assignment, the share partitions
"""

from .groups import ShareGroups, ShareSettings
from .partition import ACCEPT, GAP, REJECT, RELEASE, RENEW, InvalidRecordState, SharePartition

__all__ = [
           "ACCEPT",
           "GAP",
           "REJECT",
           "RELEASE",
           "RENEW",
           "InvalidRecordState",
           "ShareGroups",
           "SharePartition",
           "ShareSettings",
]
