"""VQS's log cleaner: compaction of a log's sealed segments (Kafka's
``cleanup.policy=compact``), a service over storage's logs as Kafka's LogCleaner is over
its logs. It reads sealed segments and writes one ``.cleaned`` file per group through
storage's public surface; storage owns the crash-safe swap that puts the file in place.

The public surface: every layer above imports from ``vqs.cleaner`` only (an import-linter
contract).
"""

from .clean import CleanStats, CompactionSettings, check_rate, clean_log

__all__ = ["CleanStats", "CompactionSettings", "check_rate", "clean_log"]
