"""The broker layer: a data directory's topics, consumer groups and queues."""

from .broker import Broker
from .consumer import Consumer
from .names import is_internal, validate_name
from .partitioner import murmur2, partition_for_key
from .producer import Producer
from .topic import ConsumerRecord, PartitionLag, RecordMetadata, Topic, TopicPartition

__all__ = [
    "Broker",
    "Consumer",
    "ConsumerRecord",
    "PartitionLag",
    "Producer",
    "RecordMetadata",
    "Topic",
    "TopicPartition",
    "is_internal",
    "murmur2",
    "partition_for_key",
    "validate_name",
]
