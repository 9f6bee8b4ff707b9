"""The layout of a data directory: the one place that names its files.

::

    DATA/
      .lock                      the owner's directory lock (storage.dir_lock): exclusive for
                                 a Broker or server, shared among Spark path-mode writers
      topics/
        {topic}/
          topic.json             {"name", "partitions", "config": {...}} (atomic replace)
          {p}/                   partition p: a Log directory (storage.log)
            producers.json       idempotent producers' sequences up to an offset (producer_state;
                                 atomic replace; written at close after a flush, only bounds a scan)
      groups/
        {group}/
          offsets.json           committed offsets {"topic": {"p": next_offset}} (atomic replace;
                                 with commit metadata or a leader epoch: {"offset", ...}, docs/FORMAT.md)
      queues/
        {queue}/                 one SQS-style queue (its inside: vqs.broker.queue)
        ~move-tasks.json         the message move tasks (vqs.broker.queue.move_tasks; atomic replace)
      share/
        {group}/{topic}/{p}/     a share group's delivery state of one partition (broker.share;
                                 a queue's state log and snapshot, vqs.broker.queue.lease_state)
      producer_ids               the next block of idempotent producer ids (producer_state; atomic replace)
      scram_credentials.json     the Kafka listener's SCRAM users (vqs.server.kafka.scram; atomic replace)
      kafka_acls.json            the Kafka listener's ACLs (vqs.server.kafka.acls; atomic replace)
      group_configs.json         group ids' own configs, Kafka's names (group_configs; atomic replace)
      spark/
        sinks/
          {queryId}/             Spark streaming sink, path mode: state.json + staged Arrow files

Invariants: every name above is fixed here; a ``~`` never occurs in a valid
topic, group or queue name (broker.names), so the catalog's staging names
(``{topic}~new``, ``{topic}~deleted``) never collide with them. Readers in
other processes (the Spark connector, ``vqs inspect``) compute the same paths
from these helpers, so the Broker and its readers cannot disagree.
"""

from __future__ import annotations

import os

from ..storage import LOCK_NAME

LOCK_FILE = LOCK_NAME
TOPICS = "topics"
GROUPS = "groups"
QUEUES = "queues"
SHARE = "share"
TOPIC_FILE = "topic.json"
OFFSETS_FILE = "offsets.json"
PRODUCER_IDS_FILE = "producer_ids"
SCRAM_FILE = "scram_credentials.json"
ACLS_FILE = "kafka_acls.json"
GROUP_CONFIGS_FILE = "group_configs.json"
PRODUCER_SNAPSHOT_FILE = "producers.json"  # in a partition's log directory
MOVE_TASKS_FILE = "~move-tasks.json"  # in the queue registry's directory; "~": never a queue name
SPARK_SINKS = os.path.join("spark", "sinks")
#: what may stand at the top of a data directory: a directory holding any of them is VQS's
TOP_LEVEL = frozenset({LOCK_FILE, TOPICS, GROUPS, QUEUES, SHARE, PRODUCER_IDS_FILE, SCRAM_FILE, ACLS_FILE,
                       GROUP_CONFIGS_FILE, "spark"})
#: names a directory may hold and still be a new data directory: a filesystem's root (a disk of
#: its own mounted for the data) holds lost+found
NOT_DATA = frozenset({"lost+found"})


def someone_elses(entries) -> bool:
    """Do ``entries`` (a directory's listing) say the directory is another program's: files,
    none of them a data directory's (``TOP_LEVEL``)? Such a directory is never adopted as a data
    directory (the server and the CLI refuse it: a mistyped path)."""
    names = set(entries) - NOT_DATA
    return bool(names) and TOP_LEVEL.isdisjoint(names)


def topics_dir(data_dir: str) -> str:
    """``DATA/topics``: the topic catalog."""
    return os.path.join(data_dir, TOPICS)


def groups_dir(data_dir: str) -> str:
    """``DATA/groups``: committed offsets of consumer groups."""
    return os.path.join(data_dir, GROUPS)


def queues_dir(data_dir: str) -> str:
    """``DATA/queues``: the queue registry."""
    return os.path.join(data_dir, QUEUES)


def share_dir(data_dir: str) -> str:
    """``DATA/share``: share groups' delivery state (vqs.broker.share)."""
    return os.path.join(data_dir, SHARE)


def topic_dir(data_dir: str, topic: str) -> str:
    """``DATA/topics/{topic}``."""
    return os.path.join(data_dir, TOPICS, topic)


def topic_file(topic_directory: str) -> str:
    """``{topic directory}/topic.json`` (also of a staged ``{topic}~new``)."""
    return os.path.join(topic_directory, TOPIC_FILE)


def partition_dir(topic_directory: str, partition: int) -> str:
    """``{topic directory}/{p}``: partition ``p``'s Log directory."""
    return os.path.join(topic_directory, str(partition))


def offsets_file(group_directory: str) -> str:
    """``{group directory}/offsets.json``."""
    return os.path.join(group_directory, OFFSETS_FILE)


def spark_sink_dir(data_dir: str, query: str) -> str:
    """``DATA/spark/sinks/{queryId}``: a path-mode streaming sink's state and staged files."""
    return os.path.join(data_dir, SPARK_SINKS, query)


def producer_ids_file(data_dir: str) -> str:
    """DATA/producer_ids"""
    return os.path.join(data_dir, PRODUCER_IDS_FILE)


def producer_snapshot_file(partition_directory: str) -> str:
    """DATA/topics/{topic}/{p}/producers.json"""
    return os.path.join(partition_directory, PRODUCER_SNAPSHOT_FILE)


def scram_credentials_file(data_dir: str) -> str:
    """``DATA/scram_credentials.json``: SASL/SCRAM users of the Kafka listener."""
    return os.path.join(data_dir, SCRAM_FILE)


def kafka_acls_file(data_dir: str) -> str:
    """``DATA/kafka_acls.json``: the Kafka listener's ACLs."""
    return os.path.join(data_dir, ACLS_FILE)


def group_configs_file(data_dir: str) -> str:
    """``DATA/group_configs.json``: the group ids' own configs (group_configs.py)."""
    return os.path.join(data_dir, GROUP_CONFIGS_FILE)
