"""The running Spark task, as the writers see it.

One function, looked up as a module global by each writer, so a unit test can
monkeypatch it in the module of the writer it drives.
"""

from __future__ import annotations


def task_info() -> dict:
    """Partition id, attempt, streaming query id and batch id of the running task
    (all defaults outside a task: partition 0, no query, no batch)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return {"partition": 0, "attempt": 0, "query": None, "batch": None}
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return {
        "partition": ctx.partitionId(),
        "attempt": ctx.attemptNumber(),
        "query": ctx.getLocalProperty("sql.streaming.queryId"),
        "batch": None if batch is None else int(batch),
    }
