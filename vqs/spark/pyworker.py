"""Make Spark's reused Python workers cheaper to reuse.

PySpark runs a Python data source in pooled worker processes: one kind for
``load()`` (``create_data_source``), one for planning
(``plan_data_source_read``) and one per running task (``pyspark.worker``).
With ``spark.python.worker.reuse`` (the default) the daemon loop of
``pyspark.daemon`` runs a full ``gc.collect()`` in a worker after *every*
task it serves. A worker holds pyspark, pyarrow, numpy and vqs: some 45 000
objects the collector walks each time, for nothing, since they live as long as
the process. Measured in the Spark bench (1 M x 100 B, ``local[2]``, median of
15 queries): 0.10-0.17 s of Python CPU per query, more than the vqs read
itself; on a 2-core machine that CPU competes with the JVM's tasks.

:func:`settle` moves the objects alive at the first vqs call in a reused
worker to the collector's permanent generation (``gc.freeze()``), so the
per-task collection only walks what was created since. Reference counting
still frees those objects as usual; what a frozen object can no longer be is
collected as part of a garbage *cycle*, so the cycles alive at that one moment
(the current task's, a few kilobytes) are kept. Once per process; only in
processes Spark marks as reused workers (``SPARK_REUSE_WORKER``); turned off
by the environment variable ``VQS_SPARK_GC_FREEZE=0`` (set it for executors
with ``spark.executorEnv.VQS_SPARK_GC_FREEZE``).
"""

from __future__ import annotations

import gc
import os

_settled = False


def settle() -> bool:
    """Freeze the collector's current objects, once per reused Spark Python
    worker. Returns True if this call froze them."""
    global _settled
    if _settled:
        return False
    _settled = True
    if not os.environ.get("SPARK_REUSE_WORKER"):
        return False  # not a reused worker (the driver, tests, a one-shot worker)
    if os.environ.get("VQS_SPARK_GC_FREEZE", "1").strip().lower() in ("0", "false", "no"):
        return False
    gc.freeze()
    return True
