"""A Kafka wire-protocol listener (``vqs serve --kafka-port PORT``), sharing the server's Broker.

Modules: codec.py (wire primitives), records.py (Kafka v2 record batches <->
VQS columns), listener.py (asyncio server, framing, SASL/PLAIN, dispatch),
apis.py (the API table and cluster APIs), data.py (Produce, Fetch,
ListOffsets), groups.py (group APIs over vqs/broker/coordinator.py).
Supported APIs and versions: docs/kafka.md.
"""

from .listener import KafkaListener

__all__ = ["KafkaListener"]
